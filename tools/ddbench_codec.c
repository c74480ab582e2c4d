/*
 * ddbench codec --codec SPEC --bytes SIZE: one codec on one core. Times
 * encode and decode of one layer (median of the timed iterations, after
 * one untimed), and for codecs with a multi-round protocol the protocol's
 * rounds on one rank (each round's sum is the rank's own output); prints
 * the throughput in GB/s of input bytes (the median iteration and the
 * fastest) and the compression ratio (wire bytes / input bytes). No
 * communication, no library context.
 */
#include "compress/codec.h"
#include "core/json_write.h"
#include "ddbench.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *spec;
    size_t bytes, rows, cols;
    dd_dtype_t dtype;
    int iters, json;
} ddbench_codec_opts_t;

/* The timed phases: encode, decode, the multi-round protocol. */
enum { DDBENCH_ENCODE, DDBENCH_DECODE, DDBENCH_ROUNDS, DDBENCH_PHASES };

typedef struct {
    size_t count, wire_bytes;
    /* Per phase, the median and the fastest iteration's seconds; 0 for a
     * phase the codec does not have. On a shared machine the fastest says
     * what the code does, the median what a job met. */
    double median_s[DDBENCH_PHASES], best_s[DDBENCH_PHASES];
} ddbench_codec_result_t;

static void ddbench_codec_usage(FILE *out)
{
    fprintf(out,
            "usage: ddbench codec --codec SPEC --bytes SIZE [--iters N] "
            "[--dtype T]\n"
            "                     [--rows R --cols C] [--json]\n"
            "\n"
            "  --codec    a spec: none, fp16, bf16, topk:0.01, powersgd:4\n"
            "  --bytes    the layer's input bytes: 64M, 100MB, 1GiB\n"
            "  --iters    timed iterations (default 5), after one untimed\n"
            "  --dtype    f32 (default), f64, f16, bf16\n"
            "  --rows, --cols  the layer's shape (powersgd); default: the "
            "squarest\n"
            "             rows x cols of its elements\n"
            "  --json     one JSON line after the table\n");
}

static int ddbench_codec_parse(int argc, char **argv, ddbench_codec_opts_t *o)
{
    static const struct option longopts[] = {
        {"codec", required_argument, 0, 'c'},
        {"bytes", required_argument, 0, 'b'},
        {"iters", required_argument, 0, 'i'},
        {"dtype", required_argument, 0, 'd'},
        {"rows", required_argument, 0, 'r'},
        {"cols", required_argument, 0, 'C'},
        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    static const char *const P = "ddbench codec";
    int opt;
    long v;

    *o = (ddbench_codec_opts_t){.dtype = DD_DTYPE_F32, .iters = 5};
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            o->spec = optarg;
            break;
        case 'b':
            if (ddbench_parse_bytes(optarg, &o->bytes) != 0) {
                fprintf(stderr, "ddbench codec: bad --bytes '%s'\n", optarg);
                return 2;
            }
            break;
        case 'i':
            if (dd_arg_int(P, "--iters", optarg, 1, INT_MAX, &o->iters)) {
                return 2;
            }
            break;
        case 'd':
            o->dtype = DD_DTYPE_LAST;
            for (int d = 0; d < DD_DTYPE_LAST; d++) {
                if (strcmp(optarg, dd_dtype_name((dd_dtype_t)d)) == 0) {
                    o->dtype = (dd_dtype_t)d;
                }
            }
            if (o->dtype == DD_DTYPE_LAST) {
                fprintf(stderr, "ddbench codec: unknown --dtype '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'r':
        case 'C':
            if (dd_arg_long(P, opt == 'r' ? "--rows" : "--cols", optarg, 1,
                            1L << 40, &v)) {
                return 2;
            }
            *(opt == 'r' ? &o->rows : &o->cols) = (size_t)v;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'h':
            ddbench_codec_usage(stdout);
            exit(0);
        default:
            ddbench_codec_usage(stderr);
            return 2;
        }
    }
    if (o->spec == NULL || o->bytes == 0 || o->iters < 1 || optind != argc) {
        ddbench_codec_usage(stderr);
        return 2;
    }
    return 0;
}

/* The squarest rows x cols of count (rows <= cols), unless given. */
static int ddbench_codec_shape(ddbench_codec_opts_t *o, size_t count)
{
    if (o->rows == 0 && o->cols == 0) {
        size_t r = (size_t)sqrt((double)count);
        while (r > 1 && count % r != 0) {
            r--;
        }
        o->rows = r;
        o->cols = r > 0 ? count / r : 0;
    } else if (o->rows * o->cols != count) {
        fprintf(stderr,
                "ddbench codec: --rows %zu x --cols %zu is not the %zu "
                "elements of --bytes %zu\n",
                o->rows, o->cols, count, o->bytes);
        return 2;
    }
    return 0;
}

static int ddbench_codec_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Values in [-1, 1) of the layer's dtype, none of them equal. */
static void ddbench_codec_fill(void *buf, size_t count, dd_dtype_t dtype)
{
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < count; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        double v = (double)x * 0x1p-31 - 1.0;
        if (dtype == DD_DTYPE_F64) {
            ((double *)buf)[i] = v;
        } else if (dtype == DD_DTYPE_F32) {
            ((float *)buf)[i] = (float)v;
        } else {
            ((uint16_t *)buf)[i] = (uint16_t)(x >> 16 & 0xbbffu);
        }
    }
}

