/*
 * The hierarchical route (DREAMDDP_ROUTE=hierarchical), as BytePS runs a
 * machine of several GPUs: the workers of a host sum a device layer among
 * themselves device to device, through CUDA IPC; the host's lowest worker
 * rank, its leader, moves that sum through the aggregators (staged as any
 * device job, staging.c), which divide by every worker of every host, or,
 * in a job without aggregators, through an allreduce among the leaders
 * alone; and the peers copy the average back from the leader's buffer,
 * through IPC.
 *
 * Each worker of the host has one device scratch buffer, as large as its
 * largest device tensor, whose IPC handle goes through the store once, at
 * commit: the leader maps every peer's, each peer the leader's. A job
 * copies the layer into the rank's scratch after its readiness event; the
 * leader adds the peers' scratch buffers to its own, in local rank order,
 * on its own stream. The host's ranks tell each other how far they are
 * through a small shared-memory segment of counters (the jobs run in the
 * same order on every worker, so the k-th job of the route names the same
 * layer everywhere, which the counters check): ready (the rank's scratch
 * holds job k), the leader's result (its scratch holds job k's average),
 * done (the rank has the average: the leader may reuse its scratch),
 * failed, and each rank's pid, so that a peer that died is named at once.
 * It runs on the engine thread and never blocks; the set-up at commit
 * waits on the store.
 */
#include "sched/route/hier.h"
#include "core/log.h"
#include "core/reduce.h"
#include "core/time.h"
#include "sched/engine/divergence.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define DD_HIER_MAGIC 0x5245494844444444ull /* "DDDDHIER" */

/* One rank's counters; written by that rank only (result: the leader). */
typedef struct {
    uint64_t ready, done, failed, layer;
    int64_t pid;
    uint64_t pid_ns; /* its pid namespace: pids compare only within one */
} dd_hier_flags_t;

typedef struct {
    uint64_t magic;
    uint64_t result;
    dd_hier_flags_t rank[];
} dd_hier_shm_t;

struct dd_hier {
    const dd_device_module_t *dev;
    int ordinal;
    int n_local, me; /* workers of the host; this one's index (0: leader) */
    int *ranks;      /* their job ranks */
    size_t bytes;    /* of each scratch buffer */
    void *scratch;
    void **mapped; /* leader: [n_local] the peers' scratch ([0] unused);
                      peer: [0] the leader's */
    int n_mapped;  /* buffers ipc_open()'d, once each, at commit */
    void *stream;
    dd_device_event_t *event;
    void *mine, *avg; /* pinned: the divergence monitor's views */
    dd_hier_shm_t *shm;
    size_t shm_bytes;
    char shm_name[64]; /* from a random value the leader draws */
    uint64_t seq;      /* jobs started */
    uint64_t pid_ns;   /* dd_hier_pid_ns() */
};

typedef enum {
    DD_HIER_WAIT_READY = 0, /* the layer's readiness event */
    DD_HIER_COPY_IN,        /* the layer into the scratch buffer */
    DD_HIER_GATHER,         /* leader: the peers' sums queued as they come */
    DD_HIER_REDUCE,         /* leader: the sums on the device */
    DD_HIER_NET,            /* leader: through the aggregators */
    DD_HIER_RESULT,         /* peer: waiting for the leader's average */
    DD_HIER_COPY_OUT,       /* the average into the layer */
    DD_HIER_DONE_WAIT       /* leader: until every peer has it */
} dd_hier_state_t;

typedef struct {
    dd_route_hier_t *r;
    dd_sync_job_t *job;
    uint64_t seq;
    dd_hier_state_t state;
    char *buf;
    size_t count, bytes;
    int next_peer;
    dd_sync_job_t sub; /* the leader's job through the staging pipe */
    void *net;
    double t_ready, t_local, t_back;
} dd_hier_op_t;

/* ---- set-up at commit -------------------------------------------------- */

