/*
 * Device layers: the check at registration (a CUDA layer needs a device
 * module, and a device it has), the readiness event that
 * dd_layer_ready_stream records on the caller's stream, and the tags a
 * device tensor's job carries to its pipe (routes.c chose it). The
 * application thread only records; the engine waits.
 */
#include "core/log.h"
#include "sched/sched.h"

dd_status_t dd_sched_device_check(dd_sched_t *sched, const char *name,
                                  const dd_tensor_t *tensors, size_t n)
{
    const dd_device_module_t *dev = sched->env.device;
    int count = 0;

    for (size_t t = 0; t < n; t++) {
        if (tensors[t].mem_type != DD_MEM_CUDA) {
            continue;
        }
        if (dev == NULL) {
            return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                            "dd_layer_register: layer '%s' tensor %zu is in "
                            "CUDA memory, but no device module is loaded "
                            "(DREAMDDP_DEVICE=%s; the log says why)",
                            name, t,
                            dd_device_kind_names[sched->env.device_opts->kind]);
        }
        if (count == 0) {
            dd_status_t status = dev->ops->device_count(dev->instance, &count);
            if (status != DD_OK) {
                return status;
            }
        }
        /* A field_mask without DD_TENSOR_FIELD_DEVICE means device 0. */
        int device = tensors[t].field_mask == 0 ||
                             (tensors[t].field_mask & DD_TENSOR_FIELD_DEVICE)
                         ? tensors[t].device
                         : 0;
        if (device < 0 || device >= count) {
            return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                            "dd_layer_register: layer '%s' tensor %zu is on "
                            "device %d, but the %s module sees %d",
                            name, t, device, dev->name, count);
        }
    }
    return DD_OK;
}

/* The layer's first device, or -1. */
static int dd_sched_layer_device(const struct dd_layer *layer)
{
    for (size_t t = 0; t < layer->n_tensors; t++) {
        if (layer->tensors[t].mem_type == DD_MEM_CUDA) {
            return layer->tensors[t].device;
        }
    }
    return -1;
}

dd_status_t dd_sched_device_ready(dd_sched_t *sched, dd_layer_h layer,
                                  void *stream)
{
    const dd_device_module_t *dev = sched->env.device;

    if (layer == NULL || layer->sched != sched) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_ready_stream: not a layer of this context");
    }
    int device = dd_sched_layer_device(layer);
    if (device < 0 || dev == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_ready_stream: layer '%s' has no tensor in "
                        "device memory; use dd_layer_ready",
                        layer->name);
    }
    /* Recorded before the layer is queued, so that its job waits for this
     * record; the engine drained the previous step's, so no one waits on
     * the event while it is recorded again. */
    pthread_mutex_lock(&sched->ready_lock);
    dd_status_t status = DD_OK;
    if (layer->ready_event == NULL) {
        status =
            dev->ops->event_create(dev->instance, device, &layer->ready_event);
    }
    if (status == DD_OK && sched->in_step && !layer->ready) {
        status =
            dev->ops->event_record(dev->instance, layer->ready_event, stream);
        /* Delayed averaging queues its copies and sums there (delay.c). */
        layer->delay.stream = stream;
        layer->delay.stream_known = 1;
    }
    pthread_mutex_unlock(&sched->ready_lock);
    if (status != DD_OK) {
        return dd_error(status, DD_SUBSYS_SCHED,
                        "dd_layer_ready_stream: layer '%s': %s", layer->name,
                        dd_last_error());
    }
    return DD_OK;
}

void dd_sched_device_job(dd_sched_t *sched, const struct dd_layer *layer,
                         const dd_tensor_t *tensor, dd_sync_job_t *job)
{
    if (tensor->mem_type == DD_MEM_HOST) {
        return;
    }
    (void)sched;
    job->device = tensor->device;
    job->ready_event = layer->ready_event;
    if (job->deferred) {
        /* The copy the launch queued (delay.c): on the application's
         * stream, final after the event recorded there; on the library's,
         * already final. */
        job->ready_event =
            layer->delay.stream_known ? layer->delay.event : NULL;
    }
}

void dd_sched_device_free(dd_sched_t *sched)
{
    const dd_device_module_t *dev = sched->env.device;

    for (size_t i = 0; dev != NULL && i < sched->n_layers; i++) {
        if (sched->layers[i]->ready_event != NULL) {
            dev->ops->event_destroy(dev->instance,
                                    sched->layers[i]->ready_event);
            sched->layers[i]->ready_event = NULL;
        }
    }
}
