/*
 * How jobs travel: two pipes for the engine, one over the backends'
 * non-blocking collectives among the workers, one over the aggregators;
 * and the collectives the scheduler and the application ask for, which go
 * through the engine once it runs, so that every rank starts them in the
 * same order as the layers' syncs. Never the public blocking API.
 */
#include "agg/agg.h"
#include "backends/registry.h"
#include "core/log.h"
#include "sched/sched.h"

#include <stdlib.h>

/* The engine waits this much longer than DREAMDDP_TIMEOUT_S for the
 * backend, which times out by itself, before declaring the engine stuck. */
#define DD_ENGINE_GRACE_S 10.0

/* Bytes of the largest buffer of a collective, which selection uses. */
static size_t dd_sched_coll_bytes(const dd_sched_coll_t *c, int n_workers)
{
    size_t bytes = c->args.count * dd_dtype_size(c->args.dtype);

    if (c->coll == DD_COLL_REDUCE_SCATTER || c->coll == DD_COLL_ALLGATHER) {
        bytes *= (size_t)n_workers;
    }
    return bytes;
}

static dd_status_t dd_sched_coll_start(void *arg, dd_sync_job_t *job, void *buf,
                                       size_t count, void **handle_p)
{
    dd_sched_t *sched = arg;
    dd_backends_op_t *op = malloc(sizeof(*op));
    dd_sched_coll_t avg = {.coll = DD_COLL_ALLREDUCE,
                           .args = {.sendbuf = buf,
                                    .recvbuf = buf,
                                    .count = count,
                                    .dtype = job->dtype,
                                    .op = DD_REDUCE_AVG,
                                    .mem_type = job->mem_type}};
    const dd_sched_coll_t *c = job->op != NULL ? job->op : &avg;

    if (op == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory to start a collective");
    }
    dd_status_t status = dd_backends_op_start(
        sched->env.coll, c->coll, &c->args,
        dd_sched_coll_bytes(c, sched->env.job->n_workers), op);
    if (status != DD_OK) {
        free(op);
        return status;
    }
    *handle_p = op;
    return DD_OK;
}

static dd_status_t dd_sched_coll_test(void *arg, void *handle, int *busy_p)
{
    dd_backends_op_t *op = handle;
    dd_status_t status = dd_backends_op_test(op);

    (void)arg;
    *busy_p = status != DD_INPROGRESS;
    if (status != DD_INPROGRESS) {
        free(op);
    }
    return status;
}

/* The first worker's values of a job's buffers to every worker. */
static dd_status_t dd_sched_bcast_start(void *arg, dd_sync_job_t *job,
                                        void *buf, size_t count,
                                        void **handle_p)
{
    dd_sched_t *sched = arg;
    dd_backends_op_t *op = malloc(sizeof(*op));
    dd_backend_args_t args = {.sendbuf = buf,
                              .recvbuf = buf,
                              .count = count,
                              .dtype = job->dtype,
                              .root = 0,
                              .mem_type = job->mem_type};

    if (op == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory to start a broadcast");
    }
    dd_status_t status =
        dd_backends_op_start(sched->env.coll, DD_COLL_BROADCAST, &args,
                             count * dd_dtype_size(job->dtype), op);
    if (status != DD_OK) {
        free(op);
        return status;
    }
    *handle_p = op;
    return DD_OK;
}

static dd_status_t dd_sched_agg_start(void *arg, dd_sync_job_t *job, void *buf,
                                      size_t count, void **handle_p)
{
    dd_sched_t *sched = arg;
    uint32_t layer = job->n_layers ? (uint32_t)job->layers[0] : 0;

    return dd_agg_msg_start(sched->agg, job->step, layer, buf, count,
                            job->dtype, job->mem_type, handle_p);
}

static dd_status_t dd_sched_agg_test(void *arg, void *handle, int *busy_p)
{
    dd_sched_t *sched = arg;

    return dd_agg_test_msg(sched->agg, handle, busy_p);
}

void dd_sched_pipes_init(dd_sched_t *sched)
{
    /* Two collectives in flight, as PyTorch DDP's buckets on
     * ProcessGroupGloo's two threads: the next starts while the last
     * drains, which fills the ring's gaps between buckets. */
    sched->coll_pipe = (dd_sync_pipe_t){.start = dd_sched_coll_start,
                                        .test = dd_sched_coll_test,
                                        .depth = DD_ENGINE_DEPTH,
                                        .arg = sched};
    sched->bcast_pipe = (dd_sync_pipe_t){.start = dd_sched_bcast_start,
                                         .test = dd_sched_coll_test,
                                         .depth = 1,
                                         .arg = sched};
    sched->agg_pipe = (dd_sync_pipe_t){.start = dd_sched_agg_start,
                                       .test = dd_sched_agg_test,
                                       .depth = DD_ENGINE_DEPTH,
                                       .arg = sched};
}

double dd_sched_engine_timeout(const dd_sched_t *sched)
{
    return sched->env.job->timeout_s + DD_ENGINE_GRACE_S;
}

/* The ordinal a collective on device memory runs on: its own, or that of
 * the process's device layers (the public collectives take none). */
static int dd_sched_coll_device(const dd_sched_t *sched,
                                const dd_sched_coll_t *c)
{
    if (c->device >= 0) {
        return c->device;
    }
    for (size_t i = 0; i < sched->n_layers; i++) {
        const struct dd_layer *l = sched->layers[i];
        for (size_t t = 0; t < l->n_tensors; t++) {
            if (l->tensors[t].mem_type == DD_MEM_CUDA) {
                return l->tensors[t].device;
            }
        }
    }
    return 0;
}

dd_status_t dd_sched_collective(dd_sched_t *sched, const dd_sched_coll_t *c)
{
    const dd_job_t *job = sched->env.job;

    if (sched->engine == NULL && c->args.mem_type != DD_MEM_HOST) {
        dd_sync_job_t call = {.step = sched->step,
                              .dtype = c->args.dtype,
                              .mem_type = c->args.mem_type,
                              .device = dd_sched_coll_device(sched, c),
                              .op = c};
        return sched->env.device != NULL
                   ? dd_sched_device_call(sched, &call)
                   : dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                              "%s of device memory: no device module",
                              dd_coll_name(c->coll));
    }
    if (sched->engine == NULL) {
        /* Before commit nothing else runs on the backends. */
        dd_backends_op_t op;
        dd_status_t status =
            dd_backends_op_start(sched->env.coll, c->coll, &c->args,
                                 dd_sched_coll_bytes(c, job->n_workers), &op);
        return status == DD_OK ? dd_backends_op_wait(&op, job->timeout_s)
                               : status;
    }
    dd_sync_job_t *call = calloc(1, sizeof(*call));
    if (call == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a collective");
    }
    call->step = sched->step;
    call->dtype = c->args.dtype;
    call->mem_type = c->args.mem_type;
    call->device = dd_sched_coll_device(sched, c);
    call->pipe = c->args.mem_type != DD_MEM_HOST && sched->env.device != NULL
                     ? &sched->device_pipe
                     : &sched->coll_pipe;
    call->op = c;
    dd_status_t status =
        dd_engine_call(sched->engine, call, dd_sched_engine_timeout(sched));
    if (status == DD_ERR_TIMED_OUT && call->finished != 2) {
        /* The engine still holds it: leak it rather than free what the
         * engine thread may touch. */
        return dd_error(status, DD_SUBSYS_SCHED,
                        "%s: the progress engine did not run it within "
                        "%.0f s",
                        dd_coll_name(c->coll), dd_sched_engine_timeout(sched));
    }
    free(call);
    return status;
}
