/*
 * The array loops of half.h. Each format has a portable table, written once
 * for both formats from their scalar conversions, and on x86 a vector table
 * (F16C for f16, AVX2 for bf16), written once from an eight-lane load and
 * rounding; a call runs the vector loop over what it can where the CPU has
 * it (dd_cpu_has) and the portable loop over the rest. The two give the same
 * bits for every input. Includes only core and the public header.
 */
#include "core/half.h"
#include "core/cpu.h"

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DD_HALF_X86 1
#endif

/* The loops of one format: each does what it can of n elements (a vector
 * loop, a multiple of eight; a portable one, all) and returns how many. */
typedef size_t (*dd_half_convert_fn_t)(void *dst, const void *src, size_t n,
                                       int stream);
typedef struct {
    dd_half_convert_fn_t from_f32, to_f32;
    size_t (*sum)(uint16_t *d, const uint16_t *s, size_t n);
    size_t (*divide)(uint16_t *dst, const uint16_t *src, size_t n,
                     float divisor);
    size_t (*accumulate)(float *acc, const uint16_t *src, size_t n, int first);
    size_t (*scale)(uint16_t *dst, const float *acc, size_t n, float scale);
} dd_half_ops_t;

/* The table of the loops whose names start with prefix. */
#define DD_HALF_OPS(prefix)                                                    \
    {                                                                          \
        .from_f32 = prefix##from_f32, .to_f32 = prefix##to_f32,                \
        .sum = prefix##sum, .divide = prefix##divide,                          \
        .accumulate = prefix##accumulate, .scale = prefix##scale,              \
    }

/* An array conversion, portable (width 1) or vector (width 8 or 16): step
 * converts the width elements at i, from s into d. stream (the output is
 * aligned to 32 bytes, to be written around the caches) is for the step. */
#define DD_HALF_CONVERT(target, name, out_t, in_t, width, step)                \
    target static size_t name(void *dst, const void *src, size_t n,            \
                              int stream)                                      \
    {                                                                          \
        out_t *d = dst;                                                        \
        const in_t *s = src;                                                   \
        size_t i = 0;                                                          \
        (void)stream;                                                          \
        for (; i + (width) <= n; i += (width)) {                               \
            step;                                                              \
        }                                                                      \
        return i;                                                              \
    }

/* dst[i] = narrow(load(src[i]) op by): the quotient (in place, of halves)
 * and the scaled sum (of f32). */
#define DD_HALF_PORTABLE_MAP(name, in_t, load, op, narrow)                     \
    static size_t name(uint16_t *dst, const in_t *src, size_t n, float by)     \
    {                                                                          \
        for (size_t i = 0; i < n; i++) {                                       \
            dst[i] = narrow(load(src[i]) op by);                               \
        }                                                                      \
        return n;                                                              \
    }

