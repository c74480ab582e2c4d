/*
 * The elastic job's generation: whether the launcher formed a later one
 * without this rank (generation.h).
 */
#include "boot/generation.h"
#include "core/log.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* The generation the launcher last formed: DIR/generation, or the rank's
 * own when the file is absent (a launcher other than ddrun). */
static int dd_boot_generation_now(const dd_boot_opts_t *opts)
{
    char path[PATH_MAX], buf[32] = "";
    int gen = opts->elastic_gen;

    snprintf(path, sizeof(path), "%s/generation", opts->elastic_dir);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(buf, sizeof(buf), f) != NULL) {
            gen = atoi(buf);
        }
        fclose(f);
    }
    return gen;
}

dd_status_t dd_boot_generation_check(const dd_boot_opts_t *opts, int rank)
{
    int now = dd_boot_generation_now(opts);
    if (now <= opts->elastic_gen) {
        return DD_OK;
    }
    return dd_error(DD_ERR_CANCELED, DD_SUBSYS_BOOT,
                    "rank %d of generation %d was dropped: the job went on "
                    "without it and is at generation %d; it leaves without "
                    "committing (started again, it would rejoin)",
                    rank, opts->elastic_gen, now);
}
