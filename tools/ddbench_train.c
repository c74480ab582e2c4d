/*
 * ddbench train-sim: the real library and network on an emulated model.
 * One layer per profile entry (sizes from the profile times --scale), each
 * layer's backward emulated by sleeping its profiled time times
 * --time-scale, so that only communication is real. Prints the measured and
 * the modeled seconds per iteration; --check fills the layers with
 * rank-dependent values before each step and verifies every layer a step
 * syncs against the exact average, and that every layer is synced once per
 * window. Frozen modules of the profile (a backward time, no comm time)
 * register no layer; their backward is slept where it runs, so it lands in
 * the interval of the layer marked next, as in a real job, while the
 * modeled figure counts it as schedsim.py does (time that hides no sync).
 * --forward F emulates forward too, as FORWARD=F does in torch_sim.py:
 * each layer's forward sleeps F times its backward time, in forward
 * order, after the layer's dd_layer_forward mark (the deadline of its
 * delayed average under a "+next" strategy). --step-work does to memory
 * what a PyTorch training loop does with every step (torch_sim.py's, or a
 * model under the front end): zero_grad writes every gradient, backward
 * accumulates each layer's new gradient into it before the layer is marked
 * ready, and the optimizer's SGD step (lr 0, as torch_sim.py's) reads the
 * parameters and gradients and writes the parameters, after dd_step_end;
 * so that the front end can be timed against the same CPU work without
 * the binding. --streams N runs the job with N streams
 * (DREAMDDP_NUM_STREAMS), so N engine channels, and models N channels
 * sharing the NIC (plan.h).
 */
#include "api/context.h"
#include "core/json_write.h"
#include "ddbench.h"
#include "profile_read.h"
#include "sched/plan/plan.h"
#include "sched/sched.h"

#include <dreamddp/introspect.h>

#include <dirent.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *profile, *strategy;
    const char *compression; /* NULL: DREAMDDP_COMPRESSION */
    long iters, warmup, cols;
    long commit_every; /* 0: no dd_elastic_commit */
    double scale, time_scale, bytes_per_s, forward;
    int check, json, step_work;
    int no_marks; /* --deadline backward: no dd_layer_forward marks */
    int streams;  /* the count the ranks agreed on, after dd_init */
} ddbench_train_opts_t;

typedef struct {
    dd_context_h ctx;
    dd_profile_t *p;
    size_t n;
    size_t *count;
    float **param, **grad;
    float *new_grad; /* --step-work: the gradient backward accumulates */
    dd_layer_h *layer;
    int grads, none, delay;
    int rank, workers;
    uint64_t *window_syncs;
} ddbench_sim_t;

static void ddbench_train_usage(FILE *out)
{
    fprintf(out,
            "usage: ddbench train-sim --profile DIR --strategy S [--iters N]\n"
            "         [--warmup N] [--scale X] [--time-scale T] [--check] "
            "[--json]\n"
            "         [--bytes-per-second B] [--compression C] [--cols N]\n"
            "         [--forward F] [--deadline forward|backward] "
            "[--streams N]\n"
            "         [--commit-every K]\n"
            "  S: ddp, localsgd:H, plsgd:H, dreamddp:H (each of the last "
            "three also\n"
            "     with +next: delayed averaging), adaptive, or none (no "
            "sync)\n"
            "  --forward F: each layer's forward sleeps F x its backward "
            "time (default 0)\n"
            "  --deadline D: +next's deadline, forward (dd_layer_forward "
            "before each\n"
            "     layer's forward; default) or backward (no marks: the next "
            "backward)\n"
            "  --streams N: connections per peer and engine channels, 1 to 8 "
            "(DREAMDDP_NUM_STREAMS\n"
            "     for the run); the model takes as many channels (one under "
            "+next)\n"
            "  C: none, fp16, bf16, topk:RATIO, powersgd:RANK "
            "(dd_compression_set;\n"
            "     --check needs none)\n"
            "  --cols N: layers of at least N elements are matrices of N "
            "columns (their\n"
            "     count rounded down to whole rows), which powersgd "
            "factors; default 0:\n"
            "     vectors (torch_sim.py uses 768, GPT-2's width)\n"
            "  --step-work: a training loop's own memory work each step "
            "(zero the\n"
            "     gradients, accumulate each layer's, an SGD step with lr 0), "
            "which the\n"
            "     modeled time does not count; not with --check\n"
            "  --commit-every K: dd_elastic_commit after every K-th step, "
            "timed with it\n"
            "     (under DREAMDDP_ELASTIC=yes; nothing otherwise)\n");
}

