/*
 * The ABI between libdreamddp and its backend modules (dd_backend_<name>.so).
 *
 * A module exports one function, dd_backend_ops_get(), that returns its
 * dd_backend_ops_t. The core dlopens every module it finds, checks
 * abi_version, asks query() whether the module can run on this machine,
 * calls init() with a dd_backend_services_t, and from then on starts
 * operations through the table. Modules never call the core's internals:
 * everything they need from it (the rendezvous store, logging, error
 * reporting, the job's geometry) comes through the services struct.
 *
 * Plain C99; the public enums it uses (dd_dtype_t, dd_reduce_op_t,
 * dd_mem_type_t, dd_coll_t) are in dreamddp.h, because applications and the
 * scheduler use them as well. The point-to-point operations, which only the
 * core starts, are named here (dd_backend_op_t), not in dreamddp.h.
 */
#ifndef DREAMDDP_BACKEND_H
#define DREAMDDP_BACKEND_H

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Version of this ABI. The core refuses a module whose table carries
 * another version. Bump it on any change to the structs or slots below.
 */
#define DD_BACKEND_ABI_VERSION 6u

/** Name of the function every module exports (dd_backend_entry_fn_t). */
#define DD_BACKEND_ENTRY "dd_backend_ops_get"

/** Largest world size a backend must support; ranks fit in 16 bits. */
#define DD_BACKEND_MAX_WORLD 65536

/** Most streams dd_backend_services_t::streams may ask for. */
#define DD_BACKEND_MAX_STREAMS 8

/** Tags of send/recv carry this many significant bits. */
#define DD_BACKEND_TAG_BITS 48

/** A module's instance (one per dd context), defined by the module. */
typedef struct dd_backend dd_backend_t;

/** An operation in flight, defined by the module. */
typedef struct dd_backend_request dd_backend_request_t;

/** Log levels of dd_backend_services_t::log, named as DREAMDDP_LOG_LEVEL's. */
typedef enum {
    DD_BACKEND_LOG_ERROR = 0,
    DD_BACKEND_LOG_WARN,
    DD_BACKEND_LOG_INFO,
    DD_BACKEND_LOG_DEBUG,
    DD_BACKEND_LOG_TRACE
} dd_backend_log_level_t;

/**
 * What the core lends a module for the lifetime of its instance: the job's
 * geometry, the rendezvous store (keys are private to the module: the core
 * prefixes them with the module's name), logging and error reporting.
 * Every function may be called from any thread, one call at a time per
 * instance; none may be called after finalize() returns.
 */
typedef struct dd_backend_services {
    uint32_t abi_version; /**< DD_BACKEND_ABI_VERSION of the core */
    int rank;             /**< this process's rank */
    int world_size;       /**< ranks in the communicator: the whole job */
    int local_rank;       /**< rank among the ranks on this host */
    int local_size;       /**< ranks on this host */
    double timeout_s;     /**< bound of every wait (DREAMDDP_TIMEOUT_S) */
    /** Network interface the topology chose (e.g. "eth0"), or NULL when
     *  none was chosen: the backend then uses its own default. */
    const char *ifname;
    /** That interface's RDMA device (e.g. "mlx5_0") when it is InfiniBand
     *  or RoCE, or NULL when it has none or no interface was chosen. The
     *  module turns ifname and rdma into its own library's setting, unless
     *  the user set that library's variable (UCX_NET_DEVICES,
     *  GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, NCCL_IB_HCA); the core sets
     *  no other library's variable. */
    const char *rdma;
    int rdma_port; /**< rdma's port (1-based); 0 when rdma is NULL */
    /** Connections (streams) to open to each peer, 1 to
     *  DD_BACKEND_MAX_STREAMS: DREAMDDP_NUM_STREAMS, else the topology's
     *  choice, the same on every rank of the job (the least any rank
     *  asked for). A module that cuts large messages across its streams
     *  must cut them the same way on every rank. */
    int streams;
    int log_level; /**< dd_backend_log_level_t in force for the job */
    void *arg;     /**< first argument of every function below */

    /** Stores len bytes of value under key. */
    dd_status_t (*store_set)(void *arg, const char *key, const void *value,
                             size_t len);
    /**
     * Waits up to timeout_s for key and returns its value, malloc'ed (the
     * module frees it with free()). DD_ERR_TIMED_OUT names the key.
     */
    dd_status_t (*store_get)(void *arg, const char *key, void **value_p,
                             size_t *len_p);
    /** Waits up to timeout_s until every one of the n keys exists. */
    dd_status_t (*store_wait)(void *arg, const char *const *keys, int n,
                              double timeout_s);
    /** Logs one line (no newline) at level; the core adds the prefix. */
    void (*log)(void *arg, int level, const char *message);
    /**
     * Reports an error where the module detected it: logs it and records it
     * as the calling thread's dd_last_error(). Returns status.
     */
    dd_status_t (*error)(void *arg, dd_status_t status, const char *message);
    /**
     * Says that an operation completed (test() would now say so): a module
     * with DD_BACKEND_CAP_NOTIFY calls it for each one, from any thread,
     * once the operation's state shows it; the core then tests it at once
     * instead of on its next timer.
     */
    void (*completed)(void *arg);
} dd_backend_services_t;

