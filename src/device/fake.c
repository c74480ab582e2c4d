/*
 * The fake device (dd_device_fake.so): host memory that behaves like a
 * GPU's where it matters to the library's correctness. Device buffers are
 * separate shared-memory mappings (shm_open), so that another process of
 * the host can map them through an IPC handle; every copy and event record
 * queued on a stream runs later, on that stream's own thread after a
 * delay, so a reader who does not wait for the event sees stale data; and
 * copies check that their direction matches where the buffers live. It is
 * for tests: it must not be chosen by DREAMDDP_DEVICE=auto, and must never
 * be faster to get right than the real thing.
 */
#include <dreamddp/device.h>

#include "core/reduce.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Every queued operation runs this long after the previous one on its
 * stream ended: long enough that an unsynchronized reader loses the
 * race. */
#define DD_FAKE_DELAY_NS 300000L
#define DD_FAKE_DEVICES 2
#define DD_FAKE_MAGIC 0x4b464444u /* "DDFK" */

struct dd_device {
    dd_device_services_t svc;
};

struct dd_device_event {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t recorded, completed;
};

typedef struct dd_fake_op {
    struct dd_fake_op *next;
    void *dst;
    const void *src;
    size_t bytes;
    dd_device_event_t *event; /* an event record, when not NULL */
    uint64_t seq;
    int reduce; /* dst += src, bytes / size elements of dtype */
    dd_dtype_t dtype;
} dd_fake_op_t;

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    dd_fake_op_t *head, **tail;
    int stopping;
} dd_fake_stream_t;

/* A device allocation, or another process's mapped through IPC. */
typedef struct dd_fake_alloc {
    struct dd_fake_alloc *next;
    char *ptr;
    size_t bytes;
    char name[40];
    int mapped; /* ipc_open()'d, not ours */
} dd_fake_alloc_t;

typedef struct {
    uint32_t magic;
    uint32_t pad;
    uint64_t bytes;
    char name[40];
} dd_fake_ipc_t;

static pthread_mutex_t dd_fake_lock = PTHREAD_MUTEX_INITIALIZER;
static dd_fake_alloc_t *dd_fake_allocs;
static unsigned long dd_fake_serial;
static dd_fake_stream_t *dd_fake_default;

static dd_status_t dd_fake_error(dd_device_t *d, dd_status_t status,
                                 const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return d->svc.error(d->svc.arg, status, msg);
}

static dd_status_t dd_fake_query(char *why, size_t size)
{
    if (size > 0) {
        why[0] = '\0';
    }
    return DD_OK;
}

static dd_status_t dd_fake_init(const dd_device_services_t *svc,
                                dd_device_t **device_p)
{
    dd_device_t *d = calloc(1, sizeof(*d));

    if (d == NULL) {
        return svc->error(svc->arg, DD_ERR_NO_MEMORY, "no memory");
    }
    d->svc = *svc;
    *device_p = d;
    return DD_OK;
}

static void dd_fake_finalize(dd_device_t *d)
{
    free(d);
}

static dd_status_t dd_fake_count(dd_device_t *d, int *count_p)
{
    (void)d;
    *count_p = DD_FAKE_DEVICES;
    return DD_OK;
}

static dd_status_t dd_fake_info(dd_device_t *d, int ordinal,
                                dd_device_info_t *info_p)
{
    if (ordinal < 0 || ordinal >= DD_FAKE_DEVICES) {
        return dd_fake_error(d, DD_ERR_NO_DEVICE, "no device %d (it has %d)",
                             ordinal, DD_FAKE_DEVICES);
    }
    memset(info_p, 0, sizeof(*info_p));
    snprintf(info_p->name, sizeof(info_p->name), "fake device %d", ordinal);
    info_p->memory_bytes = (size_t)1 << 30;
    return DD_OK;
}

/* ---- streams: a thread per stream runs its queue, late ---------------- */

