/*
 * Status strings and the per-thread last error message.
 * Must not log: the logger calls into it.
 */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>

static __thread char dd_last_error_buf[1024];

const char *dd_status_string(dd_status_t status)
{
    switch (status) {
#define DD_STATUS_CASE_(name, value, desc)                                     \
    case name:                                                                 \
        return desc;
        DD_STATUS_LIST(DD_STATUS_CASE_)
#undef DD_STATUS_CASE_
    }
    return "unknown status";
}

const char *dd_status_name(dd_status_t status)
{
    switch (status) {
#define DD_STATUS_CASE_(name, value, desc)                                     \
    case name:                                                                 \
        return #name;
        DD_STATUS_LIST(DD_STATUS_CASE_)
#undef DD_STATUS_CASE_
    }
    return "DD_STATUS_UNKNOWN";
}

const char *dd_last_error(void)
{
    return dd_last_error_buf;
}

void dd_last_error_set(const char *message)
{
    snprintf(dd_last_error_buf, sizeof(dd_last_error_buf), "%s", message);
}

void dd_last_error_clear(void)
{
    dd_last_error_buf[0] = '\0';
}
