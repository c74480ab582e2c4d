/*
 * The job's fate (abort.h): a flag and the first reason. Must do no I/O.
 */
#include "core/abort.h"
#include "core/bell.h"

#include <stdio.h>

void dd_abort_init(dd_abort_t *a)
{
    a->raised = 0;
    a->why[0] = '\0';
    pthread_mutex_init(&a->lock, NULL);
}

void dd_abort_destroy(dd_abort_t *a)
{
    pthread_mutex_destroy(&a->lock);
}

int dd_abort_raise(dd_abort_t *a, const char *why)
{
    int won = 0;

    pthread_mutex_lock(&a->lock);
    if (!a->raised) {
        snprintf(a->why, sizeof(a->why), "%s", why);
        __atomic_store_n(&a->raised, 1, __ATOMIC_RELEASE);
        won = 1;
    }
    pthread_mutex_unlock(&a->lock);
    if (won) {
        dd_bell_ring(); /* a progress engine waiting for a ring stops */
    }
    return won;
}

dd_status_t dd_abort_error(dd_abort_t *a, dd_subsys_t subsys)
{
    char why[sizeof(a->why)];

    pthread_mutex_lock(&a->lock);
    snprintf(why, sizeof(why), "%s", a->why);
    pthread_mutex_unlock(&a->lock);
    return dd_error(DD_ERR_PEER_LOST, subsys, "job aborted: %s", why);
}
