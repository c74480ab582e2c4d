/*
 * Element-wise reductions and f16/bf16 conversions. Integer sums wrap (they
 * are computed on unsigned types, so the wrap is defined behaviour); NaN
 * propagates through max and min as it does through sum. f16 and bf16 are
 * summed in binary32: f16 with F16C where the CPU has it (checked at run
 * time), and scalar conversions that give the same bits otherwise, so that
 * ranks on different CPUs sum to the same bytes.
 */
#include "core/reduce.h"
#include "core/cpu.h"

#include <math.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <string.h>

static uint32_t dd_coll_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float dd_coll_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

float dd_coll_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) { /* inf, or NaN made quiet as vcvtph2ps does */
        return dd_coll_bits_f32(sign | 0x7f800000u | (mant << 13) |
                                (mant != 0 ? 0x400000u : 0));
    }
    if (exp == 0) { /* zero, subnormal: mant * 2^-24, exact in binary32 */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return dd_coll_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t dd_coll_f32_to_f16(float f)
{
    uint32_t u = dd_coll_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;

    if (a > 0x7f800000u) { /* NaN: quiet, top payload bits kept (F16C) */
        return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu);
    }
    if (a >= 0x477ff000u) { /* rounds to 65536 or more: overflow */
        return sign | 0x7c00u;
    }
    if (a < 0x38800000u) { /* below 2^-14: subnormal or zero */
        /* Adding 0.5 lets the FPU round to a multiple of 2^-24, to nearest
         * even; the bits of the sum below are the subnormal mantissa. */
        float v = dd_coll_bits_f32(a) + 0.5f;
        return sign | (uint16_t)(dd_coll_f32_bits(v) - 0x3f000000u);
    }
    uint32_t mant_odd = (a >> 13) & 1u;
    a += 0xfffu + mant_odd; /* round to nearest, ties to even */
    return sign | (uint16_t)((a - 0x38000000u) >> 13);
}

float dd_coll_bf16_to_f32(uint16_t b)
{
    return dd_coll_bits_f32((uint32_t)b << 16);
}

uint16_t dd_coll_f32_to_bf16(float f)
{
    uint32_t u = dd_coll_f32_bits(f);

    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN, sign kept */
    }
    u += 0x7fffu + ((u >> 16) & 1u); /* ties to even; overflow gives inf */
    return (uint16_t)(u >> 16);
}

#define DD_COLL_MAX(a, b) ((a) >= (b) || (a) != (a) ? (a) : (b))
#define DD_COLL_MIN(a, b) ((a) <= (b) || (a) != (a) ? (a) : (b))

#define DD_COLL_REDUCE_LOOP(type, sumtype)                                     \
    do {                                                                       \
        type *d = dst;                                                         \
        const type *s = src;                                                   \
        switch (op) {                                                          \
        case DD_REDUCE_SUM:                                                    \
        case DD_REDUCE_AVG:                                                    \
            for (size_t i = 0; i < count; i++) {                               \
                d[i] = (type)((sumtype)d[i] + (sumtype)s[i]);                  \
            }                                                                  \
            break;                                                             \
        case DD_REDUCE_MAX:                                                    \
            for (size_t i = 0; i < count; i++) {                               \
                d[i] = DD_COLL_MAX(d[i], s[i]);                                \
            }                                                                  \
            break;                                                             \
        default:                                                               \
            for (size_t i = 0; i < count; i++) {                               \
                d[i] = DD_COLL_MIN(d[i], s[i]);                                \
            }                                                                  \
            break;                                                             \
        }                                                                      \
    } while (0)

/*
 * Sums of distinct buffers, the bulk of a large allreduce's computation.
 * restrict and blocks of eight independent additions let the compiler use
 * vector instructions at -O2, which it does not do for a loop whose
 * buffers may overlap.
 */
#define DD_COLL_SUM_DISTINCT(name, type)                                       \
    static void name(type *restrict d, const type *restrict s, size_t count)   \
    {                                                                          \
        size_t i = 0;                                                          \
        for (; i + 8 <= count; i += 8) {                                       \
            for (size_t j = 0; j < 8; j++) {                                   \
                d[i + j] += s[i + j];                                          \
            }                                                                  \
        }                                                                      \
        for (; i < count; i++) {                                               \
            d[i] += s[i];                                                      \
        }                                                                      \
    }

