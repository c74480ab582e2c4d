/*
 * What the two 16-bit codecs (fp16, bf16) share: the instance, the layer
 * state, the sizes and the checks, around each one's conversion. A layer
 * of f32, f64 or the codec's own 16-bit dtype goes on the wire as count
 * 16-bit elements; nothing else is accepted. No residual is kept.
 */
#ifndef DD_COMPRESS_HALF_H
#define DD_COMPRESS_HALF_H

#include <dreamddp/compress.h>

#include <stddef.h>

/** One 16-bit format: its conversions of count elements of dtype (f32,
 *  f64 or own_dtype, which is copied). */
typedef struct {
    const char *name;     /* "fp16" */
    dd_dtype_t own_dtype; /* DD_DTYPE_F16 */
    void (*encode)(void *out, const void *in, size_t count, dd_dtype_t dtype);
    void (*decode)(void *out, const void *in, size_t count, dd_dtype_t dtype);
} dd_half_codec_t;

dd_status_t dd_half_create(const dd_half_codec_t *half, const char *arg,
                           char *why, size_t why_size, dd_codec_t **codec_p);
void dd_half_destroy(dd_codec_t *codec);
dd_status_t dd_half_encoded_size(const dd_codec_t *codec, size_t count,
                                 dd_dtype_t dtype, size_t rows, size_t cols,
                                 size_t *bytes_p);
dd_status_t dd_half_state_create(dd_codec_t *codec, size_t count,
                                 dd_dtype_t dtype, size_t rows, size_t cols,
                                 dd_codec_state_t **state_p);
void dd_half_state_free(dd_codec_t *codec, dd_codec_state_t *state);
dd_status_t dd_half_encode(dd_codec_t *codec, dd_codec_state_t *state,
                           const void *in, size_t count, dd_dtype_t dtype,
                           void *out, size_t *out_bytes_p);
dd_status_t dd_half_decode(dd_codec_t *codec, dd_codec_state_t *state,
                           const void *in, size_t in_bytes, void *out,
                           size_t count, dd_dtype_t dtype);

#endif