static void ddbench_sleep(double s)
{
    if (s <= 0) {
        return;
    }
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static float ddbench_value(int rank, size_t l, long it, size_t i)
{
    return (float)(rank * 8 + (int)(l % 5) * 3 + (int)(it % 5) + (int)(i % 7));
}

static void ddbench_fill(ddbench_sim_t *s, long it)
{
    for (size_t l = 0; l < s->n; l++) {
        float *buf = s->grads ? s->grad[l] : s->param[l];
        for (size_t i = 0; i < s->count[l]; i++) {
            buf[i] = ddbench_value(s->rank, l, it, i);
        }
    }
}

static int ddbench_is_average(ddbench_sim_t *s, size_t l, long it)
{
    const float *buf = s->grads ? s->grad[l] : s->param[l];
    for (size_t i = 0; i < s->count[l]; i++) {
        double want = 0;
        for (int r = 0; r < s->workers; r++) {
            want += ddbench_value(r, l, it, i);
        }
        want /= s->workers;
        if (fabs(buf[i] - want) > 1e-5 * (1 + fabs(want))) {
            fprintf(stderr,
                    "ddbench: rank %d: step %ld layer %s element %zu is %g, "
                    "the average is %g\n",
                    s->rank, it, s->p->names[l], i, buf[i], want);
            return 0;
        }
    }
    return 1;
}

/* Checks the layers step it synced, and the window's coverage. A delayed
 * average counts once it landed, in the step after its launch: it holds
 * average + local change (tests/mp/mp_delay.c checks that), and the window's
 * coverage is checked a step later. */
static int ddbench_verify(ddbench_sim_t *s, long it, const uint64_t *before,
                          unsigned window)
{
    long shift = s->delay ? 1 : 0;

    dd_layer_stats_t st = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS |
                                         DD_LAYER_STATS_FIELD_WIRE_S};
    int ok = 1;

    for (size_t l = 0; l < s->n; l++) {
        dd_layer_stats(s->ctx, s->layer[l], &st);
        if (st.syncs > before[l] && s->count[l] > 0 && !s->delay) {
            ok &= ddbench_is_average(s, l, it);
        }
        if (window > 1 && (it + 1 - shift) % window == 0 && it >= shift) {
            if (st.syncs <= s->window_syncs[l]) {
                fprintf(stderr,
                        "ddbench: rank %d: layer %s was not synced in the "
                        "window ending at step %ld\n",
                        s->rank, s->p->names[l], it - shift);
                ok = 0;
            }
            s->window_syncs[l] = st.syncs;
        }
    }
    return ok;
}

/* Forward in forward order: frozen modules before the first layer of
 * forward are those after the last one of backward, and those after layer
 * l are the ones backward runs before it. */
static dd_status_t ddbench_forward(ddbench_sim_t *s,
                                   const ddbench_train_opts_t *o)
{
    const double *frozen = s->p->frozen_before_s;
    double f = o->forward * o->time_scale;
    dd_status_t status = DD_OK;

    ddbench_sleep(s->p->frozen_after_s * f);
    for (size_t l = 0; status == DD_OK && l < s->n; l++) {
        if (s->delay && !o->no_marks) {
            status = dd_layer_forward(s->ctx, s->layer[l]);
        }
        ddbench_sleep((s->p->bp_s[l] + (frozen ? frozen[l] : 0)) * f);
    }
    return status;
}

/* After dd_sync_all, every replica is bit-identical to the first
 * worker's. */
static int ddbench_identical(ddbench_sim_t *s)
{
    int ok = dd_sync_all(s->ctx) == DD_OK;
    for (size_t l = 0; ok && l < s->n; l++) {
        size_t n = s->count[l];
        float *copy = malloc((n ? n : 1) * sizeof(float));
        ok = copy != NULL;
        if (ok) {
            memcpy(copy, s->param[l], n * sizeof(float));
            ok = dd_broadcast(s->ctx, copy, n, DD_DTYPE_F32, 0, DD_MEM_HOST) ==
                     DD_OK &&
                 memcmp(copy, s->param[l], n * sizeof(float)) == 0;
        }
        if (!ok) {
            fprintf(stderr,
                    "ddbench: rank %d: after dd_sync_all layer %s differs "
                    "from the first worker's\n",
                    s->rank, s->p->names[l]);
        }
        free(copy);
    }
    return ok;
}

/* --step-work's SGD learning rate: 0, as torch_sim.py's, read at run
 * time so that the step's reads and writes are made. */
static volatile float ddbench_lr = 0.0f;

