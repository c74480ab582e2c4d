/*
 * Run under ddrun by test_delay_mp.sh: delayed averaging ("+next"). Every
 * rank registers the same layers (f32 and f64, one large enough for a
 * codec), takes a local optimizer step after every dd_step_end (x -= g,
 * g depending on the rank), and simulates every rank's replica alongside:
 * a layer's sync launched in step s lands at its deadline in step s + 1
 * as average(x at launch) + (x now - x at launch). Values are dyadic and
 * small, so every sum is exact in any order and the replica must equal
 * the simulation bit for bit after every step; after dd_sync_all the
 * replicas are bit-identical.
 *
 *   mp_delay STRATEGY STEPS marks|nomarks
 *       marks: dd_layer_forward before each layer's forward, in forward
 *       order; nomarks: the next dd_layer_ready is the deadline.
 *   MP_DELAY_SLOW=SECONDS: rank 1 sleeps before marking layer 0 in step
 *       0 (MP_DELAY_SLOW_AT=backward, the default) or before dd_step_begin
 *       of step 0 (begin). rank 0's dd_step_end must return at once; its
 *       deadlines in step 1 must wait for the late sync where
 *       the sleep delayed the launch (before the step, or in backward under
 *       DREAMDDP_NEXT_LAUNCH=backward), and must not wait where the sync
 *       left at dd_step_begin, before the slow backward (early).
 *   MP_DELAY_I32=1: one more layer, of int32, which dd_model_commit must
 *       refuse under a +next strategy, naming it.
 *
 * Under DREAMDDP_LAYER_SPLIT a layer may sync in parts (dd_layer_part),
 * each in a step of its own: the simulation lands each part's span when
 * that part's sync counts, and rank 0 prints how each layer was cut.
 *
 *   MP_DELAY_DEVICE=stream (with DREAMDDP_DEVICE=fake, or cuda on a GPU):
 *       layers 1 and 2 live in the device's memory. Their backward is a long
 *       "kernel" on the application's stream, they are marked with
 *       dd_layer_ready_stream and dd_layer_forward_stream (after a long
 *       "forward" there too), and their optimizer step is queued on that
 *       stream (x += -g, the module's reduce_async) without waiting: the
 *       library's copy at the launch must come after its sum at the
 *       landing, and its job must wait for that copy.
 *       The replica is read back (D2H) after the optimizer's step.
 *   MP_DELAY_DEVICE=plain: the same layers marked with plain dd_layer_ready
 *       and dd_layer_forward, the application's stream waited for before
 *       each mark (final when marked, as dd_layer_ready asks).
 */
#include <dreamddp.h>
#include <dreamddp/device.h>
#include <dreamddp/introspect.h>

#include "device_app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N_LAYERS 4
#define MAX_WORLD 8
#define MAX_PARTS 16
static const size_t sizes[N_LAYERS] = {3, 70000, 4099, 33};
static int rank, world;
#define MP_NAME "mp_delay"
#include "mp.h"
/* MP_DELAY_DEVICE: 0 host only, 1 stream, 2 plain. */
static int device_mode;
static const dd_device_ops_t *ops;
static dd_device_t *dev;
static void *stream;
static dd_device_event_t *ev;
static void *scratch; /* the target of the long "kernel" */

typedef struct {
    void *param;
    dd_dtype_t dtype;
    dd_layer_h h;
    /* Its parts after the commit: handle, first element, elements. */
    size_t n_parts;
    dd_layer_h part[MAX_PARTS];
    size_t off[MAX_PARTS], cnt[MAX_PARTS];
    /* The simulation: every rank's replica and its values at the last
     * launch. */
    double *x[MAX_WORLD], *snap[MAX_WORLD];
    /* MP_DELAY_DEVICE: the parameters on the device (param is then the
     * host's view, pinned), and the optimizer's -g on the host and on the
     * device. */
    void *dev_param, *ng_host, *ng_dev;
} layer_t;

