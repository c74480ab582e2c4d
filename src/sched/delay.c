/*
 * Delayed averaging ("+next" strategies): a layer's average, launched
 * after its backward in step t, may land as late as the layer's next
 * deadline, the next forward mark (dd_layer_forward) or else its next
 * backward mark, so that it hides behind the next iteration. The sync
 * averages a copy of the parameters taken at the launch; when it lands,
 * the replica keeps what its optimizer did meanwhile:
 *
 *     x <- average(x at launch) + (x now - x at launch)
 *
 * computed as x + (average(x at launch) - x at launch): the engine leaves
 * the difference in the copy (engine.h), so that the launch copies the
 * parameters once and the landing adds one buffer.
 *
 * A deadline waits for its sync however late it is, never skips it. It
 * must not decide what syncs when (runtime.c and the plan do). Delayed
 * layers are of f32 or f64, on the host or on a device. A device layer's
 * copy is device memory: the launch queues the copy, and the landing the
 * sum x += copy (the device module's reduce_async), on the application's
 * stream, the one it last named (dd_layer_ready_stream,
 * dd_layer_forward_stream), so that both fall between its own kernels in
 * its order and nothing waits for the device; the device pipe takes the
 * difference average - copy on the host, between the staging copies
 * (staging.c). A device layer whose stream the application never named is
 * final when marked (as for dd_layer_ready): its copies and sums go on the
 * library's own stream, waited for before the mark returns.
 */
#include "core/log.h"
#include "core/time.h"
#include "sched/sched.h"

#include <stdlib.h>
#include <string.h>

/* A deferred job in flight, and which of its layers have landed. */
struct dd_delay_entry {
    dd_sync_job_t *job;
    unsigned char *landed; /* [job->n_layers] */
    size_t unlanded;
};

int dd_sched_delay_on(const dd_sched_t *sched)
{
    return sched->strategy.delay;
}

static int dd_sched_delay_dtype_ok(dd_dtype_t dtype)
{
    return dtype == DD_DTYPE_F32 || dtype == DD_DTYPE_F64;
}

/* A tensor's copy: host memory, or device memory on the tensor's device. */
static dd_status_t dd_sched_delay_alloc(dd_sched_t *sched,
                                        const struct dd_layer *l, size_t t,
                                        void **wire_p)
{
    const dd_tensor_t *x = &l->tensors[t];
    size_t bytes = x->count * dd_dtype_size(x->dtype);

    if (x->mem_type == DD_MEM_HOST) {
        *wire_p = malloc(bytes);
        if (*wire_p == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                            "no memory for layer '%s''s copy of %zu bytes for "
                            "its delayed average",
                            l->name, bytes);
        }
        /* Touched now, so that no launch takes the page faults. */
        memcpy(*wire_p, x->param, bytes);
        return DD_OK;
    }
    const dd_device_module_t *dev = sched->env.device;
    dd_status_t status =
        dev->ops->mem_alloc(dev->instance, x->device, bytes, wire_p);
    if (status != DD_OK) {
        return dd_error(status, DD_SUBSYS_SCHED,
                        "dd_model_commit: layer '%s' tensor %zu: no device "
                        "memory for the copy of %zu bytes that %s "
                        "averages: %s",
                        l->name, t, bytes, sched->strategy_name,
                        dd_last_error());
    }
    return DD_OK;
}

/* A device layer's event, and the library's own stream and event on its
 * device (one device per process: staging.c), made once. */
static dd_status_t dd_sched_delay_events(dd_sched_t *sched, struct dd_layer *l)
{
    const dd_device_module_t *dev = sched->env.device;
    dd_status_t status =
        dev->ops->event_create(dev->instance, l->device, &l->delay.event);

    if (status == DD_OK && sched->delay.dev_stream == NULL) {
        status = dev->ops->stream_create(dev->instance, l->device,
                                         &sched->delay.dev_stream);
    }
    if (status == DD_OK && sched->delay.dev_event == NULL) {
        status = dev->ops->event_create(dev->instance, l->device,
                                        &sched->delay.dev_event);
    }
    if (status != DD_OK) {
        return dd_error(status, DD_SUBSYS_SCHED,
                        "dd_model_commit: layer '%s': no device stream or "
                        "event for its delayed averages: %s",
                        l->name, dd_last_error());
    }
    return DD_OK;
}

