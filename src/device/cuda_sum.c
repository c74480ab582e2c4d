/*
 * The cuda module's device sums (see cuda_sum.h). The kernels come as PTX
 * text that nvcc made at build time (cuda_sum_ptx.h, generated), which the
 * driver compiles for the GPU at hand when a context first sums: the
 * module links no CUDA library, so the driver's few entry points are
 * dlopen'd here, as cuda.c does the runtime's. A context's kernels stay
 * loaded for the life of the process (instances of the module share
 * them). Without nvcc at build time there are no kernels, and every sum
 * says so.
 */
#include "device/cuda_sum.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const unsigned char dd_cu_sizes[DD_DTYPE_LAST] = {4, 8, 2, 2, 4, 8, 1};

#ifdef DD_CUDA_HAVE_SUM_PTX
#include "device/cuda_sum_ptx.h"

typedef int dd_cu_result_t; /* CUresult: 0 is CUDA_SUCCESS */

#define DD_CU_CONTEXTS 16
#define DD_CU_BLOCK 256u
#define DD_CU_MAX_GRID 4096u

static const char *const dd_cu_kernels[DD_DTYPE_LAST] = {
    [DD_DTYPE_F32] = "dd_cuda_sum_f32", [DD_DTYPE_F64] = "dd_cuda_sum_f64",
    [DD_DTYPE_F16] = "dd_cuda_sum_f16", [DD_DTYPE_BF16] = "dd_cuda_sum_bf16",
    [DD_DTYPE_I32] = "dd_cuda_sum_i32", [DD_DTYPE_I64] = "dd_cuda_sum_i64",
    [DD_DTYPE_U8] = "dd_cuda_sum_u8"};

/* The driver's entry points, and each context's kernels. */
static struct {
    void *dl;
    char why[256];
    dd_cu_result_t (*ModuleLoadData)(void **, const void *);
    dd_cu_result_t (*ModuleGetFunction)(void **, void *, const char *);
    dd_cu_result_t (*LaunchKernel)(void *, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, unsigned, unsigned,
                                   void *, void **, void **);
    dd_cu_result_t (*StreamGetCtx)(void *, void **);
    dd_cu_result_t (*CtxGetCurrent)(void **);
    dd_cu_result_t (*CtxPushCurrent)(void *);
    dd_cu_result_t (*CtxPopCurrent)(void **);
    dd_cu_result_t (*GetErrorString)(dd_cu_result_t, const char **);
    struct {
        void *ctx;
        void *fn[DD_DTYPE_LAST];
    } loaded[DD_CU_CONTEXTS];
    int n_loaded;
} dd_cu;

static pthread_once_t dd_cu_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t dd_cu_lock = PTHREAD_MUTEX_INITIALIZER;

static void dd_cu_load(void)
{
    static const struct {
        size_t offset;
        const char *name;
    } syms[] = {
        {offsetof(__typeof__(dd_cu), ModuleLoadData), "cuModuleLoadData"},
        {offsetof(__typeof__(dd_cu), ModuleGetFunction), "cuModuleGetFunction"},
        {offsetof(__typeof__(dd_cu), LaunchKernel), "cuLaunchKernel"},
        {offsetof(__typeof__(dd_cu), StreamGetCtx), "cuStreamGetCtx"},
        {offsetof(__typeof__(dd_cu), CtxGetCurrent), "cuCtxGetCurrent"},
        {offsetof(__typeof__(dd_cu), CtxPushCurrent), "cuCtxPushCurrent_v2"},
        {offsetof(__typeof__(dd_cu), CtxPopCurrent), "cuCtxPopCurrent_v2"},
        {offsetof(__typeof__(dd_cu), GetErrorString), "cuGetErrorString"},
    };

    dd_cu.dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (dd_cu.dl == NULL) {
        snprintf(dd_cu.why, sizeof(dd_cu.why), "no CUDA driver: %s", dlerror());
        return;
    }
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *f = dlsym(dd_cu.dl, syms[i].name);
        if (f == NULL) {
            snprintf(dd_cu.why, sizeof(dd_cu.why), "the CUDA driver lacks %s",
                     syms[i].name);
            dlclose(dd_cu.dl);
            dd_cu.dl = NULL;
            return;
        }
        memcpy((char *)&dd_cu + syms[i].offset, &f, sizeof(f));
    }
}

static dd_status_t dd_cu_fail(dd_cu_result_t err, const char *what, char *why,
                              size_t size)
{
    const char *s = NULL;

    if (dd_cu.GetErrorString == NULL || dd_cu.GetErrorString(err, &s) != 0 ||
        s == NULL) {
        s = "unknown CUDA driver error";
    }
    snprintf(why, size, "%s: %s (CUDA driver error %d)", what, s, err);
    return DD_ERR_BACKEND;
}

