/*
 * The step runtime: which layers sync in this step, fusion of small layers
 * into one message (buckets for ddp), hand-off to the engine right after a
 * layer's backward, and the wait at the end of the step. Decisions that
 * must agree across workers depend only on the step number, the layer table
 * and values every worker holds identically.
 */
#include "core/dtype.h"
#include "core/log.h"
#include "core/time.h"
#include "sched/sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int dd_sched_layer_syncs(dd_sched_t *sched, const struct dd_layer *layer)
{
    switch (sched->strategy.kind) {
    case DD_STRATEGY_DDP:
        return 1;
    case DD_STRATEGY_LOCALSGD:
        return 0; /* all at once, in dd_step_end */
    case DD_STRATEGY_PLSGD:
    case DD_STRATEGY_DREAMDDP:
        return sched->row[layer->index];
    case DD_STRATEGY_ADAPTIVE:
        return sched->step + 1 - layer->last_sync_step >=
               (uint64_t)layer->period;
    }
    return 0;
}

dd_status_t dd_sched_check_open(dd_sched_t *sched, const char *what)
{
    if (!sched->committed) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "%s: the model is not committed (dd_model_commit)",
                        what);
    }
    if (sched->failed != DD_OK) {
        return dd_error(sched->failed, DD_SUBSYS_SCHED,
                        "%s: an earlier sync failed (%s); the replicas may "
                        "differ",
                        what, dd_status_string(sched->failed));
    }
    return DD_OK;
}

static dd_status_t dd_sched_launch_at_begin(dd_sched_t *sched);

dd_status_t dd_sched_step_begin(dd_sched_t *sched)
{
    dd_status_t status = dd_sched_check_open(sched, "dd_step_begin");

    if (status != DD_OK) {
        return status;
    }
    if (sched->in_step) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "dd_step_begin: step %llu is still open "
                        "(dd_step_end missing)",
                        (unsigned long long)sched->step);
    }
    sched->replanned = 0;
    if (sched->step_begin_t > 0) { /* bubble filling's trial (measure.c) */
        sched->trial.iter_sum_s += dd_time_now() - sched->step_begin_t;
        sched->trial.iter_n++;
    }
    if (sched->strategy.kind == DD_STRATEGY_DREAMDDP ||
        sched->strategy.kind == DD_STRATEGY_PLSGD ||
        sched->strategy.kind == DD_STRATEGY_LOCALSGD) {
        status = dd_sched_schedule_window(sched);
    } else if (sched->strategy.kind == DD_STRATEGY_ADAPTIVE) {
        status = dd_sched_adapt(sched);
    }
    if (status != DD_OK) {
        sched->failed = status;
        return status;
    }
    if (sched->plan != NULL) {
        /* The step's row of the window: what the marks read. */
        size_t iter = (size_t)(sched->step % sched->strategy.window);
        sched->row = sched->plan->sync + iter * sched->plan->num_layers;
    }
    for (size_t i = 0; i < sched->n_layers; i++) {
        sched->layers[i]->ready = 0;
        sched->layers[i]->delay.wait_s = 0;
        sched->layers[i]->delay.early = 0;
    }
    sched->delay.fwd_wait_s = 0;
    sched->in_step = 1;
    sched->buckets_done = 0;
    sched->step_begin_t = dd_time_now();
    pthread_mutex_lock(&sched->ready_lock);
    status = dd_sched_launch_at_begin(sched);
    pthread_mutex_unlock(&sched->ready_lock);
    if (status != DD_OK) {
        sched->failed = status;
    }
    return status;
}

static size_t dd_sched_group_limit(dd_sched_t *sched)
{
    if (sched->strategy.kind == DD_STRATEGY_DDP) {
        return sched->buckets_done == 0 ? sched->opts.first_bucket_bytes
                                        : sched->opts.bucket_bytes;
    }
    return sched->opts.fusion_bytes;
}

static dd_status_t dd_sched_flush(dd_sched_t *sched)
{
    dd_sync_job_t *job = sched->group;

    if (job == NULL) {
        return DD_OK;
    }
    /* Tracked before the engine may finish it. */
    dd_status_t status =
        job->deferred ? dd_sched_delay_track(sched, job) : DD_OK;
    if (status != DD_OK) {
        return status;
    }
    dd_engine_submit(sched->engine, job);
    sched->group = NULL;
    sched->buckets_done++;
    return DD_OK;
}

static dd_sync_job_t *dd_sched_new_job(dd_sched_t *sched, dd_dtype_t dtype,
                                       dd_mem_type_t mem_type)
{
    dd_sync_job_t *job = calloc(1, sizeof(*job));
    if (job != NULL) {
        job->step = sched->step;
        job->plan_serial = sched->plan_serial;
        job->dtype = dtype;
        job->mem_type = mem_type;
        job->check_finite = sched->opts.check_finite != DD_CHECK_FINITE_NO &&
                            mem_type == DD_MEM_HOST && dd_dtype_is_float(dtype);
    }
    return job;
}