/* The workers of this rank's host, in rank order. */
static dd_status_t dd_hier_group(dd_route_hier_t *r, dd_hier_t *h)
{
    const dd_job_t *job = r->env->job;

    h->ranks = malloc(sizeof(int) * (size_t)job->n_workers);
    if (h->ranks == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the host's workers");
    }
    for (int i = 0; i < job->n_workers; i++) {
        int rank = job->worker_ranks[i];
        if (job->host_of[rank] == job->host_of[job->rank]) {
            h->me = rank == job->rank ? h->n_local : h->me;
            h->ranks[h->n_local++] = rank;
        }
    }
    return DD_OK;
}

/* This process's pid namespace (0 when unknown): containers of one host
 * may share its memory and not its pids. */
static uint64_t dd_hier_pid_ns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

#define DD_HIER_SHM_PREFIX "/dreamddp_hier_"

/* 8 random bytes from the kernel; -1 with errno set when there are none. */
static int dd_hier_random(uint64_t *v)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, v, sizeof(*v));
    int err = errno;

    if (fd >= 0) {
        close(fd);
    }
    errno = n == (ssize_t)sizeof(*v) ? 0 : err ? err : EIO;
    return n == (ssize_t)sizeof(*v) ? 0 : -1;
}

static void dd_hier_key(char *key, size_t size, const char *what, int rank)
{
    snprintf(key, size, "dd/hier/%s/%d", what, rank);
}

/* The host's counters: made by the leader, mapped by the peers, and
 * unlinked once every peer has it mapped. */
static dd_status_t dd_hier_shm(dd_route_hier_t *r, dd_hier_t *h)
{
    const dd_job_t *job = r->env->job;
    char name[64], key[64];
    int fd;

    h->shm_bytes =
        sizeof(dd_hier_shm_t) + (size_t)h->n_local * sizeof(dd_hier_flags_t);
    if (h->me == 0) {
        /* A name no one outside the job can tie to it: a random value,
         * handed to the peers through the store, never the token's. */
        uint64_t nonce;
        if (dd_hier_random(&nonce) != 0) {
            return dd_error(DD_ERR_IO, DD_SUBSYS_SCHED,
                            "DREAMDDP_ROUTE=hierarchical: no random value "
                            "for the host's shared memory name: %m");
        }
        snprintf(name, sizeof(name), "/dreamddp_hier_%016llx_%d",
                 (unsigned long long)nonce, h->ranks[0]);
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0 && ftruncate(fd, (off_t)h->shm_bytes) != 0) {
            close(fd);
            fd = -1;
        }
    } else {
        void *v = NULL;
        size_t len;
        dd_hier_key(key, sizeof(key), "shm", h->ranks[0]);
        dd_status_t status = dd_store_get(job->store, key, &v, &len);
        if (status == DD_OK &&
            (len >= sizeof(name) || len < sizeof(DD_HIER_SHM_PREFIX) ||
             memcmp(v, DD_HIER_SHM_PREFIX, sizeof(DD_HIER_SHM_PREFIX) - 1))) {
            status = DD_ERR_MESSAGE;
        }
        if (status == DD_OK) {
            memcpy(name, v, len);
            name[len] = '\0';
        }
        free(v);
        if (status != DD_OK) {
            return dd_error(status, DD_SUBSYS_SCHED,
                            "DREAMDDP_ROUTE=hierarchical: rank %d: the local "
                            "leader rank %d did not set up its host's flags",
                            job->rank, h->ranks[0]);
        }
        fd = shm_open(name, O_RDWR, 0600);
    }
    if (fd < 0) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "DREAMDDP_ROUTE=hierarchical: shared memory %s: %m",
                        name);
    }
    void *p =
        mmap(NULL, h->shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "DREAMDDP_ROUTE=hierarchical: mmap %s: %m", name);
    }
    h->shm = p;
    snprintf(h->shm_name, sizeof(h->shm_name), "%s", name);
    h->pid_ns = dd_hier_pid_ns();
    __atomic_store_n(&h->shm->rank[h->me].pid_ns, h->pid_ns, __ATOMIC_RELEASE);
    __atomic_store_n(&h->shm->rank[h->me].pid, (int64_t)getpid(),
                     __ATOMIC_RELEASE);
    if (h->me == 0) {
        h->shm->magic = DD_HIER_MAGIC;
        dd_hier_key(key, sizeof(key), "shm", job->rank);
        return dd_store_set(job->store, key, name, strlen(name));
    }
    dd_hier_key(key, sizeof(key), "joined", job->rank);
    return dd_store_set(job->store, key, "1", 1);
}