static void dd_fake_event_complete(dd_device_event_t *e, uint64_t seq)
{
    pthread_mutex_lock(&e->lock);
    if (seq > e->completed) {
        e->completed = seq;
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static void *dd_fake_stream_main(void *arg)
{
    dd_fake_stream_t *s = arg;
    struct timespec nap = {0, DD_FAKE_DELAY_NS};

    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->head == NULL && !s->stopping) {
            pthread_cond_wait(&s->cond, &s->lock);
        }
        if (s->head == NULL) {
            break;
        }
        dd_fake_op_t *op = s->head;
        pthread_mutex_unlock(&s->lock);
        nanosleep(&nap, NULL);
        if (op->event != NULL) {
            dd_fake_event_complete(op->event, op->seq);
        } else if (op->reduce) {
            dd_coll_reduce(op->dst, op->src,
                           op->bytes / dd_coll_dtype_size(op->dtype), op->dtype,
                           DD_REDUCE_SUM);
        } else {
            memcpy(op->dst, op->src, op->bytes);
        }
        pthread_mutex_lock(&s->lock);
        s->head = op->next;
        if (s->head == NULL) {
            s->tail = &s->head;
        }
        free(op);
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static dd_fake_stream_t *dd_fake_stream_new(void)
{
    dd_fake_stream_t *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        return NULL;
    }
    s->tail = &s->head;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    if (pthread_create(&s->thread, NULL, dd_fake_stream_main, s) != 0) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
        free(s);
        return NULL;
    }
    return s;
}

static dd_status_t dd_fake_stream_create(dd_device_t *d, int ordinal,
                                         void **stream_p)
{
    if (ordinal < 0 || ordinal >= DD_FAKE_DEVICES) {
        return dd_fake_error(d, DD_ERR_NO_DEVICE, "no device %d", ordinal);
    }
    dd_fake_stream_t *s = dd_fake_stream_new();
    if (s == NULL) {
        return dd_fake_error(d, DD_ERR_NO_MEMORY,
                             "cannot start a stream's thread");
    }
    *stream_p = s;
    return DD_OK;
}

/* Waits for what was queued, then stops the thread. */
static void dd_fake_stream_destroy(dd_device_t *d, void *stream)
{
    dd_fake_stream_t *s = stream;

    (void)d;
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
}

/* NULL is the default stream, started on first use. */
static dd_fake_stream_t *dd_fake_stream_of(void *stream)
{
    if (stream != NULL) {
        return stream;
    }
    pthread_mutex_lock(&dd_fake_lock);
    if (dd_fake_default == NULL) {
        dd_fake_default = dd_fake_stream_new();
    }
    pthread_mutex_unlock(&dd_fake_lock);
    return dd_fake_default;
}

static dd_status_t dd_fake_enqueue(dd_device_t *d, void *stream,
                                   dd_fake_op_t *op)
{
    dd_fake_stream_t *s = dd_fake_stream_of(stream);

    if (s == NULL) {
        free(op);
        return dd_fake_error(d, DD_ERR_NO_MEMORY, "no default stream");
    }
    op->next = NULL;
    pthread_mutex_lock(&s->lock);
    *s->tail = op;
    s->tail = &op->next;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return DD_OK;
}

/* ---- events ------------------------------------------------------------- */

static dd_status_t dd_fake_event_create(dd_device_t *d, int ordinal,
                                        dd_device_event_t **event_p)
{
    dd_device_event_t *e = calloc(1, sizeof(*e));

    (void)ordinal;
    if (e == NULL) {
        return dd_fake_error(d, DD_ERR_NO_MEMORY, "no memory");
    }
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    *event_p = e;
    return DD_OK;
}