/* Appends a layer to a job's list, with none of its bytes yet. */
static dd_status_t dd_sched_job_add_layer(dd_sync_job_t *job, size_t layer)
{
    size_t n = job->n_layers + 1;
    size_t *layers = realloc(job->layers, n * sizeof(*layers));
    if (layers == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a sync job's layers");
    }
    job->layers = layers;
    size_t *bytes = realloc(job->layer_bytes, n * sizeof(*bytes));
    if (bytes == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a sync job's layers");
    }
    job->layer_bytes = bytes;
    layers[job->n_layers] = layer;
    bytes[job->n_layers] = 0;
    job->n_layers = n;
    return DD_OK;
}

/* Appends a tensor's buffer (and its layer, once) to a job. */
static dd_status_t dd_sched_job_add(dd_sync_job_t *job, size_t layer, void *buf,
                                    const dd_tensor_t *x,
                                    const dd_tensor_route_t *route, int grads)
{
    size_t count = x->count;
    dd_sync_item_t *items =
        realloc(job->items, (job->n_items + 1) * sizeof(*items));
    if (items == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a sync job's buffers");
    }
    job->items = items;
    items[job->n_items++] =
        (dd_sync_item_t){.buf = buf, .count = count, .layer = layer};
    if (job->n_layers == 0 || job->layers[job->n_layers - 1] != layer) {
        dd_status_t status = dd_sched_job_add_layer(job, layer);
        if (status != DD_OK) {
            return status;
        }
    }
    job->bytes += route->bytes;
    job->wire_bytes += route->wire[grads];
    job->layer_bytes[job->n_layers - 1] += route->bytes;
    return DD_OK;
}

/*
 * Queues a layer's buffers for averaging: small host buffers of one dtype
 * are fused into the current group until it reaches the limit, device
 * buffers go alone. Deferred (delayed averaging): a copy of the parameters
 * travels, and the layer's deadline lands it (delay.c).
 */
static dd_status_t dd_sched_enqueue(dd_sched_t *sched, struct dd_layer *layer,
                                    dd_job_kind_t kind, int defer)
{
    int grads = kind == DD_JOB_GRADS;
    dd_status_t status =
        defer ? dd_sched_delay_land(sched, layer, &layer->delay.wait_s) : DD_OK;

    for (size_t t = 0; status == DD_OK && t < layer->n_tensors; t++) {
        const dd_tensor_t *tensor = &layer->tensors[t];
        void *buf = grads ? tensor->grad : tensor->param;
        dd_sync_job_t *g = sched->group;
        const dd_tensor_route_t *route = &layer->routes[t];
        const dd_sched_codec_t *codec = route->codec[grads];
        const dd_sync_pipe_t *pipe = route->pipe[grads];

        if (tensor->count == 0 || buf == NULL) {
            continue; /* a tensor without a gradient: see broadcast */
        }
        if (g != NULL &&
            (g->dtype != tensor->dtype || g->mem_type != tensor->mem_type ||
             tensor->mem_type != DD_MEM_HOST || g->pipe != pipe ||
             g->codec != codec || g->deferred != defer || g->kind != kind) &&
            (status = dd_sched_flush(sched)) != DD_OK) {
            return status;
        }
        if (defer &&
            (status = dd_sched_delay_launch(sched, layer, t, &buf)) != DD_OK) {
            return status;
        }
        if (sched->group == NULL) {
            sched->group =
                dd_sched_new_job(sched, tensor->dtype, tensor->mem_type);
            if (sched->group == NULL) {
                return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                                "no memory for a sync job");
            }
            sched->group->kind = kind;
            sched->group->pipe = pipe;
            sched->group->codec = codec;
            sched->group->deferred = defer;
            sched->group->measure = !grads && dd_sched_drift_on(sched);
        }
        dd_sched_device_job(sched, layer, tensor, sched->group);
        status = dd_sched_job_add(sched->group, layer->index, buf, tensor,
                                  route, grads);
        if (status != DD_OK) {
            return status;
        }
        if (codec != NULL) {
            dd_sync_item_t *it =
                &sched->group->items[sched->group->n_items - 1];
            it->state = layer->comp.states[t];
            it->ref = grads ? NULL : layer->comp.refs[t];
        }
        if (sched->group->bytes >= dd_sched_group_limit(sched) ||
            tensor->mem_type != DD_MEM_HOST) {
            status = dd_sched_flush(sched);
        }
    }
    return status;
}

/*
 * DREAMDDP_NEXT_LAUNCH=early. A delayed sync averages a copy of the
 * parameters, and its landing keeps what changed since the copy, so it
 * may leave whenever the parameters are the step's: at dd_step_begin for
 * a layer of this step's row with no sync in flight, else once that one
 * lands at the layer's forward mark; the rest leave from their
 * dd_layer_ready. Local SGD's syncs leave from dd_step_end. A device layer
 * needs the stream the application named, where its copy queues behind
 * the optimizer's step; a host layer needs nothing.
 */