/* --step-work's optimizer step: p -= lr * g over every layer. */
static void ddbench_sgd(ddbench_sim_t *s)
{
    float lr = ddbench_lr;
    for (size_t l = 0; l < s->n; l++) {
        float *p = s->param[l];
        const float *g = s->grad[l];
        for (size_t i = 0; i < s->count[l]; i++) {
            p[i] -= lr * g[i];
        }
    }
}

static dd_status_t ddbench_step(ddbench_sim_t *s, const ddbench_train_opts_t *o,
                                dd_step_stats_t *st)
{
    dd_status_t status = s->none ? DD_OK : dd_step_begin(s->ctx);
    const double *frozen = s->p->frozen_before_s;
    for (size_t l = 0; o->step_work && l < s->n; l++) {
        memset(s->grad[l], 0, s->count[l] * sizeof(float)); /* zero_grad */
    }
    if (status == DD_OK) {
        status = ddbench_forward(s, o);
    }
    for (size_t l = s->n; status == DD_OK && l-- > 0;) {
        ddbench_sleep(((frozen ? frozen[l] : 0) + s->p->bp_s[l]) *
                      o->time_scale);
        for (size_t i = 0; o->step_work && i < s->count[l]; i++) {
            s->grad[l][i] += s->new_grad[i]; /* the gradient's accumulation */
        }
        if (!s->none) {
            status = dd_layer_ready(s->ctx, s->layer[l]);
        }
    }
    ddbench_sleep(s->p->frozen_after_s * o->time_scale);
    if (status == DD_OK && !s->none) {
        status = dd_step_end(s->ctx, st);
    }
    if (status == DD_OK && o->step_work) {
        ddbench_sgd(s);
    }
    return status;
}

/* Layer sizes: the profile's, or derived from its sync times. */
static int ddbench_sizes(ddbench_sim_t *s, const ddbench_train_opts_t *o)
{
    s->count = calloc(s->n, sizeof(size_t));
    if (s->p->num_params == NULL && o->bytes_per_s <= 0) {
        fprintf(stderr,
                "ddbench: %s has no sizes_*.json: give "
                "--bytes-per-second to derive sizes from its sync "
                "times\n",
                o->profile);
        return -1;
    }
    if (s->p->num_params == NULL && s->rank == 0) {
        printf("# sizes derived from the profile's sync times at %.3g "
               "bytes/s\n",
               o->bytes_per_s);
    }
    for (size_t l = 0; l < s->n; l++) {
        double params = s->p->num_params
                            ? (double)s->p->num_params[l]
                            : s->p->comm_s[l] * o->bytes_per_s / 4.0;
        s->count[l] = (size_t)llround(params * o->scale);
        /* As torch_sim.py shapes its layers: whole rows of cols. */
        if (o->cols > 0 && s->count[l] >= (size_t)o->cols) {
            s->count[l] -= s->count[l] % (size_t)o->cols;
        }
    }
    return 0;
}

static int ddbench_register(ddbench_sim_t *s, const ddbench_train_opts_t *o)
{
    s->param = calloc(s->n, sizeof(float *));
    s->grad = calloc(s->n, sizeof(float *));
    s->layer = calloc(s->n, sizeof(dd_layer_h));
    s->window_syncs = calloc(s->n, sizeof(uint64_t));
    for (size_t l = 0; l < s->n; l++) {
        s->param[l] = calloc(s->count[l] ? s->count[l] : 1, sizeof(float));
        s->grad[l] = calloc(s->count[l] ? s->count[l] : 1, sizeof(float));
        dd_tensor_t t = {.param = s->param[l],
                         .grad = s->grad[l],
                         .count = s->count[l],
                         .dtype = DD_DTYPE_F32,
                         .mem_type = DD_MEM_HOST};
        if (o->cols > 0 && s->count[l] >= (size_t)o->cols) {
            t.cols = (size_t)o->cols;
            t.rows = s->count[l] / t.cols;
        }
        if (s->param[l] == NULL || s->grad[l] == NULL ||
            (!s->none && dd_layer_register(s->ctx, s->p->names[l], &t, 1,
                                           &s->layer[l]) != DD_OK)) {
            fprintf(stderr, "ddbench: cannot register layer %s: %s\n",
                    s->p->names[l], dd_last_error());
            return -1;
        }
    }
    if (o->step_work) {
        size_t most = 1;
        for (size_t l = 0; l < s->n; l++) {
            most = s->count[l] > most ? s->count[l] : most;
        }
        s->new_grad = malloc(most * sizeof(float));
        if (s->new_grad == NULL) {
            fprintf(stderr, "ddbench: no memory for --step-work\n");
            return -1;
        }
        for (size_t i = 0; i < most; i++) {
            s->new_grad[i] = 1e-3f; /* torch_sim.py's gradient */
        }
    }
    return 0;
}

