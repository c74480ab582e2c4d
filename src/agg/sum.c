/*
 * The aggregators' arithmetic: copies of a chunk are added into a float
 * accumulator (double for f64), then scaled and converted back. f16 and
 * bf16 go through core/half.c (vector loops where the CPU has them, the
 * same bits otherwise). No I/O here.
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
    case DD_DTYPE_BF16:
        dd_half_accumulate(dtype, a, src, n, first);
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
    case DD_DTYPE_BF16:
        dd_half_scale(dtype, dst, a, n, scale);
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
