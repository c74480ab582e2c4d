/*
 * Element-wise reductions. Integer sums wrap (they are computed on unsigned
 * types, so the wrap is defined behaviour); NaN propagates through max and
 * min as it does through sum. f16 and bf16 are reduced in binary32 by
 * core/half.c, whose vector and portable loops give the same bits, so that
 * ranks on different CPUs sum to the same bytes.
 */
#include "core/reduce.h"
#include "core/half.h"

#include <string.h>

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

/* max and min of f16 or bf16 (and a buffer added to itself), in f32. */
static void dd_coll_reduce_half(uint16_t *d, const uint16_t *s, size_t count,
                                dd_reduce_op_t op, dd_dtype_t dtype)
{
    float (*widen)(uint16_t) =
        dtype == DD_DTYPE_BF16 ? dd_half_bf16_to_f32 : dd_half_f16_to_f32;
    uint16_t (*narrow)(float) =
        dtype == DD_DTYPE_BF16 ? dd_half_f32_to_bf16 : dd_half_f32_to_f16;

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
    case DD_DTYPE_F16:
    case DD_DTYPE_BF16:
        if (sum && dst != src) {
            dd_half_sum(dtype, dst, src, count);
            break;
        }
        dd_coll_reduce_half(dst, src, count, op, dtype);
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
    switch (dtype) {
    case DD_DTYPE_F32:
    case DD_DTYPE_F64:
        (void)dd_coll_quotient_finite(buf, buf, count, dtype, divisor);
        break;
    case DD_DTYPE_F16:
    case DD_DTYPE_BF16:
        dd_half_divide(dtype, buf, count, (float)divisor);
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

/* Whether any of n words of width T has all of mask's bits set: 16 bytes
 * at a time (GCC's and Clang's vector extension, SSE2 or NEON), so that a
 * scan runs at memory speed rather than a word per cycle. */
#define DD_ANY_ALL_SET(T, buf, n, mask)                                        \
    do {                                                                       \
        typedef T vec_ __attribute__((vector_size(16)));                       \
        enum { per_ = 16 / sizeof(T) };                                        \
        const unsigned char *p_ = (const unsigned char *)(buf);                \
        vec_ m_, acc_ = {0};                                                   \
        size_t i_ = 0;                                                         \
        for (int k_ = 0; k_ < per_; k_++) {                                    \
            m_[k_] = (mask);                                                   \
        }                                                                      \
        for (; i_ + 4 * per_ <= (n); i_ += 4 * per_) {                         \
            vec_ a_, b_, c_, d_;                                               \
            memcpy(&a_, p_ + i_ * sizeof(T), 16);                              \
            memcpy(&b_, p_ + (i_ + per_) * sizeof(T), 16);                     \
            memcpy(&c_, p_ + (i_ + 2 * per_) * sizeof(T), 16);                 \
            memcpy(&d_, p_ + (i_ + 3 * per_) * sizeof(T), 16);                 \
            acc_ |= (vec_)((a_ & m_) == m_) | (vec_)((b_ & m_) == m_) |        \
                    (vec_)((c_ & m_) == m_) | (vec_)((d_ & m_) == m_);         \
        }                                                                      \
        unsigned bad_ = 0;                                                     \
        for (int k_ = 0; k_ < per_; k_++) {                                    \
            bad_ |= acc_[k_] != 0;                                             \
        }                                                                      \
        for (; i_ < (n); i_++) {                                               \
            T v_;                                                              \
            memcpy(&v_, p_ + i_ * sizeof(T), sizeof(T));                       \
            bad_ |= (v_ & (mask)) == (mask);                                   \
        }                                                                      \
        return !bad_;                                                          \
    } while (0)

int dd_values_finite(const void *buf, size_t count, dd_dtype_t dtype)
{
    switch (dtype) {
    case DD_DTYPE_F32:
        DD_ANY_ALL_SET(uint32_t, buf, count, 0x7f800000u);
    case DD_DTYPE_F64:
        DD_ANY_ALL_SET(uint64_t, buf, count, 0x7ff0000000000000ull);
    case DD_DTYPE_F16:
        DD_ANY_ALL_SET(uint16_t, buf, count, (uint16_t)0x7c00u);
    case DD_DTYPE_BF16:
        DD_ANY_ALL_SET(uint16_t, buf, count, (uint16_t)0x7f80u);
    default:
        return 1;
    }
}

/* dst = src / d for n values of float type F (bits U), 16 bytes at a
 * time, returning whether every quotient's exponent bits fall short of
 * mask (each is rounded as a scalar division would be). */
#define DD_DIVIDE_FINITE(F, U, dst, src, n, d, mask)                           \
    do {                                                                       \
        typedef F fvec_ __attribute__((vector_size(16)));                      \
        typedef U uvec_ __attribute__((vector_size(16)));                      \
        enum { per_ = 16 / sizeof(F) };                                        \
        unsigned char *o_ = (unsigned char *)(dst);                            \
        const unsigned char *p_ = (const unsigned char *)(src);                \
        fvec_ d_;                                                              \
        uvec_ m_, acc_ = {0};                                                  \
        size_t i_ = 0;                                                         \
        for (int k_ = 0; k_ < per_; k_++) {                                    \
            d_[k_] = (F)(d);                                                   \
            m_[k_] = (mask);                                                   \
        }                                                                      \
        for (; i_ + per_ <= (n); i_ += per_) {                                 \
            fvec_ v_;                                                          \
            uvec_ u_;                                                          \
            memcpy(&v_, p_ + i_ * sizeof(F), 16);                              \
            if ((d) != 1) {                                                    \
                v_ /= d_;                                                      \
            }                                                                  \
            memcpy(o_ + i_ * sizeof(F), &v_, 16);                              \
            memcpy(&u_, &v_, 16);                                              \
            acc_ |= (uvec_)((u_ & m_) == m_);                                  \
        }                                                                      \
        unsigned bad_ = 0;                                                     \
        for (int k_ = 0; k_ < per_; k_++) {                                    \
            bad_ |= acc_[k_] != 0;                                             \
        }                                                                      \
        for (; i_ < (n); i_++) {                                               \
            F v_;                                                              \
            U u_;                                                              \
            memcpy(&v_, p_ + i_ * sizeof(F), sizeof(F));                       \
            if ((d) != 1) {                                                    \
                v_ /= (F)(d);                                                  \
            }                                                                  \
            memcpy(o_ + i_ * sizeof(F), &v_, sizeof(F));                       \
            memcpy(&u_, &v_, sizeof(F));                                       \
            bad_ |= (u_ & (mask)) == (mask);                                   \
        }                                                                      \
        return !bad_;                                                          \
    } while (0)

int dd_coll_quotient_finite(void *dst, const void *src, size_t count,
                            dd_dtype_t dtype, double divisor)
{
    switch (dtype) {
    case DD_DTYPE_F32:
        DD_DIVIDE_FINITE(float, uint32_t, dst, src, count, divisor,
                         0x7f800000u);
    case DD_DTYPE_F64:
        DD_DIVIDE_FINITE(double, uint64_t, dst, src, count, divisor,
                         0x7ff0000000000000ull);
    case DD_DTYPE_F16:
    case DD_DTYPE_BF16:
        if (dst != src) {
            memmove(dst, src, count * dd_coll_dtype_size(dtype));
        }
        if (divisor != 1) {
            dd_half_divide(dtype, dst, count, (float)divisor);
        }
        return dd_values_finite(dst, count, dtype);
    default:
        if (dst != src) {
            memmove(dst, src, count * dd_coll_dtype_size(dtype));
        }
        dd_coll_divide(dst, count, dtype, (int)divisor);
        return 1;
    }
}
