/*
 * The doorbell (bell.h): a count under a mutex, and a condition on the
 * monotonic clock.
 */
#include "core/bell.h"

#include <pthread.h>
#include <time.h>

static pthread_mutex_t dd_bell_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dd_bell_cond;
static pthread_once_t dd_bell_once = PTHREAD_ONCE_INIT;
static uint64_t dd_bell_rings;

static void dd_bell_init(void)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&dd_bell_cond, &attr);
    pthread_condattr_destroy(&attr);
}

uint64_t dd_bell_count(void)
{
    return __atomic_load_n(&dd_bell_rings, __ATOMIC_ACQUIRE);
}

void dd_bell_ring(void)
{
    pthread_once(&dd_bell_once, dd_bell_init);
    pthread_mutex_lock(&dd_bell_lock);
    __atomic_store_n(&dd_bell_rings, dd_bell_rings + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&dd_bell_cond);
    pthread_mutex_unlock(&dd_bell_lock);
}

int dd_bell_wait(uint64_t seen, double timeout_s)
{
    struct timespec ts;
    int rang;

    pthread_once(&dd_bell_once, dd_bell_init);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)(timeout_s * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    pthread_mutex_lock(&dd_bell_lock);
    while (dd_bell_rings == seen &&
           pthread_cond_timedwait(&dd_bell_cond, &dd_bell_lock, &ts) == 0) {
    }
    rang = dd_bell_rings != seen;
    pthread_mutex_unlock(&dd_bell_lock);
    return rang;
}
