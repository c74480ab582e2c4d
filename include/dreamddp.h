/*
 * dreamddp: keeps the model replicas of a data-parallel training job in sync.
 *
 * This is the public API. It is plain C99, includes no private, CUDA or C++
 * header, and everything it declares is exported with DD_API.
 */
#ifndef DREAMDDP_H
#define DREAMDDP_H

#include <dreamddp/version.h>

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

/*
 * Threads. Every function below says which threads may call it:
 *  - "Any thread": at any time, also while other calls on the same context
 *    run (for a context: between dd_init's return and dd_finalize).
 *  - "One thread at a time per context": calls so marked on one context
 *    must not overlap; the application orders them (one training thread,
 *    or its own lock). The thread may change from call to call: the
 *    library keeps no per-thread state for a context, only each thread's
 *    dd_last_error().
 *  - dd_layer_ready() and dd_layer_unused() alone may be called from any
 *    thread while other such calls run (autograd runs hooks on its own
 *    threads); their comments say how they fit with the rest of the step.
 * dd_init() and dd_finalize() are called once per context, from one
 * thread, while no other call on that context runs.
 */

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
    X(DD_ERR_INTERNAL, -17, "internal error")                                  \
    X(DD_ERR_NUMERIC, -18, "non-finite values")

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
 * The enum name of a status ("DD_ERR_TIMED_OUT"), for logs, tests and
 * bindings. Never NULL; an unknown value gives "DD_STATUS_UNKNOWN". Any
 * thread.
 */
DD_API const char *dd_status_name(dd_status_t status);

/**
 * The message of the last error that this thread saw inside the library: the
 * same text that was logged, naming the rank, peer, layer, variable or value
 * at fault. Empty when there was none. Valid until the thread's next call.
 * Any thread: each thread has its own.
 */
DD_API const char *dd_last_error(void);

/**
 * The library's version string: DD_VERSION_MAJOR, DD_VERSION_MINOR and
 * DD_VERSION_PATCH (dreamddp/version.h) joined with dots. Any thread.
 */
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
    dd_role_t role;      /**< this process's role; overrides DREAMDDP_ROLE */
} dd_init_params_t;

/**
 * Starts dreamddp in this process: parses every DREAMDDP_* variable, detects
 * rank and world size (DREAMDDP_*, torchrun, Open MPI, Slurm or PMI variables),
 * joins the job's rendezvous store and waits until every rank has joined.
 *
 * @param params  optional parameters, or NULL.
 * @param ctx_p   the new context, set only on success.
 * @return DD_OK; DD_ERR_INVALID_CONFIG for a bad DREAMDDP_* value or
 *         contradictory launcher variables; DD_ERR_UNREACHABLE when the
 *         store's master cannot be reached; DD_ERR_REFUSED when it refuses
 *         this job's token; DD_ERR_TIMED_OUT when not every rank joined
 *         within DREAMDDP_TIMEOUT_S; DD_ERR_MISMATCH when ranks disagree on
 *         the world size. dd_last_error() has the details.
 * Once per job, from one thread; the context may then be used from other
 * threads, as each call says.
 */
DD_API dd_status_t dd_init(const dd_init_params_t *params, dd_context_h *ctx_p);

/**
 * Leaves the job: waits (up to DREAMDDP_TIMEOUT_S) until every rank has reached
 * dd_finalize, then frees the context. The rank that hosts the store keeps it
 * up until the others have left.
 *
 * @return DD_OK, or DD_ERR_TIMED_OUT / DD_ERR_PEER_LOST when some rank never
 *         arrived; the context is freed in every case.
 * Once, from one thread, after every other call on the context has
 * returned.
 */
DD_API dd_status_t dd_finalize(dd_context_h ctx);

/*
 * The job's geometry, fixed by dd_init: dd_rank() to dd_num_workers() may
 * be called from any thread.
 */

/** This process's rank, 0 .. world size - 1. Any thread. */
DD_API int dd_rank(dd_context_h ctx);

/** Number of ranks in the job, workers and aggregators together. Any
 *  thread. */
DD_API int dd_world_size(dd_context_h ctx);

/** This process's rank among the ranks on its host. Any thread. */
DD_API int dd_local_rank(dd_context_h ctx);

/** Number of ranks on this process's host. Any thread. */
DD_API int dd_local_size(dd_context_h ctx);

/** This process's role. Any thread. */
DD_API dd_role_t dd_role(dd_context_h ctx);

/** The role of any rank of the job (DD_ROLE_WORKER for an invalid rank).
 *  Any thread. */
DD_API dd_role_t dd_rank_role(dd_context_h ctx, int rank);

/** Number of worker ranks in the job. Any thread. */
DD_API int dd_num_workers(dd_context_h ctx);

/**
 * Waits until every rank of the job has called dd_barrier.
 *
 * @return DD_OK; DD_ERR_TIMED_OUT naming the ranks that did not arrive within
 *         DREAMDDP_TIMEOUT_S; DD_ERR_PEER_LOST when the store went away.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_barrier(dd_context_h ctx);

/** Flags of dd_config_print. */
enum {
    DD_CONFIG_PRINT_MARKDOWN = 1u << 0 /**< a Markdown table (README) */
};

