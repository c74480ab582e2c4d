/* The codec registry (spec parsing, errors that name the spec) and the
 * identity codec (bit-exact round trips, exact sizes, summable wire), plus
 * the rule that src/compress includes only src/core and public headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "compress/codec.h"
#include "core/half.h"
#include "core/log.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The built-in codecs, as dd_codec_names() lists them. */
#define CODEC_NAMES "none, fp16, bf16, topk, powersgd"

static int quiet(void **state)
{
    (void)state;
    dd_log_configure(DD_LOG_ERROR, ~0u, "/dev/null", 0);
    return 0;
}

static int loud(void **state)
{
    (void)state;
    dd_log_close();
    return 0;
}

static void test_find_none(void **state)
{
    dd_codec_ref_t ref;
    char names[128];

    assert_ptr_equal(dd_codec_find("none"), &dd_codec_none_ops);
    assert_null(dd_codec_find("non"));
    assert_null(dd_codec_find("none:"));
    dd_codec_names(names, sizeof(names));
    assert_string_equal(names, CODEC_NAMES);

    assert_int_equal(dd_codec_open("none", &ref), DD_OK);
    assert_ptr_equal(ref.ops, &dd_codec_none_ops);
    assert_non_null(ref.codec);
    dd_codec_close(&ref);
    assert_null(ref.ops);
    dd_codec_close(NULL);
}

static void test_abi_version(void **state)
{
    static const char *const names[] = {"none", "fp16", "bf16", "topk",
                                        "powersgd"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const dd_codec_ops_t *ops = dd_codec_find(names[i]);
        assert_non_null(ops);
        assert_int_equal(ops->abi_version, DD_CODEC_ABI_VERSION);
        assert_string_equal(ops->name, names[i]);
        assert_true(strlen(ops->name) <= DD_CODEC_NAME_MAX);
        assert_null(strchr(ops->name, ':'));
        /* A multi-round protocol has all its slots, or none. */
        int slots = (ops->state_rounds != NULL) + (ops->round_size != NULL) +
                    (ops->encode_round != NULL) + (ops->decode_round != NULL);
        assert_int_equal(slots, ops->rounds > 0 ? 4 : 0);
    }
}

static void expect_invalid(const char *spec, const char *message)
{
    dd_codec_ref_t ref = {0};

    assert_int_equal(dd_codec_open(spec, &ref), DD_ERR_INVALID_CONFIG);
    assert_string_equal(dd_last_error(), message);
    assert_null(ref.ops); /* untouched on error */
}

static void test_rejects_bad_specs(void **state)
{
    expect_invalid("bogus", "invalid codec spec 'bogus': unknown codec, "
                            "expected one of " CODEC_NAMES);
    expect_invalid("none:3", "invalid codec spec 'none:3': none takes no "
                             "argument (got '3')");
    expect_invalid("none:", "invalid codec spec 'none:': none takes no "
                            "argument (got '')");
    expect_invalid("fp16:3", "invalid codec spec 'fp16:3': fp16 takes no "
                             "argument (got '3')");
    expect_invalid("bf16:", "invalid codec spec 'bf16:': bf16 takes no "
                            "argument (got '')");
    expect_invalid("", "invalid codec spec '': unknown codec, expected one "
                       "of " CODEC_NAMES);
    expect_invalid("NONE", "invalid codec spec 'NONE': unknown codec, "
                           "expected one of " CODEC_NAMES);
    expect_invalid("averyveryveryverylongcodecnamethatfitsnowhere:1",
                   "invalid codec spec "
                   "'averyveryveryverylongcodecnamethatfitsnowhere:1': "
                   "unknown codec, expected one of " CODEC_NAMES);
}

static void test_none_caps(void **state)
{
    const dd_codec_ops_t *ops = &dd_codec_none_ops;

    assert_true(ops->caps & DD_CODEC_CAP_SUMMABLE);
    assert_false(ops->caps & DD_CODEC_CAP_ERROR_FEEDBACK);
    assert_int_equal(dd_codec_wire_dtype(ops, DD_DTYPE_F32), DD_DTYPE_F32);
    assert_int_equal(dd_codec_wire_dtype(ops, DD_DTYPE_BF16), DD_DTYPE_BF16);
    assert_int_equal(dd_codec_wire_dtype(ops, DD_DTYPE_I64), DD_DTYPE_I64);
}

static void test_none_encoded_size(void **state)
{
    dd_codec_ref_t ref;
    size_t bytes = 1;

    assert_int_equal(dd_codec_open("none", &ref), DD_OK);
    const size_t counts[] = {0, 1, 7, 4097};
    for (int d = 0; d < DD_DTYPE_LAST; d++) {
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            assert_int_equal(ref.ops->encoded_size(ref.codec, counts[i],
                                                   (dd_dtype_t)d, 0, 0, &bytes),
                             DD_OK);
            assert_int_equal(bytes, counts[i] * dd_dtype_size((dd_dtype_t)d));
        }
    }
    /* The shape is ignored by the identity. */
    assert_int_equal(
        ref.ops->encoded_size(ref.codec, 12, DD_DTYPE_F16, 3, 4, &bytes),
        DD_OK);
    assert_int_equal(bytes, 24);
    bytes = 5;
    assert_int_equal(
        ref.ops->encoded_size(ref.codec, 4, DD_DTYPE_LAST, 0, 0, &bytes),
        DD_ERR_UNSUPPORTED);
    assert_int_equal(bytes, 5);
    assert_int_equal(ref.ops->encoded_size(ref.codec, SIZE_MAX / 2,
                                           DD_DTYPE_F32, 0, 0, &bytes),
                     DD_ERR_INVALID_PARAM);
    dd_codec_close(&ref);
}

/* Fills bytes with a xorshift pattern, so the float dtypes see NaN,
 * infinity and denormal encodings too: a copy must keep every bit. */
static void fill(unsigned char *buf, size_t bytes, unsigned seed)
{
    uint32_t x = 2463534242u ^ seed;
    for (size_t i = 0; i < bytes; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (unsigned char)x;
    }
}