/* The scratch buffer's handle out, the others' in: once, here. */
static dd_status_t dd_hier_ipc(dd_route_hier_t *r, dd_hier_t *h)
{
    const dd_job_t *job = r->env->job;
    const dd_device_ops_t *ops = h->dev->ops;
    dd_device_ipc_handle_t handle;
    char key[64];
    dd_status_t status = ops->ipc_get(h->dev->instance, h->scratch, &handle);

    if (status != DD_OK) {
        return status;
    }
    dd_hier_key(key, sizeof(key), "ipc", job->rank);
    if ((status = dd_store_set(job->store, key, &handle, sizeof(handle))) !=
        DD_OK) {
        return status;
    }
    h->mapped = calloc((size_t)h->n_local, sizeof(void *));
    if (h->mapped == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the host's mapped buffers");
    }
    for (int i = 0; i < h->n_local; i++) {
        if (i == h->me || (h->me != 0 && i != 0)) {
            continue; /* the leader maps every peer, a peer the leader */
        }
        void *v = NULL;
        size_t len = 0;
        dd_hier_key(key, sizeof(key), "ipc", h->ranks[i]);
        status = dd_store_get(job->store, key, &v, &len);
        if (status == DD_OK && len != sizeof(handle)) {
            status = DD_ERR_MESSAGE;
        }
        if (status == DD_OK) {
            memcpy(&handle, v, sizeof(handle));
            status = ops->ipc_open(h->dev->instance, &handle,
                                   &h->mapped[h->me == 0 ? i : 0]);
        }
        free(v);
        if (status != DD_OK) {
            return dd_error(status, DD_SUBSYS_SCHED,
                            "DREAMDDP_ROUTE=hierarchical: rank %d cannot map "
                            "local rank %d's device buffer: %s",
                            job->rank, h->ranks[i], dd_last_error());
        }
        h->n_mapped++;
    }
    return DD_OK;
}

/* The leader unlinks the counters once every peer has them mapped. */
static dd_status_t dd_hier_joined(dd_route_hier_t *r, dd_hier_t *h)
{
    const dd_job_t *job = r->env->job;
    char key[64];

    if (h->me != 0) {
        return DD_OK;
    }
    for (int i = 1; i < h->n_local; i++) {
        void *v = NULL;
        size_t len;
        dd_hier_key(key, sizeof(key), "joined", h->ranks[i]);
        dd_status_t status = dd_store_get(job->store, key, &v, &len);
        free(v);
        if (status != DD_OK) {
            return dd_error(status, DD_SUBSYS_SCHED,
                            "DREAMDDP_ROUTE=hierarchical: local rank %d did "
                            "not join its leader rank %d",
                            h->ranks[i], job->rank);
        }
    }
    shm_unlink(h->shm_name);
    return DD_OK;
}

