/*
 * Run under ddrun by test_store_mp.sh: every rank joins through dd_init and
 * exercises the job's store with real processes: counters, allgather,
 * barriers, and the role table. Exits non-zero on any wrong value.
 */
#include "api/context.h"
#include "boot/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "mp_store: rank %d: check failed: %s\n", rank,     \
                    #cond);                                                    \
            return 1;                                                          \
        }                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    int expected_aggregators = argc > 1 ? atoi(argv[1]) : 0;
    dd_context_h ctx;
    int rank = -1;

    if (dd_init(NULL, &ctx) != DD_OK) {
        fprintf(stderr, "mp_store: dd_init: %s\n", dd_last_error());
        return 1;
    }
    rank = dd_rank(ctx);
    int world = dd_world_size(ctx);
    dd_store_t *s = ctx->store;

    for (int round = 0; round < 20; round++) {
        int64_t total;
        char key[32];
        snprintf(key, sizeof(key), "count/%d", round);
        CHECK(dd_store_add(s, key, rank + 1, NULL) == DD_OK);
        CHECK(dd_store_barrier(s, "round") == DD_OK);
        CHECK(dd_store_add(s, key, 0, &total) == DD_OK);
        CHECK(total == (int64_t)world * (world + 1) / 2);

        int32_t mine = rank * 1000 + round, *all = calloc(world, 4);
        CHECK(all != NULL);
        CHECK(dd_store_allgather(s, "ids", &mine, 4, all) == DD_OK);
        for (int r = 0; r < world; r++) {
            CHECK(all[r] == r * 1000 + round);
        }
        free(all);
    }
    CHECK(dd_num_workers(ctx) == world - expected_aggregators);
    for (int r = 0; r < world; r++) {
        dd_role_t want = r >= world - expected_aggregators ? DD_ROLE_AGGREGATOR
                                                           : DD_ROLE_WORKER;
        CHECK(dd_rank_role(ctx, r) == want);
    }
    CHECK(dd_finalize(ctx) == DD_OK);
    if (rank == 0) {
        printf("mp_store: %d ranks agreed on 20 rounds\n", world);
    }
    return 0;
}
