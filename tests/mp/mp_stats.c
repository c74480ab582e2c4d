/*
 * Run under ddrun by test_sched_mp.sh: the statistics add up. Three layers
 * of two tensors each; with a small DREAMDDP_FUSION_BYTES the middle one is
 * split over two messages. After every step, each layer the step synced
 * counts one sync and its bytes once, the layers' bytes add up to the
 * step's bytes on the wire, their syncs to the step's layers_synced and
 * their time shares to the step's wire time; the step's extra bytes are
 * those of the layers' extra syncs, and over whole windows the bytes less
 * the extra bytes are those of one sync of every layer per window.
 *
 *   mp_stats STRATEGY STEPS
 */
#include <dreamddp.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_LAYERS 3
static const size_t counts[N_LAYERS][2] = {{200, 200}, {3000, 5}, {1000, 10}};
static int rank;
#define MP_NAME "mp_stats"
#include "mp.h"
static void *buffers[N_LAYERS * 4];

static const uint64_t layer_fields =
    DD_LAYER_STATS_FIELD_SYNCS | DD_LAYER_STATS_FIELD_BYTES |
    DD_LAYER_STATS_FIELD_WIRE_S | DD_LAYER_STATS_FIELD_EXTRA_SYNCS;

static uint64_t layer_bytes(int l)
{
    return 4 * (counts[l][0] + counts[l][1]);
}

static int setup(dd_context_h ctx, dd_layer_h *h)
{
    for (int l = 0; l < N_LAYERS; l++) {
        dd_tensor_t t[2];
        for (int k = 0; k < 2; k++) {
            size_t n = counts[l][k];
            buffers[4 * l + 2 * k] = calloc(n, 4);
            buffers[4 * l + 2 * k + 1] = calloc(n, 4);
            t[k] = (dd_tensor_t){.param = buffers[4 * l + 2 * k],
                                 .grad = buffers[4 * l + 2 * k + 1],
                                 .count = n,
                                 .dtype = DD_DTYPE_F32,
                                 .mem_type = DD_MEM_HOST};
            CHECK(t[k].param != NULL && t[k].grad != NULL, "out of memory");
        }
        char name[16];
        snprintf(name, sizeof(name), "layer%d", l);
        CHECK(dd_layer_register(ctx, name, t, 2, &h[l]) == DD_OK,
              "register: %s", dd_last_error());
    }
    return 0;
}

/* Checks one step's statistics against the layers' before and after. */
static int check_step(long s, const dd_step_stats_t *ss,
                      const dd_layer_stats_t *before,
                      const dd_layer_stats_t *after)
{
    uint64_t syncs = 0, bytes = 0, extra = 0;
    double wire = 0;

    for (int l = 0; l < N_LAYERS; l++) {
        uint64_t d = after[l].syncs - before[l].syncs;
        uint64_t b = after[l].bytes - before[l].bytes;
        CHECK(d <= 1, "step %ld: layer%d counted %llu syncs", s, l,
              (unsigned long long)d);
        CHECK(b == d * layer_bytes(l), "step %ld: layer%d counted %llu bytes",
              s, l, (unsigned long long)b);
        syncs += d;
        bytes += b;
        extra +=
            (after[l].extra_syncs - before[l].extra_syncs) * layer_bytes(l);
        wire += after[l].wire_s - before[l].wire_s;
    }
    CHECK(syncs == (uint64_t)ss->layers_synced,
          "step %ld: layers count %llu syncs, the step %d", s,
          (unsigned long long)syncs, ss->layers_synced);
    CHECK(bytes == ss->bytes_synced,
          "step %ld: layers count %llu bytes, the step %zu on the wire", s,
          (unsigned long long)bytes, ss->bytes_synced);
    CHECK(fabs(wire - ss->wire_s) <= 1e-9 + 1e-9 * ss->wire_s,
          "step %ld: layers' time %g s, the step's %g s", s, wire, ss->wire_s);
    CHECK(extra == ss->extra_bytes,
          "step %ld: layers' extra bytes %llu, the "
          "step's %zu",
          s, (unsigned long long)extra, ss->extra_bytes);
    return 0;
}

static int run(dd_context_h ctx, dd_layer_h *h, const char *strategy,
               long steps)
{
    dd_layer_stats_t before[N_LAYERS], after[N_LAYERS];
    long window = strchr(strategy, ':') ? atol(strchr(strategy, ':') + 1) : 0;
    uint64_t once = 0, bytes = 0, extra = 0;

    for (int l = 0; l < N_LAYERS; l++) {
        once += layer_bytes(l);
    }

    CHECK(dd_strategy_set(ctx, strategy) == DD_OK, "%s", dd_last_error());
    CHECK(dd_model_commit(ctx) == DD_OK, "commit: %s", dd_last_error());
    for (long s = 0; s < steps; s++) {
        for (int l = 0; l < N_LAYERS; l++) {
            before[l].field_mask = after[l].field_mask = layer_fields;
            CHECK(dd_layer_stats(ctx, h[l], &before[l]) == DD_OK, "stats");
        }
        CHECK(dd_step_begin(ctx) == DD_OK, "begin: %s", dd_last_error());
        for (int l = N_LAYERS - 1; l >= 0; l--) {
            CHECK(dd_layer_ready(ctx, h[l]) == DD_OK, "ready: %s",
                  dd_last_error());
        }
        dd_step_stats_t ss = {.field_mask = DD_STEP_STATS_FIELD_LAYERS_SYNCED |
                                            DD_STEP_STATS_FIELD_BYTES_SYNCED |
                                            DD_STEP_STATS_FIELD_WIRE_S |
                                            DD_STEP_STATS_FIELD_EXTRA_BYTES};
        CHECK(dd_step_end(ctx, &ss) == DD_OK, "end: %s", dd_last_error());
        for (int l = 0; l < N_LAYERS; l++) {
            CHECK(dd_layer_stats(ctx, h[l], &after[l]) == DD_OK, "stats");
        }
        if (check_step(s, &ss, before, after) != 0) {
            return 1;
        }
        bytes += ss.bytes_synced;
        extra += ss.extra_bytes;
    }
    if (window > 0 && steps % window == 0) {
        CHECK(bytes - extra == (uint64_t)(steps / window) * once,
              "%llu bytes, %llu of them extra, in %ld windows of %llu",
              (unsigned long long)bytes, (unsigned long long)extra,
              steps / window, (unsigned long long)once);
    }
    if (rank == 0) {
        printf("mp_stats: %s: %ld steps, every sync counted once\n", strategy,
               steps);
    }
    return 0;
}

int main(int argc, char **argv)
{
    dd_context_h ctx;
    dd_layer_h h[N_LAYERS];

    if (mp_start(argc >= 3, &ctx) != 0) {
        return 2;
    }
    rank = dd_rank(ctx);
    int rc = setup(ctx, h);
    if (rc == 0) {
        rc = run(ctx, h, argv[1], atol(argv[2]));
    }
    dd_status_t fin = dd_finalize(ctx);
    for (size_t i = 0; i < N_LAYERS * 4; i++) {
        free(buffers[i]);
    }
    return rc != 0 ? rc : fin != DD_OK;
}
