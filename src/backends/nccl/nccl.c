/*
 * The NCCL backend module: one communicator per dd context, its unique id
 * passed through the store, operations queued on the caller's CUDA stream
 * (or the module's own) with an event marking their end. Waiting polls the
 * event and ncclCommGetAsyncError, and aborts the communicator on timeout.
 * CUDA memory only; f16 and bf16 are reduced natively. NCCL has no API for
 * its interface, so this module (and only it) sets NCCL_SOCKET_IFNAME and
 * NCCL_IB_HCA from the services struct where the user has not, and the
 * socket transport's threads from services->streams (dd_netdev_nccl_streams).
 * It must not
 * call the core, and only this module links CUDA and NCCL.
 */
#include <dreamddp/backend.h>

#include "backends/coll/coll.h"
#include "backends/netdev.h"
#include "core/reduce.h"
#include "core/time.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct dd_backend {
    const dd_backend_services_t *svc;
    ncclComm_t comm;
    cudaStream_t stream;
    int device;
    int aborted;
};

struct dd_backend_request {
    cudaEvent_t event;
    const char *what;
};

static const dd_backend_ops_t dd_nccl_ops;

static dd_status_t dd_nccl_query(char *why, size_t size)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);

    if (err != cudaSuccess) {
        snprintf(why, size, "no usable CUDA device: %s",
                 cudaGetErrorString(err));
        return DD_ERR_NO_DEVICE;
    }
    if (n == 0) {
        snprintf(why, size, "no CUDA device on this machine");
        return DD_ERR_NO_DEVICE;
    }
    return DD_OK;
}

static dd_status_t dd_nccl_fail(const dd_backend_services_t *svc,
                                const char *what, ncclResult_t res)
{
    dd_status_t status = res == ncclSystemError || res == ncclRemoteError
                             ? DD_ERR_PEER_LOST
                         : res == ncclInvalidArgument || res == ncclInvalidUsage
                             ? DD_ERR_INVALID_PARAM
                             : DD_ERR_BACKEND;
    return dd_coll_error(svc, status, "%s: %s", what, ncclGetErrorString(res));
}

static dd_status_t dd_nccl_cuda_fail(const dd_backend_services_t *svc,
                                     const char *what, cudaError_t err)
{
    return dd_coll_error(svc, DD_ERR_BACKEND, "%s: %s", what,
                         cudaGetErrorString(err));
}

/* Sets one of NCCL's variables unless the user did. */
static dd_status_t dd_nccl_setenv(const dd_backend_services_t *svc,
                                  const char *name, const char *value)
{
    if (dd_netdev_user_set(name)) {
        dd_coll_log(svc, DD_BACKEND_LOG_DEBUG, "%s=%s kept as the user set it",
                    name, getenv(name));
        return DD_OK;
    }
    if (setenv(name, value, 1) != 0) {
        return dd_coll_error(svc, DD_ERR_NO_MEMORY, "cannot set %s: %m", name);
    }
    dd_coll_log(svc, DD_BACKEND_LOG_DEBUG, "set %s=%s", name, value);
    return DD_OK;
}

/* The topology's interface, before NCCL first reads its variables (in
 * ncclGetUniqueId and ncclCommInitRank; it keeps what it read for the
 * rest of the process). */
static dd_status_t dd_nccl_net_env(const dd_backend_services_t *svc)
{
    char value[DD_NETDEV_VALUE_MAX];
    dd_status_t status;

    int threads, socks;

    /* Both or neither: NCCL bounds their product, so one the user set
     * leaves the other to NCCL as well. */
    if (dd_netdev_nccl_streams(svc->streams, &threads, &socks)) {
        if (dd_netdev_user_set("NCCL_SOCKET_NTHREADS") ||
            dd_netdev_user_set("NCCL_NSOCKS_PERTHREAD")) {
            dd_coll_log(svc, DD_BACKEND_LOG_DEBUG,
                        "NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD kept "
                        "as the user set them, not from %d streams",
                        svc->streams);
        } else {
            snprintf(value, sizeof(value), "%d", threads);
            status = dd_nccl_setenv(svc, "NCCL_SOCKET_NTHREADS", value);
            snprintf(value, sizeof(value), "%d", socks);
            if (status == DD_OK) {
                status = dd_nccl_setenv(svc, "NCCL_NSOCKS_PERTHREAD", value);
            }
            if (status != DD_OK) {
                return status;
            }
        }
    }
    if (svc->ifname == NULL) {
        return DD_OK;
    }
    dd_netdev_nccl_socket(svc->ifname, value, sizeof(value));
    status = dd_nccl_setenv(svc, "NCCL_SOCKET_IFNAME", value);
    if (status == DD_OK && dd_netdev_nccl_ib_hca(svc->rdma, svc->rdma_port,
                                                 value, sizeof(value))) {
        status = dd_nccl_setenv(svc, "NCCL_IB_HCA", value);
    }
    return status;
}

