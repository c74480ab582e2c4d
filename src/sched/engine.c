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
    void *route_arg;
    void *staging;
    size_t staging_size;
};

/* Runs one job: in place when it has one buffer, else through staging. */
static dd_status_t dd_engine_run(dd_engine_t *e, dd_sync_job_t *job)
{
    size_t esize = dd_dtype_size(job->dtype);

    if (job->n_items == 1 || job->mem_type != DD_MEM_HOST) {
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
    if (job->bytes > e->staging_size) {
        void *staging = realloc(e->staging, job->bytes);
        if (staging == NULL) {
            return DD_ERR_NO_MEMORY;
        }
        e->staging = staging;
        e->staging_size = job->bytes;
    }
    size_t off = 0;
    for (size_t i = 0; i < job->n_items; i++) {
        size_t n = job->items[i].count * esize;
        memcpy((char *)e->staging + off, job->items[i].buf, n);
        off += n;
    }
    dd_status_t status = e->route(e->route_arg, job, e->staging, off / esize,
                                  job->dtype, job->mem_type);
    off = 0;
    for (size_t i = 0; status == DD_OK && i < job->n_items; i++) {
        size_t n = job->items[i].count * esize;
        memcpy(job->items[i].buf, (char *)e->staging + off, n);
        off += n;
    }
    return status;
}

static void *dd_engine_main(void *arg)
{
    dd_engine_t *e = arg;

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

dd_status_t dd_engine_start(dd_sync_route_fn_t route, void *route_arg,
                            dd_engine_t **engine_p)
{
    dd_engine_t *e = calloc(1, sizeof(*e));
    pthread_condattr_t attr;

    if (e == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    e->route = route;
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
    free(e->staging);
    free(e);
}