/**
 * Prints every DREAMDDP_* variable the library reads: name, default, what it
 * accepts, its documentation, and the value in force in this process's
 * environment (or why it is invalid).
 *
 * @param stream  where to print.
 * @param flags   DD_CONFIG_PRINT_* bits.
 * @return DD_OK, or DD_ERR_IO when the stream fails. Any thread.
 */
DD_API dd_status_t dd_config_print(FILE *stream, unsigned flags);

/** Element types of collective buffers. */
typedef enum {
    DD_DTYPE_F32 = 0, /**< IEEE binary32 */
    DD_DTYPE_F64,     /**< IEEE binary64 */
    DD_DTYPE_F16,     /**< IEEE binary16; reduced in binary32 */
    DD_DTYPE_BF16,    /**< bfloat16; reduced in binary32 */
    DD_DTYPE_I32,     /**< int32_t; sums wrap modulo 2^32 */
    DD_DTYPE_I64,     /**< int64_t; sums wrap modulo 2^64 */
    DD_DTYPE_U8,      /**< uint8_t; sums wrap modulo 2^8 */
    DD_DTYPE_LAST
} dd_dtype_t;

/**
 * Reductions. DD_REDUCE_AVG is the sum divided by the number of ranks; for
 * integer types the quotient is rounded toward zero, for floating types it
 * is correctly rounded from the binary32 (f16, bf16, f32) or binary64 sum.
 */
typedef enum {
    DD_REDUCE_SUM = 0,
    DD_REDUCE_AVG,
    DD_REDUCE_MAX,
    DD_REDUCE_MIN,
    DD_REDUCE_LAST
} dd_reduce_op_t;

/** Where a buffer lives. */
typedef enum {
    DD_MEM_HOST = 0, /**< ordinary host memory */
    DD_MEM_CUDA,     /**< device memory: CUDA's (DREAMDDP_DEVICE=cuda) or
                          the fake device's (DREAMDDP_DEVICE=fake, tests);
                          dd_tensor_t::device names the device */
    DD_MEM_LAST
} dd_mem_type_t;

/** The collectives an application can run (dd_allreduce() and the rest). */
typedef enum {
    DD_COLL_ALLREDUCE = 0,
    DD_COLL_BROADCAST,
    DD_COLL_REDUCE_SCATTER,
    DD_COLL_ALLGATHER,
    DD_COLL_LAST
} dd_coll_t;

/** Bytes of one element of dtype; 0 for an invalid dtype. Any thread. */
DD_API size_t dd_dtype_size(dd_dtype_t dtype);

/** "f32", "f64", "f16", "bf16", "i32", "i64", "u8"; "?" when invalid. Any
 *  thread. */
DD_API const char *dd_dtype_name(dd_dtype_t dtype);

/** "sum", "avg", "max", "min"; "?" when invalid. Any thread. */
DD_API const char *dd_reduce_op_name(dd_reduce_op_t op);

/** "host", "cuda"; "?" when invalid. Any thread. */
DD_API const char *dd_mem_type_name(dd_mem_type_t mem_type);

/** "allreduce", "broadcast", "reduce_scatter", "allgather"; "?" when
 *  invalid. Any thread. */
DD_API const char *dd_coll_name(dd_coll_t coll);

/*
 * Blocking collectives over every rank of the job, through the backend that
 * dd_backend_name() names (<dreamddp/introspect.h>). Every rank must call the
 * same collectives in the same order with the same count, dtype, op and root.
 * Each returns DD_OK; DD_ERR_INVALID_PARAM for a bad argument;
 * DD_ERR_UNSUPPORTED when no backend handles the memory type; DD_ERR_TIMED_OUT
 * when the collective did not complete within DREAMDDP_TIMEOUT_S (which is also
 * what ranks that posted a different collective see); DD_ERR_PEER_LOST when a
 * peer went away; DD_ERR_MISMATCH when a peer's message does not fit;
 * DD_ERR_BACKEND for another failure of the backend. dd_last_error() names the
 * rank and peer. One thread at a time per context. With CUDA memory the call
 * returns once the result is in the buffer.
 */

/**
 * Reduces count elements across ranks; every rank gets the result in recvbuf.
 * sendbuf may equal recvbuf (in place).
 */
DD_API dd_status_t dd_allreduce(dd_context_h ctx, const void *sendbuf,
                                void *recvbuf, size_t count, dd_dtype_t dtype,
                                dd_reduce_op_t op, dd_mem_type_t mem_type);

/** Copies count elements of root's buf into every rank's buf. */
DD_API dd_status_t dd_broadcast(dd_context_h ctx, void *buf, size_t count,
                                dd_dtype_t dtype, int root,
                                dd_mem_type_t mem_type);

/**
 * Reduces world size * recvcount elements of sendbuf across ranks; rank r
 * gets elements r * recvcount .. (r + 1) * recvcount - 1 of the result in
 * recvbuf, which must not overlap sendbuf.
 */
