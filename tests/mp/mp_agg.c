/*
 * Run under ddrun by test_agg_mp.sh, with aggregator ranks. Workers sync
 * one layer through the homes and compare with the reference average:
 * summed in worker order, then divided (exact for f32); f16 and bf16
 * within their rounding.
 *
 *   mp_agg check DTYPE COUNT...   sizes in elements; with MP_AGG_PAUSE_S,
 *                                 the workers pause that long between
 *                                 rounds (the homes wait, idle, meanwhile);
 *                                 with MP_AGG_FORGE_RESET=R, worker rank R
 *                                 sends every aggregator a RESET outside
 *                                 any recovery round after the first
 *                                 round, which must change no average
 *   mp_agg agg-exit               the aggregators leave before serving
 *   mp_agg huge STRATEGY          every worker's values near f32's largest
 *                                 (3e38 and a little less): the average
 *                                 must be finite and within 1e-6 of the
 *                                 exact one, as on the allreduce route
 *   mp_agg worker-exit            worker 1 leaves after commit
 *   mp_agg malformed              worker 1 sends a header with bad magic
 *   mp_agg duplicate              worker 1 replays its first push header
 *   mp_agg bad-result             worker 1, a home, sends worker 0 a
 *                                 malformed answer before its real ones:
 *                                 worker 0 alone sees it, and every worker
 *                                 must fail, naming home rank 1
 */
#include "agg/wire.h"
#include "api/context.h"
#include "core/half.h"
#include "core/time.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, workers;
static void *bufs[16]; /* the layers; they live until dd_finalize */
static int n_bufs;

static double value(int r, size_t i)
{
    return (double)((r * 7 + (int)(i % 13)) % 17) * 0.375 - 2.0;
}

static void fill(void *buf, dd_dtype_t dt, size_t n, int r)
{
    for (size_t i = 0; i < n; i++) {
        float v = (float)value(r, i);
        if (dt == DD_DTYPE_F32) {
            ((float *)buf)[i] = v;
        } else if (dt == DD_DTYPE_F16) {
            ((uint16_t *)buf)[i] = dd_half_f32_to_f16(v);
        } else {
            ((uint16_t *)buf)[i] = dd_half_f32_to_bf16(v);
        }
    }
}

static float as_float(const void *buf, dd_dtype_t dt, size_t i)
{
    if (dt == DD_DTYPE_F32) {
        return ((const float *)buf)[i];
    }
    uint16_t h = ((const uint16_t *)buf)[i];
    return dt == DD_DTYPE_F16 ? dd_half_f16_to_f32(h) : dd_half_bf16_to_f32(h);
}

static int check(const void *buf, dd_dtype_t dt, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float sum = 0;
        for (int r = 0; r < workers; r++) { /* the homes' order */
            sum += (float)value(r, i);
        }
        float want = sum / (float)workers, got = as_float(buf, dt, i);
        float tol = dt == DD_DTYPE_F32 ? 0 : dt == DD_DTYPE_F16 ? 2e-3f : 2e-2f;
        if (fabsf(got - want) > tol * (1 + fabsf(want))) {
            fprintf(stderr,
                    "mp_agg: rank %d: %s element %zu of %zu is %g, "
                    "the average is %g\n",
                    rank, dd_dtype_name(dt), i, n, got, want);
            return 1;
        }
    }
    return 0;
}

static dd_dtype_t parse_dtype(const char *s)
{
    return strcmp(s, "f16") == 0    ? DD_DTYPE_F16
           : strcmp(s, "bf16") == 0 ? DD_DTYPE_BF16
                                    : DD_DTYPE_F32;
}

/* Registers one layer per size and commits. */
static int setup(dd_context_h ctx, dd_dtype_t dt, size_t *sizes, int n)
{
    n_bufs = n;
    for (int l = 0; l < n; l++) {
        char name[32];
        bufs[l] = calloc(sizes[l] ? sizes[l] : 1, dd_dtype_size(dt));
        dd_tensor_t t = {.param = bufs[l],
                         .count = sizes[l],
                         .dtype = dt,
                         .mem_type = DD_MEM_HOST};
        snprintf(name, sizeof(name), "layer%d", l);
        if (dd_layer_register(ctx, name, &t, 1, NULL) != DD_OK) {
            return 1;
        }
    }
    if (dd_strategy_set(ctx, "localsgd:1") != DD_OK ||
        dd_model_commit(ctx) != DD_OK) {
        fprintf(stderr, "mp_agg: rank %d: %s\n", rank, dd_last_error());
        return 1;
    }
    return 0;
}

static void inject(dd_context_h ctx, const dd_agg_hdr_t *h);

/* A RESET that no recovery round recorded, numbering from far ahead: taken
 * at its word, it would abandon every chunk the workers push next. */
static void forge_reset(dd_context_h ctx)
{
    dd_agg_hdr_t h = {.magic = DD_AGG_MAGIC,
                      .version = DD_AGG_VERSION,
                      .kind = DD_AGG_RESET,
                      .token = ctx->token_hash,
                      .seq = 1ull << 30,
                      .step = 1,
                      .sender = rank};
    inject(ctx, &h);
}

