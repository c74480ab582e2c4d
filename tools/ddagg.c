/*
 * ddagg: runs an aggregator rank. A CPU-only machine needs no user code: it
 * joins the job like any rank (ddrun, torchrun, mpirun or Slurm variables),
 * sums the chunks the workers push, and exits when every worker is done.
 *
 *   ddrun -n 6 --aggregators 2 -- sh -c \
 *       'if [ $DREAMDDP_RANK -ge 4 ]; then exec ddagg; else exec train; fi'
 */
#include <dreamddp.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    dd_init_params_t params = {.field_mask = DD_INIT_FIELD_ROLE,
                               .role = DD_ROLE_AGGREGATOR};
    dd_context_h ctx;

    if (argc > 1 &&
        (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0)) {
        printf("ddagg (dreamddp) %s\n", dd_version_string());
        return 0;
    }
    if (argc > 1) {
        int help = strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0;
        fprintf(help ? stdout : stderr,
                "usage: ddagg [--version]\n\n"
                "Serves as an aggregator rank of a dreamddp job: sums the "
                "chunks the\nworkers push and sends the averages back, "
                "until every worker is done.\nThe rank comes from the "
                "launcher's variables, as for any rank. It exits 0\nwhen "
                "every worker is done, and when the job dropped it (frozen "
                "past\nDREAMDDP_AGG_LOST_AFTER_S, then woken: the workers "
                "went on without it).\n");
        return help ? 0 : 2;
    }
    if (dd_init(&params, &ctx) != DD_OK) {
        fprintf(stderr, "ddagg: %s\n", dd_last_error());
        return 1;
    }
    dd_status_t status = dd_aggregator_serve(ctx);
    /* Dropped (declared lost, then woken): the job went on without this
     * rank, which is no failure of the job's; the library said so in one
     * line, and the launcher must not stop the workers for it. */
    int dropped = status == DD_ERR_CANCELED;
    if (status != DD_OK && !dropped) {
        fprintf(stderr, "ddagg: rank %d: %s\n", dd_rank(ctx), dd_last_error());
    }
    dd_status_t fin = dd_finalize(ctx);
    return (status != DD_OK && !dropped) || fin != DD_OK;
}
