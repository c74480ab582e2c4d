/*
 * Run under ddrun by test_drift_mp.sh: the divergence monitor.
 *
 *   mp_drift known      each worker w sets every parameter to w + 1 before
 *                       each localsgd:1 sync: its divergence is exactly
 *                       |w + 1 - avg| / avg for a layer of an f32 and an f64
 *                       tensor (two messages), and once agreed, the maximum
 *                       and mean over the workers are those of the workers'
 *                       own figures.
 *   mp_drift cross S N  strategy S for N steps with worker-dependent
 *                       gradients: after each agreement, every layer's
 *                       agreed maximum equals the largest of the workers'
 *                       figures, gathered here (the figure each agreement
 *                       carried is the one of the layer's last sync).
 *   mp_drift ddp N      ddp with worker-dependent gradients: the replicas
 *                       stay equal, so the divergence dd_sync_all measures
 *                       after every step is exactly 0, as is the figure the
 *                       steps report.
 *   mp_drift adaptive   adaptive:drift: the replicas are equal after every
 *                       average; pushed apart each step, every period falls
 *                       to DREAMDDP_ADAPTIVE_KMIN; left alone, it rises to
 *                       KMAX; the same on every worker.
 */
#include <dreamddp.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_LAYERS 2
static int rank, workers;
#define MP_NAME "mp_drift"
#include "mp.h"

/* "mixed": 40 f32 and 24 f64 elements; "big": 400000 f32 (compressed when
 * DREAMDDP_COMPRESSION is set), a job of its own averaged in place, whose
 * divergence is measured on a sample (drift.h). */
typedef struct {
    float *w, *gw;
    double *b, *gb;
    size_t nw, nb;
    dd_layer_h h;
} layer_t;

static const uint64_t all_fields =
    DD_LAYER_STATS_FIELD_SYNCS | DD_LAYER_STATS_FIELD_PERIOD |
    DD_LAYER_STATS_FIELD_DIVERGENCE | DD_LAYER_STATS_FIELD_DIVERGENCE_MAX |
    DD_LAYER_STATS_FIELD_DIVERGENCE_MEAN |
    DD_LAYER_STATS_FIELD_DIVERGENCE_AGREED;

static int setup(dd_context_h ctx, layer_t *L)
{
    static const size_t sizes[N_LAYERS][2] = {{40, 24}, {400000, 0}};
    static const char *const names[N_LAYERS] = {"mixed", "big"};
    for (int l = 0; l < N_LAYERS; l++) {
        layer_t *x = &L[l];
        x->nw = sizes[l][0];
        x->nb = sizes[l][1];
        x->w = calloc(x->nw, sizeof(float));
        x->gw = calloc(x->nw, sizeof(float));
        x->b = calloc(x->nb + 1, sizeof(double));
        x->gb = calloc(x->nb + 1, sizeof(double));
        CHECK(x->w && x->gw && x->b && x->gb, "out of memory");
        dd_tensor_t t[2] = {{.param = x->w,
                             .grad = x->gw,
                             .count = x->nw,
                             .dtype = DD_DTYPE_F32,
                             .mem_type = DD_MEM_HOST},
                            {.param = x->b,
                             .grad = x->gb,
                             .count = x->nb,
                             .dtype = DD_DTYPE_F64,
                             .mem_type = DD_MEM_HOST}};
        CHECK(dd_layer_register(ctx, names[l], t, x->nb ? 2 : 1, &x->h) ==
                  DD_OK,
              "register: %s", dd_last_error());
    }
    return 0;
}

static void layers_free(layer_t *L)
{
    for (int l = 0; l < N_LAYERS; l++) {
        free(L[l].w);
        free(L[l].gw);
        free(L[l].b);
        free(L[l].gb);
    }
}

static int stats(dd_context_h ctx, const layer_t *x, dd_layer_stats_t *st)
{
    st->field_mask = all_fields;
    CHECK(dd_layer_stats(ctx, x->h, st) == DD_OK, "stats: %s", dd_last_error());
    return 0;
}

/* One step: every layer marked; grads (ddp) from the worker and step. */
static int step(dd_context_h ctx, layer_t *L, long s)
{
    for (int l = 0; l < N_LAYERS; l++) {
        for (size_t i = 0; i < L[l].nw; i++) {
            L[l].gw[i] = (float)(0.01 * (rank + 1) * ((i + s) % 7));
        }
        for (size_t i = 0; i < L[l].nb; i++) {
            L[l].gb[i] = 0.02 * (rank + 1) * ((i + s) % 5);
        }
    }
    CHECK(dd_step_begin(ctx) == DD_OK, "begin: %s", dd_last_error());
    for (int l = N_LAYERS - 1; l >= 0; l--) {
        CHECK(dd_layer_ready(ctx, L[l].h) == DD_OK, "ready: %s",
              dd_last_error());
    }
    CHECK(dd_step_end(ctx, NULL) == DD_OK, "end: %s", dd_last_error());
    return 0;
}