static int dd_sched_early_ok(const dd_sched_t *sched,
                             const struct dd_layer *layer)
{
    return dd_sched_delay_on(sched) &&
           sched->opts.next_launch == DD_NEXT_LAUNCH_EARLY &&
           sched->strategy.kind != DD_STRATEGY_LOCALSGD &&
           (layer->device < 0 || layer->delay.stream_known);
}

/* Launches layer's sync of this step ahead of its backward (under
 * sched->ready_lock). */
static dd_status_t dd_sched_launch_early(dd_sched_t *sched,
                                         struct dd_layer *layer)
{
    dd_status_t status = dd_sched_enqueue(sched, layer, DD_JOB_PARAMS, 1);

    layer->delay.early = status == DD_OK;
    return status;
}

/* At dd_step_begin: the row's layers with no sync in flight, in the order
 * of their deadlines (forward order where the application marks forward,
 * backward order otherwise), as one batch. */
static dd_status_t dd_sched_launch_at_begin(dd_sched_t *sched)
{
    size_t n = sched->n_layers;
    int fwd = sched->delay.marked;
    dd_status_t status = DD_OK;

    for (size_t k = 0; status == DD_OK && k < n; k++) {
        struct dd_layer *l = sched->layers[fwd ? k : n - 1 - k];
        if (dd_sched_early_ok(sched, l) && !l->delay.pending &&
            dd_sched_layer_syncs(sched, l)) {
            status = dd_sched_launch_early(sched, l);
        }
    }
    return status == DD_OK ? dd_sched_flush(sched) : status;
}

dd_status_t dd_sched_launch_landed(dd_sched_t *sched, struct dd_layer *layer)
{
    if (!sched->in_step || layer->delay.early || layer->ready ||
        !dd_sched_early_ok(sched, layer) ||
        !dd_sched_layer_syncs(sched, layer)) {
        return DD_OK;
    }
    dd_status_t status = dd_sched_launch_early(sched, layer);
    return status == DD_OK ? dd_sched_flush(sched) : status;
}

/* Squared norm of a layer's host gradients, for the adaptive signal. */
static double dd_sched_grad_norm2(const struct dd_layer *layer)
{
    double sum = 0;
    for (size_t t = 0; t < layer->n_tensors; t++) {
        const dd_tensor_t *x = &layer->tensors[t];
        if (x->grad == NULL || x->mem_type != DD_MEM_HOST) {
            continue; /* no gradient, or device memory the host does not read */
        }
        if (x->dtype == DD_DTYPE_F32) {
            for (size_t i = 0; i < x->count; i++) {
                double g = ((const float *)x->grad)[i];
                sum += g * g;
            }
        } else if (x->dtype == DD_DTYPE_F64) {
            for (size_t i = 0; i < x->count; i++) {
                double g = ((const double *)x->grad)[i];
                sum += g * g;
            }
        }
    }
    return sum;
}

/*
 * Whether a parameter sync's message leaves once this layer is in. It waits
 * for the next layer only where the plan's model has the channel busy until
 * that layer is ready (dd_plan_fusion): a message never waits for the
 * fusion limit to fill with layers that backward has not reached. ddp's
 * buckets fill up to their size, as PyTorch DDP's do, and so do dreamddp's
 * messages before its first plan: a sync per layer while it profiles cost
 * 10,000 tiny layers 12 s a step on loopback, where messages of
 * DREAMDDP_FUSION_BYTES take what ddp's buckets take (the profiler splits
 * a message's time over its layers by their bytes).
 */
static int dd_sched_leaves(const dd_sched_t *sched,
                           const struct dd_layer *layer)
{
    if (sched->strategy.kind == DD_STRATEGY_DDP) {
        return 0;
    }
    if (sched->hold == NULL) {
        return sched->strategy.kind != DD_STRATEGY_DREAMDDP;
    }
    size_t iter = (size_t)(sched->step % sched->strategy.window);
    return !sched->hold[iter * sched->n_layers + layer->index];
}

/*
 * ddp averages gradients; a tensor without one (a buffer such as batch-norm
 * statistics) takes the first worker's values instead, as PyTorch DDP's
 * broadcast_buffers does. It leaves right after the layer's mark, on the
 * engine, so it hides behind backward: the replicas hold the first worker's
 * buffers when dd_step_end returns, which is what the next forward reads.
 */
