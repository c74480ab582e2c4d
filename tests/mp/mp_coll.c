/*
 * mp_coll: a multi-rank test of the public collectives through one backend
 * (DREAMDDP_BACKENDS, as set by the caller). Every rank runs every operation,
 * dtype, reduction and size, and checks its result against a reference computed
 * in double from every rank's input. Run it under ddrun:
 *
 *   mp_coll [--sizes 0,1,7] [--dtypes f32,f16] [--ops sum,avg] [--large N]
 *           [--mismatch count|dtype|op] [--exit-mid]
 *
 * --dtypes and --ops keep only those dtypes and reductions (names as
 * dd_dtype_name and dd_reduce_op_name give them; default: all).
 * --large N adds an f32 sum allreduce of N elements. --mismatch makes rank 0
 * post a different collective and --exit-mid makes the last rank leave in
 * the middle of one: then every other rank must fail within DREAMDDP_TIMEOUT_S.
 */
#include <dreamddp.h>
#include <dreamddp/introspect.h>

#include "core/half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MP_MAX_SIZES 16

typedef struct {
    size_t sizes[MP_MAX_SIZES];
    int n_sizes;
    size_t large;
    const char *dtypes; /* comma-separated names, or NULL for all */
    const char *ops;
    const char *mismatch;
    int exit_mid;
} mp_opts_t;

static double mp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rank r's input element i: small multiples of 1/4 (exact in every float
 * type, so that sums are exact whatever the order of reduction). */
static double mp_value(dd_dtype_t dtype, int rank, size_t i, int salt)
{
    long v = (long)((rank * 7 + i * 13 + (size_t)salt) % 17);

    if (dtype == DD_DTYPE_U8) {
        return (double)v;
    }
    if (dtype == DD_DTYPE_I32 || dtype == DD_DTYPE_I64) {
        return (double)(v - 8);
    }
    return (double)(v - 8) * 0.25;
}

static void mp_store(dd_dtype_t dtype, void *buf, size_t i, double v)
{
    switch (dtype) {
    case DD_DTYPE_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case DD_DTYPE_F64:
        ((double *)buf)[i] = v;
        break;
    case DD_DTYPE_F16:
        ((uint16_t *)buf)[i] = dd_half_f32_to_f16((float)v);
        break;
    case DD_DTYPE_BF16:
        ((uint16_t *)buf)[i] = dd_half_f32_to_bf16((float)v);
        break;
    case DD_DTYPE_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case DD_DTYPE_I64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    default:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    }
}

static double mp_load(dd_dtype_t dtype, const void *buf, size_t i)
{
    switch (dtype) {
    case DD_DTYPE_F32:
        return ((const float *)buf)[i];
    case DD_DTYPE_F64:
        return ((const double *)buf)[i];
    case DD_DTYPE_F16:
        return dd_half_f16_to_f32(((const uint16_t *)buf)[i]);
    case DD_DTYPE_BF16:
        return dd_half_bf16_to_f32(((const uint16_t *)buf)[i]);
    case DD_DTYPE_I32:
        return ((const int32_t *)buf)[i];
    case DD_DTYPE_I64:
        return (double)((const int64_t *)buf)[i];
    default:
        return ((const uint8_t *)buf)[i];
    }
}

/* The reduction of element i over every rank, in double. */
static double mp_expect(dd_dtype_t dtype, dd_reduce_op_t op, int world,
                        size_t i, int salt)
{
    double acc = mp_value(dtype, 0, i, salt);

    for (int r = 1; r < world; r++) {
        double v = mp_value(dtype, r, i, salt);
        acc = op == DD_REDUCE_MAX   ? fmax(acc, v)
              : op == DD_REDUCE_MIN ? fmin(acc, v)
                                    : acc + v;
    }
    if (op == DD_REDUCE_AVG) {
        acc /= world;
        if (dtype == DD_DTYPE_I32 || dtype == DD_DTYPE_I64 ||
            dtype == DD_DTYPE_U8) {
            acc = trunc(acc);
        }
    }
    return acc;
}

