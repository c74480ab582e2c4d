/*
 * Unit tests of the shared collectives (src/backends/coll): f16/bf16
 * rounding, reductions, and every algorithm executed for 1 to 5 ranks in one
 * process over an in-memory transport, with chunks small enough that rings
 * and trees pipeline, against references computed in double.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/coll/coll.h"
#include "core/half.h"
#include "core/reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- conversions and reductions ---------------------------------------- */

static void test_f16_rounding(void **state)
{
    assert_int_equal(dd_half_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(dd_half_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(dd_half_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(dd_half_f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(dd_half_f32_to_f16(65520.0f), 0x7c00); /* tie: even */
    assert_int_equal(dd_half_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(dd_half_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    assert_int_equal(dd_half_f32_to_f16(0x1p-24f), 0x0001);
    assert_int_equal(dd_half_f32_to_f16(0x1p-25f), 0x0000); /* tie: even */
    assert_int_equal(dd_half_f32_to_f16(3 * 0x1p-25f), 0x0002);
    assert_int_equal(dd_half_f32_to_f16(0x1p-14f - 0x1p-26f), 0x0400);
    assert_int_equal(dd_half_f32_to_f16(INFINITY), 0x7c00);
    assert_int_equal(dd_half_f32_to_f16(NAN) & 0x7e00, 0x7e00);
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            continue; /* NaN payloads are not kept */
        }
        assert_int_equal(dd_half_f32_to_f16(dd_half_f16_to_f32((uint16_t)h)),
                         h);
    }
    assert_true(dd_half_f16_to_f32(0x0001) == 0x1p-24f);
}

static void test_bf16_rounding(void **state)
{
    assert_int_equal(dd_half_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(dd_half_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    assert_int_equal(dd_half_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    assert_int_equal(dd_half_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    assert_int_equal(dd_half_f32_to_bf16(-INFINITY), 0xff80);
    assert_true(isnan(dd_half_bf16_to_f32(dd_half_f32_to_bf16(NAN))));
    assert_true(dd_half_bf16_to_f32(0x4049) == 3.140625f);
}

static void test_reduce(void **state)
{
    float f[3] = {1, -2, 3}, g[3] = {0.5f, 4, -1};
    uint8_t u[2] = {250, 7}, v[2] = {10, 9};
    int32_t i[2] = {INT32_MAX, -7}, j[2] = {1, 3};
    uint16_t h[1] = {dd_half_f32_to_f16(2048)}, k[1] = {dd_half_f32_to_f16(1)};

    dd_coll_reduce(f, g, 3, DD_DTYPE_F32, DD_REDUCE_SUM);
    assert_true(f[0] == 1.5f && f[1] == 2 && f[2] == 2);
    dd_coll_reduce(f, g, 3, DD_DTYPE_F32, DD_REDUCE_MAX);
    assert_true(f[0] == 1.5f && f[1] == 4 && f[2] == 2);
    dd_coll_reduce(f, g, 3, DD_DTYPE_F32, DD_REDUCE_MIN);
    assert_true(f[0] == 0.5f && f[1] == 4 && f[2] == -1);
    dd_coll_reduce(u, v, 2, DD_DTYPE_U8, DD_REDUCE_SUM);
    assert_int_equal(u[0], 4); /* wraps modulo 256 */
    assert_int_equal(u[1], 16);
    dd_coll_reduce(i, j, 2, DD_DTYPE_I32, DD_REDUCE_SUM);
    assert_int_equal(i[0], INT32_MIN);
    assert_int_equal(i[1], -4);
    dd_coll_divide(i + 1, 1, DD_DTYPE_I32, 3);
    assert_int_equal(i[1], -1); /* toward zero */
    /* 2048 + 1 is not an f16: ties to even, 2048. */
    dd_coll_reduce(h, k, 1, DD_DTYPE_F16, DD_REDUCE_SUM);
    assert_true(dd_half_f16_to_f32(h[0]) == 2048.0f);
    dd_coll_divide(h, 1, DD_DTYPE_F16, 3);
    assert_int_equal(h[0], dd_half_f32_to_f16(2048.0f / 3));
}

/* f16 and bf16 sums over every bit pattern against every other shifted
 * one (NaN, inf, subnormals, overflow, ties included) give, element by
 * element, narrow(widen(a) + widen(b)) with the scalar conversions: the
 * vector loops (F16C, AVX2) must agree with them bit for bit, and the
 * lengths leave a tail for the scalar loop. The f16 quotient too. */
static void test_reduce_half_bits(void **state)
{
    enum { N = 0x10000 + 13 };
    const unsigned nan_above[2] = {0x7c00, 0x7f80}; /* |bits| of inf */
    uint16_t *a = malloc(N * sizeof(*a)), *b = malloc(N * sizeof(*b));
    uint16_t *d = malloc(N * sizeof(*d));

    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(d);
    for (int pass = 0; pass < 2; pass++) {
        dd_dtype_t dtype = pass ? DD_DTYPE_BF16 : DD_DTYPE_F16;
        for (unsigned shift = 1; shift < 0x10000; shift += 0x3d7b) {
            for (size_t i = 0; i < N; i++) {
                a[i] = (uint16_t)i;
                b[i] = (uint16_t)(i * 7 + shift);
            }
            memcpy(d, a, N * sizeof(*d));
            dd_coll_reduce(d, b, N, dtype, DD_REDUCE_SUM);
            for (size_t i = 0; i < N; i++) {
                uint16_t want =
                    pass ? dd_half_f32_to_bf16(dd_half_bf16_to_f32(a[i]) +
                                               dd_half_bf16_to_f32(b[i]))
                         : dd_half_f32_to_f16(dd_half_f16_to_f32(a[i]) +
                                              dd_half_f16_to_f32(b[i]));
                /* Of two NaNs, which one's payload a sum keeps is the
                 * instruction's operand order: any NaN will do there. */
                int both_nan = (a[i] & 0x7fff) > nan_above[pass] &&
                               (b[i] & 0x7fff) > nan_above[pass];
                if (both_nan ? (d[i] & 0x7fff) <= nan_above[pass]
                             : d[i] != want) {
                    fail_msg("%s %#x + %#x: %#x, want %#x",
                             pass ? "bf16" : "f16", a[i], b[i], d[i], want);
                }
            }
        }
    }
    for (size_t i = 0; i < N; i++) {
        a[i] = d[i] = (uint16_t)i;
    }
    dd_coll_divide(d, N, DD_DTYPE_F16, 3);
    for (size_t i = 0; i < N; i++) {
        uint16_t want = dd_half_f32_to_f16(dd_half_f16_to_f32(a[i]) / 3.0f);
        if (d[i] != want) {
            fail_msg("f16 %#x / 3: %#x, want %#x", a[i], d[i], want);
        }
    }
    free(a);
    free(b);
    free(d);
}

/* The blocked sum of distinct buffers, past a block of eight and into the
 * tail, and the same buffer twice. */
static void test_reduce_sum_blocks(void **state)
{
    float f[19], g[19];
    double x[19], y[19];

    for (int i = 0; i < 19; i++) {
        f[i] = (float)i;
        g[i] = 0.5f * (float)i;
        x[i] = -(double)i;
        y[i] = 0.25 * i;
    }
    dd_coll_reduce(f, g, 19, DD_DTYPE_F32, DD_REDUCE_SUM);
    dd_coll_reduce(x, y, 19, DD_DTYPE_F64, DD_REDUCE_AVG);
    for (int i = 0; i < 19; i++) {
        assert_true(f[i] == 1.5f * (float)i);
        assert_true(x[i] == -0.75 * i);
    }
    dd_coll_reduce(f, f, 19, DD_DTYPE_F32, DD_REDUCE_SUM);
    assert_true(f[18] == 54.0f);
}

/* Out of place, the ring allreduce reads sendbuf where it is needed and
 * receives straight into recvbuf: no copy of the buffer, no scratch. */
static void test_ring_plan_no_copy(void **state)
{
    static float in[40000], out[40000];
    dd_backend_args_t a = {.sendbuf = in,
                           .recvbuf = out,
                           .count = 40000,
                           .dtype = DD_DTYPE_F32,
                           .op = DD_REDUCE_SUM,
                           .mem_type = DD_MEM_HOST};
    dd_coll_plan_t plan;

    assert_int_equal(
        dd_coll_plan_build(&plan, DD_COLL_ALLREDUCE, &a, 1, 4, 4096), DD_OK);
    assert_null(plan.scratch);
    for (size_t i = 0; i < plan.n_steps; i++) {
        const dd_coll_step_t *st = &plan.steps[i];
        assert_int_not_equal(st->kind, DD_COLL_STEP_COPY);
        if (st->kind == DD_COLL_STEP_RECV) {
            assert_true((float *)st->dst >= out &&
                        (float *)st->dst < out + 40000);
        }
    }
    dd_coll_plan_release(&plan);
    a.recvbuf = in; /* in place still double-buffers its receives */
    assert_int_equal(
        dd_coll_plan_build(&plan, DD_COLL_ALLREDUCE, &a, 1, 4, 4096), DD_OK);
    assert_non_null(plan.scratch);
    dd_coll_plan_release(&plan);
}

/* ---- an in-memory transport -------------------------------------------- */

#define NET_SLOTS (1u << 17) /* open addressing on (src, dst, tag) */

typedef struct {
    int used, taken;
    int src, dst;
    uint64_t tag;
    void *data;
    size_t bytes;
} net_msg_t;

typedef struct {
    net_msg_t slot[NET_SLOTS];
    int n;
} net_t;

struct dd_backend {
    net_t *net;
    int rank;
};

struct dd_backend_request {
    int is_recv;
    int done;
    int peer;
    uint64_t tag;
    void *buf;
    size_t bytes;
};

static net_msg_t *net_find(net_t *net, int src, int dst, uint64_t tag,
                           int insert)
{
    size_t h = (size_t)((tag * 0x9e3779b97f4a7c15ull) ^ (uint64_t)src * 31 ^
                        (uint64_t)dst * 131) %
               NET_SLOTS;
    for (;; h = (h + 1) % NET_SLOTS) {
        net_msg_t *m = &net->slot[h];
        if (!m->used) {
            return insert ? m : NULL;
        }
        if (m->src == src && m->dst == dst && m->tag == tag) {
            assert_false(insert); /* every message id is used once */
            return m;
        }
    }
}

static dd_status_t net_send(dd_backend_t *b, const dd_backend_args_t *a,
                            dd_backend_request_t **req_p)
{
    net_msg_t *m = net_find(b->net, b->rank, a->peer, a->tag, 1);
    assert_true(++b->net->n < (int)NET_SLOTS / 2);
    m->used = 1;
    m->src = b->rank;
    m->dst = a->peer;
    m->tag = a->tag;
    m->bytes = a->count * dd_coll_dtype_size(a->dtype);
    m->data = malloc(m->bytes + 1);
    memcpy(m->data, a->sendbuf, m->bytes);
    *req_p = calloc(1, sizeof(**req_p));
    (*req_p)->done = 1;
    return DD_OK;
}

static dd_status_t net_recv(dd_backend_t *b, const dd_backend_args_t *a,
                            dd_backend_request_t **req_p)
{
    dd_backend_request_t *r = calloc(1, sizeof(*r));
    r->is_recv = 1;
    r->peer = a->peer;
    r->tag = a->tag;
    r->buf = a->recvbuf;
    r->bytes = a->count * dd_coll_dtype_size(a->dtype);
    *req_p = r;
    return DD_OK;
}

static dd_status_t net_test(dd_backend_t *b, dd_backend_request_t *r)
{
    if (r->is_recv && !r->done) {
        net_msg_t *m = net_find(b->net, r->peer, b->rank, r->tag, 0);
        if (m != NULL) {
            assert_false(m->taken);
            assert_int_equal(m->bytes, r->bytes);
            memcpy(r->buf, m->data, m->bytes);
            free(m->data);
            m->taken = 1;
            r->done = 1;
        }
    }
    if (!r->done) {
        return DD_INPROGRESS;
    }
    free(r);
    return DD_OK;
}

static void net_cancel(dd_backend_t *b, dd_backend_request_t *r)
{
    free(r);
}

static void net_progress(dd_backend_t *b)
{
}

static void net_idle(dd_backend_t *b, double timeout_s)
{
}

static const dd_backend_ops_t net_ops = {
    .abi_version = DD_BACKEND_ABI_VERSION,
    .name = "net",
    .send = net_send,
    .recv = net_recv,
    .test = net_test,
    .cancel = net_cancel,
    .progress = net_progress,
    .check = net_test,
    .idle = net_idle,
};

static void net_log(void *arg, int level, const char *msg)
{
}

static dd_status_t net_error(void *arg, dd_status_t status, const char *msg)
{
    fail_msg("unexpected error %d: %s", (int)status, msg);
    return status;
}

/* ---- the collectives over it ------------------------------------------- */

static double value(dd_dtype_t dtype, int rank, size_t i)
{
    long v = (long)((rank * 5 + i * 11) % 13);
    return dtype == DD_DTYPE_U8 ? (double)v : (double)(v - 6) * 0.5;
}

static void put(dd_dtype_t dtype, void *buf, size_t i, double v)
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
        ((int32_t *)buf)[i] = (int32_t)(v * 2);
        break;
    case DD_DTYPE_I64:
        ((int64_t *)buf)[i] = (int64_t)(v * 2);
        break;
    default:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    }
}

static double get(dd_dtype_t dtype, const void *buf, size_t i)
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
        return ((const int32_t *)buf)[i] / 2.0;
    case DD_DTYPE_I64:
        return (double)((const int64_t *)buf)[i] / 2.0;
    default:
        return ((const uint8_t *)buf)[i];
    }
}

static double reduced(dd_dtype_t dtype, dd_reduce_op_t op, int world, size_t i)
{
    double acc = value(dtype, 0, i);
    for (int r = 1; r < world; r++) {
        double v = value(dtype, r, i);
        acc = op == DD_REDUCE_MAX   ? fmax(acc, v)
              : op == DD_REDUCE_MIN ? fmin(acc, v)
                                    : acc + v;
    }
    if (op == DD_REDUCE_AVG) {
        int integer = dtype == DD_DTYPE_I32 || dtype == DD_DTYPE_I64 ||
                      dtype == DD_DTYPE_U8;
        double scale = dtype == DD_DTYPE_U8 ? 1 : 2;
        acc = integer ? trunc(acc * scale / world) / scale : acc / world;
    }
    return acc;
}

/* Runs coll on every rank at once and checks every rank's output. */
static void run(dd_coll_t coll, dd_dtype_t dtype, dd_reduce_op_t op, int world,
                size_t n, size_t chunk_bytes, int in_place)
{
    static net_t net;
    dd_backend_services_t svc = {.log = net_log, .error = net_error};
    struct dd_backend be[5];
    dd_coll_req_t *req[5];
    void *in[5], *out[5];
    size_t es = dd_coll_dtype_size(dtype), w = (size_t)world;
    int root = (int)(n % w), pending = world;

    memset(&net, 0, sizeof(net));
    for (int r = 0; r < world; r++) {
        size_t nin = coll == DD_COLL_REDUCE_SCATTER ? n * w : n;
        in[r] = malloc(nin * es + 1);
        out[r] = malloc(n * w * es + 1);
        for (size_t i = 0; i < nin; i++) {
            put(dtype, in[r], i, value(dtype, r, i));
        }
        be[r].net = &net;
        be[r].rank = r;
        dd_coll_comm_t comm = {&net_ops, &be[r], &svc, r, world, chunk_bytes};
        dd_backend_args_t a = {.sendbuf = in[r],
                               .recvbuf = in_place ? in[r] : out[r],
                               .count = n,
                               .dtype = dtype,
                               .op = op,
                               .root = root,
                               .mem_type = DD_MEM_HOST};
        if (coll == DD_COLL_BROADCAST) {
            a.recvbuf = in[r];
        }
        assert_int_equal(dd_coll_start(&comm, coll, &a, 7, &req[r]), DD_OK);
    }
    for (int spin = 0; pending > 0; spin++) {
        assert_true(spin < 100000);
        for (int r = 0; r < world; r++) {
            if (req[r] != NULL) {
                dd_status_t s = dd_coll_test(req[r]);
                assert_true(s == DD_OK || s == DD_INPROGRESS);
                if (s == DD_OK) {
                    req[r] = NULL;
                    pending--;
                }
            }
        }
    }
    for (int r = 0; r < world; r++) {
        const void *res =
            in_place || coll == DD_COLL_BROADCAST ? in[r] : out[r];
        size_t nout = coll == DD_COLL_ALLGATHER ? n * w : n;
        for (size_t i = 0; i < nout; i++) {
            double want;
            if (coll == DD_COLL_ALLREDUCE) {
                want = reduced(dtype, op, world, i);
            } else if (coll == DD_COLL_REDUCE_SCATTER) {
                want = reduced(dtype, op, world, (size_t)r * n + i);
            } else if (coll == DD_COLL_ALLGATHER) {
                want = value(dtype, (int)(i / n), i % n);
            } else {
                want = value(dtype, root, i);
            }
            double tol = dtype == DD_DTYPE_BF16  ? 8e-3 * fabs(want)
                         : dtype == DD_DTYPE_F16 ? 1e-3 * fabs(want)
                                                 : 1e-6 * fabs(want);
            if (fabs(get(dtype, res, i) - want) > tol) {
                fail_msg("%s %s op %d world %d n %zu chunk %zu rank %d: "
                         "element %zu is %g, expected %g",
                         dd_coll_kind_name(coll), dd_coll_dtype_name(dtype),
                         (int)op, world, n, chunk_bytes, r, i,
                         get(dtype, res, i), want);
            }
        }
        free(in[r]);
        free(out[r]);
    }
    for (size_t i = 0; i < NET_SLOTS; i++) {
        /* nothing sent that was not received */
        assert_true(!net.slot[i].used || net.slot[i].taken);
    }
}

static const size_t sizes[] = {0, 1, 7, 100, 4099, 20000};

static void test_allreduce(void **state)
{
    for (int w = 1; w <= 5; w++) {
        for (int d = 0; d < DD_DTYPE_LAST; d++) {
            for (int op = 0; op < DD_REDUCE_LAST; op++) {
                for (size_t s = 0; s < sizeof(sizes) / sizeof(*sizes); s++) {
                    run(DD_COLL_ALLREDUCE, d, op, w, sizes[s], 96, s % 2);
                }
                /* The ring reads sendbuf directly out of place. */
                run(DD_COLL_ALLREDUCE, d, op, w, 20000, 96, 0);
            }
        }
    }
}

static void test_reduce_scatter(void **state)
{
    for (int w = 1; w <= 5; w++) {
        for (int d = 0; d < DD_DTYPE_LAST; d++) {
            for (int op = 0; op < DD_REDUCE_LAST; op++) {
                for (size_t s = 0; s < 5; s++) {
                    run(DD_COLL_REDUCE_SCATTER, d, op, w, sizes[s], 40, 0);
                }
            }
        }
    }
}

static void test_allgather_broadcast(void **state)
{
    for (int w = 1; w <= 5; w++) {
        for (int d = 0; d < DD_DTYPE_LAST; d++) {
            for (size_t s = 0; s < sizeof(sizes) / sizeof(*sizes); s++) {
                run(DD_COLL_ALLGATHER, d, DD_REDUCE_SUM, w, sizes[s], 64, 0);
                run(DD_COLL_BROADCAST, d, DD_REDUCE_SUM, w, sizes[s], 64, 0);
            }
        }
    }
}

static void test_signature(void **state)
{
    dd_backend_args_t a = {.count = 10, .dtype = DD_DTYPE_F32};
    dd_backend_args_t b = a;
    uint32_t sig = dd_coll_signature(DD_COLL_ALLREDUCE, &a);

    b.count = 11;
    assert_int_not_equal(sig, dd_coll_signature(DD_COLL_ALLREDUCE, &b));
    b = a;
    b.op = DD_REDUCE_MAX;
    assert_int_not_equal(sig, dd_coll_signature(DD_COLL_ALLREDUCE, &b));
    b = a;
    b.root = 3; /* only broadcast looks at the root */
    assert_int_equal(sig, dd_coll_signature(DD_COLL_ALLREDUCE, &b));
    assert_int_equal(dd_coll_tag(sig, 5, 9) >> DD_BACKEND_TAG_BITS, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_rounding),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_reduce_half_bits),
        cmocka_unit_test(test_reduce_sum_blocks),
        cmocka_unit_test(test_ring_plan_no_copy),
        cmocka_unit_test(test_signature),
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_reduce_scatter),
        cmocka_unit_test(test_allgather_broadcast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
