/* The progress engine with a fake one-at-a-time pipe: order, fusion
 * packing, in-place single buffers, and cancellation after a failure; with
 * a fake overlapping pipe: two jobs at once at most, finished in order with
 * the channel's times; a call waited for alone, in its turn; with several
 * channels: a small job after a large one comes back first, jobs finishing
 * out of order stay exact and drain in submission order, and a job stuck
 * on one channel is ended by the timeout or an abort; a job that moves
 * only when tested is tested often, one whose completion rings the
 * doorbell is tested when it rings (and still ends when no ring comes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/abort.h"
#include "core/bell.h"
#include "core/time.h"
#include "sched/engine/engine.h"
#include "sched/plan/plan.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The planner's channel rule, as the runtime gives it to its engine. */
static dd_plan_assign_t rule;

static unsigned plan_assign(void *arg, uint64_t step, double work)
{
    return dd_plan_assign_next(arg, step, work);
}

static void plan_rule(dd_engine_t *e, int channels)
{
    dd_plan_assign_init(&rule, (unsigned)channels);
    dd_engine_set_assign(e, plan_assign, &rule);
}

typedef struct {
    int calls;
    size_t counts[16];
    int fail_at; /* call index that fails, or -1 */
} fake_t;

/* "Averaging" doubles every element, so packing mistakes show; it is done
 * when it starts, as a one-at-a-time route. */
static dd_status_t fake_start(void *arg, dd_sync_job_t *job, void *buf,
                              size_t count, void **handle_p)
{
    fake_t *f = arg;
    *handle_p = NULL;
    int call = f->calls++;
    f->counts[call] = count;
    if (call == f->fail_at) {
        return DD_ERR_PEER_LOST;
    }
    for (size_t i = 0; i < count; i++) {
        ((float *)buf)[i] *= 2;
    }
    return DD_OK;
}

static dd_status_t done_test(void *arg, void *handle, int *busy_p)
{
    *busy_p = 1;
    return DD_OK;
}

static dd_sync_pipe_t route(fake_t *f)
{
    return (dd_sync_pipe_t){fake_start, done_test, 1, f};
}

static dd_sync_job_t *job(float **bufs, const size_t *counts, size_t n)
{
    dd_sync_job_t *j = calloc(1, sizeof(*j));
    j->dtype = DD_DTYPE_F32;
    j->mem_type = DD_MEM_HOST;
    j->items = calloc(n, sizeof(dd_sync_item_t));
    j->layers = calloc(n, sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        j->items[i] = (dd_sync_item_t){.buf = bufs[i], .count = counts[i]};
        j->layers[i] = i;
        j->bytes += counts[i] * 4;
    }
    j->n_items = j->n_layers = n;
    return j;
}

static void test_fused_and_single(void **state)
{
    fake_t f = {.fail_at = -1};
    dd_engine_t *e;
    float a[3] = {1, 2, 3}, b[2] = {10, 20}, c[4] = {5, 5, 5, 5};
    float *fused[] = {a, b}, *single[] = {c};
    size_t fused_n[] = {3, 2}, single_n[] = {4};
    dd_sync_job_t *done = NULL;

    dd_sync_pipe_t r = route(&f);
    assert_int_equal(dd_engine_start(&r, &e), DD_OK);
    dd_engine_submit(e, job(fused, fused_n, 2));
    dd_engine_submit(e, job(single, single_n, 1));
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    assert_int_equal(f.calls, 2);
    assert_int_equal(f.counts[0], 5); /* one message for the fused pair */
    assert_int_equal(f.counts[1], 4);
    float ea[3] = {2, 4, 6}, eb[2] = {20, 40}, ec[4] = {10, 10, 10, 10};
    assert_memory_equal(a, ea, sizeof(ea));
    assert_memory_equal(b, eb, sizeof(eb));
    assert_memory_equal(c, ec, sizeof(ec));
    /* Done jobs come back in submission order, with their times. */
    assert_non_null(done);
    assert_int_equal(done->n_items, 2);
    assert_int_equal(done->next->n_items, 1);
    assert_null(done->next->next);
    assert_true(done->t_end >= done->t_start &&
                done->next->t_start >= done->t_end);
    dd_sync_job_free_list(done);
    dd_engine_stop(e);
}

