/*
 * The TopK codec ("topk:RATIO"): each encode sends the k = ceil(RATIO *
 * count) elements of largest magnitude (at least one) of the layer plus its
 * residual, and keeps the rest in the residual for the next encode (error
 * feedback): nothing is lost, only delayed. Equal magnitudes go to the
 * lower index, so every rank's choice is reproducible.
 *
 * The wire: a header of two uint32 (k, count), k f32 values, then their k
 * uint32 indices, increasing. It is not summable: ranks send different
 * indices, and a caller scatters each rank's pieces (decode gives one
 * rank's dense layer).
 *
 * The selection is a radix select on the magnitudes' bits (as uint32 they
 * order like the magnitudes, NaN above inf): a histogram of the top 16
 * bits finds the threshold's bucket, a second of the low 16 bits inside it
 * finds the threshold, and one pass in index order emits what is above it
 * and the first ties. O(n) in the worst case, no per-layer scratch: the
 * first pass adds and counts, the two after it skip, eight at a time
 * (AVX2 where the CPU has it), the blocks with nothing that large. f32
 * layers only; encode and decode must not allocate.
 */
#include "compress/codec.h"

#include "core/cpu.h"
#include "core/log.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DD_TOPK_X86 1
#endif

#define DD_TOPK_BUCKETS 65536
#define DD_TOPK_HEADER (2 * sizeof(uint32_t))

struct dd_codec {
    double ratio;
    /* Scratch of the selection: an instance serves one thread at a time. */
    uint32_t hist[DD_TOPK_BUCKETS];
};

struct dd_codec_state {
    size_t count, k;
    float *residual; /* count elements; what was not sent yet */
};

static dd_status_t dd_topk_create(const char *arg, char *why, size_t why_size,
                                  dd_codec_t **codec_p)
{
    char *end = NULL;
    double ratio = 0;

    /* A plain decimal: strtod alone would take "+0.1", " 0.1", "0x0.1p0". */
    if (arg != NULL && ((arg[0] >= '0' && arg[0] <= '9') || arg[0] == '.') &&
        strpbrk(arg, "xXpP") == NULL) {
        errno = 0;
        ratio = strtod(arg, &end);
    }
    if (end == NULL || *end != '\0' || errno != 0 || !(ratio > 0) ||
        !(ratio <= 1)) {
        snprintf(why, why_size,
                 "topk takes the ratio of elements sent, 0 < ratio <= 1, "
                 "such as topk:0.01 (got %s%s%s)",
                 arg != NULL ? "'" : "", arg != NULL ? arg : "no ratio",
                 arg != NULL ? "'" : "");
        return DD_ERR_INVALID_CONFIG;
    }
    dd_codec_t *codec = malloc(sizeof(*codec));
    if (codec == NULL) {
        return DD_ERR_NO_MEMORY; /* dd_codec_open reports it */
    }
    codec->ratio = ratio;
    *codec_p = codec;
    return DD_OK;
}

static void dd_topk_destroy(dd_codec_t *codec)
{
    free(codec);
}

/* k = ceil(ratio * count), at least one, at most count. The product is
 * taken down by a relative 1e-12 first, so that a ratio written in decimal
 * (0.07 of 100) is not pushed over an integer by its binary rounding. */
static size_t dd_topk_k(double ratio, size_t count)
{
    double x = ratio * (double)count;
    double k = ceil(x - x * 1e-12);

    if (count == 0) {
        return 0;
    }
    return k < 1 ? 1 : k >= (double)count ? count : (size_t)k;
}

static dd_status_t dd_topk_layer(const dd_codec_t *codec, size_t count,
                                 dd_dtype_t dtype, size_t *k_p)
{
    if (dtype != DD_DTYPE_F32) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_COMPRESS,
                        "codec topk: cannot encode %s elements (f32 only)",
                        dd_dtype_name(dtype));
    }
    if (count > UINT32_MAX) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                        "codec topk: a layer of %zu elements is beyond its "
                        "32-bit indices",
                        count);
    }
    *k_p = dd_topk_k(codec->ratio, count);
    return DD_OK;
}

static dd_status_t dd_topk_encoded_size(const dd_codec_t *codec, size_t count,
                                        dd_dtype_t dtype, size_t rows,
                                        size_t cols, size_t *bytes_p)
{
    size_t k = 0;
    (void)rows;
    (void)cols;
    dd_status_t status = dd_topk_layer(codec, count, dtype, &k);
    if (status == DD_OK) {
        *bytes_p = DD_TOPK_HEADER + k * (sizeof(float) + sizeof(uint32_t));
    }
    return status;
}

static dd_status_t dd_topk_state_create(dd_codec_t *codec, size_t count,
                                        dd_dtype_t dtype, size_t rows,
                                        size_t cols, dd_codec_state_t **state_p)
{
    size_t k = 0;
    (void)rows;
    (void)cols;
    dd_status_t status = dd_topk_layer(codec, count, dtype, &k);
    if (status != DD_OK) {
        return status;
    }
    dd_codec_state_t *state = malloc(sizeof(*state));
    float *residual = calloc(count > 0 ? count : 1, sizeof(float));
    if (state == NULL || residual == NULL) {
        free(state);
        free(residual);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_COMPRESS,
                        "codec topk: no memory for the residual of %zu "
                        "elements",
                        count);
    }
    *state = (dd_codec_state_t){.count = count, .k = k, .residual = residual};
    *state_p = state;
    return DD_OK;
}

