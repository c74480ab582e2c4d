/*
 * The routes: the pipes a layer's sync takes to the wire (route/), chained
 * once per layer at dd_model_commit by the runtime (sched/routes.c). What
 * every route is handed, and what they share: which message a job is (its
 * digest and its first layer's name) and the collectives they run. A pipe
 * of route/ takes its own state as its argument, never the runtime's, and
 * includes nothing of it.
 */
#ifndef DD_SCHED_ROUTE_ROUTE_H
#define DD_SCHED_ROUTE_ROUTE_H

#include "backends/registry.h"
#include "boot/job.h"
#include "device/loader.h"
#include "sched/engine/engine.h"

#include <stddef.h>
#include <stdint.h>

/** What every route is handed at commit; it outlives them. */
typedef struct {
    const dd_job_t *job;
    dd_backends_t *coll;              /* the workers' collectives */
    dd_backends_t *leaders;           /* DREAMDDP_ROUTE=hierarchical without
                                         aggregators, on a leader: the leaders' own */
    const dd_device_module_t *device; /* NULL: no device module */
    const dd_device_opts_t *device_opts;
    /* The layers' names by index (the parts' once cut), for the messages
     * that name a job's layer. */
    const char *const *names;
    size_t n_names;
} dd_route_env_t;

/** A collective the scheduler or the application asks for. */
typedef struct {
    dd_coll_t coll;
    dd_backend_args_t args; /* root as a worker index */
    int device;             /* device memory: its ordinal; -1: the device of the
                               process's device layers (0 without any) */
    /* An allreduce of terms each worker divided by at least the number of
     * workers, its own checked (the job's input_bad): no partial sum
     * overflows, so the sum is finite exactly when every worker's terms
     * were. divide_after: what the sum is divided by as it lands (0:
     * nothing), the landed average checked in that pass. */
    int divided;
    double divide_after;
} dd_sched_coll_t;

/** The name of layer index i ("?" when out of range). */
const char *dd_route_layer_name(const dd_route_env_t *env, size_t i);

/** The name of a job's first layer ("?" without one). */
const char *dd_route_job_layer(const dd_route_env_t *env,
                               const dd_sync_job_t *job);

/** FNV-1a over len bytes, from h. */
uint64_t dd_route_fnv(uint64_t h, const void *data, size_t len);

/** What a job averages and every layer it carries with its bytes in it,
 *  hashed from h: two messages of the same size that fuse other layers
 *  (ranks that marked in another order) or average another kind differ. */
uint64_t dd_route_job_digest(uint64_t h, const dd_sync_job_t *job);

/** Bytes of the largest buffer of a collective, which selection uses. */
size_t dd_route_coll_bytes(const dd_sched_coll_t *c, int n_workers);

#endif