static int on_device(int l)
{
    return device_mode != 0 && (l == 1 || l == 2);
}

/* The application's own handle on the device (device_app.h). */
static int open_device(void)
{
    char why[512];

    ops = device_app_open("mp_delay", &dev, why, sizeof(why));
    CHECK(ops != NULL, "%s", why);
    CHECK(ops->stream_create(dev, 0, &stream) == DD_OK &&
              ops->event_create(dev, 0, &ev) == DD_OK &&
              ops->mem_alloc(dev, 0, 1, &scratch) == DD_OK,
          "device: stream, event, memory");
    return 0;
}

/* Waits for the application's stream. */
static int dev_wait(void)
{
    CHECK(ops->event_record(dev, ev, stream) == DD_OK &&
              ops->event_synchronize(dev, ev) == DD_OK,
          "fake device: waiting for the stream");
    return 0;
}

/* Copies a device layer between its device memory and the host's view
 * (D2H: to the host), on the application's stream, and waits. */
static int dev_copy(layer_t *L, int l, dd_device_copy_t kind)
{
    size_t bytes = sizes[l] * (L->dtype == DD_DTYPE_F64 ? 8 : 4);
    void *dst = kind == DD_DEVICE_COPY_D2H ? L->param : L->dev_param;
    void *src = kind == DD_DEVICE_COPY_D2H ? L->dev_param : L->param;
    CHECK(ops->memcpy_async(dev, dst, src, bytes, kind, stream) == DD_OK,
          "fake device: copy");
    return dev_wait();
}

/* A device layer's "backward": work on the stream that ends some 30 ms
 * after the layer is marked, long after a copy that did not wait for the
 * stream would have read the parameters. */
