/*
 * The ABI between libdreamddp and its device-memory modules
 * (dd_device_<name>.so: "cuda" over a dlopen'd CUDA runtime, "fake" over
 * host memory for tests). A module exports one function,
 * dd_device_ops_get(), that returns its dd_device_ops_t. The core dlopens
 * the module DREAMDDP_DEVICE names (or, for auto, cuda when its query()
 * succeeds), checks abi_version, asks query() whether it can run here, and
 * calls init() with a dd_device_services_t. Modules never call the core's
 * internals: logging and error reporting come through the services struct.
 *
 * Streams are the device's own (a cudaStream_t for cuda; for fake, what its
 * stream_create() returned), passed as void *; NULL is the device's default
 * stream. Events and streams are process-wide objects, as in CUDA: an
 * application and the library may each hold an instance of the same module
 * and use each other's streams.
 * Plain C99, no CUDA header.
 */
#ifndef DREAMDDP_DEVICE_H
#define DREAMDDP_DEVICE_H

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Version of this ABI; the core refuses a module built against another.
 *  2 added reduce_async at the end of dd_device_ops_t. */
#define DD_DEVICE_ABI_VERSION 2u

/** Name of the function every module exports (dd_device_entry_fn_t). */
#define DD_DEVICE_ENTRY "dd_device_ops_get"

/** Bytes of an IPC handle (CUDA's cudaIpcMemHandle_t is 64). */
#define DD_DEVICE_IPC_HANDLE_BYTES 64

/** A module's instance, defined by the module. */
typedef struct dd_device dd_device_t;

/** An event, defined by the module (a cudaEvent_t for cuda). */
typedef struct dd_device_event dd_device_event_t;

/**
 * What the core lends a module: its log level, logging and error
 * reporting. Every function may be called from any thread; none after
 * finalize() returns.
 */
typedef struct dd_device_services {
    uint32_t abi_version; /**< DD_DEVICE_ABI_VERSION of the core */
    int log_level;        /**< dd_backend_log_level_t values (0 = error) */
    void *arg;            /**< first argument of every function below */
    /** Logs one line (no newline) at level; the core adds the prefix. */
    void (*log)(void *arg, int level, const char *message);
    /** Logs an error and records it as the calling thread's
     *  dd_last_error(). Returns status. */
    dd_status_t (*error)(void *arg, dd_status_t status, const char *message);
} dd_device_services_t;

/** What device_info() says of one device. */
typedef struct {
    char name[96];       /**< "NVIDIA H200", "fake device 0" */
    char pci[32];        /**< PCI bus id, "0000:3b:00.0", or "" */
    size_t memory_bytes; /**< total memory; 0 when unknown */
    int major, minor;    /**< compute capability; 0.0 for fake */
} dd_device_info_t;

/** Directions of memcpy_async(). */
typedef enum {
    DD_DEVICE_COPY_H2D = 0, /**< pinned host to device */
    DD_DEVICE_COPY_D2H,     /**< device to pinned host */
    DD_DEVICE_COPY_D2D      /**< device to device */
} dd_device_copy_t;

/** An IPC handle for a device allocation, valid in other processes of the
 *  host. */
typedef struct {
    unsigned char bytes[DD_DEVICE_IPC_HANDLE_BYTES];
} dd_device_ipc_handle_t;

/**
 * A device module's table. All slots are required. Every function returns
 * DD_OK or an error reported through services->error (except query, which
 * never logs). Functions that take an ordinal work on that device; stream
 * and event functions work on the device the object was created on. Any
 * thread, unless a slot says otherwise.
 */
