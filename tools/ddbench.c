/*
 * ddbench: benchmarks of dreamddp, one subcommand each. `coll` times one
 * collective through one backend like nccl-tests does (median of timed
 * iterations after warm-up, algorithm and bus bandwidth) and checks the
 * result on every rank. Runs under ddrun or with torchrun-style variables.
 * New subcommands go in ddbench_cmds; each parses its own options.
 */
#include "ddbench.h"

#include "api/context.h"
#include "backends/registry.h"
#include "core/json_write.h"

#include <dreamddp.h>
#include <dreamddp/introspect.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} ddbench_cmd_t;

typedef struct {
    dd_coll_t coll;
    const char *backend; /* NULL: chosen by score */
    size_t bytes;
    dd_dtype_t dtype;
    dd_reduce_op_t op;
    int iters;
    int warmup;
    int json;
    int streams; /* the count the ranks agreed on, after dd_init */
} ddbench_coll_opts_t;

static double ddbench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ddbench_parse_name(const char *s, const char *(*name)(int), int n,
                              int *value_p)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(s, name(i)) == 0) {
            *value_p = i;
            return 0;
        }
    }
    return -1;
}

static const char *ddbench_coll_name(int i)
{
    return dd_coll_name((dd_coll_t)i);
}

static const char *ddbench_dtype_name(int i)
{
    return dd_dtype_name((dd_dtype_t)i);
}

static const char *ddbench_op_name(int i)
{
    return dd_reduce_op_name((dd_reduce_op_t)i);
}

static void ddbench_coll_usage(FILE *out)
{
    fprintf(out,
            "usage: ddbench coll --op OP [--backend NAME] --bytes SIZE "
            "[--dtype T]\n"
            "                    [--reduce R] [--iters N] [--warmup N] "
            "[--streams N] [--json]\n"
            "\n"
            "  --op       allreduce, broadcast, reduce_scatter or allgather\n"
            "  --backend  ucx, gloo, nccl...; default: the best by score\n"
            "  --bytes    the whole buffer (allgather: the output, "
            "reduce_scatter:\n"
            "             the input): 100000000, 64K, 16M, 100MB, 1GiB\n"
            "  --dtype    f32 (default), f64, f16, bf16, i32, i64, u8\n"
            "  --reduce   sum (default), avg, max, min\n"
            "  --iters    timed iterations (default 5); --warmup untimed "
            "(default 1)\n"
            "  --streams  connections per peer, 1 to 8 (DREAMDDP_NUM_STREAMS "
            "for this run);\n"
            "             default: DREAMDDP_NUM_STREAMS, else the "
            "topology's\n"
            "  --json     end with one line of JSON\n");
}

