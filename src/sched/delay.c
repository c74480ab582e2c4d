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
 * must not decide what syncs when (runtime.c and the plan do) nor touch
 * device memory: delayed layers are host layers of f32 or f64.
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

dd_status_t dd_sched_delay_commit(dd_sched_t *sched)
{
    if (!dd_sched_delay_on(sched)) {
        return DD_OK;
    }
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        for (size_t t = 0; t < l->n_tensors; t++) {
            const dd_tensor_t *x = &l->tensors[t];
            if (x->count > 0 &&
                (x->mem_type != DD_MEM_HOST ||
                 (x->dtype != DD_DTYPE_F32 && x->dtype != DD_DTYPE_F64))) {
                return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                                "dd_model_commit: layer '%s' tensor %zu is "
                                "%s %s; %s averages host f32 and f64 "
                                "tensors only (choose the strategy without "
                                "'+next')",
                                l->name, t, dd_mem_type_name(x->mem_type),
                                dd_dtype_name(x->dtype), sched->strategy_name);
            }
        }
        l->delay_wire = calloc(l->n_tensors, sizeof(void *));
        if (l->delay_wire == NULL) {
            return DD_ERR_NO_MEMORY;
        }
        for (size_t t = 0; t < l->n_tensors; t++) {
            size_t bytes =
                l->tensors[t].count * dd_dtype_size(l->tensors[t].dtype);
            if (bytes == 0) {
                continue;
            }
            l->delay_wire[t] = malloc(bytes);
            if (l->delay_wire[t] == NULL) {
                return DD_ERR_NO_MEMORY;
            }
            /* Touched now, so that no launch takes the page faults. */
            memcpy(l->delay_wire[t], l->tensors[t].param, bytes);
        }
    }
    return DD_OK;
}

void *dd_sched_delay_launch(dd_sched_t *sched, struct dd_layer *layer,
                            size_t tensor)
{
    const dd_tensor_t *x = &layer->tensors[tensor];
    size_t bytes = x->count * dd_dtype_size(x->dtype);

    double t0 = dd_time_now();

    (void)sched;
    memcpy(layer->delay_wire[tensor], x->param, bytes);
    layer->delay_copy_s += dd_time_now() - t0;
    layer->delay_pending = 1;
    layer->delay_step = sched->step;
    return layer->delay_wire[tensor];
}

dd_status_t dd_sched_delay_track(dd_sched_t *sched, dd_sync_job_t *job)
{
    if (sched->n_delay == sched->cap_delay) {
        size_t cap = sched->cap_delay ? 2 * sched->cap_delay : 16;
        struct dd_delay_entry *v =
            realloc(sched->delay, cap * sizeof(*sched->delay));
        if (v == NULL) {
            return DD_ERR_NO_MEMORY;
        }
        sched->delay = v;
        sched->cap_delay = cap;
    }
    struct dd_delay_entry *e = &sched->delay[sched->n_delay];
    e->landed = calloc(job->n_layers ? job->n_layers : 1, 1);
    if (e->landed == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    e->job = job;
    e->unlanded = job->n_layers;
    sched->n_delay++;
    return DD_OK;
}

/* x <- x + (average - x at launch), which the engine left in the copy. */
static void dd_sched_delay_correct(struct dd_layer *layer)
{
    for (size_t t = 0; t < layer->n_tensors; t++) {
        const dd_tensor_t *x = &layer->tensors[t];
        if (x->count == 0) {
            continue;
        }
        if (x->dtype == DD_DTYPE_F32) {
            float *p = x->param;
            const float *d = layer->delay_wire[t];
            for (size_t i = 0; i < x->count; i++) {
                p[i] += d[i];
            }
        } else {
            double *p = x->param;
            const double *d = layer->delay_wire[t];
            for (size_t i = 0; i < x->count; i++) {
                p[i] += d[i];
            }
        }
    }
}

/* Hands a job all of whose layers landed to the next dd_step_end's
 * accounting (a failed one was reported at its deadline: freed). */
static void dd_sched_delay_release(dd_sched_t *sched, size_t k)
{
    struct dd_delay_entry *e = &sched->delay[k];

    if (e->job->status == DD_OK) {
        dd_sync_job_t **tail = &sched->delay_landed;
        while (*tail != NULL) {
            tail = &(*tail)->next;
        }
        e->job->next = NULL;
        *tail = e->job;
    } else {
        dd_sync_job_free_list(e->job);
    }
    free(e->landed);
    memmove(e, e + 1, (sched->n_delay - k - 1) * sizeof(*e));
    sched->n_delay--;
}

/* Waits for every job that carries a part of layer's sync in flight. */
static dd_status_t dd_sched_delay_wait(dd_sched_t *sched,
                                       struct dd_layer *layer)
{
    dd_status_t failed = DD_OK;
    const char *why = "";

    for (size_t k = 0; k < sched->n_delay;) {
        struct dd_delay_entry *e = &sched->delay[k];
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
                            layer->name, (unsigned long long)layer->delay_step,
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
                        layer->name, (unsigned long long)layer->delay_step,
                        dd_status_string(failed), why);
    }
    return DD_OK;
}

