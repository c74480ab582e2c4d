/*
 * mp_nccl: the NCCL module on CUDA memory, under ddrun with one GPU per
 * rank: allreduce of f32, f16 and bf16 (sum, avg, max, min), broadcast,
 * reduce-scatter and allgather, checked against a reference in double.
 * Exits 77 when this machine has no GPU. Only this test links CUDA.
 */
#include <dreamddp.h>
#include <dreamddp/introspect.h>

#include "core/half.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double val(int rank, size_t i)
{
    return (double)((int)((rank * 3 + i * 7) % 11) - 5) * 0.5;
}

static void put(dd_dtype_t t, void *b, size_t i, double v)
{
    if (t == DD_DTYPE_F32) {
        ((float *)b)[i] = (float)v;
    } else if (t == DD_DTYPE_F16) {
        ((uint16_t *)b)[i] = dd_half_f32_to_f16((float)v);
    } else {
        ((uint16_t *)b)[i] = dd_half_f32_to_bf16((float)v);
    }
}

static double get(dd_dtype_t t, const void *b, size_t i)
{
    if (t == DD_DTYPE_F32) {
        return ((const float *)b)[i];
    }
    return t == DD_DTYPE_F16 ? dd_half_f16_to_f32(((const uint16_t *)b)[i])
                             : dd_half_bf16_to_f32(((const uint16_t *)b)[i]);
}

static double expect(dd_reduce_op_t op, int world, size_t i)
{
    double acc = val(0, i);
    for (int r = 1; r < world; r++) {
        acc = op == DD_REDUCE_MAX   ? fmax(acc, val(r, i))
              : op == DD_REDUCE_MIN ? fmin(acc, val(r, i))
                                    : acc + val(r, i);
    }
    return op == DD_REDUCE_AVG ? acc / world : acc;
}

/* One allreduce of n elements through device memory. */
static int check_allreduce(dd_context_h ctx, dd_dtype_t t, dd_reduce_op_t op,
                           size_t n)
{
    int rank = dd_rank(ctx), world = dd_world_size(ctx), bad = 0;
    size_t bytes = n * dd_dtype_size(t);
    void *host = malloc(bytes + 1), *dev = NULL;

    for (size_t i = 0; i < n; i++) {
        put(t, host, i, val(rank, i));
    }
    cudaMalloc(&dev, bytes + 1);
    cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
    dd_status_t s = dd_allreduce(ctx, dev, dev, n, t, op, DD_MEM_CUDA);
    cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
    if (s != DD_OK) {
        fprintf(stderr, "mp_nccl: allreduce: %s\n", dd_last_error());
        bad = 1;
    }
    double tol = t == DD_DTYPE_F32 ? 1e-6 : t == DD_DTYPE_F16 ? 2e-3 : 1.6e-2;
    for (size_t i = 0; !bad && i < n; i++) {
        double want = expect(op, world, i);
        if (fabs(get(t, host, i) - want) > tol * fmax(1, fabs(want))) {
            fprintf(stderr, "mp_nccl: %s %s n %zu: element %zu is %g, not %g\n",
                    dd_dtype_name(t), dd_reduce_op_name(op), n, i,
                    get(t, host, i), want);
            bad = 1;
        }
    }
    cudaFree(dev);
    free(host);
    return bad;
}

/* Broadcast from rank 0, allgather and reduce-scatter of f32. */
static int check_moves(dd_context_h ctx, size_t n)
{
    int rank = dd_rank(ctx), world = dd_world_size(ctx), bad = 0;
    size_t w = (size_t)world;
    float *host = malloc(sizeof(float) * (n * w + 1));
    float *in = NULL, *out = NULL;

    cudaMalloc((void **)&in, sizeof(float) * (n * w + 1));
    cudaMalloc((void **)&out, sizeof(float) * (n * w + 1));
    for (size_t i = 0; i < n * w; i++) {
        host[i] = (float)val(rank, i);
    }
    cudaMemcpy(in, host, sizeof(float) * n * w, cudaMemcpyHostToDevice);
    bad |= dd_broadcast(ctx, in, n, DD_DTYPE_F32, 0, DD_MEM_CUDA) != DD_OK;
    cudaMemcpy(host, in, sizeof(float) * n, cudaMemcpyDeviceToHost);
    for (size_t i = 0; !bad && i < n; i++) {
        bad |= host[i] != (float)val(0, i);
    }
    for (size_t i = 0; i < n * w; i++) {
        host[i] = (float)val(rank, i);
    }
    cudaMemcpy(in, host, sizeof(float) * n * w, cudaMemcpyHostToDevice);
    bad |= dd_allgather(ctx, in, out, n, DD_DTYPE_F32, DD_MEM_CUDA) != DD_OK;
    cudaMemcpy(host, out, sizeof(float) * n * w, cudaMemcpyDeviceToHost);
    for (size_t i = 0; !bad && i < n * w; i++) {
        bad |= host[i] != (float)val((int)(i / n), i % n);
    }
    bad |= dd_reduce_scatter(ctx, in, out, n, DD_DTYPE_F32, DD_REDUCE_SUM,
                             DD_MEM_CUDA) != DD_OK;
    cudaMemcpy(host, out, sizeof(float) * n, cudaMemcpyDeviceToHost);
    for (size_t i = 0; !bad && i < n; i++) {
        bad |= fabs(host[i] -
                    expect(DD_REDUCE_SUM, world, (size_t)rank * n + i)) > 1e-5;
    }
    if (bad) {
        fprintf(stderr,
                "mp_nccl: broadcast/allgather/reduce_scatter of %zu "
                "failed: %s\n",
                n, dd_last_error());
    }
    cudaFree(in);
    cudaFree(out);
    free(host);
    return bad;
}

int main(void)
{
    static const size_t sizes[] = {0, 1, 7, 4099};
    static const dd_dtype_t types[] = {DD_DTYPE_F32, DD_DTYPE_F16,
                                       DD_DTYPE_BF16};
    int n = 0, bad = 0, count = 0;
    dd_context_h ctx;

    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device on this machine\n");
        return 77;
    }
    if (dd_init(NULL, &ctx) != DD_OK) {
        fprintf(stderr, "mp_nccl: dd_init: %s\n", dd_last_error());
        return 1;
    }
    const char *name = dd_backend_name(ctx, DD_COLL_ALLREDUCE, DD_MEM_CUDA, 1);
    for (size_t s = 0; s < 4; s++) {
        for (int t = 0; t < 3; t++) {
            for (int op = 0; op < DD_REDUCE_LAST; op++) {
                bad |= check_allreduce(ctx, types[t], (dd_reduce_op_t)op,
                                       sizes[s]);
                count++;
            }
        }
        bad |= check_moves(ctx, sizes[s]);
        count += 3;
    }
    bad |= check_allreduce(ctx, DD_DTYPE_F32, DD_REDUCE_SUM, (16u << 20) + 1);
    count++;
    if (!bad && dd_rank(ctx) == 0) {
        printf("mp_nccl: %s: %d collectives correct on %d ranks\n",
               name ? name : "?", count, dd_world_size(ctx));
    }
    bad |= dd_finalize(ctx) != DD_OK;
    return bad;
}
