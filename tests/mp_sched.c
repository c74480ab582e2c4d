/*
 * Run under ddrun by test_sched_mp.sh. Every rank registers the same layers
 * (sizes 1, 7, 4099 and 70000 elements, f32 and f64), fills them with
 * rank-dependent values before every step, and checks after the step that
 * each layer the step synced holds the exact average, and that every layer
 * was synced at least once in every window.
 *
 *   mp_sched STRATEGY STEPS   check the strategy
 *   mp_sched collective STRATEGY STEPS
 *                             the same, with dd_allreduce and dd_broadcast
 *                             called in the middle of every backward
 *   mp_sched mismatch         rank 1 registers a different table
 *   mp_sched misuse           calls out of order must fail cleanly
 */
#include <dreamddp.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_LAYERS 5
static const size_t sizes[N_LAYERS] = {1, 7, 4099, 70000, 33};
static int rank, world;
static int user_coll; /* collectives inside the open step */

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "mp_sched: rank %d: ", rank);                      \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            return 1;                                                          \
        }                                                                      \
    } while (0)

typedef struct {
    void *param, *grad;
    dd_dtype_t dtype;
    dd_layer_h h;
} layer_t;

static double value(int r, int l, long step, size_t i)
{
    return (double)(r * 8 + l * 3 + (int)(step % 5) + (int)(i % 7));
}

static void fill(layer_t *L, int l, long step, int grads)
{
    void *buf = grads ? L->grad : L->param;
    for (size_t i = 0; i < sizes[l]; i++) {
        if (L->dtype == DD_DTYPE_F32) {
            ((float *)buf)[i] = (float)value(rank, l, step, i);
        } else {
            ((double *)buf)[i] = value(rank, l, step, i);
        }
    }
}

/* Whether buf holds the average over ranks of what fill() wrote. */
static int is_average(layer_t *L, int l, long step, int grads)
{
    void *buf = grads ? L->grad : L->param;
    for (size_t i = 0; i < sizes[l]; i++) {
        double want = 0;
        for (int r = 0; r < world; r++) {
            want += value(r, l, step, i);
        }
        want /= world;
        double got =
            L->dtype == DD_DTYPE_F32 ? ((float *)buf)[i] : ((double *)buf)[i];
        if (fabs(got - want) > 1e-5 * (1 + fabs(want))) {
            fprintf(stderr, "layer %d element %zu: %g, expected %g\n", l, i,
                    got, want);
            return 0;
        }
    }
    return 1;
}

static int setup(dd_context_h ctx, layer_t *L, int mismatch)
{
    char name[16];
    for (int l = 0; l < N_LAYERS; l++) {
        L[l].dtype = l == 2 ? DD_DTYPE_F64 : DD_DTYPE_F32;
        size_t es = L[l].dtype == DD_DTYPE_F64 ? 8 : 4;
        L[l].param = calloc(sizes[l], es);
        L[l].grad = calloc(sizes[l], es);
        size_t count = sizes[l] + (mismatch && rank == 1 && l == 3);
        dd_tensor_t t = {L[l].param, L[l].grad,   count,
                         L[l].dtype, DD_MEM_HOST, 0};
        snprintf(name, sizeof(name), "layer%d", l);
        CHECK(dd_layer_register(ctx, name, &t, 1, &L[l].h) == DD_OK,
              "register: %s", dd_last_error());
    }
    return 0;
}

/* A collective of the application while layers' syncs are in flight: the
 * same size as layer 3, so that a sum paired with a layer's shows. */