static void dd_topk_state_free(dd_codec_t *codec, dd_codec_state_t *state)
{
    (void)codec;
    if (state != NULL) {
        free(state->residual);
        free(state);
    }
}

static dd_status_t dd_topk_check(const dd_codec_state_t *state, size_t count,
                                 dd_dtype_t dtype, const char *call)
{
    if (count == state->count && dtype == DD_DTYPE_F32) {
        return DD_OK;
    }
    return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                    "codec topk: %s of %zu %s elements on a layer state of "
                    "%zu f32 elements",
                    call, count, dd_dtype_name(dtype), state->count);
}

/* The magnitude's bits: as uint32 they order like |x|, NaN above inf. */
static inline uint32_t dd_topk_mag(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    return u & 0x7fffffffu;
}

/* The bucket, from the top, that holds the need-th largest of hist;
 * *need_p becomes how many to take from that bucket. */
static uint32_t dd_topk_bucket(const uint32_t *hist, uint32_t top,
                               size_t *need_p)
{
    size_t need = *need_p;
    uint32_t b = top;

    while (b > 0 && hist[b] < need) {
        need -= hist[b];
        b--;
    }
    *need_p = need;
    return b;
}

#ifdef DD_TOPK_X86
/* dd_topk_skip with AVX2: eight magnitudes compared at a time. */
__attribute__((target("avx2"))) static size_t
dd_topk_skip_avx2(const float *acc, size_t i, size_t n8, uint32_t key)
{
    const __m256i mask = _mm256_set1_epi32(0x7fffffff);
    const __m256i below = _mm256_set1_epi32((int32_t)key - 1);

    for (; i < n8; i += 8) {
        __m256i m = _mm256_and_si256(
            _mm256_loadu_si256((const __m256i *)(acc + i)), mask);
        if (!_mm256_testz_si256(_mm256_cmpgt_epi32(m, below), mask)) {
            break;
        }
    }
    return i;
}
#endif

/* From i (a multiple of 8), the first block of eight below n8 that holds a
 * magnitude >= key (key >= 1), or n8. Most blocks hold none: the passes
 * after the first only look at the few that do. */
static size_t dd_topk_skip(const float *acc, size_t i, size_t n8, uint32_t key)
{
#ifdef DD_TOPK_X86
    if (dd_cpu_has(DD_CPU_AVX2)) {
        return dd_topk_skip_avx2(acc, i, n8, key);
    }
#endif
    for (; i < n8; i += 8) {
        uint32_t any = 0;
        for (size_t l = 0; l < 8; l++) {
            any |= dd_topk_mag(acc[i + l]) >= key;
        }
        if (any) {
            break;
        }
    }
    return i;
}

/* Adds the input to the residual and counts the magnitudes' top 15 bits
 * (bit 31 is the sign's), into two histograms for even and odd elements
 * so that runs of one bucket do not wait on each other's increments. */
static void dd_topk_count_high(dd_codec_t *codec, float *restrict acc,
                               const float *restrict in, size_t n)
{
    uint32_t *even = codec->hist, *odd = codec->hist + 0x8000;
    size_t i = 0;

    memset(codec->hist, 0, sizeof(codec->hist));
    for (; i + 8 <= n; i += 8) {
        for (size_t l = 0; l < 8; l++) {
            acc[i + l] += in[i + l];
        }
        for (size_t l = 0; l < 8; l += 2) {
            even[dd_topk_mag(acc[i + l]) >> 16]++;
            odd[dd_topk_mag(acc[i + l + 1]) >> 16]++;
        }
    }
    for (; i < n; i++) {
        acc[i] += in[i];
        even[dd_topk_mag(acc[i]) >> 16]++;
    }
    for (size_t b = 0; b < 0x8000; b++) {
        even[b] += odd[b];
    }
}

/* The end of the next stretch from *i_p worth looking at: the next block
 * of eight with a magnitude >= key, or the tail past n8; all of it when
 * key is 0. Moves *i_p to the stretch's start. */
static size_t dd_topk_stretch(const float *acc, size_t *i_p, size_t n,
                              uint32_t key)
{
    size_t n8 = n / 8 * 8;

    if (key == 0) {
        return n;
    }
    if (*i_p < n8) {
        *i_p = dd_topk_skip(acc, *i_p, n8, key);
        if (*i_p < n8) {
            return *i_p + 8;
        }
    }
    return n;
}

/* Counts the low 16 bits of the magnitudes in bucket high. */
static void dd_topk_count_low(dd_codec_t *codec, const float *acc, size_t n,
                              uint32_t high)
{
    memset(codec->hist, 0, sizeof(codec->hist));
    for (size_t i = 0; i < n;) {
        size_t end = dd_topk_stretch(acc, &i, n, high << 16);
        for (; i < end; i++) {
            uint32_t m = dd_topk_mag(acc[i]);
            if (m >> 16 == high) {
                codec->hist[m & 0xffffu]++;
            }
        }
    }
}