static int dev_backward(void)
{
    static char scratch_host;
    for (int k = 0; k < 100; k++) {
        CHECK(ops->memcpy_async(dev, scratch, &scratch_host, 1,
                                DD_DEVICE_COPY_H2D, stream) == DD_OK,
              "fake device: H2D");
    }
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double init_value(int r, int l, size_t i)
{
    return (double)(r * 8 + l * 3 + (int)(i % 7)) / 4;
}

/* The local optimizer step of rank r after step s. */
static double grad(int r, long s, int l, size_t i)
{
    return (double)((r + 1) * (int)((i + (size_t)l + (size_t)s) % 3 + 1)) / 8;
}

static double get(const layer_t *L, size_t i)
{
    return L->dtype == DD_DTYPE_F32 ? ((float *)L->param)[i]
                                    : ((double *)L->param)[i];
}

static void put(layer_t *L, size_t i, double v)
{
    if (L->dtype == DD_DTYPE_F32) {
        ((float *)L->param)[i] = (float)v;
    } else {
        ((double *)L->param)[i] = v;
    }
}

static int setup(dd_context_h ctx, layer_t *L)
{
    char name[16];
    for (int l = 0; l < N_LAYERS; l++) {
        L[l].dtype = l == 2 ? DD_DTYPE_F64 : DD_DTYPE_F32;
        size_t bytes = sizes[l] * (L[l].dtype == DD_DTYPE_F64 ? 8 : 4);
        L[l].dev_param = L[l].ng_host = L[l].ng_dev = NULL;
        if (on_device(l)) {
            CHECK(ops->host_alloc(dev, bytes, &L[l].param) == DD_OK &&
                      ops->host_alloc(dev, bytes, &L[l].ng_host) == DD_OK &&
                      ops->mem_alloc(dev, 0, bytes, &L[l].dev_param) == DD_OK &&
                      ops->mem_alloc(dev, 0, bytes, &L[l].ng_dev) == DD_OK,
                  "fake device: memory for layer %d", l);
        } else {
            L[l].param = calloc(sizes[l], L[l].dtype == DD_DTYPE_F64 ? 8 : 4);
        }
        for (size_t i = 0; i < sizes[l]; i++) {
            put(&L[l], i, init_value(rank, l, i));
        }
        if (on_device(l) && dev_copy(&L[l], l, DD_DEVICE_COPY_H2D) != 0) {
            return 1;
        }
        for (int q = 0; q < world; q++) {
            L[l].x[q] = malloc(sizes[l] * sizeof(double));
            L[l].snap[q] = malloc(sizes[l] * sizeof(double));
            for (size_t i = 0; i < sizes[l]; i++) {
                L[l].x[q][i] = init_value(0, l, i); /* rank 0's, at commit */
            }
        }
        /* Gradients are not read by the parameter strategies. */
        dd_tensor_t t = {.param = L[l].param,
                         .count = sizes[l],
                         .dtype = L[l].dtype,
                         .mem_type = DD_MEM_HOST};
        if (on_device(l)) {
            t.param = L[l].dev_param;
            t.mem_type = DD_MEM_CUDA;
        }
        snprintf(name, sizeof(name), "layer%d", l);
        CHECK(dd_layer_register(ctx, name, &t, 1, &L[l].h) == DD_OK,
              "register: %s", dd_last_error());
    }
    if (getenv("MP_DELAY_I32") != NULL) {
        static int32_t counts[5];
        dd_tensor_t t = {.param = counts,
                         .count = 5,
                         .dtype = DD_DTYPE_I32,
                         .mem_type = DD_MEM_HOST};
        CHECK(dd_layer_register(ctx, "counts", &t, 1, NULL) == DD_OK,
              "register: %s", dd_last_error());
    }
    return 0;
}

/* The simulation of a landing of elements [off, off + cnt) on every
 * rank. */
static void sim_land(layer_t *L, size_t off, size_t cnt)
{
    for (size_t i = off; i < off + cnt; i++) {
        double avg = 0;
        for (int q = 0; q < world; q++) {
            avg += L->snap[q][i];
        }
        avg /= world;
        for (int q = 0; q < world; q++) {
            L->x[q][i] = avg + (L->x[q][i] - L->snap[q][i]);
        }
    }
}

static void sim_average(layer_t *L, int l)
{
    for (size_t i = 0; i < sizes[l]; i++) {
        double avg = 0;
        for (int q = 0; q < world; q++) {
            avg += L->x[q][i];
        }
        for (int q = 0; q < world; q++) {
            L->x[q][i] = avg / world;
        }
    }
}

static int matches(const layer_t *L, int l, const char *when, long s)
{
    for (size_t i = 0; i < sizes[l]; i++) {
        CHECK(get(L, i) == L->x[rank][i],
              "%s %ld: layer %d element %zu is %.17g, the reference "
              "average(x at launch) + (x now - x at launch) is %.17g",
              when, s, l, i, get(L, i), L->x[rank][i]);
    }
    return 0;
}

static uint64_t syncs_of(dd_context_h ctx, dd_layer_h h)
{
    dd_layer_stats_t st = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS};
    dd_layer_stats(ctx, h, &st);
    return st.syncs;
}

/* The parts the commit cut each layer into; they must tile it. */
static int parts(dd_context_h ctx, layer_t *L)
{
    for (int l = 0; l < N_LAYERS; l++) {
        size_t next = 0;
        L[l].n_parts = 0;
        size_t n = dd_layer_num_parts(ctx, L[l].h);
        CHECK(n >= 1 && n <= MAX_PARTS, "layer %d has %zu parts", l, n);
        for (size_t j = 0; j < n; j++) {
            CHECK(dd_layer_part(ctx, L[l].h, j, &L[l].part[j], &L[l].off[j],
                                &L[l].cnt[j]) == DD_OK,
                  "dd_layer_part %zu of %zu: %s", j, n, dd_last_error());
            L[l].n_parts = j + 1;
            CHECK(L[l].off[j] == next && L[l].cnt[j] > 0,
                  "layer %d part %zu spans %zu..%zu, expected from %zu", l, j,
                  L[l].off[j], L[l].off[j] + L[l].cnt[j], next);
            next += L[l].cnt[j];
        }
        CHECK(next == sizes[l], "layer %d's %zu parts cover %zu of %zu", l,
              L[l].n_parts, next, sizes[l]);
        if (rank == 0 && L[l].n_parts > 1) {
            printf("mp_delay: layer%d in %zu parts, %s first\n", l,
                   L[l].n_parts, dd_layer_name(L[l].part[0]));
        }
    }
    return 0;
}