/* The deadline model's time per iteration of the schedule in force, with
 * the deadlines at the forward marks; Local SGD launches once backward is
 * over. */
static double ddbench_modeled_delayed(size_t n, const dd_sched_t *sched,
                                      const dd_plan_input_t *in,
                                      const double *fp, int no_marks,
                                      int streams)
{
    int localsgd = sched->strategy.kind == DD_STRATEGY_LOCALSGD;
    double *copy = calloc(n, sizeof(double)), *fix = calloc(n, sizeof(double));
    dd_plan_delay_t delay = {fp,
                             no_marks ? DD_PLAN_DEADLINE_BACKWARD
                                      : DD_PLAN_DEADLINE_FORWARD,
                             localsgd,
                             copy,
                             fix,
                             (unsigned)streams,
                             sched->opts.next_launch == DD_NEXT_LAUNCH_EARLY};
    dd_plan_t *flsgd = NULL;
    dd_plan_cost_t cost;
    double result = NAN;

    /* What the replica's copies and corrections took, per sync. */
    for (size_t l = 0; copy != NULL && fix != NULL && l < n; l++) {
        const struct dd_layer *y = sched->layers[l];
        if (y->delay.landings > 0) {
            copy[l] = y->delay.copy_s / (double)y->delay.landings;
            fix[l] = y->delay.correct_s / (double)y->delay.landings;
        }
    }
    if (copy == NULL || fix == NULL) {
        free(copy);
        free(fix);
        return NAN;
    }
    if ((!localsgd ||
         dd_plan_flsgd(n, sched->strategy.window, &flsgd) == DD_OK) &&
        dd_plan_cost_delayed(in, localsgd ? flsgd : sched->plan, &delay,
                             &cost) == DD_OK) {
        result = cost.iter_s;
    }
    dd_plan_free(flsgd);
    free(copy);
    free(fix);
    return result;
}

/* The cost model's time per iteration for the strategy that ran, from the
 * profile's backward times and the measured per-layer sync times; with a
 * delayed strategy, the deadline model's (deadlines at the forward marks
 * the simulator makes). Forward time (--forward) hides syncs only there:
 * elsewhere it adds to every iteration. */
static double ddbench_modeled(ddbench_sim_t *s, const ddbench_train_opts_t *o)
{
    /* The plan's layers: the profile's, or their parts where the commit
     * cut one (DREAMDDP_LAYER_SPLIT). A layer's backward ends at its last
     * part's mark and its forward follows its last part's forward mark, so
     * those carry its times, and the other parts none. */
    const dd_sched_t *sched = s->ctx->sched;
    size_t n = sched->n_layers;
    double *bp = calloc(n, sizeof(double));
    double *fp = calloc(n, sizeof(double));
    double *comm = calloc(n, sizeof(double));
    double forward = 0;
    double result = NAN;
    dd_layer_stats_t st = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS |
                                         DD_LAYER_STATS_FIELD_WIRE_S};
    dd_plan_t *plan = NULL;
    dd_plan_cost_t cost;

    if (bp == NULL || fp == NULL || comm == NULL) {
        free(bp);
        free(fp);
        free(comm);
        return NAN;
    }
    for (size_t l = 0; l < s->n; l++) {
        double b = s->p->bp_s[l] * o->time_scale;
        forward += b * o->forward;
        size_t parts = dd_layer_num_parts(s->ctx, s->layer[l]);
        dd_layer_h part = s->layer[l];
        for (size_t j = 0; j < parts; j++) {
            dd_layer_part(s->ctx, s->layer[l], j, &part, NULL, NULL);
            dd_layer_stats(s->ctx, part, &st);
            comm[part->index] = st.syncs ? st.wire_s / (double)st.syncs : 0;
        }
        bp[part->index] = b;
        fp[part->index] = b * o->forward;
    }
    dd_plan_input_t in = {n, bp, comm};
    unsigned h = sched->strategy.window;
    if (sched->strategy.delay) {
        result = ddbench_modeled_delayed(n, sched, &in, fp, o->no_marks,
                                         dd_sched_channels(sched));
        forward = 0; /* part of the deadline model */
    }
    switch (sched->strategy.delay ? -1 : (int)sched->strategy.kind) {
    case DD_STRATEGY_DDP:
        if (dd_plan_ssgd(n, 1, &plan) == DD_OK &&
            dd_plan_cost(&in, plan, &cost) == DD_OK) {
            result = cost.iter_s;
        }
        break;
    case DD_STRATEGY_LOCALSGD:
        if (dd_plan_flsgd_cost(&in, h, &cost) == DD_OK) {
            result = cost.iter_s;
        }
        break;
    case DD_STRATEGY_PLSGD:
    case DD_STRATEGY_DREAMDDP:
        if (dd_plan_cost(&in, sched->plan, &cost) == DD_OK) {
            result = cost.iter_s;
        }
        break;
    default:
        break; /* adaptive: periods move, no single schedule to model */
    }
    dd_plan_free(plan);
    free(bp);
    free(fp);
    free(comm);
    return result + forward +
           s->p->frozen_bp_s * o->time_scale * (1 + o->forward);
}

