/*
 * The routes a layer's syncs take, composed once at dd_model_commit
 * (routes.c): the chain codec -> staging -> hierarchical, aggregation or
 * allreduce, from the settings, for every tensor of every layer, so that a
 * mark finds its pipe in the layer's table and no pipe sees the runtime.
 */
#ifndef DD_SCHED_ROUTES_H
#define DD_SCHED_ROUTES_H

#include "sched/route/agg.h"
#include "sched/route/coll.h"
#include "sched/route/encode.h"
#include "sched/route/hier.h"
#include "sched/route/rounds.h"
#include "sched/route/staging.h"

/** A tensor's chain: for a parameter sync [0] and a gradient sync [1], the
 *  pipe its job takes and the codec it travels in (NULL: dense). */
typedef struct {
    const dd_sync_pipe_t *pipe[2];
    const dd_sched_codec_t *codec[2];
    size_t bytes;   /* the tensor's */
    size_t wire[2]; /* what its sync puts on the wire, in its codec */
} dd_tensor_route_t;

/** The routes' state, the runtime's: each route owns its own. */
typedef struct {
    dd_route_env_t env;
    const char **names; /* env.names' storage: the layers' */
    dd_route_coll_t coll;
    dd_route_agg_t agg; /* agg.agg set: this worker talks to the homes */
    dd_route_staging_t staging;
    dd_route_hier_t hier; /* hier.h set: DREAMDDP_ROUTE=hierarchical */
    dd_route_encode_t encode;
    dd_route_rounds_t rounds;
    const dd_sync_pipe_t *host; /* where a host tensor's dense sync goes */
    const char *name;           /* allreduce, aggregate or hierarchical */
} dd_sched_routes_t;

#endif
