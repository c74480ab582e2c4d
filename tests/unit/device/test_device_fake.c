/*
 * The fake device module and the loader: copies and event records complete
 * late (a reader who does not wait sees stale data), events follow CUDA's
 * semantics (complete until recorded, then after the work before them),
 * copies refuse the wrong direction, IPC handles map a buffer in another
 * process, device sums (reduce_async) equal the host's bit for bit and
 * run in stream order, also from an IPC mapping, and the loader honours
 * DREAMDDP_DEVICE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/half.h"
#include "core/log.h"
#include "core/reduce.h"
#include "device/loader.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static dd_device_module_t *mod;
static const dd_device_ops_t *ops;
static dd_device_t *dev;

static int setup(void **state)
{
    dd_device_opts_t o = {
        .kind = DD_DEVICE_FAKE, .staging_bytes = 4096, .staging_slots = 2};
    char why[512];

    (void)state;
    if (dd_device_load(&o, getenv("DREAMDDP_BACKEND_PATH"), 0, &mod, why,
                       sizeof(why)) != DD_OK ||
        mod == NULL) {
        fprintf(stderr, "cannot load the fake device: %s\n", dd_last_error());
        return -1;
    }
    ops = mod->ops;
    dev = mod->instance;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dd_device_unload(mod);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The fake runs each queued op 0.3 ms after the one before (fake.c's
 * DD_FAKE_DELAY_NS): a query within n_ops x 0.3 ms of since, when n_ops
 * ops were queued, must find ev pending; a thread descheduled for longer
 * (a loaded machine) may find it done. */
static void pending_unless_late(dd_device_event_t *ev, double since, int n_ops)
{
    dd_status_t q = ops->event_query(dev, ev);
    double waited = now_s() - since;

    if (q == DD_INPROGRESS) {
        return;
    }
    assert_int_equal(q, DD_OK);
    if (waited < n_ops * 0.3e-3) {
        fail_msg("the event completed %.3f ms after %d ops were queued, "
                 "sooner than their delay",
                 waited * 1e3, n_ops);
    }
}

static void test_copies_complete_late(void **state)
{
    enum { N = 1 << 16 };
    unsigned char *host, *back, *d;
    void *stream;
    dd_device_event_t *ev;

    (void)state;
    assert_int_equal(ops->host_alloc(dev, N, (void **)&host), DD_OK);
    assert_int_equal(ops->host_alloc(dev, N, (void **)&back), DD_OK);
    assert_int_equal(ops->mem_alloc(dev, 0, N, (void **)&d), DD_OK);
    assert_int_equal(ops->stream_create(dev, 0, &stream), DD_OK);
    assert_int_equal(ops->event_create(dev, 0, &ev), DD_OK);
    /* Never recorded: complete. */
    assert_int_equal(ops->event_query(dev, ev), DD_OK);

    memset(d, 0, N);
    memset(host, 7, N);
    memset(back, 1, N);
    double t0 = now_s();
    assert_int_equal(
        ops->memcpy_async(dev, d, host, N, DD_DEVICE_COPY_H2D, stream), DD_OK);
    assert_int_equal(
        ops->memcpy_async(dev, back, d, N, DD_DEVICE_COPY_D2H, stream), DD_OK);
    assert_int_equal(ops->event_record(dev, ev, stream), DD_OK);
    /* Nothing has run yet: the reader who did not wait sees stale data
     * (where this thread read within the first op's delay). */
    int stale = d[0] == 0 && back[N - 1] == 1;
    if (now_s() - t0 < 0.3e-3) {
        assert_true(stale);
    }
    pending_unless_late(ev, t0, 3);
    assert_int_equal(ops->event_synchronize(dev, ev), DD_OK);
    assert_int_equal(ops->event_query(dev, ev), DD_OK);
    assert_int_equal(d[N / 2], 7);
    assert_int_equal(back[N - 1], 7);

    /* A second record makes the event pending again, then complete. */
    t0 = now_s();
    assert_int_equal(ops->event_record(dev, ev, stream), DD_OK);
    pending_unless_late(ev, t0, 1);
    while (ops->event_query(dev, ev) == DD_INPROGRESS) {
        usleep(100);
    }

    /* The direction must match where the buffers live. */
    assert_int_equal(
        ops->memcpy_async(dev, back, host, 16, DD_DEVICE_COPY_H2D, stream),
        DD_ERR_INVALID_PARAM);
    assert_non_null(strstr(dd_last_error(), "H2D copy of 16 bytes from host "
                                            "to host memory"));
    assert_int_equal(
        ops->memcpy_async(dev, d, host, 16, DD_DEVICE_COPY_D2H, stream),
        DD_ERR_INVALID_PARAM);

    ops->event_destroy(dev, ev);
    ops->stream_destroy(dev, stream);
    ops->mem_free(dev, d);
    ops->host_free(dev, host);
    ops->host_free(dev, back);
}

