/*
 * Run under ddrun by test_device.sh, with DREAMDDP_DEVICE=fake. Every rank
 * registers the same layers, three of them in the fake device's memory
 * (sizes 1, 7, 4099, 70000 and 33 elements, f32 and f64). Before every
 * step the application "computes" each device layer's values on its own
 * stream (asynchronous copies that complete late) and marks it with
 * dd_layer_ready_stream; after the step it checks that each layer the step
 * synced holds the bit-exact average, on the device.
 *
 *   mp_device STRATEGY STEPS   check the strategy
 *   mp_device nowait STEPS     marks device layers with plain dd_layer_ready
 *                              without waiting for its stream: stale data
 *                              must show (the test can see a missed wait)
 *   mp_device nomodule         a CUDA layer without a device module is an
 *                              error naming the layer
 *   mp_device big STEPS        one 100 MiB device layer under ddp
 *   mp_device bandwidth        one worker: a staged step of 100 MiB against
 *                              a plain pinned copy of the same bytes
 *   mp_device sum              the module's device sum (reduce_async) of
 *                              every dtype, exact, and its speed on 100 MiB
 * The device module is DREAMDDP_DEVICE's (fake unless it says cuda); the
 * layers are on device MP_DEVICE_ORDINAL (0 by default). With
 * MP_DEVICE_RANKS_PER_HOST=N, ranks are grouped into emulated hosts of N
 * (DREAMDDP_HOST_ID), for the hierarchical route; MP_DEVICE_ALL_ON_DEVICE=1
 * puts every layer in device memory; MP_DEVICE_DIE_RANK=R makes rank R
 * exit in the middle of step 2's backward (a local peer that dies), after
 * MP_DEVICE_STALL_S seconds of silence when set (one that hangs);
 * MP_DEVICE_RANK0_ROUTE sets rank 0's DREAMDDP_ROUTE alone.
 */
#include <dreamddp.h>
#include <dreamddp/device.h>

#include "device_app.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_LAYERS 5
static int n_layers = MAX_LAYERS;
static size_t sizes[MAX_LAYERS] = {1, 7, 4099, 70000, 33};
static int on_device[MAX_LAYERS] = {1, 0, 1, 1, 0};
static int rank, world;
#define MP_NAME "mp_device"
#include "mp.h"
static const dd_device_ops_t *ops;
static dd_device_t *dev;
static void *stream;
static void *scratch; /* the target of the long "kernel" */
static int ordinal;   /* MP_DEVICE_ORDINAL: the device the layers are on */

typedef struct {
    void *param, *grad; /* device or host */
    void *src;          /* host values the "backward" copies from */
    void *check;        /* host copy of a device buffer, for the checks */
    dd_dtype_t dtype;
    size_t es;
    dd_layer_h h;
} layer_t;

static double value(int r, int l, long step, size_t i)
{
    return (double)(r * 8 + l * 3 + (int)(step % 5) + (int)(i % 7));
}

/* The application's own handle on the device (device_app.h). */
static int open_device(void)
{
    char why[512];

    ops = device_app_open("mp_device", &dev, why, sizeof(why));
    CHECK(ops != NULL, "%s", why);
    const char *o = getenv("MP_DEVICE_ORDINAL");
    ordinal = o != NULL ? atoi(o) : 0;
    CHECK(ops->stream_create(dev, ordinal, &stream) == DD_OK, "stream");
    return 0;
}

static void *alloc(int l, size_t bytes)
{
    void *p = NULL;
    if (!on_device[l]) {
        return calloc(1, bytes);
    }
    return ops->mem_alloc(dev, ordinal, bytes, &p) == DD_OK ? p : NULL;
}

/* The "backward" of layer l: its values reach the device late, on the
 * application's stream, in pieces. */
