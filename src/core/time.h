/*
 * Monotonic time in seconds, for deadlines and timers.
 */
#ifndef DD_CORE_TIME_H
#define DD_CORE_TIME_H

#include <time.h>

static inline double dd_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Milliseconds left until deadline, for poll(); 0 when past. */
static inline int dd_time_left_ms(double deadline)
{
    double left = deadline - dd_time_now();
    if (left <= 0) {
        return 0;
    }
    return left > 2e6 ? 2000000000 : (int)(left * 1e3) + 1;
}

#endif
