/*
 * The CUDA device module (dd_device_cuda.so) over the CUDA runtime, which
 * it dlopens when first asked: it links no CUDA library and includes no
 * CUDA header, so it builds and loads everywhere and says at query time
 * that there is no CUDA runtime or no device. The few runtime types it
 * uses are declared here as the runtime's ABI defines them (handles are
 * pointers, errors ints, cudaIpcMemHandle_t 64 bytes). It must not
 * translate anything but cudaError_t into dd_status_t.
 */
#include <dreamddp/device.h>

#include "device/cuda_sum.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int dd_cuda_err_t;    /* cudaError_t: 0 is cudaSuccess */
#define DD_CUDA_NOT_READY 600 /* cudaErrorNotReady */
#define DD_CUDA_NO_DEVICE 100 /* cudaErrorNoDevice */
#define DD_CUDA_STREAM_NONBLOCKING 1u
#define DD_CUDA_EVENT_NO_TIMING 2u
#define DD_CUDA_IPC_LAZY_PEER 1u
#define DD_CUDA_ATTR_CC_MAJOR 75
#define DD_CUDA_ATTR_CC_MINOR 76

typedef struct {
    char reserved[DD_DEVICE_IPC_HANDLE_BYTES];
} dd_cuda_ipc_t;

/* The runtime's entry points, resolved once. */
static struct {
    void *dl;
    char why[256]; /* why the runtime did not load */
    dd_cuda_err_t (*GetDeviceCount)(int *);
    dd_cuda_err_t (*SetDevice)(int);
    const char *(*GetErrorString)(dd_cuda_err_t);
    dd_cuda_err_t (*DeviceGetPCIBusId)(char *, int, int);
    dd_cuda_err_t (*DeviceGetAttribute)(int *, int, int);
    dd_cuda_err_t (*GetDeviceProperties)(void *, int);
    dd_cuda_err_t (*MemGetInfo)(size_t *, size_t *);
    dd_cuda_err_t (*StreamCreateWithFlags)(void **, unsigned);
    dd_cuda_err_t (*StreamDestroy)(void *);
    dd_cuda_err_t (*EventCreateWithFlags)(void **, unsigned);
    dd_cuda_err_t (*EventDestroy)(void *);
    dd_cuda_err_t (*EventRecord)(void *, void *);
    dd_cuda_err_t (*EventQuery)(void *);
    dd_cuda_err_t (*EventSynchronize)(void *);
    dd_cuda_err_t (*HostAlloc)(void **, size_t, unsigned);
    dd_cuda_err_t (*FreeHost)(void *);
    dd_cuda_err_t (*Malloc)(void **, size_t);
    dd_cuda_err_t (*Free)(void *);
    dd_cuda_err_t (*MemcpyAsync)(void *, const void *, size_t, int, void *);
    dd_cuda_err_t (*IpcGetMemHandle)(dd_cuda_ipc_t *, void *);
    dd_cuda_err_t (*IpcOpenMemHandle)(void **, dd_cuda_ipc_t, unsigned);
    dd_cuda_err_t (*IpcCloseMemHandle)(void *);
} dd_cuda;

static pthread_once_t dd_cuda_once = PTHREAD_ONCE_INIT;

struct dd_device {
    dd_device_services_t svc;
};

#define DD_CUDA_SYM(field, name, required)                                     \
    {                                                                          \
        offsetof(__typeof__(dd_cuda), field), name, required                   \
    }

static const struct {
    size_t offset;
    const char *name;
    int required;
} dd_cuda_syms[] = {
    DD_CUDA_SYM(GetDeviceCount, "cudaGetDeviceCount", 1),
    DD_CUDA_SYM(SetDevice, "cudaSetDevice", 1),
    DD_CUDA_SYM(GetErrorString, "cudaGetErrorString", 1),
    DD_CUDA_SYM(DeviceGetPCIBusId, "cudaDeviceGetPCIBusId", 1),
    DD_CUDA_SYM(DeviceGetAttribute, "cudaDeviceGetAttribute", 1),
    /* CUDA 12 renamed it; the name comes first in both layouts. */
    DD_CUDA_SYM(GetDeviceProperties, "cudaGetDeviceProperties_v2", 0),
    DD_CUDA_SYM(MemGetInfo, "cudaMemGetInfo", 1),
    DD_CUDA_SYM(StreamCreateWithFlags, "cudaStreamCreateWithFlags", 1),
    DD_CUDA_SYM(StreamDestroy, "cudaStreamDestroy", 1),
    DD_CUDA_SYM(EventCreateWithFlags, "cudaEventCreateWithFlags", 1),
    DD_CUDA_SYM(EventDestroy, "cudaEventDestroy", 1),
    DD_CUDA_SYM(EventRecord, "cudaEventRecord", 1),
    DD_CUDA_SYM(EventQuery, "cudaEventQuery", 1),
    DD_CUDA_SYM(EventSynchronize, "cudaEventSynchronize", 1),
    DD_CUDA_SYM(HostAlloc, "cudaHostAlloc", 1),
    DD_CUDA_SYM(FreeHost, "cudaFreeHost", 1),
    DD_CUDA_SYM(Malloc, "cudaMalloc", 1),
    DD_CUDA_SYM(Free, "cudaFree", 1),
    DD_CUDA_SYM(MemcpyAsync, "cudaMemcpyAsync", 1),
    DD_CUDA_SYM(IpcGetMemHandle, "cudaIpcGetMemHandle", 1),
    DD_CUDA_SYM(IpcOpenMemHandle, "cudaIpcOpenMemHandle", 1),
    DD_CUDA_SYM(IpcCloseMemHandle, "cudaIpcCloseMemHandle", 1),
};

