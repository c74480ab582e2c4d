/*
 * The job's watch (watch.c): a heartbeat and the job's abort, so that a
 * lost or frozen peer stops every rank with one message naming it.
 */
#ifndef DD_API_WATCH_H
#define DD_API_WATCH_H

#include <dreamddp.h>

typedef struct dd_watch dd_watch_t;

/** Seconds between two beats for a job's DREAMDDP_TIMEOUT_S. */
double dd_watch_period(double timeout_s);

/** Starts the watch thread, once the store is up; the store's waits and
 * the job (dd_job_t::abort) then watch ctx->abort. */
dd_status_t dd_watch_start(dd_context_h ctx);

/** Stops the thread (before the store closes). */
void dd_watch_stop(dd_context_h ctx);

/** Says this rank leaves on purpose (dd_finalize), so that the store's
 * server does not take its closing connection for a lost rank. */
void dd_watch_leave(dd_context_h ctx);

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
