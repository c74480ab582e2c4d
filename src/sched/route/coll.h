/*
 * The workers' allreduce route (coll.c): every collective it runs among the
 * workers is preceded by a digest of what it is, so that two different
 * messages never meet in one sum.
 */
#ifndef DD_SCHED_ROUTE_COLL_H
#define DD_SCHED_ROUTE_COLL_H

#include "sched/route/route.h"

/** The route's state: its counters are the engine thread's alone. */
typedef struct {
    const dd_route_env_t *env;
    uint64_t seq;         /* collectives started among the workers */
    int digesting;        /* collectives whose digest is on the wire: another's
                             digest waits until none is, so every worker posts
                             digests and collectives in the same order */
    dd_sync_pipe_t avg;   /* averages a job's buffer, or runs job->op */
    dd_sync_pipe_t bcast; /* the first worker's values of a job's buffer */
} dd_route_coll_t;

/** The pipes over env's collectives; avg's depth is DD_ENGINE_DEPTH until
 *  the runtime sets it at commit. */
void dd_route_coll_init(dd_route_coll_t *r, const dd_route_env_t *env);

#endif