static void test_failure_cancels_the_rest(void **state)
{
    fake_t f = {.fail_at = 0};
    dd_engine_t *e;
    float a[1] = {1}, b[1] = {1};
    float *ja[] = {a}, *jb[] = {b};
    size_t one[] = {1};
    dd_sync_job_t *done = NULL;

    dd_sync_pipe_t r = route(&f);
    assert_int_equal(dd_engine_start(&r, &e), DD_OK);
    dd_engine_submit(e, job(ja, one, 1));
    dd_engine_submit(e, job(jb, one, 1));
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    assert_int_equal(done->status, DD_ERR_PEER_LOST);
    assert_int_equal(done->next->status, DD_ERR_CANCELED);
    assert_int_equal(f.calls, 1); /* the second never went on the wire */
    assert_true(b[0] == 1.0f);
    dd_sync_job_free_list(done);
    dd_engine_stop(e);
}

static dd_status_t slow_start(void *arg, dd_sync_job_t *job, void *buf,
                              size_t count, void **handle_p)
{
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return DD_OK;
}

static void test_drain_times_out(void **state)
{
    dd_engine_t *e;
    float a[1] = {1};
    float *ja[] = {a};
    size_t one[] = {1};
    dd_sync_job_t *done = NULL;

    dd_sync_pipe_t slow = {slow_start, done_test, 1, NULL};
    assert_int_equal(dd_engine_start(&slow, &e), DD_OK);
    dd_engine_submit(e, job(ja, one, 1));
    assert_int_equal(dd_engine_drain(e, 0.05, &done), DD_ERR_TIMED_OUT);
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    dd_sync_job_free_list(done);
    dd_engine_stop(e);
}

/* A pipe whose messages finish after a set number of tests each, the
 * later ones sooner: the engine must still hand them back in order. With
 * hold_first, the first finishes only once the second has started (else
 * an engine quicker than the submitting thread tests it 40 times before
 * the second is submitted: seen under ASan). */
typedef struct {
    int started, open, most_open, fail_msg, hold_first;
    struct {
        float *buf;
        size_t count;
        int tests_left;
    } msg[8];
} fake_pipe_t;

static dd_status_t pipe_start(void *arg, dd_sync_job_t *job, void *buf,
                              size_t count, void **handle_p)
{
    fake_pipe_t *p = arg;
    int i = p->started++;
    p->msg[i].buf = buf;
    p->msg[i].count = count;
    p->msg[i].tests_left = i == 0 ? 40 : 1;
    if (++p->open > p->most_open) {
        p->most_open = p->open;
    }
    *handle_p = &p->msg[i];
    return DD_OK;
}

static dd_status_t pipe_test(void *arg, void *handle, int *busy_p)
{
    fake_pipe_t *p = arg;
    int i = (int)((char *)handle - (char *)p->msg) / (int)sizeof(p->msg[0]);
    *busy_p = 1;
    if (i == 0 && p->hold_first && p->started < 2) {
        return DD_INPROGRESS;
    }
    if (--p->msg[i].tests_left > 0) {
        return DD_INPROGRESS;
    }
    p->open--;
    if (i == p->fail_msg) {
        return DD_ERR_PEER_LOST;
    }
    for (size_t j = 0; j < p->msg[i].count; j++) {
        p->msg[i].buf[j] *= 2;
    }
    return DD_OK;
}

static dd_sync_pipe_t fake_pipe(fake_pipe_t *p)
{
    return (dd_sync_pipe_t){pipe_start, pipe_test, DD_ENGINE_DEPTH, p};
}