DD_API dd_status_t dd_reduce_scatter(dd_context_h ctx, const void *sendbuf,
                                     void *recvbuf, size_t recvcount,
                                     dd_dtype_t dtype, dd_reduce_op_t op,
                                     dd_mem_type_t mem_type);

/**
 * Gathers sendcount elements from every rank into recvbuf (world size *
 * sendcount elements, rank order), which must not overlap sendbuf.
 */
DD_API dd_status_t dd_allgather(dd_context_h ctx, const void *sendbuf,
                                void *recvbuf, size_t sendcount,
                                dd_dtype_t dtype, dd_mem_type_t mem_type);

/* ---- Layers, steps and strategies ------------------------------------ */

/** A registered layer (owned by the context). */
typedef struct dd_layer *dd_layer_h;

/**
 * One tensor of a layer: its parameters and its gradients, both count
 * elements of dtype in mem_type memory.
 *
 * grad is NULL for a tensor without gradients: a buffer such as batch-norm
 * running statistics. The model-averaging strategies (localsgd, plsgd,
 * dreamddp, adaptive) average it with the parameters. ddp, which averages
 * gradients, copies the first worker's values of it to every worker in
 * each step instead, as PyTorch DDP's broadcast_buffers does: the copy
 * leaves when the layer is marked (dd_layer_ready), on the progress engine,
 * so that it overlaps the rest of backward, and when dd_step_end returns
 * every replica holds the first worker's buffers, which the next forward
 * reads. adaptive also reads the gradients (host ones) for its signal, so
 * under it every layer needs at least one tensor with a gradient.
 * dd_model_commit checks these rules for the strategy then in force.
 *
 * rows and cols give the tensor's shape as a matrix, rows x cols = count,
 * for codecs that work on matrices (powersgd): a linear layer's weight is
 * (out features) x (in features), a convolution's (out channels) x (in
 * channels x kernel elements). 0 x 0, the default, is a vector.
 *
 * field_mask says which of the optional fields (device, rows and cols)
 * the caller set: DD_TENSOR_FIELD_* bits. 0, what a program that sets none
 * or was built before the mask passes, reads them as they are (0 unless
 * set). A field added later gets a bit of its own and is read only where
 * the bit is set, so that no program reads as set a field it never knew.
 *
 * ABI: `device` was added at the end in 0.2 (library version 1 of the
 * soname), `rows` and `cols` after it with dd_layer_register_sized
 * (libtool interface 2), `field_mask` after them (interface 6; the soname
 * unchanged). Tensors are passed in arrays, so the struct's size is part
 * of the ABI: dd_layer_register is a macro that passes sizeof(dd_tensor_t)
 * to dd_layer_register_sized, which reads any of the three layouts, and
 * the function dd_layer_register itself reads the layout that ends at
 * `device`, so programs built against it run unchanged. Sources that
 * initialize the first fields keep the others 0.
 */
typedef struct {
    void *param;
    void *grad;
    size_t count;
    dd_dtype_t dtype;
    dd_mem_type_t mem_type;
    int device;  /**< DD_MEM_CUDA: the device's ordinal (as cudaSetDevice
                      takes it); ignored for host memory */
    size_t rows; /**< the shape as a matrix, rows x cols = count; 0 x 0: a
                      vector (since 0.3) */
    size_t cols;
    uint64_t field_mask; /**< DD_TENSOR_FIELD_* bits: the optional fields
                              set; 0: device, rows and cols as they are */
} dd_tensor_t;

/** Bits of dd_tensor_t::field_mask. */
enum {
    DD_TENSOR_FIELD_DEVICE = 1u << 0, /**< device */
    DD_TENSOR_FIELD_SHAPE = 1u << 1   /**< rows and cols */
};

/**
 * Registers a layer, in forward order: the i-th call registers layer i. The
 * context copies the tensor descriptions; the buffers stay the caller's and
 * must live until dd_finalize. Workers only, before dd_model_commit.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM for an empty or duplicate name, a NULL
 *         buffer, an invalid dtype or a device the module does not see;
 *         DD_ERR_UNSUPPORTED, naming the layer, for a DD_MEM_CUDA tensor
 *         when no device module is loaded (DREAMDDP_DEVICE); DD_ERR_STATE
 *         after dd_model_commit or on an aggregator.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_layer_register(dd_context_h ctx, const char *name,
                                     const dd_tensor_t *tensors,
                                     size_t n_tensors, dd_layer_h *layer_p);

/**
 * dd_layer_register for tensors of tensor_size bytes each, the
 * sizeof(dd_tensor_t) of the dreamddp.h the caller was built against:
 * fields past it read as 0. The dd_layer_register macro below calls it.
 *
 * @return as dd_layer_register; DD_ERR_INVALID_PARAM also for a
 *         tensor_size below the layout without rows and cols or above
 *         this library's, and for a shape
 *         whose rows x cols is not count (naming the layer and tensor).
 */
DD_API dd_status_t dd_layer_register_sized(dd_context_h ctx, const char *name,
                                           const dd_tensor_t *tensors,
                                           size_t n_tensors, size_t tensor_size,
                                           dd_layer_h *layer_p);

