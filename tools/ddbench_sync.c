/*
 * ddbench sync --bytes SIZE [--dtype f32] [--iters N] [--link-gbps G]
 * [--streams N] [--json]: every worker registers one layer of SIZE bytes and
 * syncs it (dd_sync_all) through whatever route the context picks: the
 * backend's allreduce, or the aggregators, which serve meanwhile. Prints the
 * median time, the bus bandwidth and, given the link rate, the time the BytePS
 * model predicts; every worker checks the average.
 */
#include "agg/agg.h"
#include "api/context.h"
#include "core/config.h"
#include "core/json_write.h"
#include "ddbench.h"
#include "sched/sched.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t bytes;
    int iters, json;
    double link_gbps;
} ddbench_sync_opts_t;

static void ddbench_sync_usage(FILE *out)
{
    fprintf(out, "usage: ddbench sync --bytes SIZE [--iters N] "
                 "[--link-gbps G] [--streams N] [--json]\n"
                 "  SIZE as 100M, 4096, 1G (f32 elements of SIZE bytes)\n"
                 "  --link-gbps G   each host's link rate, for the modeled "
                 "time\n"
                 "  --streams N     connections per peer, 1 to 8 "
                 "(DREAMDDP_NUM_STREAMS for this run)\n");
}

static int ddbench_sync_parse(int argc, char **argv, ddbench_sync_opts_t *o)
{
    static const struct option longopts[] = {
        {"bytes", required_argument, 0, 'b'},
        {"iters", required_argument, 0, 'i'},
        {"link-gbps", required_argument, 0, 'l'},
        {"streams", required_argument, 0, 's'},
        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int opt;

    *o = (ddbench_sync_opts_t){.iters = 5};
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'b':
            if (dd_config_parse_size(optarg, &o->bytes) != DD_OK) {
                fprintf(stderr, "ddbench sync: bad --bytes '%s'\n", optarg);
                return -1;
            }
            break;
        case 'i':
            if (dd_arg_int("ddbench sync", "--iters", optarg, 1, INT_MAX,
                           &o->iters)) {
                return -1;
            }
            break;
        case 'l':
            if (dd_arg_double("ddbench sync", "--link-gbps", optarg, 0, 1e6,
                              &o->link_gbps)) {
                return -1;
            }
            break;
        case 's':
            if (ddbench_streams_set("ddbench sync", optarg) != 0) {
                return -1;
            }
            break;
        case 'j':
            o->json = 1;
            break;
        case 'h':
            ddbench_sync_usage(stdout);
            exit(0);
        default:
            ddbench_sync_usage(stderr);
            return -1;
        }
    }
    if (o->bytes < 4 || o->iters < 1 || optind != argc) {
        ddbench_sync_usage(stderr);
        return -1;
    }
    return 0;
}

static float ddbench_sync_value(int r, int it, size_t i)
{
    return (float)((r * 5 + it + (int)(i % 11)) % 13) - 6.0f;
}

/* Fills, syncs and checks once; returns the seconds of the sync. The
 * workers meet first (a one-element allreduce among them), so that the
 * time is the sync's, not the wait for a worker still filling or checking:
 * the way the PyTorch anchor puts a barrier before each allreduce. */
static int ddbench_sync_once(dd_context_h ctx, float *x, size_t n, int it,
                             double *t_p, int *correct)
{
    int rank = dd_rank(ctx), w = dd_num_workers(ctx);
    float want[11], meet = 1;

    for (size_t i = 0; i < n; i++) {
        x[i] = ddbench_sync_value(rank, it, i);
    }
    for (int j = 0; j < 11; j++) { /* the values repeat every 11 */
        double sum = 0;
        for (int r = 0; r < w; r++) {
            sum += ddbench_sync_value(r, it, (size_t)j);
        }
        want[j] = (float)(sum / w);
    }
    if (dd_allreduce(ctx, &meet, &meet, 1, DD_DTYPE_F32, DD_REDUCE_SUM,
                     DD_MEM_HOST) != DD_OK) {
        fprintf(stderr, "ddbench sync: rank %d: %s\n", rank, dd_last_error());
        return -1;
    }
    double t0 = dd_time_now();
    if (dd_sync_all(ctx) != DD_OK) {
        fprintf(stderr, "ddbench sync: rank %d: %s\n", rank, dd_last_error());
        return -1;
    }
    *t_p = dd_time_now() - t0;
    for (size_t i = 0; i < n && *correct; i++) {
        float v = want[i % 11];
        if (fabsf(x[i] - v) > 1e-5f * (1 + fabsf(v))) {
            fprintf(stderr,
                    "ddbench sync: rank %d: element %zu is %g, the "
                    "average is %g\n",
                    rank, i, x[i], v);
            *correct = 0;
        }
    }
    return 0;
}

