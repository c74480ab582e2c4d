/*
 * The device pipe: how a job on device memory travels, as one more pipe of
 * the engine wrapped around the host pipes. It first waits, by polling,
 * for the layer's readiness event (dd_layer_ready_stream); then either
 * hands the device buffer to the backend as it is (the cuda module and a
 * backend that scores DD_MEM_CUDA, NCCL), or stages it: chunks of
 * DREAMDDP_STAGING_BYTES copied to pinned host slots on a D2H stream, each
 * sent through the host pipe (the aggregators', or the workers'
 * allreduce) as soon as its copy completes, and its average copied back on
 * an H2D stream; DREAMDDP_STAGING_SLOTS chunks are in flight, so the copy
 * of chunk i+1 overlaps the network of chunk i. A job ends once the last
 * average is on the device. It runs on the engine thread only (or, before
 * the engine starts, on the thread that commits) and never blocks.
 */
#include "sched/route/staging.h"
#include "core/log.h"
#include "core/time.h"
#include "sched/engine/divergence.h"

#include <stdlib.h>
#include <string.h>

typedef enum {
    DD_SLOT_FREE = 0,
    DD_SLOT_D2H,  /* copy to pinned memory in flight */
    DD_SLOT_HOST, /* on the host, waiting for the network */
    DD_SLOT_NET,  /* in the host pipe */
    DD_SLOT_H2D   /* average on its way back */
} dd_slot_state_t;

typedef struct {
    dd_slot_state_t state;
    size_t chunk;
    void *inner; /* the host pipe's handle */
    dd_sync_job_t sub;
    dd_sched_coll_t subop;
} dd_staging_slot_t;

/* What the device pipe keeps across jobs: streams, events, pinned slots,
 * made on first use for the device of the first job. */
struct dd_staging {
    const dd_device_module_t *dev;
    int ordinal;
    void *d2h, *h2d;
    int n_slots;
    size_t slot_bytes;
    void **pinned;
    dd_device_event_t **events;
    /* Each slot's chunk as this worker had it, kept while the network
     * averages the pinned copy, for the divergence monitor and for a
     * delayed average's difference; made on the first job that needs
     * them. */
    void **kept;
};

/* One job in the device pipe. */
typedef struct {
    dd_route_staging_t *r;
    dd_sync_job_t *job;
    const dd_sync_pipe_t *inner;
    int native; /* the backend takes the device buffer itself */
    void *native_handle;
    int ready; /* the readiness event completed */
    char *dst; /* device buffer the averages land in */
    const char *src;
    size_t count, per, n_chunks, esize;
    size_t next_copy, next_net, n_net, done;
    double t_ready, t_first_net, t_last_net;
    dd_staging_slot_t *slots;
} dd_staging_op_t;

static dd_status_t dd_staging_alloc(dd_route_staging_t *r, int ordinal)
{
    const dd_device_module_t *dev = r->env->device;
    const dd_device_opts_t *o = r->env->device_opts;
    dd_staging_t *s = r->slots;
    dd_status_t status;

    if (s != NULL) {
        if (s->ordinal != ordinal) {
            return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                            "device layers on devices %d and %d: one process "
                            "syncs the layers of one device",
                            s->ordinal, ordinal);
        }
        return DD_OK;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the staging slots");
    }
    s->dev = dev;
    s->ordinal = ordinal;
    s->n_slots = o->staging_slots;
    s->slot_bytes = o->staging_bytes;
    s->pinned = calloc((size_t)s->n_slots, sizeof(void *));
    s->events = calloc((size_t)s->n_slots, sizeof(void *));
    r->slots = s;
    if (s->pinned == NULL || s->events == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the staging slots");
    }
    if ((status = dev->ops->stream_create(dev->instance, ordinal, &s->d2h)) !=
            DD_OK ||
        (status = dev->ops->stream_create(dev->instance, ordinal, &s->h2d)) !=
            DD_OK) {
        return status;
    }
    for (int i = 0; i < s->n_slots; i++) {
        if ((status = dev->ops->host_alloc(dev->instance, s->slot_bytes,
                                           &s->pinned[i])) != DD_OK ||
            (status = dev->ops->event_create(dev->instance, ordinal,
                                             &s->events[i])) != DD_OK) {
            return status;
        }
    }
    return DD_OK;
}

/* dd_staging_alloc, undone when it failed half way. */
static dd_status_t dd_staging_setup(dd_route_staging_t *r, int ordinal)
{
    int fresh = r->slots == NULL;
    dd_status_t status = dd_staging_alloc(r, ordinal);

    if (status != DD_OK && fresh) {
        dd_route_staging_free(r);
    }
    return status;
}