static void test_pipe_overlaps_two_in_order(void **state)
{
    fake_pipe_t p = {.fail_msg = -1, .hold_first = 1};
    dd_engine_t *e;
    float a[3] = {1, 2, 3}, b[2] = {10, 20}, c[1] = {7}, d[1] = {9};
    float *fused[] = {a, b}, *jc[] = {c}, *jd[] = {d};
    size_t fused_n[] = {3, 2}, one[] = {1};
    dd_sync_job_t *done = NULL;

    dd_sync_pipe_t fp = fake_pipe(&p);
    assert_int_equal(dd_engine_start(&fp, &e), DD_OK);
    dd_engine_submit(e, job(fused, fused_n, 2));
    dd_engine_submit(e, job(jc, one, 1));
    dd_engine_submit(e, job(jd, one, 1));
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    assert_int_equal(p.started, 3);
    assert_int_equal(p.most_open, 2); /* two at once, never three */
    float ea[3] = {2, 4, 6}, eb[2] = {20, 40};
    assert_memory_equal(a, ea, sizeof(ea)); /* unpacked from staging */
    assert_memory_equal(b, eb, sizeof(eb));
    assert_true(c[0] == 14.0f && d[0] == 18.0f);
    /* The second finished first, yet comes back second, and its time
     * starts where the first one's ends, as on one FIFO channel. */
    assert_int_equal(done->n_items, 2);
    assert_ptr_equal(done->next->items[0].buf, c);
    assert_ptr_equal(done->next->next->items[0].buf, d);
    assert_true(done->next->t_start >= done->t_end);
    assert_true(done->next->next->t_start >= done->next->t_end);
    for (dd_sync_job_t *j = done; j != NULL; j = j->next) {
        assert_int_equal(j->status, DD_OK);
        assert_true(j->t_end >= j->t_start);
    }
    dd_sync_job_free_list(done);
    dd_engine_stop(e);
}

static void test_pipe_failure_cancels_the_rest(void **state)
{
    fake_pipe_t p = {.fail_msg = 0, .hold_first = 1};
    dd_engine_t *e;
    float a[1] = {1}, b[1] = {1}, c[1] = {1};
    float *ja[] = {a}, *jb[] = {b}, *jc[] = {c};
    size_t one[] = {1};
    dd_sync_job_t *done = NULL;

    dd_sync_pipe_t fp = fake_pipe(&p);
    assert_int_equal(dd_engine_start(&fp, &e), DD_OK);
    dd_engine_submit(e, job(ja, one, 1));
    dd_engine_submit(e, job(jb, one, 1));
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    dd_engine_submit(e, job(jc, one, 1));
    dd_sync_job_t *later = NULL;
    assert_int_equal(dd_engine_drain(e, 5.0, &later), DD_OK);
    assert_int_equal(done->status, DD_ERR_PEER_LOST);
    assert_int_equal(later->status, DD_ERR_CANCELED);
    assert_int_equal(p.started, 2); /* the third never started */
    assert_true(a[0] == 1.0f && c[0] == 1.0f);
    dd_sync_job_free_list(done);
    dd_sync_job_free_list(later);
    dd_engine_stop(e);
}

/* A pipe whose job moves only when tested (as UCX's does), done after a
 * number of tests that move nothing; it says so with DD_SYNC_POLL or
 * not. */
typedef struct {
    int tests, need, poll;
} polled_t;

static dd_status_t polled_start(void *arg, dd_sync_job_t *job, void *buf,
                                size_t count, void **handle_p)
{
    *handle_p = NULL;
    return DD_OK;
}

static dd_status_t polled_test(void *arg, void *handle, int *busy_p)
{
    polled_t *p = arg;
    *busy_p = p->poll ? DD_SYNC_POLL : 0;
    return ++p->tests < p->need ? DD_INPROGRESS : DD_OK;
}

/* Runs one job of one element through pipe to its end, which must be a
 * success; returns its time from launch to end. */
static double run_one(dd_sync_pipe_t *pipe)
{
    dd_engine_t *e;
    float a[1] = {1};
    float *ja[] = {a};
    size_t one[] = {1};
    dd_sync_job_t *done = NULL;

    assert_int_equal(dd_engine_start(pipe, &e), DD_OK);
    dd_engine_submit(e, job(ja, one, 1));
    assert_int_equal(dd_engine_drain(e, 10.0, &done), DD_OK);
    assert_int_equal(done->status, DD_OK);
    double took = done->t_end - done->t_launch;
    dd_sync_job_free_list(done);
    dd_engine_stop(e);
    return took;
}

static double polled_run(int poll)
{
    polled_t p = {.need = 100, .poll = poll};
    dd_sync_pipe_t pipe = {polled_start, polled_test, 1, &p};
    double took = run_one(&pipe);

    assert_int_equal(p.tests, 100);
    return took;
}