static dd_status_t dd_sched_broadcast_buffers(dd_sched_t *sched,
                                              struct dd_layer *layer)
{
    for (size_t t = 0; t < layer->n_tensors; t++) {
        const dd_tensor_t *x = &layer->tensors[t];
        if (x->grad != NULL || x->count == 0) {
            continue;
        }
        dd_sync_job_t *job = dd_sched_new_job(sched, x->dtype, x->mem_type);
        if (job == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                            "no memory for layer '%s''s buffers' broadcast",
                            layer->name);
        }
        dd_status_t status = dd_sched_job_add(job, layer->index, x->param, x,
                                              &layer->routes[t], 0);
        if (status != DD_OK) {
            dd_sync_job_free_list(job);
            return status;
        }
        job->pipe = &sched->routes.coll.bcast;
        dd_engine_submit(sched->engine, job);
    }
    return DD_OK;
}

/* dd_layer_unused under ddp: the layer adds zeros to the average, as
 * DDP's find_unused_parameters does. */
static dd_status_t dd_sched_zero_grads(struct dd_layer *layer)
{
    for (size_t t = 0; t < layer->n_tensors; t++) {
        const dd_tensor_t *x = &layer->tensors[t];
        if (x->grad == NULL || x->count == 0) {
            continue;
        }
        if (x->mem_type != DD_MEM_HOST) {
            return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                            "dd_layer_unused: layer '%s' tensor %zu: zeroing "
                            "gradients in device memory is not supported; "
                            "zero them and call dd_layer_ready instead",
                            layer->name, t);
        }
        memset(x->grad, 0, layer->routes[t].bytes);
    }
    return DD_OK;
}

/* dd_layer_ready's and dd_layer_unused's work, under sched->ready_lock. */
static dd_status_t dd_sched_mark(dd_sched_t *sched, struct dd_layer *layer,
                                 int unused, const char *call)
{
    int ddp = sched->strategy.kind == DD_STRATEGY_DDP;

    if (!sched->in_step) {
        return dd_error(
            DD_ERR_STATE, DD_SUBSYS_SCHED,
            "%s: layer '%s' marked outside a step "
            "(dd_step_begin missing)",
            call, layer->split.whole ? layer->split.whole->name : layer->name);
    }
    if (layer->ready) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "%s: layer '%s' marked twice in step %llu", call,
                        layer->name, (unsigned long long)sched->step);
    }
    if (unused && ddp) {
        dd_status_t status = dd_sched_zero_grads(layer);
        if (status != DD_OK) {
            return status;
        }
    }
    /* Without a forward mark, the layer's backward is the deadline of its
     * delayed average; one that left in this step (early) has its
     * deadline in the next. */
    dd_status_t landed =
        layer->delay.early
            ? DD_OK
            : dd_sched_delay_land(sched, layer, &layer->delay.wait_s);
    if (landed != DD_OK) {
        return landed;
    }
    layer->ready = 1;
    layer->ready_t = dd_time_now();
    if (sched->strategy.kind == DD_STRATEGY_ADAPTIVE && !unused) {
        double n2 = dd_sched_grad_norm2(layer);
        layer->grad_ema =
            layer->grad_ema == 0 ? n2 : 0.9 * layer->grad_ema + 0.1 * n2;
    }
    if (!dd_sched_layer_syncs(sched, layer) || layer->delay.early) {
        return DD_OK;
    }
    if (sched->strategy.kind == DD_STRATEGY_ADAPTIVE) {
        layer->last_sync_step = sched->step + 1;
    }
    dd_status_t status = dd_sched_enqueue(
        sched, layer,
        dd_strategy_syncs_grads(&sched->strategy) ? DD_JOB_GRADS
                                                  : DD_JOB_PARAMS,
        dd_sched_delay_on(sched));
    if (status == DD_OK && ddp) {
        status = dd_sched_broadcast_buffers(sched, layer);
    }
    /* Under early launches the plan's fusion may hold this layer for one
     * that already left: it goes alone. */
    if (status == DD_OK &&
        (dd_sched_leaves(sched, layer) || dd_sched_early_ok(sched, layer))) {
        status = dd_sched_flush(sched);
    }
    return status;
}

dd_status_t dd_sched_check_handle(dd_sched_t *sched, dd_layer_h layer,
                                  const char *call)
{
    if (layer == NULL || layer->sched != sched) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "%s: not a layer of this context", call);
    }
    if (layer->split.whole != NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "%s: '%s' is a part of layer '%s' (dd_layer_part); "
                        "mark the layer",
                        call, layer->name, layer->split.whole->name);
    }
    return DD_OK;
}

/* A cut layer marks its parts in backward order, the last first. */
static dd_status_t dd_sched_mark_locked(dd_sched_t *sched, dd_layer_h layer,
                                        int unused, const char *call)
{
    dd_status_t status = dd_sched_check_handle(sched, layer, call);

    if (status != DD_OK) {
        return status;
    }
    pthread_mutex_lock(&sched->ready_lock);
    if (layer->split.n == 0) {
        status = dd_sched_mark(sched, layer, unused, call);
    } else if (sched->in_step && layer->split.parts[0]->ready) {
        status = dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                          "%s: layer '%s' marked twice in step %llu", call,
                          layer->name, (unsigned long long)sched->step);
    }
    for (size_t j = layer->split.n; status == DD_OK && j-- > 0;) {
        status = dd_sched_mark(sched, layer->split.parts[j], unused, call);
    }
    pthread_mutex_unlock(&sched->ready_lock);
    return status;
}