static void round_trip(dd_codec_ref_t *ref, dd_dtype_t dtype, size_t count)
{
    size_t esize = dd_dtype_size(dtype), bytes, wire_bytes = 123;
    dd_codec_state_t *st = NULL;

    assert_int_equal(
        ref->ops->encoded_size(ref->codec, count, dtype, 0, 0, &bytes), DD_OK);
    assert_int_equal(
        ref->ops->state_create(ref->codec, count, dtype, 0, 0, &st), DD_OK);
    assert_non_null(st);
    /* One spare element each, to see that nothing writes past the end. */
    unsigned char *in = malloc((count + 1) * esize);
    unsigned char *wire = malloc(bytes + esize);
    unsigned char *out = malloc((count + 1) * esize);
    assert_true(in && wire && out);
    fill(in, (count + 1) * esize, (unsigned)count);
    memset(wire, 0xa5, bytes + esize);
    memset(out, 0x5a, (count + 1) * esize);

    assert_int_equal(
        ref->ops->encode(ref->codec, st, in, count, dtype, wire, &wire_bytes),
        DD_OK);
    assert_int_equal(wire_bytes, bytes);
    assert_int_equal(wire_bytes, count * esize);
    assert_memory_equal(wire, in, wire_bytes); /* the wire is the dtype */
    assert_int_equal(wire[bytes], 0xa5);
    assert_int_equal(
        ref->ops->decode(ref->codec, st, wire, wire_bytes, out, count, dtype),
        DD_OK);
    if (count > 0) {
        assert_memory_equal(out, in, count * esize);
    }
    assert_int_equal(out[count * esize], 0x5a);

    /* A second encode gives the same bytes: no state carries over. */
    assert_int_equal(
        ref->ops->encode(ref->codec, st, in, count, dtype, wire, &wire_bytes),
        DD_OK);
    assert_int_equal(wire_bytes, bytes);
    if (count > 0) {
        assert_memory_equal(wire, in, wire_bytes);
    }
    ref->ops->state_free(ref->codec, st);
    free(in);
    free(wire);
    free(out);
}

static void test_none_round_trip(void **state)
{
    const dd_dtype_t dtypes[] = {DD_DTYPE_F32, DD_DTYPE_F16, DD_DTYPE_BF16};
    const size_t counts[] = {0, 1, 7, 4097};
    dd_codec_ref_t ref;

    assert_int_equal(dd_codec_open("none", &ref), DD_OK);
    for (size_t d = 0; d < 3; d++) {
        for (size_t i = 0; i < 4; i++) {
            round_trip(&ref, dtypes[d], counts[i]);
        }
    }
    dd_codec_close(&ref);
}

static void test_none_rejects_other_layers(void **state)
{
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    unsigned char wire[64];
    size_t bytes = 99;
    dd_codec_state_t *st;
    dd_codec_ref_t ref;

    assert_int_equal(dd_codec_open("none", &ref), DD_OK);
    assert_int_equal(
        ref.ops->state_create(ref.codec, 8, DD_DTYPE_F32, 0, 0, &st), DD_OK);
    assert_int_equal(
        ref.ops->encode(ref.codec, st, in, 7, DD_DTYPE_F32, wire, &bytes),
        DD_ERR_INVALID_PARAM);
    assert_string_equal(dd_last_error(),
                        "codec none: encode of 7 f32 elements on a layer "
                        "state of 8 f32 elements");
    assert_int_equal(bytes, 99);
    assert_int_equal(
        ref.ops->encode(ref.codec, st, in, 8, DD_DTYPE_F16, wire, &bytes),
        DD_ERR_INVALID_PARAM);
    assert_int_equal(
        ref.ops->encode(ref.codec, st, in, 8, DD_DTYPE_F32, wire, &bytes),
        DD_OK);
    assert_int_equal(bytes, 32);
    assert_int_equal(
        ref.ops->decode(ref.codec, st, wire, 28, out, 8, DD_DTYPE_F32),
        DD_ERR_MESSAGE);
    assert_string_equal(dd_last_error(),
                        "codec none: 28 bytes to decode into 8 f32 elements, "
                        "expected 32");
    assert_int_equal(
        ref.ops->decode(ref.codec, st, wire, 32, out, 8, DD_DTYPE_I32),
        DD_ERR_INVALID_PARAM);
    dd_codec_state_t *bad = NULL;
    assert_int_equal(
        ref.ops->state_create(ref.codec, 8, (dd_dtype_t)-1, 0, 0, &bad),
        DD_ERR_UNSUPPORTED);
    assert_null(bad);
    ref.ops->state_free(ref.codec, st);
    ref.ops->state_free(ref.codec, NULL);
    dd_codec_close(&ref);
}

/* Summable: the element-wise sum of two ranks' encodings decodes to the
 * sum of their inputs (exact here: every value is a small dyadic). */
static void test_none_sum_on_wire(void **state)
{
    float a[5] = {1, -2, 3, 0.5f, 8}, b[5] = {4, 2, -1, 0.25f, 0};
    float wa[5], wb[5], out[5];
    size_t na, nb;
    dd_codec_state_t *sa, *sb;
    dd_codec_ref_t ref;

    assert_int_equal(dd_codec_open("none", &ref), DD_OK);
    assert_int_equal(
        ref.ops->state_create(ref.codec, 5, DD_DTYPE_F32, 0, 0, &sa), DD_OK);
    assert_int_equal(
        ref.ops->state_create(ref.codec, 5, DD_DTYPE_F32, 0, 0, &sb), DD_OK);
    assert_int_equal(
        ref.ops->encode(ref.codec, sa, a, 5, DD_DTYPE_F32, wa, &na), DD_OK);
    assert_int_equal(
        ref.ops->encode(ref.codec, sb, b, 5, DD_DTYPE_F32, wb, &nb), DD_OK);
    for (int i = 0; i < 5; i++) {
        wa[i] += wb[i];
    }
    assert_int_equal(
        ref.ops->decode(ref.codec, sa, wa, na, out, 5, DD_DTYPE_F32), DD_OK);
    for (int i = 0; i < 5; i++) {
        assert_true(out[i] == a[i] + b[i]);
    }
    ref.ops->state_free(ref.codec, sa);
    ref.ops->state_free(ref.codec, sb);
    dd_codec_close(&ref);
}

/* The 16-bit formats, described by their positive finite bit patterns
 * (0 to max_bits, increasing in value) and an exact decoder. */
typedef struct {
    const char *spec;
    dd_dtype_t dtype;
    uint16_t max_bits, inf_bits;
    double (*value)(uint16_t bits);
} half_format_t;

static double f16_value(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v = exp == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, exp - 25);
    return (h & 0x8000) ? -v : v;
}

static double bf16_value(uint16_t b)
{
    int exp = (b >> 7) & 0xff, mant = b & 0x7f;
    double v = exp == 0 ? ldexp(mant, -133) : ldexp(128 + mant, exp - 134);
    return (b & 0x8000) ? -v : v;
}

