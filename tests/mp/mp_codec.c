/*
 * Run under ddrun by test_codec_mp.sh, with DREAMDDP_COMPRESSION set. Every
 * rank registers the same layers (two of at least 4096 elements that the
 * default rule compresses, a 10-element one that stays dense and a
 * 300-element one that dd_layer_set_compression compresses), moves them
 * by rank-dependent amounts every step, and checks after each step, for
 * every layer the step synced, that the replicas are bit-identical and
 * within the codec's rounding of the exact f32 average (fp16, bf16); and
 * that the wire bytes are at most 0.51 of the raw bytes (0.03 under
 * topk:0.01, 0.03 times 1 + the workers through aggregators, where they
 * count the pull too; 0.12 under powersgd:4).
 *
 * Under topk each rank also runs the codec's arithmetic itself (the k
 * largest magnitudes of the change plus its residual, ties to the lower
 * index, the rest kept as the residual) and allgathers what it sent: the
 * synced layer must be, bit for bit, the reference plus the average of
 * every rank's sent vector summed in worker order, on either route (the
 * aggregators scatter the pieces in that order); and, for error feedback,
 * the sum over the syncs of what was sent plus the residual must be the
 * sum of the changes.
 *
 * The matrix layers are shaped (50 x 100, 64 x 128, 15 x 20; the 10 are a
 * vector). Under powersgd what moves in layers 0 and 3 is of rank 2 on
 * every rank, in a column space the ranks share, so that the average is of
 * rank 2 and PowerSGD recovers it to f32 rounding (which the check holds it
 * to); layer 2 moves at full rank in the first DRAIN_FROM steps only, and
 * is then no average, only equal, until the error feedback has sent all
 * that was held back (64 rows, 4 a sync): at the end it must be where
 * exact averaging puts it (each rank tracks that in a shadow copy), as
 * nothing is lost, only delayed. Run it for 48 steps.
 *
 *   mp_codec STRATEGY STEPS
 *
 * mp_codec big 1: one ddp step whose gradients are 0.6 of the codec's
 * largest value on every worker (40000 under fp16, 2e38 under bf16): the
 * average is that value, finite, on every route (a ring that sums in the
 * wire dtype would overflow at the first partial sum).
 */
#include <dreamddp.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_LAYERS 4
static const size_t sizes[N_LAYERS] = {5000, 10, 8192, 300};
static const size_t rows_of[N_LAYERS] = {50, 0, 64, 15};
static int rank, world, powersgd;
#define MP_NAME "mp_codec"
#include "mp.h"
static double topk_ratio; /* 0: not topk */
#define DRAIN_FROM 4

typedef struct {
    float *param, *grad, *pre, *mean, *copy;
    float *shadow; /* the parameters under exact averaging */
    dd_layer_h h;
    uint64_t syncs;
    /* topk's model: the residual, the value at the last sync, what every
     * rank sent, and the sums over the syncs of the changes and of what
     * was sent. */
    float *resid, *ref, *sent, *all;
    double *sum_in, *sum_sent;
} layer_t;

static float wave(int r, int l, long step, size_t i)
{
    return (float)sin(0.37 * (double)i + 1.3 * r + 0.71 * (double)step + l);
}

/* Element i of a rank-2 matrix with the layer's two right factors (the
 * same on every rank and step) and left ones of this rank and step. */
static float low_rank(int r, int l, long step, size_t i)
{
    size_t cols = sizes[l] / rows_of[l], row = i / cols, col = i % cols;
    double v1 = cos(0.21 * (double)col + l), v2 = sin(0.13 * (double)col);

    return (float)(sin(0.5 * (double)row + r + 0.3 * (double)step) * v1 +
                   cos(0.7 * (double)row + 2.0 * r + (double)step) * v2);
}

/* A hash of (rank, step, element) in [-1, 1): a matrix of full rank
 * (wave's are of rank 2: sin(a row + b col) is). */
static float noise(int r, long step, size_t i)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)(r + 1) * 0xbf58476d1ce4e5b9ull ^
                 (uint64_t)(step + 7) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return (float)((double)(x >> 11) * 0x1p-52 - 1.0);
}