dd_status_t dd_sched_layer_ready(dd_sched_t *sched, dd_layer_h layer)
{
    return dd_sched_mark_locked(sched, layer, 0, "dd_layer_ready");
}

dd_status_t dd_sched_layer_unused(dd_sched_t *sched, dd_layer_h layer)
{
    return dd_sched_mark_locked(sched, layer, 1, "dd_layer_unused");
}

dd_status_t dd_sched_layer_ready_stream(dd_sched_t *sched, dd_layer_h layer,
                                        void *stream)
{
    dd_status_t status = dd_sched_device_ready(sched, layer, stream);

    return status == DD_OK ? dd_sched_layer_ready(sched, layer) : status;
}

/* A cut layer's forward marks its parts in forward order, the first
 * first: each part's deadline is the layer's. With a stream
 * (dd_layer_forward_stream), a device layer's landing is queued there. */
dd_status_t dd_sched_layer_forward(dd_sched_t *sched, dd_layer_h layer,
                                   int with_stream, void *stream)
{
    const char *call =
        with_stream ? "dd_layer_forward_stream" : "dd_layer_forward";
    dd_status_t status = dd_sched_check_handle(sched, layer, call);
    if (status == DD_OK) {
        status = dd_sched_check_open(sched, call);
    }
    if (status == DD_OK && with_stream &&
        (layer->device < 0 || sched->env.device == NULL)) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_forward_stream: layer '%s' has no tensor "
                        "in device memory; use dd_layer_forward",
                        layer->name);
    }
    if (status != DD_OK || !dd_sched_delay_on(sched)) {
        return status;
    }
    pthread_mutex_lock(&sched->ready_lock);
    if (with_stream) {
        layer->delay.stream = stream;
        layer->delay.stream_known = 1;
    }
    size_t n = layer->split.n > 0 ? layer->split.n : 1;
    for (size_t j = 0; status == DD_OK && j < n; j++) {
        struct dd_layer *y = layer->split.n > 0 ? layer->split.parts[j] : layer;
        y->fwd_wait_s = 0;
        /* A sync that left in this step (early) has its deadline in the
         * next; one that landed here lets this step's leave. */
        if (!(sched->in_step && y->delay.early)) {
            status = dd_sched_delay_land(sched, y, &y->fwd_wait_s);
        }
        if (status == DD_OK) {
            status = dd_sched_launch_landed(sched, y);
        }
        sched->delay.fwd_wait_s += y->fwd_wait_s;
        /* Forward starts now; profile.c times it. */
        y->fwd_t = dd_time_now();
    }
    sched->delay.marked = 1;
    pthread_mutex_unlock(&sched->ready_lock);
    return status;
}

/*
 * Layers never marked in this step whose sync the strategy starts from the
 * mark (every strategy but Local SGD, which averages everything in
 * dd_step_end). With DREAMDDP_FIND_UNUSED they count as unused now, in
 * backward order; otherwise their names go to missing (empty: none), and
 * the step fails once the syncs that did start have finished, on every
 * worker that left the same layers unmarked.
 */
static dd_status_t dd_sched_unmarked(dd_sched_t *sched, char *missing,
                                     size_t size)
{
    size_t o = 0, n = 0;
    const struct dd_layer *listed = NULL;

    missing[0] = '\0';
    if (sched->strategy.kind == DD_STRATEGY_LOCALSGD) {
        return DD_OK;
    }
    for (size_t i = sched->n_layers; i-- > 0;) {
        struct dd_layer *l = sched->layers[i];
        if (l->ready) {
            continue;
        }
        if (sched->opts.find_unused) {
            pthread_mutex_lock(&sched->ready_lock);
            dd_status_t status = dd_sched_mark(sched, l, 1, "dd_step_end");
            pthread_mutex_unlock(&sched->ready_lock);
            if (status != DD_OK) {
                return status;
            }
        } else if (dd_sched_layer_syncs(sched, l) &&
                   (l->split.whole == NULL || l->split.whole != listed)) {
            /* A cut layer's parts go unmarked together: named once. */
            listed = l->split.whole;
            if (n++ < 8 && o < size) {
                o += (size_t)snprintf(
                    missing + o, size - o, "%s'%s'", o ? ", " : "",
                    l->split.whole ? l->split.whole->name : l->name);
            } else if (n == 9 && o < size) {
                o += (size_t)snprintf(missing + o, size - o, ", ...");
            }
        }
    }
    return DD_OK;
}