static int run_check(dd_context_h ctx, dd_dtype_t dt, size_t *sizes, int n)
{
    int rc = setup(ctx, dt, sizes, n);
    const char *pause = getenv("MP_AGG_PAUSE_S");
    const char *forge = getenv("MP_AGG_FORGE_RESET");
    for (int round = 0; rc == 0 && round < 3; round++) {
        if (round > 0 && pause != NULL) {
            usleep((useconds_t)(atof(pause) * 1e6));
        }
        if (round == 1 && forge != NULL && atoi(forge) == rank) {
            forge_reset(ctx);
        }
        for (int l = 0; l < n; l++) {
            fill(bufs[l], dt, sizes[l], rank);
        }
        if (dd_sync_all(ctx) != DD_OK) {
            fprintf(stderr, "mp_agg: rank %d: %s\n", rank, dd_last_error());
            return 1;
        }
        for (int l = 0; l < n && rc == 0; l++) {
            rc = check(bufs[l], dt, sizes[l]);
        }
    }
    if (rc == 0 && rank == 0) {
        printf("mp_agg: %s averages exact on %d workers\n", dd_dtype_name(dt),
               workers);
    }
    return rc;
}

/* Worker r's value i near f32's largest: any two sum past it. */
static float huge_value(int r, size_t i)
{
    return (i % 2 ? 1.0f : -1.0f) * (3e38f - (float)r * 1e35f);
}

/* Under strategy, 4 steps of one layer whose parameters and gradients
 * are huge_value; each step that synced the layer holds the average
 * (gradients under ddp, parameters otherwise), finite. */
static int run_huge(dd_context_h ctx, const char *strategy)
{
    enum { N = 5000 };
    float *param = calloc(N, sizeof(float)), *grad = calloc(N, sizeof(float));
    dd_tensor_t t = {.param = param,
                     .grad = grad,
                     .count = N,
                     .dtype = DD_DTYPE_F32,
                     .mem_type = DD_MEM_HOST};
    dd_layer_h h;
    dd_layer_stats_t st = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS};
    int checked = 0, rc = 0;

    bufs[n_bufs++] = param;
    bufs[n_bufs++] = grad;
    if (dd_layer_register(ctx, "huge", &t, 1, &h) != DD_OK ||
        dd_strategy_set(ctx, strategy) != DD_OK ||
        dd_model_commit(ctx) != DD_OK) {
        fprintf(stderr, "mp_agg: rank %d: %s\n", rank, dd_last_error());
        return 1;
    }
    const float *out = strcmp(strategy, "ddp") == 0 ? grad : param;
    for (int step = 0; rc == 0 && step < 4; step++) {
        for (size_t i = 0; i < N; i++) {
            param[i] = grad[i] = huge_value(rank, i);
        }
        dd_layer_stats(ctx, h, &st);
        uint64_t before = st.syncs;
        if (dd_step_begin(ctx) != DD_OK || dd_layer_ready(ctx, h) != DD_OK ||
            dd_step_end(ctx, NULL) != DD_OK) {
            fprintf(stderr, "mp_agg: rank %d: %s\n", rank, dd_last_error());
            return 1;
        }
        dd_layer_stats(ctx, h, &st);
        for (size_t i = 0; st.syncs > before && rc == 0 && i < N; i++) {
            double want = 0;
            for (int r = 0; r < workers; r++) {
                want += (double)huge_value(r, i) / workers;
            }
            if (!isfinite(out[i]) || fabs(out[i] - want) > 1e-6 * fabs(want)) {
                fprintf(stderr,
                        "mp_agg: rank %d: %s: element %zu is %g, the "
                        "average is %g\n",
                        rank, strategy, i, out[i], want);
                rc = 1;
            }
        }
        checked += st.syncs > before;
    }
    if (rc == 0 && checked == 0) {
        fprintf(stderr, "mp_agg: rank %d: %s: no step synced\n", rank,
                strategy);
        rc = 1;
    }
    if (rc == 0 && rank == 0) {
        printf("mp_agg: %s: huge values average finite on %d workers (%d "
               "syncs)\n",
               strategy, workers, checked);
    }
    return rc;
}

/* Sends one raw header to every aggregator, as a broken worker would. */
static void inject(dd_context_h ctx, const dd_agg_hdr_t *h)
{
    dd_agg_transport_t t;
    if (dd_agg_transport_init(&ctx->agg_env, &t) != DD_OK) {
        return;
    }
    for (int r = 0; r < dd_world_size(ctx); r++) {
        dd_agg_req_t *req;
        if (dd_rank_role(ctx, r) == DD_ROLE_AGGREGATOR &&
            dd_agg_send(&t, r, dd_agg_tag(DD_AGG_TAG_HDR, 0), h, sizeof(*h),
                        &req) == DD_OK) {
            while (dd_agg_test(&t, req) == DD_INPROGRESS) {
                usleep(100);
            }
        }
    }
}