static int ddbench_codec_fail(const char *what, dd_status_t status)
{
    fprintf(stderr, "ddbench codec: %s: %s: %s\n", what,
            dd_status_string(status), dd_last_error());
    return 1;
}

/* One pass of the multi-round protocol on one rank, in and out of buf. */
static dd_status_t ddbench_codec_rounds(dd_codec_ref_t *ref,
                                        dd_codec_state_t *st, const void *in,
                                        size_t in_bytes, void *a, void *b,
                                        void *out, size_t count,
                                        dd_dtype_t dtype)
{
    unsigned n = ref->ops->state_rounds(ref->codec, st);
    size_t bytes = in_bytes;
    dd_status_t status = DD_OK;

    for (unsigned r = 0; r < n && status == DD_OK; r++) {
        status = ref->ops->encode_round(ref->codec, st, r, r == 0 ? in : b,
                                        bytes, a, &bytes);
        void *t = a;
        a = b;
        b = t;
    }
    if (status == DD_OK) {
        status =
            ref->ops->decode_round(ref->codec, st, b, bytes, out, count, dtype);
    }
    return status;
}

typedef struct {
    void *in, *wire, *wire2, *out;
} ddbench_codec_bufs_t;

static int ddbench_codec_loop(dd_codec_ref_t *ref, dd_codec_state_t *st,
                              const ddbench_codec_opts_t *o,
                              const ddbench_codec_bufs_t *m,
                              ddbench_codec_result_t *res, double *t)
{
    size_t count = res->count;
    dd_status_t status;

    for (int phase = 0; phase < DDBENCH_PHASES; phase++) {
        if (phase == DDBENCH_ROUNDS && ref->ops->rounds == 0) {
            break;
        }
        for (int it = 0; it <= o->iters; it++) {
            double t0 = dd_time_now();
            if (phase == DDBENCH_ENCODE) {
                status = ref->ops->encode(ref->codec, st, m->in, count,
                                          o->dtype, m->wire, &res->wire_bytes);
            } else if (phase == DDBENCH_DECODE) {
                status =
                    ref->ops->decode(ref->codec, st, m->wire, res->wire_bytes,
                                     m->out, count, o->dtype);
            } else {
                status =
                    ddbench_codec_rounds(ref, st, m->in, o->bytes, m->wire,
                                         m->wire2, m->out, count, o->dtype);
            }
            if (status != DD_OK) {
                static const char *const what[] = {"encode", "decode",
                                                   "rounds"};
                return ddbench_codec_fail(what[phase], status);
            }
            if (it > 0) { /* the first is untimed: page faults, caches */
                t[it - 1] = dd_time_now() - t0;
            }
        }
        qsort(t, (size_t)o->iters, sizeof(double), ddbench_codec_cmp);
        res->median_s[phase] = t[o->iters / 2];
        res->best_s[phase] = t[0];
    }
    return 0;
}

static int ddbench_codec_measure(dd_codec_ref_t *ref,
                                 const ddbench_codec_opts_t *o,
                                 ddbench_codec_result_t *res)
{
    size_t count = res->count, wire = 0, esize = dd_dtype_size(o->dtype);
    dd_codec_state_t *st = NULL;
    ddbench_codec_bufs_t m = {0};
    double *t = calloc((size_t)o->iters, sizeof(double));
    int rc = 1;

    dd_status_t status = ref->ops->encoded_size(ref->codec, count, o->dtype,
                                                o->rows, o->cols, &wire);
    if (status == DD_OK) {
        status = ref->ops->state_create(ref->codec, count, o->dtype, o->rows,
                                        o->cols, &st);
    }
    if (status != DD_OK) {
        free(t);
        return ddbench_codec_fail(o->spec, status);
    }
    /* The rounds' outputs are smaller than the layer in f32. */
    size_t big = count * sizeof(float) > wire ? count * sizeof(float) : wire;
    m.in = malloc(count * esize + 1);
    m.out = malloc(count * esize + 1);
    m.wire = malloc(big + 1);
    m.wire2 = malloc(big + 1);
    if (t == NULL || !m.in || !m.out || !m.wire || !m.wire2) {
        fprintf(stderr, "ddbench codec: no memory for %zu bytes\n", o->bytes);
        goto out;
    }
    ddbench_codec_fill(m.in, count, o->dtype);
    memset(m.out, 0, count * esize);
    memset(m.wire, 0, big);
    memset(m.wire2, 0, big);
    rc = ddbench_codec_loop(ref, st, o, &m, res, t);
out:
    ref->ops->state_free(ref->codec, st);
    free(m.in);
    free(m.out);
    free(m.wire);
    free(m.wire2);
    free(t);
    return rc;
}

