/*
 * dd_aggregator_serve: the public entry of an aggregator rank. It checks
 * the role and hands the loop (src/agg/serve.c) what it needs.
 */
#include "agg/agg.h"
#include "api/context.h"
#include "api/watch.h"
#include "core/log.h"

int dd_context_agg_dropped(dd_context_h ctx)
{
    return ctx->role == DD_ROLE_AGGREGATOR && ctx->agg_env.survive &&
           dd_agg_is_lost(ctx->store, ctx->env.rank);
}

dd_status_t dd_aggregator_serve(dd_context_h ctx)
{
    if (ctx == NULL || ctx->role != DD_ROLE_AGGREGATOR) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_AGG,
                        "dd_aggregator_serve: rank %d is a worker, not an "
                        "aggregator",
                        ctx ? ctx->env.rank : -1);
    }
    dd_status_t status = dd_agg_serve(&ctx->agg_env);
    if (status == DD_ERR_CANCELED && dd_context_agg_dropped(ctx)) {
        return status; /* dropped: not the job's fault, which goes on */
    }
    return dd_watch_fault(ctx, status);
}
