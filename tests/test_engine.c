/* The progress engine with a fake route: order, fusion packing, in-place
 * single buffers, and cancellation after a failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sched/engine.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int calls;
    size_t counts[16];
    int fail_at; /* call index that fails, or -1 */
} fake_t;

/* "Averaging" doubles every element, so packing mistakes show. */
static dd_status_t fake_route(void *arg, const dd_sync_job_t *job, void *buf,
                              size_t count, dd_dtype_t dtype, dd_mem_type_t mem)
{
    fake_t *f = arg;
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

static dd_sync_job_t *job(float **bufs, const size_t *counts, size_t n)
{
    dd_sync_job_t *j = calloc(1, sizeof(*j));
    j->dtype = DD_DTYPE_F32;
    j->mem_type = DD_MEM_HOST;
    j->items = calloc(n, sizeof(dd_sync_item_t));
    j->layers = calloc(n, sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        j->items[i] = (dd_sync_item_t){bufs[i], counts[i]};
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

    assert_int_equal(dd_engine_start(fake_route, &f, &e), DD_OK);
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

    assert_int_equal(dd_engine_start(fake_route, &f, &e), DD_OK);
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

static dd_status_t slow_route(void *arg, const dd_sync_job_t *job, void *buf,
                              size_t count, dd_dtype_t dtype, dd_mem_type_t mem)
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

    assert_int_equal(dd_engine_start(slow_route, NULL, &e), DD_OK);
    dd_engine_submit(e, job(ja, one, 1));
    assert_int_equal(dd_engine_drain(e, 0.05, &done), DD_ERR_TIMED_OUT);
    assert_int_equal(dd_engine_drain(e, 5.0, &done), DD_OK);
    dd_sync_job_free_list(done);
    dd_engine_stop(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_and_single),
        cmocka_unit_test(test_failure_cancels_the_rest),
        cmocka_unit_test(test_drain_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