/* The application's own optimizer step: x -= lr * g, worker-dependent. */
static void sgd(layer_t *L, double lr)
{
    for (int l = 0; l < N_LAYERS; l++) {
        for (size_t i = 0; i < L[l].nw; i++) {
            L[l].w[i] -= (float)(lr * L[l].gw[i]);
        }
        for (size_t i = 0; i < L[l].nb; i++) {
            L[l].b[i] -= lr * L[l].gb[i];
        }
    }
}

static int known(dd_context_h ctx, layer_t *L)
{
    double avg = (workers + 1) / 2.0, mine = fabs(rank + 1 - avg) / avg;
    double max = 0, sum = 0;
    for (int r = 0; r < workers; r++) {
        double v = fabs(r + 1 - avg) / avg;
        max = v > max ? v : max;
        sum += v;
    }
    CHECK(dd_strategy_set(ctx, "localsgd:1") == DD_OK, "%s", dd_last_error());
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    for (long s = 0; s < 4; s++) {
        for (size_t i = 0; i < L[0].nw; i++) {
            L[0].w[i] = (float)(rank + 1);
        }
        for (size_t i = 0; i < L[0].nb; i++) {
            L[0].b[i] = rank + 1;
        }
        for (size_t i = 0; i < L[1].nw; i++) {
            L[1].w[i] = (float)(rank + 1);
        }
        if (step(ctx, L, s) != 0) {
            return 1;
        }
        dd_layer_stats_t st;
        /* The sample of a uniform layer gives its figure to rounding. */
        if (stats(ctx, &L[1], &st) != 0) {
            return 1;
        }
        CHECK(fabs(st.divergence - mine) <= 1e-12 * mine,
              "step %ld: sampled divergence %.17g, not %.17g", s, st.divergence,
              mine);
        CHECK(L[1].w[0] == (float)avg && L[1].w[L[1].nw - 1] == (float)avg,
              "step %ld: the big layer's average is %g, not %g", s, L[1].w[0],
              avg);
        if (stats(ctx, &L[0], &st) != 0) {
            return 1;
        }
        CHECK(st.divergence == mine, "step %ld: divergence %.17g, not %.17g", s,
              st.divergence, mine);
        CHECK(L[0].w[0] == (float)avg && L[0].b[0] == avg,
              "step %ld: the average is %g and %g, not %g", s, L[0].w[0],
              L[0].b[0], avg);
        /* The agreement starts at step 1's begin and is taken at step 2's. */
        CHECK(st.divergence_agreed == (s >= 2 ? (uint64_t)(s - 1) : 0),
              "step %ld: %llu agreements", s,
              (unsigned long long)st.divergence_agreed);
        if (s >= 2) {
            CHECK(st.divergence_max == max,
                  "step %ld: agreed maximum %.17g, not %.17g", s,
                  st.divergence_max, max);
            CHECK(fabs(st.divergence_mean - sum / workers) <= 1e-15,
                  "step %ld: agreed mean %.17g, not %.17g", s,
                  st.divergence_mean, sum / workers);
        }
    }
    if (rank == 0) {
        printf("mp_drift: known: divergence %.17g on worker 0, agreed "
               "maximum %.17g and mean %.17g over %d workers, exact\n",
               mine, max, sum / workers, workers);
    }
    return 0;
}

/*
 * Every layer's agreed maximum is the largest of the figures the workers
 * held when the agreement started: at the start of the window before
 * (lag: the window H), or at once (adaptive, lag 0). hist[s]: the figure
 * after step s.
 */