static int ddbench_train_parse(int argc, char **argv, ddbench_train_opts_t *o)
{
    static const struct option longopts[] = {
        {"profile", required_argument, 0, 'p'},
        {"strategy", required_argument, 0, 's'},
        {"iters", required_argument, 0, 'i'},
        {"warmup", required_argument, 0, 'w'},
        {"scale", required_argument, 0, 'x'},
        {"time-scale", required_argument, 0, 't'},
        {"bytes-per-second", required_argument, 0, 'b'},
        {"check", no_argument, 0, 'c'},
        {"compression", required_argument, 0, 'C'},
        {"cols", required_argument, 0, 'k'},
        {"forward", required_argument, 0, 'f'},
        {"deadline", required_argument, 0, 'D'},
        {"step-work", no_argument, 0, 'W'},
        {"streams", required_argument, 0, 'S'},
        {"commit-every", required_argument, 0, 'K'},
        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    static const char *const P = "ddbench train-sim";
    int opt, bad = 0;

    *o = (ddbench_train_opts_t){
        .iters = 20, .warmup = -1, .scale = 1.0, .time_scale = 1.0};
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'p':
            o->profile = optarg;
            break;
        case 's':
            o->strategy = optarg;
            break;
        /* Bounded so that a simulated run ends: --time-scale 1e400 was
         * taken as inf and spun forever. */
        case 'i':
            bad = dd_arg_long(P, "--iters", optarg, 1, 100000000, &o->iters);
            break;
        case 'w':
            bad = dd_arg_long(P, "--warmup", optarg, 0, 100000000, &o->warmup);
            break;
        case 'K':
            bad = dd_arg_long(P, "--commit-every", optarg, 1, 100000000,
                              &o->commit_every);
            break;
        case 'x':
            bad = dd_arg_double(P, "--scale", optarg, 0, 1e3, &o->scale);
            break;
        case 't':
            bad = dd_arg_double(P, "--time-scale", optarg, 0, 1e3,
                                &o->time_scale);
            break;
        case 'b':
            bad = dd_arg_double(P, "--bytes-per-second", optarg, 0, 1e15,
                                &o->bytes_per_s);
            break;
        case 'k':
            bad = dd_arg_long(P, "--cols", optarg, 0, 100000000, &o->cols);
            break;
        case 'f':
            bad = dd_arg_double(P, "--forward", optarg, 0, 1e3, &o->forward);
            break;
        case 'D':
            bad = strcmp(optarg, "forward") != 0 &&
                  strcmp(optarg, "backward") != 0;
            o->no_marks = strcmp(optarg, "backward") == 0;
            if (bad) {
                fprintf(stderr,
                        "%s: --deadline takes forward or backward, not "
                        "'%s'\n",
                        P, optarg);
            }
            break;
        case 'S':
            bad = ddbench_streams_set(P, optarg) != 0;
            break;
        case 'c':
            o->check = 1;
            break;
        case 'W':
            o->step_work = 1;
            break;
        case 'C':
            o->compression = optarg;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'h':
            ddbench_train_usage(stdout);
            exit(0);
        default:
            ddbench_train_usage(stderr);
            return -1;
        }
        if (bad) {
            return -1;
        }
    }
    if (o->profile == NULL || o->strategy == NULL || o->iters < 1 ||
        o->scale < 0 || o->time_scale < 0 || optind != argc ||
        (o->check && o->compression != NULL &&
         strcmp(o->compression, "none") != 0) ||
        (o->check && o->step_work)) {
        ddbench_train_usage(stderr);
        return -1;
    }
    return 0;
}

/* Warm-up: dreamddp profiles, then plans at the next window boundary.
 * Under delayed averaging the syncs in flight at a window's end carry
 * over to the next, and the plan's switch lands them all first: the
 * windows after it start with an empty channel and run faster than the
 * steady state until the backlog has built up. Two more windows are
 * warm-up, as the deadline model's own warm passes (deadline.c), so that
 * the timed ones are the steady state it models; with bubble filling on,
 * so are the windows of its trial. */
