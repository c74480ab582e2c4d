/*
 * The profiler: backward times from the dd_layer_ready marks, sync times
 * from the engine, a network model fitted at commit for layers not yet
 * measured, and the decisions built on them (dreamddp's plan and re-plans,
 * adaptive periods). Every decision is taken from values the workers first
 * agree on, so that every worker syncs the same layers in the same step.
 */
#include "core/log.h"
#include "core/time.h"
#include "sched/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Weight of a new measurement in the running averages. */
#define DD_PROFILE_EMA 0.3

static void dd_sched_ema(double *avg, double sample, int first)
{
    *avg =
        first ? sample : (1 - DD_PROFILE_EMA) * *avg + DD_PROFILE_EMA * sample;
}

/* Times one sync of count floats on the route, best of reps, as the
 * engine times the layers' syncs. */
static dd_status_t dd_sched_time_allreduce(dd_sched_t *sched, float *buf,
                                           size_t count, int reps,
                                           double *best_p)
{
    double best = INFINITY;
    dd_sync_item_t item = {buf, count};
    for (int r = 0; r < reps; r++) {
        dd_sync_job_t job = {.step = sched->step,
                             .dtype = DD_DTYPE_F32,
                             .mem_type = DD_MEM_HOST,
                             .bytes = count * sizeof(float),
                             .n_items = 1,
                             .items = &item};
        dd_status_t status =
            dd_engine_call(sched->engine, &job, dd_sched_engine_timeout(sched));
        if (status != DD_OK) {
            return status;
        }
        double t = job.t_end - job.t_start;
        best = t < best ? t : best;
    }
    *best_p = best;
    return DD_OK;
}

dd_status_t dd_sched_fit_network(dd_sched_t *sched)
{
    enum { SMALL = 8, BIG = 256 * 1024 }; /* floats: 32 B and 1 MiB */
    float *buf = calloc(BIG, sizeof(float));
    double t_small = 0, t_big = 0;
    dd_status_t status = DD_ERR_NO_MEMORY;

    if (buf != NULL) {
        status = dd_sched_time_allreduce(sched, buf, SMALL, 5, &t_small);
    }
    if (status == DD_OK) {
        status = dd_sched_time_allreduce(sched, buf, BIG, 3, &t_big);
    }
    free(buf);
    if (status != DD_OK) {
        char why[512];
        snprintf(why, sizeof(why), "%s", dd_last_error());
        return dd_error(status, DD_SUBSYS_SCHED,
                        "dd_model_commit: measuring the network failed: %s",
                        why);
    }
    sched->alpha_s = t_small;
    sched->beta_s = t_big > t_small ? (t_big - t_small) / (BIG * 4.0) : 0;
    return DD_OK;
}

static int dd_sched_by_ready(const void *a, const void *b)
{
    const struct dd_layer *x = *(struct dd_layer *const *)a;
    const struct dd_layer *y = *(struct dd_layer *const *)b;
    return (x->ready_t > y->ready_t) - (x->ready_t < y->ready_t);
}

void dd_sched_record_backward(dd_sched_t *sched)
{
    struct dd_layer **order = malloc(sched->n_layers * sizeof(*order));
    size_t n = 0;

    if (order == NULL) {
        return;
    }
    for (size_t i = 0; i < sched->n_layers; i++) {
        if (sched->layers[i]->ready) {
            order[n++] = sched->layers[i];
        }
    }
    qsort(order, n, sizeof(*order), dd_sched_by_ready);
    double prev = sched->step_begin_t;
    for (size_t k = 0; k < n; k++) {
        /* The first layer of backward also carries the forward pass: a
         * constant offset, which moves every sync equally. */
        dd_sched_ema(&order[k]->bp_s, order[k]->ready_t - prev,
                     order[k]->bp_s == 0);
        prev = order[k]->ready_t;
    }
    free(order);
}

/* One sample per layer and sync: its per-byte share of the jobs that
 * carried it, as the runtime summed them. */
void dd_sched_record_syncs(dd_sched_t *sched, const dd_sync_job_t *done)
{
    for (const dd_sync_job_t *job = done; job != NULL; job = job->next) {
        for (size_t k = 0; k < job->n_layers; k++) {
            struct dd_layer *l = sched->layers[job->layers[k]];
            if (l->sync_seen) {
                dd_sched_ema(&l->comm_s, l->sync_share_s, !l->comm_measured);
                l->comm_measured = 1;
                l->sync_seen = 0;
            }
        }
    }
}

/* Makes v identical on every worker: the average, as the first worker has
 * it (an allreduce alone need not be bitwise equal everywhere). */
static dd_status_t dd_sched_agree(dd_sched_t *sched, double *v, size_t n)
{
    dd_sched_coll_t c = {.coll = DD_COLL_ALLREDUCE,
                         .args = {.sendbuf = v,
                                  .recvbuf = v,
                                  .count = n,
                                  .dtype = DD_DTYPE_F64,
                                  .op = DD_REDUCE_AVG,
                                  .mem_type = DD_MEM_HOST}};
    dd_status_t status = dd_sched_collective(sched, &c);
    if (status == DD_OK) {
        c.coll = DD_COLL_BROADCAST;
        c.args.root = 0;
        status = dd_sched_collective(sched, &c);
    }
    return status;
}

