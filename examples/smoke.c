/*
 * smoke: the smallest multi-rank dreamddp program. Every rank joins the job,
 * says who it is, and meets the others at a barrier. Run it with
 * `ddrun -n 4 -- examples/smoke`.
 */
#include <dreamddp.h>

#include <stdio.h>

int main(void)
{
    dd_context_h ctx;
    dd_status_t status = dd_init(NULL, &ctx);

    if (status != DD_OK) {
        fprintf(stderr, "smoke: dd_init failed: %s: %s\n",
                dd_status_string(status), dd_last_error());
        return 1;
    }
    printf("rank %d of %d (local %d of %d), %s\n", dd_rank(ctx),
           dd_world_size(ctx), dd_local_rank(ctx), dd_local_size(ctx),
           dd_role(ctx) == DD_ROLE_WORKER ? "worker" : "aggregator");
    status = dd_barrier(ctx);
    if (status == DD_OK && dd_rank(ctx) == 0) {
        printf("smoke: %d ranks (%d workers) met at the barrier\n",
               dd_world_size(ctx), dd_num_workers(ctx));
    }
    dd_status_t fin = dd_finalize(ctx);
    if (status == DD_OK) {
        status = fin;
    }
    if (status != DD_OK) {
        fprintf(stderr, "smoke: %s: %s\n", dd_status_string(status),
                dd_last_error());
        return 1;
    }
    return 0;
}
