/*
 * How far a worker's replica of a layer lies from the average it is about
 * to take, as the engine measures it at a parameter sync: the sums
 * ||local - avg||^2 and ||avg||^2, whole or on a sample. Pure: no I/O, no
 * clocks, no state beyond what the caller hands in.
 */
#ifndef DD_SCHED_ENGINE_DIVERGENCE_H
#define DD_SCHED_ENGINE_DIVERGENCE_H

#include <dreamddp.h>

#include <stddef.h>

/**
 * Adds ||local - avg||^2 to *diff2_p and ||avg||^2 to *norm2_p over count
 * elements of dtype (f32 or f64; other dtypes add nothing and return 0).
 * Returns 1 when it measured. Sums in double, in blocks of independent
 * lanes the compiler vectorises.
 */
int dd_drift_norms(const void *local, const void *avg, size_t count,
                   dd_dtype_t dtype, double *diff2_p, double *norm2_p);

/**
 * Layers of up to this many elements are measured whole. A larger one is
 * measured on a sample of about as many: blocks of DD_DRIFT_BLOCK elements,
 * one every dd_drift_step() elements (a step one past a multiple of the
 * block, so that the blocks do not keep to the same columns of a matrix).
 * Copying a large layer whole before its average lands, and reading both
 * after, cost 3 to 13 % of the train simulator's time per iteration; the
 * sample costs a few hundred kilobytes, and the relative divergence of a
 * layer of millions of elements moves little across samples of 65536.
 */
#define DD_DRIFT_EXACT ((size_t)1 << 16)
#define DD_DRIFT_BLOCK ((size_t)64)

/** Elements from one sampled block's start to the next's: count (one block
 *  of all) when the layer is measured whole. */
size_t dd_drift_step(size_t count);

/** Elements in the sample of a layer of count elements. */
size_t dd_drift_sample_count(size_t count);

/** Gathers the sample of count elements of esize bytes from src into dst
 *  (dd_drift_sample_count(count) elements). */
void dd_drift_sample(void *dst, const void *src, size_t count, size_t esize);

/**
 * dd_drift_norms over the sample: local is the sample gathered by
 * dd_drift_sample (compact) or, when local_whole, the whole layer as avg
 * is; both sums are scaled to count elements, so that a layer's items add
 * up as if measured whole. Returns 1 when it measured.
 */
int dd_drift_norms_sampled(const void *local, int local_whole, const void *avg,
                           size_t count, dd_dtype_t dtype, double *diff2_p,
                           double *norm2_p);

/** ||x - avg|| / ||avg|| from the sums; ||x - avg|| itself when avg is 0. */
double dd_drift_relative(double diff2, double norm2);

#endif
