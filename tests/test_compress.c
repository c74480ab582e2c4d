/* The codec registry (spec parsing, errors that name the spec) and the
 * identity codec (bit-exact round trips, exact sizes, summable wire), plus
 * the rule that src/compress includes only src/core and public headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "compress/codec.h"
#include "core/log.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    char names[64];

    assert_ptr_equal(dd_codec_find("none"), &dd_codec_none_ops);
    assert_null(dd_codec_find("non"));
    assert_null(dd_codec_find("none:"));
    dd_codec_names(names, sizeof(names));
    assert_string_equal(names, "none");

    assert_int_equal(dd_codec_open("none", &ref), DD_OK);
    assert_ptr_equal(ref.ops, &dd_codec_none_ops);
    assert_non_null(ref.codec);
    dd_codec_close(&ref);
    assert_null(ref.ops);
    dd_codec_close(NULL);
}

static void test_abi_version(void **state)
{
    static const char *const names[] = {"none"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const dd_codec_ops_t *ops = dd_codec_find(names[i]);
        assert_non_null(ops);
        assert_int_equal(ops->abi_version, DD_CODEC_ABI_VERSION);
        assert_string_equal(ops->name, names[i]);
        assert_true(strlen(ops->name) <= DD_CODEC_NAME_MAX);
        assert_null(strchr(ops->name, ':'));
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
                            "expected one of none");
    expect_invalid("none:3", "invalid codec spec 'none:3': none takes no "
                             "argument (got '3')");
    expect_invalid("none:", "invalid codec spec 'none:': none takes no "
                            "argument (got '')");
    expect_invalid("", "invalid codec spec '': unknown codec, expected one "
                       "of none");
    expect_invalid("NONE", "invalid codec spec 'NONE': unknown codec, "
                           "expected one of none");
    expect_invalid("averyveryveryverylongcodecnamethatfitsnowhere:1",
                   "invalid codec spec "
                   "'averyveryveryverylongcodecnamethatfitsnowhere:1': "
                   "unknown codec, expected one of none");
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
        cmocka_unit_test(test_includes_stay_below),
    };
    return cmocka_run_group_tests(tests, quiet, loud);
}