/* Local SGD averages everything after the window's last backward. */
static dd_status_t dd_sched_localsgd_tail(dd_sched_t *sched)
{
    if ((sched->step + 1) % sched->strategy.window != 0) {
        return DD_OK;
    }
    for (size_t i = sched->n_layers; i-- > 0;) {
        dd_status_t status = dd_sched_enqueue(
            sched, sched->layers[i], DD_JOB_PARAMS, dd_sched_delay_on(sched));
        if (status != DD_OK) {
            return status;
        }
    }
    return DD_OK;
}

/* Names the first failed job's layer; on every worker, since each sees its
 * own collective fail. */
static dd_status_t dd_sched_report(dd_sched_t *sched, dd_sync_job_t *done)
{
    for (dd_sync_job_t *job = done; job != NULL; job = job->next) {
        if (job->status == DD_OK) {
            continue;
        }
        sched->failed = job->status;
        if (job->n_layers == 0) {
            return dd_error(job->status, DD_SUBSYS_SCHED,
                            "step %llu: the window-start agreement (measured "
                            "times, divergence) failed: %s: %s",
                            (unsigned long long)sched->step,
                            dd_status_string(job->status), job->why);
        }
        struct dd_layer *l = sched->layers[job->layers[0]];
        return dd_error(job->status, DD_SUBSYS_SCHED,
                        "[SYNC] step %llu: layer '%s'%s failed: %s: %s",
                        (unsigned long long)sched->step, l->name,
                        job->n_layers > 1 ? " (fused with others)" : "",
                        dd_status_string(job->status), job->why);
    }
    return DD_OK;
}

/*
 * Sums what the drained jobs did per layer. A layer's tensors may be split
 * over two jobs (the fusion limit falls between them): each job gives it
 * its own bytes in the job and their share of the job's time, so that the
 * layers' totals add up to the bytes and the time on the wire.
 */
static void dd_sched_gather(dd_sched_t *sched, const dd_sync_job_t *done)
{
    for (const dd_sync_job_t *job = done; job != NULL; job = job->next) {
        double wire = job->wire_s;
        for (size_t k = 0; k < job->n_layers; k++) {
            struct dd_layer *l = sched->layers[job->layers[k]];
            size_t bytes = job->layer_bytes[k];
            if (!l->sync_seen) {
                l->sync_bytes = 0;
                l->sync_share_s = l->sync_msg_s = 0;
                l->sync_seen = 1;
            }
            l->sync_bytes += bytes;
            l->sync_share_s +=
                job->bytes ? wire * (double)bytes / (double)job->bytes : wire;
            l->sync_msg_s += wire;
        }
        if (job->measure) {
            dd_sched_drift_gather(sched, job);
        }
        if (sched->timeline != NULL && job->n_layers > 0) {
            dd_timeline_sync(sched->timeline, sched, job);
        }
    }
}

/* Whether the layer's sync launched in step is one beyond its one per
 * window: dreamddp's extra syncs, from bubble filling. */
static int dd_sched_extra(const dd_sched_t *sched, const struct dd_layer *l,
                          uint64_t step)
{
    if (!sched->in_step || sched->plan == NULL ||
        (sched->strategy.kind != DD_STRATEGY_DREAMDDP &&
         sched->strategy.kind != DD_STRATEGY_PLSGD)) {
        return 0;
    }
    return sched->plan->slot[l->index] !=
           (unsigned)(step % sched->strategy.window);
}

/* Counts each layer once per sync, however many jobs carried it. */
static void dd_sched_account(dd_sched_t *sched, dd_sync_job_t *done,
                             dd_step_stats_t *st)
{
    for (dd_sync_job_t *job = done; job != NULL; job = job->next) {
        if (job->n_layers == 0) {
            continue; /* the agreement on the times, not a sync */
        }
        st->wire_s += job->wire_s;
        st->staging_s += job->staging_s;
        st->bytes_synced += job->bytes;
        st->wire_bytes += job->wire_bytes;
        for (size_t k = 0; k < job->n_layers; k++) {
            struct dd_layer *l = sched->layers[job->layers[k]];
            if (l->sync_seen != 1) {
                continue;
            }
            l->sync_seen = 2;
            l->stats.syncs++;
            l->stats.bytes += l->sync_bytes;
            l->stats.wire_s += l->sync_share_s;
            st->layers_synced++;
            if (dd_sched_extra(sched, l, job->step)) {
                l->stats.extra_syncs++;
                st->extra_bytes += l->sync_bytes;
            }
            dd_log_debug(DD_SUBSYS_SCHED,
                         "[SYNC] layer '%s' synced in %.1f ms as %s (step "
                         "%llu)",
                         l->name, l->sync_msg_s * 1e3,
                         dd_route_codec_name(l->comp.codec),
                         (unsigned long long)sched->step);
        }
    }
}