/* How far a result may be from the double reference: the rounding of the
 * final division for averages, nothing else (the inputs sum exactly). */
static double mp_tolerance(dd_dtype_t dtype, double ref)
{
    static const double rel[DD_DTYPE_LAST] = {1e-6, 1e-14, 1e-3, 8e-3, 0, 0, 0};
    return rel[dtype] * fabs(ref);
}

static int mp_check(const char *what, dd_dtype_t dtype, const void *buf,
                    size_t n, double (*ref)(size_t, void *), void *arg)
{
    for (size_t i = 0; i < n; i++) {
        double want = ref(i, arg), got = mp_load(dtype, buf, i);
        if (fabs(got - want) > mp_tolerance(dtype, want)) {
            fprintf(stderr, "mp_coll: %s %s: element %zu is %g, expected %g\n",
                    what, dd_dtype_name(dtype), i, got, want);
            return 1;
        }
    }
    return 0;
}

typedef struct {
    dd_dtype_t dtype;
    dd_reduce_op_t op;
    int world;
    int rank;
    size_t n;
    int salt;
    int root;
} mp_case_t;

static double mp_ref_reduce(size_t i, void *arg)
{
    mp_case_t *c = arg;
    return mp_expect(c->dtype, c->op, c->world, i, c->salt);
}

static double mp_ref_rs(size_t i, void *arg)
{
    mp_case_t *c = arg;
    return mp_expect(c->dtype, c->op, c->world, (size_t)c->rank * c->n + i,
                     c->salt);
}

static double mp_ref_ag(size_t i, void *arg)
{
    mp_case_t *c = arg;
    return mp_value(c->dtype, (int)(i / c->n), i % c->n, c->salt);
}

static double mp_ref_bcast(size_t i, void *arg)
{
    mp_case_t *c = arg;
    return mp_value(c->dtype, c->root, i, c->salt);
}

static void *mp_alloc(size_t n, dd_dtype_t dtype)
{
    void *p = malloc(n * dd_dtype_size(dtype) + 1);
    if (p == NULL) {
        fprintf(stderr, "mp_coll: out of memory\n");
        exit(1);
    }
    return p;
}

static void mp_fill(mp_case_t *c, void *buf, size_t n, int rank, size_t base)
{
    for (size_t i = 0; i < n; i++) {
        mp_store(c->dtype, buf, i, mp_value(c->dtype, rank, base + i, c->salt));
    }
}

static int mp_fail(const char *what, dd_status_t status)
{
    fprintf(stderr, "mp_coll: %s: %s: %s\n", what, dd_status_string(status),
            dd_last_error());
    return 1;
}

/* Allreduce (in place and not) and reduce-scatter of one case. */
static int mp_run_reductions(dd_context_h ctx, mp_case_t *c)
{
    size_t n = c->n, w = (size_t)c->world;
    void *in = mp_alloc(n * w, c->dtype), *out = mp_alloc(n * w, c->dtype);
    dd_status_t status;
    int bad = 0;

    mp_fill(c, in, n, c->rank, 0);
    status = c->salt % 2
                 ? dd_allreduce(ctx, in, in, n, c->dtype, c->op, DD_MEM_HOST)
                 : dd_allreduce(ctx, in, out, n, c->dtype, c->op, DD_MEM_HOST);
    if (status != DD_OK) {
        bad = mp_fail("allreduce", status);
    } else {
        bad = mp_check("allreduce", c->dtype, c->salt % 2 ? in : out, n,
                       mp_ref_reduce, c);
    }
    mp_fill(c, in, n * w, c->rank, 0);
    status = dd_reduce_scatter(ctx, in, out, n, c->dtype, c->op, DD_MEM_HOST);
    if (!bad && status != DD_OK) {
        bad = mp_fail("reduce_scatter", status);
    } else if (!bad) {
        bad = mp_check("reduce_scatter", c->dtype, out, n, mp_ref_rs, c);
    }
    free(in);
    free(out);
    return bad;
}

