/*
 * The public blocking collectives: check the arguments and hand the
 * operation to the scheduler, which runs it through the progress engine in
 * its turn among the layers' syncs (so that every rank starts them in the
 * same order, and one thread at a time calls a backend), or directly
 * before the model is committed. Errors of the operation itself are
 * reported by the backend; this file reports bad arguments only.
 */
#include "api/context.h"
#include "api/watch.h"
#include "backends/registry.h"
#include "core/log.h"
#include "sched/sched.h"

#include <dreamddp/introspect.h>

#include <stdint.h>
#include <stdio.h>

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

static dd_status_t dd_coll_run(dd_context_h ctx, dd_coll_t coll,
                               const dd_backend_args_t *args)
{
    dd_status_t status = dd_coll_check(ctx, coll, args);

    if (status != DD_OK) {
        return status;
    }
    /* The workers' instances number the workers from 0. */
    dd_sched_coll_t c = {.coll = coll, .args = *args, .device = -1};
    char what[64];
    c.args.root = dd_context_worker_index(ctx, args->root);
    snprintf(what, sizeof(what), "dd_%s of %zu %s", dd_coll_name(coll),
             args->count, dd_dtype_name(args->dtype));
    dd_watch_call_begin(ctx, what);
    return dd_watch_call_end(ctx, dd_sched_collective(ctx->sched, &c));
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
