/*
 * The routes a layer's syncs take, composed once at dd_model_commit: from
 * the settings (DREAMDDP_ROUTE, the aggregators, the device module, each
 * layer's codec) this file alone chains codec -> staging -> hierarchical,
 * aggregation or allreduce for every tensor, into the layer's table, and
 * logs the chain of each layer at debug level. A mark then takes its pipe
 * from the table; no pipe sees the runtime. Also the collectives the
 * scheduler and the application ask for, which go through the engine once
 * it runs, so that every rank starts them in the same order as the
 * layers' syncs.
 */
#include "core/log.h"
#include "sched/sched.h"

#include <stdlib.h>
#include <string.h>

/* The engine waits this much longer than DREAMDDP_TIMEOUT_S for the
 * backend, which times out by itself, before declaring the engine stuck. */
#define DD_ENGINE_GRACE_S 10.0

void dd_sched_routes_init(dd_sched_t *sched)
{
    dd_sched_routes_t *r = &sched->routes;

    r->env = (dd_route_env_t){.job = sched->env.job,
                              .coll = sched->env.coll,
                              .leaders = sched->env.leaders,
                              .device = sched->env.device,
                              .device_opts = sched->env.device_opts};
    dd_route_coll_init(&r->coll, &r->env);
    dd_route_staging_init(&r->staging, &r->env, &r->coll.avg);
    dd_route_hier_init(&r->hier, &r->env, &r->staging.pipe);
    r->host = &r->coll.avg;
    r->name = "allreduce";
}

double dd_sched_engine_timeout(const dd_sched_t *sched)
{
    return sched->env.job->timeout_s + DD_ENGINE_GRACE_S;
}

int dd_sched_streams(const dd_sched_t *sched)
{
    return sched->env.coll != NULL ? dd_backends_streams(sched->env.coll) : 1;
}

/* Delayed averaging keeps one FIFO channel whatever the stream count (the
 * backends still spread each message over the streams): its plan is made
 * for syncs that run across the iteration boundary, and on more channels
 * the deadline model missed the measured time by up to 20 % while the
 * exposed time got no better than its spread from run to run
 * (bench/NOTES.md, "Measurements moved from code comments"). */
int dd_sched_channels(const dd_sched_t *sched)
{
    return sched->strategy.delay ? 1 : dd_sched_streams(sched);
}

/* Two collectives in flight, as PyTorch DDP's buckets on ProcessGroupGloo's
 * two threads: the next starts while the last drains, which fills the
 * ring's gaps between buckets; with N streams at least one per engine
 * channel, so that each channel has a collective on the wire; under delayed
 * averaging, on its one channel, DD_ENGINE_DEPTH_DELAYED (engine.h). */
void dd_sched_routes_depth(dd_sched_t *sched)
{
    int streams = dd_sched_streams(sched);

    sched->routes.coll.avg.depth =
        sched->strategy.delay       ? DD_ENGINE_DEPTH_DELAYED
        : streams > DD_ENGINE_DEPTH ? streams
                                    : DD_ENGINE_DEPTH;
}

/* The device of the process's device layers and the largest device
 * tensor, which the hierarchical route's scratch buffers hold. */
static dd_status_t dd_sched_device_extent(const dd_sched_t *sched,
                                          int *ordinal_p, size_t *bytes_p)
{
    *ordinal_p = -1;
    *bytes_p = 0;
    for (size_t i = 0; i < sched->n_layers; i++) {
        const struct dd_layer *l = sched->layers[i];
        for (size_t t = 0; t < l->n_tensors; t++) {
            const dd_tensor_t *x = &l->tensors[t];
            if (x->mem_type == DD_MEM_HOST) {
                continue;
            }
            if (*ordinal_p >= 0 && x->device != *ordinal_p) {
                return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                                "DREAMDDP_ROUTE=hierarchical: layer '%s' is "
                                "on device %d, others on device %d: one "
                                "process syncs the layers of one device",
                                l->name, x->device, *ordinal_p);
            }
            *ordinal_p = x->device;
            size_t b = x->count * dd_dtype_size(x->dtype);
            *bytes_p = b > *bytes_p ? b : *bytes_p;
        }
    }
    return DD_OK;
}

/* Host layers travel by the workers' allreduce: said once. */
static void dd_sched_hier_host_layers(const dd_sched_t *sched)
{
    size_t n = 0;
    const char *first = NULL;

    for (size_t i = 0; i < sched->n_layers; i++) {
        const struct dd_layer *l = sched->layers[i];
        for (size_t t = 0; t < l->n_tensors; t++) {
            if (l->tensors[t].mem_type == DD_MEM_HOST) {
                first = first != NULL ? first : l->name;
                n++;
                break;
            }
        }
    }
    if (n > 0) {
        dd_log_info(DD_SUBSYS_SCHED,
                    "DREAMDDP_ROUTE=hierarchical: %zu layers in host memory "
                    "(first '%s') travel by the workers' allreduce",
                    n, first);
    }
}

