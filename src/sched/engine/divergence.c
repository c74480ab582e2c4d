/*
 * The divergence's measurement at a parameter sync (divergence.h): the
 * engine samples this worker's buffer before the average lands and sums
 * the norms after; the device pipe does the same per staging chunk.
 */
#include "sched/engine/divergence.h"

#include <math.h>
#include <string.h>

/*
 * Eight independent lanes per sum, as dd_coll_sum_f32 does: the compiler
 * vectorises blocks of independent additions at -O2, which it may not do
 * for one running sum (floating-point addition does not reassociate).
 */
#define DD_DRIFT_NORMS(name, type)                                             \
    static void name(const type *restrict x, const type *restrict a,           \
                     size_t count, double *diff2_p, double *norm2_p)           \
    {                                                                          \
        double d[8] = {0}, s[8] = {0}, dt = 0, st = 0;                         \
        size_t i = 0;                                                          \
        for (; i + 8 <= count; i += 8) {                                       \
            for (size_t j = 0; j < 8; j++) {                                   \
                double aj = (double)a[i + j];                                  \
                double dj = (double)x[i + j] - aj;                             \
                d[j] += dj * dj;                                               \
                s[j] += aj * aj;                                               \
            }                                                                  \
        }                                                                      \
        for (; i < count; i++) {                                               \
            double ai = (double)a[i], di = (double)x[i] - ai;                  \
            dt += di * di;                                                     \
            st += ai * ai;                                                     \
        }                                                                      \
        for (size_t j = 0; j < 8; j++) {                                       \
            dt += d[j];                                                        \
            st += s[j];                                                        \
        }                                                                      \
        *diff2_p += dt;                                                        \
        *norm2_p += st;                                                        \
    }

DD_DRIFT_NORMS(dd_drift_norms_f32, float)
DD_DRIFT_NORMS(dd_drift_norms_f64, double)

int dd_drift_norms(const void *local, const void *avg, size_t count,
                   dd_dtype_t dtype, double *diff2_p, double *norm2_p)
{
    if (dtype == DD_DTYPE_F32) {
        dd_drift_norms_f32(local, avg, count, diff2_p, norm2_p);
        return 1;
    }
    if (dtype == DD_DTYPE_F64) {
        dd_drift_norms_f64(local, avg, count, diff2_p, norm2_p);
        return 1;
    }
    return 0;
}

size_t dd_drift_step(size_t count)
{
    if (count <= DD_DRIFT_EXACT) {
        return count > 0 ? count : 1;
    }
    size_t blocks = DD_DRIFT_EXACT / DD_DRIFT_BLOCK;
    return (count / blocks / DD_DRIFT_BLOCK) * DD_DRIFT_BLOCK + 1;
}

size_t dd_drift_sample_count(size_t count)
{
    size_t step = dd_drift_step(count), n = 0;

    if (step >= count) {
        return count;
    }
    for (size_t at = 0; at < count; at += step) {
        n += count - at < DD_DRIFT_BLOCK ? count - at : DD_DRIFT_BLOCK;
    }
    return n;
}

void dd_drift_sample(void *dst, const void *src, size_t count, size_t esize)
{
    size_t step = dd_drift_step(count), off = 0;

    if (step >= count) {
        memcpy(dst, src, count * esize);
        return;
    }
    for (size_t at = 0; at < count; at += step) {
        size_t len = count - at < DD_DRIFT_BLOCK ? count - at : DD_DRIFT_BLOCK;
        memcpy((char *)dst + off * esize, (const char *)src + at * esize,
               len * esize);
        off += len;
    }
}

int dd_drift_norms_sampled(const void *local, int local_whole, const void *avg,
                           size_t count, dd_dtype_t dtype, double *diff2_p,
                           double *norm2_p)
{
    size_t step = dd_drift_step(count), esize = dd_dtype_size(dtype), off = 0;
    double diff2 = 0, norm2 = 0;

    if (step >= count) {
        return dd_drift_norms(local, avg, count, dtype, diff2_p, norm2_p);
    }
    for (size_t at = 0; at < count; at += step) {
        size_t len = count - at < DD_DRIFT_BLOCK ? count - at : DD_DRIFT_BLOCK;
        const char *x = (const char *)local + (local_whole ? at : off) * esize;
        if (!dd_drift_norms(x, (const char *)avg + at * esize, len, dtype,
                            &diff2, &norm2)) {
            return 0;
        }
        off += len;
    }
    *diff2_p += diff2 * ((double)count / (double)off);
    *norm2_p += norm2 * ((double)count / (double)off);
    return 1;
}

double dd_drift_relative(double diff2, double norm2)
{
    return norm2 > 0 ? sqrt(diff2) / sqrt(norm2) : sqrt(diff2);
}
