/*
 * The progress engine's thread. Fused jobs are packed into one staging
 * buffer, averaged with one message, and unpacked; the staging buffer is
 * reused, since one job runs at a time. It must not decide what to sync:
 * that is the runtime's business.
 */
#include "sched/engine.h"
#include "core/log.h"
#include "core/status.h"
#include "core/time.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct dd_engine {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    dd_sync_job_t *queue, **queue_tail; /* waiting to run */
    dd_sync_job_t *done, **done_tail;   /* ran, not yet drained */
    size_t pending;                     /* submitted, not yet run */
    int stopping;
    dd_status_t failed; /* after one failure the rest are canceled */
    dd_sync_route_fn_t route;
    dd_sync_pipe_t pipe; /* start is NULL without one */
    void *route_arg;
    void *staging[DD_ENGINE_DEPTH]; /* one per job started at once */
    size_t staging_size[DD_ENGINE_DEPTH];
    uint64_t n_started;
    double last_end; /* when the previous job ended */
};

/* Whether a job's buffers are fused into one message through staging:
 * several host buffers. */
static int dd_engine_fused(const dd_sync_job_t *job)
{
    return job->n_items > 1 && job->mem_type == DD_MEM_HOST;
}

/* Packs a fused job into staging slot i; *buf_p, *count_p: what to send
 * (the job's own buffer when it has one). */
static dd_status_t dd_engine_pack(dd_engine_t *e, dd_sync_job_t *job, int i,
                                  void **buf_p, size_t *count_p)
{
    size_t esize = dd_dtype_size(job->dtype), off = 0;

    if (!dd_engine_fused(job) && job->n_items > 1) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                        "%zu %s buffers in one job: only host buffers fuse",
                        job->n_items, dd_mem_type_name(job->mem_type));
    }
    if (!dd_engine_fused(job)) {
        *buf_p = job->items[0].buf;
        *count_p = job->items[0].count;
        return DD_OK;
    }
    if (job->bytes > e->staging_size[i]) {
        void *staging = realloc(e->staging[i], job->bytes);
        if (staging == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                            "no memory to fuse %zu bytes", job->bytes);
        }
        e->staging[i] = staging;
        e->staging_size[i] = job->bytes;
    }
    for (size_t j = 0; j < job->n_items; j++) {
        size_t n = job->items[j].count * esize;
        memcpy((char *)e->staging[i] + off, job->items[j].buf, n);
        off += n;
    }
    *buf_p = e->staging[i];
    *count_p = off / esize;
    return DD_OK;
}

/* Writes a fused job's averages back from staging slot i. */
static void dd_engine_unpack(dd_engine_t *e, dd_sync_job_t *job, int i)
{
    size_t esize = dd_dtype_size(job->dtype), off = 0;

    if (!dd_engine_fused(job)) {
        return;
    }
    for (size_t j = 0; j < job->n_items; j++) {
        size_t n = job->items[j].count * esize;
        memcpy(job->items[j].buf, (char *)e->staging[i] + off, n);
        off += n;
    }
}

/* Runs one job through the route: each buffer in place, or a fused job as
 * one message through staging slot 0. */
static dd_status_t dd_engine_run(dd_engine_t *e, dd_sync_job_t *job)
{
    if (!dd_engine_fused(job)) {
        for (size_t i = 0; i < job->n_items; i++) {
            dd_status_t status =
                e->route(e->route_arg, job, job->items[i].buf,
                         job->items[i].count, job->dtype, job->mem_type);
            if (status != DD_OK) {
                return status;
            }
        }
        return DD_OK;
    }
    void *buf;
    size_t count;
    dd_status_t status = dd_engine_pack(e, job, 0, &buf, &count);
    if (status == DD_OK) {
        status =
            e->route(e->route_arg, job, buf, count, job->dtype, job->mem_type);
    }
    if (status == DD_OK) {
        dd_engine_unpack(e, job, 0);
    }
    return status;
}