/* An event on one stream says nothing of another stream's work. */
static void test_events_per_stream(void **state)
{
    void *a, *b;
    dd_device_event_t *ea, *eb;
    float *d, x = 3.0f;

    (void)state;
    assert_int_equal(ops->stream_create(dev, 0, &a), DD_OK);
    assert_int_equal(ops->stream_create(dev, 0, &b), DD_OK);
    assert_int_equal(ops->event_create(dev, 0, &ea), DD_OK);
    assert_int_equal(ops->event_create(dev, 0, &eb), DD_OK);
    assert_int_equal(ops->mem_alloc(dev, 1, sizeof(float), (void **)&d), DD_OK);
    *d = 0;
    /* 100 copies on a (30 ms of the fake's delay) against one on b: with 8,
     * a's thread could finish its 2.4 ms while b's waited for a core on a
     * loaded machine (seen once in make check -j2 on 2 cores). */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(
            ops->memcpy_async(dev, d, &x, sizeof(x), DD_DEVICE_COPY_H2D, a),
            DD_OK);
    }
    assert_int_equal(ops->event_record(dev, ea, a), DD_OK);
    assert_int_equal(ops->event_record(dev, eb, b), DD_OK);
    assert_int_equal(ops->event_synchronize(dev, eb), DD_OK);
    assert_int_equal(ops->event_query(dev, ea), DD_INPROGRESS);
    assert_int_equal(ops->event_synchronize(dev, ea), DD_OK);
    assert_true(*d == 3.0f);
    ops->event_destroy(dev, ea);
    ops->event_destroy(dev, eb);
    ops->stream_destroy(dev, a);
    ops->stream_destroy(dev, b);
    ops->mem_free(dev, d);
}