static long ddbench_warmup(ddbench_sim_t *s, const ddbench_train_opts_t *o)
{
    if (o->warmup >= 0) {
        return o->warmup;
    }
    if (s->none) {
        return 1;
    }
    const dd_sched_t *sched = s->ctx->sched;
    long h = (long)sched->strategy.window;
    long profile = sched->opts.profile_steps;
    long windows = (profile + h - 1) / h + 1;
    if (sched->opts.fill_bubbles) {
        /* Bubble filling's trial (measure.c): DD_SCHED_TRIAL_STEPS with
         * the extras and as many without, each taken a window later; a
         * plan without extras has none. */
        windows += 2 * ((DD_SCHED_TRIAL_STEPS + h - 1) / h + 1);
    }
    if (sched->strategy.delay) {
        windows += 2;
    }
    return windows * h;
}

typedef struct {
    double mean_iter_s, wait_s, modeled_s;
    /* When the first step began, on the wall clock (seconds since the
     * epoch): a launcher's start time subtracted gives the job's setup. */
    double first_step_at;
    /* When the last worker returned from dd_model_commit, on the wall
     * clock: the moment every worker may start its first step (the ranks
     * of a job whose setup is compared share a clock: one host). */
    double ready_at;
    double commit_s; /* dd_model_commit's time on this rank */
    /* This process's open descriptors and resident memory then (rank 0
     * hosts the store): -1 where /proc does not say. */
    long fds_at_first_step, rss_kb_at_first_step;
    size_t bytes_per_iter, wire_per_iter;
    int correct;
} ddbench_result_t;

/* This process's open descriptors and resident kilobytes, from /proc. */
static void ddbench_proc_usage(long *fds, long *rss_kb)
{
    char line[256];
    DIR *dir = opendir("/proc/self/fd");
    FILE *f = fopen("/proc/self/status", "r");

    *fds = *rss_kb = -1;
    if (dir != NULL) {
        *fds = 0;
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            *fds += e->d_name[0] != '.';
        }
        *fds -= 1; /* the directory's own */
        closedir(dir);
    }
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %ld", rss_kb) == 1) {
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
}

static int ddbench_loop(ddbench_sim_t *s, const ddbench_train_opts_t *o,
                        ddbench_result_t *r)
{
    long warm = ddbench_warmup(s, o);
    uint64_t *before = calloc(s->n, sizeof(uint64_t));
    unsigned window = s->none ? 1 : s->ctx->sched->strategy.window;
    /* The workers meet before the timed steps. The meeting is a collective
     * behind the syncs in flight, so under delayed averaging it lands them
     * all and the window after it starts with an empty channel: there they
     * meet a window earlier, and the steps after it are warm-up too. */
    long meet = s->delay && warm >= (long)window ? warm - (long)window : warm;
    double t0 = 0;
    dd_layer_stats_t st = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS |
                                         DD_LAYER_STATS_FIELD_WIRE_S};

    r->correct = 1;
    for (long it = 0; it < warm + o->iters; it++) {
        dd_step_stats_t ss = {.field_mask = DD_STEP_STATS_FIELD_WAIT_S |
                                            DD_STEP_STATS_FIELD_BYTES_SYNCED |
                                            DD_STEP_STATS_FIELD_WIRE_BYTES};
        if (it == meet) {
            /* The workers start the timed steps together (a collective
             * among workers: aggregators, serving, join no barrier). */
            float one = 1;
            if (!s->none) {
                dd_allreduce(s->ctx, &one, &one, 1, DD_DTYPE_F32, DD_REDUCE_SUM,
                             DD_MEM_HOST);
            }
        }
        if (it == warm) {
            t0 = dd_time_now();
        }
        if (it == 0) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            r->first_step_at = (double)now.tv_sec + now.tv_nsec * 1e-9;
            ddbench_proc_usage(&r->fds_at_first_step, &r->rss_kb_at_first_step);
        }
        for (size_t l = 0; o->check && !s->none && l < s->n; l++) {
            dd_layer_stats(s->ctx, s->layer[l], &st);
            before[l] = st.syncs;
        }
        if (o->check && !s->none) {
            ddbench_fill(s, it);
        }
        dd_status_t status = ddbench_step(s, o, &ss);
        if (status != DD_OK) {
            fprintf(stderr, "ddbench: rank %d: step %ld: %s: %s\n", s->rank, it,
                    dd_status_string(status), dd_last_error());
            free(before);
            return -1;
        }
        if (o->check && !s->none) {
            r->correct &= ddbench_verify(s, it, before, window);
        }
        if (o->commit_every > 0 && !s->none &&
            (it + 1) % o->commit_every == 0 &&
            dd_elastic_commit(s->ctx) != DD_OK) {
            fprintf(stderr, "ddbench: rank %d: step %ld: %s\n", s->rank, it,
                    dd_last_error());
            free(before);
            return -1;
        }
        if (it >= warm) {
            r->wait_s += ss.wait_s;
            r->bytes_per_iter += ss.bytes_synced;
            r->wire_per_iter += ss.wire_bytes;
        }
    }
    r->mean_iter_s = (dd_time_now() - t0) / (double)o->iters;
    if (o->check && s->delay) {
        r->correct &= ddbench_identical(s);
    }
    r->wait_s /= (double)o->iters;
    r->bytes_per_iter /= (size_t)o->iters;
    r->wire_per_iter /= (size_t)o->iters;
    free(before);
    return 0;
}

