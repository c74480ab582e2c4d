/*
 * The backend registry: finds dd_backend_<name>.so modules, loads the ones
 * DREAMDDP_BACKENDS allows and every rank can run, initializes them with the
 * services they need, and picks one per (operation, memory type, size) by
 * score. The core links no backend library; everything goes through dlopen.
 */
#ifndef DD_BACKENDS_REGISTRY_H
#define DD_BACKENDS_REGISTRY_H

#include <dreamddp/backend.h>

#include "backends/backend_config.h"
#include "boot/store.h"

#include <limits.h>

typedef struct dd_backends dd_backends_t;

/**
 * What the registry is handed: its options, the job's geometry, the store
 * the modules rendezvous through, and the interface the topology chose
 * (NULL when none was), which goes to every module in its services.
 */
typedef struct {
    const dd_backend_opts_t *opts;
    dd_store_t *store;
    int rank, world_size;
    int local_rank, local_size;
    double timeout_s;
    const char *ifname; /* NULL: each backend's own default */
    const char *rdma;   /* the interface's RDMA device, or NULL */
    int rdma_port;      /* its port, with rdma */
    /* Streams this rank asks for (DREAMDDP_NUM_STREAMS or the topology's
     * choice); the job uses the least any rank asks for, at most
     * DD_BACKEND_MAX_STREAMS. */
    int streams;
    /* What the job needs beyond collectives on host memory: send and
     * recv (it has aggregators), device memory (a device module is
     * loaded). Without either, a backend whose collectives are not its own
     * is not started where one whose are opened. */
    int needs_p2p;
    int device_memory;
} dd_backends_env_t;

/** One loaded, initialized backend. */
typedef struct {
    const dd_backend_ops_t *ops;
    dd_backend_t *instance;
} dd_backend_ref_t;

/**
 * Loads and initializes the backends (after the store and roles are up). An
 * explicitly requested backend that cannot be used is an error naming it and
 * why; others are skipped with an info message.
 */
dd_status_t dd_backends_load(const dd_backends_env_t *env,
                             dd_backends_t **backends_p);

/** One module as dd_backends_load finds it, before any init. */
typedef struct {
    char name[32];
    char path[PATH_MAX];
    int explicit_request;     /* named in DREAMDDP_BACKENDS */
    int available;            /* it loads and its query() says it can run */
    char why[PATH_MAX + 512]; /* why not, when not available */
} dd_backend_probe_t;

/**
 * What dd_backends_load would find on this machine, without a job: the
 * same modules in the same places, DREAMDDP_BACKENDS applied, each dlopened
 * and asked query() as it does, then unloaded; no init, no store. Fills up
 * to max entries and sets *n_p. Returns DD_OK, or the error (reported)
 * dd_backends_load would stop at before loading: a bad DREAMDDP_BACKENDS,
 * or a module it names that is in none of the places.
 */
dd_status_t dd_backends_probe(const dd_backend_opts_t *opts,
                              dd_backend_probe_t *out, int max, int *n_p);

/**
 * Starts a second instance of every module of the job's set for a group of
 * ranks (the workers, when the job has aggregators): this process is rank
 * `rank` of `size` in it, and its store keys live under the group's name.
 * Only the group's members call it. The modules stay the job's: unload the
 * group before the job.
 */
dd_status_t dd_backends_load_group(const dd_backends_t *job, const char *group,
                                   int rank, int size,
                                   dd_backends_t **backends_p);

/** Finalizes and unloads every backend. NULL is allowed. */
void dd_backends_unload(dd_backends_t *backends);

/** The streams every module was told to open (the ranks' agreed count). */
int dd_backends_streams(const dd_backends_t *backends);

/**
 * The backend with the best score for op on bytes of mem_type memory;
 * DD_ERR_UNSUPPORTED, reported, when none scores above zero.
 */
dd_status_t dd_backends_pick_op(dd_backends_t *backends, dd_backend_op_t op,
                                dd_mem_type_t mem_type, size_t bytes,
                                dd_backend_ref_t *ref_p);

/** dd_backends_pick_op() for one of the public collectives. */
dd_status_t dd_backends_pick(dd_backends_t *backends, dd_coll_t coll,
                             dd_mem_type_t mem_type, size_t bytes,
                             dd_backend_ref_t *ref_p);

/** The same without reporting: whether one was found. */
int dd_backends_find(dd_backends_t *backends, dd_backend_op_t op,
                     dd_mem_type_t mem_type, size_t bytes,
                     dd_backend_ref_t *ref_p);

/** A collective started on the backend that scores best for it. */
typedef struct {
    dd_backend_ref_t ref;
    dd_backend_request_t *req;
} dd_backends_op_t;

/**
 * Starts coll with args on the best backend for bytes (the largest buffer)
 * of args->mem_type memory; never blocks on peers. On DD_OK, op must be
 * tested or waited for until a final status, or canceled.
 */
dd_status_t dd_backends_op_start(dd_backends_t *backends, dd_coll_t coll,
                                 const dd_backend_args_t *args, size_t bytes,
                                 dd_backends_op_t *op);

/** DD_INPROGRESS, or the final status, which releases the request. */
dd_status_t dd_backends_op_test(dd_backends_op_t *op);

/** Waits up to timeout_s; DD_ERR_TIMED_OUT (reported) cancels it. */
dd_status_t dd_backends_op_wait(dd_backends_op_t *op, double timeout_s);

/** Releases a request not yet released. */
void dd_backends_op_cancel(dd_backends_op_t *op);

/** "allreduce", ..., "send", "recv"; "?" when invalid. */
const char *dd_backend_op_name(dd_backend_op_t op);

#endif
