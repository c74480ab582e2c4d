/* What the multi-process test programs share: the failed-check report and
 * the start every rank makes. A program defines MP_NAME (its name, for the
 * messages) and keeps `rank` as a file-scope int before including this. */
#ifndef DD_TESTS_MP_H
#define DD_TESTS_MP_H

#include <dreamddp.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* CHECK(cond, fmt, ...): on a false cond, says why on stderr with the
 * program and rank, and returns 1 from the calling function. */
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, MP_NAME ": rank %d: ", rank);                      \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            return 1;                                                          \
        }                                                                      \
    } while (0)

/* dd_init, where usage_ok. An aggregator serves until the workers finalize
 * and the process exits with its status (0 when both serve and finalize
 * succeeded). Returns 0 on a worker, 2 on a usage or dd_init error. */
static inline int mp_start(int usage_ok, dd_context_h *ctx)
{
    if (!usage_ok || dd_init(NULL, ctx) != DD_OK) {
        fprintf(stderr, MP_NAME ": usage or dd_init: %s\n", dd_last_error());
        return 2;
    }
    if (dd_role(*ctx) == DD_ROLE_AGGREGATOR) {
        dd_status_t s = dd_aggregator_serve(*ctx);
        if (s != DD_OK) {
            fprintf(stderr, MP_NAME ": aggregator %d: %s\n", dd_rank(*ctx),
                    dd_last_error());
        }
        exit((dd_finalize(*ctx) != DD_OK) | (s != DD_OK));
    }
    return 0;
}

static inline void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif
