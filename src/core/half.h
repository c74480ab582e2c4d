/*
 * The 16-bit floats, f16 (IEEE binary16) and bf16 (bfloat16): conversions
 * from and to f32 and f64, one element (inline, here) or an array, and the
 * array loops that sum, divide, accumulate and scale them in f32 (half.c),
 * for the codecs, the shared reductions and the aggregators alike. Rounding
 * is to nearest, ties to even; overflow gives inf; a NaN stays a NaN, made
 * quiet, with its sign and the top bits of its payload. Each vector path
 * (F16C, AVX2, chosen at run time) gives the bits of the portable one, so
 * that ranks on different CPUs put the same bytes on the wire. Nothing here
 * allocates, logs or keeps state.
 */
#ifndef DD_CORE_HALF_H
#define DD_CORE_HALF_H

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t dd_half_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float dd_half_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/** f32 to f16, bit for bit what vcvtps2ph does with round to nearest even
 *  and exceptions masked. */
static inline uint16_t dd_half_f32_to_f16(float f)
{
    uint32_t u = dd_half_f32_bits(f);
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
        float v = dd_half_bits_f32(a) + 0.5f;
        return sign | (uint16_t)(dd_half_f32_bits(v) - 0x3f000000u);
    }
    a += 0xfffu + ((a >> 13) & 1u); /* round to nearest, ties to even */
    return sign | (uint16_t)((a - 0x38000000u) >> 13);
}

/** f16 to f32, exact; a signalling NaN comes back quiet (as vcvtph2ps). */
static inline float dd_half_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) { /* inf, or NaN made quiet as vcvtph2ps does */
        return dd_half_bits_f32(sign | 0x7f800000u | (mant << 13) |
                                (mant != 0 ? 0x400000u : 0));
    }
    if (exp == 0) { /* zero, subnormal: mant * 2^-24, exact in binary32 */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return dd_half_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

/** f32 to bf16 (its top half), rounded to nearest even. */
static inline uint16_t dd_half_f32_to_bf16(float f)
{
    uint32_t u = dd_half_f32_bits(f);

    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN, sign kept */
    }
    u += 0x7fffu + ((u >> 16) & 1u); /* ties to even; overflow gives inf */
    return (uint16_t)(u >> 16);
}

/** bf16 to f32, exact. */
static inline float dd_half_bf16_to_f32(uint16_t b)
{
    return dd_half_bits_f32((uint32_t)b << 16);
}

/**
 * d rounded to f32 towards zero, with the lowest mantissa bit set when that
 * was inexact ("round to odd"). Rounding the result once more to any format
 * of at most 22 mantissa bits, to nearest even, gives the correctly rounded
 * d: f64 arrays reach f16 and bf16 through it without double rounding.
 * Beyond the f32 range it gives FLT_MAX with d's sign (odd, so the next
 * rounding overflows to inf as it must); NaN stays NaN.
 */
static inline float dd_half_f64_to_f32_odd(double d)
{
    float f = (float)d;
    uint32_t u;

    if (d != d || (double)f == d) {
        return f;
    }
    u = dd_half_f32_bits(f);
    /* (float)d rounded to nearest: step back once if it went outward. */
    if ((u & 0x7fffffffu) >= 0x7f800000u || ((double)f > d) == (d > 0)) {
        u -= 1;
    }
    u |= 1u;
    return dd_half_bits_f32(u);
}

/**
 * From this many output bytes on, the array conversions write around the
 * caches (non-temporal stores): the output of a large layer is not read
 * again before it leaves, and not reading each line before writing it saves
 * a third of the memory traffic of a memory-bound loop.
 */
#define DD_HALF_STREAM_BYTES (4u << 20)

/** Which code converts an array: the best the CPU offers, or the portable
 *  loop (so that the tests can hold one against the other). */
typedef enum { DD_HALF_AUTO = 0, DD_HALF_SCALAR } dd_half_path_t;

/*
 * The array functions. half is DD_DTYPE_F16 or DD_DTYPE_BF16 (any other
 * dtype is taken as f16); n elements; arrays of different types must not
 * overlap.
 */

/** dst[i] = half(src[i]). */
void dd_half_from_f32(dd_dtype_t half, uint16_t *dst, const float *src,
                      size_t n, dd_half_path_t path);
/** dst[i] = f32(src[i]), exact. */
void dd_half_to_f32(dd_dtype_t half, float *dst, const uint16_t *src, size_t n,
                    dd_half_path_t path);
/** dst[i] = half(src[i]), rounded once (through round-to-odd). */
void dd_half_from_f64(dd_dtype_t half, uint16_t *dst, const double *src,
                      size_t n);
/** dst[i] = f64(src[i]), exact. */
void dd_half_to_f64(dd_dtype_t half, double *dst, const uint16_t *src,
                    size_t n);
/** d[i] = half(f32(d[i]) + f32(s[i])); d and s must be distinct. */
void dd_half_sum(dd_dtype_t half, uint16_t *d, const uint16_t *s, size_t n);
/** buf[i] = half(f32(buf[i]) / divisor). */
void dd_half_divide(dd_dtype_t half, uint16_t *buf, size_t n, float divisor);
/** acc[i] = f32(src[i]) when first, acc[i] + f32(src[i]) otherwise. */
void dd_half_accumulate(dd_dtype_t half, float *acc, const uint16_t *src,
                        size_t n, int first);
/** dst[i] = half(acc[i] * scale). */
void dd_half_scale(dd_dtype_t half, uint16_t *dst, const float *acc, size_t n,
                   float scale);

#endif
