/*
 * The fp16 codec ("fp16"): layers go on the wire as IEEE binary16, rounded
 * to nearest even, and the wire sums as f16 (the aggregators and shared
 * reductions add f16 in f32). f32 layers use F16C where the CPU has it
 * (checked at run time) and a scalar loop that gives the same bits
 * otherwise; f64 layers are rounded once, through round-to-odd; f16 layers
 * are copied. It keeps no residual: what rounding loses is lost. It must
 * not allocate in encode or decode.
 */
#include "compress/codec.h"
#include "compress/convert.h"
#include "compress/half.h"
#include "core/cpu.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DD_FP16_X86 1
#endif

static uint32_t dd_fp16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float dd_fp16_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* The scalar conversion, bit for bit what vcvtps2ph does with round to
 * nearest even and exceptions masked. */
static uint16_t dd_fp16_narrow(float f)
{
    uint32_t u = dd_fp16_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;

    if (a > 0x7f800000u) { /* NaN: quiet, top payload bits kept */
        return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu);
    }
    if (a >= 0x477ff000u) { /* rounds to 65536 or more: inf */
        return sign | 0x7c00u;
    }
    if (a < 0x38800000u) { /* below 2^-14: subnormal or zero */
        /* Adding 0.5 makes the FPU round to a multiple of 2^-24, to
         * nearest even; the low bits of the sum are the mantissa. */
        float v = dd_fp16_float(a) + 0.5f;
        return sign | (uint16_t)(dd_fp16_bits(v) - 0x3f000000u);
    }
    a += 0xfffu + ((a >> 13) & 1u);
    return sign | (uint16_t)((a - 0x38000000u) >> 13);
}

static float dd_fp16_widen(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) { /* inf, or NaN made quiet as vcvtph2ps does */
        return dd_fp16_float(sign | 0x7f800000u | (mant << 13) |
                             (mant != 0 ? 0x400000u : 0));
    }
    if (exp == 0) { /* zero, subnormal: mant * 2^-24, exact in binary32 */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return dd_fp16_float(sign | ((exp + 112) << 23) | (mant << 13));
}

#ifdef DD_FP16_X86
/* stream: dst is 32-byte aligned, write around the caches. */
__attribute__((target("f16c,avx"))) static size_t
dd_fp16_from_f32_f16c(uint16_t *dst, const float *src, size_t n, int stream)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                    _MM_FROUND_TO_NEAREST_INT);
        __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8),
                                    _MM_FROUND_TO_NEAREST_INT);
        __m256i ab = _mm256_insertf128_si256(_mm256_castsi128_si256(a), b, 1);
        if (stream) {
            _mm256_stream_si256((__m256i *)(dst + i), ab);
        } else {
            _mm256_storeu_si256((__m256i *)(dst + i), ab);
        }
    }
    if (stream) {
        _mm_sfence();
    }
    return i;
}

__attribute__((target("f16c,avx"))) static size_t
dd_fp16_to_f32_f16c(float *dst, const uint16_t *src, size_t n, int stream)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i)));
        __m256 b =
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i + 8)));
        if (stream) {
            _mm256_stream_ps(dst + i, a);
            _mm256_stream_ps(dst + i + 8, b);
        } else {
            _mm256_storeu_ps(dst + i, a);
            _mm256_storeu_ps(dst + i + 8, b);
        }
    }
    if (stream) {
        _mm_sfence();
    }
    return i;
}
#endif

int dd_fp16_have_simd(void)
{
#ifdef DD_FP16_X86
    return dd_cpu_has(DD_CPU_F16C);
#else
    return 0;
#endif
}

void dd_fp16_from_f32(uint16_t *dst, const float *src, size_t n,
                      dd_convert_path_t path)
{
    size_t i = 0;
#ifdef DD_FP16_X86
    if (path == DD_CONVERT_AUTO && dd_fp16_have_simd()) {
        size_t head = dd_convert_head(dst, sizeof(*dst));
        if (n * sizeof(*dst) >= DD_CONVERT_STREAM_BYTES && head < n) {
            for (; i < head; i++) {
                dst[i] = dd_fp16_narrow(src[i]);
            }
            i += dd_fp16_from_f32_f16c(dst + i, src + i, n - i, 1);
        } else {
            i = dd_fp16_from_f32_f16c(dst, src, n, 0);
        }
    }
#endif
    for (; i < n; i++) {
        dst[i] = dd_fp16_narrow(src[i]);
    }
}

void dd_fp16_to_f32(float *dst, const uint16_t *src, size_t n,
                    dd_convert_path_t path)
{
    size_t i = 0;
#ifdef DD_FP16_X86
    if (path == DD_CONVERT_AUTO && dd_fp16_have_simd()) {
        size_t head = dd_convert_head(dst, sizeof(*dst));
        if (n * sizeof(*dst) >= DD_CONVERT_STREAM_BYTES && head < n) {
            for (; i < head; i++) {
                dst[i] = dd_fp16_widen(src[i]);
            }
            i += dd_fp16_to_f32_f16c(dst + i, src + i, n - i, 1);
        } else {
            i = dd_fp16_to_f32_f16c(dst, src, n, 0);
        }
    }
#endif
    for (; i < n; i++) {
        dst[i] = dd_fp16_widen(src[i]);
    }
}

static void dd_fp16_encode_any(void *out, const void *in, size_t count,
                               dd_dtype_t dtype)
{
    uint16_t *dst = out;

    if (dtype == DD_DTYPE_F32) {
        dd_fp16_from_f32(dst, in, count, DD_CONVERT_AUTO);
    } else if (dtype == DD_DTYPE_F64) {
        for (size_t i = 0; i < count; i++) {
            dst[i] = dd_fp16_narrow(
                dd_convert_f64_to_f32_odd(((const double *)in)[i]));
        }
    } else if (count > 0) {
        memcpy(out, in, count * sizeof(uint16_t));
    }
}

static void dd_fp16_decode_any(void *out, const void *in, size_t count,
                               dd_dtype_t dtype)
{
    const uint16_t *src = in;

    if (dtype == DD_DTYPE_F32) {
        dd_fp16_to_f32(out, src, count, DD_CONVERT_AUTO);
    } else if (dtype == DD_DTYPE_F64) {
        for (size_t i = 0; i < count; i++) {
            ((double *)out)[i] = dd_fp16_widen(src[i]);
        }
    } else if (count > 0) {
        memcpy(out, in, count * sizeof(uint16_t));
    }
}

static const dd_half_codec_t dd_fp16_half = {
    .name = "fp16",
    .own_dtype = DD_DTYPE_F16,
    .encode = dd_fp16_encode_any,
    .decode = dd_fp16_decode_any,
};

static dd_status_t dd_fp16_create(const char *arg, char *why, size_t why_size,
                                  dd_codec_t **codec_p)
{
    return dd_half_create(&dd_fp16_half, arg, why, why_size, codec_p);
}

const dd_codec_ops_t dd_codec_fp16_ops = {
    .abi_version = DD_CODEC_ABI_VERSION,
    .name = "fp16",
    .caps = DD_CODEC_CAP_SUMMABLE,
    .wire_dtype = DD_DTYPE_F16,
    .create = dd_fp16_create,
    .destroy = dd_half_destroy,
    .encoded_size = dd_half_encoded_size,
    .state_create = dd_half_state_create,
    .state_free = dd_half_state_free,
    .encode = dd_half_encode,
    .decode = dd_half_decode,
};
