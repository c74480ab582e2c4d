/*
 * The f32 <-> f16 and f32 <-> bf16 array conversions behind the fp16 and
 * bf16 codecs (defined in fp16.c and bf16.c), exposed so that the tests can
 * hold the vector and the scalar paths against each other. Both paths give
 * the same bits for every input, NaN included, so that ranks on different
 * CPUs put the same bytes on the wire. Nothing here allocates or logs.
 */
#ifndef DD_COMPRESS_CONVERT_H
#define DD_COMPRESS_CONVERT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/**
 * From this many output bytes on, the vector paths write around the caches
 * (non-temporal stores): the output of a large layer is not read again
 * before it leaves, and not reading each line before writing it saves a
 * third of the memory traffic of a memory-bound loop.
 */
#define DD_CONVERT_STREAM_BYTES (4u << 20)

/** Elements of size esize to convert one by one before dst is aligned to
 *  32 bytes, or SIZE_MAX when it never will be. */
static inline size_t dd_convert_head(const void *dst, size_t esize)
{
    uintptr_t a = (uintptr_t)dst;
    return a % esize != 0 ? SIZE_MAX : ((32 - a % 32) % 32) / esize;
}

/** Which code converts: the best the CPU offers, or the portable loop. */
typedef enum { DD_CONVERT_AUTO = 0, DD_CONVERT_SCALAR } dd_convert_path_t;

/**
 * f32 to IEEE binary16, round to nearest even; overflow gives inf, NaN a
 * quiet NaN with the sign and the payload's top bits (as F16C does).
 */
void dd_fp16_from_f32(uint16_t *dst, const float *src, size_t n,
                      dd_convert_path_t path);
/** binary16 to f32, exact; a signalling NaN comes back quiet. */
void dd_fp16_to_f32(float *dst, const uint16_t *src, size_t n,
                    dd_convert_path_t path);
/** Whether dd_fp16_* use F16C on this CPU (for reports). */
int dd_fp16_have_simd(void);

/**
 * f32 to bfloat16, round to nearest even; overflow gives inf, NaN a quiet
 * NaN with the sign and the payload's top bits.
 */
void dd_bf16_from_f32(uint16_t *dst, const float *src, size_t n,
                      dd_convert_path_t path);
/** bfloat16 to f32, exact. */
void dd_bf16_to_f32(float *dst, const uint16_t *src, size_t n,
                    dd_convert_path_t path);
/** Whether dd_bf16_* use AVX2 on this CPU (for reports). */
int dd_bf16_have_simd(void);

/**
 * d rounded to f32 towards zero, with the lowest mantissa bit set when that
 * was inexact ("round to odd"). Rounding the result once more to any format
 * of at most 22 mantissa bits, to nearest even, gives the correctly rounded
 * d: f64 layers reach f16 and bf16 through it without double rounding.
 * Beyond the f32 range it gives FLT_MAX with d's sign (odd, so the next
 * rounding overflows to inf as it must); NaN stays NaN.
 */
static inline float dd_convert_f64_to_f32_odd(double d)
{
    float f = (float)d;
    uint32_t u;

    if (d != d || (double)f == d) {
        return f;
    }
    memcpy(&u, &f, sizeof(u));
    /* (float)d rounded to nearest: step back once if it went outward. */
    if ((u & 0x7fffffffu) >= 0x7f800000u || ((double)f > d) == (d > 0)) {
        u -= 1;
    }
    u |= 1u;
    memcpy(&f, &u, sizeof(f));
    return f;
}

#endif