/* The report as one line of JSON. */
static void ddbench_train_json(const ddbench_sim_t *s,
                               const ddbench_train_opts_t *o,
                               const ddbench_result_t *r, const char *name,
                               size_t bytes)
{
    dd_json_writer_t w;

    dd_json_writer_init(&w, stdout, 0);
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    dd_json_key(&w, "strategy");
    dd_json_string(&w, name);
    dd_json_key(&w, "workers");
    dd_json_int(&w, s->workers);
    dd_json_key(&w, "layers");
    dd_json_uint(&w, s->n);
    /* What the plan schedules: the layers, or their parts where the
     * commit cut some (DREAMDDP_LAYER_SPLIT). */
    dd_json_key(&w, "planned_layers");
    dd_json_uint(&w, s->ctx->sched->n_layers);
    dd_json_key(&w, "frozen_modules");
    dd_json_uint(&w, s->p->num_frozen);
    dd_json_key(&w, "model_bytes");
    dd_json_uint(&w, bytes);
    dd_json_key(&w, "scale");
    dd_json_double(&w, o->scale);
    dd_json_key(&w, "time_scale");
    dd_json_double(&w, o->time_scale);
    dd_json_key(&w, "forward");
    dd_json_double(&w, o->forward);
    dd_json_key(&w, "deadline");
    dd_json_string(&w, o->no_marks ? "backward" : "forward");
    dd_json_key(&w, "step_work");
    dd_json_bool(&w, o->step_work);
    dd_json_key(&w, "streams");
    dd_json_int(&w, o->streams);
    dd_json_key(&w, "iters");
    dd_json_int(&w, o->iters);
    dd_json_key(&w, "first_step_at");
    dd_json_fixed(&w, r->first_step_at, 3);
    dd_json_key(&w, "ready_at");
    dd_json_fixed(&w, r->ready_at, 3);
    dd_json_key(&w, "commit_s");
    dd_json_fixed(&w, r->commit_s, 4);
    dd_json_key(&w, "fds_at_first_step");
    dd_json_int(&w, r->fds_at_first_step);
    dd_json_key(&w, "rss_kb_at_first_step");
    dd_json_int(&w, r->rss_kb_at_first_step);
    dd_json_key(&w, "mean_iter_s");
    dd_json_fixed(&w, r->mean_iter_s, 6);
    dd_json_key(&w, "modeled_iter_s");
    dd_json_fixed(&w, r->modeled_s, 6);
    dd_json_key(&w, "wait_s");
    dd_json_fixed(&w, r->wait_s, 6);
    dd_json_key(&w, "synced_bytes_per_iter");
    dd_json_uint(&w, r->bytes_per_iter);
    dd_json_key(&w, "compression");
    dd_json_string(&w, o->compression != NULL ? o->compression : "default");
    dd_json_key(&w, "wire_bytes_per_iter");
    dd_json_uint(&w, r->wire_per_iter);
    if (o->check && !s->none) {
        dd_json_key(&w, "correct");
        dd_json_bool(&w, r->correct);
    }
    dd_json_object_end(&w);
    putchar('\n');
}

static void ddbench_train_report(ddbench_sim_t *s,
                                 const ddbench_train_opts_t *o,
                                 const ddbench_result_t *r)
{
    size_t bytes = 0;
    for (size_t l = 0; l < s->n; l++) {
        bytes += s->count[l] * sizeof(float);
    }
    const char *name = s->none ? "none" : dd_strategy_name(s->ctx);
    if (o->json) {
        ddbench_train_json(s, o, r, name, bytes);
        return;
    }
    printf("train-sim %s: %d workers, %zu layers, %.1f MB (scale %g, "
           "time scale %g, forward %g, %d stream%s%s)\n",
           name, s->workers, s->n, bytes / 1e6, o->scale, o->time_scale,
           o->forward, o->streams, o->streams == 1 ? "" : "s",
           o->step_work ? ", step work" : "");
    if (s->p->num_frozen > 0) {
        printf("  %zu frozen modules: %.4f s of backward per iteration, "
               "no sync\n",
               s->p->num_frozen, s->p->frozen_bp_s * o->time_scale);
    }
    printf("  measured %.4f s/iter, modeled %.4f s/iter, exposed wait %.4f "
           "s/iter, %.1f MB synced/iter (%.1f MB on the wire)%s\n",
           r->mean_iter_s, r->modeled_s, r->wait_s, r->bytes_per_iter / 1e6,
           r->wire_per_iter / 1e6,
           o->check && !s->none
               ? (r->correct ? ", check: correct" : ", check: WRONG")
               : "");
}

