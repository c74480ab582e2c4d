/* The TCP store's server and lost ranks: every rank whose connection
 * closes before its goodbye is marked gone, also after the job's abort
 * names an earlier one (issue 58, row 4: rank 0 waited the whole
 * DREAMDDP_TIMEOUT_S for a second killed rank to read the reason), and
 * dd_store_rank_lost says so, as it does of a declared-lost aggregator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "boot/store.h"
#include "core/status.h"
#include "core/time.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOKEN 0x10575ull
#define WORLD 5

static dd_store_t *open_rank(int port, int rank)
{
    dd_store_t *s = NULL;
    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, TOKEN, rank, WORLD, 10.0, &s),
        DD_OK);
    return s;
}

/* Whether rank is seen lost within limit_s (polled every 10 ms). */
static int lost_within(dd_store_t *s, int rank, double limit_s)
{
    double t0 = dd_time_now();
    int lost = 0;
    do {
        assert_int_equal(dd_store_rank_lost(s, rank, &lost), DD_OK);
        if (lost) {
            return 1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    } while (dd_time_now() - t0 < limit_s);
    return 0;
}

static void test_every_lost_rank_is_marked(void **state)
{
    (void)state;
    dd_store_server_t *server = NULL;
    dd_store_server_params_t params = {.addr = "127.0.0.1",
                                       .token_hash = TOKEN,
                                       .world_size = WORLD,
                                       .login_s = 1.0};
    assert_int_equal(dd_store_server_start(&params, &server), DD_OK);
    int port = dd_store_server_port(server);
    dd_store_t *s[WORLD];
    for (int r = 0; r < WORLD; r++) {
        s[r] = open_rank(port, r);
    }
    /* Rank 2 dies: the abort names it, and it is lost. */
    dd_store_close(s[2]);
    void *why = NULL;
    size_t len = 0;
    assert_int_equal(
        dd_store_get_within(s[0], DD_STORE_ABORT_KEY, 5.0, &why, &len), DD_OK);
    assert_non_null(strstr((char *)why, "rank 2 was lost"));
    free(why);
    assert_true(lost_within(s[0], 2, 5.0));
    /* Rank 1 leaves on purpose (its goodbye first), then rank 3 dies: the
     * abort still names rank 2, and rank 3 is lost all the same, rank 1
     * not. */
    assert_int_equal(dd_store_set(s[1], DD_STORE_BYE_KEY "1", "1", 1), DD_OK);
    dd_store_close(s[1]);
    dd_store_close(s[3]);
    assert_true(lost_within(s[0], 3, 5.0));
    int lost = 1;
    assert_int_equal(dd_store_rank_lost(s[0], 1, &lost), DD_OK);
    assert_int_equal(lost, 0);
    assert_int_equal(
        dd_store_get_within(s[0], DD_STORE_ABORT_KEY, 5.0, &why, &len), DD_OK);
    assert_non_null(strstr((char *)why, "rank 2 was lost"));
    free(why);
    /* Rank 4 is alive, until it is declared lost (a frozen aggregator). */
    assert_int_equal(dd_store_rank_lost(s[0], 4, &lost), DD_OK);
    assert_int_equal(lost, 0);
    assert_int_equal(dd_store_set(s[0], DD_STORE_LOST_KEY "4", "1", 1), DD_OK);
    assert_int_equal(dd_store_rank_lost(s[0], 4, &lost), DD_OK);
    assert_int_equal(lost, 1);
    dd_store_close(s[4]);
    dd_store_close(s[0]);
    dd_store_server_stop(server, 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_lost_rank_is_marked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