static const half_format_t formats[] = {
    {"fp16", DD_DTYPE_F16, 0x7bff, 0x7c00, f16_value},
    {"bf16", DD_DTYPE_BF16, 0x7f7f, 0x7f80, bf16_value},
};

static int half_is_nan(const half_format_t *f, uint16_t h)
{
    return (h & 0x7fff) > f->inf_bits;
}

/* The reference rounding, by search among the format's values in double:
 * the nearer neighbour, the even pattern on a tie, inf from max + half an
 * ulp on (IEEE's overflow, since max is odd). Not for NaN. */
static uint16_t half_reference(const half_format_t *f, float x)
{
    double a = fabs((double)x);
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    unsigned lo = 0, hi = f->max_bits;

    if (isinf(x)) {
        return sign | f->inf_bits;
    }
    while (lo < hi) { /* the largest pattern whose value is <= a */
        unsigned mid = (lo + hi + 1) / 2;
        if (f->value((uint16_t)mid) <= a) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    double below = f->value((uint16_t)lo);
    double above = lo < f->max_bits ? f->value((uint16_t)(lo + 1))
                                    : 2 * below - f->value((uint16_t)(lo - 1));
    if (a - below < above - a || (a - below == above - a && lo % 2 == 0)) {
        return sign | (uint16_t)lo;
    }
    return sign | (uint16_t)(lo + 1);
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

/* Every value of the format, the midpoints between neighbours and the
 * floats next to them, and a stride over all f32 patterns (NaNs too). */
static size_t half_inputs(const half_format_t *f, float *x)
{
    size_t n = 0;
    for (uint32_t h = 0; h <= f->max_bits; h++) {
        double v = f->value((uint16_t)h);
        x[n++] = (float)v;
        if (h < f->max_bits) {
            float mid = (float)((v + f->value((uint16_t)(h + 1))) / 2);
            x[n++] = mid;
            x[n++] = nextafterf(mid, 0);
            x[n++] = nextafterf(mid, INFINITY);
        }
    }
    double top = f->value(f->max_bits), ulp = top - f->value(f->max_bits - 1);
    x[n++] = (float)(top + ulp / 2); /* the first value that overflows */
    x[n++] = nextafterf((float)(top + ulp / 2), 0);
    for (uint32_t i = 0; i < 200000; i++) {
        x[n++] = bits_f32(i * 0x9e3779b1u);
    }
    size_t m = n;
    for (size_t i = 0; i < m; i++) {
        x[n++] = -x[i];
    }
    return n;
}

static void half_check_narrow(const half_format_t *f)
{
    float *x = malloc(sizeof(float) * (8 * 65536 + 400000));
    uint16_t *fast = malloc(sizeof(uint16_t) * (8 * 65536 + 400000));
    uint16_t *slow = malloc(sizeof(uint16_t) * (8 * 65536 + 400000));
    assert_true(x && fast && slow);
    size_t n = half_inputs(f, x);

    dd_half_from_f32(f->dtype, fast, x, n, DD_HALF_AUTO);
    dd_half_from_f32(f->dtype, slow, x, n, DD_HALF_SCALAR);
    for (size_t i = 0; i < n; i++) {
        if (fast[i] != slow[i]) {
            fail_msg("%s: %a (0x%08x): vector 0x%04x, scalar 0x%04x", f->spec,
                     x[i], f32_bits(x[i]), fast[i], slow[i]);
        }
        if (isnan(x[i])) {
            assert_true(half_is_nan(f, slow[i]));
            assert_int_equal(slow[i] & 0x8000, (f32_bits(x[i]) >> 16) & 0x8000);
        } else if (slow[i] != half_reference(f, x[i])) {
            fail_msg("%s: %a rounds to 0x%04x, expected 0x%04x", f->spec, x[i],
                     slow[i], half_reference(f, x[i]));
        }
    }
    free(x);
    free(fast);
    free(slow);
}

static void half_check_widen(const half_format_t *f)
{
    uint16_t *h = malloc(sizeof(uint16_t) * 65536);
    float *fast = malloc(sizeof(float) * 65536);
    float *slow = malloc(sizeof(float) * 65536);
    assert_true(h && fast && slow);
    for (uint32_t i = 0; i < 65536; i++) {
        h[i] = (uint16_t)i;
    }
    dd_half_to_f32(f->dtype, fast, h, 65536, DD_HALF_AUTO);
    dd_half_to_f32(f->dtype, slow, h, 65536, DD_HALF_SCALAR);
    for (uint32_t i = 0; i < 65536; i++) {
        assert_int_equal(f32_bits(fast[i]), f32_bits(slow[i]));
        if (half_is_nan(f, h[i])) {
            assert_true(isnan(slow[i]));
        } else if ((h[i] & 0x7fff) == f->inf_bits) {
            assert_true(isinf(slow[i]));
            assert_int_equal(signbit(slow[i]) != 0, (h[i] & 0x8000) != 0);
        } else {
            assert_true((double)slow[i] == f->value(h[i]));
            assert_int_equal(signbit(slow[i]) != 0, (h[i] & 0x8000) != 0);
            /* Representable values come back to the same bits. */
            uint16_t back;
            dd_half_from_f32(f->dtype, &back, &slow[i], 1, DD_HALF_SCALAR);
            assert_int_equal(back, h[i]);
        }
    }
    free(h);
    free(fast);
    free(slow);
}

/* Outputs past DD_HALF_STREAM_BYTES take the non-temporal stores, after
 * a scalar head up to 32-byte alignment: the same bits as the scalar loop,
 * whatever the alignment. */
static void half_check_stream(const half_format_t *f)
{
    const size_t n = DD_HALF_STREAM_BYTES / 2 + 37;
    float *x = malloc((n + 1) * sizeof(float));
    float *y = malloc((n + 1) * sizeof(float));
    float *z = malloc((n + 1) * sizeof(float));
    uint16_t *fast = malloc((n + 1) * sizeof(uint16_t));
    uint16_t *slow = malloc((n + 1) * sizeof(uint16_t));
    assert_true(x && y && z && fast && slow);
    for (size_t i = 0; i <= n; i++) {
        x[i] = bits_f32((uint32_t)i * 0x9e3779b1u);
    }
    for (size_t off = 0; off < 2; off++) {
        dd_half_from_f32(f->dtype, fast + off, x, n, DD_HALF_AUTO);
        dd_half_from_f32(f->dtype, slow + off, x, n, DD_HALF_SCALAR);
        assert_memory_equal(fast + off, slow + off, n * sizeof(uint16_t));
        dd_half_to_f32(f->dtype, y + off, slow + off, n, DD_HALF_AUTO);
        dd_half_to_f32(f->dtype, z + off, slow + off, n, DD_HALF_SCALAR);
        assert_memory_equal(y + off, z + off, n * sizeof(float));
    }
    free(x);
    free(y);
    free(z);
    free(fast);
    free(slow);
}

static void test_half_conversions(void **state)
{
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        half_check_narrow(&formats[i]);
        half_check_widen(&formats[i]);
        half_check_stream(&formats[i]);
    }
}

/* Through the codec: caps, sizes, named cases and the f64 path, which must
 * round once (1 + 2^-11 + 2^-40 is not a tie: through f32 rounded to
 * nearest it would become one and go down to 1). */
static void half_check_codec(const half_format_t *f, const float *x,
                             const uint16_t *want, size_t n, double d,
                             uint16_t d_want)
{
    dd_codec_ref_t ref;
    dd_codec_state_t *st, *sd;
    uint16_t wire[16];
    float back[16];
    size_t bytes;
    double dback;

    assert_int_equal(dd_codec_open(f->spec, &ref), DD_OK);
    assert_true(ref.ops->caps & DD_CODEC_CAP_SUMMABLE);
    assert_false(ref.ops->caps & DD_CODEC_CAP_ERROR_FEEDBACK);
    assert_int_equal(dd_codec_wire_dtype(ref.ops, DD_DTYPE_F32), f->dtype);
    assert_int_equal(
        ref.ops->encoded_size(ref.codec, n, DD_DTYPE_F64, 0, 0, &bytes), DD_OK);
    assert_int_equal(bytes, 2 * n);
    assert_int_equal(
        ref.ops->encoded_size(ref.codec, n, DD_DTYPE_I32, 0, 0, &bytes),
        DD_ERR_UNSUPPORTED);
    assert_int_equal(
        ref.ops->state_create(ref.codec, n, DD_DTYPE_F32, 0, 0, &st), DD_OK);
    assert_int_equal(
        ref.ops->encode(ref.codec, st, x, n, DD_DTYPE_F32, wire, &bytes),
        DD_OK);
    assert_int_equal(bytes, 2 * n);
    assert_memory_equal(wire, want, 2 * n);
    assert_int_equal(
        ref.ops->decode(ref.codec, st, wire, bytes - 2, back, n, DD_DTYPE_F32),
        DD_ERR_MESSAGE);
    assert_int_equal(
        ref.ops->decode(ref.codec, st, wire, bytes, back, n, DD_DTYPE_F32),
        DD_OK);
    for (size_t i = 0; i < n; i++) {
        if (half_is_nan(f, want[i])) {
            assert_true(isnan(back[i]));
        } else if ((want[i] & 0x7fff) == f->inf_bits) {
            assert_true(isinf(back[i]) && signbit(back[i]) == signbit(x[i]));
        } else {
            assert_true((double)back[i] == f->value(want[i]));
        }
    }
    assert_int_equal(
        ref.ops->state_create(ref.codec, 1, DD_DTYPE_F64, 0, 0, &sd), DD_OK);
    assert_int_equal(
        ref.ops->encode(ref.codec, sd, &d, 1, DD_DTYPE_F64, wire, &bytes),
        DD_OK);
    assert_int_equal(wire[0], d_want);
    assert_int_equal(
        ref.ops->decode(ref.codec, sd, wire, 2, &dback, 1, DD_DTYPE_F64),
        DD_OK);
    assert_true(dback == f->value(d_want));
    ref.ops->state_free(ref.codec, st);
    ref.ops->state_free(ref.codec, sd);
    dd_codec_close(&ref);
}

static void test_fp16_codec(void **state)
{
    const float x[] = {
        1.0f,      -2.5f,    65504.0f,        65519.99f,       65520.0f,
        -INFINITY, NAN,      1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 0x1p-24f,
        0x1p-25f,  0x3p-25f, -0.0f,           1e-30f};
    const uint16_t want[] = {0x3c00, 0xc100, 0x7bff, 0x7bff, 0x7c00,
                             0xfc00, 0x7e00, 0x3c00, 0x3c02, 0x0001,
                             0x0000, 0x0002, 0x8000, 0x0000};
    half_check_codec(&formats[0], x, want, 14, 1.0 + 0x1p-11 + 0x1p-40, 0x3c01);
}

static void test_bf16_codec(void **state)
{
    const float x[] = {1.0f,      -2.5f,     0x1.fep127f,    0x1.ff8p127f,
                       -INFINITY, NAN,       1.0f + 0x1p-8f, 1.0f + 0x3p-8f,
                       -0.0f,     0x1p-133f, 0x1p-134f,      0x3p-134f};
    const uint16_t want[] = {0x3f80, 0xc020, 0x7f7f, 0x7f80, 0xff80, 0x7fc0,
                             0x3f80, 0x3f82, 0x8000, 0x0001, 0x0000, 0x0002};
    half_check_codec(&formats[1], x, want, 12, 1.0 + 0x1p-8 + 0x1p-40, 0x3f81);
}

/* One topk encode of in through st; the wire's values and indices are
 * checked for order and decoded into dense (count floats). */
static void topk_step(dd_codec_ref_t *ref, dd_codec_state_t *st,
                      const float *in, size_t count, size_t k, float *dense)
{
    size_t bytes, wire_bytes;
    assert_int_equal(
        ref->ops->encoded_size(ref->codec, count, DD_DTYPE_F32, 0, 0, &bytes),
        DD_OK);
    assert_int_equal(bytes, 8 + 8 * k);
    unsigned char *wire = malloc(bytes);
    assert_non_null(wire);
    assert_int_equal(ref->ops->encode(ref->codec, st, in, count, DD_DTYPE_F32,
                                      wire, &wire_bytes),
                     DD_OK);
    assert_int_equal(wire_bytes, bytes);
    uint32_t header[2];
    memcpy(header, wire, 8);
    assert_int_equal(header[0], k);
    assert_int_equal(header[1], count);
    assert_int_equal(ref->ops->decode(ref->codec, st, wire, wire_bytes, dense,
                                      count, DD_DTYPE_F32),
                     DD_OK);
    free(wire);
}

static void test_topk_rejects_bad_specs(void **state)
{
    const char *const bad[] = {"0",       "2",      "abc",  "",    "-0.1",
                               "nan",     "0.5x",   " 0.5", "inf", "+0.5",
                               "0x0.1p0", "1e-400", "1e400"};
    char spec[64], message[256];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(spec, sizeof(spec), "topk:%s", bad[i]);
        snprintf(message, sizeof(message),
                 "invalid codec spec '%s': topk takes the ratio of elements "
                 "sent, 0 < ratio <= 1, such as topk:0.01 (got '%s')",
                 spec, bad[i]);
        expect_invalid(spec, message);
    }
    expect_invalid("topk", "invalid codec spec 'topk': topk takes the ratio "
                           "of elements sent, 0 < ratio <= 1, such as "
                           "topk:0.01 (got no ratio)");
}