dd_status_t dd_sched_delay_commit(dd_sched_t *sched)
{
    if (!dd_sched_delay_on(sched)) {
        return DD_OK;
    }
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        for (size_t t = 0; t < l->n_tensors; t++) {
            const dd_tensor_t *x = &l->tensors[t];
            if (x->count == 0) {
                continue;
            }
            if (!dd_sched_delay_dtype_ok(x->dtype) ||
                (x->mem_type != DD_MEM_HOST && x->mem_type != DD_MEM_CUDA)) {
                return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                                "dd_model_commit: layer '%s' tensor %zu is "
                                "%s %s; %s averages f32 and f64 tensors "
                                "only, on the host or a device (choose the "
                                "strategy without '+next')",
                                l->name, t, dd_mem_type_name(x->mem_type),
                                dd_dtype_name(x->dtype), sched->strategy_name);
            }
            if (x->mem_type == DD_MEM_CUDA &&
                sched->opts.route == DD_ROUTE_HIERARCHICAL) {
                return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                                "dd_model_commit: layer '%s' tensor %zu is "
                                "in device memory, and %s does not average "
                                "device layers over DREAMDDP_ROUTE="
                                "hierarchical (choose allreduce or "
                                "aggregate, or the strategy without "
                                "'+next')",
                                l->name, t, sched->strategy_name);
            }
        }
        l->delay.wire = calloc(l->n_tensors, sizeof(void *));
        if (l->delay.wire == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                            "no memory for layer '%s''s delayed-average copies",
                            l->name);
        }
        dd_status_t status =
            l->device >= 0 ? dd_sched_delay_events(sched, l) : DD_OK;
        if (status != DD_OK) {
            return status;
        }
        for (size_t t = 0; status == DD_OK && t < l->n_tensors; t++) {
            if (l->tensors[t].count > 0) {
                status = dd_sched_delay_alloc(sched, l, t, &l->delay.wire[t]);
            }
        }
        if (status != DD_OK) {
            return status;
        }
    }
    return DD_OK;
}

/* Records ev on stream and, with wait, waits for it. */
static dd_status_t dd_sched_delay_record(dd_sched_t *sched,
                                         dd_device_event_t *ev, void *stream,
                                         int wait)
{
    const dd_device_module_t *dev = sched->env.device;
    dd_status_t status = dev->ops->event_record(dev->instance, ev, stream);

    if (status == DD_OK && wait) {
        status = dev->ops->event_synchronize(dev->instance, ev);
    }
    return status;
}

/*
 * A device tensor's work, queued on the stream the application last named
 * for the layer, else on the library's own: at a launch (launch) the copy
 * of its parameters, at a landing x += copy. After the layer's last device
 * tensor, the library's own stream is waited for (the application's next
 * touch of the parameters is not ordered after it); on the application's,
 * a launch records the layer's event, which its job waits for before the
 * staging reads the copy.
 */
static dd_status_t dd_sched_delay_device(dd_sched_t *sched,
                                         struct dd_layer *layer, size_t t,
                                         int last, int launch)
{
    const dd_device_module_t *dev = sched->env.device;
    const dd_tensor_t *x = &layer->tensors[t];
    int own = !layer->delay.stream_known;
    void *stream = own ? sched->delay.dev_stream : layer->delay.stream;
    dd_status_t status =
        launch ? dev->ops->memcpy_async(dev->instance, layer->delay.wire[t],
                                        x->param, layer->routes[t].bytes,
                                        DD_DEVICE_COPY_D2D, stream)
               : dev->ops->reduce_async(dev->instance, x->param,
                                        layer->delay.wire[t], x->count,
                                        x->dtype, stream);

    if (status == DD_OK && last && (own || launch)) {
        status = dd_sched_delay_record(
            sched, own ? sched->delay.dev_event : layer->delay.event, stream,
            own);
    }
    if (status != DD_OK) {
        return dd_error(status, DD_SUBSYS_SCHED,
                        "[SYNC] layer '%s' tensor %zu: %s on the device "
                        "failed: %s",
                        layer->name, t,
                        launch ? "the copy of its parameters for the delayed "
                                 "average"
                               : "applying its delayed average",
                        dd_last_error());
    }
    return DD_OK;
}

/* Whether tensor is the layer's last with elements in device memory. */
static int dd_sched_delay_last_device(const struct dd_layer *layer,
                                      size_t tensor)
{
    for (size_t t = tensor + 1; t < layer->n_tensors; t++) {
        if (layer->tensors[t].count > 0 &&
            layer->tensors[t].mem_type != DD_MEM_HOST) {
            return 0;
        }
    }
    return 1;
}

