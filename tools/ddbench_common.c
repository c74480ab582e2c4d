/*
 * What ddbench's subcommands share (ddbench.h): the size and --streams
 * arguments and the stream count the ranks agreed on. ddbench.c only
 * dispatches to the subcommands; none of them calls into it.
 */
#include "ddbench.h"

#include "api/context.h"
#include "backends/registry.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ddbench_streams_set(const char *prog, const char *arg)
{
    int n;

    if (dd_arg_int(prog, "--streams", arg, 1, DD_BACKEND_MAX_STREAMS, &n)) {
        return -1;
    }
    /* Through the variable a user would set, so that the count goes the
     * way it goes in a job: the smallest any rank asks for. */
    char value[16];
    snprintf(value, sizeof(value), "%d", n);
    return setenv("DREAMDDP_NUM_STREAMS", value, 1) != 0 ? -1 : 0;
}

int ddbench_streams(dd_context_h ctx)
{
    return dd_backends_streams(ctx->backends);
}

/* "100000000", "64K", "16M" (KiB-based), "100MB" (decimal), "1GiB". */
int ddbench_parse_bytes(const char *s, size_t *bytes_p)
{
    static const struct {
        const char *suffix;
        double scale;
    } units[] = {{"", 1},     {"K", 1024},       {"KiB", 1024},
                 {"KB", 1e3}, {"M", 1048576},    {"MiB", 1048576},
                 {"MB", 1e6}, {"G", 1073741824}, {"GiB", 1073741824},
                 {"GB", 1e9}, {"B", 1}};
    char *end;

    /* Strictly: a plain non-negative decimal, finite, and a whole number of
     * bytes that fits (1e400 and 1e30 were taken, as inf and a wrap). */
    if (s[0] == '-' || !dd_arg_plain(s, 1)) {
        return -1;
    }
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || !isfinite(v)) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            double bytes = v * units[i].scale;
            if (bytes != floor(bytes) || bytes > (double)(SIZE_MAX / 2)) {
                return -1;
            }
            *bytes_p = (size_t)bytes;
            return 0;
        }
    }
    return -1;
}
