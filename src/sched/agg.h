/*
 * Aggregation: a BytePS-style summation service. Each synced message (a
 * layer or a fused group) is cut into chunks; every chunk has one home,
 * chosen the same way on every worker, that sums the workers' copies and
 * sends the average back. Homes are the aggregator ranks and, for the share
 * the BytePS optimum gives them, the workers themselves.
 *
 * The load split (BytePS, OSDI 2020, section 3.1): with n workers and k
 * aggregators on links of bandwidth B, a fraction x of the bytes goes to the
 * aggregators and 1 - x to the workers' own summation. A worker then sends
 * (and receives) xM + 2(1 - x)M(n - 1)/n bytes, an aggregator nxM/k; the
 * two are equal, which is the optimum, at
 *     x = 2k(n - 1) / (n^2 + kn - 2k)   (x = 1 when k >= n),
 * and a sync of M bytes takes 2n(n - 1)M / ((n^2 + kn - 2k)B): the ring
 * allreduce's 2(n - 1)M/(nB) at k = 0, and push/pull's M/B at k = n.
 *
 * Summation order: a home adds the workers' copies of a chunk in worker
 * order (worker 0 first), whatever order they arrive in, into a float
 * accumulator, then divides by n; so the result is the same on every run
 * and, for f32, equals that sum computed in that order.
 */
#ifndef DD_SCHED_AGG_H
#define DD_SCHED_AGG_H

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

struct dd_context;
typedef struct dd_agg dd_agg_t;
typedef struct dd_agg_server dd_agg_server_t;

/** The aggregators' share of the bytes for n workers and k aggregators. */
double dd_agg_share(int n_workers, int n_aggregators);

/** Modeled seconds of a sync of bytes at link rate bytes_per_s. */
double dd_agg_model_s(int n_workers, int n_aggregators, double bytes,
                      double bytes_per_s);

/**
 * Chooses the home of each chunk: the one whose load, counting this chunk,
 * is lowest relative to its share. Pure and deterministic, so every worker
 * makes the same choice. load[h] is updated.
 */
int dd_agg_pick_home(const double *weight, double *load, int n_homes,
                     size_t bytes);

/** Sets up the worker side (client and its own home); workers only. */
dd_status_t dd_agg_create(struct dd_context *ctx, dd_agg_t **agg_p);

struct dd_sync_job;

/** Averages buf across workers through the homes, and returns when done. */
dd_status_t dd_agg_route(void *arg, const struct dd_sync_job *job, void *buf,
                         size_t count, dd_dtype_t dtype,
                         dd_mem_type_t mem_type);

/**
 * The same in two halves, so that the engine overlaps consecutive messages:
 * the next one's pushes go out while the last averages of the previous one
 * come back. dd_agg_msg_start takes the message; dd_agg_test_msg moves every
 * started message and returns DD_OK once *handle's averages are in place,
 * DD_INPROGRESS before, or the error. *busy_p: something moved.
 */
dd_status_t dd_agg_msg_start(void *arg, const struct dd_sync_job *job,
                             void *buf, size_t count, dd_dtype_t dtype,
                             dd_mem_type_t mem_type, void **handle_p);
dd_status_t dd_agg_test_msg(void *arg, void *handle, int *busy_p);

/** Tells every aggregator this worker is done, and frees. */
void dd_agg_destroy(dd_agg_t *agg);

/** Tells every aggregator this worker is done, for a worker that never
 *  created its aggregation side. */
void dd_agg_goodbye_all(struct dd_context *ctx);

/* ---- the summation of one home (agg_server.c) ---- */

typedef struct dd_agg_transport dd_agg_transport_t;

/**
 * A home's server: receives the workers' copies of the chunks homed here,
 * sums them in worker order and sends the average back. local_worker is
 * this process's worker index when it is a worker (its own copy is added
 * with dd_agg_server_local), or -1 on an aggregator.
 */
dd_status_t dd_agg_server_create(struct dd_context *ctx,
                                 dd_agg_transport_t *transport,
                                 int local_worker, dd_agg_server_t **server_p);

/** Progresses receives, sums and sends once. *busy_p: something moved. */
dd_status_t dd_agg_server_progress(dd_agg_server_t *s, int *busy_p);

/** Why the server failed (empty while it has not). */
const char *dd_agg_server_why(const dd_agg_server_t *s);

/** Whether no worker can send any more (all said goodbye or failed). */
int dd_agg_server_streams_closed(const dd_agg_server_t *s);

/** Number of workers that said goodbye. */
int dd_agg_server_byes(const dd_agg_server_t *s);

/**
 * Whether every chunk numbered below upto that the server took in has been
 * answered and its answer has left. Chunks of later messages may already
 * be waiting for this worker's own copy, so a worker asks only about the
 * chunks it has pushed.
 */
int dd_agg_server_idle(const dd_agg_server_t *s, uint64_t upto);

void dd_agg_server_destroy(dd_agg_server_t *s);

#endif
