/*
 * The aggregators' arithmetic: copies of a chunk are added into a float
 * accumulator (double for f64), each scaled as it is added by the power of
 * two dd_agg_sum_scale gives, then divided and converted back. f16 and
 * bf16 go through core/half.c (vector loops where the CPU has them, the
 * same bits otherwise). No I/O here.
 *
 * Why scale before the sum: the allreduce route (sched/route/coll.c) has
 * every worker scale its values by 1/p (p the least power of two >= n)
 * before the collective sums, so 3e38 on every worker averages to 3e38
 * there. A home that summed first would overflow to inf on the same input:
 * one input, two answers. Scaling by a power of two is exact (but for
 * subnormals), and (s * 2^-k) / (n * 2^-k) rounds as s / n does, so for
 * every input whose sum fits the bits are those of sum / n, as before.
 */
#include "agg/wire.h"
#include "core/dtype.h"
#include "core/half.h"

#include <string.h>

size_t dd_agg_acc_bytes(dd_dtype_t dtype, size_t count)
{
    return count * (dtype == DD_DTYPE_F64 ? sizeof(double) : sizeof(float));
}

int dd_agg_dtype_ok(dd_dtype_t dtype)
{
    return dd_dtype_is_float(dtype);
}

float dd_agg_sum_scale(int n_terms)
{
    float p = 1.0f;
    while (p < (float)n_terms) {
        p *= 2.0f;
    }
    return 1.0f / p;
}

/* Halves are widened (vector loops) a block at a time, then scaled in. */
static void dd_agg_add_half(float *a, const uint16_t *src, size_t n,
                            dd_dtype_t dtype, int first, float scale)
{
    enum { BLOCK = 256 };
    float wide[BLOCK];

    if (first) {
        dd_half_accumulate(dtype, a, src, n, 1);
        for (size_t i = 0; i < n; i++) {
            a[i] *= scale;
        }
        return;
    }
    for (size_t at = 0; at < n; at += BLOCK) {
        size_t m = n - at < BLOCK ? n - at : BLOCK;
        dd_half_accumulate(dtype, wide, src + at, m, 1);
        for (size_t i = 0; i < m; i++) {
            a[at + i] += wide[i] * scale;
        }
    }
}

void dd_agg_add(void *acc, const void *src, size_t n, dd_dtype_t dtype,
                int first, float scale)
{
    float *a = acc;
    switch (dtype) {
    case DD_DTYPE_F32:
        for (size_t i = 0; i < n; i++) {
            float x = ((const float *)src)[i] * scale;
            a[i] = first ? x : a[i] + x;
        }
        return;
    case DD_DTYPE_F64:
        for (size_t i = 0; i < n; i++) {
            double x = ((const double *)src)[i] * (double)scale;
            ((double *)acc)[i] = first ? x : ((double *)acc)[i] + x;
        }
        return;
    case DD_DTYPE_F16:
    case DD_DTYPE_BF16:
        dd_agg_add_half(a, src, n, dtype, first, scale);
        return;
    default:
        return;
    }
}

void dd_agg_out(void *dst, const void *acc, size_t n, dd_dtype_t dtype,
                int n_workers, float scale)
{
    const float *a = acc;
    /* Both exact: n_workers times a power of two, and the rounded 1/n
     * over one, so the halves get the bits of acc / scale * fl(1/n). */
    float divisor = (float)n_workers * scale;
    float half_scale = (1.0f / (float)n_workers) / scale;
    switch (dtype) {
    case DD_DTYPE_F32:
        for (size_t i = 0; i < n; i++) {
            ((float *)dst)[i] = a[i] / divisor;
        }
        return;
    case DD_DTYPE_F64:
        for (size_t i = 0; i < n; i++) {
            ((double *)dst)[i] = ((const double *)acc)[i] / (double)divisor;
        }
        return;
    case DD_DTYPE_F16:
    case DD_DTYPE_BF16:
        dd_half_scale(dtype, dst, a, n, half_scale);
        return;
    default:
        return;
    }
}

void dd_agg_add_sparse(float *acc, const void *data, uint32_t format,
                       size_t nnz, size_t count, float scale)
{
    if (format == DD_AGG_FMT_DENSE) {
        /* Added to the zeroed chunk, never copied: 0 + x is what the
         * pairs' scatter gives, so both formats sum alike. */
        for (size_t i = 0; i < count; i++) {
            acc[i] += ((const float *)data)[i] * scale;
        }
        return;
    }
    const uint32_t *idx = data;
    const float *val = (const float *)(idx + nnz);
    for (size_t j = 0; j < nnz; j++) {
        acc[idx[j]] += val[j] * scale;
    }
}

size_t dd_agg_out_sparse(void *out, float *acc, size_t count, int n_workers,
                         float scale, uint32_t *format_p, uint64_t *nnz_p)
{
    size_t nnz = 0;
    float divisor = (float)n_workers * scale;

    for (size_t i = 0; i < count; i++) {
        acc[i] /= divisor;
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