/* Flushes, waits for the engine, and accounts for what ran. */
static dd_status_t dd_sched_finish(dd_sched_t *sched, dd_step_stats_t *st)
{
    dd_sync_job_t *done = NULL;
    double t0 = dd_time_now();
    dd_status_t status = dd_sched_flush(sched);

    if (status != DD_OK) {
        sched->failed = status;
        return status;
    }
    status =
        dd_engine_drain(sched->engine, dd_sched_engine_timeout(sched), &done);
    st->wait_s += dd_time_now() - t0;
    if (status != DD_OK) {
        sched->failed = status;
        return dd_error(status, DD_SUBSYS_SCHED,
                        "step %llu: the progress engine did not finish its "
                        "syncs within %.0f s",
                        (unsigned long long)sched->step,
                        dd_sched_engine_timeout(sched));
    }
    /* Delayed averages that landed since the last step's end come first:
     * they were launched before this step's syncs. */
    dd_sync_job_t *landed = dd_sched_delay_take_landed(sched);
    if (landed != NULL) {
        dd_sync_job_t **tail = &landed;
        while (*tail != NULL) {
            tail = &(*tail)->next;
        }
        *tail = done;
        done = landed;
    }
    status = dd_sched_report(sched, done);
    if (status == DD_OK) {
        status = dd_sched_finite_report(sched, done);
    }
    if (status == DD_OK) {
        dd_sched_gather(sched, done);
        dd_sched_account(sched, done, st);
        dd_sched_record_syncs(sched, done);
        dd_sched_agree_done(sched);
    }
    dd_sync_job_free_list(done);
    return status;
}

dd_status_t dd_sched_check_fields(const char *call, const char *type,
                                  uint64_t field_mask, uint64_t known)
{
    if (field_mask & ~known) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "%s: %s has field_mask bits 0x%llx that this "
                        "library does not know (it fills 0x%llx); the "
                        "program was built against a newer dreamddp.h",
                        call, type, (unsigned long long)(field_mask & ~known),
                        (unsigned long long)known);
    }
    return DD_OK;
}

/* Copies the fields the caller asked for; the others stay the caller's. */
static void dd_sched_step_stats_fill(const dd_step_stats_t *st,
                                     dd_step_stats_t *out)
{
    uint64_t m = out->field_mask;

    if (m & DD_STEP_STATS_FIELD_STEP) {
        out->step = st->step;
    }
    if (m & DD_STEP_STATS_FIELD_LAYERS_SYNCED) {
        out->layers_synced = st->layers_synced;
    }
    if (m & DD_STEP_STATS_FIELD_BYTES_SYNCED) {
        out->bytes_synced = st->bytes_synced;
    }
    if (m & DD_STEP_STATS_FIELD_WIRE_S) {
        out->wire_s = st->wire_s;
    }
    if (m & DD_STEP_STATS_FIELD_WAIT_S) {
        out->wait_s = st->wait_s;
    }
    if (m & DD_STEP_STATS_FIELD_REPLANNED) {
        out->replanned = st->replanned;
    }
    if (m & DD_STEP_STATS_FIELD_EXTRA_BYTES) {
        out->extra_bytes = st->extra_bytes;
    }
    if (m & DD_STEP_STATS_FIELD_STAGING_S) {
        out->staging_s = st->staging_s;
    }
    if (m & DD_STEP_STATS_FIELD_WIRE_BYTES) {
        out->wire_bytes = st->wire_bytes;
    }
}

/*
 * Adds the step to its window and, at the window's last step, logs one
 * [SYNC] line for the window (ddp and adaptive: for the step): what a
 * reader at info level follows; the per-layer lines are at debug.
 */
static void dd_sched_window_log(dd_sched_t *sched, const dd_step_stats_t *st)
{
    dd_step_stats_t *w = &sched->window_stats;
    unsigned window = sched->strategy.window ? sched->strategy.window : 1;

    w->layers_synced += st->layers_synced;
    w->bytes_synced += st->bytes_synced;
    w->wire_s += st->wire_s;
    w->wait_s += st->wait_s;
    if ((sched->step + 1) % window != 0) {
        return;
    }
    char steps[64], drift[256];
    if (window > 1) {
        snprintf(steps, sizeof(steps), "steps %llu-%llu",
                 (unsigned long long)(sched->step + 1 - window),
                 (unsigned long long)sched->step);
    } else {
        snprintf(steps, sizeof(steps), "step %llu",
                 (unsigned long long)sched->step);
    }
    dd_sched_drift_summary(sched, drift, sizeof(drift));
    dd_log_info(DD_SUBSYS_SCHED,
                "[SYNC] %s: %d layer syncs, %zu bytes, wire %.1f ms, "
                "exposed wait %.1f ms%s",
                steps, w->layers_synced, w->bytes_synced, w->wire_s * 1e3,
                w->wait_s * 1e3, drift);
    memset(w, 0, sizeof(*w));
}