static void dd_cuda_load(void)
{
    static const char *const names[] = {"libcudart.so", "libcudart.so.13",
                                        "libcudart.so.12", NULL};

    /* Without NVIDIA's driver the runtime can only say so, and loading it
     * into every CPU-only process costs time and leaves its state behind
     * (LeakSanitizer's tracer dies on it): look for the driver first. */
    if (access("/dev/nvidiactl", F_OK) != 0 &&
        access("/proc/driver/nvidia/version", F_OK) != 0) {
        snprintf(dd_cuda.why, sizeof(dd_cuda.why),
                 "no NVIDIA driver (no /dev/nvidiactl)");
        return;
    }

    for (int i = 0; names[i] != NULL && dd_cuda.dl == NULL; i++) {
        dd_cuda.dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    }
    if (dd_cuda.dl == NULL) {
        snprintf(dd_cuda.why, sizeof(dd_cuda.why), "no CUDA runtime: %s",
                 dlerror());
        return;
    }
    for (size_t i = 0; i < sizeof(dd_cuda_syms) / sizeof(dd_cuda_syms[0]);
         i++) {
        void *f = dlsym(dd_cuda.dl, dd_cuda_syms[i].name);
        if (f == NULL &&
            strcmp(dd_cuda_syms[i].name, "cudaGetDeviceProperties_v2") == 0) {
            f = dlsym(dd_cuda.dl, "cudaGetDeviceProperties");
        }
        if (f == NULL && dd_cuda_syms[i].required) {
            snprintf(dd_cuda.why, sizeof(dd_cuda.why),
                     "no CUDA runtime: libcudart lacks %s",
                     dd_cuda_syms[i].name);
            dlclose(dd_cuda.dl);
            dd_cuda.dl = NULL;
            return;
        }
        memcpy((char *)&dd_cuda + dd_cuda_syms[i].offset, &f, sizeof(f));
    }
}

static const char *dd_cuda_string(dd_cuda_err_t err)
{
    const char *s = dd_cuda.GetErrorString ? dd_cuda.GetErrorString(err) : "";
    return s != NULL ? s : "unknown CUDA error";
}

static dd_status_t dd_cuda_fail(dd_device_t *d, dd_cuda_err_t err,
                                const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    size_t o;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    o = strlen(msg);
    snprintf(msg + o, sizeof(msg) - o, ": %s (CUDA error %d)",
             dd_cuda_string(err), err);
    return d->svc.error(
        d->svc.arg,
        err == DD_CUDA_NO_DEVICE ? DD_ERR_NO_DEVICE : DD_ERR_BACKEND, msg);
}

#define DD_CUDA_CALL(d, call, ...)                                             \
    do {                                                                       \
        dd_cuda_err_t err_ = (call);                                           \
        if (err_ != 0) {                                                       \
            return dd_cuda_fail(d, err_, __VA_ARGS__);                         \
        }                                                                      \
    } while (0)

static dd_status_t dd_cuda_query(char *why, size_t size)
{
    int n = 0;

    pthread_once(&dd_cuda_once, dd_cuda_load);
    if (dd_cuda.dl == NULL) {
        snprintf(why, size, "%s", dd_cuda.why);
        return DD_ERR_UNSUPPORTED;
    }
    dd_cuda_err_t err = dd_cuda.GetDeviceCount(&n);
    if (err != 0 || n == 0) {
        snprintf(why, size, "no device: %s",
                 err != 0 ? dd_cuda_string(err)
                          : "the CUDA runtime sees no GPU");
        return DD_ERR_NO_DEVICE;
    }
    if (size > 0) {
        why[0] = '\0';
    }
    return DD_OK;
}