/* The hierarchical route: device layers summed on each host, the hosts'
 * sums through the aggregators or the leaders' allreduce from the
 * leader; host layers by the workers' allreduce. */
static dd_status_t dd_sched_routes_hier(dd_sched_t *sched)
{
    dd_sched_routes_t *r = &sched->routes;
    int ordinal, leader;
    size_t bytes;
    dd_status_t status = dd_sched_device_extent(sched, &ordinal, &bytes);

    if (status == DD_OK) {
        status = dd_route_hier_open(&r->hier, ordinal, bytes,
                                    dd_sched_drift_on(sched), &leader);
    }
    if (status != DD_OK) {
        return status;
    }
    dd_sched_hier_host_layers(sched);
    r->name = "hierarchical";
    if (leader && sched->env.agg != NULL) {
        status = dd_route_agg_open(&r->agg, sched->env.agg);
        dd_route_staging_set_host(&r->staging, &r->agg.pipe, 1);
    } else if (leader) {
        dd_route_staging_set_host(&r->staging, &r->hier.leaders, 0);
    }
    if (status == DD_OK && ordinal >= 0) {
        dd_log_info(DD_SUBSYS_SCHED,
                    "hierarchical route: the hosts' sums through %s",
                    sched->env.agg != NULL ? "the aggregators"
                                           : "the leaders' allreduce");
    }
    return status;
}

/* Workers learn the aggregators here: with any, syncs go to the homes
 * unless DREAMDDP_ROUTE says otherwise. */
static dd_status_t dd_sched_routes_choose(dd_sched_t *sched)
{
    dd_sched_routes_t *r = &sched->routes;
    int route = sched->opts.route;

    if (route == DD_ROUTE_AUTO) {
        route =
            sched->env.agg != NULL ? DD_ROUTE_AGGREGATE : DD_ROUTE_ALLREDUCE;
    }
    if (route == DD_ROUTE_ALLREDUCE) {
        return DD_OK;
    }
    if (route == DD_ROUTE_HIERARCHICAL) {
        return dd_sched_routes_hier(sched);
    }
    if (sched->env.agg == NULL) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_SCHED,
                        "DREAMDDP_ROUTE=aggregate, but the job has no "
                        "aggregator ranks (DREAMDDP_NUM_AGGREGATORS)");
    }
    dd_status_t status = dd_route_agg_open(&r->agg, sched->env.agg);
    r->host = &r->agg.pipe;
    r->name = "aggregate";
    dd_route_staging_set_host(&r->staging, &r->agg.pipe, 1);
    return status;
}

/* The pipe a job of codec travels on, around the host route. */
static const dd_sync_pipe_t *dd_sched_codec_pipe(dd_sched_routes_t *r,
                                                 const dd_sched_codec_t *codec)
{
    return codec == NULL   ? r->host
           : codec->gather ? &r->encode.gather
           : codec->rounds ? &r->rounds.pipe
                           : &r->encode.pipe;
}

/* Each tensor's chain, and one line a layer at debug level. */
static dd_status_t dd_sched_routes_layer(dd_sched_t *sched, struct dd_layer *l)
{
    dd_sched_routes_t *r = &sched->routes;

    l->routes = calloc(l->n_tensors ? l->n_tensors : 1, sizeof(*l->routes));
    if (l->routes == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for layer '%s''s routes", l->name);
    }
    for (size_t t = 0; t < l->n_tensors; t++) {
        dd_tensor_route_t *x = &l->routes[t];
        const dd_tensor_t *tensor = &l->tensors[t];
        x->bytes = tensor->count * dd_dtype_size(tensor->dtype);
        for (int grads = 0; grads < 2; grads++) {
            x->wire[grads] = x->bytes;
            if (tensor->mem_type != DD_MEM_HOST) {
                x->pipe[grads] =
                    r->hier.h != NULL ? &r->hier.pipe : &r->staging.pipe;
                continue;
            }
            x->codec[grads] = dd_sched_tensor_codec(sched, l, t, grads);
            x->pipe[grads] = dd_sched_codec_pipe(r, x->codec[grads]);
            if (x->codec[grads] != NULL) {
                x->wire[grads] =
                    dd_route_codec_wire_size(x->codec[grads], tensor);
            }
        }
    }
    const char *host =
        r->host == &r->agg.pipe ? "the aggregators" : "the workers' allreduce";
    const dd_sched_codec_t *c = l->n_tensors ? l->routes[0].codec[1] : NULL;
    dd_log_debug(DD_SUBSYS_SCHED, "route of layer '%s': %s over %s", l->name,
                 c != NULL ? dd_route_codec_name(c) : "dense",
                 l->device < 0       ? host
                 : r->hier.h != NULL ? "its host's sum (hierarchical)"
                                     : "staging");
    return DD_OK;
}