static void test_topk_sizes(void **state)
{
    static const struct {
        const char *spec;
        size_t count, k;
    } cases[] = {{"topk:0.07", 100, 7}, {"topk:0.01", 1, 1},
                 {"topk:0.01", 0, 0},   {"topk:1", 33, 33},
                 {"topk:0.5", 3, 2},    {"topk:0.01", 1000001, 10001}};
    size_t bytes;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dd_codec_ref_t ref;
        assert_int_equal(dd_codec_open(cases[i].spec, &ref), DD_OK);
        assert_int_equal(ref.ops->encoded_size(ref.codec, cases[i].count,
                                               DD_DTYPE_F32, 0, 0, &bytes),
                         DD_OK);
        assert_int_equal(bytes, 8 + 8 * cases[i].k);
        assert_int_equal(
            ref.ops->encoded_size(ref.codec, 4, DD_DTYPE_F16, 0, 0, &bytes),
            DD_ERR_UNSUPPORTED);
        dd_codec_close(&ref);
    }
    const dd_codec_ops_t *ops = dd_codec_find("topk");
    assert_non_null(ops);
    assert_false(ops->caps & DD_CODEC_CAP_SUMMABLE);
    assert_true(ops->caps & DD_CODEC_CAP_ERROR_FEEDBACK);
    assert_int_equal(dd_codec_wire_dtype(ops, DD_DTYPE_F32), DD_DTYPE_U8);
}

