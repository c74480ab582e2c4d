/*
 * How modules report: format a message and hand it to the core through the
 * services struct, which adds the rank prefix and records dd_last_error().
 * The level is checked before formatting.
 */
#include "backends/coll/coll.h"

#include <stdarg.h>
#include <stdio.h>

void dd_coll_log(const dd_backend_services_t *services, int level,
                 const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    if (level > services->log_level) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    services->log(services->arg, level, msg);
}

dd_status_t dd_coll_error(const dd_backend_services_t *services,
                          dd_status_t status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return services->error(services->arg, status, msg);
}

const char *dd_coll_kind_name(dd_coll_t coll)
{
    static const char *const names[DD_COLL_LAST] = {
        "allreduce", "broadcast", "reduce_scatter", "allgather"};
    return (unsigned)coll < DD_COLL_LAST ? names[coll] : "?";
}

const char *dd_coll_dtype_name(dd_dtype_t dtype)
{
    static const char *const names[DD_DTYPE_LAST] = {
        "f32", "f64", "f16", "bf16", "i32", "i64", "u8"};
    return (unsigned)dtype < DD_DTYPE_LAST ? names[dtype] : "?";
}