/* Adds the input to the residual and finds the threshold: the k-th largest
 * magnitude, and how many elements of exactly that magnitude to send. */
static uint32_t dd_topk_threshold(dd_codec_t *codec, dd_codec_state_t *state,
                                  const float *in, size_t *ties_p)
{
    size_t need = state->k;

    dd_topk_count_high(codec, state->residual, in, state->count);
    uint32_t high = dd_topk_bucket(codec->hist, 0x7fff, &need);
    dd_topk_count_low(codec, state->residual, state->count, high);
    uint32_t low = dd_topk_bucket(codec->hist, 0xffff, &need);
    *ties_p = need;
    return high << 16 | low;
}

/* Writes the elements above the threshold t and the first ties of it, in
 * index order, and clears them from the residual: they are sent. */
static void dd_topk_emit(dd_codec_state_t *state, uint32_t t, size_t ties,
                         unsigned char *values, unsigned char *indices)
{
    float *acc = state->residual;
    size_t n = state->count, j = 0;

    for (size_t i = 0; i < n && j < state->k;) {
        size_t end = dd_topk_stretch(acc, &i, n, t);
        for (; i < end && j < state->k; i++) {
            uint32_t m = dd_topk_mag(acc[i]);
            if (m > t || (m == t && ties > 0)) {
                uint32_t idx = (uint32_t)i;
                ties -= m == t;
                memcpy(values + j * sizeof(float), &acc[i], sizeof(float));
                memcpy(indices + j * sizeof(uint32_t), &idx, sizeof(idx));
                acc[i] = 0;
                j++;
            }
        }
    }
}

static dd_status_t dd_topk_encode(dd_codec_t *codec, dd_codec_state_t *state,
                                  const void *in, size_t count,
                                  dd_dtype_t dtype, void *out,
                                  size_t *out_bytes_p)
{
    dd_status_t status = dd_topk_check(state, count, dtype, "encode");
    if (status != DD_OK) {
        return status;
    }
    unsigned char *values = (unsigned char *)out + DD_TOPK_HEADER;
    unsigned char *indices = values + state->k * sizeof(float);
    uint32_t header[2] = {(uint32_t)state->k, (uint32_t)count};
    size_t ties = 0;

    memcpy(out, header, sizeof(header));
    if (state->k > 0) {
        uint32_t t = dd_topk_threshold(codec, state, in, &ties);
        dd_topk_emit(state, t, ties, values, indices);
    }
    *out_bytes_p =
        DD_TOPK_HEADER + state->k * (sizeof(float) + sizeof(uint32_t));
    return DD_OK;
}

static dd_status_t dd_topk_decode(dd_codec_t *codec, dd_codec_state_t *state,
                                  const void *in, size_t in_bytes, void *out,
                                  size_t count, dd_dtype_t dtype)
{
    (void)codec;
    dd_status_t status = dd_topk_check(state, count, dtype, "decode");
    if (status != DD_OK) {
        return status;
    }
    size_t k = state->k, bytes = DD_TOPK_HEADER + k * 8;
    uint32_t header[2] = {0, 0};
    if (in_bytes >= DD_TOPK_HEADER) {
        memcpy(header, in, sizeof(header));
    }
    if (in_bytes != bytes || header[0] != k || header[1] != count) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_COMPRESS,
                        "codec topk: %zu bytes (k %u of %u elements) to "
                        "decode into %zu f32 elements, expected %zu (k %zu)",
                        in_bytes, (unsigned)header[0], (unsigned)header[1],
                        count, bytes, k);
    }
    const unsigned char *values = (const unsigned char *)in + DD_TOPK_HEADER;
    const unsigned char *indices = values + k * sizeof(float);
    float *dst = out;
    if (count > 0) {
        memset(dst, 0, count * sizeof(float));
    }
    for (size_t j = 0, next = 0; j < k; j++) {
        uint32_t idx;
        memcpy(&idx, indices + j * sizeof(idx), sizeof(idx));
        if (idx >= count || idx < next) { /* increasing, so no repeats */
            return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_COMPRESS,
                            "codec topk: index %u at %zu of %zu elements "
                            "is out of range or out of order",
                            (unsigned)idx, j, count);
        }
        memcpy(&dst[idx], values + j * sizeof(float), sizeof(float));
        next = (size_t)idx + 1;
    }
    return DD_OK;
}

const dd_codec_ops_t dd_codec_topk_ops = {
    .abi_version = DD_CODEC_ABI_VERSION,
    .name = "topk",
    .caps = DD_CODEC_CAP_ERROR_FEEDBACK,
    .wire_dtype = DD_DTYPE_U8,
    .create = dd_topk_create,
    .destroy = dd_topk_destroy,
    .encoded_size = dd_topk_encoded_size,
    .state_create = dd_topk_state_create,
    .state_free = dd_topk_state_free,
    .encode = dd_topk_encode,
    .decode = dd_topk_decode,
};