/**
 * What score() is asked about: the public collectives, with dd_coll_t's
 * values, then the point-to-point operations that only the core starts (the
 * aggregation route), numbered after them. Applications never see the
 * latter.
 */
typedef enum {
    DD_BACKEND_OP_ALLREDUCE = DD_COLL_ALLREDUCE,
    DD_BACKEND_OP_BROADCAST = DD_COLL_BROADCAST,
    DD_BACKEND_OP_REDUCE_SCATTER = DD_COLL_REDUCE_SCATTER,
    DD_BACKEND_OP_ALLGATHER = DD_COLL_ALLGATHER,
    DD_BACKEND_OP_SEND = DD_COLL_LAST, /**< dd_backend_ops_t::send */
    DD_BACKEND_OP_RECV,                /**< dd_backend_ops_t::recv */
    DD_BACKEND_OP_LAST
} dd_backend_op_t;

/** Bits of dd_backend_ops_t::mem_types: bit (1u << dd_mem_type_t). */
#define DD_BACKEND_MEM(mem_type) (1u << (mem_type))

/** Bits of dd_backend_ops_t::caps. */
enum {
    /** Collectives are the library's own (NCCL, Gloo), not the shared
     *  point-to-point algorithms. */
    DD_BACKEND_CAP_NATIVE_COLL = 1u << 0,
    /** Operations progress on their own (a thread, a GPU stream); test()
     *  and progress() need not be called for them to complete. */
    DD_BACKEND_CAP_ASYNC = 1u << 1,
    /** cancel() stops an operation in flight, not only a finished one. */
    DD_BACKEND_CAP_CANCEL = 1u << 2,
    /** f16 and bf16 are reduced natively (on the device). */
    DD_BACKEND_CAP_NATIVE_HALF = 1u << 3,
    /** dd_backend_services_t::completed is called as each operation
     *  completes, so the core need not test it on a timer. */
    DD_BACKEND_CAP_NOTIFY = 1u << 4
};

/**
 * The arguments of every operation. Fields an operation does not use are
 * ignored. Buffers stay owned by the caller and must stay valid, and must
 * not be written (sendbuf) or read (recvbuf), until the request completes.
 */
typedef struct {
    const void *sendbuf; /**< input; may equal recvbuf for allreduce */
    void *recvbuf;       /**< output; broadcast: in and out */
    /** Elements: allreduce and broadcast the whole buffer; reduce_scatter
     *  each rank's share (recvbuf's size); allgather each rank's
     *  contribution (sendbuf's size); send and recv the message. */
    size_t count;
    dd_dtype_t dtype;
    dd_reduce_op_t op;      /**< allreduce, reduce_scatter */
    int root;               /**< broadcast */
    int peer;               /**< send: destination; recv: source */
    uint64_t tag;           /**< send, recv: DD_BACKEND_TAG_BITS bits */
    dd_mem_type_t mem_type; /**< where sendbuf and recvbuf live */
    /** CUDA memory: the cudaStream_t the operation is ordered on (it
     *  starts after the work already queued there); NULL: the backend's
     *  own stream, ordered after nothing (the caller synchronizes). */
    void *stream;
} dd_backend_args_t;

/**
 * Starts one operation. Returns DD_OK with *req_p set to a request that the
 * caller must pass to test() or wait() until one returns a final status, or
 * to cancel(); or an error (reported through services->error), leaving
 * *req_p untouched. Never blocks on peers. Messages between two ranks match
 * on (peer, tag) in the order they were posted; every rank must start the
 * collectives of an instance in the same order with the same count, dtype,
 * op and root, or they fail (within the timeout) instead of mixing data.
 */
typedef dd_status_t (*dd_backend_op_fn_t)(dd_backend_t *backend,
                                          const dd_backend_args_t *args,
                                          dd_backend_request_t **req_p);

/**
 * A backend module's table. All slots are required. Calls on one instance
 * come from one thread at a time (the core serializes them); different
 * instances are independent.
 */