static int fill(layer_t *L, int l, long step, int grads)
{
    void *buf = grads ? L->grad : L->param;
    void *dst = on_device[l] ? L->src : buf;
    for (size_t i = 0; i < sizes[l]; i++) {
        if (L->dtype == DD_DTYPE_F32) {
            ((float *)dst)[i] = (float)value(rank, l, step, i);
        } else {
            ((double *)dst)[i] = value(rank, l, step, i);
        }
    }
    if (!on_device[l]) {
        return 0;
    }
    /* A long "kernel" first: the copies below land some 30 ms after the
     * layer is marked, long after a sync that did not wait would read. */
    static char scratch_host;
    if (scratch == NULL && ops->mem_alloc(dev, ordinal, 1, &scratch) != DD_OK) {
        return 1;
    }
    for (int k = 0; l == 3 && k < 100; k++) {
        CHECK(ops->memcpy_async(dev, scratch, &scratch_host, 1,
                                DD_DEVICE_COPY_H2D, stream) == DD_OK,
              "H2D");
    }
    size_t bytes = sizes[l] * L->es, piece = bytes / 32 + 8;
    for (size_t o = 0; o < bytes; o += piece) {
        size_t n = bytes - o < piece ? bytes - o : piece;
        CHECK(ops->memcpy_async(dev, (char *)buf + o, (char *)L->src + o, n,
                                DD_DEVICE_COPY_H2D, stream) == DD_OK,
              "H2D");
    }
    return 0;
}

/* The buffer as the host sees it: device buffers are copied back (real
 * device memory is not the host's to read). */
static const void *host_view(layer_t *L, int l, const void *buf)
{
    static dd_device_event_t *ev;
    if (!on_device[l]) {
        return buf;
    }
    if ((ev == NULL && ops->event_create(dev, 0, &ev) != DD_OK) ||
        ops->memcpy_async(dev, L->check, buf, sizes[l] * L->es,
                          DD_DEVICE_COPY_D2H, stream) != DD_OK ||
        ops->event_record(dev, ev, stream) != DD_OK ||
        ops->event_synchronize(dev, ev) != DD_OK) {
        return NULL;
    }
    return L->check;
}

/* Whether buf holds the bit-exact average (binary32 sums of small
 * integers are exact; the quotient is correctly rounded). */
static int is_average(layer_t *L, int l, long step, int grads, int quiet)
{
    const void *buf = host_view(L, l, grads ? L->grad : L->param);
    if (buf == NULL) {
        fprintf(stderr, "cannot read layer %d back\n", l);
        return 0;
    }
    for (size_t i = 0; i < sizes[l]; i++) {
        double sum = 0;
        for (int r = 0; r < world; r++) {
            sum += value(r, l, step, i);
        }
        int ok;
        if (L->dtype == DD_DTYPE_F32) {
            float want = (float)sum / (float)world;
            ok = memcmp(&want, (const float *)buf + i, 4) == 0;
        } else {
            double want = sum / world;
            ok = memcmp(&want, (const double *)buf + i, 8) == 0;
        }
        if (!ok) {
            if (!quiet) {
                fprintf(stderr, "layer %d element %zu is not the average\n", l,
                        i);
            }
            return 0;
        }
    }
    return 1;
}

/* The divergence the monitor must report for this worker's values of
 * layer l at step's sync: from the same averages as is_average's. */
static double divergence(const layer_t *L, int l, long step)
{
    double d2 = 0, n2 = 0;
    for (size_t i = 0; i < sizes[l]; i++) {
        double sum = 0;
        for (int r = 0; r < world; r++) {
            sum += value(r, l, step, i);
        }
        double avg = L->dtype == DD_DTYPE_F32
                         ? (double)((float)sum / (float)world)
                         : sum / world;
        double mine = L->dtype == DD_DTYPE_F32
                          ? (double)(float)value(rank, l, step, i)
                          : value(rank, l, step, i);
        d2 += (mine - avg) * (mine - avg);
        n2 += avg * avg;
    }
    return n2 > 0 ? sqrt(d2) / sqrt(n2) : sqrt(d2);
}

static int setup(dd_context_h ctx, layer_t *L)
{
    char name[16];
    for (int l = 0; l < n_layers; l++) {
        L[l].dtype = l == 2 ? DD_DTYPE_F64 : DD_DTYPE_F32;
        L[l].es = L[l].dtype == DD_DTYPE_F64 ? 8 : 4;
        L[l].param = alloc(l, sizes[l] * L[l].es);
        L[l].grad = alloc(l, sizes[l] * L[l].es);
        L[l].src = calloc(sizes[l], L[l].es);
        L[l].check = calloc(sizes[l], L[l].es);
        CHECK(L[l].param && L[l].grad && L[l].src && L[l].check, "no memory");
        dd_tensor_t t = {.param = L[l].param,
                         .grad = L[l].grad,
                         .count = sizes[l],
                         .dtype = L[l].dtype,
                         .mem_type = on_device[l] ? DD_MEM_CUDA : DD_MEM_HOST,
                         .device = ordinal};
        snprintf(name, sizeof(name), "%s%d", on_device[l] ? "dev" : "host", l);
        CHECK(dd_layer_register(ctx, name, &t, 1, &L[l].h) == DD_OK,
              "register: %s", dd_last_error());
    }
    return 0;
}

