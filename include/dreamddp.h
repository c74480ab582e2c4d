/*
 * dreamddp: keeps the model replicas of a data-parallel training job in sync.
 *
 * This is the public API. It is plain C99, includes no private, CUDA or C++
 * header, and everything it declares is exported with DD_API.
 */
#ifndef DREAMDDP_H
#define DREAMDDP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks a symbol as part of the library's exported interface. */
#if defined(__GNUC__)
#define DD_API __attribute__((visibility("default")))
#else
#define DD_API
#endif

/** Library version, as "major.minor.patch". */
#define DD_VERSION_MAJOR 0
#define DD_VERSION_MINOR 1
#define DD_VERSION_PATCH 0

/**
 * Every status, as X(NAME, value, "description"). DD_OK is zero,
 * DD_INPROGRESS is one, errors are negative. Generates dd_status_t and
 * dd_status_string().
 */
#define DD_STATUS_LIST(X)                                                      \
    X(DD_OK, 0, "success")                                                     \
    X(DD_INPROGRESS, 1, "operation in progress")                               \
    X(DD_ERR_NO_MEMORY, -1, "out of memory")                                   \
    X(DD_ERR_INVALID_PARAM, -2, "invalid parameter")                           \
    X(DD_ERR_INVALID_CONFIG, -3, "invalid configuration variable")             \
    X(DD_ERR_TIMED_OUT, -4, "timed out")                                       \
    X(DD_ERR_UNREACHABLE, -5, "peer or store unreachable")                     \
    X(DD_ERR_REFUSED, -6, "connection refused: job token mismatch")            \
    X(DD_ERR_IO, -7, "input/output error")                                     \
    X(DD_ERR_NOT_FOUND, -8, "not found")                                       \
    X(DD_ERR_MISMATCH, -9, "ranks disagree")                                   \
    X(DD_ERR_PEER_LOST, -10, "peer lost")                                      \
    X(DD_ERR_UNSUPPORTED, -11, "not supported")                                \
    X(DD_ERR_NO_DEVICE, -12, "no such device")                                 \
    X(DD_ERR_STATE, -13, "call out of order")                                  \
    X(DD_ERR_MESSAGE, -14, "malformed message")                                \
    X(DD_ERR_BACKEND, -15, "backend error")                                    \
    X(DD_ERR_CANCELED, -16, "canceled")                                        \
    X(DD_ERR_INTERNAL, -17, "internal error")

#define DD_STATUS_ENUM_ITEM_(name, value, desc) name = value,

/** Result of every fallible call: DD_OK, DD_INPROGRESS, or a negative error. */
typedef enum { DD_STATUS_LIST(DD_STATUS_ENUM_ITEM_) } dd_status_t;

#undef DD_STATUS_ENUM_ITEM_

/**
 * A short description of a status ("timed out"). Never NULL; an unknown value
 * gives "unknown status". Any thread.
 */
DD_API const char *dd_status_string(dd_status_t status);

/**
 * The message of the last error that this thread saw inside the library: the
 * same text that was logged, naming the rank, peer, layer, variable or value
 * at fault. Empty when there was none. Valid until the thread's next call.
 */
DD_API const char *dd_last_error(void);

/** The library's version string ("0.1.0"). Any thread. */
DD_API const char *dd_version_string(void);

/** Role of a rank in the job. */
typedef enum {
    DD_ROLE_WORKER = 0,    /**< holds a model replica */
    DD_ROLE_AGGREGATOR = 1 /**< CPU summation service, holds no replica */
} dd_role_t;

/** An initialized dreamddp context: one per process and job. */
typedef struct dd_context *dd_context_h;

/** Bits of dd_init_params_t::field_mask. */
enum {
    DD_INIT_FIELD_ROLE = 1u << 0 /**< dd_init_params_t::role is set */
};

/**
 * Optional parameters of dd_init. Fields not named in field_mask are ignored,
 * so fields can be added without breaking the ABI.
 */
typedef struct {
    uint64_t field_mask; /**< DD_INIT_FIELD_* bits */
    dd_role_t role;      /**< this process's role; overrides DD_ROLE */
} dd_init_params_t;

/**
 * Starts dreamddp in this process: parses every DD_* variable, detects rank
 * and world size (DD_*, torchrun, Open MPI, Slurm or PMI variables), joins the
 * job's rendezvous store and waits until every rank has joined.
 *
 * @param params  optional parameters, or NULL.
 * @param ctx_p   the new context, set only on success.
 * @return DD_OK; DD_ERR_INVALID_CONFIG for a bad DD_* value or contradictory
 *         launcher variables; DD_ERR_UNREACHABLE when the store's master
 *         cannot be reached; DD_ERR_REFUSED when it refuses this job's token;
 *         DD_ERR_TIMED_OUT when not every rank joined within DD_TIMEOUT_S;
 *         DD_ERR_MISMATCH when ranks disagree on the world size.
 *         dd_last_error() has the details.
 * Call once per job from one thread.
 */
DD_API dd_status_t dd_init(const dd_init_params_t *params, dd_context_h *ctx_p);

/**
 * Leaves the job: waits (up to DD_TIMEOUT_S) until every rank has reached
 * dd_finalize, then frees the context. The rank that hosts the store keeps it
 * up until the others have left.
 *
 * @return DD_OK, or DD_ERR_TIMED_OUT / DD_ERR_PEER_LOST when some rank never
 *         arrived; the context is freed in every case.
 */
DD_API dd_status_t dd_finalize(dd_context_h ctx);

/** This process's rank, 0 .. world size - 1. */
DD_API int dd_rank(dd_context_h ctx);

/** Number of ranks in the job, workers and aggregators together. */
DD_API int dd_world_size(dd_context_h ctx);

/** This process's rank among the ranks on its host. */
DD_API int dd_local_rank(dd_context_h ctx);

/** Number of ranks on this process's host. */
DD_API int dd_local_size(dd_context_h ctx);

/** This process's role. */
DD_API dd_role_t dd_role(dd_context_h ctx);

/** The role of any rank of the job (DD_ROLE_WORKER for an invalid rank). */
DD_API dd_role_t dd_rank_role(dd_context_h ctx, int rank);

/** Number of worker ranks in the job. */
DD_API int dd_num_workers(dd_context_h ctx);

/**
 * Waits until every rank of the job has called dd_barrier.
 *
 * @return DD_OK; DD_ERR_TIMED_OUT naming the ranks that did not arrive within
 *         DD_TIMEOUT_S; DD_ERR_PEER_LOST when the store went away.
 * One thread per context at a time.
 */
DD_API dd_status_t dd_barrier(dd_context_h ctx);

/** Flags of dd_config_print. */
enum {
    DD_CONFIG_PRINT_MARKDOWN = 1u << 0 /**< a Markdown table (README) */
};

/**
 * Prints every DD_* variable the library reads: name, default, what it
 * accepts, its documentation, and the value in force in this process's
 * environment (or why it is invalid).
 *
 * @param stream  where to print.
 * @param flags   DD_CONFIG_PRINT_* bits.
 * @return DD_OK, or DD_ERR_IO when the stream fails. Any thread.
 */
DD_API dd_status_t dd_config_print(FILE *stream, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* DREAMDDP_H */