void dd_route_staging_free(dd_route_staging_t *r)
{
    dd_staging_t *s = r->slots;

    if (s == NULL) {
        return;
    }
    const dd_device_ops_t *ops = s->dev->ops;
    for (int i = 0; i < s->n_slots; i++) {
        if (s->events != NULL && s->events[i] != NULL) {
            ops->event_destroy(s->dev->instance, s->events[i]);
        }
        if (s->pinned != NULL && s->pinned[i] != NULL) {
            ops->host_free(s->dev->instance, s->pinned[i]);
        }
    }
    ops->stream_destroy(s->dev->instance, s->d2h);
    ops->stream_destroy(s->dev->instance, s->h2d);
    for (int i = 0; s->kept != NULL && i < s->n_slots; i++) {
        free(s->kept[i]);
    }
    free(s->kept);
    free(s->pinned);
    free(s->events);
    free(s);
    r->slots = NULL;
}

/* The slots' copies of what this worker sent, for measured and deferred
 * jobs. */
static dd_status_t dd_staging_keep_alloc(dd_staging_t *s)
{
    if (s->kept != NULL) {
        return DD_OK;
    }
    void **kept = calloc((size_t)s->n_slots, sizeof(void *));
    for (int i = 0; kept != NULL && i < s->n_slots; i++) {
        if ((kept[i] = malloc(s->slot_bytes)) == NULL) {
            while (i-- > 0) {
                free(kept[i]);
            }
            free(kept);
            kept = NULL;
        }
    }
    if (kept == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory to keep %d staging chunks of %zu bytes "
                        "(the divergence monitor, delayed averaging)",
                        s->n_slots, s->slot_bytes);
    }
    s->kept = kept;
    return DD_OK;
}

/* Whether the backend among workers takes device memory itself: only
 * real CUDA memory, never the fake device's, and never a delayed average,
 * whose difference average - copy is taken on the host (the device
 * modules sum, but do not subtract). */
static int dd_staging_native(const dd_route_staging_t *r,
                             const dd_sync_job_t *job, size_t bytes)
{
    dd_backend_ref_t ref;
    dd_backend_op_t op = DD_BACKEND_OP_ALLREDUCE;

    if (strcmp(r->env->device->name, "cuda") != 0 || job->deferred) {
        return 0;
    }
    if (job->op != NULL) {
        op = (dd_backend_op_t)((const dd_sched_coll_t *)job->op)->coll;
    } else if (r->host_only) {
        return 0; /* the aggregators sum host memory */
    }
    return dd_backends_find(r->env->coll, op, DD_MEM_CUDA, bytes, &ref);
}

/* The device buffers of a job: a layer's (buf) or a collective's. */
static dd_status_t dd_staging_buffers(dd_staging_op_t *t, void *buf,
                                      size_t count)
{
    const dd_sched_coll_t *c = t->job->op;

    if (c == NULL) {
        t->dst = buf;
        t->src = buf;
        t->count = count;
        return DD_OK;
    }
    if (c->coll != DD_COLL_ALLREDUCE && c->coll != DD_COLL_BROADCAST) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                        "%s of device memory needs a backend that takes "
                        "device memory; staging runs allreduce and "
                        "broadcast",
                        dd_coll_name(c->coll));
    }
    t->dst = c->args.recvbuf;
    t->src = c->coll == DD_COLL_BROADCAST ? c->args.recvbuf : c->args.sendbuf;
    t->count = c->args.count;
    return DD_OK;
}

static dd_status_t dd_staging_start(void *arg, dd_sync_job_t *job, void *buf,
                                    size_t count, void **handle_p)
{
    dd_route_staging_t *r = arg;
    dd_staging_op_t *t = calloc(1, sizeof(*t));
    dd_status_t status;

    if (t == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a device sync");
    }
    t->r = r;
    t->job = job;
    t->esize = dd_dtype_size(job->dtype);
    t->inner = job->op != NULL ? r->coll : r->host;
    status = dd_staging_buffers(t, buf, count);
    if (status == DD_OK) {
        t->native = dd_staging_native(r, job, t->count * t->esize);
    }
    if (status == DD_OK && !t->native) {
        status = dd_staging_setup(r, job->device);
    }
    if (status == DD_OK && !t->native && (job->measure || job->deferred)) {
        status = dd_staging_keep_alloc(r->slots);
    }
    if (status == DD_OK && !t->native) {
        dd_staging_t *s = r->slots;
        t->per = s->slot_bytes / t->esize;
        t->n_chunks = (t->count + t->per - 1) / t->per;
        t->slots = calloc((size_t)s->n_slots, sizeof(*t->slots));
        status = t->slots == NULL ? DD_ERR_NO_MEMORY : DD_OK;
    }
    if (status != DD_OK) {
        free(t);
        return status;
    }
    *handle_p = t;
    return DD_OK;
}