/* What moves element i: of rank 2 where powersgd is to recover it, of
 * full rank (until DRAIN_FROM) in the layer it cannot. */
static float move(int l, long step, size_t i)
{
    if (powersgd && l == 2) {
        return step < DRAIN_FROM ? noise(rank, step, i) : 0.0f;
    }
    return powersgd && (l == 0 || l == 3) ? low_rank(rank, l, step, i)
                                          : wave(rank, l, step, i);
}

/* ddp: the gradients; the others: the parameters move by a small step. */
static void touch(layer_t *L, int l, long step, int ddp)
{
    for (size_t i = 0; i < sizes[l]; i++) {
        if (ddp) {
            L->grad[i] =
                (powersgd && l != 1 ? 0.0f : 0.5f) + 0.3f * move(l, step, i);
        } else {
            L->param[i] += 0.01f * move(l, step, i);
            L->shadow[i] += 0.01f * move(l, step, i);
        }
    }
    memcpy(L->pre, ddp ? L->grad : L->param, sizes[l] * sizeof(float));
}

/* Whether buf is rank 0's bit for bit and near the exact average of pre. */
static int check_layer(dd_context_h ctx, layer_t *L, int l, long step,
                       const float *buf, double tol)
{
    size_t n = sizes[l];

    CHECK(dd_allreduce(ctx, L->pre, L->mean, n, DD_DTYPE_F32, DD_REDUCE_AVG,
                       DD_MEM_HOST) == DD_OK,
          "allreduce: %s", dd_last_error());
    memcpy(L->copy, buf, n * sizeof(float));
    CHECK(dd_broadcast(ctx, L->copy, n, DD_DTYPE_F32, 0, DD_MEM_HOST) == DD_OK,
          "broadcast: %s", dd_last_error());
    CHECK(memcmp(L->copy, buf, n * sizeof(float)) == 0,
          "step %ld: layer %d differs from rank 0's after its sync", step, l);
    for (size_t i = 0; i < n; i++) {
        CHECK(fabs((double)buf[i] - L->mean[i]) <= tol,
              "step %ld: layer %d element %zu: %.7g, the average is %.7g", step,
              l, i, (double)buf[i], (double)L->mean[i]);
    }
    return 0;
}

static uint32_t mag(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    return u & 0x7fffffffu;
}

static int desc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* What topk sends of in (the change since the last sync, or the
 * gradient) into L->sent, keeping the rest in L->resid. */
static int topk_model(layer_t *L, size_t n, const float *in)
{
    double x = topk_ratio * (double)n;
    size_t k = (size_t)ceil(x - x * 1e-12), above = 0;
    uint32_t *m = malloc(n * sizeof(uint32_t));

    CHECK(m != NULL, "no memory");
    k = k < 1 ? 1 : k > n ? n : k;
    for (size_t i = 0; i < n; i++) {
        L->resid[i] += in[i];
        L->sum_in[i] += in[i];
        m[i] = mag(L->resid[i]);
    }
    qsort(m, n, sizeof(*m), desc);
    uint32_t t = m[k - 1];
    for (size_t i = 0; i < n; i++) {
        above += m[i] > t;
    }
    size_t ties = k - above;
    free(m);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = mag(L->resid[i]);
        int send = u > t || (u == t && ties > 0);
        ties -= send && u == t;
        L->sent[i] = send ? L->resid[i] : 0.0f;
        L->resid[i] = send ? 0.0f : L->resid[i];
        L->sum_sent[i] += L->sent[i];
    }
    return 0;
}

/* A topk layer after its sync: the reference plus the average, in worker
 * order, of what every rank sent; and sent + residual = the changes. */