static int collectives(dd_context_h ctx, long step)
{
    enum { N = 70000 };
    static float buf[N];
    for (size_t i = 0; i < N; i++) {
        buf[i] = (float)(rank + 1) * (float)(i % 3 + step % 2);
    }
    CHECK(dd_allreduce(ctx, buf, buf, N, DD_DTYPE_F32, DD_REDUCE_SUM,
                       DD_MEM_HOST) == DD_OK,
          "allreduce in step %ld: %s", step, dd_last_error());
    float ranks = (float)world * (float)(world + 1) / 2;
    for (size_t i = 0; i < N; i++) {
        CHECK(buf[i] == ranks * (float)(i % 3 + step % 2),
              "allreduce in step %ld: element %zu is %g", step, i, buf[i]);
    }
    double root = rank == 0 ? 42.0 + (double)step : -1.0;
    CHECK(dd_broadcast(ctx, &root, 1, DD_DTYPE_F64, 0, DD_MEM_HOST) == DD_OK,
          "broadcast in step %ld: %s", step, dd_last_error());
    CHECK(root == 42.0 + (double)step, "broadcast in step %ld: %g", step, root);
    return 0;
}

static int run(dd_context_h ctx, layer_t *L, const char *strategy, long steps)
{
    int grads = strcmp(strategy, "ddp") == 0;
    int windowed = strchr(strategy, ':') != NULL;
    long h = windowed ? atol(strchr(strategy, ':') + 1) : 1;
    uint64_t before[N_LAYERS], window_start[N_LAYERS];
    dd_layer_stats_t st = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS |
                                         DD_LAYER_STATS_FIELD_PERIOD};

    CHECK(dd_strategy_set(ctx, strategy) == DD_OK, "%s", dd_last_error());
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    for (int l = 0; l < N_LAYERS; l++) {
        window_start[l] = 0;
    }
    dd_layer_stats(ctx, L[0].h, &st);
    if (dd_rank(ctx) == 0) {
        printf("mp_sched: %s: periods start at %d\n", strategy, st.period);
    }
    for (long s = 0; s < steps; s++) {
        CHECK(dd_step_begin(ctx) == DD_OK, "begin: %s", dd_last_error());
        for (int l = N_LAYERS - 1; l >= 0; l--) {
            fill(&L[l], l, s, grads);
            dd_layer_stats(ctx, L[l].h, &st);
            before[l] = st.syncs;
            CHECK(dd_layer_ready(ctx, L[l].h) == DD_OK, "ready: %s",
                  dd_last_error());
            if (user_coll && l == 2 && collectives(ctx, s) != 0) {
                return 1;
            }
        }
        dd_step_stats_t ss = {.field_mask = DD_STEP_STATS_FIELD_STEP |
                                            DD_STEP_STATS_FIELD_LAYERS_SYNCED};
        CHECK(dd_step_end(ctx, &ss) == DD_OK, "end: %s", dd_last_error());
        CHECK(ss.step == (uint64_t)s, "step %llu, expected %ld",
              (unsigned long long)ss.step, s);
        int synced = 0;
        for (int l = 0; l < N_LAYERS; l++) {
            dd_layer_stats(ctx, L[l].h, &st);
            if (st.syncs > before[l]) {
                synced++;
                CHECK(is_average(&L[l], l, s, grads),
                      "step %ld layer %d is not the average", s, l);
            }
        }
        CHECK(synced == ss.layers_synced,
              "step %ld: %d layers changed, "
              "stats say %d",
              s, synced, ss.layers_synced);
        if (grads) {
            CHECK(synced == N_LAYERS, "ddp step %ld synced %d layers", s,
                  synced);
        }
        if (windowed && (s + 1) % h == 0) {
            for (int l = 0; l < N_LAYERS; l++) {
                dd_layer_stats(ctx, L[l].h, &st);
                CHECK(st.syncs > window_start[l],
                      "layer %d not synced in the window ending at step %ld", l,
                      s);
                window_start[l] = st.syncs;
            }
        }
    }
    for (int l = 0; l < N_LAYERS; l++) {
        fill(&L[l], l, 99, 0);
    }
    CHECK(dd_sync_all(ctx) == DD_OK, "sync_all: %s", dd_last_error());
    for (int l = 0; l < N_LAYERS; l++) {
        CHECK(is_average(&L[l], l, 99, 0), "sync_all: layer %d", l);
    }
    if (rank == 0) {
        printf("mp_sched: %s: %ld steps correct on %d ranks%s\n", strategy,
               steps, world,
               user_coll ? ", with collectives inside every step" : "");
    }
    return 0;
}