#define dd_layer_register(ctx, name, tensors, n_tensors, layer_p)              \
    dd_layer_register_sized((ctx), (name), (tensors), (n_tensors),             \
                            sizeof(dd_tensor_t), (layer_p))

/**
 * Chooses the synchronization strategy before dd_model_commit, overriding
 * DREAMDDP_STRATEGY: "ddp", "localsgd:H", "plsgd:H", "dreamddp:H" or
 * "adaptive".
 *
 * @return DD_OK, DD_ERR_INVALID_PARAM naming what is accepted, or
 *         DD_ERR_STATE after dd_model_commit.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_strategy_set(dd_context_h ctx, const char *strategy);

/**
 * Chooses the codec of the syncs before dd_model_commit, overriding
 * DREAMDDP_COMPRESSION: "none", "fp16", "bf16", "topk:RATIO" or
 * "powersgd:RANK". The default rule applies it to every layer of at least
 * 4096 elements; smaller layers (biases, norms) stay dense. powersgd also
 * sends dense (f32) the tensors of such layers that have no shape
 * (dd_tensor_t::rows and cols 0) or whose factors, (rows + cols) x RANK,
 * would not be smaller than the tensor. Only f32 host tensors are encoded;
 * others travel as they are. ddp compresses gradients; the model-averaging
 * strategies compress the change of the parameters since the layer's last
 * sync, so that every replica holds the same parameters after each sync.
 * Every worker must choose the same.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM naming the spec and what is
 *         accepted; DD_ERR_STATE after dd_model_commit.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_compression_set(dd_context_h ctx, const char *spec);

/**
 * Makes the run reproducible before dd_model_commit (nonzero), overriding
 * DREAMDDP_DETERMINISTIC: what syncs when then follows from the settings,
 * the model and the seed, never from a clock (dreamddp plans from the
 * layers' sizes and a fixed rate model, or DREAMDDP_PLAN, and never
 * re-plans), so that two runs of the same seed end with the same bits.
 * Every worker must choose the same.
 *
 * @return DD_OK; DD_ERR_STATE after dd_model_commit.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_deterministic_set(dd_context_h ctx, int deterministic);

/**
 * Sets ddp's gradient bucket size before dd_model_commit, overriding
 * DREAMDDP_BUCKET_BYTES: the largest gradient message after the first
 * (DREAMDDP_FIRST_BUCKET_BYTES), as bucket_cap_mb sets PyTorch DDP's. Every
 * worker must choose the same.
 *
 * ABI: added with libtool interface 7 (the soname unchanged).
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM for 0; DD_ERR_STATE after
 *         dd_model_commit.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_bucket_bytes_set(dd_context_h ctx, size_t bytes);

/**
 * Chooses one layer's codec before dd_model_commit, whatever its size
 * (spec as for dd_compression_set; "none" keeps the layer dense). Every
 * worker must choose the same for the layer.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM naming the layer, the spec and what
 *         is accepted, or for a layer of another context; DD_ERR_STATE
 *         after dd_model_commit.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_layer_set_compression(dd_context_h ctx, dd_layer_h layer,
                                            const char *spec);

/** The strategy in force ("dreamddp:4"); the string lives as long as the
 *  context. One thread at a time per context before dd_model_commit, any
 *  thread after. */
DD_API const char *dd_strategy_name(dd_context_h ctx);

/**
 * Freezes the layer table. Checks on every worker that the tables match
 * (names, sizes, dtypes, which tensors have gradients, order); when they do
 * not, every worker fails with DD_ERR_MISMATCH naming the first differing
 * layer and the ranks that differ. Then checks that every tensor has the
 * buffers the strategy in force needs (see dd_tensor_t), copies rank 0's
 * parameters to every worker, so that every replica starts equal, and
 * measures the network for the planner.
 *
 * @return DD_OK; DD_ERR_MISMATCH as above; DD_ERR_INVALID_PARAM naming the
 *         layer and tensor index when a tensor lacks what the strategy
 *         needs (adaptive: a layer without any gradient; ddp: a gradient
 *         buffer that is the parameter buffer); DD_ERR_STATE when called
 *         twice, without layers or on an aggregator; DD_ERR_TIMED_OUT when
 *         a worker did not commit within DREAMDDP_TIMEOUT_S.
 * Collective over the workers; aggregators do not call it. One thread at a
 * time per context.
 */
DD_API dd_status_t dd_model_commit(dd_context_h ctx);

/**
 * Starts a training step (forward and backward follow).
 * @return DD_OK, or DD_ERR_STATE when a step is already open or the model
 *         is not committed.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_step_begin(dd_context_h ctx);

/** What a mark says of a layer (dd_mark_params_t::what). */
typedef enum {
    DD_MARK_READY = 0, /**< its backward is done: its gradients are final */
    DD_MARK_FORWARD,   /**< its forward is about to read its parameters */
    DD_MARK_UNUSED     /**< it takes no part in this step's backward */
} dd_mark_t;

/** Bits of dd_mark_params_t::field_mask. */
enum {
    DD_MARK_FIELD_STREAM = 1u << 0 /**< stream */
};