/* The k largest magnitudes, equal ones to the lower index; then the
 * residual is what is chosen from. */
static void test_topk_keeps_largest(void **state)
{
    const float in[10] = {1, -5, 3, 5, 0, -3, 2, 5, 0.5f, -1};
    const float zero[10] = {0};
    const float want1[10] = {0, -5, 3, 5, 0, 0, 0, 5, 0, 0};
    const float want2[10] = {1, 0, 0, 0, 0, -3, 2, 0, 0, -1};
    float dense[10];
    dd_codec_state_t *st;
    dd_codec_ref_t ref;
    unsigned char wire[8 + 8 * 4];
    size_t bytes;

    assert_int_equal(dd_codec_open("topk:0.4", &ref), DD_OK);
    assert_int_equal(
        ref.ops->state_create(ref.codec, 10, DD_DTYPE_F32, 0, 0, &st), DD_OK);
    assert_int_equal(
        ref.ops->encode(ref.codec, st, in, 10, DD_DTYPE_F32, wire, &bytes),
        DD_OK);
    const float values[4] = {-5, 3, 5, 5};
    const uint32_t indices[4] = {1, 2, 3, 7};
    assert_memory_equal(wire + 8, values, sizeof(values));
    assert_memory_equal(wire + 24, indices, sizeof(indices));
    assert_int_equal(
        ref.ops->decode(ref.codec, st, wire, bytes, dense, 10, DD_DTYPE_F32),
        DD_OK);
    assert_memory_equal(dense, want1, sizeof(dense));
    topk_step(&ref, st, zero, 10, 4, dense);
    assert_memory_equal(dense, want2, sizeof(dense));

    /* A bad wire is refused: short, or indices not increasing. */
    assert_int_equal(ref.ops->decode(ref.codec, st, wire, bytes - 1, dense, 10,
                                     DD_DTYPE_F32),
                     DD_ERR_MESSAGE);
    uint32_t swapped[4] = {1, 3, 2, 7};
    memcpy(wire + 24, swapped, sizeof(swapped));
    assert_int_equal(
        ref.ops->decode(ref.codec, st, wire, bytes, dense, 10, DD_DTYPE_F32),
        DD_ERR_MESSAGE);
    assert_int_equal(
        ref.ops->encode(ref.codec, st, in, 9, DD_DTYPE_F32, wire, &bytes),
        DD_ERR_INVALID_PARAM);
    ref.ops->state_free(ref.codec, st);
    dd_codec_close(&ref);
}

typedef struct {
    uint32_t mag, idx;
} topk_key_t;

static int topk_key_cmp(const void *a, const void *b)
{
    const topk_key_t *x = a, *y = b;
    if (x->mag != y->mag) {
        return x->mag > y->mag ? -1 : 1;
    }
    return x->idx < y->idx ? -1 : 1;
}

/* Against a sort, on values with many ties, a NaN and infinities. */
static void test_topk_matches_sort(void **state)
{
    const size_t n = 5000, k = 65;
    float *in = malloc(n * sizeof(float)), *dense = malloc(n * sizeof(float));
    topk_key_t *keys = malloc(n * sizeof(topk_key_t));
    dd_codec_state_t *st;
    dd_codec_ref_t ref;
    uint32_t x = 12345;

    assert_true(in && dense && keys);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        in[i] = (float)((int)(x % 41) - 20) * (i % 7 == 0 ? 0.25f : 1.0f);
    }
    in[4000] = NAN;
    in[17] = -INFINITY;
    in[3] = -0.0f;
    for (size_t i = 0; i < n; i++) {
        keys[i] = (topk_key_t){f32_bits(in[i]) & 0x7fffffffu, (uint32_t)i};
    }
    qsort(keys, n, sizeof(*keys), topk_key_cmp);

    assert_int_equal(dd_codec_open("topk:0.013", &ref), DD_OK);
    assert_int_equal(
        ref.ops->state_create(ref.codec, n, DD_DTYPE_F32, 0, 0, &st), DD_OK);
    topk_step(&ref, st, in, n, k, dense);
    size_t sent = 0;
    for (size_t i = 0; i < n; i++) {
        sent += f32_bits(dense[i]) != 0;
    }
    for (size_t j = 0; j < k; j++) {
        size_t i = keys[j].idx;
        assert_memory_equal(&dense[i], &in[i], sizeof(float));
        sent -= f32_bits(in[i]) != 0;
    }
    assert_int_equal(sent, 0); /* and nothing else */
    ref.ops->state_free(ref.codec, st);
    dd_codec_close(&ref);
    free(in);
    free(dense);
    free(keys);
}

/* Error feedback: over steps, what was sent plus what is left is what came
 * in, exactly for small integers. The residual is drained by encoding
 * zeros until nothing is left, so it need not be read. */
