/*
 * Built by `make installcheck` against the installed header and pkg-config
 * file, and run as one rank and as a job through the installed ddrun:
 * checks that the public API links, that the library's version is the
 * header's, and, with several ranks, that an allreduce through an installed
 * backend module gives the right sum.
 */
#include <dreamddp.h>
#include <dreamddp/introspect.h>

#include <stdio.h>
#include <string.h>

static int installcheck_allreduce(dd_context_h ctx)
{
    int world = dd_world_size(ctx);
    float v[4];

    for (int i = 0; i < 4; i++) {
        v[i] = (float)(dd_rank(ctx) + 1 + i);
    }
    const char *backend =
        dd_backend_name(ctx, DD_COLL_ALLREDUCE, DD_MEM_HOST, sizeof(v));
    if (backend == NULL || dd_allreduce(ctx, v, v, 4, DD_DTYPE_F32,
                                        DD_REDUCE_SUM, DD_MEM_HOST) != DD_OK) {
        fprintf(stderr, "installcheck: allreduce: %s\n", dd_last_error());
        return 1;
    }
    for (int i = 0; i < 4; i++) {
        float want = (float)(world * (world + 1) / 2 + world * i);
        if (v[i] != want) {
            fprintf(stderr, "installcheck: element %d is %g, not %g\n", i,
                    (double)v[i], (double)want);
            return 1;
        }
    }
    printf("installcheck: rank %d of %d: allreduce through backend %s\n",
           dd_rank(ctx), world, backend);
    return 0;
}

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
    int failed = dd_rank(ctx) < 0 || dd_rank(ctx) >= dd_world_size(ctx);
    if (!failed && dd_world_size(ctx) > 1) {
        failed = installcheck_allreduce(ctx);
    }
    if (dd_finalize(ctx) != DD_OK || failed) {
        fprintf(stderr, "installcheck: rank %d of %d failed\n", dd_rank(ctx),
                dd_world_size(ctx));
        return 1;
    }
    printf("installcheck: dreamddp %s works\n", dd_version_string());
    return 0;
}