/** The parameters of dd_layer_mark. */
typedef struct {
    uint64_t field_mask; /**< DD_MARK_FIELD_* bits: the optional fields set */
    dd_mark_t what;
    void *stream; /**< DD_MARK_FIELD_STREAM, for READY and FORWARD of a
                       layer in device memory: the stream (a cudaStream_t,
                       or a stream of the fake device; NULL: the default
                       stream) its gradients become final on, or its
                       forward runs on; the library waits for it on the
                       progress engine, never on the calling thread */
} dd_mark_params_t;

/**
 * Marks a point of a layer's step, the one call for every mark:
 * - DD_MARK_READY: its backward is done (see dd_layer_ready); with a
 *   stream, on a device stream (see dd_layer_ready_stream).
 * - DD_MARK_FORWARD: its forward is about to read its parameters, the
 *   deadline of a "+next" strategy's delayed average (see
 *   dd_layer_forward); with a stream, where the average lands as a device
 *   sum (see dd_layer_forward_stream).
 * - DD_MARK_UNUSED: it takes no part in this step's backward (see
 *   dd_layer_unused); no stream.
 * The five calls below are thin wrappers over this one, kept for one
 * release.
 *
 * ABI: added with libtool interface 6 (the soname unchanged).
 *
 * @return what the mark's call returns; DD_ERR_INVALID_PARAM for a NULL
 *         params, an unknown what or field_mask bit, or a stream with
 *         DD_MARK_UNUSED.
 * Threads: as the mark's call.
 */
DD_API dd_status_t dd_layer_mark(dd_context_h ctx, dd_layer_h layer,
                                 const dd_mark_params_t *params);

/**
 * Marks layer's backward pass as done: its gradients are final and the rest
 * of backward no longer reads its parameters. If the layer syncs in this
 * step, its sync starts now, on the progress engine, while the caller goes
 * on. The caller must not touch the layer's buffers until dd_step_end.
 *
 * Any thread, also while other threads mark other layers (autograd runs
 * hooks on its own threads): the scheduler serializes the calls with a
 * lock. Each layer is marked at most once per step, after dd_step_begin()
 * has returned, and every call of a step must have returned before
 * dd_step_end() is called (the application orders them, as it does when it
 * waits for backward to finish). The order of the marks decides which
 * layers are fused and the order of the syncs, so every worker must mark
 * its layers in the same order: threads that race each other to mark
 * layers of one step can make workers disagree.
 *
 * dd_layer_mark with DD_MARK_READY; kept for one release.
 *
 * @return DD_OK; DD_ERR_STATE outside a step or for a layer marked twice in
 *         one step; DD_ERR_INVALID_PARAM for a layer of another context.
 */
DD_API dd_status_t dd_layer_ready(dd_context_h ctx, dd_layer_h layer);

/**
 * Marks the point just before layer's forward pass reads its parameters:
 * the deadline of the layer's delayed average under a "+next" strategy
 * ("dreamddp:4+next"). A layer's average launched in one step (at
 * dd_step_begin, at this mark or at its dd_layer_ready:
 * DREAMDDP_NEXT_LAUNCH) may land as late as its next deadline; this call
 * waits for it there (however late it is: it is never skipped) and
 * applies it with what the optimizer did since the launch:
 * x = average(x at launch) + (x now - x at launch); where the layer syncs
 * again in this step, that sync leaves from here. Without the mark, the
 * deadline is the layer's next dd_layer_ready or dd_layer_unused. Under
 * the other strategies it does nothing. dd_step_end does not wait for
 * delayed averages; dd_sync_all lands them all first.
 *
 * One thread at a time per context, in or out of a step, after
 * dd_model_commit; not while dd_layer_ready runs on another thread (call
 * it from forward, before backward starts).
 *
 * dd_layer_mark with DD_MARK_FORWARD; kept for one release.
 *
 * ABI: added with libtool interface 3 (the soname unchanged).
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM for a layer of another context;
 *         DD_ERR_STATE before dd_model_commit or after a failed sync; the
 *         sync's error (DD_ERR_TIMED_OUT, DD_ERR_PEER_LOST, ...) when the
 *         average did not land, naming the layer.
 */
DD_API dd_status_t dd_layer_forward(dd_context_h ctx, dd_layer_h layer);

/**
 * Says that layer takes no part in this step's backward (a branch the
 * input did not take, a frozen part of the model), in place of
 * dd_layer_ready: the layer counts as ready now. Under ddp its gradients
 * are set to zero first, so that the average includes this worker's zero,
 * as PyTorch DDP's find_unused_parameters does (host gradients only; CUDA
 * ones give DD_ERR_UNSUPPORTED: zero them and call dd_layer_ready). Under
 * the model-averaging strategies the layer's parameters sync as planned;
 * adaptive leaves it out of its gradient signal for this step.
 *
 * DREAMDDP_FIND_UNUSED=1 does the same, at dd_step_end, for every layer
 * still unmarked then (in backward order). Either way, the order of the
 * marks decides the fusion, as for dd_layer_ready: call dd_layer_unused
 * where the layer's dd_layer_ready would have been, and let
 * DREAMDDP_FIND_UNUSED count layers as unused only where every worker
 * leaves the same layers unmarked or the unmarked ones come last in
 * backward order.
 *
 * Threads: as dd_layer_ready, with which it is serialized.
 * dd_layer_mark with DD_MARK_UNUSED; kept for one release.
 *
 * @return DD_OK; DD_ERR_STATE outside a step or for a layer already marked
 *         in this step; DD_ERR_INVALID_PARAM for a layer of another
 *         context; DD_ERR_UNSUPPORTED as above.
 */