static int check_cross(dd_context_h ctx, layer_t *L, long s, long lag,
                       double (*hist)[N_LAYERS], uint64_t *agreed, int *checked)
{
    for (int l = 0; l < N_LAYERS; l++) {
        dd_layer_stats_t st;
        if (stats(ctx, &L[l], &st) != 0) {
            return 1;
        }
        hist[s][l] = st.divergence;
        if (st.divergence_agreed == agreed[l]) {
            continue;
        }
        long at = s - lag - 1;
        CHECK(at >= 0, "step %ld: layer %d agreed before any sync", s, l);
        double *all = malloc((size_t)workers * sizeof(double)), max = -1;
        CHECK(all != NULL, "out of memory");
        CHECK(dd_allgather(ctx, &hist[at][l], all, 1, DD_DTYPE_F64,
                           DD_MEM_HOST) == DD_OK,
              "allgather: %s", dd_last_error());
        for (int r = 0; r < workers; r++) {
            max = all[r] > max ? all[r] : max;
        }
        free(all);
        CHECK(st.divergence_max == max,
              "step %ld: layer %d: agreed maximum %.17g, the largest of the "
              "workers' %.17g",
              s, l, st.divergence_max, max);
        CHECK(st.divergence_mean <= max &&
                  (st.divergence_mean > 0) == (max > 0),
              "step %ld: layer %d: agreed mean %.17g, maximum %.17g", s, l,
              st.divergence_mean, max);
        agreed[l] = st.divergence_agreed;
        /* Agreements on replicas that did drift apart. */
        *checked += max > 0;
    }
    return 0;
}

static int cross(dd_context_h ctx, layer_t *L, const char *strategy, long steps)
{
    uint64_t agreed[N_LAYERS] = {0};
    int checked = 0;
    const char *colon = strchr(strategy, ':');
    long lag = strncmp(strategy, "adaptive", 8) == 0 ? 0
               : colon != NULL                       ? atol(colon + 1)
                                                     : 1;
    double(*hist)[N_LAYERS] = calloc((size_t)steps, sizeof(*hist));

    CHECK(hist != NULL, "out of memory");
    CHECK(dd_strategy_set(ctx, strategy) == DD_OK, "%s", dd_last_error());
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    for (int l = 0; l < N_LAYERS; l++) {
        for (size_t i = 0; i < L[l].nw; i++) {
            L[l].w[i] = (float)(1 + 0.001 * (double)(i % 13));
        }
        for (size_t i = 0; i < L[l].nb; i++) {
            L[l].b[i] = 1 + 0.002 * (double)(i % 11);
        }
    }
    int rc = 0;
    for (long s = 0; rc == 0 && s < steps; s++) {
        rc = step(ctx, L, s);
        sgd(L, 0.5);
        if (rc == 0) {
            rc = check_cross(ctx, L, s, lag, hist, agreed, &checked);
        }
    }
    free(hist);
    if (rc != 0) {
        return rc;
    }
    CHECK(checked >= N_LAYERS, "%s: %d agreements on divergent replicas",
          strategy, checked);
    if (rank == 0) {
        printf("mp_drift: cross: %s: %d agreed maxima are the largest of the "
               "workers' figures\n",
               strategy, checked);
    }
    return 0;
}

static int ddp(dd_context_h ctx, layer_t *L, long steps)
{
    CHECK(dd_strategy_set(ctx, "ddp") == DD_OK, "%s", dd_last_error());
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    for (long s = 0; s < steps; s++) {
        if (step(ctx, L, s) != 0) {
            return 1;
        }
        for (int l = 0; l < N_LAYERS; l++) {
            dd_layer_stats_t st;
            if (stats(ctx, &L[l], &st) != 0) {
                return 1;
            }
            CHECK(st.divergence == 0 && st.divergence_max == 0 &&
                      st.divergence_agreed == 0,
                  "step %ld: layer %d: ddp reports divergence %g, max %g", s, l,
                  st.divergence, st.divergence_max);
        }
        sgd(L, 0.5);
        CHECK(dd_sync_all(ctx) == DD_OK, "sync_all: %s", dd_last_error());
        for (int l = 0; l < N_LAYERS; l++) {
            dd_layer_stats_t st;
            if (stats(ctx, &L[l], &st) != 0) {
                return 1;
            }
            CHECK(st.divergence == 0,
                  "step %ld: layer %d: dd_sync_all measured %.17g after a "
                  "ddp step",
                  s, l, st.divergence);
        }
        /* Not vacuous: the replicas did move, by the averaged gradient. */
        CHECK(L[0].w[1] != (float)0, "step %ld: the parameters never moved", s);
    }
    if (rank == 0) {
        printf("mp_drift: ddp: %ld steps, divergence exactly 0 after every "
               "sync\n",
               steps);
    }
    return 0;
}

/* Whether every worker holds the same values of layer x: bitwise. */
static int equal_replicas(dd_context_h ctx, const layer_t *x, long s)
{
    size_t n = x->nw;
    float *all = malloc(n * (size_t)workers * sizeof(float));
    CHECK(all != NULL, "out of memory");
    CHECK(dd_allgather(ctx, x->w, all, n, DD_DTYPE_F32, DD_MEM_HOST) == DD_OK,
          "allgather: %s", dd_last_error());
    int same = 1;
    for (int r = 1; r < workers; r++) {
        same &= memcmp(all, all + (size_t)r * n, n * sizeof(float)) == 0;
    }
    free(all);
    CHECK(same, "step %ld: the replicas differ after an average", s);
    return 0;
}

