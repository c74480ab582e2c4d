/*
 * The public blocking collectives: check the arguments, pick the backend by
 * score, start the operation and wait for it within DREAMDDP_TIMEOUT_S. Errors of
 * the operation itself are reported by the backend; this file reports bad
 * arguments only.
 */
#include "backends/registry.h"
#include "core/log.h"
#include "sched/context.h"

#include <stdint.h>

static dd_status_t dd_coll_check(dd_context_h ctx, dd_coll_t coll,
                                 const dd_backend_args_t *args)
{
    const char *name = dd_coll_name(coll);

    if (ctx == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BACKEND,
                        "dd_%s: ctx is NULL", name);
    }
    if (ctx->role != DD_ROLE_WORKER) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_BACKEND,
                        "dd_%s: collectives run among the workers; rank %d "
                        "is an aggregator",
                        name, ctx->env.rank);
    }
    if (dd_dtype_size(args->dtype) == 0) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BACKEND,
                        "dd_%s: invalid dtype %d", name, (int)args->dtype);
    }
    if ((unsigned)args->op >= DD_REDUCE_LAST) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BACKEND,
                        "dd_%s: invalid reduction %d", name, (int)args->op);
    }
    if ((unsigned)args->mem_type >= DD_MEM_LAST) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BACKEND,
                        "dd_%s: invalid memory type %d", name,
                        (int)args->mem_type);
    }
    if (args->count > SIZE_MAX / 16 / (size_t)ctx->n_workers) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BACKEND,
                        "dd_%s: %zu elements is too many", name, args->count);
    }
    if (args->count > 0 &&
        (args->recvbuf == NULL ||
         (coll != DD_COLL_BROADCAST && args->sendbuf == NULL))) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BACKEND,
                        "dd_%s: NULL buffer with %zu elements", name,
                        args->count);
    }
    if (coll == DD_COLL_BROADCAST &&
        dd_context_worker_index(ctx, args->root) < 0) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BACKEND,
                        "dd_broadcast: root %d is not a worker rank",
                        args->root);
    }
    return DD_OK;
}

/* Bytes of the largest buffer of the operation, which selection uses. */
static size_t dd_coll_bytes(dd_context_h ctx, dd_coll_t coll,
                            const dd_backend_args_t *args)
{
    size_t bytes = args->count * dd_dtype_size(args->dtype);

    if (coll == DD_COLL_REDUCE_SCATTER || coll == DD_COLL_ALLGATHER) {
        bytes *= (size_t)ctx->n_workers;
    }
    return bytes;
}

static dd_status_t dd_coll_run(dd_context_h ctx, dd_coll_t coll,
                               const dd_backend_args_t *args)
{
    dd_backend_ref_t ref;
    dd_backend_request_t *req;
    dd_status_t status = dd_coll_check(ctx, coll, args);

    if (status != DD_OK) {
        return status;
    }
    size_t bytes = dd_coll_bytes(ctx, coll, args);
    status = dd_backends_pick(dd_context_coll_backends(ctx), coll,
                              args->mem_type, bytes, &ref);
    if (status != DD_OK) {
        return status;
    }
    dd_backend_op_fn_t start = coll == DD_COLL_ALLREDUCE   ? ref.ops->allreduce
                               : coll == DD_COLL_BROADCAST ? ref.ops->broadcast
                               : coll == DD_COLL_REDUCE_SCATTER
                                   ? ref.ops->reduce_scatter
                                   : ref.ops->allgather;
    dd_log_trace(DD_SUBSYS_BACKEND, "%s of %zu bytes through %s",
                 dd_coll_name(coll), bytes, ref.ops->name);
    /* The workers' instances number the workers from 0. */
    dd_backend_args_t mapped = *args;
    mapped.root = dd_context_worker_index(ctx, args->root);
    status = start(ref.instance, &mapped, &req);
    if (status != DD_OK) {
        return status;
    }
    status = ref.ops->wait(ref.instance, req, ctx->core.timeout_s);
    if (status == DD_INPROGRESS) { /* reported by the backend */
        ref.ops->cancel(ref.instance, req);
        status = DD_ERR_TIMED_OUT;
    }
    return status;
}

dd_status_t dd_allreduce(dd_context_h ctx, const void *sendbuf, void *recvbuf,
                         size_t count, dd_dtype_t dtype, dd_reduce_op_t op,
                         dd_mem_type_t mem_type)
{
    dd_backend_args_t args = {.sendbuf = sendbuf,
                              .recvbuf = recvbuf,
                              .count = count,
                              .dtype = dtype,
                              .op = op,
                              .mem_type = mem_type};

    return dd_coll_run(ctx, DD_COLL_ALLREDUCE, &args);
}

dd_status_t dd_broadcast(dd_context_h ctx, void *buf, size_t count,
                         dd_dtype_t dtype, int root, dd_mem_type_t mem_type)
{
    dd_backend_args_t args = {.sendbuf = buf,
                              .recvbuf = buf,
                              .count = count,
                              .dtype = dtype,
                              .root = root,
                              .mem_type = mem_type};

    return dd_coll_run(ctx, DD_COLL_BROADCAST, &args);
}

dd_status_t dd_reduce_scatter(dd_context_h ctx, const void *sendbuf,
                              void *recvbuf, size_t recvcount, dd_dtype_t dtype,
                              dd_reduce_op_t op, dd_mem_type_t mem_type)
{
    dd_backend_args_t args = {.sendbuf = sendbuf,
                              .recvbuf = recvbuf,
                              .count = recvcount,
                              .dtype = dtype,
                              .op = op,
                              .mem_type = mem_type};

    return dd_coll_run(ctx, DD_COLL_REDUCE_SCATTER, &args);
}

dd_status_t dd_allgather(dd_context_h ctx, const void *sendbuf, void *recvbuf,
                         size_t sendcount, dd_dtype_t dtype,
                         dd_mem_type_t mem_type)
{
    dd_backend_args_t args = {.sendbuf = sendbuf,
                              .recvbuf = recvbuf,
                              .count = sendcount,
                              .dtype = dtype,
                              .mem_type = mem_type};

    return dd_coll_run(ctx, DD_COLL_ALLGATHER, &args);
}

const char *dd_backend_name(dd_context_h ctx, dd_coll_t coll,
                            dd_mem_type_t mem_type, size_t bytes)
{
    dd_backend_ref_t ref;

    if (ctx == NULL || (unsigned)coll >= DD_COLL_LAST ||
        (unsigned)mem_type >= DD_MEM_LAST) {
        dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BACKEND,
                 "dd_backend_name: invalid context, operation or memory "
                 "type");
        return NULL;
    }
    if (dd_backends_pick(dd_context_coll_backends(ctx), coll, mem_type, bytes,
                         &ref) != DD_OK) {
        return NULL;
    }
    return ref.ops->name;
}