/* Hands a finished job to the application thread; under the lock. */
static void dd_engine_finish(dd_engine_t *e, dd_sync_job_t *job)
{
    /* The planner's channel is FIFO: a job overlapped with the previous
     * one counts from that one's end. */
    if (job->t_start < e->last_end) {
        job->t_start = e->last_end;
    }
    if (job->t_end < job->t_start) {
        job->t_end = job->t_start;
    }
    e->last_end = job->t_end;
    if (job->status != DD_OK) {
        /* The message is in this thread's last error; the application
         * thread reports it. */
        snprintf(job->why, sizeof(job->why), "%s",
                 e->failed ? "an earlier sync failed" : dd_last_error());
        if (e->failed == DD_OK) {
            e->failed = job->status;
        }
    }
    job->next = NULL;
    *e->done_tail = job;
    e->done_tail = &job->next;
    e->pending--;
    pthread_cond_broadcast(&e->cond);
}

/* Starts a job through the pipe, in staging slot i. */
static void dd_engine_pipe_start(dd_engine_t *e, dd_sync_job_t *job, int i)
{
    void *buf = NULL;
    size_t count = 0;

    job->t_start = dd_time_now();
    job->finished = 0;
    job->status = e->failed ? DD_ERR_CANCELED : DD_OK;
    if (job->status == DD_OK) {
        job->status = dd_engine_pack(e, job, i, &buf, &count);
    }
    if (job->status == DD_OK) {
        job->status = e->pipe.start(e->route_arg, job, buf, count, job->dtype,
                                    job->mem_type, &job->handle);
    }
    if (job->status != DD_OK) {
        job->finished = 1;
        job->t_end = dd_time_now();
    }
}

/* The thread with a pipe: up to DD_ENGINE_DEPTH jobs started, tested in
 * turn, finished in order. */
