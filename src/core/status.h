/*
 * Internal helpers around dd_status_t: names for logs and tests, and the
 * per-thread last error message behind dd_last_error().
 */
#ifndef DD_CORE_STATUS_H
#define DD_CORE_STATUS_H

#include <dreamddp.h>

/** The enum name of a status ("DD_ERR_TIMED_OUT"), for logs and tests. */
const char *dd_status_name(dd_status_t status);

/** Records message as this thread's last error (truncated to 1 KiB). */
void dd_last_error_set(const char *message);

/** Forgets this thread's last error. */
void dd_last_error_clear(void);

#endif
