/*
 * The ops that fp16 and bf16 share (see half.h): argument parsing, sizes,
 * layer states and the checks that name the layer. The arithmetic lives in
 * fp16.c and bf16.c; this file must not convert anything itself.
 */
#include "compress/half.h"

#include "core/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct dd_codec {
    const dd_half_codec_t *half;
};

struct dd_codec_state {
    size_t count;
    dd_dtype_t dtype;
};

dd_status_t dd_half_create(const dd_half_codec_t *half, const char *arg,
                           char *why, size_t why_size, dd_codec_t **codec_p)
{
    if (arg != NULL) {
        snprintf(why, why_size, "%s takes no argument (got '%s')", half->name,
                 arg);
        return DD_ERR_INVALID_CONFIG;
    }
    dd_codec_t *codec = malloc(sizeof(*codec));
    if (codec == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    codec->half = half;
    *codec_p = codec;
    return DD_OK;
}

void dd_half_destroy(dd_codec_t *codec)
{
    free(codec);
}

dd_status_t dd_half_encoded_size(const dd_codec_t *codec, size_t count,
                                 dd_dtype_t dtype, size_t rows, size_t cols,
                                 size_t *bytes_p)
{
    const dd_half_codec_t *half = codec->half;
    (void)rows;
    (void)cols;

    if (dtype != DD_DTYPE_F32 && dtype != DD_DTYPE_F64 &&
        dtype != half->own_dtype) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_COMPRESS,
                        "codec %s: cannot encode %s elements (f32, f64 or "
                        "%s)",
                        half->name, dd_dtype_name(dtype),
                        dd_dtype_name(half->own_dtype));
    }
    if (count > SIZE_MAX / sizeof(double)) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                        "codec %s: %zu %s elements overflow size_t", half->name,
                        count, dd_dtype_name(dtype));
    }
    *bytes_p = count * sizeof(uint16_t);
    return DD_OK;
}

dd_status_t dd_half_state_create(dd_codec_t *codec, size_t count,
                                 dd_dtype_t dtype, size_t rows, size_t cols,
                                 dd_codec_state_t **state_p)
{
    size_t bytes;
    dd_status_t status =
        dd_half_encoded_size(codec, count, dtype, rows, cols, &bytes);
    if (status != DD_OK) {
        return status;
    }
    dd_codec_state_t *state = malloc(sizeof(*state));
    if (state == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_COMPRESS,
                        "codec %s: no memory for a layer state",
                        codec->half->name);
    }
    *state = (dd_codec_state_t){.count = count, .dtype = dtype};
    *state_p = state;
    return DD_OK;
}

void dd_half_state_free(dd_codec_t *codec, dd_codec_state_t *state)
{
    (void)codec;
    free(state);
}

static dd_status_t dd_half_check(const dd_codec_t *codec,
                                 const dd_codec_state_t *state, size_t count,
                                 dd_dtype_t dtype, const char *call)
{
    if (count == state->count && dtype == state->dtype) {
        return DD_OK;
    }
    return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                    "codec %s: %s of %zu %s elements on a layer state of "
                    "%zu %s elements",
                    codec->half->name, call, count, dd_dtype_name(dtype),
                    state->count, dd_dtype_name(state->dtype));
}

dd_status_t dd_half_encode(dd_codec_t *codec, dd_codec_state_t *state,
                           const void *in, size_t count, dd_dtype_t dtype,
                           void *out, size_t *out_bytes_p)
{
    dd_status_t status = dd_half_check(codec, state, count, dtype, "encode");
    if (status != DD_OK) {
        return status;
    }
    codec->half->encode(out, in, count, dtype);
    *out_bytes_p = count * sizeof(uint16_t);
    return DD_OK;
}

dd_status_t dd_half_decode(dd_codec_t *codec, dd_codec_state_t *state,
                           const void *in, size_t in_bytes, void *out,
                           size_t count, dd_dtype_t dtype)
{
    dd_status_t status = dd_half_check(codec, state, count, dtype, "decode");
    if (status != DD_OK) {
        return status;
    }
    if (in_bytes != count * sizeof(uint16_t)) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_COMPRESS,
                        "codec %s: %zu bytes to decode into %zu %s "
                        "elements, expected %zu",
                        codec->half->name, in_bytes, count,
                        dd_dtype_name(dtype), count * sizeof(uint16_t));
    }
    codec->half->decode(out, in, count, dtype);
    return DD_OK;
}