/* Between tests that move nothing, the engine naps up to 1 ms, unless the
 * job asks to be polled: then at most 50 us, so 100 tests take a fraction
 * of the time. */
static void test_polled_job_naps_short(void **state)
{
    double quiet = polled_run(0), polled = polled_run(1);

    /* 93 of the quiet run's 99 naps are 1 ms, whatever the load. */
    assert_true(quiet >= 0.09);
    assert_true(polled < quiet / 2);
}

/* The doorbell: a wait ends at once when a ring came since the count was
 * read, at its timeout when none comes, and at a ring from another thread
 * long before its timeout. */
static void *ring_later(void *arg)
{
    usleep(20000);
    dd_bell_ring();
    return arg;
}

static void test_bell(void **state)
{
    uint64_t seen = dd_bell_count();
    pthread_t thread;

    dd_bell_ring();
    assert_int_equal(dd_bell_count(), seen + 1);
    assert_true(dd_bell_wait(seen, 5.0));
    double t0 = dd_time_now();
    assert_false(dd_bell_wait(seen + 1, 0.05));
    assert_true(dd_time_now() - t0 >= 0.05);
    seen = dd_bell_count();
    pthread_create(&thread, NULL, ring_later, NULL);
    t0 = dd_time_now();
    assert_true(dd_bell_wait(seen, 30.0));
    assert_true(dd_time_now() - t0 < 15.0);
    pthread_join(thread, NULL);
}

/* A pipe whose job another thread completes 50 ms after it starts, ringing
 * the doorbell or not (as Gloo's threads do); its test says
 * DD_SYNC_NOTIFY. */
typedef struct {
    int ring, done, tests;
    pthread_t thread;
} rung_t;

static void *rung_main(void *arg)
{
    rung_t *r = arg;
    usleep(50000);
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    if (r->ring) {
        dd_bell_ring();
    }
    return NULL;
}

static dd_status_t rung_start(void *arg, dd_sync_job_t *job, void *buf,
                              size_t count, void **handle_p)
{
    rung_t *r = arg;
    *handle_p = NULL;
    pthread_create(&r->thread, NULL, rung_main, r);
    return DD_OK;
}

static dd_status_t rung_test(void *arg, void *handle, int *busy_p)
{
    rung_t *r = arg;
    r->tests++;
    int done = __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
    *busy_p = done ? 1 : DD_SYNC_NOTIFY;
    return done ? DD_OK : DD_INPROGRESS;
}

static int rung_run(int ring)
{
    rung_t r = {.ring = ring};
    dd_sync_pipe_t pipe = {rung_start, rung_test, 1, &r};

    run_one(&pipe);
    pthread_join(r.thread, NULL);
    return r.tests;
}

/* While its job says its completion rings, the engine tests it when the
 * doorbell rings or after DD_NOTIFY_NAP_S (20 ms), not every millisecond:
 * a handful of tests in 50 ms instead of the 40 or so of 1 ms naps; and a
 * completion whose ring never comes is still seen. */
static void test_notified_job_waits_for_ring(void **state)
{
    int rung = rung_run(1), silent = rung_run(0);

    assert_true(rung >= 2 && rung <= 8);
    assert_true(silent >= 2 && silent <= 8);
}

/* A job on a one-at-a-time pipe never overlaps the overlapping route's
 * jobs, and a call comes back alone, after the jobs submitted before it,
 * without showing up in the drain. */
static void test_call_in_its_turn(void **state)
{
    fake_pipe_t p = {.fail_msg = -1};
    fake_t f = {.fail_at = -1};
    dd_engine_t *e;
    float a[1] = {1}, b[2] = {3, 4};
    float *ja[] = {a}, *jb[] = {b};
    size_t one[] = {1}, two[] = {2};
    dd_sync_job_t *done = NULL;
    dd_sync_pipe_t fp = fake_pipe(&p), r = route(&f);

    assert_int_equal(dd_engine_start(&fp, &e), DD_OK);
    dd_engine_submit(e, job(ja, one, 1));
    dd_sync_job_t *call = job(jb, two, 2 - 1);
    call->pipe = &r;
    assert_int_equal(dd_engine_call(e, call, 5.0), DD_OK);
    /* The route's job had finished before the call started: one open at a
     * time, and the call ran after it. */
    assert_int_equal(p.most_open, 1);
    assert_true(a[0] == 2.0f);
    assert_true(b[0] == 6.0f && b[1] == 8.0f);
    assert_int_equal(f.calls, 1);
    assert_true(call->t_start >= 0);
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    assert_non_null(done);
    assert_null(done->next); /* the call is not drained */
    assert_ptr_equal(done->items[0].buf, a);
    dd_sync_job_free_list(done);
    dd_sync_job_free_list(call);
    dd_engine_stop(e);
}