DD_API dd_status_t dd_layer_unused(dd_context_h ctx, dd_layer_h layer);

/**
 * dd_layer_ready() for a layer whose gradients become final on a device
 * stream: the library records an event on stream (a cudaStream_t, or a
 * stream of the fake device; NULL is the default stream) and returns at
 * once; the progress engine waits for that event before it reads the
 * layer's buffers, never the calling thread. The averages are on the
 * device when dd_step_end() returns. A device layer marked with plain
 * dd_layer_ready() must already be final (the caller synchronized).
 * dd_layer_mark with DD_MARK_READY and a stream; kept for one release.
 *
 * @return what dd_layer_ready() returns; DD_ERR_INVALID_PARAM for a layer
 *         without device tensors or without a device module; an error of
 *         the device module (DD_ERR_BACKEND) naming the layer.
 * Threads: as dd_layer_ready().
 */
DD_API dd_status_t dd_layer_ready_stream(dd_context_h ctx, dd_layer_h layer,
                                         void *stream);

/**
 * dd_layer_forward() for a layer in device memory whose forward runs on a
 * device stream: under a "+next" strategy the layer's delayed average
 * lands there, as a device sum queued on stream (a cudaStream_t, or a
 * stream of the fake device; NULL is the default stream) before the
 * forward's kernels read the parameters. The calling thread waits for the
 * sync to arrive, never for the device.
 *
 * A device layer's delayed averaging runs on the stream the application
 * last named for it, here or in dd_layer_ready_stream(): the launch
 * queues the copy of the parameters there after the backward, and every
 * landing (this mark, the next dd_layer_ready_stream() without marks)
 * the sum that applies the average. dd_sync_all() queues its landings
 * there too, and waits for them. A device layer whose stream was never
 * named must be final when marked, as for dd_layer_ready().
 * dd_layer_mark with DD_MARK_FORWARD and a stream; kept for one release.
 *
 * ABI: added with libtool interface 5 (the soname unchanged).
 *
 * @return what dd_layer_forward() returns; DD_ERR_INVALID_PARAM for a
 *         layer without device tensors or without a device module; an
 *         error of the device module (DD_ERR_BACKEND) naming the layer.
 * Threads: as dd_layer_forward().
 */
DD_API dd_status_t dd_layer_forward_stream(dd_context_h ctx, dd_layer_h layer,
                                           void *stream);

/*
 * The output structs (dd_step_stats_t, dd_layer_stats_t) start with a
 * field_mask, as the parameter structs do: the caller sets the bits of the
 * fields it wants, the library fills those and leaves every other field as
 * the caller left it. A field added later gets a new bit, so a program built
 * against an older header keeps working. A bit this library does not know
 * (a program built against a newer header) is refused with
 * DD_ERR_INVALID_PARAM, naming the struct, before the call does anything:
 * the caller never reads a field that was not filled.
 */

/** Bits of dd_step_stats_t::field_mask. */
enum {
    DD_STEP_STATS_FIELD_STEP = 1u << 0,          /**< step */
    DD_STEP_STATS_FIELD_LAYERS_SYNCED = 1u << 1, /**< layers_synced */
    DD_STEP_STATS_FIELD_BYTES_SYNCED = 1u << 2,  /**< bytes_synced */
    DD_STEP_STATS_FIELD_WIRE_S = 1u << 3,        /**< wire_s */
    DD_STEP_STATS_FIELD_WAIT_S = 1u << 4,        /**< wait_s */
    DD_STEP_STATS_FIELD_REPLANNED = 1u << 5,     /**< replanned */
    DD_STEP_STATS_FIELD_EXTRA_BYTES = 1u << 6,   /**< extra_bytes */
    DD_STEP_STATS_FIELD_STAGING_S = 1u << 7,     /**< staging_s */
    DD_STEP_STATS_FIELD_WIRE_BYTES = 1u << 8     /**< wire_bytes */
};

