/*
 * The cuda module's device sums: the kernels of cuda_sum_kernels.cu,
 * embedded as PTX where nvcc built them, loaded through a dlopen'd CUDA
 * driver once per context, and launched on a stream. Private to the cuda
 * module; it reports nothing itself, it hands the caller the reason.
 */
#ifndef DD_DEVICE_CUDA_SUM_H
#define DD_DEVICE_CUDA_SUM_H

#include <dreamddp.h>

#include <stddef.h>

/**
 * Queues dst[i] += src[i], i < count, on stream (a cudaStream_t; NULL the
 * default stream of the calling thread's current device). DD_OK, or an
 * error with the reason in why: DD_ERR_UNSUPPORTED where the module was
 * built without nvcc or there is no CUDA driver, DD_ERR_BACKEND for an
 * error of the driver.
 */
dd_status_t dd_cuda_sum_launch(void *dst, const void *src, size_t count,
                               dd_dtype_t dtype, void *stream, char *why,
                               size_t size);

#endif
