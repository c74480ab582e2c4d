/*
 * The profiler: backward times from the dd_layer_ready marks, forward
 * times from the forward marks, sync times from the engine, and a network
 * model fitted at commit for layers not yet measured; the planner's
 * inputs from this worker's measurements. It decides nothing.
 */
#include "core/log.h"
#include "core/time.h"
#include "sched/sched.h"

#include <math.h>
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
    dd_sync_item_t item = {.buf = buf, .count = count};
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
        double t = job.wire_s;
        best = t < best ? t : best;
    }
    *best_p = best;
    return DD_OK;
}
/* Only dreamddp plans from the model, so only it pays for the fit: five
 * small and three 1 MiB collectives at commit took 9 s of the 12 that 128
 * ranks on one 2-core host took to commit. */
dd_status_t dd_sched_fit_network(dd_sched_t *sched)
{
    enum { SMALL = 8, BIG = 256 * 1024 }; /* floats: 32 B and 1 MiB */
    float *buf = NULL;
    double t_small = 0, t_big = 0;
    dd_status_t status = DD_ERR_NO_MEMORY;

    if (sched->strategy.kind != DD_STRATEGY_DREAMDDP) {
        return DD_OK;
    }
    buf = calloc(BIG, sizeof(float));
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
/* Delayed averaging's forward marks, when every layer got one in this
 * step: each layer's forward time, from its mark to the next one, less
 * the next one's wait for a landing. */
static int dd_sched_record_forward(dd_sched_t *sched)
{
    size_t n = sched->n_layers;

    for (size_t i = 0; i < n; i++) {
        if (sched->layers[i]->fwd_t < sched->step_begin_t) {
            return 0;
        }
    }
    for (size_t i = 0; i + 1 < n && dd_sched_steps_run(sched) > 0; i++) {
        struct dd_layer *l = sched->layers[i], *next = sched->layers[i + 1];
        double f = next->fwd_t - l->fwd_t - next->fwd_wait_s;
        dd_sched_ema(&l->fp_s, f > 0 ? f : 0, l->fp_s == 0);
    }
    return 1;
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
    int marks = dd_sched_record_forward(sched);
    if (marks) {
        /* Forward, up to the last layer's mark, is measured apart. */
        prev = sched->layers[sched->n_layers - 1]->fwd_t;
    }
    /* The first step warms caches and allocators: not a sample. */
    for (size_t k = 0; k < n && dd_sched_steps_run(sched) > 0; k++) {
        /* The first layer of backward also carries the forward pass: a
         * constant offset, which moves every sync equally. */
        /* A deadline's wait for a delayed average (delay.c) is no
         * backward time. */
        double waited = order[k]->delay.wait_s +
                        (k == 0 && !marks ? sched->delay.fwd_wait_s : 0);
        dd_sched_ema(&order[k]->bp_s, order[k]->ready_t - prev - waited,
                     order[k]->bp_s == 0);
        prev = order[k]->ready_t;
    }
    free(order);
}
/* One sample per layer and sync: its per-byte share of the jobs that
 * carried it, as the runtime summed them. The first window's syncs set up
 * connections and buffers and are no sample (the network model stands in
 * until a layer is measured). */
void dd_sched_record_syncs(dd_sched_t *sched, const dd_sync_job_t *done)
{
    int warm = dd_sched_steps_run(sched) >= sched->strategy.window;

    for (const dd_sync_job_t *job = done; job != NULL; job = job->next) {
        for (size_t k = 0; k < job->n_layers; k++) {
            struct dd_layer *l = sched->layers[job->layers[k]];
            if (l->sync_seen && !warm) {
                l->sync_seen = 0;
            } else if (l->sync_seen) {
                dd_sched_ema(&l->comm_s, l->sync_share_s, !l->comm_measured);
                l->comm_measured = 1;
                l->sync_seen = 0;
            }
        }
    }
}
/* The planner's inputs from this worker's measurements: bp, comm, then
 * forward (delayed averaging's marks; DD_SCHED_NO_MARKS without them, so
 * that the agreed mean says whether every worker marks). */
void dd_sched_profile(dd_sched_t *sched, double *v)
{
    size_t n = sched->n_layers;
    for (size_t i = 0; i < n; i++) {
        const struct dd_layer *l = sched->layers[i];
        v[i] = l->bp_s;
        v[2 * n + i] = sched->delay.marked ? l->fp_s : DD_SCHED_NO_MARKS;
        /* Before a measurement, the model prices what the codec puts on
         * the wire. */
        v[n + i] =
            l->comm_measured
                ? l->comm_s
                : sched->alpha_s +
                      sched->beta_s * (double)dd_sched_layer_wire_bytes(l);
    }
    /* The mean step-to-step time since the last row or plan change, the
     * same number of steps on every worker, once they are
     * DD_SCHED_TRIAL_STEPS (0 until then: the steps count on). */
    v[DD_SCHED_PROFILE_ROWS * n] = 0.0;
    if (sched->trial.iter_n >= DD_SCHED_TRIAL_STEPS) {
        v[DD_SCHED_PROFILE_ROWS * n] =
            sched->trial.iter_sum_s / (double)sched->trial.iter_n;
        sched->trial.iter_sum_s = 0;
        sched->trial.iter_n = 0;
    }
}