static dd_status_t dd_hier_alloc(dd_hier_t *h, int measure)
{
    const dd_device_ops_t *ops = h->dev->ops;
    void *d = h->dev->instance;
    dd_status_t status;

    if ((status = ops->mem_alloc(d, h->ordinal, h->bytes, &h->scratch)) !=
            DD_OK ||
        (status = ops->stream_create(d, h->ordinal, &h->stream)) != DD_OK ||
        (status = ops->event_create(d, h->ordinal, &h->event)) != DD_OK) {
        return status;
    }
    if (measure &&
        ((status = ops->host_alloc(d, h->bytes, &h->mine)) != DD_OK ||
         (status = ops->host_alloc(d, h->bytes, &h->avg)) != DD_OK)) {
        return status;
    }
    return DD_OK;
}

void dd_route_hier_close(dd_route_hier_t *r)
{
    dd_hier_t *h = r->h;

    if (h == NULL) {
        return;
    }
    if (h->dev == NULL) { /* no device module: nothing was made */
        free(h->ranks);
        free(h);
        r->h = NULL;
        return;
    }
    const dd_device_ops_t *ops = h->dev->ops;
    void *d = h->dev->instance;
    for (int i = 0; h->mapped != NULL && i < h->n_local; i++) {
        if (h->mapped[i] != NULL) {
            ops->ipc_close(d, h->mapped[i]);
        }
    }
    if (h->scratch != NULL) {
        ops->mem_free(d, h->scratch);
    }
    if (h->event != NULL) {
        ops->event_destroy(d, h->event);
    }
    if (h->stream != NULL) {
        ops->stream_destroy(d, h->stream);
    }
    if (h->mine != NULL) {
        ops->host_free(d, h->mine);
    }
    if (h->avg != NULL) {
        ops->host_free(d, h->avg);
    }
    if (h->shm != NULL) {
        munmap(h->shm, h->shm_bytes);
    }
    free(h->mapped);
    free(h->ranks);
    free(h);
    r->h = NULL;
}

dd_status_t dd_route_hier_open(dd_route_hier_t *r, int ordinal, size_t bytes,
                               int measure, int *leader_p)
{
    const dd_job_t *job = r->env->job;
    dd_status_t status;

    *leader_p = 0;
    if (job->host_of == NULL) {
        return dd_error(DD_ERR_INTERNAL, DD_SUBSYS_SCHED,
                        "DREAMDDP_ROUTE=hierarchical: the job's hosts were "
                        "not agreed at dd_init");
    }
    dd_hier_t *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the hierarchical route");
    }
    r->h = h;
    h->dev = r->env->device;
    h->ordinal = ordinal;
    h->bytes = bytes;
    if ((status = dd_hier_group(r, h)) != DD_OK) {
        return status;
    }
    if (h->ordinal < 0) {
        return DD_OK; /* no device layer: all go by the workers' allreduce */
    }
    *leader_p = h->me == 0;
    if ((status = dd_hier_alloc(h, measure)) != DD_OK ||
        (status = dd_hier_shm(r, h)) != DD_OK ||
        (status = dd_hier_ipc(r, h)) != DD_OK ||
        (status = dd_hier_joined(r, h)) != DD_OK) {
        return status;
    }
    dd_log_info(DD_SUBSYS_SCHED,
                "hierarchical route: local rank %d of %d workers on this host "
                "(leader rank %d), %zu-byte device buffers, %d mapped "
                "through IPC",
                h->me, h->n_local, h->ranks[0], h->bytes, h->n_mapped);
    return DD_OK;
}

/* ---- the pipe ---------------------------------------------------------- */

static dd_status_t dd_hier_start(void *arg, dd_sync_job_t *job, void *buf,
                                 size_t count, void **handle_p)
{
    dd_route_hier_t *r = arg;
    dd_hier_t *h = r->h;
    size_t bytes = count * dd_dtype_size(job->dtype);

    if (h == NULL || h->scratch == NULL || job->op != NULL ||
        bytes > h->bytes) {
        return dd_error(DD_ERR_INTERNAL, DD_SUBSYS_SCHED,
                        "hierarchical route: layer '%s' (%zu bytes) is not "
                        "a device layer it set up",
                        dd_route_job_layer(r->env, job), bytes);
    }
    dd_hier_op_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a hierarchical sync");
    }
    t->r = r;
    t->job = job;
    t->seq = ++h->seq;
    t->buf = buf;
    t->count = count;
    t->bytes = bytes;
    t->next_peer = 1;
    *handle_p = t;
    return DD_OK;
}

