/*
 * The clock agreement of dd_model_commit: NTP-style rounds between each
 * worker and rank 0's clock, each estimated by core/clock.c, the shortest
 * round trip kept. Over the TCP store, rank 0's store server answers: a
 * round is one request (DD_STORE_OP_TIME), every worker's at once, and
 * rank 0 does nothing. Rank 0 used to answer the workers' pings over the
 * store one worker after another, four store messages a round: at 128
 * ranks on one 2-core host the last worker was done 0.6 s after the
 * commit began, now 0.3 to 0.4 s (bench/NOTES.md). The file store has no
 * server, so there rank 0 still answers each worker in turn. It must not
 * read the clock anywhere but dd_clock_realtime_us, so that
 * DREAMDDP_TEST_CLOCK_SKEW_US reaches every read (rank 0's reaches its
 * store server through dd_store_server_params_t).
 */
#include "api/clock_agree.h"
#include "core/clock.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank 0: waits for each of worker's pings and answers with its clock. */
static dd_status_t dd_clock_answer(dd_context_h ctx, int worker)
{
    double skew = ctx->sched_opts.clock_skew_us;
    char key[64];

    for (int k = 0; k < DD_CLOCK_ROUNDS; k++) {
        void *ping;
        size_t len;
        snprintf(key, sizeof(key), "dd/clock/%d/%d", worker, k);
        dd_status_t status = dd_store_get(ctx->store, key, &ping, &len);
        if (status != DD_OK) {
            return status;
        }
        free(ping);
        double now = dd_clock_realtime_us(skew);
        snprintf(key, sizeof(key), "dd/clock/%d/%d/t", worker, k);
        status = dd_store_set(ctx->store, key, &now, sizeof(now));
        if (status != DD_OK) {
            return status;
        }
    }
    return DD_OK;
}

/* Another worker: the rounds with rank 0's store server. */
static dd_status_t dd_clock_ask_server(dd_context_h ctx,
                                       dd_clock_sample_t *samples)
{
    double skew = ctx->sched_opts.clock_skew_us;

    for (int k = 0; k < DD_CLOCK_ROUNDS; k++) {
        samples[k].send_us = dd_clock_realtime_us(skew);
        dd_status_t status = dd_store_clock(ctx->store, &samples[k].peer_us);
        samples[k].recv_us = dd_clock_realtime_us(skew);
        if (status != DD_OK) {
            return status;
        }
    }
    return DD_OK;
}

/* Another worker: the rounds with rank 0 over keys of the store. */
static dd_status_t dd_clock_ask(dd_context_h ctx, dd_clock_sample_t *samples)
{
    double skew = ctx->sched_opts.clock_skew_us;
    int rank = ctx->env.rank;
    char key[64];

    for (int k = 0; k < DD_CLOCK_ROUNDS; k++) {
        void *answer;
        size_t len;
        char one = 1;
        samples[k].send_us = dd_clock_realtime_us(skew);
        snprintf(key, sizeof(key), "dd/clock/%d/%d", rank, k);
        dd_status_t status = dd_store_set(ctx->store, key, &one, 1);
        if (status != DD_OK) {
            return status;
        }
        snprintf(key, sizeof(key), "dd/clock/%d/%d/t", rank, k);
        status = dd_store_get(ctx->store, key, &answer, &len);
        samples[k].recv_us = dd_clock_realtime_us(skew);
        if (status != DD_OK) {
            return status;
        }
        if (len != sizeof(double)) {
            free(answer);
            return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_BOOT,
                            "clock agreement: rank 0's answer %s holds %zu "
                            "bytes, expected %zu",
                            key, len, sizeof(double));
        }
        memcpy(&samples[k].peer_us, answer, sizeof(double));
        free(answer);
    }
    return DD_OK;
}

dd_status_t dd_clock_agree(dd_context_h ctx, double *offset_us_p,
                           double *uncertainty_us_p)
{
    dd_clock_sample_t samples[DD_CLOCK_ROUNDS];
    double offset = 0, uncertainty = 0;
    dd_status_t status = DD_OK;

    /* Every rank has the same kind of store, so all take the same way. */
    int served = ctx->store->ops->clock != NULL;

    if (ctx->env.rank == 0) {
        for (int i = 1; !served && i < ctx->n_workers && status == DD_OK; i++) {
            status = dd_clock_answer(ctx, ctx->worker_ranks[i]);
        }
    } else {
        status = served ? dd_clock_ask_server(ctx, samples)
                        : dd_clock_ask(ctx, samples);
        if (status == DD_OK &&
            dd_clock_offset_estimate(samples, DD_CLOCK_ROUNDS, &offset,
                                     &uncertainty) != 0) {
            status = dd_error(DD_ERR_INTERNAL, DD_SUBSYS_BOOT,
                              "clock agreement: every round trip with rank 0 "
                              "was negative (the wall clock stepped back)");
        }
    }
    if (status != DD_OK) {
        return status;
    }
    dd_log_debug(DD_SUBSYS_BOOT,
                 "wall clock: rank 0's is this one's %+.1f us (within %.1f us)",
                 offset, uncertainty);
    *offset_us_p = offset;
    *uncertainty_us_p = uncertainty;
    return DD_OK;
}