/* A child process maps the parent's buffer and writes into it. */
static void test_ipc_across_processes(void **state)
{
    enum { N = 8192 };
    unsigned char *d;
    dd_device_ipc_handle_t h;
    int status;

    (void)state;
    assert_int_equal(ops->mem_alloc(dev, 0, N, (void **)&d), DD_OK);
    memset(d, 0, N);
    assert_int_equal(ops->ipc_get(dev, d, &h), DD_OK);
    assert_int_equal(ops->ipc_get(dev, d + 1, &h), DD_ERR_INVALID_PARAM);
    assert_int_equal(ops->ipc_get(dev, d, &h), DD_OK);
    pid_t pid = fork();
    if (pid == 0) {
        unsigned char *peer;
        if (ops->ipc_open(dev, &h, (void **)&peer) != DD_OK) {
            _exit(2);
        }
        memset(peer, 0x5a, N);
        _exit(ops->ipc_close(dev, peer) == DD_OK ? 0 : 3);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(d[0], 0x5a);
    assert_int_equal(d[N - 1], 0x5a);
    /* Mapped in this process too, it is a device buffer for copies. */
    unsigned char *again;
    assert_int_equal(ops->ipc_open(dev, &h, (void **)&again), DD_OK);
    assert_int_equal(again[17], 0x5a);
    assert_int_equal(ops->ipc_close(dev, again), DD_OK);
    assert_int_equal(ops->ipc_close(dev, d), DD_ERR_INVALID_PARAM);
    ops->mem_free(dev, d);
}

/* Values of every dtype that round in f16 and bf16 and wrap in u8. */
static void fill(void *buf, dd_dtype_t dtype, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++) {
        float f =
            (float)((int)((i * 7919u + (unsigned)seed * 104729u) % 2001u) -
                    1000) *
            0.01171875f / 3.0f;
        switch (dtype) {
        case DD_DTYPE_F32:
            ((float *)buf)[i] = f;
            break;
        case DD_DTYPE_F64:
            ((double *)buf)[i] = (double)f / 7.0;
            break;
        case DD_DTYPE_F16:
            ((uint16_t *)buf)[i] = dd_half_f32_to_f16(f);
            break;
        case DD_DTYPE_BF16:
            ((uint16_t *)buf)[i] = dd_half_f32_to_bf16(f);
            break;
        case DD_DTYPE_I32:
            ((int32_t *)buf)[i] = (int32_t)(f * 1e7f);
            break;
        case DD_DTYPE_I64:
            ((int64_t *)buf)[i] = (int64_t)(f * 1e15);
            break;
        default:
            ((uint8_t *)buf)[i] = (uint8_t)(i * 37u + (unsigned)seed);
            break;
        }
    }
}

/*
 * reduce_async: every dtype's device sum equals the host's
 * (dd_coll_reduce) bit for bit; it runs after the copies queued before it
 * and completes late, like the copies; its source may be an IPC mapping
 * (how a host's workers sum each other's buffers); bad arguments are
 * errors.
 */
