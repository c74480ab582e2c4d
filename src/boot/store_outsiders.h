/*
 * The TCP store server's log of clients that have not logged in: refused
 * logins, login deadlines missed, connections closed to make room. Anyone
 * who can reach the port can cause these, so they are rate-limited: the
 * first few of each window are printed as they come, the rest counted and
 * summed up in one line when the window ends. Must not block or allocate.
 */
#ifndef DD_BOOT_STORE_OUTSIDERS_H
#define DD_BOOT_STORE_OUTSIDERS_H

#include "core/log.h"

#include <stddef.h>

/* Lines printed one by one per window, and the window's length. */
#define DD_STORE_OUTSIDER_BURST 5
#define DD_STORE_OUTSIDER_WINDOW_S 10.0

typedef struct {
    double window_start; /* 0: no window open */
    int printed;         /* lines printed in this window */
    long suppressed;     /* events counted but not printed in it */
    long total;          /* every event since the start */
    char last[256];      /* the last event not printed */
} dd_store_outsider_log_t;

/** Notes one event at level: printed if the window's burst allows it, else
 *  counted for the window's summary line. */
void dd_store_outsider_note(dd_store_outsider_log_t *log, double now,
                            dd_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/** Prints the summary of the window if it has ended (or force, when the
 *  server stops) and events were counted in it. */
void dd_store_outsider_flush(dd_store_outsider_log_t *log, double now,
                             int force);

#endif