dd_status_t dd_sched_delay_land(dd_sched_t *sched, struct dd_layer *layer,
                                double *waited_p)
{
    double t0 = dd_time_now();

    if (!layer->delay_pending) {
        return DD_OK;
    }
    dd_status_t status = dd_sched_delay_wait(sched, layer);
    if (status != DD_OK) {
        return status;
    }
    double t1 = dd_time_now();
    dd_sched_delay_correct(layer);
    layer->delay_pending = 0;
    layer->delay_correct_s += dd_time_now() - t1;
    layer->delay_landings++;
    double waited = t1 - t0;
    sched->delay_wait_s += waited;
    if (waited_p != NULL) {
        *waited_p += waited;
    }
    return DD_OK;
}

dd_status_t dd_sched_delay_land_all(dd_sched_t *sched)
{
    for (size_t i = 0; i < sched->n_layers; i++) {
        dd_status_t status = dd_sched_delay_land(sched, sched->layers[i], NULL);
        if (status != DD_OK) {
            return status;
        }
    }
    return DD_OK;
}

dd_sync_job_t *dd_sched_delay_take_landed(dd_sched_t *sched)
{
    dd_sync_job_t *landed = sched->delay_landed;

    sched->delay_landed = NULL;
    return landed;
}

/* A cut layer's forward marks its parts in forward order, the first
 * first: each part's deadline is the layer's. */
dd_status_t dd_sched_layer_forward(dd_sched_t *sched, dd_layer_h layer)
{
    dd_status_t status =
        dd_sched_check_handle(sched, layer, "dd_layer_forward");
    if (status == DD_OK) {
        status = dd_sched_check_open(sched, "dd_layer_forward");
    }
    if (status != DD_OK || !dd_sched_delay_on(sched)) {
        return status;
    }
    pthread_mutex_lock(&sched->ready_lock);
    size_t n = layer->n_parts > 0 ? layer->n_parts : 1;
    for (size_t j = 0; status == DD_OK && j < n; j++) {
        struct dd_layer *y = layer->n_parts > 0 ? layer->parts[j] : layer;
        y->fwd_wait_s = 0;
        status = dd_sched_delay_land(sched, y, &y->fwd_wait_s);
        sched->delay_fwd_wait_s += y->fwd_wait_s;
        /* Forward starts now; measure.c times it. */
        y->fwd_t = dd_time_now();
    }
    sched->delay_marked = 1;
    pthread_mutex_unlock(&sched->ready_lock);
    return status;
}

void dd_sched_delay_quiesce(dd_sched_t *sched)
{
    if (sched->engine != NULL && sched->failed == DD_OK) {
        (void)dd_sched_delay_land_all(sched);
    }
    /* Jobs a failure left behind: finished ones are freed, the rest stay
     * with the engine, which frees what it still queues. */
    for (size_t k = 0; k < sched->n_delay; k++) {
        if (sched->delay[k].job->finished == 2) {
            dd_sync_job_free_list(sched->delay[k].job);
        }
        free(sched->delay[k].landed);
    }
    sched->n_delay = 0;
}

void dd_sched_delay_free(dd_sched_t *sched)
{
    free(sched->delay);
    sched->delay = NULL;
    free(sched->delay_fp);
    sched->delay_fp = NULL;
    dd_sync_job_free_list(sched->delay_landed);
    sched->delay_landed = NULL;
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        for (size_t t = 0; l->delay_wire != NULL && t < l->n_tensors; t++) {
            free(l->delay_wire[t]);
        }
        free(l->delay_wire);
    }
}
