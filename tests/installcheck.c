/*
 * Built by `make installcheck` against the installed header and pkg-config
 * file: checks that the public API links and runs as a single rank.
 */
#include <dreamddp.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    dd_context_h ctx;
    char version[32];

    if (strcmp(dd_status_string(DD_ERR_TIMED_OUT), "timed out") != 0) {
        fprintf(stderr, "installcheck: wrong status string\n");
        return 1;
    }
    snprintf(version, sizeof(version), "%d.%d.%d", DD_VERSION_MAJOR,
             DD_VERSION_MINOR, DD_VERSION_PATCH);
    if (strcmp(dd_version_string(), version) != 0) {
        fprintf(stderr, "installcheck: library %s, header %s\n",
                dd_version_string(), version);
        return 1;
    }
    if (dd_init(NULL, &ctx) != DD_OK) {
        fprintf(stderr, "installcheck: dd_init: %s\n", dd_last_error());
        return 1;
    }
    int ok = dd_rank(ctx) == 0 && dd_world_size(ctx) == 1;
    if (dd_finalize(ctx) != DD_OK || !ok) {
        fprintf(stderr, "installcheck: unexpected rank or world size\n");
        return 1;
    }
    printf("installcheck: dreamddp %s works\n", dd_version_string());
    return 0;
}