/* Rank 0 makes the id; everyone reads it from the store. */
static dd_status_t dd_nccl_unique_id(const dd_backend_services_t *svc,
                                     ncclUniqueId *id)
{
    void *value;
    size_t len;
    dd_status_t status;

    if (svc->rank == 0) {
        ncclResult_t res = ncclGetUniqueId(id);
        if (res != ncclSuccess) {
            return dd_nccl_fail(svc, "ncclGetUniqueId", res);
        }
        return svc->store_set(svc->arg, "id", id, sizeof(*id));
    }
    status = svc->store_get(svc->arg, "id", &value, &len);
    if (status != DD_OK) {
        return status;
    }
    if (len != sizeof(*id)) {
        free(value);
        return dd_coll_error(svc, DD_ERR_MESSAGE,
                             "the NCCL id from the store has %zu bytes, not "
                             "%zu",
                             len, sizeof(*id));
    }
    memcpy(id, value, sizeof(*id));
    free(value);
    return DD_OK;
}

static dd_status_t dd_nccl_init(const dd_backend_services_t *svc,
                                dd_backend_t **backend_p)
{
    ncclUniqueId id;
    int n = 0;
    dd_status_t status;

    dd_backend_t *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return dd_coll_error(svc, DD_ERR_NO_MEMORY, "no memory");
    }
    b->svc = svc;
    cudaGetDeviceCount(&n);
    b->device = n > 0 ? svc->local_rank % n : 0;
    cudaError_t err = cudaSetDevice(b->device);
    if (err == cudaSuccess) {
        err = cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking);
    }
    if (err != cudaSuccess) {
        status = dd_nccl_cuda_fail(svc, "cannot set up the CUDA device", err);
        goto err_free;
    }
    status = dd_nccl_net_env(svc);
    if (status == DD_OK) {
        status = dd_nccl_unique_id(svc, &id);
    }
    if (status != DD_OK) {
        goto err_destroy_stream;
    }
    ncclResult_t res =
        ncclCommInitRank(&b->comm, svc->world_size, id, svc->rank);
    if (res != ncclSuccess) {
        status = dd_nccl_fail(svc, "ncclCommInitRank", res);
        goto err_destroy_stream;
    }
    dd_coll_log(svc, DD_BACKEND_LOG_DEBUG, "communicator of %d on device %d",
                svc->world_size, b->device);
    *backend_p = b;
    return DD_OK;

err_destroy_stream:
    cudaStreamDestroy(b->stream);
err_free:
    free(b);
    return status;
}

static void dd_nccl_finalize(dd_backend_t *b)
{
    if (b->aborted) {
        /* ncclCommAbort already freed it. */
    } else {
        ncclCommDestroy(b->comm);
    }
    cudaStreamDestroy(b->stream);
    free(b);
}

static int dd_nccl_score(dd_backend_t *b, dd_backend_op_t op,
                         dd_mem_type_t mem_type, size_t bytes)
{
    return mem_type == DD_MEM_CUDA && !b->aborted ? 100 : 0;
}

static int dd_nccl_dtype(dd_dtype_t dtype, ncclDataType_t *out)
{
    static const ncclDataType_t map[DD_DTYPE_LAST] = {
        ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16,
        ncclInt32,   ncclInt64,   ncclUint8};
    if ((unsigned)dtype >= DD_DTYPE_LAST) {
        return -1;
    }
    *out = map[dtype];
    return 0;
}

static int dd_nccl_op(dd_reduce_op_t op, dd_dtype_t dtype, ncclRedOp_t *out)
{
    int integer =
        dtype == DD_DTYPE_I32 || dtype == DD_DTYPE_I64 || dtype == DD_DTYPE_U8;
    switch (op) {
    case DD_REDUCE_SUM:
        *out = ncclSum;
        return 0;
    case DD_REDUCE_AVG:
        *out = ncclAvg; /* NCCL averages floating types only */
        return integer ? -1 : 0;
    case DD_REDUCE_MAX:
        *out = ncclMax;
        return 0;
    case DD_REDUCE_MIN:
        *out = ncclMin;
        return 0;
    default:
        return -1;
    }
}