static dd_status_t dd_fake_event_synchronize(dd_device_t *d,
                                             dd_device_event_t *e)
{
    (void)d;
    pthread_mutex_lock(&e->lock);
    while (e->completed < e->recorded) {
        pthread_cond_wait(&e->cond, &e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return DD_OK;
}

/* A stream thread may still hold a record of it: wait for that first. */
static void dd_fake_event_destroy(dd_device_t *d, dd_device_event_t *e)
{
    if (e == NULL) {
        return;
    }
    dd_fake_event_synchronize(d, e);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    free(e);
}

static dd_status_t dd_fake_event_record(dd_device_t *d, dd_device_event_t *e,
                                        void *stream)
{
    dd_fake_op_t *op = calloc(1, sizeof(*op));

    if (op == NULL) {
        return dd_fake_error(d, DD_ERR_NO_MEMORY, "no memory");
    }
    pthread_mutex_lock(&e->lock);
    op->seq = ++e->recorded;
    pthread_mutex_unlock(&e->lock);
    op->event = e;
    return dd_fake_enqueue(d, stream, op);
}

static dd_status_t dd_fake_event_query(dd_device_t *d, dd_device_event_t *e)
{
    (void)d;
    pthread_mutex_lock(&e->lock);
    int done = e->completed >= e->recorded;
    pthread_mutex_unlock(&e->lock);
    return done ? DD_OK : DD_INPROGRESS;
}

/* ---- memory ------------------------------------------------------------ */

static dd_status_t dd_fake_host_alloc(dd_device_t *d, size_t bytes,
                                      void **ptr_p)
{
    void *p = NULL;

    if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) {
        return dd_fake_error(d, DD_ERR_NO_MEMORY,
                             "no memory for %zu pinned bytes", bytes);
    }
    *ptr_p = p;
    return DD_OK;
}

static void dd_fake_host_free(dd_device_t *d, void *ptr)
{
    (void)d;
    free(ptr);
}

/* Registers a mapping; under no lock. */
static dd_status_t dd_fake_register(dd_device_t *d, char *ptr, size_t bytes,
                                    const char *name, int mapped)
{
    dd_fake_alloc_t *a = calloc(1, sizeof(*a));

    if (a == NULL) {
        return dd_fake_error(d, DD_ERR_NO_MEMORY, "no memory");
    }
    a->ptr = ptr;
    a->bytes = bytes;
    a->mapped = mapped;
    snprintf(a->name, sizeof(a->name), "%s", name);
    pthread_mutex_lock(&dd_fake_lock);
    a->next = dd_fake_allocs;
    dd_fake_allocs = a;
    pthread_mutex_unlock(&dd_fake_lock);
    return DD_OK;
}

/* Removes the mapping that starts at ptr and returns it (the caller
 * frees), or NULL. */
static dd_fake_alloc_t *dd_fake_unregister(void *ptr)
{
    dd_fake_alloc_t **p, *a = NULL;

    pthread_mutex_lock(&dd_fake_lock);
    for (p = &dd_fake_allocs; *p != NULL; p = &(*p)->next) {
        if ((*p)->ptr == ptr) {
            a = *p;
            *p = a->next;
            break;
        }
    }
    pthread_mutex_unlock(&dd_fake_lock);
    return a;
}

/* The mapping that holds [ptr, ptr + bytes), copied to *out; 0 when none
 * does. */
static int dd_fake_find(const void *ptr, size_t bytes, dd_fake_alloc_t *out)
{
    const char *p = ptr;
    int found = 0;

    pthread_mutex_lock(&dd_fake_lock);
    for (dd_fake_alloc_t *a = dd_fake_allocs; a != NULL && !found;
         a = a->next) {
        if (p >= a->ptr && p + bytes <= a->ptr + a->bytes) {
            *out = *a;
            found = 1;
        }
    }
    pthread_mutex_unlock(&dd_fake_lock);
    return found;
}

static dd_status_t dd_fake_map(dd_device_t *d, const char *name, size_t bytes,
                               int create, void **ptr_p)
{
    int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);

    if (fd < 0 && create && errno == EEXIST) {
        return DD_INPROGRESS; /* the name is taken: the caller tries another */
    }
    if (fd < 0) {
        return dd_fake_error(d, create ? DD_ERR_NO_MEMORY : DD_ERR_NOT_FOUND,
                             "shm_open %s: %s", name, strerror(errno));
    }
    if (create && ftruncate(fd, (off_t)bytes) != 0) {
        int err = errno;
        close(fd);
        shm_unlink(name);
        return dd_fake_error(d, DD_ERR_NO_MEMORY,
                             "cannot size %s to %zu bytes: %s", name, bytes,
                             strerror(err));
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    close(fd);
    if (p == MAP_FAILED) {
        if (create) {
            shm_unlink(name);
        }
        return dd_fake_error(d, DD_ERR_NO_MEMORY, "mmap %s: %s", name,
                             strerror(err));
    }
    *ptr_p = p;
    return DD_OK;
}

/* Objects this process created and still holds go when it exits: a test
 * that forgets a buffer must not leave it in /dev/shm. */
static void dd_fake_atexit(void)
{
    pthread_mutex_lock(&dd_fake_lock);
    for (dd_fake_alloc_t *a = dd_fake_allocs; a != NULL; a = a->next) {
        if (!a->mapped) {
            shm_unlink(a->name);
        }
    }
    pthread_mutex_unlock(&dd_fake_lock);
}

static void dd_fake_register_atexit(void)
{
    atexit(dd_fake_atexit);
}

/* A new object under a name no other process uses: the pid, a clock
 * reading (a killed process leaves its objects, and pids come back) and a
 * serial, tried again on a clash. */
static dd_status_t dd_fake_create(dd_device_t *d, size_t bytes, char *name,
                                  size_t size, void **ptr_p)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    dd_status_t status;

    pthread_once(&once, dd_fake_register_atexit);
    for (int attempt = 0; attempt < 8; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        pthread_mutex_lock(&dd_fake_lock);
        unsigned long serial = ++dd_fake_serial;
        pthread_mutex_unlock(&dd_fake_lock);
        snprintf(name, size, "/dd_fake_%ld_%lx_%lu", (long)getpid(),
                 (unsigned long)ts.tv_nsec, serial);
        status = dd_fake_map(d, name, bytes, 1, ptr_p);
        if (status != DD_INPROGRESS) {
            return status;
        }
    }
    return dd_fake_error(d, DD_ERR_NO_MEMORY,
                         "no free shared-memory name after 8 tries (last %s)",
                         name);
}