/* Whether local rank i failed or died; fills why. */
static int dd_hier_peer_lost(const dd_hier_op_t *t, int i, char *why,
                             size_t size)
{
    const dd_hier_t *h = t->r->h;
    const dd_hier_flags_t *f = &h->shm->rank[i];
    uint64_t failed = __atomic_load_n(&f->failed, __ATOMIC_ACQUIRE);
    int64_t pid = __atomic_load_n(&f->pid, __ATOMIC_ACQUIRE);
    uint64_t ns = __atomic_load_n(&f->pid_ns, __ATOMIC_ACQUIRE);

    if (failed != 0 && failed <= t->seq) {
        snprintf(why, size, "local %s rank %d failed (its log says why)",
                 i == 0 ? "leader" : "peer", h->ranks[i]);
        return 1;
    }
    if (pid > 0 && ns != 0 && ns == h->pid_ns && kill((pid_t)pid, 0) != 0 &&
        errno == ESRCH) {
        snprintf(why, size, "local %s rank %d (pid %lld) died",
                 i == 0 ? "leader" : "peer", h->ranks[i], (long long)pid);
        return 1;
    }
    return 0;
}

/* A wait on local rank i that did not end: lost, or past its bound.
 * DD_INPROGRESS while it may still end. The bound is below the engine's
 * (DREAMDDP_TIMEOUT_S from the job's start), so that this message, which
 * names the peer, comes first. A peer waiting for its leader's average has
 * none (bounded 0): the leader's own wait on the aggregators is bounded
 * and says what it waited for, and a peer that timed out first would
 * abort the job before the rank at fault is named. */
static dd_status_t dd_hier_waiting(const dd_hier_op_t *t, int i,
                                   const char *what, int bounded)
{
    const dd_route_hier_t *r = t->r;
    const dd_job_t *job = r->env->job;
    char why[160];
    double bound = 0.9 * job->timeout_s;

    if (dd_hier_peer_lost(t, i, why, sizeof(why))) {
        return dd_error(DD_ERR_PEER_LOST, DD_SUBSYS_SCHED,
                        "rank %d: %s while waiting for its %s of layer '%s' "
                        "at step %llu",
                        job->rank, why, what,
                        dd_route_job_layer(r->env, t->job),
                        (unsigned long long)t->job->step);
    }
    if (bounded && dd_time_now() - t->t_ready > bound) {
        return dd_error(DD_ERR_TIMED_OUT, DD_SUBSYS_SCHED,
                        "rank %d: local %s rank %d: no %s of layer '%s' at "
                        "step %llu within %.0f s",
                        job->rank, i == 0 ? "leader" : "peer", r->h->ranks[i],
                        what, dd_route_job_layer(r->env, t->job),
                        (unsigned long long)t->job->step, bound);
    }
    return DD_INPROGRESS;
}

/* Queues the layer's copy into the scratch buffer (and the monitor's view
 * of this worker's values). */
static dd_status_t dd_hier_copy_in(dd_hier_op_t *t)
{
    dd_hier_t *h = t->r->h;
    const dd_device_ops_t *ops = h->dev->ops;
    void *d = h->dev->instance;
    dd_status_t status = ops->memcpy_async(d, h->scratch, t->buf, t->bytes,
                                           DD_DEVICE_COPY_D2D, h->stream);

    if (status == DD_OK && t->job->measure && h->mine != NULL) {
        status = ops->memcpy_async(d, h->mine, t->buf, t->bytes,
                                   DD_DEVICE_COPY_D2H, h->stream);
    }
    return status == DD_OK ? ops->event_record(d, h->event, h->stream) : status;
}

