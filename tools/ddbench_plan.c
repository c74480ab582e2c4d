/*
 * ddbench plan PROFILE_DIR [--H N] [--json]: the planner on a profile in the
 * DreamDDP artifact's format. Prints the schedule and the modeled seconds
 * per iteration of S-SGD, full Local SGD, uniform partial Local SGD and
 * dreamddp. The JSON form is accepted by schedsim.py as a schedule.
 * Frozen modules (a backward time, no comm time) are no layer: like
 * schedsim.py, every figure adds their backward time to each iteration,
 * and none of it hides a sync.
 *
 * Both cost models: the same-iteration one (plan.h; schedsim.py's), and the
 * deadline model of delayed averaging ("+next", deadline.c), with its own
 * schedule. --forward F gives each layer a forward of F x its backward
 * (in every figure; only the deadline model hides syncs behind it);
 * --workers, --aggregators, --bandwidth and --compression derive the sync
 * times from the profile's sizes: BytePS's time 2n(n-1)M / ((n^2+kn-2k)B)
 * for M bytes on the wire (M halved by fp16 and bf16). --streams N models
 * N channels sharing the NIC (plan.h's N-channel model): the deadline
 * model's figures change with N; the same-iteration ones cannot, since the
 * NIC stays busy while any sync waits, so the last sync of an iteration
 * lands when it would on one channel.
 */
#include "core/json_write.h"
#include "ddbench.h"
#include "profile_read.h"
#include "sched/plan/plan.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ddbench_plan_usage(FILE *out)
{
    fprintf(out,
            "usage: ddbench plan PROFILE_DIR [--H N] [--bytes-per-second B] "
            "[--json]\n"
            "  --H N                   window length in iterations (default "
            "10)\n"
            "  --bytes-per-second B    for a profile without comm times: "
            "derive\n"
            "                          them from its sizes at this allreduce "
            "rate\n"
            "  --forward F             each layer's forward is F x its "
            "backward (default 0)\n"
            "  --deadline D            forward (default: a mark before each "
            "layer's\n"
            "                          forward) or backward (its next "
            "backward)\n"
            "  --bandwidth B           derive sync times from the sizes: "
            "links of B\n"
            "                          bytes/s, with --workers N (default "
            "4),\n"
            "                          --aggregators K (default 0) and "
            "--compression\n"
            "                          C (none, fp16 or bf16; default none)\n"
            "  --launch L              the deadline model's launches: early "
            "(default;\n"
            "                          a sync leaves once its layer's "
            "parameters are\n"
            "                          the step's) or backward (after the "
            "layer's backward)\n"
            "  --streams N             channels sharing the NIC, 1 to 8 "
            "(default 1)\n"
            "  --json                  one JSON object: H, schedule, "
            "modeled, and\n"
            "                          the deadline model's next\n"
            "  --save FILE             write the schedule as DREAMDDP_PLAN "
            "takes it\n"
            "                          (the profile's names and sizes, "
            "--workers)\n");
}

/* --save FILE: the schedule as DREAMDDP_PLAN takes it (the format of
 * src/sched/planfile.c), for a model whose layers are the profile's: its
 * names, and f32 sizes from its sizes file. */