/* The portable loops of format fmt, from its scalar conversions. */
#define DD_HALF_PORTABLE(fmt, narrow, widen)                                   \
    DD_HALF_CONVERT(, dd_half_loop_##fmt##_from_f32, uint16_t, float, 1,       \
                    d[i] = narrow(s[i]))                                       \
    DD_HALF_CONVERT(, dd_half_loop_##fmt##_to_f32, float, uint16_t, 1,         \
                    d[i] = widen(s[i]))                                        \
    DD_HALF_CONVERT(, dd_half_loop_##fmt##_from_f64, uint16_t, double, 1,      \
                    d[i] = narrow(dd_half_f64_to_f32_odd(s[i])))               \
    DD_HALF_CONVERT(, dd_half_loop_##fmt##_to_f64, double, uint16_t, 1,        \
                    d[i] = widen(s[i]))                                        \
    static size_t dd_half_loop_##fmt##_sum(                                    \
        uint16_t *restrict d, const uint16_t *restrict s, size_t n)            \
    {                                                                          \
        for (size_t i = 0; i < n; i++) {                                       \
            d[i] = narrow(widen(d[i]) + widen(s[i]));                          \
        }                                                                      \
        return n;                                                              \
    }                                                                          \
    DD_HALF_PORTABLE_MAP(dd_half_loop_##fmt##_divide, uint16_t, widen, /,      \
                         narrow)                                               \
    static size_t dd_half_loop_##fmt##_accumulate(                             \
        float *acc, const uint16_t *src, size_t n, int first)                  \
    {                                                                          \
        for (size_t i = 0; i < n; i++) {                                       \
            float x = widen(src[i]);                                           \
            acc[i] = first ? x : acc[i] + x;                                   \
        }                                                                      \
        return n;                                                              \
    }                                                                          \
    DD_HALF_PORTABLE_MAP(dd_half_loop_##fmt##_scale, float, (float), *,        \
                         narrow)                                               \
    static const dd_half_ops_t dd_half_##fmt##_portable =                      \
        DD_HALF_OPS(dd_half_loop_##fmt##_);

DD_HALF_PORTABLE(f16, dd_half_f32_to_f16, dd_half_f16_to_f32)
DD_HALF_PORTABLE(bf16, dd_half_f32_to_bf16, dd_half_bf16_to_f32)

#ifdef DD_HALF_X86
#define DD_HALF_F16C __attribute__((target("f16c,avx")))
#define DD_HALF_AVX2 __attribute__((target("avx2")))

/* Eight f16 widened to f32 lanes, and eight lanes rounded back. */
DD_HALF_F16C static inline __m256 dd_half_f16c_load8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

DD_HALF_F16C static inline __m128i dd_half_f16c_round8(__m256 x)
{
    return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
}

/* Eight bf16 widened (a shift), and dd_half_f32_to_bf16 on eight lanes:
 * integer rounding to nearest even, NaN made quiet, packed to 16 bits. */
DD_HALF_AVX2 static inline __m256 dd_half_avx2_load8(const uint16_t *p)
{
    __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
}

DD_HALF_AVX2 static inline __m128i dd_half_avx2_round8(__m256 f)
{
    const __m256i one = _mm256_set1_epi32(1);
    __m256i x = _mm256_castps_si256(f);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i r = _mm256_add_epi32(x, _mm256_set1_epi32(0x7fff));
    r = _mm256_srli_epi32(_mm256_add_epi32(r, _mm256_and_si256(hi, one)), 16);
    __m256i mag = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, quiet, nan);
    /* Every lane is below 2^16: the unsigned saturation keeps it. */
    return _mm_packus_epi32(_mm256_castsi256_si128(r),
                            _mm256_extracti128_si256(r, 1));
}

/* 32 bytes to p, around the caches when stream (p is then aligned). */
__attribute__((target("avx"))) static inline void
dd_half_store32(void *p, __m256i x, int stream)
{
    if (stream) {
        _mm256_stream_si256((__m256i *)p, x);
    } else {
        _mm256_storeu_si256((__m256i *)p, x);
    }
}