static dd_status_t dd_fake_mem_alloc(dd_device_t *d, int ordinal, size_t bytes,
                                     void **ptr_p)
{
    char name[40];
    void *p;

    if (ordinal < 0 || ordinal >= DD_FAKE_DEVICES) {
        return dd_fake_error(d, DD_ERR_NO_DEVICE, "no device %d", ordinal);
    }
    bytes = bytes ? bytes : 1;
    dd_status_t status = dd_fake_create(d, bytes, name, sizeof(name), &p);
    if (status != DD_OK) {
        return status;
    }
    status = dd_fake_register(d, p, bytes, name, 0);
    if (status != DD_OK) {
        munmap(p, bytes);
        shm_unlink(name);
        return status;
    }
    *ptr_p = p;
    return DD_OK;
}

static void dd_fake_mem_free(dd_device_t *d, void *ptr)
{
    dd_fake_alloc_t *a = dd_fake_unregister(ptr);

    (void)d;
    if (a != NULL) {
        munmap(a->ptr, a->bytes);
        if (!a->mapped) {
            shm_unlink(a->name);
        }
        free(a);
    }
}

static const char *const dd_fake_kinds[] = {"H2D", "D2H", "D2D"};

static dd_status_t dd_fake_memcpy_async(dd_device_t *d, void *dst,
                                        const void *src, size_t bytes,
                                        dd_device_copy_t kind, void *stream)
{
    dd_fake_alloc_t a;
    int src_dev = dd_fake_find(src, bytes, &a);
    int dst_dev = dd_fake_find(dst, bytes, &a);

    if (kind > DD_DEVICE_COPY_D2D || src_dev != (kind != DD_DEVICE_COPY_H2D) ||
        dst_dev != (kind != DD_DEVICE_COPY_D2H)) {
        return dd_fake_error(
            d, DD_ERR_INVALID_PARAM,
            "a %s copy of %zu bytes from %s to %s "
            "memory",
            kind <= DD_DEVICE_COPY_D2D ? dd_fake_kinds[kind] : "?", bytes,
            src_dev ? "device" : "host", dst_dev ? "device" : "host");
    }
    dd_fake_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return dd_fake_error(d, DD_ERR_NO_MEMORY, "no memory");
    }
    op->dst = dst;
    op->src = src;
    op->bytes = bytes;
    return dd_fake_enqueue(d, stream, op);
}

/* The device's "kernel": the library's own host sum, on the stream's
 * thread, so that it equals the host reductions bit for bit. */
static dd_status_t dd_fake_reduce_async(dd_device_t *d, void *dst,
                                        const void *src, size_t count,
                                        dd_dtype_t dtype, void *stream)
{
    dd_fake_alloc_t a;
    size_t es = dd_coll_dtype_size(dtype);

    if (es == 0) {
        return dd_fake_error(d, DD_ERR_INVALID_PARAM,
                             "reduce_async: invalid dtype %d", (int)dtype);
    }
    if (count > SIZE_MAX / es || !dd_fake_find(dst, count * es, &a) ||
        !dd_fake_find(src, count * es, &a)) {
        return dd_fake_error(d, DD_ERR_INVALID_PARAM,
                             "reduce_async: %zu elements at %p += %p: both "
                             "must lie in device memory",
                             count, dst, src);
    }
    dd_fake_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return dd_fake_error(d, DD_ERR_NO_MEMORY, "no memory");
    }
    op->dst = dst;
    op->src = src;
    op->bytes = count * es;
    op->reduce = 1;
    op->dtype = dtype;
    return dd_fake_enqueue(d, stream, op);
}

