/*
 * The TCP store server's rate-limited log of clients that have not logged
 * in (store_outsiders.h). 500 wrong-token logins wrote 500 warnings at
 * rank 0 (issue 58): a stranger could bury the job's own messages.
 */
#include "boot/store_outsiders.h"

#include <stdarg.h>
#include <stdio.h>

void dd_store_outsider_flush(dd_store_outsider_log_t *log, double now,
                             int force)
{
    if (log->window_start == 0 ||
        (!force && now - log->window_start < DD_STORE_OUTSIDER_WINDOW_S)) {
        return;
    }
    if (log->suppressed > 0) {
        dd_log_warn(DD_SUBSYS_NET,
                    "store: %ld more clients refused or dropped before they "
                    "logged in, over %.0f s (%ld in all; the last: %s)",
                    log->suppressed, now - log->window_start, log->total,
                    log->last);
    }
    log->window_start = 0;
    log->printed = 0;
    log->suppressed = 0;
}

void dd_store_outsider_note(dd_store_outsider_log_t *log, double now,
                            dd_log_level_t level, const char *fmt, ...)
{
    char text[sizeof(log->last)];
    va_list ap;

    dd_store_outsider_flush(log, now, 0);
    if (log->window_start == 0) {
        log->window_start = now;
    }
    log->total++;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (log->printed < DD_STORE_OUTSIDER_BURST) {
        log->printed++;
        dd_log(level, DD_SUBSYS_NET, "store: %s%s", text,
               log->printed == DD_STORE_OUTSIDER_BURST
                   ? " (more such lines are counted, not printed, for a "
                     "while)"
                   : "");
        return;
    }
    log->suppressed++;
    snprintf(log->last, sizeof(log->last), "%s", text);
}
