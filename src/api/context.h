/*
 * The context behind dd_context_h: configuration, place in the job, roles
 * and the rendezvous store, the backends and the scheduler. Only src/api
 * knows it; the layers below are handed the parts they need (the job,
 * their options, the backends) in structs of their own.
 */
#ifndef DD_API_CONTEXT_H
#define DD_API_CONTEXT_H

#include "agg/agg.h"
#include "backends/backend_config.h"
#include "backends/registry.h"
#include "boot/boot_config.h"
#include "boot/env.h"
#include "boot/job.h"
#include "boot/store.h"
#include "core/core_config.h"
#include "device/device_config.h"
#include "device/loader.h"
#include "sched/sched_config.h"
#include "topo/ifchoice.h"

struct dd_context {
    dd_core_opts_t core;
    dd_boot_opts_t boot;
    dd_boot_env_t env;
    dd_role_t role;
    dd_role_t *roles; /* per rank */
    int n_workers;
    dd_store_t *store;
    uint64_t token_hash;       /* of the job token, in every message */
    dd_store_server_t *server; /* rank 0 with the TCP store */
    dd_topo_choice_t net;      /* the interface every backend uses */
    dd_backend_opts_t backend;
    dd_backends_t *backends; /* loaded and initialized modules */
    /* With aggregators, the workers' own instances of the modules, for
     * collectives among workers; NULL otherwise (the job's serve). */
    dd_backends_t *worker_backends;
    int *worker_ranks; /* job rank of each worker, in order */
    /* DREAMDDP_ROUTE=hierarchical: per rank the lowest worker rank of its
     * host (-1 on a host without workers), the leaders (those lowest
     * ranks) in order, and the job as the aggregators see it then, whose
     * workers are the leaders. NULL and unused otherwise. */
    int *host_of;
    int *leader_ranks;
    dd_job_t leader_job;
    /* A leader's own instances of the modules, for the leaders' allreduce
     * when the job has no aggregators; NULL elsewhere. */
    dd_backends_t *leader_backends;
    dd_sched_opts_t sched_opts;
    dd_device_opts_t device_opts;
    dd_device_module_t *device; /* NULL: no device module (DREAMDDP_DEVICE) */
    /* What the layers below are handed, pointing into the fields above. */
    dd_job_t job;
    dd_backends_env_t backends_env;
    dd_agg_env_t agg_env;
    /* Set (atomically) once agg_env and the roles are filled: the watch
     * thread looks at the aggregators from then on. */
    int agg_env_ready;
    struct dd_sched *sched; /* layers, strategy, steps */
    dd_abort_t abort;       /* the job's fate, raised once (watch.c) */
    struct dd_watch *watch; /* NULL until the store is up */
    /* DREAMDDP_ELASTIC=yes: the state buffers and the commit being
     * written (elastic.c); NULL otherwise. */
    struct dd_elastic *elastic;
};

/** Index of a rank among the workers, or -1 when it is not a worker. */
int dd_context_worker_index(dd_context_h ctx, int rank);

/** The instances that run collectives among the workers. */
dd_backends_t *dd_context_coll_backends(dd_context_h ctx);

/** Whether ctx is an aggregator that the job dropped (declared lost under
 * DREAMDDP_AGG_LOSS=survive: frozen or cut off, then back), which the
 * others no longer wait for nor answer: it leaves without the finalize
 * barrier (aggregator.c). */
int dd_context_agg_dropped(dd_context_h ctx);

/** Every component's configuration table, in print order. */
extern const dd_config_table_t *const dd_config_tables[];
extern const size_t dd_config_n_tables;

#endif