static void test_topk_error_feedback(void **state)
{
    const size_t n = 1000, k = 50, steps = 6;
    float *in = malloc(n * sizeof(float)), *dense = malloc(n * sizeof(float));
    double *want = calloc(n, sizeof(double)), *got = calloc(n, sizeof(double));
    dd_codec_state_t *st;
    dd_codec_ref_t ref;

    assert_true(in && dense && want && got);
    assert_int_equal(dd_codec_open("topk:0.05", &ref), DD_OK);
    assert_int_equal(
        ref.ops->state_create(ref.codec, n, DD_DTYPE_F32, 0, 0, &st), DD_OK);
    for (size_t s = 0; s < steps + n / k; s++) {
        for (size_t i = 0; i < n; i++) {
            in[i] = s < steps ? (float)((int)((i * 7 + s * 13) % 23) - 11) : 0;
            want[i] += in[i];
        }
        topk_step(&ref, st, in, n, k, dense);
        for (size_t i = 0; i < n; i++) {
            got[i] += dense[i];
        }
        if (s == 0) {
            size_t nonzero = 0;
            for (size_t i = 0; i < n; i++) {
                nonzero += dense[i] != 0;
            }
            assert_int_equal(nonzero, k);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            fail_msg("element %zu: sent %g in all, came in %g", i, got[i],
                     want[i]);
        }
    }
    /* Drained: the next encode sends zeros. */
    memset(in, 0, n * sizeof(float));
    topk_step(&ref, st, in, n, k, dense);
    for (size_t i = 0; i < n; i++) {
        assert_true(dense[i] == 0);
    }
    ref.ops->state_free(ref.codec, st);
    dd_codec_close(&ref);
    free(in);
    free(dense);
    free(want);
    free(got);
}

static void test_powersgd_rejects_bad_specs(void **state)
{
    const char *const bad[] = {"0", "abc", "", "-1", "1025", "4x", " 4", "2.5"};
    char spec[64], message[256];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(spec, sizeof(spec), "powersgd:%s", bad[i]);
        snprintf(message, sizeof(message),
                 "invalid codec spec '%s': powersgd takes the rank of its "
                 "factors, 1 to 1024, such as powersgd:4 (got '%s')",
                 spec, bad[i]);
        expect_invalid(spec, message);
    }
    expect_invalid("powersgd", "invalid codec spec 'powersgd': powersgd "
                               "takes the rank of its factors, 1 to 1024, "
                               "such as powersgd:4 (got no rank)");
}

static void test_powersgd_sizes(void **state)
{
    static const struct {
        size_t count, rows, cols, bytes, rounds, round0, round1;
    } cases[] = {
        {64 * 32, 64, 32, (64 + 32) * 16, 2, 64 * 16, 32 * 16},
        {16, 4, 4, 64, 1, 64, 0},      /* min(rows, cols) <= rank */
        {50, 10, 5, 200, 1, 200, 0},   /* factors not smaller */
        {100, 0, 0, 400, 1, 400, 0},   /* no shape */
        {100, 1, 100, 400, 1, 400, 0}, /* a vector */
        {0, 0, 0, 0, 1, 0, 0},
    };
    dd_codec_ref_t ref;
    dd_codec_state_t *st;
    size_t bytes;

    assert_int_equal(dd_codec_open("powersgd:4", &ref), DD_OK);
    assert_int_equal(ref.ops->rounds, 2);
    assert_false(ref.ops->caps & DD_CODEC_CAP_SUMMABLE);
    assert_true(ref.ops->caps & DD_CODEC_CAP_ERROR_FEEDBACK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(ref.ops->encoded_size(ref.codec, cases[i].count,
                                               DD_DTYPE_F32, cases[i].rows,
                                               cases[i].cols, &bytes),
                         DD_OK);
        assert_int_equal(bytes, cases[i].bytes);
        assert_int_equal(ref.ops->state_create(ref.codec, cases[i].count,
                                               DD_DTYPE_F32, cases[i].rows,
                                               cases[i].cols, &st),
                         DD_OK);
        assert_int_equal(ref.ops->state_rounds(ref.codec, st), cases[i].rounds);
        assert_int_equal(ref.ops->round_size(ref.codec, st, 0, &bytes), DD_OK);
        assert_int_equal(bytes, cases[i].round0);
        if (cases[i].rounds == 2) {
            assert_int_equal(ref.ops->round_size(ref.codec, st, 1, &bytes),
                             DD_OK);
            assert_int_equal(bytes, cases[i].round1);
        }
        assert_int_equal(
            ref.ops->round_size(ref.codec, st, cases[i].rounds, &bytes),
            DD_ERR_INVALID_PARAM);
        ref.ops->state_free(ref.codec, st);
    }
    assert_int_equal(
        ref.ops->encoded_size(ref.codec, 100, DD_DTYPE_F32, 10, 11, &bytes),
        DD_ERR_INVALID_PARAM);
    assert_string_equal(dd_last_error(), "codec powersgd: a layer of 100 "
                                         "elements shaped 10 x 11");
    assert_int_equal(
        ref.ops->encoded_size(ref.codec, 100, DD_DTYPE_F32, 0, 100, &bytes),
        DD_ERR_INVALID_PARAM);
    assert_int_equal(
        ref.ops->encoded_size(ref.codec, 100, DD_DTYPE_F64, 10, 10, &bytes),
        DD_ERR_UNSUPPORTED);
    dd_codec_close(&ref);
}

static float psgd_random(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return (float)(*x % 2001) / 1000.0f - 1.0f;
}

/* m (rows x cols) = a b^T with a rows x r and b cols x r random. */
static void psgd_low_rank(float *m, size_t rows, size_t cols, size_t r,
                          uint32_t seed)
{
    float *a = malloc(rows * r * sizeof(float));
    float *b = malloc(cols * r * sizeof(float));
    assert_true(a && b);
    for (size_t i = 0; i < rows * r; i++) {
        a[i] = psgd_random(&seed);
    }
    for (size_t i = 0; i < cols * r; i++) {
        b[i] = psgd_random(&seed);
    }
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < cols; j++) {
            double sum = 0;
            for (size_t k = 0; k < r; k++) {
                sum += (double)a[i * r + k] * b[j * r + k];
            }
            m[i * cols + j] = (float)sum;
        }
    }
    free(a);
    free(b);
}

/* ||x - y|| / ||y||. */
static double psgd_error(const float *x, const double *y, size_t n)
{
    double d = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        norm += y[i] * y[i];
    }
    return sqrt(d / (norm > 0 ? norm : 1));
}

