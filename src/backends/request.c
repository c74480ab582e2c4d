/*
 * One collective on the backend that scores best for it: started without
 * blocking, then tested or waited for. The engine's pipe and the blocking
 * collectives both go through here; neither knows which module runs it.
 */
#include "backends/registry.h"
#include "core/log.h"

static dd_backend_op_fn_t dd_backends_op_fn(const dd_backend_ops_t *ops,
                                            dd_coll_t coll)
{
    switch (coll) {
    case DD_COLL_ALLREDUCE:
        return ops->allreduce;
    case DD_COLL_BROADCAST:
        return ops->broadcast;
    case DD_COLL_REDUCE_SCATTER:
        return ops->reduce_scatter;
    case DD_COLL_ALLGATHER:
        return ops->allgather;
    default:
        return NULL;
    }
}

dd_status_t dd_backends_op_start(dd_backends_t *backends, dd_coll_t coll,
                                 const dd_backend_args_t *args, size_t bytes,
                                 dd_backends_op_t *op)
{
    dd_status_t status =
        dd_backends_pick(backends, coll, args->mem_type, bytes, &op->ref);

    if (status != DD_OK) {
        return status;
    }
    dd_backend_op_fn_t start = dd_backends_op_fn(op->ref.ops, coll);
    if (start == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BACKEND,
                        "%s is not a collective", dd_coll_name(coll));
    }
    dd_log_trace(DD_SUBSYS_BACKEND, "%s of %zu bytes through %s",
                 dd_coll_name(coll), bytes, op->ref.ops->name);
    return start(op->ref.instance, args, &op->req);
}

dd_status_t dd_backends_op_test(dd_backends_op_t *op)
{
    return op->ref.ops->test(op->ref.instance, op->req);
}

dd_status_t dd_backends_op_wait(dd_backends_op_t *op, double timeout_s)
{
    dd_status_t status =
        op->ref.ops->wait(op->ref.instance, op->req, timeout_s);

    if (status == DD_INPROGRESS) { /* reported by the backend */
        op->ref.ops->cancel(op->ref.instance, op->req);
        status = DD_ERR_TIMED_OUT;
    }
    return status;
}

void dd_backends_op_cancel(dd_backends_op_t *op)
{
    op->ref.ops->cancel(op->ref.instance, op->req);
}