static double ddbench_codec_gbps(size_t bytes, double s)
{
    return s > 0 ? (double)bytes / s / 1e9 : 0;
}

static void ddbench_codec_json(const ddbench_codec_opts_t *o,
                               const ddbench_codec_result_t *r)
{
    static const char *const names[] = {"encode", "decode", "rounds"};
    char key[32];
    dd_json_writer_t w;

    dd_json_writer_init(&w, stdout, 0);
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    dd_json_key(&w, "codec");
    dd_json_string(&w, o->spec);
    dd_json_key(&w, "dtype");
    dd_json_string(&w, dd_dtype_name(o->dtype));
    dd_json_key(&w, "bytes");
    dd_json_uint(&w, o->bytes);
    dd_json_key(&w, "count");
    dd_json_uint(&w, r->count);
    dd_json_key(&w, "rows");
    dd_json_uint(&w, o->rows);
    dd_json_key(&w, "cols");
    dd_json_uint(&w, o->cols);
    dd_json_key(&w, "iters");
    dd_json_int(&w, o->iters);
    dd_json_key(&w, "wire_bytes");
    dd_json_uint(&w, r->wire_bytes);
    dd_json_key(&w, "ratio");
    dd_json_fixed(&w, (double)r->wire_bytes / (double)o->bytes, 6);
    for (int p = 0; p < DDBENCH_PHASES; p++) {
        if (r->median_s[p] <= 0) {
            continue;
        }
        snprintf(key, sizeof(key), "%s_s", names[p]);
        dd_json_key(&w, key);
        dd_json_fixed(&w, r->median_s[p], 9);
        snprintf(key, sizeof(key), "%s_GBps", names[p]);
        dd_json_key(&w, key);
        dd_json_fixed(&w, ddbench_codec_gbps(o->bytes, r->median_s[p]), 3);
        snprintf(key, sizeof(key), "%s_best_GBps", names[p]);
        dd_json_key(&w, key);
        dd_json_fixed(&w, ddbench_codec_gbps(o->bytes, r->best_s[p]), 3);
    }
    dd_json_object_end(&w);
    putchar('\n');
}

static void ddbench_codec_report(const ddbench_codec_opts_t *o,
                                 const ddbench_codec_result_t *r)
{
    printf("# ddbench codec: %s on one core, %s layer of %zu elements "
           "(%zu x %zu), %d timed after 1 untimed\n",
           o->spec, dd_dtype_name(o->dtype), r->count, o->rows, o->cols,
           o->iters);
    printf("# GB/s of input bytes, median (fastest); rounds: the "
           "multi-round protocol on one rank\n");
    printf("# %12s %12s %8s %18s %18s %18s\n", "size(B)", "wire(B)", "ratio",
           "encode(GB/s)", "decode(GB/s)", "rounds(GB/s)");
    printf("  %12zu %12zu %8.5f", o->bytes, r->wire_bytes,
           (double)r->wire_bytes / (double)o->bytes);
    for (int p = 0; p < DDBENCH_PHASES; p++) {
        char cell[48] = "-";
        if (r->median_s[p] > 0) {
            snprintf(cell, sizeof(cell), "%.3f (%.3f)",
                     ddbench_codec_gbps(o->bytes, r->median_s[p]),
                     ddbench_codec_gbps(o->bytes, r->best_s[p]));
        }
        printf(" %18s", cell);
    }
    putchar('\n');
    if (o->json) {
        ddbench_codec_json(o, r);
    }
    fflush(stdout);
}

int ddbench_codec_main(int argc, char **argv)
{
    ddbench_codec_opts_t o;
    ddbench_codec_result_t res = {0};
    dd_codec_ref_t ref;
    int rc = ddbench_codec_parse(argc, argv, &o);

    if (rc != 0) {
        return rc;
    }
    res.count = o.bytes / dd_dtype_size(o.dtype);
    o.bytes = res.count * dd_dtype_size(o.dtype);
    if ((rc = ddbench_codec_shape(&o, res.count)) != 0) {
        return rc;
    }
    dd_status_t status = dd_codec_open(o.spec, &ref);
    if (status != DD_OK) {
        return ddbench_codec_fail("--codec", status);
    }
    rc = ddbench_codec_measure(&ref, &o, &res);
    if (rc == 0) {
        ddbench_codec_report(&o, &res);
    }
    dd_codec_close(&ref);
    return rc;
}