/* The two-round protocol over n ranks (their states and layers), with the
 * sums done here; out[i] is rank i's decode. */
static void psgd_sync(dd_codec_ref_t *ref, dd_codec_state_t **st,
                      float *const *m, float **out, int n, size_t count)
{
    size_t b0, b1, bytes;
    assert_int_equal(ref->ops->round_size(ref->codec, st[0], 0, &b0), DD_OK);
    assert_int_equal(ref->ops->round_size(ref->codec, st[0], 1, &b1), DD_OK);
    float *p = malloc(b0), *q = malloc(b1), *sum_p = calloc(1, b0),
          *sum_q = calloc(1, b1);
    assert_true(p && q && sum_p && sum_q);
    for (int r = 0; r < n; r++) {
        assert_int_equal(ref->ops->encode_round(ref->codec, st[r], 0, m[r],
                                                count * sizeof(float), p,
                                                &bytes),
                         DD_OK);
        assert_int_equal(bytes, b0);
        for (size_t i = 0; i < b0 / sizeof(float); i++) {
            sum_p[i] += p[i];
        }
    }
    for (int r = 0; r < n; r++) {
        assert_int_equal(
            ref->ops->encode_round(ref->codec, st[r], 1, sum_p, b0, q, &bytes),
            DD_OK);
        assert_int_equal(bytes, b1);
        for (size_t i = 0; i < b1 / sizeof(float); i++) {
            sum_q[i] += q[i];
        }
    }
    for (int r = 0; r < n; r++) {
        assert_int_equal(ref->ops->decode_round(ref->codec, st[r], sum_q, b1,
                                                out[r], count, DD_DTYPE_F32),
                         DD_OK);
    }
    free(p);
    free(q);
    free(sum_p);
    free(sum_q);
}

/* A matrix of rank r comes back after the two rounds on one rank (and
 * through encode/decode), within 1e-4. */
static void test_powersgd_recovers_low_rank(void **state)
{
    const size_t rows = 48, cols = 40, count = rows * cols;
    float *m = malloc(count * sizeof(float));
    float *out = malloc(count * sizeof(float));
    double *want = malloc(count * sizeof(double));
    unsigned char wire[(48 + 40) * 4 * 4];
    dd_codec_state_t *st;
    dd_codec_ref_t ref;
    size_t bytes;

    assert_true(m && out && want);
    for (size_t r = 3; r <= 4; r++) {
        psgd_low_rank(m, rows, cols, r, 77 + (uint32_t)r);
        for (size_t i = 0; i < count; i++) {
            want[i] = m[i];
        }
        assert_int_equal(dd_codec_open("powersgd:4", &ref), DD_OK);
        assert_int_equal(ref.ops->state_create(ref.codec, count, DD_DTYPE_F32,
                                               rows, cols, &st),
                         DD_OK);
        psgd_sync(&ref, &st, &m, &out, 1, count);
        assert_true(psgd_error(out, want, count) < 1e-4);
        ref.ops->state_free(ref.codec, st);

        assert_int_equal(ref.ops->state_create(ref.codec, count, DD_DTYPE_F32,
                                               rows, cols, &st),
                         DD_OK);
        assert_int_equal(ref.ops->encode(ref.codec, st, m, count, DD_DTYPE_F32,
                                         wire, &bytes),
                         DD_OK);
        assert_int_equal(bytes, sizeof(wire));
        memset(out, 0, count * sizeof(float));
        assert_int_equal(ref.ops->decode(ref.codec, st, wire, bytes, out, count,
                                         DD_DTYPE_F32),
                         DD_OK);
        assert_true(psgd_error(out, want, count) < 1e-4);
        assert_int_equal(ref.ops->decode(ref.codec, st, wire, bytes - 4, out,
                                         count, DD_DTYPE_F32),
                         DD_ERR_MESSAGE);
        ref.ops->state_free(ref.codec, st);
        dd_codec_close(&ref);
    }
    free(m);
    free(out);
    free(want);
}

/* Two ranks whose layers share a rank-3 column space: the decoded sum is
 * their sum, and both ranks decode the same bits, step after step. */
static void test_powersgd_two_ranks(void **state)
{
    const size_t rows = 30, cols = 36, count = rows * cols;
    float *m[2], *out[2];
    double *want = malloc(count * sizeof(double));
    dd_codec_state_t *st[2];
    dd_codec_ref_t ref;

    assert_int_equal(dd_codec_open("powersgd:3", &ref), DD_OK);
    for (int r = 0; r < 2; r++) {
        m[r] = malloc(count * sizeof(float));
        out[r] = malloc(count * sizeof(float));
        assert_true(m[r] && out[r]);
        assert_int_equal(ref.ops->state_create(ref.codec, count, DD_DTYPE_F32,
                                               rows, cols, &st[r]),
                         DD_OK);
    }
    for (uint32_t step = 0; step < 3; step++) {
        /* The same left factor (seed), different right ones. */
        float *b = malloc(count * sizeof(float));
        psgd_low_rank(m[0], rows, cols, 3, 5 + step);
        psgd_low_rank(b, rows, cols, 3, 5 + step);
        for (size_t i = 0; i < count; i++) {
            m[1][i] = 0.5f * b[i];
            want[i] = (double)m[0][i] + m[1][i];
        }
        free(b);
        psgd_sync(&ref, st, m, out, 2, count);
        assert_memory_equal(out[0], out[1], count * sizeof(float));
        assert_true(psgd_error(out[0], want, count) < 1e-4);
    }
    for (int r = 0; r < 2; r++) {
        ref.ops->state_free(ref.codec, st[r]);
        free(m[r]);
        free(out[r]);
    }
    dd_codec_close(&ref);
    free(want);
}

/* Error feedback: over steps of full-rank layers, what was decoded plus
 * what is left is what came in. Zero layers drain the residual (each step
 * takes r of its dimensions away), so it need not be read. */