static int stream_sync(void);

/* dd_allreduce on device memory, through the engine: staged as well. */
static int user_allreduce(dd_context_h ctx, layer_t *L)
{
    size_t n = sizes[2];
    double *h = L->src;
    for (size_t i = 0; i < n; i++) {
        h[i] = (double)(rank + 1) * (double)(i % 13);
    }
    CHECK(ops->memcpy_async(dev, L->grad, h, n * 8, DD_DEVICE_COPY_H2D,
                            stream) == DD_OK &&
              stream_sync() == 0,
          "H2D");
    CHECK(dd_allreduce(ctx, L->grad, L->grad, n, DD_DTYPE_F64, DD_REDUCE_SUM,
                       DD_MEM_CUDA) == DD_OK,
          "dd_allreduce of device memory: %s", dd_last_error());
    const double *got = host_view(L, 2, L->grad);
    CHECK(got != NULL, "read back");
    for (size_t i = 0; i < n; i++) {
        double want = (double)world * (world + 1) / 2 * (double)(i % 13);
        CHECK(got[i] == want,
              "dd_allreduce of device memory: element %zu is "
              "%g, expected %g",
              i, got[i], want);
    }
    return 0;
}

static int run(dd_context_h ctx, layer_t *L, const char *strategy, long steps,
               int nowait)
{
    int grads = strcmp(strategy, "ddp") == 0;
    uint64_t before[MAX_LAYERS];
    dd_layer_stats_t st = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS |
                                         DD_LAYER_STATS_FIELD_DIVERGENCE};
    double staging = 0;
    int stale = 0, measured = 0;

    CHECK(dd_strategy_set(ctx, strategy) == DD_OK, "%s", dd_last_error());
    /* Replicas start equal: the broadcast stages device layers too. */
    for (int l = 0; l < n_layers; l++) {
        if (fill(&L[l], l, rank, 0) != 0) {
            return 1;
        }
    }
    dd_device_event_t *ev;
    CHECK(ops->event_create(dev, 0, &ev) == DD_OK &&
              ops->event_record(dev, ev, stream) == DD_OK &&
              ops->event_synchronize(dev, ev) == DD_OK,
          "sync");
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    for (int l = 0; l < n_layers; l++) {
        float first;
        const void *p = host_view(&L[l], l, L[l].param);
        CHECK(p != NULL, "read back");
        memcpy(&first, p, sizeof(first));
        CHECK(L[l].dtype != DD_DTYPE_F32 || first == (float)value(0, l, 0, 0),
              "layer %d does not start with rank 0's parameters", l);
    }
    /* Layer 2 is the f64 buffer it uses; big runs have one layer. */
    if (!nowait && n_layers > 2 && user_allreduce(ctx, &L[2]) != 0) {
        return 1;
    }
    for (long s = 0; s < steps; s++) {
        CHECK(dd_step_begin(ctx) == DD_OK, "begin: %s", dd_last_error());
        const char *die = getenv("MP_DEVICE_DIE_RANK");
        for (int l = n_layers - 1; l >= 0; l--) {
            if (die != NULL && atoi(die) == rank && s == 2 && l == 2) {
                fprintf(stderr, "mp_device: rank %d stops at step 2\n", rank);
                if (getenv("MP_DEVICE_STALL_S") != NULL) {
                    sleep((unsigned)atoi(getenv("MP_DEVICE_STALL_S")));
                }
                _exit(3);
            }
            if (fill(&L[l], l, s, grads) != 0) {
                return 1;
            }
            dd_layer_stats(ctx, L[l].h, &st);
            before[l] = st.syncs;
            dd_status_t r = on_device[l] && !nowait
                                ? dd_layer_ready_stream(ctx, L[l].h, stream)
                                : dd_layer_ready(ctx, L[l].h);
            CHECK(r == DD_OK, "ready: %s", dd_last_error());
        }
        dd_step_stats_t ss = {.field_mask = DD_STEP_STATS_FIELD_LAYERS_SYNCED |
                                            DD_STEP_STATS_FIELD_STAGING_S};
        CHECK(dd_step_end(ctx, &ss) == DD_OK, "end: %s", dd_last_error());
        staging += ss.staging_s;
        /* The application's own copies are over before it reads. */
        CHECK(ops->event_record(dev, ev, stream) == DD_OK &&
                  ops->event_synchronize(dev, ev) == DD_OK,
              "sync");
        for (int l = 0; l < n_layers; l++) {
            dd_layer_stats(ctx, L[l].h, &st);
            if (st.syncs == before[l]) {
                continue;
            }
            if (nowait) {
                stale += on_device[l] && !is_average(&L[l], l, s, grads, 1);
            } else {
                CHECK(is_average(&L[l], l, s, grads, 0),
                      "%s step %ld layer %d is not the average", strategy, s,
                      l);
                /* The monitor measured it, staged or not (ddp: 0). */
                double want = grads ? 0 : divergence(&L[l], l, s);
                CHECK(fabs(st.divergence - want) <= 1e-9 * want,
                      "%s step %ld layer %d: divergence %.17g, not %.17g",
                      strategy, s, l, st.divergence, want);
                measured += on_device[l] && want > 0;
            }
        }
    }
    ops->event_destroy(dev, ev);
    if (nowait) {
        CHECK(stale > 0, "no stale data seen without the readiness event");
        if (rank == 0) {
            printf("mp_device: without the readiness event, stale data "
                   "shows\n");
        }
        return 0;
    }
    CHECK(staging > 0, "no staging time counted (%g s)", staging);
    CHECK(grads || rank != 0 || measured > 0,
          "%s: no device layer's divergence was measured", strategy);
    for (int l = 0; l < n_layers; l++) {
        if (fill(&L[l], l, 99, 0) != 0) {
            return 1;
        }
    }
    dd_device_event_t *e2;
    CHECK(ops->event_create(dev, 0, &e2) == DD_OK &&
              ops->event_record(dev, e2, stream) == DD_OK &&
              ops->event_synchronize(dev, e2) == DD_OK,
          "sync");
    ops->event_destroy(dev, e2);
    CHECK(dd_sync_all(ctx) == DD_OK, "sync_all: %s", dd_last_error());
    for (int l = 0; l < n_layers; l++) {
        CHECK(is_average(&L[l], l, 99, 0, 0), "sync_all: layer %d", l);
    }
    if (rank == 0) {
        printf("mp_device: %s: %ld steps bit-exact on %d workers\n", strategy,
               steps, world);
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int stream_sync(void)
{
    static dd_device_event_t *ev;
    CHECK((ev != NULL || ops->event_create(dev, 0, &ev) == DD_OK) &&
              ops->event_record(dev, ev, stream) == DD_OK &&
              ops->event_synchronize(dev, ev) == DD_OK,
          "stream sync");
    return 0;
}

/* One worker: the step of one device layer (staged to pinned chunks and
 * back, a one-rank allreduce between) against a plain pinned copy of the
 * same bytes there and back. */
static int bandwidth(dd_context_h ctx, layer_t *L)
{
    size_t bytes = sizes[0] * L[0].es;
    double best = 1e9, plain = 1e9, staging = 0;
    void *pinned;

    CHECK(world == 1, "bandwidth runs on one worker");
    CHECK(dd_strategy_set(ctx, "ddp") == DD_OK, "%s", dd_last_error());
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    for (long s = 0; s < 4; s++) {
        CHECK(fill(&L[0], 0, s, 1) == 0 && stream_sync() == 0, "fill");
        CHECK(dd_step_begin(ctx) == DD_OK, "begin: %s", dd_last_error());
        double t0 = now_s();
        CHECK(dd_layer_ready_stream(ctx, L[0].h, stream) == DD_OK, "ready: %s",
              dd_last_error());
        dd_step_stats_t ss = {.field_mask = DD_STEP_STATS_FIELD_STAGING_S};
        CHECK(dd_step_end(ctx, &ss) == DD_OK, "end: %s", dd_last_error());
        double t = now_s() - t0;
        if (t < best) {
            best = t;
            staging = ss.staging_s;
        }
        CHECK(is_average(&L[0], 0, s, 1, 0), "step %ld is not exact", s);
    }
    CHECK(ops->host_alloc(dev, bytes, &pinned) == DD_OK, "pinned");
    for (int k = 0; k < 4; k++) {
        double t0 = now_s();
        CHECK(ops->memcpy_async(dev, pinned, L[0].grad, bytes,
                                DD_DEVICE_COPY_D2H, stream) == DD_OK &&
                  ops->memcpy_async(dev, L[0].grad, pinned, bytes,
                                    DD_DEVICE_COPY_H2D, stream) == DD_OK &&
                  stream_sync() == 0,
              "plain copy");
        double t = now_s() - t0;
        plain = t < plain ? t : plain;
    }
    ops->host_free(dev, pinned);
    double ratio = plain / best;
    printf("mp_device: bandwidth: %zu MB there and back: staged step %.2f "
           "GB/s (%.1f ms, %.1f ms of it unoverlapped copying), plain "
           "pinned copy %.2f GB/s: %.2fx %s\n",
           bytes >> 20, 2.0 * (double)bytes / best / 1e9, best * 1e3,
           staging * 1e3, 2.0 * (double)bytes / plain / 1e9, ratio,
           ratio >= 0.8 ? "(>= 0.8x: ok)" : "(below 0.8x)");
    return ratio >= 0.8 ? 0 : 1;
}

/* Bits of small integers (< 256, exact in every dtype). */
static void put_int(void *buf, dd_dtype_t t, size_t i, unsigned v)
{
    uint16_t h = 0;
    float f = (float)v;
    uint32_t fb;

    memcpy(&fb, &f, 4);
    if (t == DD_DTYPE_F16 && v != 0) {
        int e = 31 - __builtin_clz(v);
        h = (uint16_t)(((e + 15) << 10) | ((v << (10 - e)) & 0x3ff));
    }
    switch (t) {
    case DD_DTYPE_F32:
        ((float *)buf)[i] = f;
        break;
    case DD_DTYPE_F64:
        ((double *)buf)[i] = v;
        break;
    case DD_DTYPE_F16:
        ((uint16_t *)buf)[i] = h;
        break;
    case DD_DTYPE_BF16:
        ((uint16_t *)buf)[i] = (uint16_t)(fb >> 16);
        break;
    case DD_DTYPE_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case DD_DTYPE_I64:
        ((int64_t *)buf)[i] = v;
        break;
    default:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    }
}

/* reduce_async of a and b (the device copies), into back; 0 on success. */
static int sum_once(void *da, const void *db, void *back, size_t n,
                    size_t bytes, dd_dtype_t t)
{
    CHECK(ops->reduce_async(dev, da, db, n, t, stream) == DD_OK,
          "reduce_async of dtype %d: %s", (int)t, dd_last_error());
    CHECK(ops->memcpy_async(dev, back, da, bytes, DD_DEVICE_COPY_D2H, stream) ==
              DD_OK,
          "copy back");
    return stream_sync();
}

/* The device sum of every dtype, element by element, then its speed. */
static int device_sum(void)
{
    static const size_t es[DD_DTYPE_LAST] = {4, 8, 2, 2, 4, 8, 1};
    size_t n = ((size_t)1 << 20) + 3;
    void *a, *b, *back, *da, *db;

    CHECK(ops->host_alloc(dev, n * 8, &a) == DD_OK &&
              ops->host_alloc(dev, n * 8, &b) == DD_OK &&
              ops->host_alloc(dev, n * 8, &back) == DD_OK,
          "pinned");
    CHECK(ops->mem_alloc(dev, ordinal, (size_t)100 << 20, &da) == DD_OK &&
              ops->mem_alloc(dev, ordinal, (size_t)100 << 20, &db) == DD_OK,
          "device buffers");
    for (int t = 0; t < DD_DTYPE_LAST; t++) {
        size_t bytes = n * es[t];
        for (size_t i = 0; i < n; i++) {
            put_int(a, (dd_dtype_t)t, i, (unsigned)(i % 100));
            put_int(b, (dd_dtype_t)t, i, (unsigned)(i % 37));
            put_int(back, (dd_dtype_t)t, i, (unsigned)(i % 100 + i % 37));
        }
        CHECK(ops->memcpy_async(dev, da, a, bytes, DD_DEVICE_COPY_H2D,
                                stream) == DD_OK &&
                  ops->memcpy_async(dev, db, b, bytes, DD_DEVICE_COPY_H2D,
                                    stream) == DD_OK &&
                  stream_sync() == 0,
              "copies");
        memcpy(a, back, bytes); /* a: the expected sums */
        memset(back, 0xee, bytes);
        if (sum_once(da, db, back, n, bytes, (dd_dtype_t)t) != 0) {
            return 1;
        }
        for (size_t i = 0; i < n; i++) {
            CHECK(memcmp((char *)back + i * es[t], (char *)a + i * es[t],
                         es[t]) == 0,
                  "dtype %d element %zu is not the sum", t, i);
        }
    }
    size_t big = ((size_t)100 << 20) / 4;
    double best = 1e9;
    for (int k = 0; k < 4; k++) {
        double t0 = now_s();
        CHECK(ops->reduce_async(dev, da, db, big, DD_DTYPE_F32, stream) ==
                      DD_OK &&
                  stream_sync() == 0,
              "100 MiB sum: %s", dd_last_error());
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    printf("mp_device: sum: every dtype exact; 100 MiB f32 summed on the "
           "device in %.2f ms (%.1f GB/s read and written)\n",
           best * 1e3, 3.0 * (double)(big * 4) / best / 1e9);
    ops->mem_free(dev, da);
    ops->mem_free(dev, db);
    ops->host_free(dev, a);
    ops->host_free(dev, b);
    ops->host_free(dev, back);
    return 0;
}

/* DREAMDDP_DEVICE=none: a device layer is refused, by name. */
static int nomodule(dd_context_h ctx)
{
    float x = 0;
    dd_tensor_t t = {.param = &x,
                     .count = 1,
                     .dtype = DD_DTYPE_F32,
                     .mem_type = DD_MEM_CUDA};
    dd_status_t s = dd_layer_register(ctx, "conv1.weight", &t, 1, NULL);
    CHECK(s == DD_ERR_UNSUPPORTED, "a CUDA layer without a device module: %s",
          dd_status_string(s));
    CHECK(strstr(dd_last_error(), "layer 'conv1.weight'") != NULL,
          "message: %s", dd_last_error());
    printf("mp_device: rank %d: %s\n", rank, dd_last_error());
    return 0;
}

int main(int argc, char **argv)
{
    dd_context_h ctx;
    layer_t L[MAX_LAYERS];

    const char *per_host = getenv("MP_DEVICE_RANKS_PER_HOST");
    const char *my_rank = getenv("DREAMDDP_RANK");
    if (per_host != NULL && my_rank != NULL && atoi(per_host) > 0) {
        char id[32];
        snprintf(id, sizeof(id), "host%d", atoi(my_rank) / atoi(per_host));
        setenv("DREAMDDP_HOST_ID", id, 1);
    }
    const char *route0 = getenv("MP_DEVICE_RANK0_ROUTE");
    if (route0 != NULL && my_rank != NULL && atoi(my_rank) == 0) {
        setenv("DREAMDDP_ROUTE", route0, 1);
    }
    if (getenv("MP_DEVICE_ALL_ON_DEVICE") != NULL) {
        for (int l = 0; l < MAX_LAYERS; l++) {
            on_device[l] = 1;
        }
    }
    if (mp_start(argc >= 2, &ctx) != 0) {
        return 2;
    }
    rank = dd_rank(ctx);
    world = dd_num_workers(ctx);
    int rc;
    if (strcmp(argv[1], "nomodule") == 0) {
        rc = nomodule(ctx);
        return (dd_finalize(ctx) != DD_OK) | rc;
    }
    if (strcmp(argv[1], "sum") == 0) {
        rc = open_device();
        rc = rc == 0 ? device_sum() : rc;
        ops->stream_destroy(dev, stream);
        return (dd_finalize(ctx) != DD_OK) | rc;
    }
    int big = strcmp(argv[1], "big") == 0;
    int bw = strcmp(argv[1], "bandwidth") == 0;
    if (big || bw) { /* one device layer of 100 MiB */
        n_layers = 1;
        sizes[0] = (size_t)100 << 18;
        on_device[0] = 1;
    }
    rc = open_device();
    if (rc == 0) {
        rc = setup(ctx, L);
    }
    if (rc == 0 && bw) {
        rc = bandwidth(ctx, L);
    } else if (rc == 0) {
        int nowait = strcmp(argv[1], "nowait") == 0;
        rc = run(ctx, L, nowait || big ? "ddp" : argv[1],
                 argc > 2 ? atol(argv[2]) : 8, nowait);
    }
    dd_status_t fin = dd_finalize(ctx);
    if (scratch != NULL) {
        ops->mem_free(dev, scratch);
    }
    for (int l = 0; l < n_layers && rc == 0; l++) {
        if (on_device[l]) {
            ops->mem_free(dev, L[l].param);
            ops->mem_free(dev, L[l].grad);
        } else {
            free(L[l].param);
            free(L[l].grad);
        }
        free(L[l].src);
        free(L[l].check);
    }
    return rc != 0 ? rc : fin != DD_OK;
}
