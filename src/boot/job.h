/*
 * The job as the layers below src/api see it: this rank's place, the roles
 * of every rank, the workers in order, the bound of every wait and the
 * rendezvous store. src/api fills it once the roles are agreed and hands
 * it down; nothing below src/api sees the context itself.
 */
#ifndef DD_BOOT_JOB_H
#define DD_BOOT_JOB_H

#include "boot/store.h"

#include <dreamddp.h>

#include <stdint.h>

typedef struct {
    int rank;
    int world_size;
    int local_rank;
    int local_size;
    dd_role_t role;
    const dd_role_t *roles; /* per rank */
    int n_workers;
    const int *worker_ranks; /* job rank of each worker, in order */
    /* Per rank, the lowest rank of its host, where the job knows the hosts
     * (DREAMDDP_ROUTE=hierarchical); NULL otherwise. */
    const int *host_of;
    double timeout_s;    /* DREAMDDP_TIMEOUT_S */
    uint64_t token_hash; /* of the job token, in every message */
    dd_store_t *store;
    /* The job's fate (core/abort.h): every wait below src/api ends with
     * its reason once raised. NULL: not watched. */
    dd_abort_t *abort;
} dd_job_t;

/** Index of a rank among the workers, or -1 when it is not a worker. */
static inline int dd_job_worker_index(const dd_job_t *job, int rank)
{
    for (int i = 0; i < job->n_workers; i++) {
        if (job->worker_ranks[i] == rank) {
            return i;
        }
    }
    return -1;
}

/** Number of aggregator ranks (a view of the job with fewer workers, such
 *  as the hierarchical route's leaders, still counts only aggregators). */
static inline int dd_job_n_aggregators(const dd_job_t *job)
{
    int n = 0;
    for (int r = 0; r < job->world_size; r++) {
        n += job->roles[r] == DD_ROLE_AGGREGATOR;
    }
    return n;
}

#endif