static int mp_run_moves(dd_context_h ctx, mp_case_t *c)
{
    size_t n = c->n, w = (size_t)c->world;
    void *in = mp_alloc(n, c->dtype), *out = mp_alloc(n * w, c->dtype);
    dd_status_t status;
    int bad = 0;

    mp_fill(c, in, n, c->rank, 0);
    status = dd_allgather(ctx, in, out, n, c->dtype, DD_MEM_HOST);
    if (status != DD_OK) {
        bad = mp_fail("allgather", status);
    } else {
        bad = mp_check("allgather", c->dtype, out, n * w, mp_ref_ag, c);
    }
    c->root = (int)(n % w);
    mp_fill(c, in, n, c->rank, 0);
    status = dd_broadcast(ctx, in, n, c->dtype, c->root, DD_MEM_HOST);
    if (!bad && status != DD_OK) {
        bad = mp_fail("broadcast", status);
    } else if (!bad) {
        bad = mp_check("broadcast", c->dtype, in, n, mp_ref_bcast, c);
    }
    free(in);
    free(out);
    return bad;
}

/* Whether name is in the comma-separated list (NULL: every name is). */
static int mp_listed(const char *list, const char *name)
{
    size_t len = strlen(name);

    for (const char *p = list; p != NULL; p = strchr(p, ',')) {
        p += *p == ',';
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0')) {
            return 1;
        }
    }
    return list == NULL;
}

static int mp_run_matrix(dd_context_h ctx, const mp_opts_t *o, int *count_p)
{
    mp_case_t c = {.world = dd_world_size(ctx), .rank = dd_rank(ctx)};

    for (int s = 0; s < o->n_sizes; s++) {
        for (int d = 0; d < DD_DTYPE_LAST; d++) {
            c.dtype = (dd_dtype_t)d;
            c.n = o->sizes[s];
            if (!mp_listed(o->dtypes, dd_dtype_name(c.dtype))) {
                continue;
            }
            for (int op = 0; op < DD_REDUCE_LAST; op++) {
                c.op = (dd_reduce_op_t)op;
                if (!mp_listed(o->ops, dd_reduce_op_name(c.op))) {
                    continue;
                }
                c.salt = s + d + op;
                if (mp_run_reductions(ctx, &c)) {
                    return 1;
                }
                *count_p += 2;
            }
            if (mp_run_moves(ctx, &c)) {
                return 1;
            }
            *count_p += 2;
        }
    }
    if (o->large > 0) {
        c.dtype = DD_DTYPE_F32;
        c.op = DD_REDUCE_SUM;
        c.n = o->large;
        c.salt = 1;
        void *buf = mp_alloc(c.n, c.dtype);
        mp_fill(&c, buf, c.n, c.rank, 0);
        dd_status_t status =
            dd_allreduce(ctx, buf, buf, c.n, c.dtype, c.op, DD_MEM_HOST);
        int bad = status != DD_OK ? mp_fail("large allreduce", status)
                                  : mp_check("large allreduce", c.dtype, buf,
                                             c.n, mp_ref_reduce, &c);
        free(buf);
        *count_p += 1;
        return bad;
    }
    return 0;
}

/* Rank 0 posts another collective than the others: all must fail. */
static int mp_run_mismatch(dd_context_h ctx, const char *kind, double limit)
{
    size_t n = 1000;
    dd_dtype_t dtype = DD_DTYPE_F32;
    dd_reduce_op_t op = DD_REDUCE_SUM;
    float *buf = calloc(2000, sizeof(float));

    if (dd_rank(ctx) == 0) {
        if (strcmp(kind, "count") == 0) {
            n = 2000;
        } else if (strcmp(kind, "dtype") == 0) {
            dtype = DD_DTYPE_I32;
        } else {
            op = DD_REDUCE_MAX;
        }
    }
    double t0 = mp_now();
    dd_status_t status = dd_allreduce(ctx, buf, buf, n, dtype, op, DD_MEM_HOST);
    double took = mp_now() - t0;
    free(buf);
    if (status == DD_OK) {
        fprintf(stderr, "mp_coll: mismatched %s went unnoticed\n", kind);
        return 1;
    }
    printf("mp_coll: mismatched %s failed after %.1f s: %s: %s\n", kind, took,
           dd_status_string(status), dd_last_error());
    return took > limit;
}