/* Checks what every operation needs and returns its stream. */
static dd_status_t dd_nccl_prepare(dd_backend_t *b, const char *what,
                                   const dd_backend_args_t *args,
                                   ncclDataType_t *dtype_p,
                                   cudaStream_t *stream_p)
{
    if (args->mem_type != DD_MEM_CUDA) {
        return dd_coll_error(b->svc, DD_ERR_UNSUPPORTED,
                             "%s: NCCL needs CUDA memory", what);
    }
    if (b->aborted) {
        return dd_coll_error(b->svc, DD_ERR_STATE,
                             "%s: the communicator was aborted after a "
                             "timeout",
                             what);
    }
    if (dd_nccl_dtype(args->dtype, dtype_p)) {
        return dd_coll_error(b->svc, DD_ERR_INVALID_PARAM,
                             "%s: invalid dtype %d", what, (int)args->dtype);
    }
    *stream_p = args->stream != NULL ? (cudaStream_t)args->stream : b->stream;
    cudaSetDevice(b->device);
    return DD_OK;
}

/* Records the end of what was just queued on stream. */
static dd_status_t dd_nccl_launched(dd_backend_t *b, const char *what,
                                    ncclResult_t res, cudaStream_t stream,
                                    dd_backend_request_t **req_p)
{
    if (res != ncclSuccess) {
        return dd_nccl_fail(b->svc, what, res);
    }
    dd_backend_request_t *req = calloc(1, sizeof(*req));
    if (req == NULL) {
        return dd_coll_error(b->svc, DD_ERR_NO_MEMORY, "%s: no memory", what);
    }
    req->what = what;
    cudaError_t err =
        cudaEventCreateWithFlags(&req->event, cudaEventDisableTiming);
    if (err == cudaSuccess) {
        err = cudaEventRecord(req->event, stream);
    }
    if (err != cudaSuccess) {
        free(req);
        return dd_nccl_cuda_fail(b->svc, what, err);
    }
    *req_p = req;
    return DD_OK;
}

static dd_status_t dd_nccl_reduction(dd_backend_t *b, dd_coll_t coll,
                                     const dd_backend_args_t *args,
                                     dd_backend_request_t **req_p)
{
    const char *what = dd_coll_kind_name(coll);
    ncclDataType_t dtype;
    ncclRedOp_t op;
    cudaStream_t stream;
    ncclResult_t res;

    dd_status_t status = dd_nccl_prepare(b, what, args, &dtype, &stream);
    if (status != DD_OK) {
        return status;
    }
    if (dd_nccl_op(args->op, args->dtype, &op)) {
        return dd_coll_error(b->svc, DD_ERR_UNSUPPORTED,
                             "%s: NCCL has no %s of %s", what,
                             args->op == DD_REDUCE_AVG ? "average" : "such op",
                             dd_coll_dtype_name(args->dtype));
    }
    if (coll == DD_COLL_ALLREDUCE) {
        res = ncclAllReduce(args->sendbuf, args->recvbuf, args->count, dtype,
                            op, b->comm, stream);
    } else {
        res = ncclReduceScatter(args->sendbuf, args->recvbuf, args->count,
                                dtype, op, b->comm, stream);
    }
    return dd_nccl_launched(b, what, res, stream, req_p);
}

static dd_status_t dd_nccl_allreduce(dd_backend_t *b,
                                     const dd_backend_args_t *args,
                                     dd_backend_request_t **req_p)
{
    return dd_nccl_reduction(b, DD_COLL_ALLREDUCE, args, req_p);
}

static dd_status_t dd_nccl_reduce_scatter(dd_backend_t *b,
                                          const dd_backend_args_t *args,
                                          dd_backend_request_t **req_p)
{
    return dd_nccl_reduction(b, DD_COLL_REDUCE_SCATTER, args, req_p);
}

static dd_status_t dd_nccl_broadcast(dd_backend_t *b,
                                     const dd_backend_args_t *args,
                                     dd_backend_request_t **req_p)
{
    ncclDataType_t dtype;
    cudaStream_t stream;
    dd_status_t status = dd_nccl_prepare(b, "broadcast", args, &dtype, &stream);

    if (status != DD_OK) {
        return status;
    }
    ncclResult_t res = ncclBroadcast(args->recvbuf, args->recvbuf, args->count,
                                     dtype, args->root, b->comm, stream);
    return dd_nccl_launched(b, "broadcast", res, stream, req_p);
}

static dd_status_t dd_nccl_allgather(dd_backend_t *b,
                                     const dd_backend_args_t *args,
                                     dd_backend_request_t **req_p)
{
    ncclDataType_t dtype;
    cudaStream_t stream;
    dd_status_t status = dd_nccl_prepare(b, "allgather", args, &dtype, &stream);

    if (status != DD_OK) {
        return status;
    }
    ncclResult_t res = ncclAllGather(args->sendbuf, args->recvbuf, args->count,
                                     dtype, b->comm, stream);
    return dd_nccl_launched(b, "allgather", res, stream, req_p);
}