dd_status_t dd_sched_routes_commit(dd_sched_t *sched)
{
    dd_sched_routes_t *r = &sched->routes;
    dd_status_t status = dd_sched_routes_choose(sched);

    if (status != DD_OK) {
        return status;
    }
    r->names = calloc(sched->n_layers ? sched->n_layers : 1, sizeof(char *));
    if (r->names == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the layers' names");
    }
    for (size_t i = 0; i < sched->n_layers; i++) {
        r->names[i] = sched->layers[i]->name;
    }
    r->env.names = r->names;
    r->env.n_names = sched->n_layers;
    /* Under the hierarchical route the leaders alone talk to the
     * aggregators: host layers go by the workers' allreduce. */
    dd_route_encode_init(&r->encode, &r->env, r->host, &r->coll.avg,
                         r->host == &r->agg.pipe ? r->agg.agg : NULL);
    dd_route_rounds_init(&r->rounds, r->host);
    for (size_t i = 0; status == DD_OK && i < sched->n_layers; i++) {
        status = dd_sched_routes_layer(sched, sched->layers[i]);
    }
    return status;
}

void dd_sched_routes_quiesce(dd_sched_t *sched)
{
    if (sched->routes.agg.agg != NULL) {
        dd_route_agg_close(&sched->routes.agg);
    } else if (sched->env.job->role == DD_ROLE_WORKER &&
               sched->env.agg != NULL && !sched->said_goodbye) {
        /* A worker that never synced through the aggregators (no commit,
         * or DREAMDDP_ROUTE=allreduce) still ends their service. */
        dd_agg_goodbye_all(sched->env.agg);
    }
    sched->said_goodbye = 1;
}

void dd_sched_routes_free(dd_sched_t *sched)
{
    const dd_route_coll_t *c = &sched->routes.coll;

    if (c->seq > 0) {
        dd_log_info(DD_SUBSYS_SCHED,
                    "%llu collectives among the workers, %llu of them sent "
                    "beside their digest on what every worker foresaw, %llu "
                    "foreseen wrongly",
                    (unsigned long long)c->seq, (unsigned long long)c->foreseen,
                    (unsigned long long)c->missed);
    }
    dd_route_hier_close(&sched->routes.hier);
    if (sched->env.device != NULL) {
        dd_route_staging_free(&sched->routes.staging);
    }
    for (size_t i = 0; i < sched->n_layers; i++) {
        free(sched->layers[i]->routes);
        sched->layers[i]->routes = NULL;
    }
    free(sched->routes.names);
    sched->routes.names = NULL;
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

/* Before commit nothing else runs on the backends: the collective runs
 * at once, device memory staged. */
static dd_status_t dd_sched_collective_now(dd_sched_t *sched,
                                           const dd_sched_coll_t *c)
{
    const dd_job_t *job = sched->env.job;

    if (c->args.mem_type != DD_MEM_HOST) {
        dd_sync_job_t call = {.step = sched->step,
                              .dtype = c->args.dtype,
                              .mem_type = c->args.mem_type,
                              .device = dd_sched_coll_device(sched, c),
                              .op = c};
        return sched->env.device != NULL
                   ? dd_route_staging_call(&sched->routes.staging, &call)
                   : dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                              "%s of device memory: no device module",
                              dd_coll_name(c->coll));
    }
    dd_backends_op_t op;
    dd_status_t status =
        dd_backends_op_start(sched->env.coll, c->coll, &c->args,
                             dd_route_coll_bytes(c, job->n_workers), &op);
    return status == DD_OK ? dd_backends_op_wait(&op, job->timeout_s) : status;
}

dd_status_t dd_sched_collective(dd_sched_t *sched, const dd_sched_coll_t *c)
{
    const dd_job_t *job = sched->env.job;

    if (sched->engine == NULL) {
        return dd_sched_collective_now(sched, c);
    }
    dd_sync_job_t *call = calloc(1, sizeof(*call));
    if (call == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a collective");
    }
    call->step = sched->step;
    call->plan_serial = sched->plan_serial;
    call->dtype = c->args.dtype;
    call->mem_type = c->args.mem_type;
    call->device = dd_sched_coll_device(sched, c);
    call->pipe = c->args.mem_type != DD_MEM_HOST && sched->env.device != NULL
                     ? &sched->routes.staging.pipe
                     : &sched->routes.coll.avg;
    call->op = c;
    /* Its size, for the channel rule: every worker passes the same. */
    call->bytes = dd_route_coll_bytes(c, job->n_workers);
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
