/*
 * Executes a plan without blocking: a step starts once the steps it depends
 * on are done; local steps (reduce, copy) run at once, messages are posted
 * through the module's send and recv and finish when its test says so.
 * Errors of messages were reported by the module; this file reports only
 * timeouts, naming the step and peer it was waiting for.
 */
#include "backends/coll/coll.h"
#include "core/reduce.h"
#include "core/time.h"

#include <stdlib.h>
#include <string.h>

enum { DD_COLL_WAITING = 0, DD_COLL_POSTED, DD_COLL_DONE };

struct dd_coll_req {
    dd_coll_comm_t comm;
    dd_coll_t coll;
    dd_coll_plan_t plan;
    uint8_t *state;
    dd_backend_request_t **reqs;
    size_t first; /* steps before it are all done */
    uint32_t sig;
    uint32_t seq;
};

static void dd_coll_req_free(dd_coll_req_t *req)
{
    dd_coll_plan_release(&req->plan);
    free(req->state);
    free(req->reqs);
    free(req);
}

/* Cancels every message still in flight and frees the request. */
static void dd_coll_abort(dd_coll_req_t *req)
{
    for (size_t i = req->first; i < req->plan.n_steps; i++) {
        if (req->state[i] == DD_COLL_POSTED) {
            req->comm.ops->cancel(req->comm.backend, req->reqs[i]);
        }
    }
    dd_coll_req_free(req);
}

static int dd_coll_ready(const dd_coll_req_t *req, const dd_coll_step_t *s)
{
    for (int d = 0; d < 2; d++) {
        if (s->dep[d] != 0 && req->state[s->dep[d] - 1] != DD_COLL_DONE) {
            return 0;
        }
    }
    return 1;
}

static dd_status_t dd_coll_post(dd_coll_req_t *req, size_t i)
{
    const dd_coll_step_t *s = &req->plan.steps[i];
    size_t esize = dd_coll_dtype_size(req->plan.dtype);
    dd_backend_args_t args;

    switch (s->kind) {
    case DD_COLL_STEP_REDUCE:
        dd_coll_reduce(s->dst, s->src, s->count, req->plan.dtype, req->plan.op);
        req->state[i] = DD_COLL_DONE;
        return DD_OK;
    case DD_COLL_STEP_COPY:
        if (s->count != 0 && s->dst != s->src) {
            memcpy(s->dst, s->src, s->count * esize);
        }
        req->state[i] = DD_COLL_DONE;
        return DD_OK;
    default:
        break;
    }
    memset(&args, 0, sizeof(args));
    args.sendbuf = s->src;
    args.recvbuf = s->dst;
    args.count = s->count;
    args.dtype = req->plan.dtype;
    args.peer = s->peer;
    args.tag = dd_coll_tag(req->sig, req->seq, s->msg);
    args.mem_type = DD_MEM_HOST;
    dd_backend_op_fn_t fn = s->kind == DD_COLL_STEP_SEND ? req->comm.ops->send
                                                         : req->comm.ops->recv;
    dd_status_t status = fn(req->comm.backend, &args, &req->reqs[i]);
    if (status == DD_OK) {
        req->state[i] = DD_COLL_POSTED;
    }
    return status;
}

/* One pass over the steps not yet done. */
static dd_status_t dd_coll_advance(dd_coll_req_t *req)
{
    const dd_coll_comm_t *comm = &req->comm;
    dd_status_t status;

    for (size_t i = req->first; i < req->plan.n_steps; i++) {
        if (req->state[i] == DD_COLL_POSTED) {
            status = comm->ops->check(comm->backend, req->reqs[i]);
            if (status == DD_INPROGRESS) {
                continue;
            }
            req->state[i] = DD_COLL_DONE;
            if (status != DD_OK) {
                return status;
            }
        }
        if (req->state[i] == DD_COLL_WAITING &&
            dd_coll_ready(req, &req->plan.steps[i])) {
            status = dd_coll_post(req, i);
            if (status != DD_OK) {
                return status;
            }
        }
        if (i == req->first && req->state[i] == DD_COLL_DONE) {
            req->first++;
        }
    }
    if (req->first < req->plan.n_steps) {
        return DD_INPROGRESS;
    }
    if (req->plan.divide_buf != NULL) {
        dd_coll_divide(req->plan.divide_buf, req->plan.divide_count,
                       req->plan.dtype, req->plan.divisor);
    }
    return DD_OK;
}