/* The host job that carries slot i's chunk through the host pipe. */
static void dd_staging_sub(dd_staging_op_t *t, dd_staging_slot_t *slot,
                           void *pinned, size_t n)
{
    slot->sub = *t->job;
    slot->sub.next = NULL;
    slot->sub.mem_type = DD_MEM_HOST;
    slot->sub.n_items = 0;
    slot->sub.items = NULL;
    slot->sub.bytes = n * t->esize;
    slot->sub.pipe = NULL;
    slot->sub.op = NULL;
    if (t->job->op != NULL) {
        slot->subop = *(const dd_sched_coll_t *)t->job->op;
        slot->subop.args.sendbuf = pinned;
        slot->subop.args.recvbuf = pinned;
        slot->subop.args.count = n;
        slot->subop.args.mem_type = DD_MEM_HOST;
        slot->subop.args.stream = NULL;
        slot->sub.op = &slot->subop;
    }
}

static size_t dd_staging_len(const dd_staging_op_t *t, size_t chunk)
{
    size_t left = t->count - chunk * t->per;
    return left < t->per ? left : t->per;
}

/* Moves one slot as far as it goes; *busy_p: something moved. */
static dd_status_t dd_staging_slot(dd_staging_op_t *t, int i, int *busy_p)
{
    dd_staging_t *s = t->r->slots;
    const dd_device_module_t *dev = s->dev;
    dd_staging_slot_t *slot = &t->slots[i];
    dd_status_t status = DD_OK;
    size_t n = dd_staging_len(t, slot->chunk);
    size_t off = slot->chunk * t->per * t->esize;

    switch (slot->state) {
    case DD_SLOT_FREE:
        if (t->next_copy >= t->n_chunks ||
            t->next_copy % (size_t)s->n_slots != (size_t)i) {
            return DD_OK;
        }
        slot->chunk = t->next_copy++;
        n = dd_staging_len(t, slot->chunk);
        off = slot->chunk * t->per * t->esize;
        status =
            dev->ops->memcpy_async(dev->instance, s->pinned[i], t->src + off,
                                   n * t->esize, DD_DEVICE_COPY_D2H, s->d2h);
        if (status == DD_OK) {
            status =
                dev->ops->event_record(dev->instance, s->events[i], s->d2h);
        }
        slot->state = DD_SLOT_D2H;
        *busy_p = 1;
        return status;
    case DD_SLOT_D2H:
    case DD_SLOT_H2D:
        status = dev->ops->event_query(dev->instance, s->events[i]);
        if (status != DD_OK) {
            return status == DD_INPROGRESS ? DD_OK : status;
        }
        *busy_p = 1;
        if (slot->state == DD_SLOT_H2D) {
            slot->state = DD_SLOT_FREE;
            t->done++;
            return DD_OK;
        }
        slot->state = DD_SLOT_HOST;
        /* The network may take it now. */
        __attribute__((fallthrough));
    case DD_SLOT_HOST:
        if (slot->chunk != t->next_net || t->n_net >= (size_t)t->inner->depth) {
            return DD_OK;
        }
        dd_staging_sub(t, slot, s->pinned[i], n);
        if (t->job->measure || t->job->deferred) {
            memcpy(s->kept[i], s->pinned[i], n * t->esize);
        }
        status = t->inner->start(t->inner->arg, &slot->sub, s->pinned[i], n,
                                 &slot->inner);
        if (status != DD_OK) {
            return status;
        }
        if (t->next_net++ == 0) {
            t->t_first_net = dd_time_now();
        }
        t->n_net++;
        slot->state = DD_SLOT_NET;
        *busy_p = 1;
        return DD_OK;
    case DD_SLOT_NET: {
        int moved = 0;
        status = t->inner->test(t->inner->arg, slot->inner, &moved);
        *busy_p |= moved & ~DD_SYNC_NOTIFY; /* the other slots may not ring */
        if (status != DD_OK) {
            return status == DD_INPROGRESS ? DD_OK : status;
        }
        t->n_net--;
        t->t_last_net = dd_time_now();
        if (t->job->measure && t->job->n_items == 1) {
            dd_sync_item_t *it = &t->job->items[0];
            it->measured |=
                dd_drift_norms(s->kept[i], s->pinned[i], n, t->job->dtype,
                               &it->diff2, &it->norm2);
        }
        if (t->job->deferred) {
            /* What the delayed average changes (delay.c). */
            dd_engine_delta(s->pinned[i], s->pinned[i], s->kept[i], n,
                            t->job->dtype);
        }
        status =
            dev->ops->memcpy_async(dev->instance, t->dst + off, s->pinned[i],
                                   n * t->esize, DD_DEVICE_COPY_H2D, s->h2d);
        if (status == DD_OK) {
            status =
                dev->ops->event_record(dev->instance, s->events[i], s->h2d);
        }
        slot->state = DD_SLOT_H2D;
        *busy_p = 1;
        return status;
    }
    }
    return DD_OK;
}

