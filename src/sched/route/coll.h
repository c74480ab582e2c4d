/*
 * The workers' allreduce route (coll.c): every collective it runs among the
 * workers is preceded by a digest of what it is, so that two different
 * messages never meet in one sum, or, where every worker agreed in the
 * digest before it on what comes next, accompanied by it.
 */
#ifndef DD_SCHED_ROUTE_COLL_H
#define DD_SCHED_ROUTE_COLL_H

#include "sched/route/route.h"

/** The most collectives of a step the route remembers, the steps it
 *  remembers, and the longest period it looks for in them (a window of
 *  dreamddp:4 repeats every 4 steps). */
#define DD_ROUTE_COLL_SEEN 64
#define DD_ROUTE_COLL_STEPS 8
#define DD_ROUTE_COLL_PERIOD (DD_ROUTE_COLL_STEPS / 2)

/** A collective as the route remembers it: what it is but its step, and
 *  its shape. */
typedef struct {
    uint64_t ident;
    size_t count;
    dd_dtype_t dtype;
    dd_reduce_op_t op;
    int foreseeable; /* an average of host memory: another may take its
                        shape */
} dd_route_coll_seen_t;

/** The route's state: its counters are the engine thread's alone. */
typedef struct {
    const dd_route_env_t *env;
    uint64_t seq;  /* collectives started among the workers */
    int digesting; /* collectives whose digest is on the wire: another's
                      digest waits until none is, so every worker posts
                      digests and collectives in the same order */
    /* What the last steps ran (coll.c): this step's collectives so far,
     * the last DD_ROUTE_COLL_STEPS steps' (steps % DD_ROUTE_COLL_STEPS;
     * none where more than DD_ROUTE_COLL_SEEN), and for each period d
     * (bit d - 1) whether the steps d and 2d back ran the same and this
     * step so far ran what the step d back did. */
    uint64_t step, plan_serial;
    size_t n_cur, steps;
    unsigned follows;
    dd_route_coll_seen_t cur[DD_ROUTE_COLL_SEEN];
    dd_route_coll_seen_t past[DD_ROUTE_COLL_STEPS][DD_ROUTE_COLL_SEEN];
    size_t n_past[DD_ROUTE_COLL_STEPS];
    /* The next collective as every worker foresaw it in the last digest
     * (armed), and how often one was sent on it, rightly or not. */
    int armed;
    dd_route_coll_seen_t next;
    uint64_t next_step;
    uint64_t foreseen, missed;
    dd_sync_pipe_t avg;   /* averages a job's buffer, or runs job->op */
    dd_sync_pipe_t bcast; /* the first worker's values of a job's buffer */
} dd_route_coll_t;

/** The pipes over env's collectives; avg's depth is DD_ENGINE_DEPTH until
 *  the runtime sets it at commit. */
void dd_route_coll_init(dd_route_coll_t *r, const dd_route_env_t *env);

#endif
