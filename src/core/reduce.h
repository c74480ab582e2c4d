/*
 * Element-wise reductions, shared by every module (compiled into each, with
 * core/half.c and core/cpu.c). f16 and bf16 are reduced in binary32 and
 * rounded back to nearest, ties to even (core/half.h). Pure functions: no
 * I/O, no state.
 */
#ifndef DD_BACKENDS_COLL_REDUCE_H
#define DD_BACKENDS_COLL_REDUCE_H

#include "core/dtype.h"

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

/**
 * dst[i] = dst[i] op src[i] for count elements; DD_REDUCE_AVG sums (the
 * division comes once, at the end, from dd_coll_divide). dst and src may be
 * the same buffer but must not otherwise overlap.
 */
void dd_coll_reduce(void *dst, const void *src, size_t count, dd_dtype_t dtype,
                    dd_reduce_op_t op);

/** buf[i] /= divisor, rounded as DD_REDUCE_AVG documents. */
void dd_coll_divide(void *buf, size_t count, dd_dtype_t dtype, int divisor);

/**
 * dst = src / divisor, and whether every quotient is finite (so every value
 * was), in one pass: for the workers that divide before they sum. dst and
 * src may be the same buffer but must not otherwise overlap; a float
 * type's divisor need not be whole. Integer types are always finite.
 */
int dd_coll_quotient_finite(void *dst, const void *src, size_t count,
                            dd_dtype_t dtype, double divisor);

/**
 * Whether every one of count elements is finite (no NaN, no infinity):
 * the exponent bits of each float, tested without a branch so that it
 * runs at memory speed. Integer types are always finite.
 */
int dd_values_finite(const void *buf, size_t count, dd_dtype_t dtype);

#endif
