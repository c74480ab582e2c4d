/*
 * The bf16 codec ("bf16"): layers go on the wire as bfloat16 (the top half
 * of an f32), rounded to nearest even, and the wire sums as bf16 (added in
 * f32 by the aggregators and the shared reductions). The rounding is
 * integer arithmetic, done eight lanes at a time with AVX2 where the CPU
 * has it (checked at run time) and by a scalar loop that gives the same
 * bits otherwise; f64 layers are rounded once, through round-to-odd; bf16
 * layers are copied. No residual is kept, and encode and decode must not
 * allocate.
 */
#include "compress/codec.h"
#include "compress/convert.h"
#include "compress/half.h"
#include "core/cpu.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DD_BF16_X86 1
#endif

static uint16_t dd_bf16_narrow(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));

    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN, sign kept */
    }
    u += 0x7fffu + ((u >> 16) & 1u); /* ties to even; overflow gives inf */
    return (uint16_t)(u >> 16);
}

static float dd_bf16_widen(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

#ifdef DD_BF16_X86
/* dd_bf16_narrow on eight lanes, each in the low half of its 32 bits. */
__attribute__((target("avx2"))) static __m256i dd_bf16_narrow8(__m256i x)
{
    const __m256i one = _mm256_set1_epi32(1);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i r = _mm256_add_epi32(x, _mm256_set1_epi32(0x7fff));
    r = _mm256_srli_epi32(_mm256_add_epi32(r, _mm256_and_si256(hi, one)), 16);
    __m256i mag = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, quiet, nan);
}

__attribute__((target("avx2"))) static size_t
dd_bf16_from_f32_avx2(uint16_t *dst, const float *src, size_t n, int stream)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a =
            dd_bf16_narrow8(_mm256_loadu_si256((const __m256i *)(src + i)));
        __m256i b =
            dd_bf16_narrow8(_mm256_loadu_si256((const __m256i *)(src + i + 8)));
        /* packus interleaves the 128-bit lanes; the permute puts a before b. */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
        if (stream) {
            _mm256_stream_si256((__m256i *)(dst + i), p);
        } else {
            _mm256_storeu_si256((__m256i *)(dst + i), p);
        }
    }
    if (stream) {
        _mm_sfence();
    }
    return i;
}

__attribute__((target("avx2"))) static size_t
dd_bf16_to_f32_avx2(float *dst, const uint16_t *src, size_t n, int stream)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i a = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(h));
        __m256i b = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1));
        a = _mm256_slli_epi32(a, 16);
        b = _mm256_slli_epi32(b, 16);
        if (stream) {
            _mm256_stream_si256((__m256i *)(dst + i), a);
            _mm256_stream_si256((__m256i *)(dst + i + 8), b);
        } else {
            _mm256_storeu_si256((__m256i *)(dst + i), a);
            _mm256_storeu_si256((__m256i *)(dst + i + 8), b);
        }
    }
    if (stream) {
        _mm_sfence();
    }
    return i;
}
#endif

int dd_bf16_have_simd(void)
{
#ifdef DD_BF16_X86
    return dd_cpu_has(DD_CPU_AVX2);
#else
    return 0;
#endif
}

void dd_bf16_from_f32(uint16_t *dst, const float *src, size_t n,
                      dd_convert_path_t path)
{
    size_t i = 0;
#ifdef DD_BF16_X86
    if (path == DD_CONVERT_AUTO && dd_bf16_have_simd()) {
        size_t head = dd_convert_head(dst, sizeof(*dst));
        if (n * sizeof(*dst) >= DD_CONVERT_STREAM_BYTES && head < n) {
            for (; i < head; i++) {
                dst[i] = dd_bf16_narrow(src[i]);
            }
            i += dd_bf16_from_f32_avx2(dst + i, src + i, n - i, 1);
        } else {
            i = dd_bf16_from_f32_avx2(dst, src, n, 0);
        }
    }
#endif
    for (; i < n; i++) {
        dst[i] = dd_bf16_narrow(src[i]);
    }
}

void dd_bf16_to_f32(float *dst, const uint16_t *src, size_t n,
                    dd_convert_path_t path)
{
    size_t i = 0;
#ifdef DD_BF16_X86
    if (path == DD_CONVERT_AUTO && dd_bf16_have_simd()) {
        size_t head = dd_convert_head(dst, sizeof(*dst));
        if (n * sizeof(*dst) >= DD_CONVERT_STREAM_BYTES && head < n) {
            for (; i < head; i++) {
                dst[i] = dd_bf16_widen(src[i]);
            }
            i += dd_bf16_to_f32_avx2(dst + i, src + i, n - i, 1);
        } else {
            i = dd_bf16_to_f32_avx2(dst, src, n, 0);
        }
    }
#endif
    for (; i < n; i++) {
        dst[i] = dd_bf16_widen(src[i]);
    }
}

static void dd_bf16_encode_any(void *out, const void *in, size_t count,
                               dd_dtype_t dtype)
{
    uint16_t *dst = out;

    if (dtype == DD_DTYPE_F32) {
        dd_bf16_from_f32(dst, in, count, DD_CONVERT_AUTO);
    } else if (dtype == DD_DTYPE_F64) {
        for (size_t i = 0; i < count; i++) {
            dst[i] = dd_bf16_narrow(
                dd_convert_f64_to_f32_odd(((const double *)in)[i]));
        }
    } else if (count > 0) {
        memcpy(out, in, count * sizeof(uint16_t));
    }
}

static void dd_bf16_decode_any(void *out, const void *in, size_t count,
                               dd_dtype_t dtype)
{
    const uint16_t *src = in;

    if (dtype == DD_DTYPE_F32) {
        dd_bf16_to_f32(out, src, count, DD_CONVERT_AUTO);
    } else if (dtype == DD_DTYPE_F64) {
        for (size_t i = 0; i < count; i++) {
            ((double *)out)[i] = dd_bf16_widen(src[i]);
        }
    } else if (count > 0) {
        memcpy(out, in, count * sizeof(uint16_t));
    }
}

static const dd_half_codec_t dd_bf16_half = {
    .name = "bf16",
    .own_dtype = DD_DTYPE_BF16,
    .encode = dd_bf16_encode_any,
    .decode = dd_bf16_decode_any,
};

static dd_status_t dd_bf16_create(const char *arg, char *why, size_t why_size,
                                  dd_codec_t **codec_p)
{
    return dd_half_create(&dd_bf16_half, arg, why, why_size, codec_p);
}

const dd_codec_ops_t dd_codec_bf16_ops = {
    .abi_version = DD_CODEC_ABI_VERSION,
    .name = "bf16",
    .caps = DD_CODEC_CAP_SUMMABLE,
    .wire_dtype = DD_DTYPE_BF16,
    .create = dd_bf16_create,
    .destroy = dd_half_destroy,
    .encoded_size = dd_half_encoded_size,
    .state_create = dd_half_state_create,
    .state_free = dd_half_state_free,
    .encode = dd_half_encode,
    .decode = dd_half_decode,
};
