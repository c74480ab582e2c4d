/*
 * The progress engine's thread. Fused jobs are packed into one staging
 * buffer, averaged with one message, and unpacked; each job in flight has
 * its own staging slot, reused by the jobs after it. Jobs start in the
 * order they were submitted, which is the same on every worker, so the
 * backends see every rank post the same operations in the same order;
 * with N channels a job is handed back as soon as it and the jobs before
 * it on its channel are done. It must not decide what to sync: that is
 * the runtime's business.
 */
#include "sched/engine/engine.h"
#include "core/bell.h"
#include "core/log.h"
#include "core/reduce.h"
#include "core/status.h"
#include "core/time.h"
#include "sched/engine/divergence.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Jobs in flight at most: every channel's pipe depth, and a control job. */
#define DD_ENGINE_MAX_FLY (DD_ENGINE_DEPTH * DD_ENGINE_MAX_CHANNELS + 1)

struct dd_engine {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    dd_sync_job_t *queue, **queue_tail; /* waiting to run */
    dd_sync_job_t *done, *done_last;    /* ran, not yet drained, in
                                           submission order */
    size_t pending; /* submitted, not yet run, and not deferred */
    int stopping;
    dd_status_t failed;   /* after one failure the rest are canceled */
    dd_sync_pipe_t route; /* the pipe of jobs that name none */
    void *staging[DD_ENGINE_MAX_FLY]; /* one per job started at once */
    size_t staging_size[DD_ENGINE_MAX_FLY];
    void *sample[DD_ENGINE_MAX_FLY]; /* a measured job's sample, kept before */
    size_t sample_size[DD_ENGINE_MAX_FLY];
    int slot_used[DD_ENGINE_MAX_FLY]; /* the thread's alone */
    /* The channels (the stream count) and the rule that gives each job
     * its channel at submission, from its step and size (plan.h). */
    int channels;
    dd_engine_assign_fn_t assign; /* the channel rule, and its state */
    void *assign_arg;
    uint64_t n_submitted;
    double last_end[DD_ENGINE_MAX_CHANNELS]; /* when each channel's previous
                                              job ended */
    /* The wire's shares (several channels): when each channel's last job
     * on the wire ended, and how many channels were on it. */
    double chan_free[DD_ENGINE_MAX_CHANNELS];
    int share_k;
    /* The job's fate: once raised, the jobs in flight end with its reason
     * instead of waiting for the backend's own timeout (NULL: none). */
    dd_abort_t *abort;
    double timeout_s; /* a job in flight longer fails (0: no bound) */
    int abandoned;    /* a pipe may still write into the staging buffers */
};

/* Whether a job's buffers are fused into one message through staging:
 * several host buffers, a deferred one's, or one small enough to be
 * measured whole, since the average must not overwrite it before. A larger
 * measured buffer is averaged in place, and only its sample (drift.h) kept
 * beforehand. */
static int dd_engine_fused(const dd_sync_job_t *job)
{
    return job->mem_type == DD_MEM_HOST &&
           (job->n_items > 1 ||
            (job->n_items == 1 &&
             (job->deferred ||
              (job->measure &&
               dd_drift_step(job->items[0].count) >= job->items[0].count))));
}

/* Whether a job is one host buffer averaged in place whose sample is kept
 * in slot i's sample buffer. */
static int dd_engine_sampled(const dd_sync_job_t *job)
{
    return job->mem_type == DD_MEM_HOST && job->n_items == 1 && job->measure &&
           !dd_engine_fused(job);
}

/* Keeps the sample of a sampled job's buffer before it is averaged. */
static dd_status_t dd_engine_keep_sample(dd_engine_t *e, dd_sync_job_t *job,
                                         int i)
{
    const dd_sync_item_t *it = &job->items[0];
    size_t esize = dd_dtype_size(job->dtype);
    size_t bytes = dd_drift_sample_count(it->count) * esize;

    if (bytes > e->sample_size[i]) {
        void *sample = realloc(e->sample[i], bytes);
        if (sample == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                            "no memory for the divergence monitor's sample "
                            "of %zu bytes",
                            bytes);
        }
        e->sample[i] = sample;
        e->sample_size[i] = bytes;
    }
    dd_drift_sample(e->sample[i], it->buf, it->count, esize);
    return DD_OK;
}