static void test_reduce_async(void **state)
{
    enum { N = 3001 };
    void *stream;
    dd_device_event_t *ev;
    dd_device_ipc_handle_t h;

    (void)state;
    assert_int_equal(ops->stream_create(dev, 0, &stream), DD_OK);
    assert_int_equal(ops->event_create(dev, 0, &ev), DD_OK);
    for (int t = 0; t < DD_DTYPE_LAST; t++) {
        size_t bytes = N * dd_coll_dtype_size((dd_dtype_t)t);
        unsigned char *a, *b, *back, *want, *da, *db, *peer;
        assert_int_equal(ops->host_alloc(dev, bytes, (void **)&a), DD_OK);
        assert_int_equal(ops->host_alloc(dev, bytes, (void **)&b), DD_OK);
        assert_int_equal(ops->host_alloc(dev, bytes, (void **)&back), DD_OK);
        want = malloc(bytes);
        fill(a, (dd_dtype_t)t, N, 1);
        fill(b, (dd_dtype_t)t, N, 2);
        memcpy(want, a, bytes);
        dd_coll_reduce(want, b, N, (dd_dtype_t)t, DD_REDUCE_SUM);
        memset(back, 0, bytes);
        assert_int_equal(ops->mem_alloc(dev, 0, bytes, (void **)&da), DD_OK);
        assert_int_equal(ops->mem_alloc(dev, 0, bytes, (void **)&db), DD_OK);
        assert_int_equal(ops->ipc_get(dev, db, &h), DD_OK);
        assert_int_equal(ops->ipc_open(dev, &h, (void **)&peer), DD_OK);
        assert_int_equal(
            ops->memcpy_async(dev, da, a, bytes, DD_DEVICE_COPY_H2D, stream),
            DD_OK);
        assert_int_equal(
            ops->memcpy_async(dev, db, b, bytes, DD_DEVICE_COPY_H2D, stream),
            DD_OK);
        assert_int_equal(
            ops->reduce_async(dev, da, peer, N, (dd_dtype_t)t, stream), DD_OK);
        assert_int_equal(
            ops->memcpy_async(dev, back, da, bytes, DD_DEVICE_COPY_D2H, stream),
            DD_OK);
        assert_int_equal(ops->event_record(dev, ev, stream), DD_OK);
        assert_int_equal(ops->event_query(dev, ev), DD_INPROGRESS);
        assert_int_equal(ops->event_synchronize(dev, ev), DD_OK);
        assert_memory_equal(back, want, bytes);
        assert_memory_not_equal(back, a, bytes);
        assert_int_equal(ops->ipc_close(dev, peer), DD_OK);
        ops->mem_free(dev, da);
        ops->mem_free(dev, db);
        ops->host_free(dev, a);
        ops->host_free(dev, b);
        ops->host_free(dev, back);
        free(want);
    }
    void *d, *host;
    assert_int_equal(ops->mem_alloc(dev, 0, 64, &d), DD_OK);
    assert_int_equal(ops->host_alloc(dev, 64, &host), DD_OK);
    assert_int_equal(ops->reduce_async(dev, d, d, 4, DD_DTYPE_LAST, stream),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(ops->reduce_async(dev, d, host, 4, DD_DTYPE_F32, stream),
                     DD_ERR_INVALID_PARAM);
    assert_non_null(strstr(dd_last_error(), "must lie in device memory"));
    assert_int_equal(ops->reduce_async(dev, d, d, 17, DD_DTYPE_F32, stream),
                     DD_ERR_INVALID_PARAM); /* past the end of the buffer */
    ops->mem_free(dev, d);
    ops->host_free(dev, host);
    ops->event_destroy(dev, ev);
    ops->stream_destroy(dev, stream);
}

static void test_info(void **state)
{
    dd_device_info_t info;
    int n = 0;

    (void)state;
    assert_int_equal(ops->device_count(dev, &n), DD_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ops->device_info(dev, 1, &info), DD_OK);
    assert_string_equal(info.name, "fake device 1");
    assert_int_equal(ops->device_info(dev, 2, &info), DD_ERR_NO_DEVICE);
}

/* DREAMDDP_DEVICE: none loads nothing; auto without a GPU loads nothing
 * and says why; an explicit module that is missing is an error naming
 * it. */
static void test_loader_choice(void **state)
{
    dd_device_opts_t o = {.kind = DD_DEVICE_NONE};
    dd_device_module_t *m = (void *)1;
    char why[512];

    (void)state;
    assert_int_equal(dd_device_load(&o, NULL, 0, &m, why, sizeof(why)), DD_OK);
    assert_null(m);
    o.kind = DD_DEVICE_FAKE;
    if (dd_device_load(&o, "/nonexistent", 0, &m, why, sizeof(why)) !=
        DD_OK) { /* unless installed in the pkglibdir */
        assert_non_null(strstr(dd_last_error(),
                               "DREAMDDP_DEVICE=fake: device module fake is "
                               "unavailable: no module dd_device_fake.so"));
    } else {
        dd_device_unload(m);
    }
    o.kind = DD_DEVICE_AUTO;
    assert_int_equal(dd_device_load(&o, getenv("DREAMDDP_BACKEND_PATH"), 0, &m,
                                    why, sizeof(why)),
                     DD_OK);
    if (m == NULL) {
        assert_true(strstr(why, "no CUDA runtime") != NULL ||
                    strstr(why, "no NVIDIA driver") != NULL ||
                    strstr(why, "no device") != NULL);
        o.kind = DD_DEVICE_CUDA;
        assert_int_not_equal(dd_device_load(&o, getenv("DREAMDDP_BACKEND_PATH"),
                                            0, &m, why, sizeof(why)),
                             DD_OK);
        assert_non_null(strstr(dd_last_error(), "DREAMDDP_DEVICE=cuda"));
    } else {
        assert_string_equal(m->name, "cuda");
        dd_device_unload(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copies_complete_late),
        cmocka_unit_test(test_events_per_stream),
        cmocka_unit_test(test_ipc_across_processes),
        cmocka_unit_test(test_reduce_async),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_loader_choice),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
