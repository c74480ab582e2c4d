/*
 * The aggregators' route (agg.c): a job's buffer cut into chunks, each
 * pushed to its home, summed there from every worker and pulled back
 * (src/agg, BytePS-style).
 */
#ifndef DD_SCHED_ROUTE_AGG_H
#define DD_SCHED_ROUTE_AGG_H

#include "agg/agg.h"
#include "sched/route/route.h"

/** The route's state: this worker's side of the aggregation. */
typedef struct {
    dd_agg_t *agg; /* NULL until opened */
    dd_sync_pipe_t pipe;
} dd_route_agg_t;

/** Opens this worker's side of the aggregation over env. */
dd_status_t dd_route_agg_open(dd_route_agg_t *r, const dd_agg_env_t *env);

/** Says goodbye to every aggregator and frees; a no-op when not open. */
void dd_route_agg_close(dd_route_agg_t *r);

/** What a job's messages to the aggregators say they are. */
void dd_route_agg_id(const dd_sync_job_t *job, dd_agg_id_t *id);

#endif