static int check_topk(dd_context_h ctx, layer_t *L, int l, long step,
                      const float *buf, int ddp)
{
    size_t n = sizes[l];
    float *in = malloc(n * sizeof(float));

    CHECK(in != NULL, "no memory");
    for (size_t i = 0; i < n; i++) {
        in[i] = ddp ? L->pre[i] : L->pre[i] - L->ref[i];
    }
    int rc = topk_model(L, n, in);
    free(in);
    if (rc != 0) {
        return rc;
    }
    CHECK(dd_allgather(ctx, L->sent, L->all, n, DD_DTYPE_F32, DD_MEM_HOST) ==
              DD_OK,
          "allgather: %s", dd_last_error());
    for (size_t i = 0; i < n; i++) {
        float avg = 0.0f;
        for (int r = 0; r < world; r++) {
            avg += L->all[(size_t)r * n + i];
        }
        avg /= (float)world;
        if (!ddp) {
            avg += L->ref[i];
        }
        CHECK(memcmp(&avg, &buf[i], sizeof(avg)) == 0,
              "step %ld: layer %d element %zu: %.9g, where the average of "
              "what the ranks sent gives %.9g",
              step, l, i, (double)buf[i], (double)avg);
        double want = L->sum_in[i], got = L->sum_sent[i] + L->resid[i];
        CHECK(fabs(got - want) <= 1e-5 * (1.0 + fabs(want)),
              "step %ld: layer %d element %zu: sent + residual %.9g, the "
              "changes sum to %.9g",
              step, l, i, got, want);
    }
    memcpy(L->ref, buf, n * sizeof(float));
    return 0;
}

/* Error feedback: layer 2 stopped moving at DRAIN_FROM, and what powersgd
 * held back has been sent since: it is where exact averaging puts it. */
static int check_drained(dd_context_h ctx, layer_t *L, long steps)
{
    size_t n = sizes[2];
    double worst = 0;

    CHECK(steps >= 48, "powersgd's error feedback needs 48 steps, not %ld",
          steps);
    CHECK(dd_allreduce(ctx, L->shadow, L->mean, n, DD_DTYPE_F32, DD_REDUCE_AVG,
                       DD_MEM_HOST) == DD_OK,
          "allreduce: %s", dd_last_error());
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)L->param[i] - L->mean[i]);
        worst = d > worst ? d : worst;
    }
    CHECK(worst < 1e-4,
          "layer 2 is %.3g off exact averaging after its residual drained",
          worst);
    return 0;
}

static int setup(dd_context_h ctx, layer_t *L)
{
    char name[32];

    for (int l = 0; l < N_LAYERS; l++) {
        size_t n = sizes[l];
        L[l].param = malloc(n * sizeof(float));
        L[l].grad = calloc(n, sizeof(float));
        L[l].pre = malloc(n * sizeof(float));
        L[l].mean = malloc(n * sizeof(float));
        L[l].copy = malloc(n * sizeof(float));
        L[l].shadow = malloc(n * sizeof(float));
        L[l].resid = calloc(n, sizeof(float));
        L[l].ref = malloc(n * sizeof(float));
        L[l].sent = malloc(n * sizeof(float));
        L[l].all = malloc((size_t)world * n * sizeof(float));
        L[l].sum_in = calloc(n, sizeof(double));
        L[l].sum_sent = calloc(n, sizeof(double));
        CHECK(L[l].param && L[l].grad && L[l].pre && L[l].mean && L[l].copy &&
                  L[l].shadow && L[l].resid && L[l].ref && L[l].sent &&
                  L[l].all && L[l].sum_in && L[l].sum_sent,
              "no memory");
        for (size_t i = 0; i < n; i++) {
            L[l].param[i] = 1.0f + 0.5f * wave(rank, l, -1, i);
        }
        dd_tensor_t t = {.param = L[l].param,
                         .grad = L[l].grad,
                         .count = n,
                         .dtype = DD_DTYPE_F32,
                         .mem_type = DD_MEM_HOST,
                         .rows = rows_of[l],
                         .cols = rows_of[l] ? n / rows_of[l] : 0};
        snprintf(name, sizeof(name), "layer%d", l);
        CHECK(dd_layer_register(ctx, name, &t, 1, &L[l].h) == DD_OK,
              "register: %s", dd_last_error());
    }
    const char *spec = getenv("DREAMDDP_COMPRESSION");
    CHECK(dd_layer_set_compression(ctx, L[3].h, spec ? spec : "none") == DD_OK,
          "dd_layer_set_compression: %s", dd_last_error());
    CHECK(dd_layer_set_compression(ctx, L[3].h, "zip") == DD_ERR_INVALID_PARAM,
          "dd_layer_set_compression accepted 'zip'");
    return 0;
}