/* The last rank leaves in the middle of a collective. */
static int mp_run_exit_mid(dd_context_h ctx, double limit)
{
    size_t n = 4u << 20;
    float *buf = calloc(n, sizeof(float));
    int last = dd_rank(ctx) == dd_world_size(ctx) - 1;

    if (last) {
        dd_barrier(ctx);
        printf("mp_coll: rank %d leaves\n", dd_rank(ctx));
        fflush(stdout);
        _exit(0);
    }
    dd_barrier(ctx);
    double t0 = mp_now();
    dd_status_t status = dd_allreduce(ctx, buf, buf, n, DD_DTYPE_F32,
                                      DD_REDUCE_SUM, DD_MEM_HOST);
    double took = mp_now() - t0;
    free(buf);
    if (status == DD_OK) {
        fprintf(stderr, "mp_coll: a lost rank went unnoticed\n");
        return 1;
    }
    printf("mp_coll: lost rank noticed after %.1f s: %s: %s\n", took,
           dd_status_string(status), dd_last_error());
    return took > limit;
}

static int mp_parse(int argc, char **argv, mp_opts_t *o)
{
    static const size_t defaults[] = {0, 1, 7, 4099, 70001};

    memset(o, 0, sizeof(*o));
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
        o->sizes[o->n_sizes++] = defaults[i];
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            char *p = argv[++i];
            o->n_sizes = 0;
            while (*p != '\0' && o->n_sizes < MP_MAX_SIZES) {
                o->sizes[o->n_sizes++] = strtoull(p, &p, 10);
                p += *p == ',';
            }
        } else if (strcmp(argv[i], "--dtypes") == 0 && i + 1 < argc) {
            o->dtypes = argv[++i];
        } else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc) {
            o->ops = argv[++i];
        } else if (strcmp(argv[i], "--large") == 0 && i + 1 < argc) {
            o->large = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--mismatch") == 0 && i + 1 < argc) {
            o->mismatch = argv[++i];
        } else if (strcmp(argv[i], "--exit-mid") == 0) {
            o->exit_mid = 1;
        } else {
            fprintf(stderr, "mp_coll: unknown argument %s\n", argv[i]);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    mp_opts_t o;
    dd_context_h ctx;
    int count = 0, bad;

    if (mp_parse(argc, argv, &o)) {
        return 2;
    }
    dd_status_t status = dd_init(NULL, &ctx);
    if (status != DD_OK) {
        return mp_fail("dd_init", status);
    }
    const char *t = getenv("DREAMDDP_TIMEOUT_S");
    double limit = (t ? atof(t) : 30.0) * 2 + 5;
    if (o.mismatch != NULL) {
        bad = mp_run_mismatch(ctx, o.mismatch, limit);
        fflush(stdout);
        _exit(bad); /* the store may be gone with rank 0 */
    }
    if (o.exit_mid) {
        bad = mp_run_exit_mid(ctx, limit);
        fflush(stdout);
        _exit(bad);
    }
    const char *name =
        dd_backend_name(ctx, DD_COLL_ALLREDUCE, DD_MEM_HOST, 1u << 20);
    bad = mp_run_matrix(ctx, &o, &count);
    if (!bad && dd_rank(ctx) == 0) {
        printf("mp_coll: %s: %d collectives correct on %d ranks\n",
               name ? name : "?", count, dd_world_size(ctx));
    }
    status = dd_finalize(ctx);
    if (status != DD_OK && !bad) {
        bad = mp_fail("dd_finalize", status);
    }
    return bad;
}