/** What one step did, returned by dd_step_end. */
typedef struct {
    uint64_t field_mask; /**< DD_STEP_STATS_FIELD_* bits: the fields to fill;
                              set by the caller */
    uint64_t step;       /**< index of the step, from 0 */
    int layers_synced;   /**< layers averaged in this step */
    size_t bytes_synced; /**< bytes averaged in this step (per worker) */
    double wire_s;       /**< seconds the engine spent syncing (with
                              several streams, each sync's share of the
                              wire: 1/k of the time k channels ran) */
    double wait_s;       /**< exposed wait: seconds dd_step_end blocked */
    int replanned;       /**< 1 when the schedule changed at this step */
    size_t extra_bytes;  /**< of bytes_synced, those of syncs beyond each
                              layer's one per window: dreamddp's bubble
                              filling (DREAMDDP_FILL_BUBBLES) */
    double staging_s;    /**< seconds device syncs spent copying to and from
                              pinned host memory that no network overlapped
                              (part of wire_s); 0 without device layers */
    size_t wire_bytes;   /**< bytes that went on the wire for the syncs of
                              bytes_synced (per worker, before the route's
                              own traffic): bytes_synced without
                              compression, about half of it under fp16 or
                              bf16; under topk through aggregators, the
                              pairs the worker pushed plus the averages it
                              pulled */
} dd_step_stats_t;

/**
 * Ends the step: flushes what waits for fusion, waits for this step's
 * syncs (bounded by DREAMDDP_TIMEOUT_S) and leaves the averages in place. The
 * application then runs its optimizer step.
 *
 * Every layer that the strategy syncs in this step must have been marked,
 * by dd_layer_ready or dd_layer_unused (localsgd excepted: it averages
 * every layer here, marked or not). A layer left unmarked would silently
 * miss its sync, so the step fails with DD_ERR_STATE naming it, after the
 * syncs that did start have finished; with DREAMDDP_FIND_UNUSED=1 it counts
 * as unused instead (see dd_layer_unused).
 *
 * @param stats_p  NULL, or the fields its field_mask names are filled (also
 *                 when a sync failed); the others are left untouched.
 * @return DD_OK; DD_ERR_INVALID_PARAM, with the step still open, when
 *         stats_p->field_mask has a bit this library does not know;
 *         DD_ERR_STATE without a dd_step_begin, or naming the layers
 *         left unmarked (the step is closed all the same); the error of a
 *         failed sync (DD_ERR_TIMED_OUT, DD_ERR_PEER_LOST, ...), naming
 *         the layer, on every worker.
 * One thread at a time per context, after this step's dd_layer_ready() and
 * dd_layer_unused() calls have returned.
 */
DD_API dd_status_t dd_step_end(dd_context_h ctx, dd_step_stats_t *stats_p);

/**
 * Averages every layer's parameters now, whatever the strategy (before a
 * checkpoint or an evaluation). Outside a step; collective over workers.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_sync_all(dd_context_h ctx);

/**
 * Sets the number of the next step, for a run resumed from a checkpoint:
 * the window position (step mod H) and the step numbers continue from
 * there, so that the resumed run syncs each layer in the step the
 * uninterrupted one would have. The plan is not saved: dreamddp:H profiles
 * again from this step. Every worker sets the same step (the first sync
 * fails on every worker, naming the steps, otherwise).
 *
 * @return DD_OK; DD_ERR_STATE before dd_model_commit, or once a step has
 *         run since it.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_step_set(dd_context_h ctx, uint64_t step);

/**
 * Elastic workers (DREAMDDP_ELASTIC=yes; ddrun --elastic sets it), after
 * Horovod Elastic's State: the application commits its state every few
 * steps; when a rank is lost, the launcher re-forms the job with the ranks
 * that remain (and, if asked, the lost one started again), and the new
 * job resumes from the last commits. A commit holds every
 * registered layer's parameters (host memory), the buffers added with
 * dd_elastic_state_add (optimizer state, data position) and the step
 * number. Codec residuals and delayed averages are not kept: they start
 * from zero in the new job, as the plan starts anew for its world size.
 */

/**
 * Adds a buffer of the application's state (bytes of host memory, read at
 * each dd_elastic_commit and written by dd_elastic_restore) under a name.
 * Every worker adds the same names and sizes in the same order.
 * @return DD_OK; DD_ERR_INVALID_PARAM for a NULL or empty buffer or name,
 *         or a name added twice; DD_ERR_STATE after the first commit.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_elastic_state_add(dd_context_h ctx, const char *name,
                                        void *buf, size_t bytes);

/**
 * Commits this worker's state: copies the layers' parameters, the state
 * buffers and the next step's number into the older of its two slots, files
 * of DREAMDDP_ELASTIC_DIR mapped into memory (on a tmpfs such as ddrun's
 * /dev/shm, the copy is the whole cost). The slot's header is written last,
 * so a worker killed while copying keeps its other slot. Outside a step,
 * after dd_model_commit, at the same step on every worker; with
 * DREAMDDP_ELASTIC=no it does nothing. A rank its job has dropped (frozen,
 * then woken after the job went on without it) is refused here, naming
 * itself.
 * @return DD_OK; DD_ERR_STATE inside a step or before dd_model_commit;
 *         DD_ERR_UNSUPPORTED for a layer in device memory; DD_ERR_IO when
 *         the slots cannot be made (naming the file and the room needed);
 *         DD_ERR_CANCELED for a dropped rank.
 * One thread at a time per context.
 */
DD_API dd_status_t dd_elastic_commit(dd_context_h ctx);

