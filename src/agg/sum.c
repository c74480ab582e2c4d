/*
 * The aggregators' arithmetic: copies of a chunk are added into a float
 * accumulator (double for f64), then scaled and converted back. f16 uses
 * the CPU's F16C conversions where it has them (checked at run time), the
 * portable conversions otherwise; bf16 is a shift. No I/O here.
 */
#include "agg/wire.h"
#include "core/cpu.h"
#include "core/reduce.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

__attribute__((target("f16c,avx"))) static void
dd_agg_f16_add_f16c(float *acc, const uint16_t *src, size_t n, int first)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i)));
        if (!first) {
            x = _mm256_add_ps(x, _mm256_loadu_ps(acc + i));
        }
        _mm256_storeu_ps(acc + i, x);
    }
    for (; i < n; i++) {
        float x = dd_coll_f16_to_f32(src[i]);
        acc[i] = first ? x : acc[i] + x;
    }
}

__attribute__((target("f16c,avx"))) static void
dd_agg_f16_out_f16c(uint16_t *dst, const float *acc, size_t n, float scale)
{
    size_t i = 0;
    __m256 s = _mm256_set1_ps(scale);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_mul_ps(_mm256_loadu_ps(acc + i), s);
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) {
        dst[i] = dd_coll_f32_to_f16(acc[i] * scale);
    }
}
#endif

size_t dd_agg_acc_bytes(dd_dtype_t dtype, size_t count)
{
    return count * (dtype == DD_DTYPE_F64 ? sizeof(double) : sizeof(float));
}

int dd_agg_dtype_ok(dd_dtype_t dtype)
{
    return dtype == DD_DTYPE_F32 || dtype == DD_DTYPE_F64 ||
           dtype == DD_DTYPE_F16 || dtype == DD_DTYPE_BF16;
}

void dd_agg_add(void *acc, const void *src, size_t n, dd_dtype_t dtype,
                int first)
{
    float *a = acc;
    switch (dtype) {
    case DD_DTYPE_F32:
        if (first) {
            memcpy(a, src, n * sizeof(float));
            return;
        }
        for (size_t i = 0; i < n; i++) {
            a[i] += ((const float *)src)[i];
        }
        return;
    case DD_DTYPE_F64:
        for (size_t i = 0; i < n; i++) {
            double x = ((const double *)src)[i];
            ((double *)acc)[i] = first ? x : ((double *)acc)[i] + x;
        }
        return;
    case DD_DTYPE_F16:
#if defined(__x86_64__) || defined(__i386__)
        if (dd_cpu_has(DD_CPU_F16C)) {
            dd_agg_f16_add_f16c(a, src, n, first);
            return;
        }
#endif
        for (size_t i = 0; i < n; i++) {
            float x = dd_coll_f16_to_f32(((const uint16_t *)src)[i]);
            a[i] = first ? x : a[i] + x;
        }
        return;
    case DD_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            float x = dd_coll_bf16_to_f32(((const uint16_t *)src)[i]);
            a[i] = first ? x : a[i] + x;
        }
        return;
    default:
        return;
    }
}

void dd_agg_out(void *dst, const void *acc, size_t n, dd_dtype_t dtype,
                int n_workers)
{
    const float *a = acc;
    float scale = 1.0f / (float)n_workers;
    switch (dtype) {
    case DD_DTYPE_F32:
        for (size_t i = 0; i < n; i++) {
            ((float *)dst)[i] = a[i] / (float)n_workers;
        }
        return;
    case DD_DTYPE_F64:
        for (size_t i = 0; i < n; i++) {
            ((double *)dst)[i] = ((const double *)acc)[i] / n_workers;
        }
        return;
    case DD_DTYPE_F16:
#if defined(__x86_64__) || defined(__i386__)
        if (dd_cpu_has(DD_CPU_F16C)) {
            dd_agg_f16_out_f16c(dst, a, n, scale);
            return;
        }
#endif
        for (size_t i = 0; i < n; i++) {
            ((uint16_t *)dst)[i] = dd_coll_f32_to_f16(a[i] * scale);
        }
        return;
    case DD_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            ((uint16_t *)dst)[i] = dd_coll_f32_to_bf16(a[i] * scale);
        }
        return;
    default:
        return;
    }
}

void dd_agg_add_sparse(float *acc, const void *data, uint32_t format,
                       size_t nnz, size_t count)
{
    if (format == DD_AGG_FMT_DENSE) {
        /* Added to the zeroed chunk, never copied: 0 + x is what the
         * pairs' scatter gives, so both formats sum alike. */
        for (size_t i = 0; i < count; i++) {
            acc[i] += ((const float *)data)[i];
        }
        return;
    }
    const uint32_t *idx = data;
    const float *val = (const float *)(idx + nnz);
    for (size_t j = 0; j < nnz; j++) {
        acc[idx[j]] += val[j];
    }
}

size_t dd_agg_out_sparse(void *out, float *acc, size_t count, int n_workers,
                         uint32_t *format_p, uint64_t *nnz_p)
{
    size_t nnz = 0;

    for (size_t i = 0; i < count; i++) {
        acc[i] /= (float)n_workers;
        nnz += acc[i] != 0.0f;
    }
    /* Pairs take 8 bytes an element, the dense chunk 4: pairs while fewer
     * than half the elements are nonzero. */
    if (2 * nnz >= count) {
        memcpy(out, acc, count * sizeof(float));
        *format_p = DD_AGG_FMT_DENSE;
        *nnz_p = 0;
        return count * sizeof(float);
    }
    uint32_t *idx = out;
    float *val = (float *)(idx + nnz);
    for (size_t i = 0, j = 0; i < count; i++) {
        if (acc[i] != 0.0f) {
            idx[j] = (uint32_t)i;
            val[j++] = acc[i];
        }
    }
    *format_p = DD_AGG_FMT_PAIRS;
    *nnz_p = nnz;
    return nnz * 2 * sizeof(uint32_t);
}

void dd_agg_expand_sparse(float *dst, const void *data, uint32_t format,
                          size_t nnz, size_t count)
{
    if (format == DD_AGG_FMT_DENSE) {
        memcpy(dst, data, count * sizeof(float));
        return;
    }
    memset(dst, 0, count * sizeof(float));
    const uint32_t *idx = data;
    const float *val = (const float *)(idx + nnz);
    for (size_t j = 0; j < nnz; j++) {
        dst[idx[j]] = val[j];
    }
}