/* The planner's inputs from the measurements, agreed by every worker. */
static dd_status_t dd_sched_inputs(dd_sched_t *sched, double *v)
{
    size_t n = sched->n_layers;
    for (size_t i = 0; i < n; i++) {
        const struct dd_layer *l = sched->layers[i];
        v[i] = l->bp_s;
        v[n + i] = l->comm_measured
                       ? l->comm_s
                       : sched->alpha_s + sched->beta_s * (double)l->bytes;
    }
    return dd_sched_agree(sched, v, 2 * n);
}

static double dd_sched_sum(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += v[i];
    }
    return s;
}

/* Plans from v (bp then comm) and installs the schedule. */
static dd_status_t dd_sched_plan(dd_sched_t *sched, const double *v)
{
    size_t n = sched->n_layers;
    dd_plan_input_t input = {n, v, v + n};
    dd_plan_params_t params = {.field_mask = DD_PLAN_FIELD_FILL_BUBBLES,
                               .fill_bubbles = sched->opts.fill_bubbles};
    dd_plan_t *plan;
    dd_status_t status =
        dd_plan_dreamddp(&input, sched->strategy.window, &params, &plan);

    if (status != DD_OK) {
        return dd_error(status, DD_SUBSYS_SCHED, "planning failed: %s",
                        dd_status_string(status));
    }
    unsigned char *hold = malloc((size_t)sched->strategy.window * n);
    if (hold == NULL) {
        dd_plan_free(plan);
        return DD_ERR_NO_MEMORY;
    }
    dd_plan_cost_t cost;
    dd_plan_cost(&input, plan, &cost);
    dd_plan_fusion(&input, plan, hold);
    dd_plan_free(sched->plan);
    free(sched->hold);
    sched->plan = plan;
    sched->hold = hold;
    sched->plan_bp_total = dd_sched_sum(v, n);
    sched->plan_comm_total = dd_sched_sum(v + n, n);
    sched->replanned = 1;
    dd_log_info(DD_SUBSYS_SCHED,
                "%s at step %llu: backward %.1f ms, sync %.1f ms per "
                "window pass, modeled %.1f ms per iteration, %zu extra "
                "syncs",
                sched->planned ? "re-planned" : "planned",
                (unsigned long long)sched->step, sched->plan_bp_total * 1e3,
                sched->plan_comm_total * 1e3, cost.iter_s * 1e3,
                dd_plan_num_extra(plan));
    sched->planned = 1;
    return DD_OK;
}

static double dd_sched_drift(double now, double planned)
{
    return planned > 0 ? fabs(now - planned) / planned : (now > 0);
}

dd_status_t dd_sched_schedule_window(dd_sched_t *sched)
{
    unsigned h = sched->strategy.window;
    size_t n = sched->n_layers;

    if (sched->plan == NULL) {
        /* plsgd always, dreamddp while it profiles: layers split evenly,
         * so every layer is synced, and timed, once per window. */
        dd_status_t status = dd_plan_plsgd(n, h, &sched->plan);
        if (status != DD_OK) {
            return status;
        }
    }
    if (sched->strategy.kind != DD_STRATEGY_DREAMDDP || sched->step % h != 0 ||
        sched->step < (uint64_t)sched->opts.profile_steps) {
        return DD_OK;
    }
    double *v = malloc(2 * n * sizeof(double));
    if (v == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    dd_status_t status = dd_sched_inputs(sched, v);
    if (status == DD_OK) {
        double bp = dd_sched_drift(dd_sched_sum(v, n), sched->plan_bp_total);
        double comm =
            dd_sched_drift(dd_sched_sum(v + n, n), sched->plan_comm_total);
        if (!sched->planned || bp > sched->opts.replan_drift ||
            comm > sched->opts.replan_drift) {
            if (sched->planned) {
                dd_log_info(DD_SUBSYS_SCHED,
                            "measured times drifted from the plan's "
                            "(backward %.0f %%, sync %.0f %%): re-planning",
                            bp * 100, comm * 100);
            }
            status = dd_sched_plan(sched, v);
        }
    }
    free(v);
    return status;
}

dd_status_t dd_sched_adapt(dd_sched_t *sched)
{
    size_t n = sched->n_layers;
    const dd_sched_opts_t *o = &sched->opts;

    if (sched->step == 0 || sched->step % (uint64_t)o->adaptive_interval) {
        return DD_OK;
    }
    double *v = malloc(n * sizeof(double));
    if (v == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < n; i++) {
        v[i] = sched->layers[i]->grad_ema;
    }
    dd_status_t status = dd_sched_agree(sched, v, n);
    for (size_t i = 0; status == DD_OK && i < n; i++) {
        struct dd_layer *l = sched->layers[i];
        double ratio = l->grad_ema_prev > 0 ? v[i] / l->grad_ema_prev : 1.0;
        int period = dd_strategy_adapt_period(
            l->period, ratio, o->adaptive_high, o->adaptive_low,
            o->adaptive_kmin, o->adaptive_kmax);
        if (period != l->period) {
            dd_log_debug(DD_SUBSYS_SCHED,
                         "adaptive: layer '%s' period %d -> %d (gradient "
                         "EMA ratio %.2f)",
                         l->name, l->period, period, ratio);
        }
        l->period = period;
        l->stats.period = period;
        l->grad_ema_prev = v[i];
    }
    free(v);
    return status;
}
