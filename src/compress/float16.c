/*
 * The two 16-bit float codecs, "fp16" (IEEE binary16) and "bf16"
 * (bfloat16): a layer of f32, f64 or the codec's own dtype goes on the
 * wire as count 16-bit elements, rounded to nearest even, and the wire sums
 * as that dtype (the aggregators and the shared reductions add it in f32).
 * The conversions are src/core/half.c's (f64 is rounded once, through
 * round-to-odd); a layer of the codec's own dtype is copied. No residual is
 * kept: what rounding loses is lost. Encode and decode must not allocate,
 * and this file must not convert anything itself.
 */
#include "compress/codec.h"
#include "core/half.h"
#include "core/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dd_codec {
    const char *name; /* "fp16" */
    dd_dtype_t own;   /* DD_DTYPE_F16 */
};

struct dd_codec_state {
    size_t count;
    dd_dtype_t dtype;
};

static dd_status_t dd_float16_create(const char *name, dd_dtype_t own,
                                     const char *arg, char *why,
                                     size_t why_size, dd_codec_t **codec_p)
{
    if (arg != NULL) {
        snprintf(why, why_size, "%s takes no argument (got '%s')", name, arg);
        return DD_ERR_INVALID_CONFIG;
    }
    dd_codec_t *codec = malloc(sizeof(*codec));
    if (codec == NULL) {
        return DD_ERR_NO_MEMORY; /* dd_codec_open reports it */
    }
    *codec = (dd_codec_t){.name = name, .own = own};
    *codec_p = codec;
    return DD_OK;
}

static dd_status_t dd_fp16_create(const char *arg, char *why, size_t why_size,
                                  dd_codec_t **codec_p)
{
    return dd_float16_create("fp16", DD_DTYPE_F16, arg, why, why_size, codec_p);
}

static dd_status_t dd_bf16_create(const char *arg, char *why, size_t why_size,
                                  dd_codec_t **codec_p)
{
    return dd_float16_create("bf16", DD_DTYPE_BF16, arg, why, why_size,
                             codec_p);
}

static void dd_float16_destroy(dd_codec_t *codec)
{
    free(codec);
}

static dd_status_t dd_float16_encoded_size(const dd_codec_t *codec,
                                           size_t count, dd_dtype_t dtype,
                                           size_t rows, size_t cols,
                                           size_t *bytes_p)
{
    (void)rows;
    (void)cols;

    if (dtype != DD_DTYPE_F32 && dtype != DD_DTYPE_F64 && dtype != codec->own) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_COMPRESS,
                        "codec %s: cannot encode %s elements (f32, f64 or "
                        "%s)",
                        codec->name, dd_dtype_name(dtype),
                        dd_dtype_name(codec->own));
    }
    if (count > SIZE_MAX / sizeof(double)) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                        "codec %s: %zu %s elements overflow size_t",
                        codec->name, count, dd_dtype_name(dtype));
    }
    *bytes_p = count * sizeof(uint16_t);
    return DD_OK;
}

static dd_status_t dd_float16_state_create(dd_codec_t *codec, size_t count,
                                           dd_dtype_t dtype, size_t rows,
                                           size_t cols,
                                           dd_codec_state_t **state_p)
{
    size_t bytes;
    dd_status_t status =
        dd_float16_encoded_size(codec, count, dtype, rows, cols, &bytes);
    if (status != DD_OK) {
        return status;
    }
    dd_codec_state_t *state = malloc(sizeof(*state));
    if (state == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_COMPRESS,
                        "codec %s: no memory for a layer state", codec->name);
    }
    *state = (dd_codec_state_t){.count = count, .dtype = dtype};
    *state_p = state;
    return DD_OK;
}

static void dd_float16_state_free(dd_codec_t *codec, dd_codec_state_t *state)
{
    (void)codec;
    free(state);
}

static dd_status_t dd_float16_check(const dd_codec_t *codec,
                                    const dd_codec_state_t *state, size_t count,
                                    dd_dtype_t dtype, const char *call)
{
    if (count == state->count && dtype == state->dtype) {
        return DD_OK;
    }
    return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                    "codec %s: %s of %zu %s elements on a layer state of "
                    "%zu %s elements",
                    codec->name, call, count, dd_dtype_name(dtype),
                    state->count, dd_dtype_name(state->dtype));
}

/* count elements of dtype to the wire (encode) or back; a layer of the
 * wire's own dtype is copied. */
static void dd_float16_convert(const dd_codec_t *codec, int encode,
                               const void *in, void *out, size_t count,
                               dd_dtype_t dtype)
{
    if (dtype == codec->own) {
        if (count > 0) {
            memcpy(out, in, count * sizeof(uint16_t));
        }
    } else if (dtype == DD_DTYPE_F32 && encode) {
        dd_half_from_f32(codec->own, out, in, count, DD_HALF_AUTO);
    } else if (dtype == DD_DTYPE_F32) {
        dd_half_to_f32(codec->own, out, in, count, DD_HALF_AUTO);
    } else if (encode) {
        dd_half_from_f64(codec->own, out, in, count);
    } else {
        dd_half_to_f64(codec->own, out, in, count);
    }
}

static dd_status_t dd_float16_encode(dd_codec_t *codec, dd_codec_state_t *state,
                                     const void *in, size_t count,
                                     dd_dtype_t dtype, void *out,
                                     size_t *out_bytes_p)
{
    dd_status_t status = dd_float16_check(codec, state, count, dtype, "encode");
    if (status != DD_OK) {
        return status;
    }
    dd_float16_convert(codec, 1, in, out, count, dtype);
    *out_bytes_p = count * sizeof(uint16_t);
    return DD_OK;
}

static dd_status_t dd_float16_decode(dd_codec_t *codec, dd_codec_state_t *state,
                                     const void *in, size_t in_bytes, void *out,
                                     size_t count, dd_dtype_t dtype)
{
    dd_status_t status = dd_float16_check(codec, state, count, dtype, "decode");
    if (status != DD_OK) {
        return status;
    }
    if (in_bytes != count * sizeof(uint16_t)) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_COMPRESS,
                        "codec %s: %zu bytes to decode into %zu %s "
                        "elements, expected %zu",
                        codec->name, in_bytes, count, dd_dtype_name(dtype),
                        count * sizeof(uint16_t));
    }
    dd_float16_convert(codec, 0, in, out, count, dtype);
    return DD_OK;
}

/* The two tables differ in the name, the wire dtype and create. */
#define DD_FLOAT16_OPS(fmt, dtype)                                             \
    {                                                                          \
        .abi_version = DD_CODEC_ABI_VERSION, .name = #fmt,                     \
        .caps = DD_CODEC_CAP_SUMMABLE, .wire_dtype = dtype,                    \
        .create = dd_##fmt##_create, .destroy = dd_float16_destroy,            \
        .encoded_size = dd_float16_encoded_size,                               \
        .state_create = dd_float16_state_create,                               \
        .state_free = dd_float16_state_free, .encode = dd_float16_encode,      \
        .decode = dd_float16_decode,                                           \
    }

const dd_codec_ops_t dd_codec_fp16_ops = DD_FLOAT16_OPS(fp16, DD_DTYPE_F16);
const dd_codec_ops_t dd_codec_bf16_ops = DD_FLOAT16_OPS(bf16, DD_DTYPE_BF16);