static void test_powersgd_error_feedback(void **state)
{
    const size_t rows = 24, cols = 20, count = rows * cols;
    float *m = malloc(count * sizeof(float));
    float *out = malloc(count * sizeof(float));
    double *want = calloc(count, sizeof(double));
    double *got = calloc(count, sizeof(double));
    dd_codec_state_t *st;
    dd_codec_ref_t ref;
    uint32_t seed = 99;

    assert_true(m && out && want && got);
    assert_int_equal(dd_codec_open("powersgd:4", &ref), DD_OK);
    assert_int_equal(
        ref.ops->state_create(ref.codec, count, DD_DTYPE_F32, rows, cols, &st),
        DD_OK);
    for (int step = 0; step < 5 + 8; step++) {
        for (size_t i = 0; i < count; i++) {
            m[i] = step < 5 ? psgd_random(&seed) : 0.0f;
            want[i] += m[i];
        }
        psgd_sync(&ref, &st, &m, &out, 1, count);
        for (size_t i = 0; i < count; i++) {
            got[i] += out[i];
        }
        if (step == 0) { /* a rank-4 approximation of a full-rank layer */
            double w0[24 * 20];
            for (size_t i = 0; i < count; i++) {
                w0[i] = want[i];
            }
            assert_true(psgd_error(out, w0, count) > 0.1);
        }
    }
    for (size_t i = 0; i < count; i++) {
        out[i] = (float)got[i];
    }
    assert_true(psgd_error(out, want, count) < 1e-4);
    ref.ops->state_free(ref.codec, st);
    dd_codec_close(&ref);
    free(m);
    free(out);
    free(want);
    free(got);
}

/* The protocol's order is checked; a dense layer takes one round. */
static void test_powersgd_rounds_checked(void **state)
{
    float m[64 * 32] = {0}, p[64 * 4], q[32 * 4], out[64 * 32];
    float v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, w[10], back[10];
    dd_codec_state_t *st, *sv;
    dd_codec_ref_t ref;
    size_t bytes;

    assert_int_equal(dd_codec_open("powersgd:4", &ref), DD_OK);
    assert_int_equal(
        ref.ops->state_create(ref.codec, 64 * 32, DD_DTYPE_F32, 64, 32, &st),
        DD_OK);
    assert_int_equal(
        ref.ops->encode_round(ref.codec, st, 1, p, sizeof(p), q, &bytes),
        DD_ERR_INVALID_PARAM);
    assert_int_equal(ref.ops->decode_round(ref.codec, st, q, sizeof(q), out,
                                           64 * 32, DD_DTYPE_F32),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(
        ref.ops->encode_round(ref.codec, st, 0, m, sizeof(m) - 4, p, &bytes),
        DD_ERR_MESSAGE);
    assert_int_equal(
        ref.ops->encode_round(ref.codec, st, 0, m, sizeof(m), p, &bytes),
        DD_OK);
    assert_int_equal(
        ref.ops->encode_round(ref.codec, st, 0, m, sizeof(m), p, &bytes),
        DD_ERR_INVALID_PARAM);
    assert_int_equal(
        ref.ops->encode_round(ref.codec, st, 1, p, sizeof(p), q, &bytes),
        DD_OK);
    assert_int_equal(ref.ops->decode_round(ref.codec, st, q, sizeof(q) - 4, out,
                                           64 * 32, DD_DTYPE_F32),
                     DD_ERR_MESSAGE);
    assert_int_equal(ref.ops->decode_round(ref.codec, st, q, sizeof(q), out,
                                           64 * 32, DD_DTYPE_F32),
                     DD_OK);
    for (size_t i = 0; i < 64 * 32; i++) {
        assert_true(out[i] == 0); /* zeros stay zeros, no NaN */
    }
    ref.ops->state_free(ref.codec, st);

    assert_int_equal(
        ref.ops->state_create(ref.codec, 10, DD_DTYPE_F32, 0, 0, &sv), DD_OK);
    assert_int_equal(ref.ops->state_rounds(ref.codec, sv), 1);
    assert_int_equal(
        ref.ops->encode_round(ref.codec, sv, 0, v, sizeof(v), w, &bytes),
        DD_OK);
    assert_int_equal(bytes, sizeof(v));
    assert_int_equal(ref.ops->decode_round(ref.codec, sv, w, sizeof(w), back,
                                           10, DD_DTYPE_F32),
                     DD_OK);
    assert_memory_equal(back, v, sizeof(v));
    assert_int_equal(
        ref.ops->encode(ref.codec, sv, v, 10, DD_DTYPE_F32, w, &bytes), DD_OK);
    assert_int_equal(
        ref.ops->decode(ref.codec, sv, w, bytes, back, 10, DD_DTYPE_F32),
        DD_OK);
    assert_memory_equal(back, v, sizeof(v));
    ref.ops->state_free(ref.codec, sv);
    dd_codec_close(&ref);
}

/* Whether one line of a source file includes a private header of a layer
 * other than src/core or src/compress. */
static int bad_include(const char *line)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (strncmp(p, "#include \"", 10) != 0) {
        return 0;
    }
    p += 10;
    return strncmp(p, "core/", 5) != 0 && strncmp(p, "compress/", 9) != 0;
}

static void test_includes_stay_below(void **state)
{
    const char *top = getenv("top_srcdir");
    char dir[4096], path[4096 + 256], line[1024];
    int files = 0;

    if (top == NULL) {
        skip();
    }
    snprintf(dir, sizeof(dir), "%s/src/compress", top);
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 3 || (strcmp(e->d_name + len - 2, ".c") != 0 &&
                        strcmp(e->d_name + len - 2, ".h") != 0)) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        while (fgets(line, sizeof(line), f) != NULL) {
            if (bad_include(line)) {
                fail_msg("%s: %s", path, line);
            }
        }
        fclose(f);
        files++;
    }
    closedir(d);
    assert_true(files >= 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_none),
        cmocka_unit_test(test_abi_version),
        cmocka_unit_test(test_rejects_bad_specs),
        cmocka_unit_test(test_none_caps),
        cmocka_unit_test(test_none_encoded_size),
        cmocka_unit_test(test_none_round_trip),
        cmocka_unit_test(test_none_rejects_other_layers),
        cmocka_unit_test(test_none_sum_on_wire),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_fp16_codec),
        cmocka_unit_test(test_bf16_codec),
        cmocka_unit_test(test_topk_rejects_bad_specs),
        cmocka_unit_test(test_topk_sizes),
        cmocka_unit_test(test_topk_keeps_largest),
        cmocka_unit_test(test_topk_matches_sort),
        cmocka_unit_test(test_topk_error_feedback),
        cmocka_unit_test(test_powersgd_rejects_bad_specs),
        cmocka_unit_test(test_powersgd_sizes),
        cmocka_unit_test(test_powersgd_recovers_low_rank),
        cmocka_unit_test(test_powersgd_two_ranks),
        cmocka_unit_test(test_powersgd_error_feedback),
        cmocka_unit_test(test_powersgd_rounds_checked),
        cmocka_unit_test(test_includes_stay_below),
    };
    return cmocka_run_group_tests(tests, quiet, loud);
}