/* The 16 elements of two roundings, lo's at the lower address. */
__attribute__((target("avx"))) static inline __m256i dd_half_join(__m128i lo,
                                                                  __m128i hi)
{
    return _mm256_insertf128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* dst[i] = round8(op(load(src + i), by)), eight at a time: the quotient
 * (in place, of halves) and the scaled sum (of f32). */
#define DD_HALF_VECTOR_MAP(target, name, in_t, load, op, round8)               \
    target static size_t name(uint16_t *dst, const in_t *src, size_t n,        \
                              float by)                                        \
    {                                                                          \
        __m256 v = _mm256_set1_ps(by);                                         \
        size_t i = 0;                                                          \
        for (; i + 8 <= n; i += 8) {                                           \
            __m256 x = op(load(src + i), v);                                   \
            _mm_storeu_si128((__m128i *)(dst + i), round8(x));                 \
        }                                                                      \
        return i;                                                              \
    }

/* The vector loops of fmt (f16c or avx2), eight or sixteen elements at a
 * time, from its load8 and round8; what a loop leaves is the portable
 * one's. */
#define DD_HALF_VECTOR(fmt, target)                                            \
    DD_HALF_CONVERT(                                                           \
        target, dd_half_##fmt##_from_f32, uint16_t, float, 16,                 \
        dd_half_store32(                                                       \
            d + i,                                                             \
            dd_half_join(dd_half_##fmt##_round8(_mm256_loadu_ps(s + i)),       \
                         dd_half_##fmt##_round8(_mm256_loadu_ps(s + i + 8))),  \
            stream))                                                           \
    DD_HALF_CONVERT(                                                           \
        target, dd_half_##fmt##_to_f32, float, uint16_t, 8,                    \
        dd_half_store32(                                                       \
            d + i, _mm256_castps_si256(dd_half_##fmt##_load8(s + i)), stream)) \
    target static size_t dd_half_##fmt##_sum(uint16_t *d, const uint16_t *s,   \
                                             size_t n)                         \
    {                                                                          \
        size_t i = 0;                                                          \
        for (; i + 8 <= n; i += 8) {                                           \
            __m256 x = _mm256_add_ps(dd_half_##fmt##_load8(d + i),             \
                                     dd_half_##fmt##_load8(s + i));            \
            _mm_storeu_si128((__m128i *)(d + i), dd_half_##fmt##_round8(x));   \
        }                                                                      \
        return i;                                                              \
    }                                                                          \
    DD_HALF_VECTOR_MAP(target, dd_half_##fmt##_divide, uint16_t,               \
                       dd_half_##fmt##_load8, _mm256_div_ps,                   \
                       dd_half_##fmt##_round8)                                 \
    DD_HALF_VECTOR_MAP(target, dd_half_##fmt##_scale, float, _mm256_loadu_ps,  \
                       _mm256_mul_ps, dd_half_##fmt##_round8)                  \
    target static size_t dd_half_##fmt##_accumulate(                           \
        float *acc, const uint16_t *src, size_t n, int first)                  \
    {                                                                          \
        size_t i = 0;                                                          \
        for (; i + 8 <= n; i += 8) {                                           \
            __m256 x = dd_half_##fmt##_load8(src + i);                         \
            if (!first) {                                                      \
                x = _mm256_add_ps(x, _mm256_loadu_ps(acc + i));                \
            }                                                                  \
            _mm256_storeu_ps(acc + i, x);                                      \
        }                                                                      \
        return i;                                                              \
    }                                                                          \
    static const dd_half_ops_t dd_half_##fmt##_vector =                        \
        DD_HALF_OPS(dd_half_##fmt##_);

DD_HALF_VECTOR(f16c, DD_HALF_F16C)
DD_HALF_VECTOR(avx2, DD_HALF_AVX2)
#endif

static const dd_half_ops_t *dd_half_portable(dd_dtype_t half)
{
    return half == DD_DTYPE_BF16 ? &dd_half_bf16_portable
                                 : &dd_half_f16_portable;
}

/* The vector loops this CPU runs for half, or a table of none. */
static const dd_half_ops_t *dd_half_vector(dd_dtype_t half)
{
    static const dd_half_ops_t none = {0};
#ifdef DD_HALF_X86
    if (half == DD_DTYPE_BF16 ? dd_cpu_has(DD_CPU_AVX2)
                              : dd_cpu_has(DD_CPU_F16C)) {
        return half == DD_DTYPE_BF16 ? &dd_half_avx2_vector
                                     : &dd_half_f16c_vector;
    }
#endif
    (void)half;
    return &none;
}

/* Elements of size esize to convert one by one before dst is aligned to
 * 32 bytes, or SIZE_MAX when it never will be. */
static size_t dd_half_head(const void *dst, size_t esize)
{
    uintptr_t a = (uintptr_t)dst;
    return a % esize != 0 ? SIZE_MAX : ((32 - a % 32) % 32) / esize;
}

/* An array conversion: the vector loop (if any) from the start, or, for an
 * output large enough to stream, from where dst is aligned, after a
 * portable head; the portable loop does the rest. */
static void dd_half_convert(void *dst, size_t dsize, const void *src,
                            size_t ssize, size_t n, dd_half_convert_fn_t vector,
                            dd_half_convert_fn_t portable)
{
    size_t i = 0;

    if (vector != NULL) {
        size_t head = dd_half_head(dst, dsize);
        int stream = n * dsize >= DD_HALF_STREAM_BYTES && head < n;
        if (stream) {
            i = portable(dst, src, head, 0);
        }
        i += vector((char *)dst + i * dsize, (const char *)src + i * ssize,
                    n - i, stream);
#ifdef DD_HALF_X86
        if (stream) {
            _mm_sfence(); /* the non-temporal stores, before any reader */
        }
#endif
    }
    portable((char *)dst + i * dsize, (const char *)src + i * ssize, n - i, 0);
}

void dd_half_from_f32(dd_dtype_t half, uint16_t *dst, const float *src,
                      size_t n, dd_half_path_t path)
{
    dd_half_convert(dst, sizeof(*dst), src, sizeof(*src), n,
                    path == DD_HALF_AUTO ? dd_half_vector(half)->from_f32
                                         : NULL,
                    dd_half_portable(half)->from_f32);
}

void dd_half_to_f32(dd_dtype_t half, float *dst, const uint16_t *src, size_t n,
                    dd_half_path_t path)
{
    dd_half_convert(dst, sizeof(*dst), src, sizeof(*src), n,
                    path == DD_HALF_AUTO ? dd_half_vector(half)->to_f32 : NULL,
                    dd_half_portable(half)->to_f32);
}

void dd_half_from_f64(dd_dtype_t half, uint16_t *dst, const double *src,
                      size_t n)
{
    if (half == DD_DTYPE_BF16) {
        dd_half_loop_bf16_from_f64(dst, src, n, 0);
    } else {
        dd_half_loop_f16_from_f64(dst, src, n, 0);
    }
}

void dd_half_to_f64(dd_dtype_t half, double *dst, const uint16_t *src, size_t n)
{
    if (half == DD_DTYPE_BF16) {
        dd_half_loop_bf16_to_f64(dst, src, n, 0);
    } else {
        dd_half_loop_f16_to_f64(dst, src, n, 0);
    }
}

void dd_half_sum(dd_dtype_t half, uint16_t *d, const uint16_t *s, size_t n)
{
    const dd_half_ops_t *v = dd_half_vector(half);
    size_t i = v->sum != NULL ? v->sum(d, s, n) : 0;
    dd_half_portable(half)->sum(d + i, s + i, n - i);
}

void dd_half_divide(dd_dtype_t half, uint16_t *buf, size_t n, float divisor)
{
    const dd_half_ops_t *v = dd_half_vector(half);
    size_t i = v->divide != NULL ? v->divide(buf, buf, n, divisor) : 0;
    dd_half_portable(half)->divide(buf + i, buf + i, n - i, divisor);
}

void dd_half_accumulate(dd_dtype_t half, float *acc, const uint16_t *src,
                        size_t n, int first)
{
    const dd_half_ops_t *v = dd_half_vector(half);
    size_t i = v->accumulate != NULL ? v->accumulate(acc, src, n, first) : 0;
    dd_half_portable(half)->accumulate(acc + i, src + i, n - i, first);
}

void dd_half_scale(dd_dtype_t half, uint16_t *dst, const float *acc, size_t n,
                   float scale)
{
    const dd_half_ops_t *v = dd_half_vector(half);
    size_t i = v->scale != NULL ? v->scale(dst, acc, n, scale) : 0;
    dd_half_portable(half)->scale(dst + i, acc + i, n - i, scale);
}
