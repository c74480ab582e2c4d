/*
 * An aggregator rank's loop: it holds no model; it sums the chunks the
 * workers push and sends the averages back, until every worker has said
 * goodbye (at its dd_finalize). After a failure it keeps answering with
 * the error, so that no worker waits, for up to DREAMDDP_TIMEOUT_S, then
 * returns the error.
 */
#include "agg/wire.h"
#include "core/log.h"
#include "core/status.h"
#include "core/time.h"

#include <stdio.h>

/* Cut off or frozen past DREAMDDP_AGG_LOST_AFTER_S: the workers went on
 * without it and never come back. Not the job's fault: one warning, and
 * DD_ERR_CANCELED with the same words for the caller. */
static dd_status_t dd_agg_serve_dropped(const dd_agg_env_t *env)
{
    char why[256];

    snprintf(why, sizeof(why),
             "aggregator rank %d was declared lost (its heartbeat stood "
             "still for %.1f s: frozen, or its link was down): the workers "
             "went on without it; it leaves",
             env->job->rank, env->lost_after_s);
    dd_log_warn(DD_SUBSYS_AGG, "%s", why);
    dd_last_error_set(why);
    return DD_ERR_CANCELED;
}

dd_status_t dd_agg_serve(const dd_agg_env_t *env)
{
    dd_agg_transport_t t;
    dd_agg_server_t *s;
    dd_status_t status;

    if ((status = dd_agg_transport_init(env, &t)) != DD_OK ||
        (status = dd_agg_server_create(env, &t, -1, &s)) != DD_OK) {
        return status;
    }
    dd_log_info(DD_SUBSYS_AGG, "aggregator rank %d serving %d workers",
                env->job->rank, env->job->n_workers);
    if (env->survive) {
        /* Its loss is survived: the store's host declares it lost
         * (src/boot/store_server.c) instead of stopping the job. */
        char key[64];
        snprintf(key, sizeof(key), DD_STORE_EXPENDABLE_KEY "%d",
                 env->job->rank);
        dd_store_set(env->job->store, key, "1", 1);
    }
    double nap = 20e-6, failed_at = 0, looked = dd_time_now();
    while (1) {
        int busy = 0;
        status = dd_agg_server_progress(s, &busy);
        if (env->survive && dd_time_now() - looked > 0.25) {
            looked = dd_time_now();
            if (dd_agg_is_lost(env->job->store, env->job->rank)) {
                dd_agg_server_destroy(s);
                return dd_agg_serve_dropped(env);
            }
        }
        if (dd_abort_raised(env->job->abort)) {
            /* A lost peer: the workers stop too, none waits for answers. */
            status = dd_abort_error(env->job->abort, DD_SUBSYS_AGG);
            dd_agg_server_destroy(s);
            return status;
        }
        if (dd_agg_server_byes(s) == env->job->n_workers &&
            dd_agg_server_idle(s, UINT64_MAX)) {
            break;
        }
        if (status != DD_OK && dd_agg_server_streams_closed(s)) {
            break; /* every worker said goodbye or is gone */
        }
        if (status != DD_OK && failed_at == 0) {
            failed_at = dd_time_now();
        }
        if (failed_at > 0 && dd_time_now() - failed_at > env->job->timeout_s) {
            break;
        }
        if (busy) {
            nap = 20e-6;
            continue;
        }
        dd_agg_idle(&t, nap); /* a message arriving ends it */
        nap = nap * 2 < 1e-3 ? nap * 2 : 1e-3;
    }
    if (status != DD_OK) {
        /* Later errors (sends to workers that left) are consequences: the
         * first failure is the one to report. */
        dd_last_error_set(dd_agg_server_why(s));
    }
    dd_agg_server_destroy(s);
    if (status == DD_OK) {
        dd_log_info(DD_SUBSYS_AGG, "aggregator rank %d: every worker left",
                    env->job->rank);
    }
    return status;
}