static int ddbench_plan_save(const char *path, const dd_profile_t *p,
                             const dd_plan_t *plan, long workers)
{
    FILE *f;
    if (p->num_params == NULL) {
        fprintf(stderr, "ddbench plan: --save needs the profile's sizes\n");
        return -1;
    }
    if ((f = fopen(path, "w")) == NULL) {
        fprintf(stderr, "ddbench plan: --save: cannot write %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    fprintf(f,
            "dreamddp-plan 1\nstrategy dreamddp:%u\nworkers %ld\nwindow "
            "%u\nlayers %zu\n",
            plan->window, workers, plan->window, plan->num_layers);
    for (size_t l = 0; l < plan->num_layers; l++) {
        fprintf(f, "layer %llu %u ",
                (unsigned long long)(p->num_params[l] * sizeof(float)),
                plan->slot[l]);
        for (unsigned w = 0; w < plan->window; w++) {
            fputc(plan->sync[(size_t)w * plan->num_layers + l] ? '1' : '0', f);
        }
        fprintf(f, " %s\n", p->names[l]);
    }
    return fclose(f) == 0 ? 0 : -1;
}

typedef struct {
    double ssgd, flsgd, plsgd, dreamddp;
    /* The deadline model: the same-iteration schedule, its own, and the
     * baselines with +next; compute: forward and backward per iteration. */
    double same_next, dreamddp_next, flsgd_next, plsgd_next, compute;
} ddbench_modeled_t;

typedef struct {
    double forward;
    dd_plan_deadline_t deadline;
    double bandwidth, ratio;
    long workers, aggregators;
    unsigned streams;
    int launch_early;
} ddbench_plan_opts_t;

dd_status_t ddbench_plan_cost(const dd_plan_input_t *in,
                              dd_status_t (*make)(size_t, unsigned,
                                                  dd_plan_t **),
                              unsigned h, double land_s, double *iter_s)
{
    dd_plan_t *plan;
    dd_plan_cost_t cost;
    dd_status_t status = make(in->num_layers, h, &plan);
    if (status == DD_OK) {
        status = dd_plan_cost_landing(in, plan, land_s, &cost);
        dd_plan_free(plan);
        *iter_s = cost.iter_s;
    }
    return status;
}

/* A baseline's time under the deadline model. */
static dd_status_t
ddbench_plan_next(const dd_plan_input_t *in,
                  dd_status_t (*make)(size_t, unsigned, dd_plan_t **),
                  unsigned h, dd_plan_delay_t delay, double *iter_s)
{
    dd_plan_t *plan;
    dd_plan_cost_t cost;
    dd_status_t status = make(in->num_layers, h, &plan);
    if (status == DD_OK) {
        status = dd_plan_cost_delayed(in, plan, &delay, &cost);
        dd_plan_free(plan);
        *iter_s = cost.iter_s;
    }
    return status;
}

/* The deadline model's figures, and its schedule in *next_p. */
static dd_status_t ddbench_plan_model_next(const dd_plan_input_t *in,
                                           unsigned h, const dd_plan_t *plan,
                                           const dd_plan_delay_t *delay,
                                           ddbench_modeled_t *m,
                                           dd_plan_t **next_p)
{
    dd_plan_cost_t cost;
    dd_plan_delay_t at_end = *delay;
    dd_status_t status;

    at_end.launch_at_end = 1;
    if ((status = dd_plan_cost_delayed(in, plan, delay, &cost)) ||
        (m->same_next = cost.iter_s,
         status =
             ddbench_plan_next(in, dd_plan_flsgd, h, at_end, &m->flsgd_next)) ||
        (status =
             ddbench_plan_next(in, dd_plan_plsgd, h, *delay, &m->plsgd_next)) ||
        (status = dd_plan_dreamddp_delayed(in, h, NULL, delay, next_p))) {
        return status;
    }
    status = dd_plan_cost_delayed(in, *next_p, delay, &cost);
    m->dreamddp_next = cost.iter_s;
    return status;
}

static dd_status_t ddbench_plan_model(const dd_plan_input_t *in, unsigned h,
                                      const dd_plan_t *plan, double frozen_s,
                                      const dd_plan_delay_t *delay,
                                      double forward, ddbench_modeled_t *m,
                                      dd_plan_t **next_p)
{
    dd_plan_cost_t cost;
    dd_status_t status;
    double fw = 0, bp = 0;

    for (size_t i = 0; i < in->num_layers; i++) {
        fw += delay->fp_s[i];
        bp += in->bp_s[i];
    }
    /* Frozen modules run forward too; they hide no sync in either model. */
    frozen_s *= 1 + forward;
    m->compute = fw + bp + frozen_s;
    status = ddbench_plan_model_next(in, h, plan, delay, m, next_p);
    if (status != DD_OK) {
        return status;
    }
    m->same_next += frozen_s;
    m->dreamddp_next += frozen_s;
    m->flsgd_next += frozen_s;
    m->plsgd_next += frozen_s;
    frozen_s += fw;

    if ((status = ddbench_plan_cost(in, dd_plan_ssgd, 1, 0, &m->ssgd)) ||
        (status = ddbench_plan_cost(in, dd_plan_plsgd, h, 0, &m->plsgd)) ||
        (status = dd_plan_flsgd_cost(in, h, &cost))) {
        return status;
    }
    m->flsgd = cost.iter_s;
    status = dd_plan_cost(in, plan, &cost);
    m->dreamddp = cost.iter_s;
    m->ssgd += frozen_s;
    m->flsgd += frozen_s;
    m->plsgd += frozen_s;
    m->dreamddp += frozen_s;
    return status;
}

/* A layer's slots: its primary slot first, then the extra ones; n is
 * their number (at most max). */
static int ddbench_plan_slots(const dd_plan_t *plan, size_t l, unsigned *slots,
                              int max)
{
    int n = 0;

    slots[n++] = plan->slot[l];
    for (unsigned it = 0; it < plan->window && n < max; it++) {
        if (it != plan->slot[l] && dd_plan_syncs(plan, it, l)) {
            slots[n++] = it;
        }
    }
    return n;
}

/* {layer: slot or [slots]} */
static void ddbench_plan_json_schedule(dd_json_writer_t *wp,
                                       const dd_profile_t *p,
                                       const dd_plan_t *plan)
{
    unsigned slots[1024];
    dd_json_object_begin(wp, DD_JSON_COMPACT);
    for (size_t l = 0; l < p->num_layers; l++) {
        int n = ddbench_plan_slots(plan, l, slots, 1024);
        dd_json_key(wp, p->names[l]);
        if (n == 1) {
            dd_json_uint(wp, slots[0]);
            continue;
        }
        dd_json_array_begin(wp, DD_JSON_COMPACT);
        for (int i = 0; i < n; i++) {
            dd_json_uint(wp, slots[i]);
        }
        dd_json_array_end(wp);
    }
    dd_json_object_end(wp);
}

/* The JSON form: {"H":h,"schedule":{layer:slot or [slots]},"modeled":...,
 * "next":{"forward":F,"deadline":D,"schedule":...,"modeled":...}}. */
static void ddbench_plan_json(const dd_profile_t *p, const dd_plan_t *plan,
                              const dd_plan_t *next, unsigned h,
                              const ddbench_plan_opts_t *o,
                              const ddbench_modeled_t *m)
{
    dd_json_writer_t w;

    dd_json_writer_init(&w, stdout, 0);
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    dd_json_key(&w, "H");
    dd_json_uint(&w, h);
    dd_json_key(&w, "schedule");
    ddbench_plan_json_schedule(&w, p, plan);
    if (p->num_frozen > 0) {
        dd_json_key(&w, "frozen");
        dd_json_object_begin(&w, DD_JSON_COMPACT);
        dd_json_key(&w, "modules");
        dd_json_uint(&w, p->num_frozen);
        dd_json_key(&w, "bp_s");
        dd_json_fixed(&w, p->frozen_bp_s, 6);
        dd_json_object_end(&w);
    }
    dd_json_key(&w, "modeled");
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    dd_json_key(&w, "ssgd");
    dd_json_fixed(&w, m->ssgd, 6);
    dd_json_key(&w, "flsgd");
    dd_json_fixed(&w, m->flsgd, 6);
    dd_json_key(&w, "plsgd");
    dd_json_fixed(&w, m->plsgd, 6);
    dd_json_key(&w, "dreamddp");
    dd_json_fixed(&w, m->dreamddp, 6);
    dd_json_object_end(&w);
    dd_json_key(&w, "next");
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    dd_json_key(&w, "forward");
    dd_json_double(&w, o->forward);
    dd_json_key(&w, "deadline");
    dd_json_string(&w, o->deadline == DD_PLAN_DEADLINE_FORWARD ? "forward"
                                                               : "backward");
    dd_json_key(&w, "streams");
    dd_json_uint(&w, o->streams);
    dd_json_key(&w, "launch");
    dd_json_string(&w, o->launch_early ? "early" : "backward");
    dd_json_key(&w, "schedule");
    ddbench_plan_json_schedule(&w, p, next);
    dd_json_key(&w, "modeled");
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    dd_json_key(&w, "compute");
    dd_json_fixed(&w, m->compute, 6);
    dd_json_key(&w, "flsgd");
    dd_json_fixed(&w, m->flsgd_next, 6);
    dd_json_key(&w, "plsgd");
    dd_json_fixed(&w, m->plsgd_next, 6);
    dd_json_key(&w, "dreamddp_same_plan");
    dd_json_fixed(&w, m->same_next, 6);
    dd_json_key(&w, "dreamddp");
    dd_json_fixed(&w, m->dreamddp_next, 6);
    dd_json_object_end(&w);
    dd_json_object_end(&w);
    dd_json_object_end(&w);
    putchar('\n');
}

/* A layer's slots for the table: "3", or "3,7 (extra)". */
static void ddbench_plan_slots_text(const dd_plan_t *plan, size_t l, char *buf,
                                    size_t size)
{
    unsigned slots[1024];
    int n = ddbench_plan_slots(plan, l, slots, 1024);
    size_t o = 0;

    for (int i = 0; i < n && o < size; i++) {
        o +=
            (size_t)snprintf(buf + o, size - o, "%s%u", i ? "," : "", slots[i]);
    }
    if (n > 1 && o < size) {
        snprintf(buf + o, size - o, " (extra)");
    }
}

/* What of an iteration is exposed communication (beyond forward and
 * backward); rounding can leave a hair below 0. */
static double ddbench_plan_exposed(double iter_s, double compute_s)
{
    return iter_s > compute_s ? iter_s - compute_s : 0.0;
}

/* The deadline model's figures: per iteration, and what of it is exposed
 * communication (beyond forward and backward). */
static void ddbench_plan_print_next(const ddbench_plan_opts_t *o,
                                    const ddbench_modeled_t *m)
{
    char channels[64] = "";

    if (o->streams > 1) {
        snprintf(channels, sizeof(channels), "; %u channels sharing the NIC",
                 o->streams);
    }
    printf("\n# deadline model (+next: a sync lands by the layer's next %s; "
           "forward %g x backward%s; launches %s)\n",
           o->deadline == DD_PLAN_DEADLINE_FORWARD ? "forward" : "backward",
           o->forward, channels, o->launch_early ? "early" : "after backward");
    printf("%-24s %10s %10s\n", "", "s/iter", "exposed");
    printf("%-24s %10.6f %10.6f\n", "flsgd+next", m->flsgd_next,
           ddbench_plan_exposed(m->flsgd_next, m->compute));
    printf("%-24s %10.6f %10.6f\n", "plsgd+next", m->plsgd_next,
           ddbench_plan_exposed(m->plsgd_next, m->compute));
    printf("%-24s %10.6f %10.6f\n", "dreamddp+next (same plan)", m->same_next,
           ddbench_plan_exposed(m->same_next, m->compute));
    printf("%-24s %10.6f %10.6f\n", "dreamddp+next", m->dreamddp_next,
           ddbench_plan_exposed(m->dreamddp_next, m->compute));
    printf("dreamddp+next exposed / flsgd exposed = %.3f (flsgd: %.6f "
           "s/iter exposed, same-iteration model)\n",
           ddbench_plan_exposed(m->dreamddp_next, m->compute) /
               ddbench_plan_exposed(m->flsgd, m->compute),
           ddbench_plan_exposed(m->flsgd, m->compute));
}

static void ddbench_plan_print(const dd_profile_t *p, const dd_plan_t *plan,
                               const dd_plan_t *next, unsigned h,
                               const ddbench_plan_opts_t *o,
                               const ddbench_modeled_t *m, int json)
{
    char slots[4096], slots_next[4096];

    if (json) {
        ddbench_plan_json(p, plan, next, h, o, m);
        return;
    }
    printf("# dreamddp schedule, H = %u, %zu layers (backward order)\n", h,
           p->num_layers);
    dd_plan_input_t in = {p->num_layers, p->bp_s, p->comm_s};
    size_t k = dd_plan_groups(&in);
    if (k < p->num_layers) {
        printf("# planned as %zu groups of consecutive layers (over %d "
               "layers are too many to plan one by one)\n",
               k, DD_PLAN_EXACT_LAYERS);
    }
    printf("%-40s %10s %10s  %-12s %s\n", "layer", "bp_ms", "comm_ms", "slot",
           "slot+next");
    for (size_t l = p->num_layers; l-- > 0;) {
        ddbench_plan_slots_text(plan, l, slots, sizeof(slots));
        ddbench_plan_slots_text(next, l, slots_next, sizeof(slots_next));
        printf("%-40s %10.3f %10.3f  %-12s %s\n", p->names[l], p->bp_s[l] * 1e3,
               p->comm_s[l] * 1e3, slots, slots_next);
    }
    if (p->num_frozen > 0) {
        printf("# %zu frozen modules (no comm time): %.3f ms of backward per "
               "iteration, in every figure below, hiding no sync\n",
               p->num_frozen, p->frozen_bp_s * 1e3);
    }
    printf("\n# modeled seconds per iteration\n");
    printf("%-10s %10.6f\n%-10s %10.6f\n%-10s %10.6f\n%-10s %10.6f\n", "ssgd",
           m->ssgd, "flsgd", m->flsgd, "plsgd", m->plsgd, "dreamddp",
           m->dreamddp);
    printf("dreamddp / flsgd = %.3f, dreamddp / plsgd = %.3f\n",
           m->dreamddp / m->flsgd, m->dreamddp / m->plsgd);
    ddbench_plan_print_next(o, m);
}

/* --deadline's value. */
static int ddbench_plan_deadline(const char *s, dd_plan_deadline_t *d)
{
    if (strcmp(s, "forward") == 0) {
        *d = DD_PLAN_DEADLINE_FORWARD;
    } else if (strcmp(s, "backward") == 0) {
        *d = DD_PLAN_DEADLINE_BACKWARD;
    } else {
        fprintf(stderr,
                "ddbench plan: --deadline takes forward or backward, not "
                "'%s'\n",
                s);
        return -1;
    }
    return 0;
}

/* --compression's wire size per f32 byte. */
static int ddbench_plan_ratio(const char *s, double *ratio)
{
    if (strcmp(s, "none") == 0) {
        *ratio = 1.0;
    } else if (strcmp(s, "fp16") == 0 || strcmp(s, "bf16") == 0) {
        *ratio = 0.5;
    } else {
        fprintf(stderr,
                "ddbench plan: --compression takes none, fp16 or bf16, not "
                "'%s'\n",
                s);
        return -1;
    }
    return 0;
}

double ddbench_byteps_share(double n, double k)
{
    return k >= n ? 1.0 : 2 * n * (n - 1) / (n * n + k * n - 2 * k);
}

/* Sync times from the sizes: BytePS's split between k aggregators and the
 * n workers' own summation, as the effective rate of one byte's sync. */
static dd_status_t ddbench_plan_comm(dd_profile_t *p,
                                     const ddbench_plan_opts_t *o)
{
    if (o->workers < 2) {
        fprintf(stderr, "ddbench plan: --workers must be at least 2 with "
                        "--bandwidth\n");
        return DD_ERR_INVALID_PARAM;
    }
    double rate = o->bandwidth / ddbench_byteps_share((double)o->workers,
                                                      (double)o->aggregators);
    return dd_profile_comm_from_sizes(p, 0.0, rate / o->ratio);
}

int ddbench_plan_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"H", required_argument, 0, 'H'},
        {"bytes-per-second", required_argument, 0, 'b'},
        {"forward", required_argument, 0, 'f'},
        {"deadline", required_argument, 0, 'd'},
        {"bandwidth", required_argument, 0, 'B'},
        {"workers", required_argument, 0, 'n'},
        {"aggregators", required_argument, 0, 'k'},
        {"compression", required_argument, 0, 'C'},
        {"streams", required_argument, 0, 'S'},
        {"launch", required_argument, 0, 'L'},
        {"json", no_argument, 0, 'j'},
        {"save", required_argument, 0, 's'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *save = NULL;
    int json = 0, opt;
    double bytes_per_s = 0;
    long h = 10;
    ddbench_plan_opts_t o = {.deadline = DD_PLAN_DEADLINE_FORWARD,
                             .ratio = 1.0,
                             .workers = 4,
                             .streams = 1,
                             .launch_early = 1};
    long streams = 1;
    static const char *const P = "ddbench plan";

    optind = 1;
    while ((opt = getopt_long(argc, argv, "H:jh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'H':
            if (dd_arg_long("ddbench plan", "--H", optarg, 1, 1024, &h)) {
                return 2;
            }
            break;
        case 'b':
            if (dd_arg_double("ddbench plan", "--bytes-per-second", optarg, 0,
                              1e15, &bytes_per_s)) {
                return 2;
            }
            break;
        case 'f':
            if (dd_arg_double(P, "--forward", optarg, 0, 1e3, &o.forward)) {
                return 2;
            }
            break;
        case 'd':
            if (ddbench_plan_deadline(optarg, &o.deadline)) {
                return 2;
            }
            break;
        case 'B':
            if (dd_arg_double(P, "--bandwidth", optarg, 1, 1e15,
                              &o.bandwidth)) {
                return 2;
            }
            break;
        case 'n':
            if (dd_arg_long(P, "--workers", optarg, 1, 100000, &o.workers)) {
                return 2;
            }
            break;
        case 'k':
            if (dd_arg_long(P, "--aggregators", optarg, 0, 100000,
                            &o.aggregators)) {
                return 2;
            }
            break;
        case 'C':
            if (ddbench_plan_ratio(optarg, &o.ratio)) {
                return 2;
            }
            break;
        case 'S':
            if (dd_arg_long(P, "--streams", optarg, 1, DD_PLAN_MAX_CHANNELS,
                            &streams)) {
                return 2;
            }
            o.streams = (unsigned)streams;
            break;
        case 'L':
            if (strcmp(optarg, "early") != 0 &&
                strcmp(optarg, "backward") != 0) {
                fprintf(stderr,
                        "ddbench plan: --launch '%s': expected early or "
                        "backward\n",
                        optarg);
                return 2;
            }
            o.launch_early = strcmp(optarg, "early") == 0;
            break;
        case 'j':
            json = 1;
            break;
        case 's':
            save = optarg;
            break;
        case 'h':
            ddbench_plan_usage(stdout);
            return 0;
        default:
            ddbench_plan_usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        ddbench_plan_usage(stderr);
        return 2;
    }
    dd_profile_t *p;
    dd_plan_t *plan = NULL, *next = NULL;
    dd_plan_input_t in;
    ddbench_modeled_t m;
    double *fp = NULL;
    dd_status_t status = dd_profile_read(argv[optind], &p);
    if (status != DD_OK) {
        return 1; /* dd_profile_read reported why */
    }
    if (o.bandwidth > 0) {
        status = ddbench_plan_comm(p, &o);
    } else if (p->comm_s == NULL && bytes_per_s > 0) {
        status = dd_profile_comm_from_sizes(p, 0.0, bytes_per_s);
    }
    if (status == DD_OK && (status = dd_profile_plan_input(p, &in)) == DD_OK &&
        (fp = calloc(in.num_layers, sizeof(*fp))) == NULL) {
        status = DD_ERR_NO_MEMORY;
    }
    for (size_t i = 0; fp != NULL && i < in.num_layers; i++) {
        fp[i] = o.forward * in.bp_s[i];
    }
    dd_plan_delay_t delay = {fp,        o.deadline,    0, NULL, NULL,
                             o.streams, o.launch_early};
    if (status == DD_OK &&
        (status = dd_plan_dreamddp(&in, (unsigned)h, NULL, &plan)) == DD_OK &&
        (status = ddbench_plan_model(&in, (unsigned)h, plan, p->frozen_bp_s,
                                     &delay, o.forward, &m, &next)) == DD_OK) {
        ddbench_plan_print(p, plan, next, (unsigned)h, &o, &m, json);
        if (save != NULL && ddbench_plan_save(save, p, plan, o.workers) != 0) {
            status = DD_ERR_IO;
        }
    } else {
        fprintf(stderr, "ddbench plan: %s: %s\n", argv[optind],
                dd_status_string(status));
    }
    dd_plan_free(plan);
    dd_plan_free(next);
    free(fp);
    dd_profile_free(p);
    return status == DD_OK ? 0 : 1;
}