static int run(dd_context_h ctx, layer_t *L, const char *strategy, long steps)
{
    int ddp = strcmp(strategy, "ddp") == 0;
    /* Parameters move by at most 0.01 a step between syncs; bf16 rounds
     * each rank's change and the average to 2^-9 of themselves. */
    double tol = ddp ? 1e-2 : 1e-3;
    size_t raw = 0, wire = 0, topk_checked = 0;
    const char *spec = getenv("DREAMDDP_COMPRESSION");
    /* topk sends 1 % of the largest values and their indices: the
     * replicas must still be equal, though not near the exact average. */
    int topk = spec != NULL && strncmp(spec, "topk:", 5) == 0;
    double limit = topk ? 0.03 : powersgd ? 0.12 : 0.51;
    /* Through aggregators topk's wire bytes are what a worker pushes (its
     * pairs) and pulls (the union of every worker's, up to world times
     * as many). */
    if (topk && dd_world_size(ctx) > world) {
        limit *= 1 + world;
    }
    if (topk) {
        tol = INFINITY;
    }

    CHECK(dd_strategy_set(ctx, strategy) == DD_OK, "strategy: %s",
          dd_last_error());
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    for (int l = 0; l < N_LAYERS; l++) { /* rank 0's, since the commit */
        memcpy(L[l].shadow, L[l].param, sizes[l] * sizeof(float));
        memcpy(L[l].ref, L[l].param, sizes[l] * sizeof(float));
    }
    for (long step = 0; step < steps; step++) {
        dd_step_stats_t st = {.field_mask = DD_STEP_STATS_FIELD_BYTES_SYNCED |
                                            DD_STEP_STATS_FIELD_WIRE_BYTES};
        CHECK(dd_step_begin(ctx) == DD_OK, "begin: %s", dd_last_error());
        for (int l = N_LAYERS; l-- > 0;) {
            touch(&L[l], l, step, ddp);
            CHECK(dd_layer_ready(ctx, L[l].h) == DD_OK, "ready: %s",
                  dd_last_error());
        }
        CHECK(dd_step_end(ctx, &st) == DD_OK, "end: %s", dd_last_error());
        raw += st.bytes_synced;
        wire += st.wire_bytes;
        for (int l = 0; l < N_LAYERS; l++) {
            dd_layer_stats_t ls = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS};
            CHECK(dd_layer_stats(ctx, L[l].h, &ls) == DD_OK, "stats: %s",
                  dd_last_error());
            if (ls.syncs == L[l].syncs) {
                continue;
            }
            L[l].syncs = ls.syncs;
            /* powersgd's full-rank layer is no average, only equal. */
            double ltol = powersgd && l == 2 ? INFINITY : tol;
            /* topk's layers are what its model says; layer 1 is dense. */
            if (topk && l == 1) {
                ltol = 1e-5;
            }
            float *buf = ddp ? L[l].grad : L[l].param;
            if (check_layer(ctx, &L[l], l, step, buf, ltol) != 0 ||
                (topk && l != 1 && check_topk(ctx, &L[l], l, step, buf, ddp))) {
                return 1;
            }
            topk_checked += topk && l != 1;
            if (ddp) { /* the replicas' parameters stay equal */
                for (size_t i = 0; i < sizes[l]; i++) {
                    L[l].param[i] -= 0.1f * L[l].grad[i];
                    L[l].shadow[i] -= 0.1f * L[l].mean[i];
                }
                memcpy(L[l].pre, L[l].param, sizes[l] * sizeof(float));
                if (check_layer(ctx, &L[l], l, step, L[l].param, 1e-5) != 0) {
                    return 1;
                }
            }
        }
    }
    if (powersgd && check_drained(ctx, &L[2], steps) != 0) {
        return 1;
    }
    CHECK(!topk || topk_checked > 0, "no topk layer synced");
    CHECK(raw > 0 && (double)wire <= limit * (double)raw,
          "%zu wire bytes for %zu raw bytes (at most %.2f of them)", wire, raw,
          limit);
    if (rank == 0) {
        printf("mp_codec: %s %s: %ld steps bit-identical on %d workers, "
               "%zu wire bytes for %zu raw\n",
               getenv("DREAMDDP_COMPRESSION"), strategy, steps, world, wire,
               raw);
    }
    return 0;
}