/* A pipe whose first message waits for the test to open the gate, the
 * others done at their first test; each doubles its elements. */
typedef struct {
    int started, gate;
    struct {
        float *buf;
        size_t count;
    } msg[16];
} gated_pipe_t;

static dd_status_t gated_start(void *arg, dd_sync_job_t *job, void *buf,
                               size_t count, void **handle_p)
{
    gated_pipe_t *p = arg;
    int i = p->started++;
    p->msg[i].buf = buf;
    p->msg[i].count = count;
    *handle_p = &p->msg[i];
    return DD_OK;
}

static dd_status_t gated_test(void *arg, void *handle, int *busy_p)
{
    gated_pipe_t *p = arg;
    int i = (int)((char *)handle - (char *)p->msg) / (int)sizeof(p->msg[0]);
    *busy_p = 0;
    if (i == 0 && !__atomic_load_n(&p->gate, __ATOMIC_ACQUIRE)) {
        return DD_INPROGRESS;
    }
    for (size_t j = 0; j < p->msg[i].count; j++) {
        p->msg[i].buf[j] *= 2;
    }
    *busy_p = 1;
    return DD_OK;
}

/*
 * A large fused job, then a small call: with two channels the rule puts
 * them on channels 0 and 1, and the call comes back while the large job
 * is still on the wire (its pipe holds it until the test opens the gate);
 * with one channel the call waits behind it. Either way every average is
 * exact and the drain gives the large job back.
 */
static void run_small_after_large(int channels)
{
    gated_pipe_t p = {0};
    dd_sync_pipe_t gp = {gated_start, gated_test, DD_ENGINE_DEPTH, &p};
    dd_engine_t *e;
    float a[300], b[200], c[2] = {3, 4};
    float *fused[] = {a, b}, *jc[] = {c};
    size_t fused_n[] = {300, 200}, two[] = {2};
    dd_sync_job_t *done = NULL;

    for (int i = 0; i < 300; i++) {
        a[i] = (float)i;
        b[i % 200] = (float)(1000 + i % 200);
    }
    assert_int_equal(dd_engine_start_channels(&gp, channels, &e), DD_OK);
    plan_rule(e, channels);
    dd_sync_job_t *large = job(fused, fused_n, 2);
    dd_sync_job_t *small = job(jc, two, 1);
    dd_engine_submit(e, large);
    if (channels > 1) {
        assert_int_equal(dd_engine_call(e, small, 5.0), DD_OK);
        assert_int_equal(large->channel, 0);
        assert_int_equal(small->channel, 1);
        /* Back first, while the large one is still in flight. */
        assert_int_not_equal(large->finished, 2);
        assert_true(small->t_end <= dd_time_now());
    } else {
        assert_int_equal(dd_engine_call(e, small, 0.3), DD_ERR_TIMED_OUT);
        assert_int_not_equal(small->finished, 2);
    }
    __atomic_store_n(&p.gate, 1, __ATOMIC_RELEASE);
    assert_int_equal(dd_engine_wait(e, small, 5.0), DD_OK);
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    assert_ptr_equal(done, large);
    assert_null(done->next);
    for (int i = 0; i < 300; i++) {
        assert_true(a[i] == 2.0f * (float)i);
    }
    for (int i = 0; i < 200; i++) {
        assert_true(b[i] == 2.0f * (float)(1000 + i));
    }
    assert_true(c[0] == 6.0f && c[1] == 8.0f);
    if (channels > 1) {
        assert_true(small->t_end < large->t_end);
        /* Shares of the wire: each at most its own span, and together
         * no more than the time both took. */
        assert_true(small->wire_s <= small->t_end - small->t_launch + 1e-9);
        assert_true(large->wire_s <= large->t_end - large->t_launch + 1e-9);
        assert_true(small->wire_s + large->wire_s <=
                    large->t_end - large->t_launch + 1e-6);
        assert_true(large->wire_s > 0);
    } else {
        assert_true(small->t_start >= large->t_end);
        assert_true(large->wire_s == large->t_end - large->t_start);
    }
    dd_sync_job_free_list(done);
    dd_sync_job_free_list(small);
    dd_engine_stop(e);
}