typedef struct dd_backend_ops {
    uint32_t abi_version; /**< DD_BACKEND_ABI_VERSION the module was built
                               against */
    const char *name;     /**< "ucx": DREAMDDP_BACKENDS and logs use it */
    unsigned mem_types;   /**< DD_BACKEND_MEM() bits it may support */
    unsigned caps;        /**< DD_BACKEND_CAP_* bits */

    /**
     * Whether the module can run on this machine (a GPU, a library), before
     * init and without talking to peers. Returns DD_OK, or DD_ERR_NO_DEVICE
     * / DD_ERR_UNSUPPORTED with the reason written to why (NUL-terminated).
     * Must not log. Any thread.
     */
    dd_status_t (*query)(char *why, size_t size);

    /**
     * Creates an instance spanning services->world_size ranks; blocks until
     * every rank has joined (through the store) or services->timeout_s has
     * passed. services stays valid until finalize() returns. Returns DD_OK
     * with *backend_p set, or an error reported through services->error.
     */
    dd_status_t (*init)(const dd_backend_services_t *services,
                        dd_backend_t **backend_p);

    /**
     * Frees the instance. Called on every rank after every operation has
     * completed or been canceled and after the ranks have met (so no peer
     * still sends to it). Bounded by the timeout; never reports errors.
     */
    void (*finalize)(dd_backend_t *backend);

    /**
     * How well the instance runs op on bytes bytes of mem_type memory:
     * 0 (or less) when it cannot, higher is better. The core picks the
     * highest score among the allowed backends. Pure and cheap; any thread.
     */
    int (*score)(dd_backend_t *backend, dd_backend_op_t op,
                 dd_mem_type_t mem_type, size_t bytes);

    dd_backend_op_fn_t allreduce;      /**< see dd_allreduce() */
    dd_backend_op_fn_t broadcast;      /**< see dd_broadcast() */
    dd_backend_op_fn_t reduce_scatter; /**< see dd_reduce_scatter() */
    dd_backend_op_fn_t allgather;      /**< see dd_allgather() */
    dd_backend_op_fn_t send;           /**< count elements to peer */
    /** Up to count elements from peer; a longer message is an error
     *  (DD_ERR_MISMATCH), and so is a shorter one. */
    dd_backend_op_fn_t recv;

    /**
     * Progresses the backend once and reports: DD_INPROGRESS (the request
     * stays valid), or its final status, which releases the request
     * (errors are reported through services->error). Never blocks.
     */
    dd_status_t (*test)(dd_backend_t *backend, dd_backend_request_t *req);

    /**
     * Blocks until the request completes, then returns as test() does (a
     * final status, even DD_ERR_TIMED_OUT from the backend's own timeout,
     * releases the request); or, when timeout_s passes first, reports
     * DD_ERR_TIMED_OUT through services->error, naming what it waited for
     * (rank, peer), and returns DD_INPROGRESS, leaving the request valid:
     * the caller then cancels it. A backend may abort its communicator on
     * timeout (NCCL does); later operations then fail.
     */
    dd_status_t (*wait)(dd_backend_t *backend, dd_backend_request_t *req,
                        double timeout_s);

    /**
     * Releases a request that test() and wait() have not released, stopping
     * the operation where DD_BACKEND_CAP_CANCEL says it can; otherwise the
     * operation finishes (or fails) in the background and its buffers must
     * stay valid until the next call to wait() or finalize() returns.
     */
    void (*cancel)(dd_backend_t *backend, dd_backend_request_t *req);

    /** Lets the backend move data without waiting; never blocks. */
    void (*progress)(dd_backend_t *backend);

    /**
     * Reports as test() does, without progressing the backend: for a
     * caller that calls progress() once and then looks at many requests,
     * where a test() each would make as many passes over its connections
     * (a system call each, for UCX over TCP). A module whose test() does
     * not progress gives its test().
     */
    dd_status_t (*check)(dd_backend_t *backend, dd_backend_request_t *req);

    /**
     * Blocks until the backend may have something to progress (a message
     * arrived, an operation ended) or timeout_s passes, whichever comes
     * first; returns at once while it has work. For a loop that serves
     * messages as they come (an aggregator) instead of sleeping between
     * passes.
     */
    void (*idle)(dd_backend_t *backend, double timeout_s);
} dd_backend_ops_t;

/** The type of dd_backend_ops_get(), the one symbol a module exports. */
typedef const dd_backend_ops_t *(*dd_backend_entry_fn_t)(void);

/**
 * Defined by each module (exported with DD_API): its ops table, static and
 * valid as long as the module is loaded. Any thread.
 */
const dd_backend_ops_t *dd_backend_ops_get(void);

#ifdef __cplusplus
}
#endif

#endif /* DREAMDDP_BACKEND_H */