/* Queues the average's copy into the layer, from src (the leader's scratch
 * buffer, this process's or mapped). */
static dd_status_t dd_hier_copy_out(dd_hier_op_t *t, const void *src)
{
    dd_hier_t *h = t->r->h;
    const dd_device_ops_t *ops = h->dev->ops;
    void *d = h->dev->instance;
    dd_status_t status = ops->memcpy_async(d, t->buf, src, t->bytes,
                                           DD_DEVICE_COPY_D2D, h->stream);

    if (status == DD_OK && t->job->measure && h->avg != NULL) {
        status = ops->memcpy_async(d, h->avg, src, t->bytes, DD_DEVICE_COPY_D2H,
                                   h->stream);
    }
    t->t_back = dd_time_now();
    return status == DD_OK ? ops->event_record(d, h->event, h->stream) : status;
}

/* The leader queues each peer's sum as soon as it is ready, in local rank
 * order, so the sum is the same whoever comes first. */
static dd_status_t dd_hier_gather(dd_hier_op_t *t, int *busy_p)
{
    dd_hier_t *h = t->r->h;
    const dd_device_ops_t *ops = h->dev->ops;

    while (t->next_peer < h->n_local) {
        dd_hier_flags_t *f = &h->shm->rank[t->next_peer];
        if (__atomic_load_n(&f->ready, __ATOMIC_ACQUIRE) < t->seq) {
            return dd_hier_waiting(t, t->next_peer, "readiness", 1);
        }
        size_t layer = t->job->n_layers > 0 ? t->job->layers[0] : 0;
        uint64_t theirs = __atomic_load_n(&f->layer, __ATOMIC_ACQUIRE);
        if (theirs != layer) {
            const dd_route_env_t *env = t->r->env;
            return dd_error(
                DD_ERR_MISMATCH, DD_SUBSYS_SCHED,
                "hierarchical route: at its sync %llu local rank %d sends "
                "layer '%s', its leader rank %d layer '%s' (step %llu)",
                (unsigned long long)t->seq, h->ranks[t->next_peer],
                dd_route_layer_name(env, theirs), h->ranks[0],
                dd_route_job_layer(env, t->job),
                (unsigned long long)t->job->step);
        }
        dd_status_t status = ops->reduce_async(
            h->dev->instance, h->scratch, h->mapped[t->next_peer], t->count,
            t->job->dtype, h->stream);
        if (status != DD_OK) {
            return status;
        }
        t->next_peer++;
        *busy_p = 1;
    }
    t->state = DD_HIER_REDUCE;
    return ops->event_record(h->dev->instance, h->event, h->stream);
}

/* The leader's sum through the aggregators, staged as any device job. */
static dd_status_t dd_hier_net_start(dd_hier_op_t *t)
{
    const dd_sync_pipe_t *staging = t->r->staging;

    t->sub = *t->job;
    t->sub.next = NULL;
    t->sub.n_items = 0;
    t->sub.items = NULL;
    t->sub.pipe = NULL;
    t->sub.ready_event = NULL;
    t->sub.measure = 0;
    t->sub.staging_s = 0;
    t->t_local = dd_time_now();
    return staging->start(staging->arg, &t->sub, t->r->h->scratch, t->count,
                          &t->net);
}

/* The average is in the layer: the monitor's figure, and the counters. */
static void dd_hier_landed(dd_hier_op_t *t)
{
    dd_hier_t *h = t->r->h;
    dd_sync_job_t *job = t->job;

    if (job->measure && h->mine != NULL && job->n_items == 1) {
        dd_sync_item_t *it = &job->items[0];
        it->measured |= dd_drift_norms(h->mine, h->avg, t->count, job->dtype,
                                       &it->diff2, &it->norm2);
    }
    /* Copies and sums no network overlapped: the local sum before the
     * wire, the copy back after it. */
    double now = dd_time_now();
    job->staging_s += (t->t_local > 0 ? t->t_local - t->t_ready : 0) +
                      (now - t->t_back) + t->sub.staging_s;
    __atomic_store_n(&h->shm->rank[h->me].done, t->seq, __ATOMIC_RELEASE);
}