/* mp_codec big: gradients near the codec's largest value average to it. */
static int run_big(dd_context_h ctx, layer_t *L)
{
    const char *spec = getenv("DREAMDDP_COMPRESSION");
    float v = spec != NULL && strcmp(spec, "bf16") == 0 ? 2e38f : 40000.0f;

    CHECK(dd_strategy_set(ctx, "ddp") == DD_OK, "strategy: %s",
          dd_last_error());
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    CHECK(dd_step_begin(ctx) == DD_OK, "begin: %s", dd_last_error());
    for (int l = N_LAYERS; l-- > 0;) {
        for (size_t i = 0; i < sizes[l]; i++) {
            L[l].grad[i] = l == 1 ? 0.5f : v;
        }
        CHECK(dd_layer_ready(ctx, L[l].h) == DD_OK, "ready: %s",
              dd_last_error());
    }
    CHECK(dd_step_end(ctx, NULL) == DD_OK, "end: %s", dd_last_error());
    for (int l = 0; l < N_LAYERS; l++) {
        float want = l == 1 ? 0.5f : v;
        for (size_t i = 0; i < sizes[l]; i++) {
            CHECK(isfinite(L[l].grad[i]) &&
                      fabsf(L[l].grad[i] - want) <= want / 128,
                  "layer %d element %zu: %.7g, the average is %.7g", l, i,
                  (double)L[l].grad[i], (double)want);
        }
        memcpy(L[l].copy, L[l].grad, sizes[l] * sizeof(float));
        CHECK(dd_broadcast(ctx, L[l].copy, sizes[l], DD_DTYPE_F32, 0,
                           DD_MEM_HOST) == DD_OK,
              "broadcast: %s", dd_last_error());
        CHECK(memcmp(L[l].copy, L[l].grad, sizes[l] * sizeof(float)) == 0,
              "layer %d differs from rank 0's", l);
    }
    if (rank == 0) {
        printf("mp_codec: %s big: %.7g averages to %.7g on %d workers\n", spec,
               (double)v, (double)L[0].grad[0], world);
    }
    return 0;
}

int main(int argc, char **argv)
{
    dd_context_h ctx;
    layer_t L[N_LAYERS] = {{0}};

    if (mp_start(argc >= 3, &ctx) != 0) {
        return 2;
    }
    rank = dd_rank(ctx);
    world = dd_num_workers(ctx);
    const char *spec = getenv("DREAMDDP_COMPRESSION");
    powersgd = spec != NULL && strncmp(spec, "powersgd:", 9) == 0;
    topk_ratio = spec != NULL && strncmp(spec, "topk:", 5) == 0
                     ? strtod(spec + 5, NULL)
                     : 0.0;
    int rc = setup(ctx, L);
    if (rc == 0 && strcmp(argv[1], "big") == 0) {
        rc = run_big(ctx, L);
    } else if (rc == 0) {
        rc = run(ctx, L, argv[1], atol(argv[2]));
    }
    dd_status_t fin = dd_finalize(ctx);
    for (int l = 0; l < N_LAYERS; l++) {
        free(L[l].param);
        free(L[l].grad);
        free(L[l].pre);
        free(L[l].mean);
        free(L[l].copy);
        free(L[l].shadow);
        free(L[l].resid);
        free(L[l].ref);
        free(L[l].sent);
        free(L[l].all);
        free(L[l].sum_in);
        free(L[l].sum_sent);
    }
    return rc != 0 ? rc : fin != DD_OK;
}