/* The kernels of ctx, loaded on first use; call with dd_cu_lock held. */
static dd_status_t dd_cu_kernels_of(void *ctx, void ***fn_p, char *why,
                                    size_t size)
{
    void *module;
    dd_cu_result_t err;

    for (int i = 0; i < dd_cu.n_loaded; i++) {
        if (dd_cu.loaded[i].ctx == ctx) {
            *fn_p = dd_cu.loaded[i].fn;
            return DD_OK;
        }
    }
    if (dd_cu.n_loaded == DD_CU_CONTEXTS) {
        snprintf(why, size, "device sums in more than %d CUDA contexts",
                 DD_CU_CONTEXTS);
        return DD_ERR_UNSUPPORTED;
    }
    if ((err = dd_cu.CtxPushCurrent(ctx)) != 0) {
        return dd_cu_fail(err, "cuCtxPushCurrent", why, size);
    }
    err = dd_cu.ModuleLoadData(&module, dd_cuda_sum_ptx);
    dd_status_t status = err == 0 ? DD_OK
                                  : dd_cu_fail(err,
                                               "cuModuleLoadData of the sum "
                                               "kernels' PTX",
                                               why, size);
    void **fn = dd_cu.loaded[dd_cu.n_loaded].fn;
    for (int t = 0; status == DD_OK && t < DD_DTYPE_LAST; t++) {
        err = dd_cu.ModuleGetFunction(&fn[t], module, dd_cu_kernels[t]);
        if (err != 0) {
            status = dd_cu_fail(err, dd_cu_kernels[t], why, size);
        }
    }
    void *popped;
    dd_cu.CtxPopCurrent(&popped);
    if (status == DD_OK) {
        dd_cu.loaded[dd_cu.n_loaded++].ctx = ctx;
        *fn_p = fn;
    }
    return status;
}

/* The context of stream, or the calling thread's for the default one. */
static dd_status_t dd_cu_context(void *stream, void **ctx_p, char *why,
                                 size_t size)
{
    dd_cu_result_t err = stream != NULL ? dd_cu.StreamGetCtx(stream, ctx_p)
                                        : dd_cu.CtxGetCurrent(ctx_p);

    if (err != 0) {
        return dd_cu_fail(err, "the context of the stream", why, size);
    }
    if (*ctx_p == NULL) {
        snprintf(why, size,
                 "no current CUDA context for a sum on the "
                 "default stream");
        return DD_ERR_STATE;
    }
    return DD_OK;
}
#endif

dd_status_t dd_cuda_sum_launch(void *dst, const void *src, size_t count,
                               dd_dtype_t dtype, void *stream, char *why,
                               size_t size)
{
    if ((unsigned)dtype >= DD_DTYPE_LAST) {
        snprintf(why, size, "reduce_async: invalid dtype %d", (int)dtype);
        return DD_ERR_INVALID_PARAM;
    }
    if (count > SIZE_MAX / dd_cu_sizes[dtype]) {
        snprintf(why, size, "reduce_async: %zu elements is too many", count);
        return DD_ERR_INVALID_PARAM;
    }
#ifndef DD_CUDA_HAVE_SUM_PTX
    (void)dst, (void)src, (void)stream;
    snprintf(why, size,
             "reduce_async: this cuda module was built without "
             "nvcc, so it has no device sum kernels (configure "
             "--with-cuda where nvcc is)");
    return DD_ERR_UNSUPPORTED;
#else
    void *ctx, **fn = NULL;
    unsigned long long n = count;
    void *args[] = {&dst, (void *)&src, &n};
    size_t blocks = (count + DD_CU_BLOCK - 1) / DD_CU_BLOCK;
    dd_status_t status;

    if (count == 0) {
        return DD_OK;
    }
    pthread_once(&dd_cu_once, dd_cu_load);
    if (dd_cu.dl == NULL) {
        snprintf(why, size, "reduce_async: %s", dd_cu.why);
        return DD_ERR_UNSUPPORTED;
    }
    if ((status = dd_cu_context(stream, &ctx, why, size)) != DD_OK) {
        return status;
    }
    pthread_mutex_lock(&dd_cu_lock);
    status = dd_cu_kernels_of(ctx, &fn, why, size);
    pthread_mutex_unlock(&dd_cu_lock);
    if (status != DD_OK) {
        return status;
    }
    dd_cu_result_t err = dd_cu.CtxPushCurrent(ctx);
    if (err != 0) {
        return dd_cu_fail(err, "cuCtxPushCurrent", why, size);
    }
    err = dd_cu.LaunchKernel(
        fn[dtype], blocks < DD_CU_MAX_GRID ? (unsigned)blocks : DD_CU_MAX_GRID,
        1, 1, DD_CU_BLOCK, 1, 1, 0, stream, args, NULL);
    void *popped;
    dd_cu.CtxPopCurrent(&popped);
    return err == 0 ? DD_OK
                    : dd_cu_fail(err, "cuLaunchKernel of the sum", why, size);
#endif
}