static void nap(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* A pipe whose jobs all stay on the wire until the gate opens. */
static dd_status_t held_test(void *arg, void *handle, int *busy_p)
{
    gated_pipe_t *p = arg;
    *busy_p = 0;
    if (!__atomic_load_n(&p->gate, __ATOMIC_ACQUIRE)) {
        return DD_INPROGRESS;
    }
    return gated_test(arg, handle, busy_p);
}

/*
 * On one channel the engine keeps as many jobs in flight as the pipe's
 * depth: DD_ENGINE_DEPTH for the allreduce pipe, DD_ENGINE_DEPTH_DELAYED
 * for delayed averaging's (route.c), and no more; the rest wait, and every
 * job comes back exact once the wire moves.
 */
static void run_depth(int depth)
{
    gated_pipe_t p = {0};
    dd_sync_pipe_t gp = {gated_start, held_test, depth, &p};
    dd_engine_t *e;
    float v[5][4];
    float *bufs[5];
    size_t four[] = {4};
    dd_sync_job_t *jobs[5], *done = NULL;

    assert_int_equal(dd_engine_start_channels(&gp, 1, &e), DD_OK);
    plan_rule(e, 1);
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 4; i++) {
            v[k][i] = (float)(10 * k + i);
        }
        bufs[k] = v[k];
        jobs[k] = job(&bufs[k], four, 1);
        dd_engine_submit(e, jobs[k]);
    }
    double until = dd_time_now() + 5.0;
    while (__atomic_load_n(&p.started, __ATOMIC_ACQUIRE) < depth &&
           dd_time_now() < until) {
        nap(1);
    }
    nap(100); /* time for a job too many to start */
    assert_int_equal(__atomic_load_n(&p.started, __ATOMIC_ACQUIRE), depth);
    __atomic_store_n(&p.gate, 1, __ATOMIC_RELEASE);
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    assert_int_equal(p.started, 5);
    int k = 0;
    for (dd_sync_job_t *j = done; j != NULL; j = j->next, k++) {
        assert_ptr_equal(j, jobs[k]);
    }
    assert_int_equal(k, 5);
    for (k = 0; k < 5; k++) {
        for (int i = 0; i < 4; i++) {
            assert_true(v[k][i] == 2.0f * (float)(10 * k + i));
        }
    }
    dd_sync_job_free_list(done);
    dd_engine_stop(e);
}

static void test_depth_default(void **state)
{
    run_depth(DD_ENGINE_DEPTH);
}

static void test_depth_delayed(void **state)
{
    run_depth(DD_ENGINE_DEPTH_DELAYED);
}

static void test_small_after_large_two_channels(void **state)
{
    run_small_after_large(2);
}

static void test_small_after_large_one_channel(void **state)
{
    run_small_after_large(1);
}

/*
 * A control job (the workers' agreement on the times) starts beside the
 * two syncs its pipe allows, and comes back while the first is still on
 * the wire, its time its own; beside a job of another pipe, one of depth
 * 1 here, it waits like any job.
 */
