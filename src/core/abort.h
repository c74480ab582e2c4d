/*
 * A job's fate, shared by every thread of a rank: once a peer is known to
 * be lost (or the job must stop for another reason seen on one rank), the
 * reason is raised here, and every wait of the library (the progress
 * engine, the aggregators, the store) checks it and ends with the same
 * message instead of waiting out its own timeout. The first reason wins;
 * it is never cleared. Raising it does no I/O: src/api publishes it.
 */
#ifndef DD_CORE_ABORT_H
#define DD_CORE_ABORT_H

#include "core/log.h"

#include <dreamddp.h>

#include <pthread.h>

typedef struct {
    volatile int raised; /* read without the lock: once set, stays set */
    pthread_mutex_t lock;
    char why[768];
} dd_abort_t;

void dd_abort_init(dd_abort_t *a);
void dd_abort_destroy(dd_abort_t *a);

/** Whether a reason was raised; a is NULL where nothing is watched. */
static inline int dd_abort_raised(const dd_abort_t *a)
{
    return a != NULL && __atomic_load_n(&a->raised, __ATOMIC_ACQUIRE);
}

/** Raises why unless a reason is already raised; 1 when this one won. */
int dd_abort_raise(dd_abort_t *a, const char *why);

/**
 * The raised reason as this thread's error: DD_ERR_PEER_LOST with "job
 * aborted: <why>".
 */
dd_status_t dd_abort_error(dd_abort_t *a, dd_subsys_t subsys);

#endif