/* The replicas are bit-identical: each equals the maximum and the minimum
 * over the workers. */
static int identical(dd_context_h ctx, layer_t *L, int l)
{
    size_t n = sizes[l], es = L->dtype == DD_DTYPE_F64 ? 8 : 4;
    void *hi = malloc(n * es), *lo = malloc(n * es);
    CHECK(dd_allreduce(ctx, L->param, hi, n, L->dtype, DD_REDUCE_MAX,
                       DD_MEM_HOST) == DD_OK &&
              dd_allreduce(ctx, L->param, lo, n, L->dtype, DD_REDUCE_MIN,
                           DD_MEM_HOST) == DD_OK,
          "allreduce: %s", dd_last_error());
    int same =
        memcmp(hi, L->param, n * es) == 0 && memcmp(lo, L->param, n * es) == 0;
    free(hi);
    free(lo);
    CHECK(same, "after dd_sync_all layer %d differs across the replicas", l);
    return 0;
}

/* A device layer's optimizer step, queued on the application's stream
 * behind the library's copy of the launch (x += -g, on the device), and
 * in the simulation; then the replica, read back, against it. */
static int device_step(layer_t *L, int l, long s)
{
    size_t bytes = sizes[l] * (L->dtype == DD_DTYPE_F64 ? 8 : 4);
    for (size_t i = 0; i < sizes[l]; i++) {
        double g = grad(rank, s, l, i);
        if (L->dtype == DD_DTYPE_F32) {
            ((float *)L->ng_host)[i] = (float)-g;
        } else {
            ((double *)L->ng_host)[i] = -g;
        }
        for (int q = 0; q < world; q++) {
            L->x[q][i] -= grad(q, s, l, i);
        }
    }
    CHECK(ops->memcpy_async(dev, L->ng_dev, L->ng_host, bytes,
                            DD_DEVICE_COPY_H2D, stream) == DD_OK &&
              ops->reduce_async(dev, L->dev_param, L->ng_dev, sizes[l],
                                L->dtype, stream) == DD_OK,
          "fake device: the optimizer's step");
    if (dev_copy(L, l, DD_DEVICE_COPY_D2H) != 0) {
        return 1;
    }
    return matches(L, l, "after the optimizer, step", s);
}

/* Rank 0 under MP_DELAY_SLOW: how long the step's end took, and step 1's
 * deadlines together. */
static double slow_s, end0_s, deadline1_s;
static int slow_at_begin;