static int misuse(dd_context_h ctx, layer_t *L)
{
    dd_tensor_t t = {L[0].param, NULL, 1, DD_DTYPE_F32, DD_MEM_HOST, 0};
    CHECK(dd_layer_register(ctx, "layer0", &t, 1, NULL) == DD_ERR_INVALID_PARAM,
          "duplicate name accepted");
    CHECK(dd_step_begin(ctx) == DD_ERR_STATE, "begin before commit");
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    CHECK(dd_layer_register(ctx, "late", &t, 1, NULL) == DD_ERR_STATE,
          "register after commit accepted");
    CHECK(dd_layer_ready(ctx, L[0].h) == DD_ERR_STATE, "ready outside step");
    CHECK(dd_step_end(ctx, NULL) == DD_ERR_STATE, "end without begin");
    CHECK(dd_step_begin(ctx) == DD_OK, "begin: %s", dd_last_error());
    CHECK(dd_step_begin(ctx) == DD_ERR_STATE, "begin twice");
    CHECK(dd_layer_ready(ctx, L[1].h) == DD_OK, "ready");
    CHECK(dd_layer_ready(ctx, L[1].h) == DD_ERR_STATE, "ready twice");
    CHECK(strstr(dd_last_error(), "layer 'layer1' marked twice") != NULL,
          "message: %s", dd_last_error());
    CHECK(dd_layer_ready(ctx, NULL) == DD_ERR_INVALID_PARAM, "NULL layer");
    for (int l = N_LAYERS - 1; l >= 0; l--) {
        if (l != 1) {
            CHECK(dd_layer_ready(ctx, L[l].h) == DD_OK, "ready");
        }
    }
    CHECK(dd_sync_all(ctx) == DD_ERR_STATE, "sync_all inside a step");
    CHECK(dd_step_end(ctx, NULL) == DD_OK, "end: %s", dd_last_error());
    if (rank == 0) {
        printf("mp_sched: misuse is refused\n");
    }
    return 0;
}

int main(int argc, char **argv)
{
    dd_context_h ctx;
    layer_t L[N_LAYERS];

    if (argc > 2 && strcmp(argv[1], "collective") == 0) {
        user_coll = 1;
        argv++;
        argc--;
    }
    if (argc < 2 || dd_init(NULL, &ctx) != DD_OK) {
        fprintf(stderr, "mp_sched: usage or dd_init: %s\n", dd_last_error());
        return 2;
    }
    rank = dd_rank(ctx);
    world = dd_num_workers(ctx);
    if (dd_role(ctx) == DD_ROLE_AGGREGATOR) {
        dd_status_t s = dd_aggregator_serve(ctx);
        if (s != DD_OK) {
            fprintf(stderr, "mp_sched: aggregator %d: %s\n", rank,
                    dd_last_error());
        }
        return (dd_finalize(ctx) != DD_OK) | (s != DD_OK);
    }
    int mismatch = strcmp(argv[1], "mismatch") == 0;
    int rc = setup(ctx, L, mismatch);
    if (rc == 0 && mismatch) {
        dd_status_t s = dd_model_commit(ctx);
        printf("commit: %s: %s\n", dd_status_string(s), dd_last_error());
        rc = s == DD_ERR_MISMATCH ? 0 : 1;
    } else if (rc == 0 && strcmp(argv[1], "misuse") == 0) {
        rc = misuse(ctx, L);
    } else if (rc == 0) {
        rc = run(ctx, L, argv[1], argc > 2 ? atol(argv[2]) : 12);
    }
    dd_status_t fin = dd_finalize(ctx);
    for (int l = 0; l < N_LAYERS; l++) {
        free(L[l].param);
        free(L[l].grad);
    }
    return rc != 0 ? rc : fin != DD_OK;
}