dd_status_t dd_sched_step_end(dd_sched_t *sched, dd_step_stats_t *stats_p)
{
    dd_step_stats_t st = {.step = sched->step};
    char missing[512];
    dd_status_t status;

    if (stats_p != NULL &&
        (status = dd_sched_check_fields("dd_step_end", "dd_step_stats_t",
                                        stats_p->field_mask,
                                        DD_SCHED_STEP_STATS_FIELDS)) != DD_OK) {
        return status;
    }
    if (!sched->in_step) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "dd_step_end: no step is open (dd_step_begin "
                        "missing)");
    }
    /* The syncs that did start are finished in any case, so that no job
     * of this step is left for the next. */
    dd_status_t marks = dd_sched_unmarked(sched, missing, sizeof(missing));
    if (sched->timeline != NULL) {
        char what[256];
        double at;
        dd_timeline_marks(sched->timeline, sched);
        if (sched->routes.agg.agg != NULL &&
            dd_agg_take_event(sched->routes.agg.agg, what, sizeof(what), &at)) {
            dd_timeline_instant(sched->timeline, what, "aggregators", at);
        }
    }
    status = DD_OK;
    if (sched->strategy.kind == DD_STRATEGY_LOCALSGD) {
        /* Local SGD's sync starts once backward is over: it is all
         * exposed. */
        status = dd_sched_finish(sched, &st);
        if (status == DD_OK) {
            status = dd_sched_localsgd_tail(sched);
        }
    }
    if (status == DD_OK) {
        status = dd_sched_finish(sched, &st);
    }
    dd_sched_drift_step(sched);
    if (status == DD_OK && marks != DD_OK) {
        status = marks;
    } else if (status == DD_OK && missing[0] != '\0') {
        status = dd_error(
            DD_ERR_STATE, DD_SUBSYS_SCHED,
            "dd_step_end: step %llu: layer(s) %s never marked, though %s "
            "syncs them in this step, so their replicas may differ (until "
            "they sync again, or dd_sync_all); mark them with "
            "dd_layer_ready or dd_layer_unused, or set "
            "DREAMDDP_FIND_UNUSED=1",
            (unsigned long long)sched->step, missing, sched->strategy_name);
    } else if (status == DD_OK) {
        dd_sched_record_backward(sched);
    }
    /* The deadlines' waits since the last step's end are exposed too. */
    st.wait_s += sched->delay.wait_s;
    sched->delay.wait_s = 0;
    if (status == DD_OK) {
        dd_sched_window_log(sched, &st);
    }
    sched->in_step = 0;
    st.replanned = sched->replanned;
    sched->step++;
    if (stats_p != NULL) {
        dd_sched_step_stats_fill(&st, stats_p);
    }
    return status;
}

dd_status_t dd_sched_sync_all(dd_sched_t *sched)
{
    dd_step_stats_t st = {0};
    dd_status_t status = dd_sched_check_open(sched, "dd_sync_all");

    if (status != DD_OK) {
        return status;
    }
    if (sched->in_step) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "dd_sync_all: call it outside a step (after "
                        "dd_step_end)");
    }
    /* Every delayed average lands first, so that the averages taken now
     * leave the replicas bit-identical. */
    status = dd_sched_delay_land_all(sched);
    for (size_t i = sched->n_layers; status == DD_OK && i-- > 0;) {
        status = dd_sched_enqueue(sched, sched->layers[i], DD_JOB_SYNC_ALL, 0);
    }
    if (status != DD_OK) {
        return status;
    }
    sched->delay.wait_s = 0;
    status = dd_sched_finish(sched, &st);
    dd_sched_drift_step(sched);
    if (status == DD_OK && sched->env.job->n_workers > 1) {
        /* The workers end together: one whose average failed (a malformed
         * answer that it alone received) publishes the job's fault instead
         * of joining, so that no worker returns success over a replica
         * that was not updated. One small allreduce a call. */
        double ok = 1;
        dd_sched_coll_t c = {.coll = DD_COLL_ALLREDUCE,
                             .args = {.sendbuf = &ok,
                                      .recvbuf = &ok,
                                      .count = 1,
                                      .dtype = DD_DTYPE_F64,
                                      .op = DD_REDUCE_SUM,
                                      .mem_type = DD_MEM_HOST}};
        status = dd_sched_collective(sched, &c);
    }
    return status;
}

dd_status_t dd_sched_step_set(dd_sched_t *sched, uint64_t step)
{
    dd_status_t status = dd_sched_check_open(sched, "dd_step_set");

    if (status != DD_OK) {
        return status;
    }
    if (sched->in_step || dd_sched_steps_run(sched) > 0) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "dd_step_set: call it after dd_model_commit and "
                        "before the first dd_step_begin (%llu steps ran)",
                        (unsigned long long)dd_sched_steps_run(sched));
    }
    sched->step = step;
    sched->step_base = step;
    return DD_OK;
}
