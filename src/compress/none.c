/*
 * The identity codec ("none"): the wire carries the layer's own elements,
 * so encoded data sums as the layer's dtype. It is the model the other
 * codecs follow: one table, a state per layer, errors naming the layer's
 * count and dtype. It must not allocate in encode or decode, nor change
 * the values it copies.
 */
#include "compress/codec.h"

#include "core/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The identity holds nothing per instance; every create hands out this one. */
struct dd_codec {
    int unused;
};

struct dd_codec_state {
    size_t count;
    dd_dtype_t dtype;
};

static dd_codec_t dd_none_codec;

static dd_status_t dd_none_create(const char *arg, char *why, size_t why_size,
                                  dd_codec_t **codec_p)
{
    if (arg != NULL) {
        snprintf(why, why_size, "none takes no argument (got '%s')", arg);
        return DD_ERR_INVALID_CONFIG;
    }
    *codec_p = &dd_none_codec;
    return DD_OK;
}

static void dd_none_destroy(dd_codec_t *codec)
{
    (void)codec;
}

/* Bytes of count elements of dtype; reports a dtype it does not know and a
 * count whose bytes do not fit in size_t. */
static dd_status_t dd_none_bytes(size_t count, dd_dtype_t dtype,
                                 size_t *bytes_p)
{
    size_t esize = dd_dtype_size(dtype);

    if (esize == 0) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_COMPRESS,
                        "codec none: unknown dtype %d", (int)dtype);
    }
    if (count > SIZE_MAX / esize) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                        "codec none: %zu %s elements overflow size_t", count,
                        dd_dtype_name(dtype));
    }
    *bytes_p = count * esize;
    return DD_OK;
}

static dd_status_t dd_none_encoded_size(const dd_codec_t *codec, size_t count,
                                        dd_dtype_t dtype, size_t rows,
                                        size_t cols, size_t *bytes_p)
{
    (void)codec;
    (void)rows;
    (void)cols;
    return dd_none_bytes(count, dtype, bytes_p);
}

static dd_status_t dd_none_state_create(dd_codec_t *codec, size_t count,
                                        dd_dtype_t dtype, size_t rows,
                                        size_t cols, dd_codec_state_t **state_p)
{
    size_t bytes;
    dd_status_t status =
        dd_none_encoded_size(codec, count, dtype, rows, cols, &bytes);
    if (status != DD_OK) {
        return status;
    }
    dd_codec_state_t *state = malloc(sizeof(*state));
    if (state == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_COMPRESS,
                        "codec none: no memory for a layer state");
    }
    *state = (dd_codec_state_t){.count = count, .dtype = dtype};
    *state_p = state;
    return DD_OK;
}

static void dd_none_state_free(dd_codec_t *codec, dd_codec_state_t *state)
{
    (void)codec;
    free(state);
}

/* A call must be about the layer the state was made for. */
static dd_status_t dd_none_check(const dd_codec_state_t *state, size_t count,
                                 dd_dtype_t dtype, const char *call)
{
    if (count == state->count && dtype == state->dtype) {
        return DD_OK;
    }
    return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                    "codec none: %s of %zu %s elements on a layer state of "
                    "%zu %s elements",
                    call, count, dd_dtype_name(dtype), state->count,
                    dd_dtype_name(state->dtype));
}

static dd_status_t dd_none_encode(dd_codec_t *codec, dd_codec_state_t *state,
                                  const void *in, size_t count,
                                  dd_dtype_t dtype, void *out,
                                  size_t *out_bytes_p)
{
    (void)codec;
    dd_status_t status = dd_none_check(state, count, dtype, "encode");
    if (status != DD_OK) {
        return status;
    }
    size_t bytes = count * dd_dtype_size(dtype);
    if (bytes > 0) {
        memcpy(out, in, bytes);
    }
    *out_bytes_p = bytes;
    return DD_OK;
}

static dd_status_t dd_none_decode(dd_codec_t *codec, dd_codec_state_t *state,
                                  const void *in, size_t in_bytes, void *out,
                                  size_t count, dd_dtype_t dtype)
{
    (void)codec;
    dd_status_t status = dd_none_check(state, count, dtype, "decode");
    if (status != DD_OK) {
        return status;
    }
    size_t bytes = count * dd_dtype_size(dtype);
    if (in_bytes != bytes) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_COMPRESS,
                        "codec none: %zu bytes to decode into %zu %s "
                        "elements, expected %zu",
                        in_bytes, count, dd_dtype_name(dtype), bytes);
    }
    if (bytes > 0) {
        memcpy(out, in, bytes);
    }
    return DD_OK;
}

const dd_codec_ops_t dd_codec_none_ops = {
    .abi_version = DD_CODEC_ABI_VERSION,
    .name = "none",
    .caps = DD_CODEC_CAP_SUMMABLE,
    .wire_dtype = DD_CODEC_WIRE_AS_INPUT,
    .create = dd_none_create,
    .destroy = dd_none_destroy,
    .encoded_size = dd_none_encoded_size,
    .state_create = dd_none_state_create,
    .state_free = dd_none_state_free,
    .encode = dd_none_encode,
    .decode = dd_none_decode,
};