dd_status_t dd_coll_start(const dd_coll_comm_t *comm, dd_coll_t coll,
                          const dd_backend_args_t *args, uint32_t seq,
                          dd_coll_req_t **req_p)
{
    dd_coll_req_t *req = calloc(1, sizeof(*req));
    dd_status_t status;

    if (req == NULL) {
        return dd_coll_error(comm->services, DD_ERR_NO_MEMORY,
                             "%s: no memory for a request",
                             dd_coll_kind_name(coll));
    }
    req->comm = *comm;
    req->coll = coll;
    req->sig = dd_coll_signature(coll, args);
    req->seq = seq;
    status = dd_coll_plan_build(&req->plan, coll, args, comm->rank, comm->world,
                                comm->chunk_bytes);
    if (status != DD_OK) {
        free(req);
        /* The planner is pure: its failures are reported here. */
        return dd_coll_error(
            comm->services, status, "%s of %zu %s elements: %s (status %d)",
            dd_coll_kind_name(coll), args->count,
            dd_coll_dtype_name(args->dtype),
            status == DD_ERR_NO_MEMORY ? "no memory for its plan"
                                       : "cannot plan it",
            (int)status);
    }
    req->state = calloc(req->plan.n_steps + 1, 1);
    req->reqs = calloc(req->plan.n_steps + 1, sizeof(*req->reqs));
    if (req->state == NULL || req->reqs == NULL) {
        dd_coll_req_free(req);
        return dd_coll_error(comm->services, DD_ERR_NO_MEMORY,
                             "%s: no memory for a request",
                             dd_coll_kind_name(coll));
    }
    *req_p = req;
    return DD_OK;
}

dd_status_t dd_coll_test(dd_coll_req_t *req)
{
    /* One progress call for the whole pass: a module's test need not
     * progress, and calling it once per message in flight cost a system
     * call each. */
    req->comm.ops->progress(req->comm.backend);
    dd_status_t status = dd_coll_advance(req);

    if (status == DD_INPROGRESS) {
        return status;
    }
    if (status == DD_OK) {
        dd_coll_req_free(req);
    } else {
        dd_coll_abort(req);
    }
    return status;
}

/* The first step still in flight, for the timeout's message. */
static dd_status_t dd_coll_timed_out(const dd_coll_req_t *req, double timeout_s)
{
    for (size_t i = req->first; i < req->plan.n_steps; i++) {
        const dd_coll_step_t *s = &req->plan.steps[i];
        if (req->state[i] == DD_COLL_POSTED) {
            return dd_coll_error(
                req->comm.services, DD_ERR_TIMED_OUT,
                "%s #%u timed out after %.1f s waiting to %s %zu elements "
                "%s rank %d (message %u of signature %#x); did every rank "
                "post the same collective with the same count, dtype and op?",
                dd_coll_kind_name(req->coll), req->seq, timeout_s,
                s->kind == DD_COLL_STEP_SEND ? "send" : "receive", s->count,
                s->kind == DD_COLL_STEP_SEND ? "to" : "from", s->peer, s->msg,
                req->sig);
        }
    }
    return dd_coll_error(req->comm.services, DD_ERR_TIMED_OUT,
                         "%s #%u timed out after %.1f s",
                         dd_coll_kind_name(req->coll), req->seq, timeout_s);
}

dd_status_t dd_coll_wait(dd_coll_req_t *req, double timeout_s)
{
    double deadline = dd_time_now() + timeout_s;

    for (;;) {
        dd_status_t status = dd_coll_advance(req);
        if (status != DD_INPROGRESS) {
            if (status == DD_OK) {
                dd_coll_req_free(req);
            } else {
                dd_coll_abort(req);
            }
            return status;
        }
        if (dd_time_now() >= deadline) {
            dd_coll_timed_out(req, timeout_s);
            return DD_INPROGRESS;
        }
        req->comm.ops->idle(req->comm.backend, deadline - dd_time_now());
    }
}

void dd_coll_cancel(dd_coll_req_t *req)
{
    dd_coll_abort(req);
}