DD_COLL_SUM_DISTINCT(dd_coll_sum_f32, float)
DD_COLL_SUM_DISTINCT(dd_coll_sum_f64, double)

typedef float (*dd_coll_widen_fn_t)(uint16_t);
typedef uint16_t (*dd_coll_narrow_fn_t)(float);

#if defined(__x86_64__) || defined(__i386__)
#define DD_COLL_X86 1
/* d = narrow(widen(d) + widen(s)) in f16, 16 elements at a time; returns how
 * many it did (a multiple of 16). The per-element function call of the
 * portable loop made f16 sums 20 times slower than f32 ones. */
__attribute__((target("f16c,avx"))) static size_t
dd_coll_sum_f16_f16c(uint16_t *d, const uint16_t *s, size_t count)
{
    size_t i = 0;
    for (; i + 16 <= count; i += 16) {
        __m256 a0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + i)));
        __m256 a1 =
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + i + 8)));
        __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i)));
        __m256 b1 =
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i + 8)));
        _mm_storeu_si128(
            (__m128i *)(d + i),
            _mm256_cvtps_ph(_mm256_add_ps(a0, b0), _MM_FROUND_TO_NEAREST_INT));
        _mm_storeu_si128(
            (__m128i *)(d + i + 8),
            _mm256_cvtps_ph(_mm256_add_ps(a1, b1), _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

/* b = narrow(widen(b) / divisor), 8 at a time, as above. */
__attribute__((target("f16c,avx"))) static size_t
dd_coll_divide_f16_f16c(uint16_t *b, size_t count, float divisor)
{
    __m256 v = _mm256_set1_ps(divisor);
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
        _mm_storeu_si128(
            (__m128i *)(b + i),
            _mm256_cvtps_ph(_mm256_div_ps(a, v), _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

/* d = bf16(f32(d) + f32(s)), 8 at a time: widening is a shift, the
 * rounding to nearest even integer arithmetic, NaN made quiet. */
__attribute__((target("avx2"))) static size_t
dd_coll_sum_bf16_avx2(uint16_t *d, const uint16_t *s, size_t count)
{
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i abs = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    size_t i = 0;

    for (; i + 8 <= count; i += 8) {
        __m256i a = _mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(d + i))),
            16);
        __m256i b = _mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i))),
            16);
        __m256i u = _mm256_castps_si256(
            _mm256_add_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b)));
        __m256i top = _mm256_srli_epi32(u, 16);
        __m256i rounded =
            _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias),
                                               _mm256_and_si256(top, one)),
                              16);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        __m256i r =
            _mm256_blendv_epi8(rounded, _mm256_or_si256(top, quiet), nan);
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm_packus_epi32(_mm256_castsi256_si128(r),
                                          _mm256_extracti128_si256(r, 1)));
    }
    return i;
}

#endif

/* bf16 sums without a call per element, the same bits as the AVX2 loop. */
static void dd_coll_sum_bf16(uint16_t *restrict d, const uint16_t *restrict s,
                             size_t count)
{
    size_t i = 0;
#ifdef DD_COLL_X86
    if (dd_cpu_has(DD_CPU_AVX2)) {
        i = dd_coll_sum_bf16_avx2(d, s, count);
    }
#endif
    for (; i < count; i++) {
        float r = dd_coll_bits_f32((uint32_t)d[i] << 16) +
                  dd_coll_bits_f32((uint32_t)s[i] << 16);
        uint32_t u = dd_coll_f32_bits(r);
        uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        d[i] = (uint16_t)(nan ? (u >> 16) | 0x40u : rounded);
    }
}