/* Worker 1 answers worker 0 with a malformed header on every chunk number
 * of the next syncs, ahead of any real answer: worker 0's first chunk homed
 * at worker 1 takes it. */
static void inject_bad_results(dd_context_h ctx)
{
    dd_agg_transport_t t;
    dd_agg_hdr_t h = {.magic = 0xbad, .sender = 1};
    if (dd_agg_transport_init(&ctx->agg_env, &t) != DD_OK) {
        return;
    }
    for (uint64_t seq = 0; seq < 512; seq++) {
        dd_agg_req_t *req;
        if (dd_agg_send(&t, 0, dd_agg_tag(DD_AGG_TAG_RHDR, seq), &h, sizeof(h),
                        &req) == DD_OK) {
            while (dd_agg_test(&t, req) == DD_INPROGRESS) {
                usleep(10);
            }
        }
    }
}

/* A failure mode: the sync after it must fail, naming the rank at fault,
 * and leave the buffer as it was. */
static int run_fault(dd_context_h ctx, const char *mode)
{
    size_t size = strcmp(mode, "bad-result") == 0 ? 1 << 20 : 1000;
    if (setup(ctx, DD_DTYPE_F32, &size, 1) != 0) {
        return 1;
    }
    void *buf = bufs[0];
    fill(buf, DD_DTYPE_F32, size, rank);
    if (strcmp(mode, "duplicate") == 0) {
        /* One good sync, then rank 1 replays its first header. */
        if (dd_sync_all(ctx) != DD_OK) {
            return 1;
        }
        fill(buf, DD_DTYPE_F32, size, rank);
        if (rank == 1) {
            dd_agg_hdr_t h = {.magic = DD_AGG_MAGIC,
                              .version = DD_AGG_VERSION,
                              .kind = DD_AGG_PUSH,
                              .token = ctx->token_hash,
                              .seq = 0,
                              .count = size,
                              .dtype = DD_DTYPE_F32,
                              .sender = rank};
            inject(ctx, &h);
        }
    } else if (strcmp(mode, "bad-result") == 0 && rank == 1) {
        inject_bad_results(ctx);
    } else if (strcmp(mode, "malformed") == 0 && rank == 1) {
        dd_agg_hdr_t h = {.magic = 0xbad, .sender = rank};
        inject(ctx, &h);
    } else if (strcmp(mode, "worker-exit") == 0 && rank == 1) {
        printf("mp_agg: rank 1 leaves\n");
        fflush(stdout);
        _exit(0);
    }
    double t0 = dd_time_now();
    dd_status_t s = dd_sync_all(ctx);
    double took = dd_time_now() - t0;
    int untouched = 1;
    for (size_t i = 0; i < size; i++) {
        untouched &= ((float *)buf)[i] == (float)value(rank, i);
    }
    printf("mp_agg: rank %d: %s after %.1f s, buffer %s: %s\n", rank,
           dd_status_string(s), took, untouched ? "untouched" : "CHANGED",
           dd_last_error());
    return s == DD_OK || !untouched;
}

int main(int argc, char **argv)
{
    dd_context_h ctx;
    if (argc < 2 || dd_init(NULL, &ctx) != DD_OK) {
        fprintf(stderr, "mp_agg: usage or dd_init: %s\n", dd_last_error());
        return 2;
    }
    rank = dd_rank(ctx);
    workers = dd_num_workers(ctx);
    int rc;
    if (dd_role(ctx) == DD_ROLE_AGGREGATOR) {
        if (strcmp(argv[1], "agg-exit") == 0) {
            _exit(0);
        }
        dd_status_t s = dd_aggregator_serve(ctx);
        printf("mp_agg: aggregator %d: %s: %s\n", rank, dd_status_string(s),
               dd_last_error());
        rc = s != DD_OK &&
             (strcmp(argv[1], "check") == 0 || strcmp(argv[1], "huge") == 0);
    } else if (strcmp(argv[1], "check") == 0 && argc > 3) {
        size_t sizes[16];
        int n = 0;
        for (int i = 3; i < argc && n < 16; i++) {
            sizes[n++] = strtoull(argv[i], NULL, 10);
        }
        rc = run_check(ctx, parse_dtype(argv[2]), sizes, n);
    } else if (strcmp(argv[1], "huge") == 0 && argc > 2) {
        rc = run_huge(ctx, argv[2]);
    } else {
        rc = run_fault(ctx,
                       strcmp(argv[1], "agg-exit") == 0 ? "agg-exit" : argv[1]);
    }
    if (strcmp(argv[1], "check") != 0 && strcmp(argv[1], "huge") != 0) {
        return rc; /* the job is broken: no barrier to meet at */
    }
    dd_status_t fin = dd_finalize(ctx);
    for (int l = 0; l < n_bufs; l++) {
        free(bufs[l]);
    }
    return rc != 0 ? rc : fin != DD_OK;
}