/**
 * Resumes a re-formed job: each worker finds its own commits in
 * DREAMDDP_ELASTIC_DIR (by DREAMDDP_ELASTIC_ID) and the workers agree on the
 * newest step that every worker with a commit holds (each keeps two). When
 * every worker has one, each goes on from its own, as it would have (the
 * same world started again goes on bit for bit). A worker without one (a
 * new one) takes the others': their parameters where they hold the same
 * bits (ddp), else the average of their f32 and f64 tensors; other tensors
 * and the state buffers come from the first worker with a commit. The step
 * continues from the commit's (dd_step_set). Call it after dd_model_commit
 * and before the first step; *step_p is the step to resume from, 0 when no
 * worker has a commit of this job (a fresh job) or DREAMDDP_ELASTIC=no.
 * @return DD_OK; DD_ERR_IO when a worker cannot read its commit (every
 *         worker fails); DD_ERR_STATE out of order.
 * Collective over the workers. One thread at a time per context.
 */
DD_API dd_status_t dd_elastic_restore(dd_context_h ctx, uint64_t *step_p);

/** Bits of dd_layer_stats_t::field_mask. */
enum {
    DD_LAYER_STATS_FIELD_SYNCS = 1u << 0,            /**< syncs */
    DD_LAYER_STATS_FIELD_BYTES = 1u << 1,            /**< bytes */
    DD_LAYER_STATS_FIELD_WIRE_S = 1u << 2,           /**< wire_s */
    DD_LAYER_STATS_FIELD_BP_S = 1u << 3,             /**< bp_s */
    DD_LAYER_STATS_FIELD_PERIOD = 1u << 4,           /**< period */
    DD_LAYER_STATS_FIELD_EXTRA_SYNCS = 1u << 5,      /**< extra_syncs */
    DD_LAYER_STATS_FIELD_DIVERGENCE = 1u << 6,       /**< divergence */
    DD_LAYER_STATS_FIELD_DIVERGENCE_MAX = 1u << 7,   /**< divergence_max */
    DD_LAYER_STATS_FIELD_DIVERGENCE_MEAN = 1u << 8,  /**< divergence_mean */
    DD_LAYER_STATS_FIELD_DIVERGENCE_AGREED = 1u << 9 /**< divergence_agreed */
};

/** Per-layer totals since dd_model_commit. */
typedef struct {
    uint64_t field_mask;    /**< DD_LAYER_STATS_FIELD_* bits: the fields to
                                 fill; set by the caller */
    uint64_t syncs;         /**< times the layer was averaged */
    uint64_t bytes;         /**< bytes averaged */
    double wire_s;          /**< seconds on the wire (a fused sync is shared by
                                 bytes; with several streams, the sync's
                                 share of the wire) */
    double bp_s;            /**< last measured backward time of the layer */
    int period;             /**< adaptive: current period K; others: window H */
    uint64_t extra_syncs;   /**< of syncs, those beyond the layer's one per
                                 window (dreamddp's bubble filling) */
    double divergence;      /**< this worker's relative divergence at the
                                 layer's last parameter average:
                                 ||x - avg|| / ||avg|| over its tensors, x
                                 its replica before the average (||x - avg||
                                 where avg is 0); 0 under ddp, whose
                                 gradient averaging keeps the replicas
                                 equal, and where DREAMDDP_DRIFT=no */
    double divergence_max;  /**< the largest divergence over the workers,
                                 as agreed at the latest window start (ddp:
                                 0) */
    double divergence_mean; /**< the workers' mean divergence, agreed with
                                 divergence_max */
    uint64_t divergence_agreed; /**< agreements that carried a figure of the
                                     layer (those that updated the two
                                     above) */
} dd_layer_stats_t;

/**
 * Fills the fields of stats_p that its field_mask names, for layer; leaves
 * the others untouched.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM for a foreign layer, a NULL stats_p,
 *         or a field_mask bit this library does not know.
 * One thread at a time per context (dd_step_end() updates the totals).
 */
DD_API dd_status_t dd_layer_stats(dd_context_h ctx, dd_layer_h layer,
                                  dd_layer_stats_t *stats_p);

/** The layer's name; it lives as long as the context. Any thread. */
DD_API const char *dd_layer_name(dd_layer_h layer);

/**
 * Serves as an aggregator: sums the chunks the workers push and sends the
 * averages back, until every worker has reached dd_finalize. Call it on
 * ranks whose dd_role() is DD_ROLE_AGGREGATOR (the `ddagg` tool does), then
 * dd_finalize.
 *
 * @return DD_OK when every worker said goodbye; DD_ERR_STATE on a worker;
 *         DD_ERR_CANCELED when the job dropped this aggregator (under
 *         DREAMDDP_AGG_LOSS=survive, frozen or cut off past
 *         DREAMDDP_AGG_LOST_AFTER_S, then back: the workers went on
 *         without it), said in one warning; dd_finalize then leaves
 *         without waiting for the others and returns DD_OK; the error that
 *         stopped the service (a lost worker, a malformed or duplicated
 *         message, a timeout), named in dd_last_error().
 * One thread at a time per context; it blocks until the service ends.
 */
DD_API dd_status_t dd_aggregator_serve(dd_context_h ctx);

#ifdef __cplusplus
}
#endif

#endif /* DREAMDDP_H */
