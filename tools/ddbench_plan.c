/*
 * ddbench plan PROFILE_DIR [--H N] [--json]: the planner on a profile in the
 * DreamDDP artifact's format. Prints the schedule and the modeled seconds
 * per iteration of S-SGD, full Local SGD, uniform partial Local SGD and
 * dreamddp. The JSON form is accepted by schedsim.py as a schedule.
 * Frozen modules (a backward time, no comm time) are no layer: like
 * schedsim.py, every figure adds their backward time to each iteration,
 * and none of it hides a sync.
 */
#include "core/json_write.h"
#include "ddbench.h"
#include "profile_read.h"
#include "sched/plan.h"

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
            "  --json                  one JSON object: H, schedule, "
            "modeled\n");
}

typedef struct {
    double ssgd, flsgd, plsgd, dreamddp;
} ddbench_modeled_t;

static dd_status_t ddbench_plan_cost(const dd_plan_input_t *in,
                                     dd_status_t (*make)(size_t, unsigned,
                                                         dd_plan_t **),
                                     unsigned h, double *iter_s)
{
    dd_plan_t *plan;
    dd_plan_cost_t cost;
    dd_status_t status = make(in->num_layers, h, &plan);
    if (status == DD_OK) {
        status = dd_plan_cost(in, plan, &cost);
        dd_plan_free(plan);
        *iter_s = cost.iter_s;
    }
    return status;
}

static dd_status_t ddbench_plan_model(const dd_plan_input_t *in, unsigned h,
                                      const dd_plan_t *plan, double frozen_s,
                                      ddbench_modeled_t *m)
{
    dd_plan_cost_t cost;
    dd_status_t status;

    if ((status = ddbench_plan_cost(in, dd_plan_ssgd, 1, &m->ssgd)) ||
        (status = ddbench_plan_cost(in, dd_plan_plsgd, h, &m->plsgd)) ||
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

/* The JSON form: {"H":h,"schedule":{layer:slot or [slots]},"modeled":...}. */
static void ddbench_plan_json(const dd_profile_t *p, const dd_plan_t *plan,
                              unsigned h, const ddbench_modeled_t *m)
{
    unsigned slots[1024];
    dd_json_writer_t w;

    dd_json_writer_init(&w, stdout, 0);
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    dd_json_key(&w, "H");
    dd_json_uint(&w, h);
    dd_json_key(&w, "schedule");
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    for (size_t l = 0; l < p->num_layers; l++) {
        int n = ddbench_plan_slots(plan, l, slots, 1024);
        dd_json_key(&w, p->names[l]);
        if (n == 1) {
            dd_json_uint(&w, slots[0]);
            continue;
        }
        dd_json_array_begin(&w, DD_JSON_COMPACT);
        for (int i = 0; i < n; i++) {
            dd_json_uint(&w, slots[i]);
        }
        dd_json_array_end(&w);
    }
    dd_json_object_end(&w);
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

static void ddbench_plan_print(const dd_profile_t *p, const dd_plan_t *plan,
                               unsigned h, const ddbench_modeled_t *m, int json)
{
    char slots[4096];

    if (json) {
        ddbench_plan_json(p, plan, h, m);
        return;
    }
    printf("# dreamddp schedule, H = %u, %zu layers (backward order)\n", h,
           p->num_layers);
    printf("%-40s %10s %10s  %s\n", "layer", "bp_ms", "comm_ms", "slot");
    for (size_t l = p->num_layers; l-- > 0;) {
        ddbench_plan_slots_text(plan, l, slots, sizeof(slots));
        printf("%-40s %10.3f %10.3f  %s\n", p->names[l], p->bp_s[l] * 1e3,
               p->comm_s[l] * 1e3, slots);
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
}

int ddbench_plan_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"H", required_argument, 0, 'H'},
        {"bytes-per-second", required_argument, 0, 'b'},
        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int json = 0, opt;
    double bytes_per_s = 0;
    long h = 10;

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
        case 'j':
            json = 1;
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
    dd_plan_t *plan = NULL;
    dd_plan_input_t in;
    ddbench_modeled_t m;
    dd_status_t status = dd_profile_read(argv[optind], &p);
    if (status != DD_OK) {
        return 1; /* dd_profile_read reported why */
    }
    if (p->comm_s == NULL && bytes_per_s > 0) {
        status = dd_profile_comm_from_sizes(p, 0.0, bytes_per_s);
    }
    if (status == DD_OK && (status = dd_profile_plan_input(p, &in)) == DD_OK &&
        (status = dd_plan_dreamddp(&in, (unsigned)h, NULL, &plan)) == DD_OK &&
        (status = ddbench_plan_model(&in, (unsigned)h, plan, p->frozen_bp_s,
                                     &m)) == DD_OK) {
        ddbench_plan_print(p, plan, (unsigned)h, &m, json);
    } else {
        fprintf(stderr, "ddbench plan: %s: %s\n", argv[optind],
                dd_status_string(status));
    }
    dd_plan_free(plan);
    dd_profile_free(p);
    return status == DD_OK ? 0 : 1;
}