dd_status_t dd_sched_delay_launch(dd_sched_t *sched, struct dd_layer *layer,
                                  size_t tensor, void **buf_p)
{
    const dd_tensor_t *x = &layer->tensors[tensor];
    size_t bytes = layer->routes[tensor].bytes;
    dd_status_t status = DD_OK;

    double t0 = dd_time_now();

    if (x->mem_type == DD_MEM_HOST) {
        memcpy(layer->delay.wire[tensor], x->param, bytes);
    } else {
        status = dd_sched_delay_device(
            sched, layer, tensor, dd_sched_delay_last_device(layer, tensor), 1);
    }
    layer->delay.copy_s += dd_time_now() - t0;
    if (status != DD_OK) {
        return status;
    }
    layer->delay.pending = 1;
    layer->delay.step = sched->step;
    *buf_p = layer->delay.wire[tensor];
    return DD_OK;
}

dd_status_t dd_sched_delay_track(dd_sched_t *sched, dd_sync_job_t *job)
{
    if (sched->delay.n == sched->delay.cap) {
        size_t cap = sched->delay.cap ? 2 * sched->delay.cap : 16;
        struct dd_delay_entry *v =
            realloc(sched->delay.jobs, cap * sizeof(*sched->delay.jobs));
        if (v == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                            "no memory for the delayed averages in flight");
        }
        sched->delay.jobs = v;
        sched->delay.cap = cap;
    }
    struct dd_delay_entry *e = &sched->delay.jobs[sched->delay.n];
    e->landed = calloc(job->n_layers ? job->n_layers : 1, 1);
    if (e->landed == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a delayed average in flight");
    }
    e->job = job;
    e->unlanded = job->n_layers;
    sched->delay.n++;
    return DD_OK;
}

/* x <- x + (average - x at launch), which the engine left in the copy. */
static dd_status_t dd_sched_delay_correct(dd_sched_t *sched,
                                          struct dd_layer *layer)
{
    for (size_t t = 0; t < layer->n_tensors; t++) {
        const dd_tensor_t *x = &layer->tensors[t];
        if (x->count == 0) {
            continue;
        }
        if (x->mem_type != DD_MEM_HOST) {
            dd_status_t status = dd_sched_delay_device(
                sched, layer, t, dd_sched_delay_last_device(layer, t), 0);
            if (status != DD_OK) {
                return status;
            }
        } else if (x->dtype == DD_DTYPE_F32) {
            float *p = x->param;
            const float *d = layer->delay.wire[t];
            for (size_t i = 0; i < x->count; i++) {
                p[i] += d[i];
            }
        } else {
            double *p = x->param;
            const double *d = layer->delay.wire[t];
            for (size_t i = 0; i < x->count; i++) {
                p[i] += d[i];
            }
        }
    }
    return DD_OK;
}

/* Hands a job all of whose layers landed to the next dd_step_end's
 * accounting (a failed one was reported at its deadline: freed). */
static void dd_sched_delay_release(dd_sched_t *sched, size_t k)
{
    struct dd_delay_entry *e = &sched->delay.jobs[k];

    if (e->job->status == DD_OK) {
        dd_sync_job_t **tail = &sched->delay.landed;
        while (*tail != NULL) {
            tail = &(*tail)->next;
        }
        e->job->next = NULL;
        *tail = e->job;
    } else {
        dd_sync_job_free_list(e->job);
    }
    free(e->landed);
    memmove(e, e + 1, (sched->delay.n - k - 1) * sizeof(*e));
    sched->delay.n--;
}

/* Waits for every job that carries a part of layer's sync in flight. */
static dd_status_t dd_sched_delay_wait(dd_sched_t *sched,
                                       struct dd_layer *layer)
{
    dd_status_t failed = DD_OK;
    const char *why = "";

    for (size_t k = 0; k < sched->delay.n;) {
        struct dd_delay_entry *e = &sched->delay.jobs[k];
        size_t j = 0;
        while (j < e->job->n_layers &&
               (e->job->layers[j] != layer->index || e->landed[j])) {
            j++;
        }
        if (j == e->job->n_layers) {
            k++;
            continue;
        }
        dd_status_t status = dd_engine_wait(sched->engine, e->job,
                                            dd_sched_engine_timeout(sched));
        if (status == DD_ERR_TIMED_OUT && e->job->finished != 2) {
            /* The engine still holds it: leave it there. */
            sched->failed = status;
            return dd_error(status, DD_SUBSYS_SCHED,
                            "[SYNC] layer '%s': its delayed average "
                            "(launched in step %llu) did not land within "
                            "%.0f s",
                            layer->name, (unsigned long long)layer->delay.step,
                            dd_sched_engine_timeout(sched));
        }
        if (status != DD_OK && failed == DD_OK) {
            failed = status;
            why = e->job->why;
        }
        e->landed[j] = 1;
        e->unlanded--;
        if (e->unlanded > 0 || failed != DD_OK) {
            k++;
            continue;
        }
        dd_sched_delay_release(sched, k);
    }
    if (failed != DD_OK) {
        sched->failed = failed;
        return dd_error(failed, DD_SUBSYS_SCHED,
                        "[SYNC] layer '%s': its delayed average (launched in "
                        "step %llu) failed: %s: %s",
                        layer->name, (unsigned long long)layer->delay.step,
                        dd_status_string(failed), why);
    }
    return DD_OK;
}