static int step(dd_context_h ctx, layer_t *L, long s, int marks)
{
    uint64_t before[N_LAYERS][MAX_PARTS];
    for (int l = 0; l < N_LAYERS; l++) {
        for (size_t j = 0; j < L[l].n_parts; j++) {
            before[l][j] = syncs_of(ctx, L[l].part[j]);
        }
    }
    if (slow_s > 0 && slow_at_begin && s == 0 && rank == 1) {
        usleep((useconds_t)(slow_s * 1e6));
    }
    CHECK(dd_step_begin(ctx) == DD_OK, "begin: %s", dd_last_error());
    if (device_mode == 2 && dev_wait() != 0) {
        return 1;
    }
    for (int l = 0; marks && l < N_LAYERS; l++) {
        /* The forward before a device layer's: the stream lags, so that a
         * landing queued there comes late, and a copy at the launch that
         * does not follow the stream reads the parameters before it. */
        if (on_device(l) && device_mode == 1 && dev_backward() != 0) {
            return 1;
        }
        double t0 = now();
        CHECK((on_device(l) && device_mode == 1
                   ? dd_layer_forward_stream(ctx, L[l].h, stream)
                   : dd_layer_forward(ctx, L[l].h)) == DD_OK,
              "forward: %s", dd_last_error());
        if (s == 1) {
            deadline1_s += now() - t0;
        }
    }
    for (int l = N_LAYERS - 1; l >= 0; l--) {
        if (slow_s > 0 && !slow_at_begin && s == 0 && l == 0 && rank == 1) {
            usleep((useconds_t)(slow_s * 1e6));
        }
        if (on_device(l) &&
            (dev_backward() != 0 || (device_mode == 2 && dev_wait() != 0))) {
            return 1;
        }
        double t0 = now();
        CHECK((on_device(l) && device_mode == 1
                   ? dd_layer_ready_stream(ctx, L[l].h, stream)
                   : dd_layer_ready(ctx, L[l].h)) == DD_OK,
              "ready: %s", dd_last_error());
        if (!marks && s == 1) {
            deadline1_s += now() - t0;
        }
    }
    double t0 = now();
    CHECK(dd_step_end(ctx, NULL) == DD_OK, "end: %s", dd_last_error());
    if (s == 0) {
        end0_s = now() - t0;
    }
    for (int l = 0; l < N_LAYERS; l++) {
        /* A part counts its sync once it landed: in this step, at its
         * deadline, from the launch in the step before. */
        for (size_t j = 0; j < L[l].n_parts; j++) {
            if (syncs_of(ctx, L[l].part[j]) > before[l][j]) {
                CHECK(s > 0, "layer %d part %zu landed in step 0", l, j);
                sim_land(&L[l], L[l].off[j], L[l].cnt[j]);
            }
        }
        for (int q = 0; q < world; q++) {
            memcpy(L[l].snap[q], L[l].x[q], sizes[l] * sizeof(double));
        }
        if (on_device(l)) {
            if (device_step(&L[l], l, s) != 0) {
                return 1;
            }
            continue;
        }
        if (matches(&L[l], l, "step", s) != 0) {
            return 1;
        }
        /* The optimizer, here and in the simulation. */
        for (size_t i = 0; i < sizes[l]; i++) {
            put(&L[l], i, get(&L[l], i) - grad(rank, s, l, i));
            for (int q = 0; q < world; q++) {
                L[l].x[q][i] -= grad(q, s, l, i);
            }
        }
    }
    return 0;
}