/* Runs adaptive:drift for steps, pushed apart or not; *period_p: every
 * layer's period at the end, which must be the same everywhere. */
static int adaptive_phase(dd_context_h ctx, layer_t *L, long from, long steps,
                          int push, int *period_p)
{
    uint64_t syncs[N_LAYERS] = {0};
    for (long s = from; s < from + steps; s++) {
        for (int l = 0; push && l < N_LAYERS; l++) {
            /* Apart by a share of the values: 0.05 / 1.15 of their
             * average after one step, past DREAMDDP_DRIFT_TARGET. */
            for (size_t i = 0; i < L[l].nw; i++) {
                L[l].w[i] *= (float)(1 + 0.1 * (rank + 1));
            }
        }
        if (step(ctx, L, s) != 0) {
            return 1;
        }
        for (int l = 0; l < N_LAYERS; l++) {
            dd_layer_stats_t st;
            if (stats(ctx, &L[l], &st) != 0) {
                return 1;
            }
            if (st.syncs != syncs[l] && equal_replicas(ctx, &L[l], s) != 0) {
                return 1;
            }
            syncs[l] = st.syncs;
            period_p[l] = st.period;
        }
    }
    int all[2 * 64];
    CHECK(workers <= 64, "too many workers");
    CHECK(dd_allgather(ctx, period_p, all, N_LAYERS, DD_DTYPE_I32,
                       DD_MEM_HOST) == DD_OK,
          "allgather: %s", dd_last_error());
    for (int r = 0; r < workers; r++) {
        CHECK(memcmp(all + r * N_LAYERS, period_p, sizeof(int) * N_LAYERS) == 0,
              "worker %d's periods differ from mine", r);
    }
    return 0;
}

static int adaptive(dd_context_h ctx, layer_t *L)
{
    int high[N_LAYERS], low[N_LAYERS];
    const char *kmin = getenv("DREAMDDP_ADAPTIVE_KMIN");
    const char *kmax = getenv("DREAMDDP_ADAPTIVE_KMAX");
    CHECK(kmin && kmax, "set DREAMDDP_ADAPTIVE_KMIN and _KMAX");
    CHECK(dd_strategy_set(ctx, "adaptive:drift") == DD_OK, "%s",
          dd_last_error());
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    CHECK(strcmp(dd_strategy_name(ctx), "adaptive:drift") == 0, "name %s",
          dd_strategy_name(ctx));
    for (int l = 0; l < N_LAYERS; l++) {
        for (size_t i = 0; i < L[l].nw; i++) {
            L[l].w[i] = 1;
        }
    }
    if (adaptive_phase(ctx, L, 0, 60, 1, high) != 0 ||
        adaptive_phase(ctx, L, 60, 100, 0, low) != 0) {
        return 1;
    }
    for (int l = 0; l < N_LAYERS; l++) {
        CHECK(high[l] == atoi(kmin), "layer %d: period %d pushed apart, not %s",
              l, high[l], kmin);
        CHECK(low[l] == atoi(kmax), "layer %d: period %d left alone, not %s", l,
              low[l], kmax);
    }
    if (rank == 0) {
        printf("mp_drift: adaptive:drift: periods %d pushed apart, %d left "
               "alone, replicas equal after every average\n",
               high[0], low[0]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    dd_context_h ctx;
    layer_t L[N_LAYERS];

    if (mp_start(argc >= 2, &ctx) != 0) {
        return 2;
    }
    rank = dd_rank(ctx);
    workers = dd_num_workers(ctx);
    int rc = setup(ctx, L);
    if (rc == 0 && strcmp(argv[1], "known") == 0) {
        rc = known(ctx, L);
    } else if (rc == 0 && strcmp(argv[1], "cross") == 0 && argc > 3) {
        rc = cross(ctx, L, argv[2], atol(argv[3]));
    } else if (rc == 0 && strcmp(argv[1], "ddp") == 0 && argc > 2) {
        rc = ddp(ctx, L, atol(argv[2]));
    } else if (rc == 0 && strcmp(argv[1], "adaptive") == 0) {
        rc = adaptive(ctx, L);
    } else if (rc == 0) {
        fprintf(stderr, "mp_drift: unknown mode %s\n", argv[1]);
        rc = 2;
    }
    dd_status_t fin = dd_finalize(ctx);
    layers_free(L);
    return rc != 0 ? rc : fin != DD_OK;
}