static dd_status_t dd_cuda_init(const dd_device_services_t *svc,
                                dd_device_t **device_p)
{
    char why[256];
    dd_status_t status = dd_cuda_query(why, sizeof(why));

    if (status != DD_OK) {
        return svc->error(svc->arg, status, why);
    }
    dd_device_t *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        return svc->error(svc->arg, DD_ERR_NO_MEMORY, "no memory");
    }
    d->svc = *svc;
    *device_p = d;
    return DD_OK;
}

static void dd_cuda_finalize(dd_device_t *d)
{
    free(d);
}

static dd_status_t dd_cuda_count(dd_device_t *d, int *count_p)
{
    DD_CUDA_CALL(d, dd_cuda.GetDeviceCount(count_p), "cudaGetDeviceCount");
    return DD_OK;
}

static dd_status_t dd_cuda_info(dd_device_t *d, int g, dd_device_info_t *info)
{
    size_t free_b = 0, total = 0;
    char *props = calloc(1, 8192);

    memset(info, 0, sizeof(*info));
    if (props != NULL && dd_cuda.GetDeviceProperties != NULL &&
        dd_cuda.GetDeviceProperties(props, g) == 0) {
        snprintf(info->name, sizeof(info->name), "%.95s", props);
    }
    free(props);
    DD_CUDA_CALL(d, dd_cuda.DeviceGetPCIBusId(info->pci, sizeof(info->pci), g),
                 "cudaDeviceGetPCIBusId(%d)", g);
    DD_CUDA_CALL(
        d, dd_cuda.DeviceGetAttribute(&info->major, DD_CUDA_ATTR_CC_MAJOR, g),
        "cudaDeviceGetAttribute(%d)", g);
    DD_CUDA_CALL(
        d, dd_cuda.DeviceGetAttribute(&info->minor, DD_CUDA_ATTR_CC_MINOR, g),
        "cudaDeviceGetAttribute(%d)", g);
    DD_CUDA_CALL(d, dd_cuda.SetDevice(g), "cudaSetDevice(%d)", g);
    DD_CUDA_CALL(d, dd_cuda.MemGetInfo(&free_b, &total), "cudaMemGetInfo");
    info->memory_bytes = total;
    return DD_OK;
}

static dd_status_t dd_cuda_stream_create(dd_device_t *d, int g, void **stream_p)
{
    DD_CUDA_CALL(d, dd_cuda.SetDevice(g), "cudaSetDevice(%d)", g);
    DD_CUDA_CALL(
        d, dd_cuda.StreamCreateWithFlags(stream_p, DD_CUDA_STREAM_NONBLOCKING),
        "cudaStreamCreateWithFlags on device %d", g);
    return DD_OK;
}

static void dd_cuda_stream_destroy(dd_device_t *d, void *stream)
{
    (void)d;
    if (stream != NULL) {
        dd_cuda.StreamDestroy(stream);
    }
}

static dd_status_t dd_cuda_event_create(dd_device_t *d, int g,
                                        dd_device_event_t **event_p)
{
    void *e;

    DD_CUDA_CALL(d, dd_cuda.SetDevice(g), "cudaSetDevice(%d)", g);
    DD_CUDA_CALL(d, dd_cuda.EventCreateWithFlags(&e, DD_CUDA_EVENT_NO_TIMING),
                 "cudaEventCreateWithFlags on device %d", g);
    *event_p = e;
    return DD_OK;
}

static void dd_cuda_event_destroy(dd_device_t *d, dd_device_event_t *e)
{
    (void)d;
    if (e != NULL) {
        dd_cuda.EventDestroy(e);
    }
}

static dd_status_t dd_cuda_event_record(dd_device_t *d, dd_device_event_t *e,
                                        void *stream)
{
    DD_CUDA_CALL(d, dd_cuda.EventRecord(e, stream), "cudaEventRecord");
    return DD_OK;
}

static dd_status_t dd_cuda_event_query(dd_device_t *d, dd_device_event_t *e)
{
    dd_cuda_err_t err = dd_cuda.EventQuery(e);

    if (err == DD_CUDA_NOT_READY) {
        return DD_INPROGRESS;
    }
    return err == 0 ? DD_OK : dd_cuda_fail(d, err, "cudaEventQuery");
}

static dd_status_t dd_cuda_event_synchronize(dd_device_t *d,
                                             dd_device_event_t *e)
{
    DD_CUDA_CALL(d, dd_cuda.EventSynchronize(e), "cudaEventSynchronize");
    return DD_OK;
}

