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
#ifndef DD_AGG_AGG_H
#define DD_AGG_AGG_H

#include "boot/job.h"

#include <dreamddp.h>
#include <dreamddp/backend.h>

#include <stddef.h>
#include <stdint.h>

/**
 * What aggregation is handed by src/api: the job, the chunk size
 * (DREAMDDP_CHUNK_BYTES) and the point-to-point backend it runs over. It
 * must outlive every aggregation object made from it.
 */
typedef struct {
    const dd_job_t *job;
    size_t chunk_bytes;
    /* What a sum is divided by (0: the job's workers). The hierarchical
     * route's job has the hosts' leaders as workers, each pushing its
     * host's sum: the average is over every worker of every host. */
    int avg_over;
    const dd_backend_ops_t *ops; /* NULL: no point-to-point backend */
    dd_backend_t *backend;
    /* DREAMDDP_AGG_LOSS=survive (client.c): a lost aggregator's chunks
     * move to the homes left. The watch (src/api/watch.c) declares an
     * aggregator lost in the store (dd_agg_declare_lost) and keeps downs,
     * the count of those declared, read atomically here. */
    int survive;
    double lost_after_s; /* DREAMDDP_AGG_LOST_AFTER_S */
    int64_t downs;
} dd_agg_env_t;

/* A lost aggregator's keys in the store: boot/store.h's DD_STORE_LOST_KEY,
 * DD_STORE_LOSTS_KEY and DD_STORE_EXPENDABLE_KEY. */

/** Declares aggregator rank lost in the store, once whoever asks first:
 *  its why, and the count of lost ones. 1 when this call declared it. */
int dd_agg_declare_lost(dd_store_t *store, int rank, const char *why);

/** Whether the store says rank was declared lost. */
int dd_agg_is_lost(dd_store_t *store, int rank);

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

/** The home dd_agg_pick_home would choose, with load left as it is. */
int dd_agg_next_home(const double *weight, const double *load, int n_homes,
                     size_t bytes);

/** Sets up the worker side (client and its own home); workers only. */
dd_status_t dd_agg_create(const dd_agg_env_t *env, dd_agg_t **agg_p);

/** What a message is, as every worker must agree: its step and first
 * layer, which every header carries and messages name, and a digest of
 * the rest (what it averages, every layer in it): a home sums no two
 * pushes of one chunk whose ids differ. */
typedef struct {
    uint64_t step;
    uint32_t layer;
    uint64_t what;
} dd_agg_id_t;

/**
 * Averages a message across the workers through the homes, in two halves,
 * so that the engine overlaps consecutive messages: the next one's pushes
 * go out while the last averages of the previous one come back.
 * dd_agg_msg_start takes the message (its id goes into every header);
 * dd_agg_test_msg moves every started message and returns DD_OK once *handle's
 * averages are in place, DD_INPROGRESS before, or the error. *busy_p: something
 * moved. Unless they are NULL, *input_bad and *result_bad become 1 if a
 * value sent, or of the average landed, is not finite (DREAMDDP_CHECK_FINITE),
 * read in the copies the client makes anyway (the copy for survival, the
 * landing) or else as each chunk leaves; they must outlive the message.
 */
dd_status_t dd_agg_msg_start(dd_agg_t *agg, const dd_agg_id_t *id, void *buf,
                             size_t count, dd_dtype_t dtype,
                             dd_mem_type_t mem_type, int *input_bad,
                             int *result_bad, void **handle_p);
dd_status_t dd_agg_test_msg(dd_agg_t *agg, void *handle, int *busy_p);

/**
 * A sparse message: a worker's pieces of a message of count f32 elements
 * (topk's values and their indices). The homes scatter every worker's
 * pieces into zeroed f32 chunks in worker order and send back the
 * average, as pairs or dense, whichever is smaller; every worker gets the
 * same bytes. Chunks are cut by wire_estimate, which must be the same on
 * every worker; out may be the buffer the pieces were taken from.
 */
typedef struct {
    size_t count;         /* the message's dense f32 elements */
    size_t nnz;           /* pairs */
    const size_t *index;  /* [nnz], increasing, below count */
    const float *value;   /* [nnz] */
    float *out;           /* [count]: the average lands here */
    size_t wire_estimate; /* bytes of one worker's encoding */
    size_t *wire_bytes_p; /* the data bytes pushed to and pulled from
                             other ranks are added here (headers are the
                             route's own traffic, as on every route) */
} dd_agg_sparse_msg_t;

/** Starts a sparse message (see dd_agg_msg_start; dd_agg_test_msg moves
 *  it). The pairs are copied: they may be freed once it returns. */
dd_status_t dd_agg_sparse_start(dd_agg_t *agg, const dd_agg_id_t *id,
                                const dd_agg_sparse_msg_t *msg,
                                void **handle_p);

/**
 * The last change of the homes a lost aggregator made (dd_agg_recover),
 * for the timeline: its one-line description and when it was agreed.
 * Returns 1 and clears it when there is one. Any thread.
 */
int dd_agg_take_event(dd_agg_t *agg, char *what, size_t size, double *at_p);

/** Tells every aggregator this worker is done, and frees. */
void dd_agg_destroy(dd_agg_t *agg);

/** Tells every aggregator this worker is done, for a worker that never
 *  created its aggregation side. */
void dd_agg_goodbye_all(const dd_agg_env_t *env);

/**
 * What an aggregator rank does: sums the chunks the workers push and sends
 * the averages back until every worker has said goodbye; after a failure
 * it keeps answering with the error for up to the timeout, then returns it.
 */
dd_status_t dd_agg_serve(const dd_agg_env_t *env);

/* ---- the summation of one home (agg_server.c) ---- */

typedef struct dd_agg_transport dd_agg_transport_t;

/**
 * A home's server: receives the workers' copies of the chunks homed here,
 * sums them in worker order and sends the average back. local_worker is
 * this process's worker index when it is a worker (its own copy is added
 * with dd_agg_server_local), or -1 on an aggregator.
 */
dd_status_t dd_agg_server_create(const dd_agg_env_t *env,
                                 dd_agg_transport_t *transport,
                                 int local_worker, dd_agg_server_t **server_p);

/** Progresses receives, sums and sends once. *busy_p: something moved. */
dd_status_t dd_agg_server_progress(dd_agg_server_t *s, int *busy_p);

/** Why the server failed (empty while it has not). */
const char *dd_agg_server_why(const dd_agg_server_t *s);

/** Whether no worker can send any more (all said goodbye or failed). */
int dd_agg_server_streams_closed(const dd_agg_server_t *s);

/** Number of distinct workers that said goodbye (repeats count once). */
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
