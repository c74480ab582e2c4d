/*
 * The device pipe (src/sched/staging.c) over the fake device and a host
 * pipe of the test's own, whose "network" takes 50 ms a chunk and doubles
 * what it is given: no chunk enters the network before the readiness event
 * completes, each enters with its data already copied, the copy of the
 * next chunk is done while the previous one is on the network (more chunks
 * than slots), and the doubled values land on the device bit-exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/time.h"
#include "sched/route/staging.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK_FLOATS 1024
#define N_CHUNKS 6
#define SLOTS 3
#define NET_S 0.05

static dd_device_module_t *mod;
static const dd_device_ops_t *ops;
static dd_device_event_t *ready;
static const float *src;

/* What the test's network saw. */
static struct {
    int started, finished;
    float *buf[N_CHUNKS];
    double t_start[N_CHUNKS];
    int early;      /* started before the readiness event completed */
    int bad_data;   /* started with data not yet copied */
    int overlapped; /* chunks whose successor was copied meanwhile */
} net;

static dd_status_t net_start(void *arg, dd_sync_job_t *job, void *buf,
                             size_t count, void **handle_p)
{
    int c = net.started++;

    (void)arg;
    assert_int_equal(job->mem_type, DD_MEM_HOST);
    assert_int_equal(count, CHUNK_FLOATS);
    net.early += ops->event_query(mod->instance, ready) != DD_OK;
    net.bad_data +=
        memcmp(buf, src + (size_t)c * CHUNK_FLOATS, count * sizeof(float)) != 0;
    net.buf[c] = buf;
    net.t_start[c] = dd_time_now();
    *handle_p = (void *)(intptr_t)(c + 1);
    return DD_OK;
}

static dd_status_t net_test(void *arg, void *handle, int *busy_p)
{
    int c = (int)(intptr_t)handle - 1;

    (void)arg;
    *busy_p = 0;
    if (dd_time_now() - net.t_start[c] < NET_S) {
        return DD_INPROGRESS;
    }
    /* The slot chunk c + 1 uses held chunk c + 1 - SLOTS: its data must
     * be there already. */
    if (c + 1 < N_CHUNKS && c + 1 >= SLOTS &&
        memcmp(net.buf[c + 1 - SLOTS], src + (size_t)(c + 1) * CHUNK_FLOATS,
               CHUNK_FLOATS * sizeof(float)) == 0) {
        net.overlapped++;
    }
    for (size_t i = 0; i < CHUNK_FLOATS; i++) {
        net.buf[c][i] *= 2;
    }
    net.finished++;
    *busy_p = 1;
    return DD_OK;
}

static void test_pipelined_staging(void **state)
{
    dd_device_opts_t opts = {.kind = DD_DEVICE_FAKE,
                             .staging_bytes = CHUNK_FLOATS * sizeof(float),
                             .staging_slots = SLOTS};
    dd_job_t job = {.timeout_s = 30};
    char why[512];
    size_t n = (size_t)N_CHUNKS * CHUNK_FLOATS;
    float *host = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    float *d;
    void *app;

    (void)state;
    assert_int_equal(dd_device_load(&opts, getenv("DREAMDDP_BACKEND_PATH"), 0,
                                    &mod, why, sizeof(why)),
                     DD_OK);
    assert_non_null(mod);
    ops = mod->ops;
    dd_device_t *dev = mod->instance;
    for (size_t i = 0; i < n; i++) {
        host[i] = (float)(i % 1000) * 0.25f;
    }
    src = host;
    assert_int_equal(ops->mem_alloc(dev, 0, n * sizeof(float), (void **)&d),
                     DD_OK);
    assert_int_equal(ops->stream_create(dev, 0, &app), DD_OK);
    assert_int_equal(ops->event_create(dev, 0, &ready), DD_OK);
    /* "Backward": a long kernel, then the values, then the event. */
    for (int k = 0; k < 30; k++) {
        assert_int_equal(
            ops->memcpy_async(dev, d, host, 4, DD_DEVICE_COPY_H2D, app), DD_OK);
    }
    assert_int_equal(ops->memcpy_async(dev, d, host, n * sizeof(float),
                                       DD_DEVICE_COPY_H2D, app),
                     DD_OK);
    assert_int_equal(ops->event_record(dev, ready, app), DD_OK);

    dd_route_env_t env = {.job = &job, .device = mod, .device_opts = &opts};
    dd_sync_pipe_t netp = {net_start, net_test, 1, NULL};
    dd_route_staging_t staging = {0};
    dd_route_staging_init(&staging, &env, &netp);
    dd_sync_item_t item = {.buf = d, .count = n};
    dd_sync_job_t sj = {.dtype = DD_DTYPE_F32,
                        .mem_type = DD_MEM_CUDA,
                        .bytes = n * sizeof(float),
                        .n_items = 1,
                        .items = &item,
                        .ready_event = ready};
    const dd_sync_pipe_t *p = &staging.pipe;
    void *h;
    int busy;
    dd_status_t status = p->start(p->arg, &sj, d, n, &h);
    assert_int_equal(status, DD_OK);
    double deadline = dd_time_now() + 20;
    while ((status = p->test(p->arg, h, &busy)) == DD_INPROGRESS &&
           dd_time_now() < deadline) {
        usleep(200); /* as the engine naps: the stream threads run */
    }
    assert_int_equal(status, DD_OK);
    assert_int_equal(net.started, N_CHUNKS);
    assert_int_equal(net.finished, N_CHUNKS);
    assert_int_equal(net.early, 0);
    assert_int_equal(net.bad_data, 0);
    assert_int_equal(net.overlapped, N_CHUNKS - SLOTS);
    assert_true(sj.staging_s > 0);

    /* The averages are on the device when the job ends. */
    memcpy(back, d, n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        float want = host[i] * 2;
        assert_memory_equal(&back[i], &want, sizeof(float));
    }
    dd_route_staging_free(&staging);
    ops->event_destroy(dev, ready);
    ops->stream_destroy(dev, app);
    ops->mem_free(dev, d);
    dd_device_unload(mod);
    free(host);
    free(back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipelined_staging),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