static dd_status_t dd_cuda_host_alloc(dd_device_t *d, size_t bytes,
                                      void **ptr_p)
{
    DD_CUDA_CALL(d, dd_cuda.HostAlloc(ptr_p, bytes, 0),
                 "cudaHostAlloc of %zu bytes", bytes);
    return DD_OK;
}

static void dd_cuda_host_free(dd_device_t *d, void *ptr)
{
    (void)d;
    if (ptr != NULL) {
        dd_cuda.FreeHost(ptr);
    }
}

static dd_status_t dd_cuda_mem_alloc(dd_device_t *d, int g, size_t bytes,
                                     void **ptr_p)
{
    DD_CUDA_CALL(d, dd_cuda.SetDevice(g), "cudaSetDevice(%d)", g);
    DD_CUDA_CALL(d, dd_cuda.Malloc(ptr_p, bytes),
                 "cudaMalloc of %zu bytes on device %d", bytes, g);
    return DD_OK;
}

static void dd_cuda_mem_free(dd_device_t *d, void *ptr)
{
    (void)d;
    if (ptr != NULL) {
        dd_cuda.Free(ptr);
    }
}

static dd_status_t dd_cuda_memcpy_async(dd_device_t *d, void *dst,
                                        const void *src, size_t bytes,
                                        dd_device_copy_t kind, void *stream)
{
    /* cudaMemcpyKind: 1 host to device, 2 device to host, 3 device to
     * device. */
    int ck = kind == DD_DEVICE_COPY_H2D   ? 1
             : kind == DD_DEVICE_COPY_D2H ? 2
                                          : 3;

    DD_CUDA_CALL(d, dd_cuda.MemcpyAsync(dst, src, bytes, ck, stream),
                 "cudaMemcpyAsync of %zu bytes", bytes);
    return DD_OK;
}

static dd_status_t dd_cuda_ipc_get(dd_device_t *d, void *ptr,
                                   dd_device_ipc_handle_t *handle_p)
{
    dd_cuda_ipc_t h;

    DD_CUDA_CALL(d, dd_cuda.IpcGetMemHandle(&h, ptr), "cudaIpcGetMemHandle");
    memcpy(handle_p->bytes, h.reserved, sizeof(h.reserved));
    return DD_OK;
}

static dd_status_t dd_cuda_ipc_open(dd_device_t *d,
                                    const dd_device_ipc_handle_t *handle,
                                    void **ptr_p)
{
    dd_cuda_ipc_t h;

    memcpy(h.reserved, handle->bytes, sizeof(h.reserved));
    DD_CUDA_CALL(d, dd_cuda.IpcOpenMemHandle(ptr_p, h, DD_CUDA_IPC_LAZY_PEER),
                 "cudaIpcOpenMemHandle");
    return DD_OK;
}

static dd_status_t dd_cuda_ipc_close(dd_device_t *d, void *ptr)
{
    DD_CUDA_CALL(d, dd_cuda.IpcCloseMemHandle(ptr), "cudaIpcCloseMemHandle");
    return DD_OK;
}

static dd_status_t dd_cuda_reduce_async(dd_device_t *d, void *dst,
                                        const void *src, size_t count,
                                        dd_dtype_t dtype, void *stream)
{
    char why[384];
    dd_status_t status =
        dd_cuda_sum_launch(dst, src, count, dtype, stream, why, sizeof(why));

    return status == DD_OK ? DD_OK : d->svc.error(d->svc.arg, status, why);
}

static const dd_device_ops_t dd_cuda_ops = {
    .abi_version = DD_DEVICE_ABI_VERSION,
    .name = "cuda",
    .query = dd_cuda_query,
    .init = dd_cuda_init,
    .finalize = dd_cuda_finalize,
    .device_count = dd_cuda_count,
    .device_info = dd_cuda_info,
    .stream_create = dd_cuda_stream_create,
    .stream_destroy = dd_cuda_stream_destroy,
    .event_create = dd_cuda_event_create,
    .event_destroy = dd_cuda_event_destroy,
    .event_record = dd_cuda_event_record,
    .event_query = dd_cuda_event_query,
    .event_synchronize = dd_cuda_event_synchronize,
    .host_alloc = dd_cuda_host_alloc,
    .host_free = dd_cuda_host_free,
    .mem_alloc = dd_cuda_mem_alloc,
    .mem_free = dd_cuda_mem_free,
    .memcpy_async = dd_cuda_memcpy_async,
    .ipc_get = dd_cuda_ipc_get,
    .ipc_open = dd_cuda_ipc_open,
    .ipc_close = dd_cuda_ipc_close,
    .reduce_async = dd_cuda_reduce_async,
};

DD_API const dd_device_ops_t *dd_device_ops_get(void)
{
    return &dd_cuda_ops;
}