/* ---- IPC: the shared-memory object's name ------------------------------ */

static dd_status_t dd_fake_ipc_get(dd_device_t *d, void *ptr,
                                   dd_device_ipc_handle_t *handle_p)
{
    dd_fake_alloc_t a;
    dd_fake_ipc_t h = {.magic = DD_FAKE_MAGIC};

    if (!dd_fake_find(ptr, 1, &a) || a.ptr != ptr) {
        return dd_fake_error(d, DD_ERR_INVALID_PARAM,
                             "%p is not the start of a device "
                             "allocation",
                             ptr);
    }
    h.bytes = a.bytes;
    memcpy(h.name, a.name, sizeof(h.name));
    memset(handle_p, 0, sizeof(*handle_p));
    memcpy(handle_p->bytes, &h, sizeof(h));
    return DD_OK;
}

static dd_status_t dd_fake_ipc_open(dd_device_t *d,
                                    const dd_device_ipc_handle_t *handle,
                                    void **ptr_p)
{
    dd_fake_ipc_t h;
    void *p;

    memcpy(&h, handle->bytes, sizeof(h));
    h.name[sizeof(h.name) - 1] = '\0';
    if (h.magic != DD_FAKE_MAGIC || h.name[0] != '/') {
        return dd_fake_error(d, DD_ERR_INVALID_PARAM,
                             "not an IPC handle of the fake device");
    }
    dd_status_t status = dd_fake_map(d, h.name, (size_t)h.bytes, 0, &p);
    if (status == DD_OK) {
        status = dd_fake_register(d, p, (size_t)h.bytes, h.name, 1);
        if (status != DD_OK) {
            munmap(p, (size_t)h.bytes);
        }
    }
    if (status == DD_OK) {
        *ptr_p = p;
        /* Tests count these lines: a route maps each buffer once. */
        if (d->svc.log_level >= 3) {
            char msg[96];
            snprintf(msg, sizeof(msg), "ipc_open %s (%llu bytes)", h.name,
                     (unsigned long long)h.bytes);
            d->svc.log(d->svc.arg, 3, msg);
        }
    }
    return status;
}

static dd_status_t dd_fake_ipc_close(dd_device_t *d, void *ptr)
{
    dd_fake_alloc_t *a = dd_fake_unregister(ptr);

    if (a == NULL || !a->mapped) {
        if (a != NULL) { /* not a mapping: put it back */
            dd_fake_register(d, a->ptr, a->bytes, a->name, 0);
            free(a);
        }
        return dd_fake_error(d, DD_ERR_INVALID_PARAM,
                             "%p was not mapped with ipc_open", ptr);
    }
    munmap(a->ptr, a->bytes);
    free(a);
    return DD_OK;
}

static const dd_device_ops_t dd_fake_ops = {
    .abi_version = DD_DEVICE_ABI_VERSION,
    .name = "fake",
    .query = dd_fake_query,
    .init = dd_fake_init,
    .finalize = dd_fake_finalize,
    .device_count = dd_fake_count,
    .device_info = dd_fake_info,
    .stream_create = dd_fake_stream_create,
    .stream_destroy = dd_fake_stream_destroy,
    .event_create = dd_fake_event_create,
    .event_destroy = dd_fake_event_destroy,
    .event_record = dd_fake_event_record,
    .event_query = dd_fake_event_query,
    .event_synchronize = dd_fake_event_synchronize,
    .host_alloc = dd_fake_host_alloc,
    .host_free = dd_fake_host_free,
    .mem_alloc = dd_fake_mem_alloc,
    .mem_free = dd_fake_mem_free,
    .memcpy_async = dd_fake_memcpy_async,
    .ipc_get = dd_fake_ipc_get,
    .ipc_open = dd_fake_ipc_open,
    .ipc_close = dd_fake_ipc_close,
    .reduce_async = dd_fake_reduce_async,
};

DD_API const dd_device_ops_t *dd_device_ops_get(void)
{
    return &dd_fake_ops;
}