static void test_control_beside_full_pipe(void **state)
{
    gated_pipe_t p = {0}, q = {0};
    dd_sync_pipe_t gp = {gated_start, gated_test, DD_ENGINE_DEPTH, &p};
    dd_sync_pipe_t alone = {gated_start, gated_test, 1, &q};
    dd_engine_t *e;
    float a[4] = {1, 2, 3, 4}, b[2] = {5, 6}, c[2] = {7, 8}, d[1] = {9};
    float *ja[] = {a}, *jb[] = {b}, *jc[] = {c}, *jd[] = {d};
    size_t four[] = {4}, two[] = {2}, one[] = {1};
    dd_sync_job_t *done = NULL;

    assert_int_equal(dd_engine_start(&gp, &e), DD_OK);
    dd_sync_job_t *held = job(ja, four, 1), *quick = job(jb, two, 1);
    dd_sync_job_t *control = job(jc, two, 1);
    control->control = 1;
    dd_engine_submit(e, held);  /* message 0: held until the gate opens */
    dd_engine_submit(e, quick); /* done at once, handed back after held */
    assert_int_equal(dd_engine_call(e, control, 5.0), DD_OK);
    assert_int_not_equal(held->finished, 2);
    assert_int_equal(p.started, 3);
    assert_true(c[0] == 14.0f && c[1] == 16.0f);
    assert_true(control->wire_s == control->t_end - control->t_start);
    __atomic_store_n(&p.gate, 1, __ATOMIC_RELEASE);
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    assert_ptr_equal(done, held);
    assert_ptr_equal(done->next, quick);
    assert_true(a[3] == 8.0f && b[1] == 12.0f);
    dd_sync_job_free_list(done);
    dd_sync_job_free_list(control);

    /* Beside a job of a depth-1 pipe, it waits for that one's end. */
    dd_sync_job_t *other = job(jd, one, 1);
    other->pipe = &alone;
    control = job(jc, two, 1);
    control->control = 1;
    dd_engine_submit(e, other);
    assert_int_equal(dd_engine_call(e, control, 0.3), DD_ERR_TIMED_OUT);
    assert_int_equal(p.started, 3);
    __atomic_store_n(&q.gate, 1, __ATOMIC_RELEASE);
    assert_int_equal(dd_engine_wait(e, control, 5.0), DD_OK);
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    assert_ptr_equal(done, other);
    assert_true(d[0] == 18.0f && c[0] == 28.0f);
    dd_sync_job_free_list(done);
    dd_sync_job_free_list(control);
    dd_engine_stop(e);
}

/* A pipe that finishes message i after (7 * i) % 5 + 1 tests: out of
 * order across channels. */
static dd_status_t mixed_start(void *arg, dd_sync_job_t *job, void *buf,
                               size_t count, void **handle_p)
{
    fake_pipe_t *p = arg;
    int i = p->started++;
    p->msg[i % 8].buf = buf;
    p->msg[i % 8].count = count;
    p->msg[i % 8].tests_left = (7 * i) % 5 + 1;
    if (++p->open > p->most_open) {
        p->most_open = p->open;
    }
    *handle_p = &p->msg[i % 8];
    return DD_OK;
}

/*
 * Many fused jobs over three channels finishing out of order: every
 * staging slot unpacks its own job (exact doubles), at most the pipe's
 * depth in flight, and the drain gives them back in submission order.
 */
static void test_channels_out_of_order_exact(void **state)
{
    fake_pipe_t p = {.fail_msg = -1};
    dd_sync_pipe_t mp = {mixed_start, pipe_test, 3, &p};
    dd_engine_t *e;
    enum { JOBS = 8 };
    float x[JOBS][5], y[JOBS][3];
    dd_sync_job_t *done = NULL;

    assert_int_equal(dd_engine_start_channels(&mp, 3, &e), DD_OK);
    plan_rule(e, 3);
    for (int k = 0; k < JOBS; k++) {
        for (int i = 0; i < 5; i++) {
            x[k][i] = (float)(k * 10 + i);
        }
        for (int i = 0; i < 3; i++) {
            y[k][i] = (float)(-k * 10 - i);
        }
        float *bufs[] = {x[k], y[k]};
        size_t counts[] = {5, 3};
        dd_sync_job_t *j = job(bufs, counts, 2);
        j->step = (uint64_t)k / 4;
        dd_engine_submit(e, j);
    }
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    assert_true(p.most_open <= 3 && p.most_open >= 2);
    int k = 0;
    for (dd_sync_job_t *j = done; j != NULL; j = j->next, k++) {
        assert_ptr_equal(j->items[0].buf, x[k]);
        assert_int_equal(j->seq, (uint64_t)k);
        assert_int_equal(j->status, DD_OK);
        /* Equal sizes: the rule deals each step's jobs round robin. */
        assert_int_equal(j->channel, (k % 4) % 3);
        for (int i = 0; i < 5; i++) {
            assert_true(x[k][i] == 2.0f * (float)(k * 10 + i));
        }
        for (int i = 0; i < 3; i++) {
            assert_true(y[k][i] == 2.0f * (float)(-k * 10 - i));
        }
    }
    assert_int_equal(k, JOBS);
    dd_sync_job_free_list(done);
    dd_engine_stop(e);
}

