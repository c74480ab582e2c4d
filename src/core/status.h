/*
 * Internal helpers around dd_status_t: the per-thread last error message
 * behind dd_last_error(). The names (dd_status_name) are public.
 */
#ifndef DD_CORE_STATUS_H
#define DD_CORE_STATUS_H

#include <dreamddp.h>

/** Records message as this thread's last error (truncated to 1 KiB). */
void dd_last_error_set(const char *message);

/** Forgets this thread's last error. */
void dd_last_error_clear(void);

#endif