typedef struct dd_device_ops {
    uint32_t abi_version; /**< DD_DEVICE_ABI_VERSION the module was built
                               against */
    const char *name;     /**< "cuda", "fake": DREAMDDP_DEVICE uses it */

    /** Whether the module can run here (a runtime, a device), before init.
     *  DD_OK, or DD_ERR_NO_DEVICE / DD_ERR_UNSUPPORTED with the reason in
     *  why ("no CUDA runtime: ...", "no device"). Never logs. */
    dd_status_t (*query)(char *why, size_t size);
    /** Creates an instance; services stays valid until finalize(). */
    dd_status_t (*init)(const dd_device_services_t *services,
                        dd_device_t **device_p);
    /** Frees the instance (not the streams, events or memory handed out,
     *  which their own calls free first). */
    void (*finalize)(dd_device_t *device);

    /** Number of devices visible to this process. */
    dd_status_t (*device_count)(dd_device_t *device, int *count_p);
    /** Facts about device ordinal. */
    dd_status_t (*device_info)(dd_device_t *device, int ordinal,
                               dd_device_info_t *info_p);

    /** A new non-blocking stream on device ordinal. */
    dd_status_t (*stream_create)(dd_device_t *device, int ordinal,
                                 void **stream_p);
    void (*stream_destroy)(dd_device_t *device, void *stream);

    /** A new event (no timing) on device ordinal; it counts as complete
     *  until first recorded. */
    dd_status_t (*event_create)(dd_device_t *device, int ordinal,
                                dd_device_event_t **event_p);
    void (*event_destroy)(dd_device_t *device, dd_device_event_t *event);
    /** Captures the work queued on stream so far: the event completes when
     *  that work has. */
    dd_status_t (*event_record)(dd_device_t *device, dd_device_event_t *event,
                                void *stream);
    /** DD_OK once the work the event captured has completed, DD_INPROGRESS
     *  before, or an error. Never blocks. */
    dd_status_t (*event_query)(dd_device_t *device, dd_device_event_t *event);
    /** Blocks until the event completes. */
    dd_status_t (*event_synchronize)(dd_device_t *device,
                                     dd_device_event_t *event);

    /** Page-locked host memory, which async copies need. */
    dd_status_t (*host_alloc)(dd_device_t *device, size_t bytes, void **ptr_p);
    void (*host_free)(dd_device_t *device, void *ptr);
    /** Device memory on device ordinal. */
    dd_status_t (*mem_alloc)(dd_device_t *device, int ordinal, size_t bytes,
                             void **ptr_p);
    void (*mem_free)(dd_device_t *device, void *ptr);
    /** Queues a copy of bytes on stream; it runs after the work queued
     *  there before it. Neither buffer may be touched until an event
     *  recorded after it completes. */
    dd_status_t (*memcpy_async)(dd_device_t *device, void *dst, const void *src,
                                size_t bytes, dd_device_copy_t kind,
                                void *stream);

    /** An IPC handle for the allocation that starts at ptr (mem_alloc). */
    dd_status_t (*ipc_get)(dd_device_t *device, void *ptr,
                           dd_device_ipc_handle_t *handle_p);
    /** Maps another process's allocation into this one. */
    dd_status_t (*ipc_open)(dd_device_t *device,
                            const dd_device_ipc_handle_t *handle, void **ptr_p);
    /** Unmaps what ipc_open() mapped. */
    dd_status_t (*ipc_close)(dd_device_t *device, void *ptr);

    /** Queues dst[i] += src[i] for i < count, elements of dtype, on
     *  stream, after the work queued there before it; both buffers are
     *  device memory (src may be another process's, mapped with
     *  ipc_open()), and neither may be touched until an event recorded
     *  after it completes. Every dd_dtype_t, summed as the library's host
     *  reductions sum it (integers wrap; f16 and bf16 in binary32, rounded
     *  once to nearest even), so that a device sum equals the host's bit
     *  for bit. DD_ERR_INVALID_PARAM for an invalid dtype;
     *  DD_ERR_UNSUPPORTED where the module has no way to sum on the device
     *  (it says why). Added in ABI version 2. */
    dd_status_t (*reduce_async)(dd_device_t *device, void *dst, const void *src,
                                size_t count, dd_dtype_t dtype, void *stream);
} dd_device_ops_t;

/** Type of DD_DEVICE_ENTRY. */
typedef const dd_device_ops_t *(*dd_device_entry_fn_t)(void);

/**
 * Defined by each module (exported with DD_API): its ops table, static and
 * valid as long as the module is loaded. Any thread.
 */
const dd_device_ops_t *dd_device_ops_get(void);

#ifdef __cplusplus
}
#endif

#endif /* DREAMDDP_DEVICE_H */