static dd_status_t dd_hier_event(const dd_hier_t *h)
{
    return h->dev->ops->event_query(h->dev->instance, h->event);
}

/* Moves the job one state on; DD_INPROGRESS while it waits. */
static dd_status_t dd_hier_step(dd_hier_op_t *t, int *busy_p)
{
    dd_hier_t *h = t->r->h;
    dd_sync_job_t *job = t->job;
    dd_status_t status = DD_OK;
    int moved = 0;

    switch (t->state) {
    case DD_HIER_WAIT_READY:
        if (job->ready_event != NULL &&
            (status = h->dev->ops->event_query(h->dev->instance,
                                               job->ready_event)) != DD_OK) {
            return status;
        }
        /* The sync starts when the layer is final on the device, as in
         * staging: the wait for the event is backward's. */
        t->t_ready = job->t_start = job->t_launch = dd_time_now();
        t->state = DD_HIER_COPY_IN;
        *busy_p = 1;
        return dd_hier_copy_in(t);
    case DD_HIER_COPY_IN:
        if ((status = dd_hier_event(h)) != DD_OK) {
            return status;
        }
        *busy_p = 1;
        if (h->me != 0) {
            dd_hier_flags_t *f = &h->shm->rank[h->me];
            __atomic_store_n(&f->layer,
                             (uint64_t)(job->n_layers ? job->layers[0] : 0),
                             __ATOMIC_RELEASE);
            __atomic_store_n(&f->ready, t->seq, __ATOMIC_RELEASE);
            t->state = DD_HIER_RESULT;
            return DD_OK;
        }
        t->state = DD_HIER_GATHER;
        return DD_OK;
    case DD_HIER_GATHER:
        return dd_hier_gather(t, busy_p);
    case DD_HIER_REDUCE:
        if ((status = dd_hier_event(h)) != DD_OK) {
            return status;
        }
        *busy_p = 1;
        t->state = DD_HIER_NET;
        return dd_hier_net_start(t);
    case DD_HIER_NET:
        status = t->r->staging->test(t->r->staging->arg, t->net, &moved);
        *busy_p |= moved & ~DD_SYNC_NOTIFY; /* its other steps may not ring */
        if (status != DD_OK) {
            t->net = status == DD_INPROGRESS ? t->net : NULL;
            return status;
        }
        t->net = NULL;
        /* The average is in the leader's scratch buffer: the peers may
         * take it while the leader takes its own. */
        __atomic_store_n(&h->shm->result, t->seq, __ATOMIC_RELEASE);
        t->state = DD_HIER_COPY_OUT;
        return dd_hier_copy_out(t, h->scratch);
    case DD_HIER_RESULT:
        if (__atomic_load_n(&h->shm->result, __ATOMIC_ACQUIRE) < t->seq) {
            return dd_hier_waiting(t, 0, "average", 0);
        }
        *busy_p = 1;
        t->state = DD_HIER_COPY_OUT;
        return dd_hier_copy_out(t, h->mapped[0]);
    case DD_HIER_COPY_OUT:
        if ((status = dd_hier_event(h)) != DD_OK) {
            return status;
        }
        *busy_p = 1;
        dd_hier_landed(t);
        t->state = DD_HIER_DONE_WAIT;
        return DD_OK;
    case DD_HIER_DONE_WAIT:
        /* The leader's scratch buffer is free once every peer has copied
         * the average out of it. */
        for (int i = 1; h->me == 0 && i < h->n_local; i++) {
            if (__atomic_load_n(&h->shm->rank[i].done, __ATOMIC_ACQUIRE) <
                t->seq) {
                return dd_hier_waiting(t, i, "copy of the average", 1);
            }
        }
        return DD_OK;
    }
    return DD_OK;
}

