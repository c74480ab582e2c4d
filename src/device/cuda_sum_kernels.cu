/*
 * The kernels of the cuda module's device sums (reduce_async, cuda_sum.c): dst[i] += src[i], one
 * kernel per dtype, summed as the library's host reductions sum
 * (src/core/reduce.c: integers wrap, f16 and bf16 in binary32 rounded
 * once to nearest even). Built by nvcc into PTX, which the module embeds
 * and loads through the driver at first use, so that the module still
 * links no CUDA library. Names are extern "C" so the module finds them.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define DD_SUM_KERNEL(name, type, expr)                                        \
    extern "C" __global__ void name(type *dst, const type *src,              \
                                    unsigned long long n)                    \
    {                                                                          \
        unsigned long long stride =                                            \
            (unsigned long long)blockDim.x * gridDim.x;                        \
        for (unsigned long long i =                                            \
                 (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;  \
             i < n; i += stride) {                                             \
            dst[i] = expr;                                                     \
        }                                                                      \
    }

DD_SUM_KERNEL(dd_cuda_sum_f32, float, __fadd_rn(dst[i], src[i]))
DD_SUM_KERNEL(dd_cuda_sum_f64, double, __dadd_rn(dst[i], src[i]))
DD_SUM_KERNEL(dd_cuda_sum_f16, __half,
              __float2half_rn(__fadd_rn(__half2float(dst[i]),
                                        __half2float(src[i]))))
DD_SUM_KERNEL(dd_cuda_sum_bf16, __nv_bfloat16,
              __float2bfloat16_rn(__fadd_rn(__bfloat162float(dst[i]),
                                            __bfloat162float(src[i]))))
DD_SUM_KERNEL(dd_cuda_sum_i32, uint32_t, dst[i] + src[i])
DD_SUM_KERNEL(dd_cuda_sum_i64, uint64_t, dst[i] + src[i])
DD_SUM_KERNEL(dd_cuda_sum_u8, uint8_t, (uint8_t)(dst[i] + src[i]))