void dd_engine_delta(void *dst, const void *avg, const void *copy, size_t count,
                     dd_dtype_t dtype)
{
    if (dtype == DD_DTYPE_F64) {
        double *d = dst;
        const double *a = avg, *c = copy;
        for (size_t i = 0; i < count; i++) {
            d[i] = a[i] - c[i];
        }
    } else {
        float *d = dst;
        const float *a = avg, *c = copy;
        for (size_t i = 0; i < count; i++) {
            d[i] = a[i] - c[i];
        }
    }
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
    if (job->n_items == 0) { /* a collective: its op names the buffers */
        *buf_p = NULL;
        *count_p = 0;
        return DD_OK;
    }
    if (!dd_engine_fused(job)) {
        *buf_p = job->items[0].buf;
        *count_p = job->items[0].count;
        return dd_engine_sampled(job) ? dd_engine_keep_sample(e, job, i)
                                      : DD_OK;
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

/* Writes a fused job's averages back from staging slot i, measuring how
 * far each buffer lay from its average first when the job asks. */
static void dd_engine_unpack(dd_engine_t *e, dd_sync_job_t *job, int i)
{
    size_t esize = dd_dtype_size(job->dtype), off = 0;

    if (dd_engine_sampled(job)) {
        dd_sync_item_t *it = &job->items[0];
        it->diff2 = it->norm2 = 0;
        it->measured =
            dd_drift_norms_sampled(e->sample[i], 0, it->buf, it->count,
                                   job->dtype, &it->diff2, &it->norm2);
        return;
    }
    if (!dd_engine_fused(job)) {
        return;
    }
    for (size_t j = 0; j < job->n_items; j++) {
        dd_sync_item_t *it = &job->items[j];
        const char *avg = (const char *)e->staging[i] + off;
        size_t n = it->count * esize;
        if (job->measure) {
            it->diff2 = it->norm2 = 0;
            it->measured = dd_drift_norms_sampled(
                it->buf, 1, avg, it->count, job->dtype, &it->diff2, &it->norm2);
        }
        if (job->deferred) {
            dd_engine_delta(it->buf, avg, it->buf, it->count, job->dtype);
        } else {
            memcpy(it->buf, avg, n);
        }
        off += n;
    }
}

static const dd_sync_pipe_t *dd_engine_pipe(const dd_engine_t *e,
                                            const dd_sync_job_t *job)
{
    return job->pipe != NULL ? job->pipe : &e->route;
}

/* DREAMDDP_CHECK_FINITE: whether the average holds NaN or Inf, read where
 * it landed (a fused job's staging slot i, else its one buffer). */
static void dd_engine_check_result(dd_engine_t *e, dd_sync_job_t *job, int i)
{
    if (!job->check_finite || job->n_items == 0 ||
        dd_engine_pipe(e, job)->checks_finite) {
        return;
    }
    if (dd_engine_fused(job)) {
        size_t count = 0;
        for (size_t j = 0; j < job->n_items; j++) {
            count += job->items[j].count;
        }
        job->result_bad = !dd_values_finite(e->staging[i], count, job->dtype);
    } else {
        job->result_bad = !dd_values_finite(job->items[0].buf,
                                            job->items[0].count, job->dtype);
    }
}

/* Puts a job on the done list in submission order (jobs of different
 * channels finish out of it); under the lock. */
static void dd_engine_done_insert(dd_engine_t *e, dd_sync_job_t *job)
{
    dd_sync_job_t **at = &e->done;

    /* Mostly in order: from the last one. */
    if (e->done_last != NULL && e->done_last->seq < job->seq) {
        at = &e->done_last->next;
    }
    while (*at != NULL && (*at)->seq < job->seq) {
        at = &(*at)->next;
    }
    job->next = *at;
    *at = job;
    if (job->next == NULL) {
        e->done_last = job;
    }
}

/* Hands a finished job to the application thread; under the lock. */
static void dd_engine_finish(dd_engine_t *e, dd_sync_job_t *job)
{
    double *last_end = &e->last_end[job->channel];

    /* Each of the planner's channels is FIFO: a job overlapped with the
     * previous one of its channel counts from that one's end. */
    if (!job->control && job->t_start < *last_end) {
        job->t_start = *last_end;
    }
    if (job->t_end < job->t_start) {
        job->t_end = job->t_start;
    }
    if (!job->control) {
        *last_end = job->t_end;
    }
    /* One channel has the wire to itself; with several, each job's share
     * was summed while it ran (dd_engine_share). */
    if (e->channels == 1 || job->control) {
        job->wire_s = job->t_end - job->t_start;
    }
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
    if (!job->waited && !job->deferred) {
        dd_engine_done_insert(e, job);
    }
    job->finished = 2; /* handed back */
    e->pending -= !job->deferred;
    pthread_cond_broadcast(&e->cond);
}

/* Starts a job through the pipe, in staging slot i. */
static void dd_engine_pipe_start(dd_engine_t *e, dd_sync_job_t *job, int i)
{
    void *buf = NULL;
    size_t count = 0;

    job->t_start = job->t_launch = dd_time_now();
    job->wire_s = 0;
    job->finished = 0;
    job->status = e->failed ? DD_ERR_CANCELED : DD_OK;
    if (job->status == DD_OK && dd_abort_raised(e->abort)) {
        job->status = dd_abort_error(e->abort, DD_SUBSYS_SCHED);
    }
    if (job->status == DD_OK) {
        job->status = dd_engine_pack(e, job, i, &buf, &count);
    }
    const dd_sync_pipe_t *pipe = dd_engine_pipe(e, job);
    if (job->status == DD_OK && job->check_finite && buf != NULL &&
        !pipe->checks_finite) {
        job->input_bad = !dd_values_finite(buf, count, job->dtype);
    }
    if (job->status == DD_OK) {
        job->status = pipe->start(pipe->arg, job, buf, count, &job->handle);
    }
    if (job->status != DD_OK) {
        job->finished = 1;
        job->t_end = dd_time_now();
    }
}

/* Whether two jobs travel through the same pipe: then they post their
 * operations by the same rule, in the order they started. */
static int dd_engine_same_pipe(const dd_engine_t *e, const dd_sync_job_t *a,
                               const dd_sync_job_t *b)
{
    const dd_sync_pipe_t *p = dd_engine_pipe(e, a), *q = dd_engine_pipe(e, b);

    return p->start == q->start && p->test == q->test && p->arg == q->arg;
}

/* The depth a set of jobs allows beside next: the least of their pipes';
 * *count_p += the jobs that count against it (not a control job of
 * next's pipe), *control_p += the control jobs, *other_p += the jobs of
 * another pipe than next's. */
static int dd_engine_depth(const dd_engine_t *e, dd_sync_job_t *const *jobs,
                           int n, const dd_sync_job_t *next, int depth,
                           int *count_p, int *control_p, int *other_p)
{
    for (int j = 0; j < n; j++) {
        int same = dd_engine_same_pipe(e, jobs[j], next);
        *control_p += jobs[j]->control;
        *other_p += !same;
        if (jobs[j]->control && same) {
            continue;
        }
        int d = dd_engine_pipe(e, jobs[j])->depth;
        depth = d < depth ? d : depth;
        (*count_p)++;
    }
    return depth < 1 ? 1 : depth;
}

/*
 * Whether the next job may start beside the n_fly in flight and the
 * n_take about to start: no pipe among them, nor its own, overlaps fewer,
 * and no more than DD_ENGINE_DEPTH per channel (or next's pipe's depth,
 * when that is more) are in flight in all. A
 * control job starts beside them, whatever the depth, when no other one
 * is in flight and they all travel through its pipe, whose order of
 * posting (route.c's digests) does not depend on when each started; a
 * pipe of another kind may post later, at a time of its own (staging
 * posts after its copies), so beside one a control job counts as any job.
 */
static int dd_engine_room(const dd_engine_t *e, dd_sync_job_t *const *fly,
                          int n_fly, dd_sync_job_t *const *take, int n_take,
                          const dd_sync_job_t *next)
{
    int depth = dd_engine_pipe(e, next)->depth;
    /* A pipe deeper than that (delayed averaging's) sets its own bound. */
    int most = DD_ENGINE_DEPTH * e->channels > depth
                   ? DD_ENGINE_DEPTH * e->channels
                   : depth;
    int count = 0, control = 0, other = 0;

    depth =
        dd_engine_depth(e, fly, n_fly, next, depth, &count, &control, &other);
    depth =
        dd_engine_depth(e, take, n_take, next, depth, &count, &control, &other);
    if (next->control && control > 0) {
        return 0;
    }
    if (next->control && other == 0) {
        return 1;
    }
    return count < (depth > most ? most : depth);
}

/* A staging slot no job in flight holds. */
static int dd_engine_slot(dd_engine_t *e)
{
    int i = 0;

    while (i < DD_ENGINE_MAX_FLY - 1 && e->slot_used[i]) {
        i++;
    }
    e->slot_used[i] = 1;
    return i;
}

/*
 * With several channels, the share of the wire each job had since the
 * last call: the oldest unfinished job of each channel is on it (from its
 * launch, or from when the one before it on the channel ended), and the k
 * channels on it each had 1/k of the time, as the planner's channels share
 * the NIC (plan.h). The sum is what the job would have taken alone, which
 * is what the profile and the model take as its time.
 */
static void dd_engine_share(dd_engine_t *e, dd_sync_job_t *const *fly, int n,
                            double *tick)
{
    dd_sync_job_t *head[DD_ENGINE_MAX_CHANNELS] = {NULL};
    double now = dd_time_now();
    int k = 0;

    for (int j = 0; j < n; j++) {
        int c = fly[j]->channel;
        fly[j]->share_head = 0;
        if (!fly[j]->finished && !fly[j]->control && head[c] == NULL) {
            head[c] = fly[j];
            k++;
        }
    }
    for (int c = 0; c < e->channels; c++) {
        dd_sync_job_t *h = head[c];
        if (h == NULL) {
            continue;
        }
        double from = *tick > h->t_launch ? *tick : h->t_launch;
        from = e->chan_free[c] > from ? e->chan_free[c] : from;
        h->wire_s += now > from ? (now - from) / k : 0;
        h->share_head = 1;
    }
    e->share_k = k;
    *tick = now;
}

/* The heads that the test just ended: their share up to their end. */
static void dd_engine_share_end(dd_engine_t *e, dd_sync_job_t *const *fly,
                                int n, double tick)
{
    for (int j = 0; j < n; j++) {
        dd_sync_job_t *h = fly[j];
        if (!h->finished || !h->share_head) {
            continue;
        }
        double from =
            e->chan_free[h->channel] > tick ? e->chan_free[h->channel] : tick;
        h->wire_s += h->t_end > from ? (h->t_end - from) / e->share_k : 0;
        e->chan_free[h->channel] = h->t_end;
        h->share_head = 0;
    }
}

/* Tests every job in flight once, ending those that the abort or the
 * timeout ends; returns whether anything moved, *poll_p whether a job
 * still in flight asked to be tested again soon (DD_SYNC_POLL), and
 * *loud_p whether one will not ring the doorbell (DD_SYNC_NOTIFY). */
static int dd_engine_test_all(dd_engine_t *e, dd_sync_job_t *const *fly,
                              const int *slot, int n, int *poll_p, int *loud_p)
{
    int aborted = dd_abort_raised(e->abort), busy = 0;
    double now = dd_time_now();

    for (int j = 0; j < n; j++) {
        dd_sync_job_t *job = fly[j];
        int moved = 0;
        if (job->finished) {
            continue;
        }
        if (aborted) {
            /* The pipe keeps the job's handle, which it may still
             * complete after the peer's loss; nothing tests it again. */
            job->status = dd_abort_error(e->abort, DD_SUBSYS_SCHED);
            job->finished = 1;
            job->t_end = dd_time_now();
            e->abandoned = 1;
            busy = 1;
            continue;
        }
        if (e->timeout_s > 0 && now - job->t_start > e->timeout_s) {
            /* Whatever the backend's own bound: a peer that does not
             * take part for DREAMDDP_TIMEOUT_S fails the sync. */
            job->status =
                dd_error(DD_ERR_TIMED_OUT, DD_SUBSYS_SCHED,
                         "a sync of %zu bytes did not complete within "
                         "%.1f s (DREAMDDP_TIMEOUT_S)",
                         job->bytes, e->timeout_s);
            job->finished = 1;
            job->t_end = now;
            e->abandoned = 1;
            busy = 1;
            continue;
        }
        const dd_sync_pipe_t *pipe = dd_engine_pipe(e, job);
        dd_status_t status = pipe->test(pipe->arg, job->handle, &moved);
        busy |= (moved & ~(DD_SYNC_POLL | DD_SYNC_NOTIFY)) != 0;
        if (status == DD_INPROGRESS && (moved & DD_SYNC_POLL)) {
            *poll_p = 1;
        }
        if (status == DD_INPROGRESS && !(moved & DD_SYNC_NOTIFY)) {
            *loud_p = 1;
        }
        if (status != DD_INPROGRESS) {
            job->status = status;
            job->finished = 1;
            /* The unpacking holds the channel too: the sync ends once its
             * averages are written back. */
            if (status == DD_OK) {
                dd_engine_unpack(e, job, slot[j]);
                dd_engine_check_result(e, job, slot[j]);
            }
            job->t_end = dd_time_now();
            busy = 1;
        }
    }
    return busy;
}

/* Hands back, under the lock, every finished job that no unfinished one
 * of its channel precedes (one channel: in order), and a finished control
 * job whatever precedes it (nor does one hold back the jobs after it);
 * returns those left. */
static int dd_engine_hand_back(dd_engine_t *e, dd_sync_job_t **fly, int *slot,
                               int n)
{
    int blocked[DD_ENGINE_MAX_CHANNELS] = {0};
    int kept = 0;

    for (int j = 0; j < n; j++) {
        dd_sync_job_t *job = fly[j];
        if ((job->control || !blocked[job->channel]) && job->finished) {
            e->slot_used[slot[j]] = 0;
            dd_engine_finish(e, job);
            continue;
        }
        blocked[job->channel] |= !job->control;
        fly[kept] = job;
        slot[kept] = slot[j];
        kept++;
    }
    return kept;
}

/* The thread: jobs started in submission order as their pipes allow,
 * tested in turn, handed back in order per channel. */
static void *dd_engine_main(void *arg)
{
    dd_engine_t *e = arg;
    dd_sync_job_t *fly[DD_ENGINE_MAX_FLY];
    int slot[DD_ENGINE_MAX_FLY];
    int n = 0, poll = 0, loud = 0;
    double nap = 20e-6, tick = dd_time_now();

    pthread_mutex_lock(&e->lock);
    while (1) {
        while (n == 0 && e->queue == NULL && !e->stopping) {
            pthread_cond_wait(&e->cond, &e->lock);
        }
        if (n == 0 && e->queue == NULL) {
            break;
        }
        dd_sync_job_t *take[DD_ENGINE_MAX_FLY];
        int n_take = 0;
        while (e->queue != NULL &&
               dd_engine_room(e, fly, n, take, n_take, e->queue)) {
            take[n_take++] = e->queue;
            e->queue = e->queue->next;
            if (e->queue == NULL) {
                e->queue_tail = &e->queue;
            }
        }
        pthread_mutex_unlock(&e->lock);

        int busy = n_take > 0;
        for (int j = 0; j < n_take; j++) {
            slot[n] = dd_engine_slot(e);
            fly[n] = take[j];
            dd_engine_pipe_start(e, fly[n], slot[n]);
            n++;
        }
        if (e->channels > 1) {
            dd_engine_share(e, fly, n, &tick);
        }
        poll = 0;
        loud = 0;
        uint64_t rung = dd_bell_count(); /* a ring from now on wakes it */
        busy |= dd_engine_test_all(e, fly, slot, n, &poll, &loud);
        if (e->channels > 1) {
            dd_engine_share_end(e, fly, n, tick);
        }

        pthread_mutex_lock(&e->lock);
        n = dd_engine_hand_back(e, fly, slot, n);
        if (busy || n == 0) {
            nap = 20e-6;
            continue;
        }
        pthread_mutex_unlock(&e->lock);
        if (poll || loud) {
            dd_bell_wait(rung, nap);
            double most = poll ? DD_POLL_NAP_S : DD_IDLE_NAP_S;
            nap = nap * 2 < most ? nap * 2 : most;
        } else {
            dd_bell_wait(rung, DD_NOTIFY_NAP_S);
        }
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

dd_status_t dd_engine_start(const dd_sync_pipe_t *route, dd_engine_t **engine_p)
{
    return dd_engine_start_channels(route, 1, engine_p);
}

dd_status_t dd_engine_start_channels(const dd_sync_pipe_t *route, int channels,
                                     dd_engine_t **engine_p)
{
    dd_engine_t *e;
    pthread_condattr_t attr;

    if (channels < 1 || channels > DD_ENGINE_MAX_CHANNELS) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "the progress engine runs 1 to %d channels, not %d",
                        DD_ENGINE_MAX_CHANNELS, channels);
    }
    if ((e = calloc(1, sizeof(*e))) == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the progress engine");
    }
    e->route = *route;
    e->channels = channels;
    e->queue_tail = &e->queue;
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

/* The monotonic time timeout_s from now. */
static void dd_engine_deadline(struct timespec *ts, double timeout_s)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)timeout_s;
    ts->tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void dd_engine_set_abort(dd_engine_t *e, dd_abort_t *abort, double timeout_s)
{
    pthread_mutex_lock(&e->lock);
    e->abort = abort;
    e->timeout_s = timeout_s;
    pthread_mutex_unlock(&e->lock);
}

void dd_engine_set_assign(dd_engine_t *e, dd_engine_assign_fn_t assign,
                          void *arg)
{
    pthread_mutex_lock(&e->lock);
    e->assign = assign;
    e->assign_arg = arg;
    pthread_mutex_unlock(&e->lock);
}

void dd_engine_submit(dd_engine_t *e, dd_sync_job_t *job)
{
    job->next = NULL;
    job->t_submit = dd_time_now();
    pthread_mutex_lock(&e->lock);
    job->seq = e->n_submitted++;
    job->channel =
        job->control || e->assign == NULL
            ? 0
            : (int)e->assign(e->assign_arg, job->step, (double)job->bytes);
    *e->queue_tail = job;
    e->queue_tail = &job->next;
    e->pending += !job->deferred;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    dd_bell_ring(); /* the thread may be waiting for a ring */
}

dd_status_t dd_engine_drain(dd_engine_t *e, double timeout_s,
                            dd_sync_job_t **done_p)
{
    struct timespec ts;
    dd_status_t status = DD_OK;

    dd_engine_deadline(&ts, timeout_s);
    pthread_mutex_lock(&e->lock);
    while (e->pending > 0) {
        if (pthread_cond_timedwait(&e->cond, &e->lock, &ts) == ETIMEDOUT) {
            status = DD_ERR_TIMED_OUT;
            break;
        }
    }
    if (status == DD_OK) {
        *done_p = e->done;
        e->done = e->done_last = NULL;
    }
    pthread_mutex_unlock(&e->lock);
    return status;
}

dd_status_t dd_engine_call(dd_engine_t *e, dd_sync_job_t *job, double timeout_s)
{
    job->waited = 1;
    dd_engine_submit(e, job);
    return dd_engine_wait(e, job, timeout_s);
}

dd_status_t dd_engine_wait(dd_engine_t *e, dd_sync_job_t *job, double timeout_s)
{
    struct timespec ts;
    dd_status_t status = DD_OK;

    dd_engine_deadline(&ts, timeout_s);
    pthread_mutex_lock(&e->lock);
    while (job->finished != 2) {
        if (pthread_cond_timedwait(&e->cond, &e->lock, &ts) == ETIMEDOUT) {
            status = DD_ERR_TIMED_OUT;
            break;
        }
    }
    pthread_mutex_unlock(&e->lock);
    if (status == DD_OK && job->status != DD_OK) {
        /* The engine thread's message, as this thread's last error. */
        dd_last_error_set(job->why);
    }
    return status == DD_OK ? job->status : status;
}

void dd_sync_job_free_list(dd_sync_job_t *job)
{
    while (job != NULL) {
        dd_sync_job_t *next = job->next;
        free(job->items);
        free(job->layers);
        free(job->layer_bytes);
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
    dd_bell_ring();
    pthread_join(e->thread, NULL);
    dd_sync_job_free_list(e->done);
    dd_sync_job_free_list(e->queue);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
    for (int i = 0; i < DD_ENGINE_MAX_FLY && !e->abandoned; i++) {
        free(e->staging[i]);
        free(e->sample[i]);
    }
    free(e);
}