static dd_status_t dd_nccl_send(dd_backend_t *b, const dd_backend_args_t *args,
                                dd_backend_request_t **req_p)
{
    ncclDataType_t dtype;
    cudaStream_t stream;
    dd_status_t status = dd_nccl_prepare(b, "send", args, &dtype, &stream);

    if (status != DD_OK) {
        return status;
    }
    ncclResult_t res = ncclSend(args->sendbuf, args->count, dtype, args->peer,
                                b->comm, stream);
    return dd_nccl_launched(b, "send", res, stream, req_p);
}

static dd_status_t dd_nccl_recv(dd_backend_t *b, const dd_backend_args_t *args,
                                dd_backend_request_t **req_p)
{
    ncclDataType_t dtype;
    cudaStream_t stream;
    dd_status_t status = dd_nccl_prepare(b, "recv", args, &dtype, &stream);

    if (status != DD_OK) {
        return status;
    }
    ncclResult_t res = ncclRecv(args->recvbuf, args->count, dtype, args->peer,
                                b->comm, stream);
    return dd_nccl_launched(b, "recv", res, stream, req_p);
}

static dd_status_t dd_nccl_release(dd_backend_request_t *req,
                                   dd_status_t status)
{
    cudaEventDestroy(req->event);
    free(req);
    return status;
}

static dd_status_t dd_nccl_test(dd_backend_t *b, dd_backend_request_t *req)
{
    cudaError_t err = cudaEventQuery(req->event);
    ncclResult_t async = ncclSuccess;

    if (err == cudaSuccess) {
        return dd_nccl_release(req, DD_OK);
    }
    if (err != cudaErrorNotReady) {
        return dd_nccl_release(req, dd_nccl_cuda_fail(b->svc, req->what, err));
    }
    if (ncclCommGetAsyncError(b->comm, &async) != ncclSuccess ||
        (async != ncclSuccess && async != ncclInProgress)) {
        return dd_nccl_release(req, dd_nccl_fail(b->svc, req->what, async));
    }
    return DD_INPROGRESS;
}

static dd_status_t dd_nccl_wait(dd_backend_t *b, dd_backend_request_t *req,
                                double timeout_s)
{
    double deadline = dd_time_now() + timeout_s;
    struct timespec nap = {0, 50000};

    for (;;) {
        dd_status_t status = dd_nccl_test(b, req);
        if (status != DD_INPROGRESS) {
            return status;
        }
        if (dd_time_now() >= deadline) {
            break;
        }
        nanosleep(&nap, NULL);
    }
    /* A collective that does not finish holds the GPU: abort the
     * communicator so that the stream drains; later operations fail. */
    ncclCommAbort(b->comm);
    b->aborted = 1;
    dd_coll_error(b->svc, DD_ERR_TIMED_OUT,
                  "%s timed out after %.1f s; the NCCL communicator "
                  "was aborted",
                  req->what, timeout_s);
    return DD_INPROGRESS;
}

static void dd_nccl_cancel(dd_backend_t *b, dd_backend_request_t *req)
{
    dd_nccl_release(req, DD_ERR_CANCELED);
}

static void dd_nccl_progress(dd_backend_t *b)
{
}

/* The stream tells nobody when it is done: a nap, as dd_nccl_wait's. */
static void dd_nccl_idle(dd_backend_t *b, double timeout_s)
{
    struct timespec nap = {0, 50000};

    (void)b;
    if (timeout_s < 50e-6) {
        nap.tv_nsec = timeout_s > 0 ? (long)(timeout_s * 1e9) : 0;
    }
    nanosleep(&nap, NULL);
}

static const dd_backend_ops_t dd_nccl_ops = {
    .abi_version = DD_BACKEND_ABI_VERSION,
    .name = "nccl",
    .mem_types = DD_BACKEND_MEM(DD_MEM_CUDA),
    .caps = DD_BACKEND_CAP_NATIVE_COLL | DD_BACKEND_CAP_ASYNC |
            DD_BACKEND_CAP_NATIVE_HALF,
    .query = dd_nccl_query,
    .init = dd_nccl_init,
    .finalize = dd_nccl_finalize,
    .score = dd_nccl_score,
    .allreduce = dd_nccl_allreduce,
    .broadcast = dd_nccl_broadcast,
    .reduce_scatter = dd_nccl_reduce_scatter,
    .allgather = dd_nccl_allgather,
    .send = dd_nccl_send,
    .recv = dd_nccl_recv,
    .test = dd_nccl_test,
    .wait = dd_nccl_wait,
    .cancel = dd_nccl_cancel,
    .progress = dd_nccl_progress,
    .check = dd_nccl_test, /* its test only looks */
    .idle = dd_nccl_idle,
};

DD_API const dd_backend_ops_t *dd_backend_ops_get(void)
{
    return &dd_nccl_ops;
}