static int ddbench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int ddbench_sync_worker(dd_context_h ctx, const ddbench_sync_opts_t *o)
{
    size_t n = o->bytes / sizeof(float);
    float *x = calloc(n, sizeof(float));
    double *t = calloc((size_t)o->iters + 1, sizeof(double));
    dd_tensor_t tensor = {
        .param = x, .count = n, .dtype = DD_DTYPE_F32, .mem_type = DD_MEM_HOST};
    int correct = 1;

    if (x == NULL || t == NULL ||
        dd_layer_register(ctx, "data", &tensor, 1, NULL) != DD_OK ||
        dd_strategy_set(ctx, "localsgd:1") != DD_OK ||
        dd_model_commit(ctx) != DD_OK) {
        fprintf(stderr, "ddbench sync: %s\n", dd_last_error());
        return 1;
    }
    for (int it = 0; it <= o->iters; it++) { /* the first is a warm-up */
        if (ddbench_sync_once(ctx, x, n, it, &t[it], &correct) != 0) {
            return 1;
        }
    }
    qsort(t + 1, (size_t)o->iters, sizeof(double), ddbench_cmp);
    double med = t[1 + o->iters / 2];
    int w = dd_num_workers(ctx), k = dd_world_size(ctx) - w;
    int agg = ctx->sched->routes.agg.agg != NULL;
    const char *route = agg ? "aggregate" : "allreduce";
    double bytes = (double)n * sizeof(float);
    double busbw = w > 1 ? bytes / med * 2.0 * (w - 1) / w / 1e6 : 0;
    double model = o->link_gbps > 0 ? dd_agg_model_s(w, agg ? k : 0, bytes,
                                                     o->link_gbps * 1e9 / 8)
                                    : NAN;
    if (dd_rank(ctx) == 0 && o->json) {
        dd_json_writer_t jw;
        dd_json_writer_init(&jw, stdout, 0);
        dd_json_object_begin(&jw, DD_JSON_COMPACT);
        dd_json_key(&jw, "route");
        dd_json_string(&jw, route);
        dd_json_key(&jw, "bytes");
        dd_json_fixed(&jw, bytes, 0);
        dd_json_key(&jw, "workers");
        dd_json_int(&jw, w);
        dd_json_key(&jw, "aggregators");
        dd_json_int(&jw, k);
        dd_json_key(&jw, "streams");
        dd_json_int(&jw, ddbench_streams(ctx));
        dd_json_key(&jw, "iters");
        dd_json_int(&jw, o->iters);
        dd_json_key(&jw, "time_s");
        dd_json_fixed(&jw, med, 6);
        dd_json_key(&jw, "busbw_MBps");
        dd_json_fixed(&jw, busbw, 1);
        dd_json_key(&jw, "modeled_s");
        dd_json_fixed(&jw, model, 6);
        dd_json_key(&jw, "correct");
        dd_json_bool(&jw, correct);
        dd_json_object_end(&jw);
        putchar('\n');
    } else if (dd_rank(ctx) == 0) {
        int streams = ddbench_streams(ctx);
        printf("sync of %.1f MB: %d workers, %d aggregators, route %s, "
               "%d stream%s\n"
               "  median %.4f s over %d, bus bandwidth %.1f MB/s",
               bytes / 1e6, w, k, route, streams, streams == 1 ? "" : "s", med,
               o->iters, busbw);
        if (!isnan(model)) {
            printf(", modeled %.4f s (measured / modeled %.2f)", model,
                   med / model);
        }
        printf(", %s\n", correct ? "correct" : "WRONG");
    }
    free(x);
    free(t);
    return correct ? 0 : 1;
}

int ddbench_sync_main(int argc, char **argv)
{
    ddbench_sync_opts_t o;
    dd_context_h ctx;

    if (ddbench_sync_parse(argc, argv, &o) != 0) {
        return 2;
    }
    if (dd_init(NULL, &ctx) != DD_OK) {
        fprintf(stderr, "ddbench: %s\n", dd_last_error());
        return 1;
    }
    int rc;
    if (dd_role(ctx) == DD_ROLE_AGGREGATOR) {
        rc = dd_aggregator_serve(ctx) != DD_OK;
    } else {
        rc = ddbench_sync_worker(ctx, &o);
    }
    if (rc != 0) {
        fprintf(stderr, "ddbench sync: rank %d: %s\n", dd_rank(ctx),
                dd_last_error());
        return rc; /* the job is broken: no barrier to meet at */
    }
    return dd_finalize(ctx) != DD_OK;
}