static int run(dd_context_h ctx, layer_t *L, const char *strategy, long steps,
               int marks)
{
    CHECK(dd_strategy_set(ctx, strategy) == DD_OK, "%s", dd_last_error());
    if (getenv("MP_DELAY_I32") != NULL) {
        dd_status_t s = dd_model_commit(ctx);
        CHECK(s == DD_ERR_UNSUPPORTED, "commit of an int32 layer: %s",
              dd_status_string(s));
        printf("mp_delay: commit refused: %s\n", dd_last_error());
        return 0;
    }
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    if (parts(ctx, L) != 0) {
        return 1;
    }
    for (long s = 0; s < steps; s++) {
        if (step(ctx, L, s, marks) != 0) {
            return 1;
        }
    }
    uint64_t before[N_LAYERS][MAX_PARTS];
    for (int l = 0; l < N_LAYERS; l++) {
        for (size_t j = 0; j < L[l].n_parts; j++) {
            before[l][j] = syncs_of(ctx, L[l].part[j]);
        }
    }
    CHECK(dd_sync_all(ctx) == DD_OK, "sync_all: %s", dd_last_error());
    for (int l = 0; l < N_LAYERS; l++) {
        for (size_t j = 0; j < L[l].n_parts; j++) {
            uint64_t n = syncs_of(ctx, L[l].part[j]) - before[l][j];
            CHECK(n == 1 || n == 2,
                  "sync_all: layer %d part %zu counted %llu syncs", l, j,
                  (unsigned long long)n);
            if (n == 2) { /* the last step's, landed by dd_sync_all */
                sim_land(&L[l], L[l].off[j], L[l].cnt[j]);
            }
        }
        sim_average(&L[l], l);
        if (on_device(l) && dev_copy(&L[l], l, DD_DEVICE_COPY_D2H) != 0) {
            return 1;
        }
        if (matches(&L[l], l, "sync_all after step", steps) != 0 ||
            identical(ctx, &L[l], l) != 0) {
            return 1;
        }
    }
    if (slow_s > 0 && rank == 0) {
        const char *launch = getenv("DREAMDDP_NEXT_LAUNCH");
        int late = slow_at_begin ||
                   (launch != NULL && strcmp(launch, "backward") == 0);
        CHECK(end0_s < slow_s / 2,
              "dd_step_end of step 0 took %.2f s: it waited for the "
              "delayed sync of rank 1's late layer",
              end0_s);
        CHECK(!late || deadline1_s > slow_s / 2,
              "the deadlines of step 1 took %.2f s, but rank 1 launched its "
              "sync of layer 0 %.2f s late: they did not wait",
              deadline1_s, slow_s);
        CHECK(late || deadline1_s < slow_s / 2,
              "the deadlines of step 1 took %.2f s: rank 1's syncs should "
              "have left at dd_step_begin, before its backward slept %.2f s",
              deadline1_s, slow_s);
        printf("mp_delay: step end %.3f s, deadline waited %.3f s\n", end0_s,
               deadline1_s);
    }
    if (rank == 0) {
        printf("mp_delay: %s %s: %ld steps equal to the reference on %d "
               "ranks, bit-identical after dd_sync_all%s\n",
               strategy, marks ? "marks" : "nomarks", steps, world,
               device_mode == 1   ? ", layers 1 and 2 on the device's stream"
               : device_mode == 2 ? ", layers 1 and 2 on the device, final "
                                    "when marked"
                                  : "");
    }
    return 0;
}

int main(int argc, char **argv)
{
    dd_context_h ctx;
    layer_t L[N_LAYERS];

    if (mp_start(argc >= 4, &ctx) != 0) {
        return 2;
    }
    rank = dd_rank(ctx);
    world = dd_num_workers(ctx);
    if (world > MAX_WORLD) {
        fprintf(stderr, "mp_delay: at most %d workers\n", MAX_WORLD);
        return 2;
    }
    if (getenv("MP_DELAY_SLOW") != NULL) {
        slow_s = atof(getenv("MP_DELAY_SLOW"));
        const char *at = getenv("MP_DELAY_SLOW_AT");
        slow_at_begin = at != NULL && strcmp(at, "begin") == 0;
    }
    const char *dm = getenv("MP_DELAY_DEVICE");
    if (dm != NULL) {
        device_mode = strcmp(dm, "plain") == 0 ? 2 : 1;
        if (open_device() != 0) {
            return 1;
        }
    }
    int rc = setup(ctx, L);
    if (rc == 0) {
        rc = run(ctx, L, argv[1], atol(argv[2]), strcmp(argv[3], "marks") == 0);
    }
    dd_status_t fin = dd_finalize(ctx);
    for (int l = 0; l < N_LAYERS; l++) {
        if (on_device(l)) {
            ops->host_free(dev, L[l].param);
            ops->host_free(dev, L[l].ng_host);
            ops->mem_free(dev, L[l].dev_param);
            ops->mem_free(dev, L[l].ng_dev);
        } else {
            free(L[l].param);
        }
        for (int q = 0; q < world; q++) {
            free(L[l].x[q]);
            free(L[l].snap[q]);
        }
    }
    return rc != 0 ? rc : fin != DD_OK;
}
