/*
 * The device pipe (staging.c): a job on device memory handed to a backend
 * that takes it, or staged through pinned host memory to the host route.
 */
#ifndef DD_SCHED_ROUTE_STAGING_H
#define DD_SCHED_ROUTE_STAGING_H

#include "sched/route/route.h"

typedef struct dd_staging dd_staging_t;

/** The route's state. */
typedef struct {
    const dd_route_env_t *env;
    dd_staging_t *slots;        /* streams, events, pinned slots: made on the
                                   first job, for its device */
    const dd_sync_pipe_t *coll; /* a collective's chunks */
    const dd_sync_pipe_t *host; /* a layer's staged chunks */
    int host_only; /* host sums host memory only (the aggregators'): a
                      layer never goes to a backend as device memory */
    dd_sync_pipe_t pipe;
} dd_route_staging_t;

/** The pipe, whose chunks travel by coll until dd_route_staging_set_host
 *  names the host route. */
void dd_route_staging_init(dd_route_staging_t *r, const dd_route_env_t *env,
                           const dd_sync_pipe_t *coll);

void dd_route_staging_set_host(dd_route_staging_t *r,
                               const dd_sync_pipe_t *host, int host_only);

/** Runs a collective job on device memory through the pipe, before the
 *  engine starts (dd_model_commit's broadcast). */
dd_status_t dd_route_staging_call(dd_route_staging_t *r, dd_sync_job_t *job);

/** Frees the slots. */
void dd_route_staging_free(dd_route_staging_t *r);

#endif