/*
 * Two channels, the first job stuck on the wire (its gate never opens):
 * the second, on the other channel, comes back done; DREAMDDP_TIMEOUT_S
 * then fails the stuck one, or a raised abort does, and a job submitted
 * after either fails too, instead of anything hanging.
 */
static void run_stuck_channel(int abort_it)
{
    gated_pipe_t p = {0};
    dd_sync_pipe_t gp = {gated_start, gated_test, DD_ENGINE_DEPTH, &p};
    dd_engine_t *e;
    dd_abort_t ab;
    float a[4] = {1, 1, 1, 1}, b[1] = {5}, c[1] = {7};
    float *ja[] = {a}, *jb[] = {b}, *jc[] = {c};
    size_t four[] = {4}, one[] = {1};
    dd_sync_job_t *done = NULL;

    dd_abort_init(&ab);
    assert_int_equal(dd_engine_start_channels(&gp, 2, &e), DD_OK);
    plan_rule(e, 2);
    dd_engine_set_abort(e, &ab, abort_it ? 0 : 0.3);
    dd_sync_job_t *stuck = job(ja, four, 1);
    dd_sync_job_t *quick = job(jb, one, 1);
    dd_engine_submit(e, stuck);
    assert_int_equal(dd_engine_call(e, quick, 5.0), DD_OK);
    assert_true(b[0] == 10.0f);
    if (abort_it) {
        dd_abort_raise(&ab, "rank 1 left");
    }
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    assert_ptr_equal(done, stuck);
    assert_int_equal(stuck->status,
                     abort_it ? DD_ERR_PEER_LOST : DD_ERR_TIMED_OUT);
    assert_true(a[0] == 1.0f); /* never averaged */
    dd_engine_submit(e, job(jc, one, 1));
    dd_sync_job_t *later = NULL;
    assert_int_equal(dd_engine_drain(e, 5.0, &later), DD_OK);
    assert_int_not_equal(later->status, DD_OK);
    assert_true(c[0] == 7.0f);
    dd_sync_job_free_list(done);
    dd_sync_job_free_list(later);
    dd_sync_job_free_list(quick);
    dd_engine_stop(e);
    dd_abort_destroy(&ab);
}

static void test_stuck_channel_times_out(void **state)
{
    run_stuck_channel(0);
}

static void test_stuck_channel_aborts(void **state)
{
    run_stuck_channel(1);
}

static void test_channels_bad_count(void **state)
{
    fake_t f = {.fail_at = -1};
    dd_sync_pipe_t r = route(&f);
    dd_engine_t *e = NULL;

    assert_int_equal(dd_engine_start_channels(&r, 0, &e), DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_engine_start_channels(&r, 9, &e), DD_ERR_INVALID_PARAM);
    assert_null(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_and_single),
        cmocka_unit_test(test_failure_cancels_the_rest),
        cmocka_unit_test(test_drain_times_out),
        cmocka_unit_test(test_pipe_overlaps_two_in_order),
        cmocka_unit_test(test_pipe_failure_cancels_the_rest),
        cmocka_unit_test(test_call_in_its_turn),
        cmocka_unit_test(test_polled_job_naps_short),
        cmocka_unit_test(test_bell),
        cmocka_unit_test(test_notified_job_waits_for_ring),
        cmocka_unit_test(test_small_after_large_two_channels),
        cmocka_unit_test(test_small_after_large_one_channel),
        cmocka_unit_test(test_depth_default),
        cmocka_unit_test(test_depth_delayed),
        cmocka_unit_test(test_control_beside_full_pipe),
        cmocka_unit_test(test_channels_out_of_order_exact),
        cmocka_unit_test(test_stuck_channel_times_out),
        cmocka_unit_test(test_stuck_channel_aborts),
        cmocka_unit_test(test_channels_bad_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