static int ddbench_coll_parse(int argc, char **argv, ddbench_coll_opts_t *o)
{
    static const struct option longopts[] = {
        {"op", required_argument, NULL, 'o'},
        {"backend", required_argument, NULL, 'b'},
        {"bytes", required_argument, NULL, 'n'},
        {"dtype", required_argument, NULL, 'd'},
        {"reduce", required_argument, NULL, 'r'},
        {"iters", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'},
        {"streams", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c, v = 0, have_op = 0, have_bytes = 0;
    long lv = 0;

    memset(o, 0, sizeof(*o));
    o->dtype = DD_DTYPE_F32;
    o->iters = 5;
    o->warmup = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'o':
            bad = ddbench_parse_name(optarg, ddbench_coll_name,
                                     DD_COLL_ALLGATHER + 1, &v);
            o->coll = (dd_coll_t)v;
            have_op = !bad;
            break;
        case 'b':
            o->backend = strcmp(optarg, "auto") ? optarg : NULL;
            break;
        case 'n':
            bad = ddbench_parse_bytes(optarg, &o->bytes);
            have_bytes = !bad;
            break;
        case 'd':
            bad = ddbench_parse_name(optarg, ddbench_dtype_name, DD_DTYPE_LAST,
                                     &v);
            o->dtype = (dd_dtype_t)v;
            break;
        case 'r':
            bad =
                ddbench_parse_name(optarg, ddbench_op_name, DD_REDUCE_LAST, &v);
            o->op = (dd_reduce_op_t)v;
            break;
        case 'i':
        case 'w':
            bad = dd_arg_parse_long(optarg, c == 'i', INT_MAX, &lv) != 0;
            *(c == 'i' ? &o->iters : &o->warmup) = (int)lv;
            break;
        case 's':
            if (ddbench_streams_set("ddbench coll", optarg) != 0) {
                ddbench_coll_usage(stderr);
                return -1;
            }
            break;
        case 'j':
            o->json = 1;
            break;
        case 'h':
            ddbench_coll_usage(stdout);
            exit(0);
        default:
            bad = 1;
            break;
        }
        if (bad) {
            if (c != '?') {
                fprintf(stderr, "ddbench coll: invalid value '%s' for --%s\n",
                        optarg,
                        longopts[c == 'o'   ? 0
                                 : c == 'n' ? 2
                                 : c == 'd' ? 3
                                 : c == 'r' ? 4
                                 : c == 'i' ? 5
                                            : 6]
                            .name);
            }
            ddbench_coll_usage(stderr);
            return -1;
        }
    }
    if (!have_op || !have_bytes || optind != argc) {
        fprintf(stderr, "ddbench coll: --op and --bytes are required\n");
        ddbench_coll_usage(stderr);
        return -1;
    }
    size_t es = dd_dtype_size(o->dtype);
    if (o->bytes < es || o->bytes % es != 0) {
        fprintf(stderr,
                "ddbench coll: --bytes %zu: expected at least one %s element "
                "and a multiple of its %zu bytes\n",
                o->bytes, ddbench_dtype_name((int)o->dtype), es);
        return -1;
    }
    return 0;
}

/* Rank r's input element i: small integers, exact in every dtype. */
static double ddbench_value(int rank, size_t i)
{
    return (double)((rank + i) % 8);
}

static void ddbench_store(dd_dtype_t t, void *buf, size_t i, double v)
{
    float f = (float)v;
    uint32_t u;

    switch (t) {
    case DD_DTYPE_F32:
        ((float *)buf)[i] = f;
        break;
    case DD_DTYPE_F64:
        ((double *)buf)[i] = v;
        break;
    case DD_DTYPE_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case DD_DTYPE_I64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case DD_DTYPE_U8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case DD_DTYPE_BF16:
        memcpy(&u, &f, 4); /* small integers: exact, no rounding needed */
        ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
        break;
    default: { /* f16 of a small non-negative integer */
        int e = v == 0 ? 0 : (int)floor(log2(v));
        uint16_t h = v == 0
                         ? 0
                         : (uint16_t)(((e + 15) << 10) |
                                      (uint16_t)((v / ldexp(1, e) - 1) * 1024));
        ((uint16_t *)buf)[i] = h;
        break;
    }
    }
}

static double ddbench_load(dd_dtype_t t, const void *buf, size_t i)
{
    uint16_t h;
    uint32_t u;
    float f;

    switch (t) {
    case DD_DTYPE_F32:
        return ((const float *)buf)[i];
    case DD_DTYPE_F64:
        return ((const double *)buf)[i];
    case DD_DTYPE_I32:
        return ((const int32_t *)buf)[i];
    case DD_DTYPE_I64:
        return (double)((const int64_t *)buf)[i];
    case DD_DTYPE_U8:
        return ((const uint8_t *)buf)[i];
    case DD_DTYPE_BF16:
        u = (uint32_t)((const uint16_t *)buf)[i] << 16;
        memcpy(&f, &u, 4);
        return f;
    default:
        h = ((const uint16_t *)buf)[i];
        if ((h & 0x7c00) == 0) {
            return ldexp(h & 0x3ff, -24);
        }
        return ldexp(1 + (h & 0x3ff) / 1024.0, ((h >> 10) & 0x1f) - 15) *
               (h & 0x8000 ? -1 : 1);
    }
}

typedef struct {
    dd_context_h ctx;
    const ddbench_coll_opts_t *o;
    int rank, world;
    size_t count; /* elements of the operation's count argument */
    size_t n_in;  /* elements of the input */
    size_t n_out; /* elements of the output */
    void *in, *out;
} ddbench_coll_t;

static void ddbench_coll_fill(ddbench_coll_t *b)
{
    for (size_t i = 0; i < b->n_in; i++) {
        ddbench_store(b->o->dtype, b->in, i, ddbench_value(b->rank, i));
    }
}

static double ddbench_coll_expect(const ddbench_coll_t *b, size_t i)
{
    const ddbench_coll_opts_t *o = b->o;
    size_t at =
        o->coll == DD_COLL_REDUCE_SCATTER ? (size_t)b->rank * b->count : 0;
    double acc;

    if (o->coll == DD_COLL_BROADCAST) {
        return ddbench_value(0, i);
    }
    if (o->coll == DD_COLL_ALLGATHER) {
        return ddbench_value((int)(i / b->count), i % b->count);
    }
    acc = ddbench_value(0, at + i);
    for (int r = 1; r < b->world; r++) {
        double v = ddbench_value(r, at + i);
        acc = o->op == DD_REDUCE_MAX   ? fmax(acc, v)
              : o->op == DD_REDUCE_MIN ? fmin(acc, v)
                                       : acc + v;
    }
    if (o->op == DD_REDUCE_AVG) {
        acc /= b->world;
        if (o->dtype == DD_DTYPE_I32 || o->dtype == DD_DTYPE_I64 ||
            o->dtype == DD_DTYPE_U8) {
            acc = trunc(acc);
        }
    }
    if (o->dtype == DD_DTYPE_U8) {
        acc = fmod(acc, 256);
    }
    return acc;
}

static int ddbench_coll_check(const ddbench_coll_t *b)
{
    const void *res = b->o->coll == DD_COLL_BROADCAST ? b->in : b->out;
    double tol = b->o->dtype == DD_DTYPE_BF16  ? 8e-3
                 : b->o->dtype == DD_DTYPE_F16 ? 1e-3
                                               : 1e-6;

    for (size_t i = 0; i < b->n_out; i++) {
        double want = ddbench_coll_expect(b, i);
        double got = ddbench_load(b->o->dtype, res, i);
        if (fabs(got - want) > tol * fabs(want)) {
            fprintf(stderr,
                    "ddbench coll: rank %d: element %zu is %g, expected %g\n",
                    b->rank, i, got, want);
            return 0;
        }
    }
    return 1;
}

static dd_status_t ddbench_coll_once(ddbench_coll_t *b)
{
    const ddbench_coll_opts_t *o = b->o;

    switch (o->coll) {
    case DD_COLL_ALLREDUCE:
        return dd_allreduce(b->ctx, b->in, b->out, b->count, o->dtype, o->op,
                            DD_MEM_HOST);
    case DD_COLL_BROADCAST:
        return dd_broadcast(b->ctx, b->in, b->count, o->dtype, 0, DD_MEM_HOST);
    case DD_COLL_REDUCE_SCATTER:
        return dd_reduce_scatter(b->ctx, b->in, b->out, b->count, o->dtype,
                                 o->op, DD_MEM_HOST);
    default:
        return dd_allgather(b->ctx, b->in, b->out, b->count, o->dtype,
                            DD_MEM_HOST);
    }
}

static int ddbench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bus bandwidth factor, as nccl-tests defines it. */
static double ddbench_bus_factor(dd_coll_t coll, int world)
{
    if (coll == DD_COLL_ALLREDUCE) {
        return 2.0 * (world - 1) / world;
    }
    if (coll == DD_COLL_BROADCAST) {
        return 1.0;
    }
    return (double)(world - 1) / world;
}

static int ddbench_coll_fail(const char *what, dd_status_t status)
{
    fprintf(stderr, "ddbench coll: %s: %s: %s\n", what,
            dd_status_string(status), dd_last_error());
    return 1;
}

/* Runs the iterations; times[i] is this rank's time of iteration i. */
static int ddbench_coll_loop(ddbench_coll_t *b, double *times, int *correct_p)
{
    const ddbench_coll_opts_t *o = b->o;
    int total = o->warmup + o->iters;
    dd_status_t status;

    *correct_p = 1;
    for (int it = 0; it < total; it++) {
        ddbench_coll_fill(b);
        if ((status = dd_barrier(b->ctx)) != DD_OK) {
            return ddbench_coll_fail("barrier", status);
        }
        double t0 = ddbench_now();
        status = ddbench_coll_once(b);
        double t1 = ddbench_now();
        if (status != DD_OK) {
            return ddbench_coll_fail(dd_coll_name(o->coll), status);
        }
        if (it >= o->warmup) {
            times[it - o->warmup] = t1 - t0;
        }
        if (it == 0 || it == total - 1) {
            *correct_p &= ddbench_coll_check(b);
        }
    }
    return 0;
}

/* The report as one line of JSON. */
static void ddbench_coll_json(const ddbench_coll_t *b, const char *backend,
                              double t, int correct)
{
    const ddbench_coll_opts_t *o = b->o;
    double algbw = t > 0 ? (double)o->bytes / t / 1e6 : 0;
    dd_json_writer_t w;

    dd_json_writer_init(&w, stdout, 0);
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    dd_json_key(&w, "op");
    dd_json_string(&w, dd_coll_name(o->coll));
    dd_json_key(&w, "backend");
    dd_json_string(&w, backend);
    dd_json_key(&w, "bytes");
    dd_json_uint(&w, o->bytes);
    dd_json_key(&w, "count");
    dd_json_uint(&w, b->count);
    dd_json_key(&w, "dtype");
    dd_json_string(&w, dd_dtype_name(o->dtype));
    dd_json_key(&w, "reduce");
    dd_json_string(&w, dd_reduce_op_name(o->op));
    dd_json_key(&w, "world");
    dd_json_int(&w, b->world);
    dd_json_key(&w, "streams");
    dd_json_int(&w, o->streams);
    dd_json_key(&w, "iters");
    dd_json_int(&w, o->iters);
    dd_json_key(&w, "time_s");
    dd_json_fixed(&w, t, 9);
    dd_json_key(&w, "algbw_MBps");
    dd_json_fixed(&w, algbw, 3);
    dd_json_key(&w, "busbw_MBps");
    dd_json_fixed(&w, algbw * ddbench_bus_factor(o->coll, b->world), 3);
    dd_json_key(&w, "correct");
    dd_json_bool(&w, correct);
    dd_json_object_end(&w);
    putchar('\n');
}

static void ddbench_coll_report(const ddbench_coll_t *b, const char *backend,
                                double t, int correct)
{
    const ddbench_coll_opts_t *o = b->o;
    double algbw = t > 0 ? (double)o->bytes / t / 1e6 : 0;
    double busbw = algbw * ddbench_bus_factor(o->coll, b->world);

    printf("# ddbench coll: %s through %s on %d ranks, %d stream%s, %s %s, "
           "median of %d after %d warm-up\n",
           dd_coll_name(o->coll), backend, b->world, o->streams,
           o->streams == 1 ? "" : "s", dd_dtype_name(o->dtype),
           dd_reduce_op_name(o->op), o->iters, o->warmup);
    printf("# %14s %12s %5s %12s %13s %13s %8s\n", "size(B)", "count", "type",
           "time(s)", "algbw(MB/s)", "busbw(MB/s)", "correct");
    printf("  %14zu %12zu %5s %12.6f %13.2f %13.2f %8s\n", o->bytes, b->count,
           dd_dtype_name(o->dtype), t, algbw, busbw, correct ? "yes" : "NO");
    if (o->json) {
        ddbench_coll_json(b, backend, t, correct);
    }
    fflush(stdout);
}

/* Times, correctness and the report, agreed by every rank. */
static int ddbench_coll_measure(ddbench_coll_t *b, const char *backend)
{
    const ddbench_coll_opts_t *o = b->o;
    double *times = calloc((size_t)o->iters, sizeof(double));
    int32_t correct;
    int rc = 1;

    if (times == NULL || ddbench_coll_loop(b, times, (int *)&correct)) {
        goto out;
    }
    /* An iteration takes as long as its slowest rank. */
    dd_status_t status = dd_allreduce(b->ctx, times, times, (size_t)o->iters,
                                      DD_DTYPE_F64, DD_REDUCE_MAX, DD_MEM_HOST);
    if (status == DD_OK) {
        status = dd_allreduce(b->ctx, &correct, &correct, 1, DD_DTYPE_I32,
                              DD_REDUCE_MIN, DD_MEM_HOST);
    }
    if (status != DD_OK) {
        rc = ddbench_coll_fail("gathering the times", status);
        goto out;
    }
    qsort(times, (size_t)o->iters, sizeof(double), ddbench_cmp_double);
    if (b->rank == 0) {
        ddbench_coll_report(b, backend, times[o->iters / 2], correct);
    }
    rc = correct ? 0 : 1;
out:
    free(times);
    return rc;
}

static int ddbench_coll_setup(ddbench_coll_t *b)
{
    const ddbench_coll_opts_t *o = b->o;
    size_t es = dd_dtype_size(o->dtype), w = (size_t)b->world;

    b->count = o->bytes / es;
    b->n_in = b->n_out = b->count;
    if (o->coll == DD_COLL_REDUCE_SCATTER) {
        b->count = o->bytes / es / w;
        b->n_in = b->count * w;
        b->n_out = b->count;
    } else if (o->coll == DD_COLL_ALLGATHER) {
        b->count = o->bytes / es / w;
        b->n_in = b->count;
        b->n_out = b->count * w;
    }
    b->in = malloc(b->n_in * es + 1);
    b->out = malloc(b->n_out * es + 1);
    if (b->in == NULL || b->out == NULL) {
        fprintf(stderr, "ddbench coll: no memory for %zu bytes\n", o->bytes);
        return 1;
    }
    return 0;
}

static int ddbench_coll(int argc, char **argv)
{
    ddbench_coll_opts_t o;
    ddbench_coll_t b;
    int rc;

    if (ddbench_coll_parse(argc, argv, &o)) {
        return 2;
    }
    /* The backend is chosen at dd_init, through the same variable a user
     * would set. */
    if (o.backend != NULL && setenv("DREAMDDP_BACKENDS", o.backend, 1) != 0) {
        return 1;
    }
    memset(&b, 0, sizeof(b));
    b.o = &o;
    dd_status_t status = dd_init(NULL, &b.ctx);
    if (status != DD_OK) {
        return ddbench_coll_fail("dd_init", status);
    }
    b.rank = dd_rank(b.ctx);
    b.world = dd_world_size(b.ctx);
    o.streams = ddbench_streams(b.ctx);
    const char *backend = dd_backend_name(b.ctx, o.coll, DD_MEM_HOST, o.bytes);
    if (backend == NULL) {
        rc = ddbench_coll_fail("no backend", DD_ERR_UNSUPPORTED);
    } else {
        rc = ddbench_coll_setup(&b) || ddbench_coll_measure(&b, backend);
    }
    free(b.in);
    free(b.out);
    status = dd_finalize(b.ctx);
    if (status != DD_OK && rc == 0) {
        rc = ddbench_coll_fail("dd_finalize", status);
    }
    return rc;
}

static const ddbench_cmd_t ddbench_cmds[] = {
    {"coll", ddbench_coll,
     "time one collective through one backend, check it on every rank"},
    {"codec", ddbench_codec_main,
     "time one codec's encode and decode on one core, and its ratio"},
    {"plan", ddbench_plan_main,
     "plan a profile's syncs and model every strategy's time per iteration"},
    {"scale", ddbench_scale_main,
     "model every strategy and route at 8 to 1,024 GPUs from a profile"},
    {"sync", ddbench_sync_main,
     "sync one layer through the context's route (aggregators serve)"},
    {"timeline", ddbench_timeline_main,
     "merge per-rank DREAMDDP_TIMELINE traces into one on one clock"},
    {"train-sim", ddbench_train_main,
     "run the library on an emulated model, measured against the model"},
};

static void ddbench_usage(FILE *out)
{
    fprintf(out, "usage: ddbench COMMAND [OPTIONS]   (ddbench COMMAND --help)"
                 "\n       ddbench --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(ddbench_cmds) / sizeof(*ddbench_cmds); i++) {
        fprintf(out, "  %-10s %s\n", ddbench_cmds[i].name,
                ddbench_cmds[i].summary);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 &&
        (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0)) {
        printf("ddbench (dreamddp) %s\n", dd_version_string());
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "--help") == 0) {
        ddbench_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof(ddbench_cmds) / sizeof(*ddbench_cmds); i++) {
        if (strcmp(argv[1], ddbench_cmds[i].name) == 0) {
            return ddbench_cmds[i].run(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "ddbench: unknown command '%s'\n", argv[1]);
    ddbench_usage(stderr);
    return 2;
}