/* Frees a finished job's state; a failed one waits for its copies first,
 * since they still write the slots. */
static void dd_staging_end(dd_staging_op_t *t)
{
    dd_staging_t *s = t->r->slots;

    for (int i = 0; t->slots != NULL && i < s->n_slots; i++) {
        if (t->slots[i].state == DD_SLOT_D2H ||
            t->slots[i].state == DD_SLOT_H2D) {
            s->dev->ops->event_synchronize(s->dev->instance, s->events[i]);
        }
    }
    free(t->slots);
    free(t);
}

static dd_status_t dd_staging_wait_ready(dd_staging_op_t *t, int *busy_p)
{
    const dd_device_module_t *dev = t->r->env->device;
    dd_device_event_t *ev = t->job->ready_event;
    dd_status_t status =
        ev != NULL ? dev->ops->event_query(dev->instance, ev) : DD_OK;

    if (status == DD_OK) {
        t->ready = 1;
        t->t_ready = dd_time_now();
        /* The sync starts when the layer is final on the device: the wait
         * for the event is backward, not the wire, for the planner. */
        t->job->t_start = t->job->t_launch = t->t_ready;
        *busy_p = 1;
    }
    return status;
}

static dd_status_t dd_staging_test(void *arg, void *handle, int *busy_p)
{
    dd_staging_op_t *t = handle;
    dd_status_t status = DD_OK;

    (void)arg;
    *busy_p = 0;
    if (!t->ready) {
        status = dd_staging_wait_ready(t, busy_p);
        if (status != DD_OK) {
            if (status != DD_INPROGRESS) {
                dd_staging_end(t);
            }
            return status;
        }
        if (t->native) {
            status = t->inner->start(t->inner->arg, t->job, (void *)t->dst,
                                     t->count, &t->native_handle);
            if (status != DD_OK) {
                dd_staging_end(t);
                return status;
            }
        }
    }
    if (t->native) {
        status = t->inner->test(t->inner->arg, t->native_handle, busy_p);
        if (status != DD_INPROGRESS) {
            dd_staging_end(t);
        }
        return status;
    }
    int n_slots = t->r->slots->n_slots;
    for (int i = 0; i < n_slots && status == DD_OK; i++) {
        status = dd_staging_slot(t, i, busy_p);
    }
    if (status != DD_OK) {
        dd_staging_end(t);
        return status;
    }
    if (t->done < t->n_chunks) {
        return DD_INPROGRESS;
    }
    /* Copies no network overlapped: before the first chunk left, after the
     * last came back. */
    double now = dd_time_now();
    if (t->n_chunks > 0) {
        t->job->staging_s +=
            (t->t_first_net - t->t_ready) + (now - t->t_last_net);
    }
    dd_staging_end(t);
    return DD_OK;
}

void dd_route_staging_init(dd_route_staging_t *r, const dd_route_env_t *env,
                           const dd_sync_pipe_t *coll)
{
    r->env = env;
    r->coll = coll;
    r->host = coll;
    r->pipe = (dd_sync_pipe_t){.start = dd_staging_start,
                               .test = dd_staging_test,
                               .depth = 1,
                               .arg = r};
}

void dd_route_staging_set_host(dd_route_staging_t *r,
                               const dd_sync_pipe_t *host, int host_only)
{
    r->host = host;
    r->host_only = host_only;
}

dd_status_t dd_route_staging_call(dd_route_staging_t *r, dd_sync_job_t *job)
{
    void *handle;
    int busy;
    double deadline = dd_time_now() + r->env->job->timeout_s;
    dd_status_t status = dd_staging_start(r, job, NULL, 0, &handle);

    if (status != DD_OK) {
        return status;
    }
    while ((status = dd_staging_test(r, handle, &busy)) == DD_INPROGRESS) {
        if (dd_time_now() > deadline) {
            /* The copies and the network time out by themselves; this
             * only bounds a stuck event. */
            return dd_error(
                DD_ERR_TIMED_OUT, DD_SUBSYS_SCHED,
                "a device %s did not finish within %.0f s",
                dd_coll_name(((const dd_sched_coll_t *)job->op)->coll),
                r->env->job->timeout_s);
        }
    }
    return status;
}
