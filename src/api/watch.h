/*
 * The job's watch (watch.c): a heartbeat and the job's abort, so that a
 * lost or frozen peer stops every rank with one message naming it.
 */
#ifndef DD_API_WATCH_H
#define DD_API_WATCH_H

#include <dreamddp.h>

typedef struct dd_watch dd_watch_t;

/** Seconds between two beats for a job's DREAMDDP_TIMEOUT_S and size: a
 * twelfth of the timeout, 20 ms to 0.5 s, longer past 32 ranks so that
 * the store serves at most 64 beats a second, but never past a twelfth of
 * the timeout nor, lost_after_s > 0, past a quarter of it (the stillness
 * that loses an aggregator under DREAMDDP_AGG_LOSS=survive). */
double dd_watch_period(double timeout_s, int world_size, double lost_after_s);

/** The period of ctx's job: its timeout, size and aggregator loss. */
double dd_watch_ctx_period(dd_context_h ctx);

/** Starts the watch thread, once the store is up; the store's waits and
 * the job (dd_job_t::abort) then watch ctx->abort. */
dd_status_t dd_watch_start(dd_context_h ctx);

/** Stops the thread (before the store closes). */
void dd_watch_stop(dd_context_h ctx);

/** Says this rank leaves on purpose (dd_finalize), so that the store's
 * server does not take its closing connection for a lost rank. */
void dd_watch_leave(dd_context_h ctx);

/**
 * A call that every worker makes in the same order (dd_step_end,
 * dd_sync_all, the public collectives, dd_barrier) begins on a worker;
 * what names it for the message ("dd_step_end of step 12"). While it
 * waits past a watch period, the watch looks for a worker that left the
 * job (dd_watch_left) before making it, and stops the job naming both.
 */
void dd_watch_call_begin(dd_context_h ctx, const char *what);

/** The call ended with status: dd_watch_dropped(ctx, dd_watch_fault(ctx,
 *  status)). */
dd_status_t dd_watch_call_end(dd_context_h ctx, dd_status_t status);

/** Under DREAMDDP_ELASTIC=yes, an error of a rank the job went on without
 *  becomes DD_ERR_CANCELED, saying so (boot/generation.c); any other
 *  status is returned as it is. */
dd_status_t dd_watch_dropped(dd_context_h ctx, dd_status_t status);

/** dd_finalize on a worker: publishes how many such calls it made and
 * its steps (dd/left/RANK), before its last barrier. */
void dd_watch_left(dd_context_h ctx, uint64_t steps);

/** On rank 0 after an abort, before its store closes: waits (at most
 * DREAMDDP_TIMEOUT_S) until every rank the reason does not name as lost
 * has read it or left. */
void dd_watch_linger(dd_context_h ctx);

/**
 * After a call of ctx failed with status: when it may be a lost or frozen
 * peer (a timeout, an I/O, backend or peer error) or the job is aborted,
 * finds which rank stopped (census of heartbeats), publishes the finding
 * unless another rank did first, and returns DD_ERR_PEER_LOST with the
 * job's one message as this thread's error. Other statuses come back as
 * they are. Takes up to three watch periods.
 */
dd_status_t dd_watch_fault(dd_context_h ctx, dd_status_t status);

#endif