static void ddbench_sim_free(ddbench_sim_t *s)
{
    for (size_t l = 0; s->param && l < s->n; l++) {
        free(s->param[l]);
        free(s->grad[l]);
    }
    free(s->param);
    free(s->grad);
    free(s->new_grad);
    free(s->layer);
    free(s->count);
    free(s->window_syncs);
    dd_profile_free(s->p);
}

static int ddbench_train_run(ddbench_sim_t *s, const ddbench_train_opts_t *o)
{
    ddbench_result_t r = {0};

    if (dd_profile_read(o->profile, &s->p) != DD_OK) {
        return 1;
    }
    s->n = s->p->num_layers;
    if (ddbench_sizes(s, o) != 0) {
        return 2;
    }
    /* Strategy none registers nothing, but has the buffers for
     * --step-work. */
    if (s->none && ddbench_register(s, o) != 0) {
        return 1;
    }
    double t_commit = 0;
    if (!s->none &&
        (dd_strategy_set(s->ctx, o->strategy) != DD_OK ||
         (o->compression != NULL &&
          dd_compression_set(s->ctx, o->compression) != DD_OK) ||
         ddbench_register(s, o) != 0 ||
         (t_commit = dd_time_now(), dd_model_commit(s->ctx)) != DD_OK)) {
        fprintf(stderr, "ddbench: rank %d: %s\n", s->rank, dd_last_error());
        return 1;
    }
    r.commit_s = s->none ? 0 : dd_time_now() - t_commit;
    struct timespec ready;
    clock_gettime(CLOCK_REALTIME, &ready);
    r.ready_at = (double)ready.tv_sec + ready.tv_nsec * 1e-9;
    s->delay = !s->none && s->ctx->sched->strategy.delay;
    if (ddbench_loop(s, o, &r) != 0) {
        return 1;
    }
    /* The latest worker's, once the timed steps are over. */
    if (!s->none &&
        dd_allreduce(s->ctx, &r.ready_at, &r.ready_at, 1, DD_DTYPE_F64,
                     DD_REDUCE_MAX, DD_MEM_HOST) != DD_OK) {
        fprintf(stderr, "ddbench: rank %d: %s\n", s->rank, dd_last_error());
        return 1;
    }
    if (s->none) {
        r.modeled_s = s->p->frozen_bp_s * o->time_scale;
        for (size_t l = 0; l < s->n; l++) {
            r.modeled_s += s->p->bp_s[l] * o->time_scale;
        }
        r.modeled_s *= 1 + o->forward;
    } else {
        r.modeled_s = ddbench_modeled(s, o);
    }
    if (s->rank == 0) {
        ddbench_train_report(s, o, &r);
    }
    return r.correct ? 0 : 1;
}

int ddbench_train_main(int argc, char **argv)
{
    ddbench_train_opts_t o;
    ddbench_sim_t s = {0};

    if (ddbench_train_parse(argc, argv, &o) != 0) {
        return 2;
    }
    if (dd_init(NULL, &s.ctx) != DD_OK) {
        fprintf(stderr, "ddbench: %s\n", dd_last_error());
        return 1;
    }
    s.rank = dd_rank(s.ctx);
    s.workers = dd_num_workers(s.ctx);
    o.streams = ddbench_streams(s.ctx);
    if (dd_role(s.ctx) == DD_ROLE_AGGREGATOR) {
        if (dd_aggregator_serve(s.ctx) != DD_OK) {
            fprintf(stderr, "ddbench: rank %d: %s\n", s.rank, dd_last_error());
            return 1;
        }
        return dd_finalize(s.ctx) != DD_OK;
    }
    s.none = strcmp(o.strategy, "none") == 0;
    s.grads = strcmp(o.strategy, "ddp") == 0;
    int rc = ddbench_train_run(&s, &o);
    dd_status_t fin = dd_finalize(s.ctx);
    ddbench_sim_free(&s);
    return rc != 0 ? rc : fin != DD_OK;
}