static void dd_coll_reduce_half(uint16_t *d, const uint16_t *s, size_t count,
                                dd_reduce_op_t op, dd_coll_widen_fn_t widen,
                                dd_coll_narrow_fn_t narrow)
{
    for (size_t i = 0; i < count; i++) {
        float a = widen(d[i]), b = widen(s[i]), r;
        if (op == DD_REDUCE_SUM || op == DD_REDUCE_AVG) {
            r = a + b;
        } else if (op == DD_REDUCE_MAX) {
            r = DD_COLL_MAX(a, b);
        } else {
            r = DD_COLL_MIN(a, b);
        }
        d[i] = narrow(r);
    }
}

void dd_coll_reduce(void *dst, const void *src, size_t count, dd_dtype_t dtype,
                    dd_reduce_op_t op)
{
    int sum = op == DD_REDUCE_SUM || op == DD_REDUCE_AVG;

    switch (dtype) {
    case DD_DTYPE_F32:
        if (sum && dst != src) {
            dd_coll_sum_f32(dst, src, count);
            break;
        }
        DD_COLL_REDUCE_LOOP(float, float);
        break;
    case DD_DTYPE_F64:
        if (sum && dst != src) {
            dd_coll_sum_f64(dst, src, count);
            break;
        }
        DD_COLL_REDUCE_LOOP(double, double);
        break;
    case DD_DTYPE_F16: {
        size_t done = 0;
#ifdef DD_COLL_X86
        if (sum && dst != src && dd_cpu_has(DD_CPU_F16C)) {
            done = dd_coll_sum_f16_f16c(dst, src, count);
        }
#endif
        dd_coll_reduce_half((uint16_t *)dst + done,
                            (const uint16_t *)src + done, count - done, op,
                            dd_coll_f16_to_f32, dd_coll_f32_to_f16);
        break;
    }
    case DD_DTYPE_BF16:
        if (sum && dst != src) {
            dd_coll_sum_bf16(dst, src, count);
            break;
        }
        dd_coll_reduce_half(dst, src, count, op, dd_coll_bf16_to_f32,
                            dd_coll_f32_to_bf16);
        break;
    case DD_DTYPE_I32:
        DD_COLL_REDUCE_LOOP(int32_t, uint32_t);
        break;
    case DD_DTYPE_I64:
        DD_COLL_REDUCE_LOOP(int64_t, uint64_t);
        break;
    case DD_DTYPE_U8:
        DD_COLL_REDUCE_LOOP(uint8_t, uint8_t);
        break;
    default:
        break;
    }
}

#define DD_COLL_DIVIDE_LOOP(type, divtype)                                     \
    do {                                                                       \
        type *b = buf;                                                         \
        for (size_t i = 0; i < count; i++) {                                   \
            b[i] = (type)((divtype)b[i] / (divtype)divisor);                   \
        }                                                                      \
    } while (0)

void dd_coll_divide(void *buf, size_t count, dd_dtype_t dtype, int divisor)
{
    uint16_t *h = buf;

    switch (dtype) {
    case DD_DTYPE_F32:
        DD_COLL_DIVIDE_LOOP(float, float);
        break;
    case DD_DTYPE_F64:
        DD_COLL_DIVIDE_LOOP(double, double);
        break;
    case DD_DTYPE_F16: {
        size_t i = 0;
#ifdef DD_COLL_X86
        if (dd_cpu_has(DD_CPU_F16C)) {
            i = dd_coll_divide_f16_f16c(h, count, (float)divisor);
        }
#endif
        for (; i < count; i++) {
            h[i] =
                dd_coll_f32_to_f16(dd_coll_f16_to_f32(h[i]) / (float)divisor);
        }
        break;
    }
    case DD_DTYPE_BF16:
        for (size_t i = 0; i < count; i++) {
            h[i] =
                dd_coll_f32_to_bf16(dd_coll_bf16_to_f32(h[i]) / (float)divisor);
        }
        break;
    case DD_DTYPE_I32:
        DD_COLL_DIVIDE_LOOP(int32_t, int32_t);
        break;
    case DD_DTYPE_I64:
        DD_COLL_DIVIDE_LOOP(int64_t, int64_t);
        break;
    case DD_DTYPE_U8:
        DD_COLL_DIVIDE_LOOP(uint8_t, unsigned);
        break;
    default:
        break;
    }
}
