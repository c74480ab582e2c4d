/*
 * The workers' agreement on what decisions are made from: the blocking
 * average of a row at the first plan, the window-start agreement that runs
 * in the background (every worker's profile and divergence, allgathered in
 * one job), and adaptive's allgather. Every worker reduces the same rows
 * alike, so that every worker syncs the same layers in the same step.
 */
#include "core/log.h"
#include "sched/sched.h"

#include <stdlib.h>
#include <string.h>

/* Makes v identical on every worker: the average, as the first worker has
 * it (an allreduce alone need not be bitwise equal everywhere). */
dd_status_t dd_sched_agree(dd_sched_t *sched, double *v, size_t n)
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
/*
 * Starts the window-start agreement in the background: every worker's row
 * (the profile when a check of the plan is due, then the layers'
 * divergence when the monitor is on) allgathered in one job on the
 * engine's queue, ahead of the step's syncs. It runs while the application
 * computes its forward pass and comes back with the step's syncs at
 * dd_step_end, which marks it ready; the next window's start reads it. No
 * worker waits for it, and every worker reduces the same rows alike.
 */
dd_status_t dd_sched_agree_start(dd_sched_t *sched, int profile, int drift)
{
    size_t n = sched->n_layers, w = (size_t)sched->env.job->n_workers;
    size_t len = DD_SCHED_PROFILE_LEN(n);
    size_t m = (profile ? len : 0) + (drift ? n : 0);

    if (sched->agree.v == NULL &&
        (sched->agree.v = malloc(len * sizeof(double))) == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the agreed times");
    }
    if (sched->agree.mine == NULL &&
        (sched->agree.mine = malloc((len + n) * sizeof(double))) == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for this worker's agreement row");
    }
    if (sched->agree.all == NULL &&
        (sched->agree.all = malloc((len + n) * w * sizeof(double))) == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the workers' agreement rows");
    }
    dd_sync_job_t *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the agreement job");
    }
    if (profile) {
        dd_sched_profile(sched, sched->agree.mine);
    }
    if (drift) {
        dd_sched_drift_mine(sched, sched->agree.mine + (profile ? len : 0));
    }
    sched->agree.coll = (dd_sched_coll_t){.coll = DD_COLL_ALLGATHER,
                                          .args = {.sendbuf = sched->agree.mine,
                                                   .recvbuf = sched->agree.all,
                                                   .count = m,
                                                   .dtype = DD_DTYPE_F64,
                                                   .mem_type = DD_MEM_HOST}};
    sched->agree.stride = m;
    sched->agree.profile = profile;
    sched->agree.drift = drift;
    job->step = sched->step;
    job->plan_serial = sched->plan_serial;
    job->dtype = DD_DTYPE_F64;
    job->mem_type = DD_MEM_HOST;
    job->pipe = &sched->routes.coll.avg;
    job->op = &sched->agree.coll;
    job->control = 1; /* beside the syncs: it must not hold one back */
    dd_engine_submit(sched->engine, job);
    sched->agree.state = DD_SCHED_AGREE_RUNNING;
    return DD_OK;
}
void dd_sched_agree_done(dd_sched_t *sched)
{
    if (sched->agree.state == DD_SCHED_AGREE_RUNNING) {
        sched->agree.state = DD_SCHED_AGREE_READY;
    }
}
/* The mean of the workers' rows, in worker order: v[i] for i < n. */
void dd_sched_rows_mean(const double *all, int n_workers, size_t stride,
                        size_t n, double *v)
{
    for (size_t i = 0; i < n; i++) {
        double sum = 0;
        for (int r = 0; r < n_workers; r++) {
            sum += all[(size_t)r * stride + i];
        }
        v[i] = sum / n_workers;
    }
}
/* Every worker's row of n values, in worker order, into all: blocking. */
dd_status_t dd_sched_gather_rows(dd_sched_t *sched, double *mine, size_t n,
                                 double *all)
{
    dd_sched_coll_t c = {.coll = DD_COLL_ALLGATHER,
                         .args = {.sendbuf = mine,
                                  .recvbuf = all,
                                  .count = n,
                                  .dtype = DD_DTYPE_F64,
                                  .mem_type = DD_MEM_HOST}};
    return dd_sched_collective(sched, &c);
}
