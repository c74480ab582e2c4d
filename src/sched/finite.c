/*
 * DREAMDDP_CHECK_FINITE: a sync whose average holds NaN or Inf is said,
 * once per layer per window, naming the layers, the step and the workers
 * whose own values were not finite (warn), or fails the call
 * that drained it with DD_ERR_NUMERIC (error). On the workers' allreduce
 * the check rides on passes made anyway: each worker divides its values
 * before the sum and counts itself beside the collective's digest if any
 * was not finite, and a sum of divided terms is finite exactly when every
 * term was (route/coll.c; a codec reads its encoding, route/encode.c);
 * elsewhere the engine reads the values as they leave and the average as
 * it lands (engine.c, on its own thread). Here, on the application's
 * thread, the workers say through the store which of them sent non-finite
 * values, each publishing its own flag and reading the others' for at most
 * a second, so that no worker waits on another's progress. Host float
 * buffers only.
 */
#include "core/log.h"
#include "core/time.h"
#include "sched/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The worker ranks whose values were not finite, as "worker rank 2" or
 * "worker ranks 1, 3", or what else is known, into out. */
static void dd_sched_finite_who(dd_sched_t *sched, const dd_sync_job_t *job,
                                char *out, size_t size)
{
    const dd_job_t *jb = sched->env.job;
    dd_store_t *store = jb->store;
    char key[96], ranks[192] = "", silent[192] = "";
    size_t o = 0, q = 0;
    int n_bad = 0;

    snprintf(key, sizeof(key), "dd/finite/%llu/%zu/%d",
             (unsigned long long)job->step, job->layers[0], jb->rank);
    dd_store_set(store, key, job->input_bad ? "1" : "0", 1);
    double until = dd_time_now() + 1.0;
    for (int w = 0; w < jb->n_workers; w++) {
        int r = jb->worker_ranks[w];
        void *v = NULL;
        size_t len = 0;
        double left = until - dd_time_now();
        snprintf(key, sizeof(key), "dd/finite/%llu/%zu/%d",
                 (unsigned long long)job->step, job->layers[0], r);
        if (dd_store_get_within(store, key, left > 0.01 ? left : 0.01, &v,
                                &len) != DD_OK) {
            q += (size_t)snprintf(silent + q,
                                  q < sizeof(silent) ? sizeof(silent) - q : 0,
                                  "%s%d", q ? ", " : "", r);
            continue;
        }
        if (len == 1 && ((char *)v)[0] == '1' && o < sizeof(ranks)) {
            o += (size_t)snprintf(ranks + o, sizeof(ranks) - o, "%s%d",
                                  n_bad ? ", " : "", r);
            n_bad++;
        }
        free(v);
    }
    if (n_bad > 0) {
        snprintf(out, size, "the values of worker rank%s %s were not finite",
                 n_bad > 1 ? "s" : "", ranks);
    } else if (q == 0) {
        snprintf(out, size,
                 "every worker's values were finite (their sum overflowed)");
    } else {
        snprintf(out, size, "worker rank(s) %s did not say within 1 s", silent);
    }
}

dd_status_t dd_sched_finite_report(dd_sched_t *sched, const dd_sync_job_t *done)
{
    dd_status_t status = DD_OK;
    unsigned h = sched->strategy.window > 0 ? sched->strategy.window : 1;

    for (const dd_sync_job_t *job = done; job != NULL; job = job->next) {
        if (!job->result_bad || job->n_layers == 0) {
            continue;
        }
        uint64_t window = job->step / h + 1;
        struct dd_layer *first = sched->layers[job->layers[0]];
        if (first->finite_window == window) {
            continue; /* said once this window */
        }
        for (size_t k = 0; k < job->n_layers; k++) {
            sched->layers[job->layers[k]]->finite_window = window;
        }
        char who[320], layers[320];
        dd_sched_finite_who(sched, job, who, sizeof(who));
        size_t o = (size_t)snprintf(layers, sizeof(layers), "layer%s",
                                    job->n_layers > 1 ? "s" : "");
        for (size_t k = 0; k < job->n_layers && k < 3; k++) {
            o += (size_t)snprintf(layers + o, sizeof(layers) - o, "%s '%s'",
                                  k ? "," : "",
                                  sched->layers[job->layers[k]]->name);
        }
        if (job->n_layers > 3) {
            snprintf(layers + o, sizeof(layers) - o, " and %zu others",
                     job->n_layers - 3);
        }
        if (sched->opts.check_finite == DD_CHECK_FINITE_ERROR) {
            status = dd_error(DD_ERR_NUMERIC, DD_SUBSYS_SCHED,
                              "step %llu: the average of %s holds NaN or "
                              "Inf: %s (DREAMDDP_CHECK_FINITE=error)",
                              (unsigned long long)job->step, layers, who);
        } else {
            dd_log_warn(DD_SUBSYS_SCHED,
                        "step %llu: the average of %s holds NaN or Inf: %s "
                        "(said once a window; DREAMDDP_CHECK_FINITE=error "
                        "makes it an error)",
                        (unsigned long long)job->step, layers, who);
        }
    }
    return status;
}