dd_status_t dd_sched_delay_land(dd_sched_t *sched, struct dd_layer *layer,
                                double *waited_p)
{
    double t0 = dd_time_now();

    if (!layer->delay.pending) {
        return DD_OK;
    }
    dd_status_t status = dd_sched_delay_wait(sched, layer);
    if (status != DD_OK) {
        return status;
    }
    double t1 = dd_time_now();
    status = dd_sched_delay_correct(sched, layer);
    if (status != DD_OK) {
        sched->failed = status;
        return status;
    }
    layer->delay.pending = 0;
    layer->delay.correct_s += dd_time_now() - t1;
    layer->delay.landings++;
    double waited = t1 - t0;
    sched->delay.wait_s += waited;
    if (waited_p != NULL) {
        *waited_p += waited;
    }
    return DD_OK;
}

/* Waits for what a device layer's landing queued on the application's
 * stream: the syncs that follow read the parameters on other streams. */
static dd_status_t dd_sched_delay_settle(dd_sched_t *sched,
                                         struct dd_layer *layer)
{
    if (layer->device < 0 || !layer->delay.stream_known) {
        return DD_OK;
    }
    dd_status_t status = dd_sched_delay_record(sched, layer->delay.event,
                                               layer->delay.stream, 1);
    if (status != DD_OK) {
        sched->failed = status;
        return dd_error(status, DD_SUBSYS_SCHED,
                        "[SYNC] layer '%s': waiting for its delayed average "
                        "on the device failed: %s",
                        layer->name, dd_last_error());
    }
    return DD_OK;
}

dd_status_t dd_sched_delay_land_all(dd_sched_t *sched)
{
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        int pending = l->delay.pending;
        dd_status_t status = dd_sched_delay_land(sched, l, NULL);
        if (status == DD_OK && pending) {
            status = dd_sched_delay_settle(sched, l);
        }
        if (status != DD_OK) {
            return status;
        }
    }
    return DD_OK;
}

dd_sync_job_t *dd_sched_delay_take_landed(dd_sched_t *sched)
{
    dd_sync_job_t *landed = sched->delay.landed;

    sched->delay.landed = NULL;
    return landed;
}

void dd_sched_delay_quiesce(dd_sched_t *sched)
{
    if (sched->engine != NULL && sched->failed == DD_OK) {
        (void)dd_sched_delay_land_all(sched);
    }
    /* Jobs a failure left behind: finished ones are freed, the rest stay
     * with the engine, which frees what it still queues. */
    for (size_t k = 0; k < sched->delay.n; k++) {
        if (sched->delay.jobs[k].job->finished == 2) {
            dd_sync_job_free_list(sched->delay.jobs[k].job);
        }
        free(sched->delay.jobs[k].landed);
    }
    sched->delay.n = 0;
}

void dd_sched_delay_free(dd_sched_t *sched)
{
    const dd_device_module_t *dev = sched->env.device;

    free(sched->delay.jobs);
    sched->delay.jobs = NULL;
    free(sched->delay.fp);
    sched->delay.fp = NULL;
    dd_sync_job_free_list(sched->delay.landed);
    sched->delay.landed = NULL;
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        for (size_t t = 0; l->delay.wire != NULL && t < l->n_tensors; t++) {
            if (l->tensors[t].mem_type == DD_MEM_HOST) {
                free(l->delay.wire[t]);
            } else if (l->delay.wire[t] != NULL) {
                dev->ops->mem_free(dev->instance, l->delay.wire[t]);
            }
        }
        free(l->delay.wire);
        l->delay.wire = NULL;
        if (l->delay.event != NULL) {
            dev->ops->event_destroy(dev->instance, l->delay.event);
            l->delay.event = NULL;
        }
    }
    if (sched->delay.dev_event != NULL) {
        dev->ops->event_destroy(dev->instance, sched->delay.dev_event);
        sched->delay.dev_event = NULL;
    }
    if (sched->delay.dev_stream != NULL) {
        dev->ops->stream_destroy(dev->instance, sched->delay.dev_stream);
        sched->delay.dev_stream = NULL;
    }
}