/* A failed job: the host's other ranks learn it from the counters; its
 * device work is waited for, since it still writes the buffers. */
static void dd_hier_end(dd_hier_op_t *t, dd_status_t status)
{
    dd_hier_t *h = t->r->h;

    if (status != DD_OK) {
        __atomic_store_n(&h->shm->rank[h->me].failed, t->seq, __ATOMIC_RELEASE);
        h->dev->ops->event_synchronize(h->dev->instance, h->event);
    }
    free(t);
}

static dd_status_t dd_hier_test(void *arg, void *handle, int *busy_p)
{
    dd_hier_op_t *t = handle;
    dd_status_t status;

    (void)arg;
    *busy_p = 0;
    do {
        dd_hier_state_t before = t->state;
        status = dd_hier_step(t, busy_p);
        if (status == DD_OK && t->state == DD_HIER_DONE_WAIT &&
            before == DD_HIER_DONE_WAIT) {
            dd_hier_end(t, DD_OK);
            return DD_OK;
        }
    } while (status == DD_OK);
    if (status != DD_INPROGRESS) {
        dd_hier_end(t, status);
    }
    return status;
}

/* ---- the leaders' allreduce, without aggregators ------------------------
 * A staged chunk of the host's sum, summed across the leaders on their own
 * instances of the backends and divided by every worker of every host; in
 * a job of one host, only divided. Every leader posts the chunks in the
 * same order (the staging pipe's), so the backends pair them. */

typedef struct {
    dd_backends_op_t op;
    void *buf;
    size_t count;
    dd_dtype_t dtype;
} dd_hier_sum_t;

static dd_status_t dd_hier_sum_start(void *arg, dd_sync_job_t *job, void *buf,
                                     size_t count, void **handle_p)
{
    dd_route_hier_t *r = arg;
    dd_hier_sum_t *x = calloc(1, sizeof(*x));
    dd_backend_args_t args = {.sendbuf = buf,
                              .recvbuf = buf,
                              .count = count,
                              .dtype = job->dtype,
                              .op = DD_REDUCE_SUM,
                              .mem_type = DD_MEM_HOST};

    if (x == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a chunk of the leaders' allreduce");
    }
    x->buf = buf;
    x->count = count;
    x->dtype = job->dtype;
    dd_status_t status =
        r->env->leaders == NULL
            ? DD_OK
            : dd_backends_op_start(r->env->leaders, DD_COLL_ALLREDUCE, &args,
                                   count * dd_dtype_size(job->dtype), &x->op);
    if (status != DD_OK) {
        free(x);
        return status;
    }
    *handle_p = x;
    return DD_OK;
}

static dd_status_t dd_hier_sum_test(void *arg, void *handle, int *busy_p)
{
    dd_route_hier_t *r = arg;
    dd_hier_sum_t *x = handle;
    dd_status_t status =
        r->env->leaders == NULL ? DD_OK : dd_backends_op_test(&x->op);

    *busy_p = status != DD_INPROGRESS;
    if (status == DD_OK) {
        dd_coll_divide(x->buf, x->count, x->dtype, r->env->job->n_workers);
    }
    if (status != DD_INPROGRESS) {
        free(x);
    }
    return status;
}

void dd_route_hier_init(dd_route_hier_t *r, const dd_route_env_t *env,
                        const dd_sync_pipe_t *staging)
{
    r->env = env;
    r->staging = staging;
    r->pipe = (dd_sync_pipe_t){
        .start = dd_hier_start, .test = dd_hier_test, .depth = 1, .arg = r};
    r->leaders = (dd_sync_pipe_t){.start = dd_hier_sum_start,
                                  .test = dd_hier_sum_test,
                                  .depth = DD_ENGINE_DEPTH,
                                  .arg = r};
}