static void dd_engine_pipe_main(dd_engine_t *e)
{
    dd_sync_job_t *fly[DD_ENGINE_DEPTH];
    int slot[DD_ENGINE_DEPTH];
    int n = 0;
    double nap = 20e-6;

    pthread_mutex_lock(&e->lock);
    while (1) {
        while (n == 0 && e->queue == NULL && !e->stopping) {
            pthread_cond_wait(&e->cond, &e->lock);
        }
        if (n == 0 && e->queue == NULL) {
            break;
        }
        dd_sync_job_t *take[DD_ENGINE_DEPTH];
        int n_take = 0;
        while (n + n_take < DD_ENGINE_DEPTH && e->queue != NULL) {
            take[n_take++] = e->queue;
            e->queue = e->queue->next;
            if (e->queue == NULL) {
                e->queue_tail = &e->queue;
            }
        }
        pthread_mutex_unlock(&e->lock);

        int busy = n_take > 0;
        for (int j = 0; j < n_take; j++) {
            /* Jobs finish in order, so slot n_started % depth is free. */
            slot[n] = (int)(e->n_started++ % DD_ENGINE_DEPTH);
            fly[n] = take[j];
            dd_engine_pipe_start(e, fly[n], slot[n]);
            n++;
        }
        for (int j = 0; j < n; j++) {
            dd_sync_job_t *job = fly[j];
            int moved = 0;
            if (job->finished) {
                continue;
            }
            dd_status_t status =
                e->pipe.test(e->route_arg, job->handle, &moved);
            busy |= moved;
            if (status != DD_INPROGRESS) {
                job->status = status;
                job->finished = 1;
                job->t_end = dd_time_now();
                if (status == DD_OK) {
                    dd_engine_unpack(e, job, slot[j]);
                }
                busy = 1;
            }
        }

        pthread_mutex_lock(&e->lock);
        while (n > 0 && fly[0]->finished) {
            dd_engine_finish(e, fly[0]);
            for (int j = 1; j < n; j++) {
                fly[j - 1] = fly[j];
                slot[j - 1] = slot[j];
            }
            n--;
        }
        if (busy || n == 0) {
            nap = 20e-6;
            continue;
        }
        pthread_mutex_unlock(&e->lock);
        usleep((useconds_t)(nap * 1e6));
        nap = nap * 2 < 1e-3 ? nap * 2 : 1e-3;
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
}

static void *dd_engine_main(void *arg)
{
    dd_engine_t *e = arg;

    if (e->pipe.start != NULL) {
        dd_engine_pipe_main(e);
        return NULL;
    }

    pthread_mutex_lock(&e->lock);
    while (1) {
        while (e->queue == NULL && !e->stopping) {
            pthread_cond_wait(&e->cond, &e->lock);
        }
        if (e->queue == NULL) {
            break;
        }
        dd_sync_job_t *job = e->queue;
        e->queue = job->next;
        if (e->queue == NULL) {
            e->queue_tail = &e->queue;
        }
        pthread_mutex_unlock(&e->lock);

        job->next = NULL;
        job->t_start = dd_time_now();
        /* Once a sync failed the workers no longer agree on what runs
         * next: later jobs are canceled rather than each waiting out the
         * timeout. */
        job->status = e->failed ? DD_ERR_CANCELED : dd_engine_run(e, job);
        job->t_end = dd_time_now();
        if (job->status != DD_OK) {
            /* The message is in this thread's last error; the application
             * thread reports it. */
            snprintf(job->why, sizeof(job->why), "%s",
                     e->failed ? "an earlier sync failed" : dd_last_error());
        }

        pthread_mutex_lock(&e->lock);
        if (job->status != DD_OK && e->failed == DD_OK) {
            e->failed = job->status;
        }
        *e->done_tail = job;
        e->done_tail = &job->next;
        e->pending--;
        pthread_cond_broadcast(&e->cond);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

dd_status_t dd_engine_start(dd_sync_route_fn_t route,
                            const dd_sync_pipe_t *pipe, void *route_arg,
                            dd_engine_t **engine_p)
{
    dd_engine_t *e = calloc(1, sizeof(*e));
    pthread_condattr_t attr;

    if (e == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    e->route = route;
    if (pipe != NULL) {
        e->pipe = *pipe;
    }
    e->route_arg = route_arg;
    e->queue_tail = &e->queue;
    e->done_tail = &e->done;
    pthread_mutex_init(&e->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&e->thread, NULL, dd_engine_main, e) != 0) {
        pthread_cond_destroy(&e->cond);
        pthread_mutex_destroy(&e->lock);
        free(e);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "cannot start the progress engine thread");
    }
    *engine_p = e;
    return DD_OK;
}

void dd_engine_submit(dd_engine_t *e, dd_sync_job_t *job)
{
    job->next = NULL;
    job->t_submit = dd_time_now();
    pthread_mutex_lock(&e->lock);
    *e->queue_tail = job;
    e->queue_tail = &job->next;
    e->pending++;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

dd_status_t dd_engine_drain(dd_engine_t *e, double timeout_s,
                            dd_sync_job_t **done_p)
{
    struct timespec ts;
    dd_status_t status = DD_OK;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)timeout_s;
    ts.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&e->lock);
    while (e->pending > 0) {
        if (pthread_cond_timedwait(&e->cond, &e->lock, &ts) == ETIMEDOUT) {
            status = DD_ERR_TIMED_OUT;
            break;
        }
    }
    if (status == DD_OK) {
        *done_p = e->done;
        e->done = NULL;
        e->done_tail = &e->done;
    }
    pthread_mutex_unlock(&e->lock);
    return status;
}

void dd_sync_job_free_list(dd_sync_job_t *job)
{
    while (job != NULL) {
        dd_sync_job_t *next = job->next;
        free(job->items);
        free(job->layers);
        free(job);
        job = next;
    }
}

void dd_engine_stop(dd_engine_t *e)
{
    if (e == NULL) {
        return;
    }
    pthread_mutex_lock(&e->lock);
    e->stopping = 1;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    dd_sync_job_free_list(e->done);
    dd_sync_job_free_list(e->queue);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
    for (int i = 0; i < DD_ENGINE_DEPTH; i++) {
        free(e->staging[i]);
    }
    free(e);
}
