/* The TCP store: operations among threads of one process, token refusal,
 * world-size and duplicate-rank refusal, timeouts, and a lost master. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/log.h"
#include "store_cases.h"

#define TOKEN 0x5eedull

static pthread_mutex_t server_lock = PTHREAD_MUTEX_INITIALIZER;
static dd_store_server_t *server;

/* The first rank to open starts this case's server. */
static int server_port(int world)
{
    pthread_mutex_lock(&server_lock);
    if (server == NULL) {
        assert_int_equal(dd_store_server_start(0, TOKEN, world, &server),
                         DD_OK);
    }
    int port = dd_store_server_port(server);
    pthread_mutex_unlock(&server_lock);
    return port;
}

static dd_store_t *open_store(int rank, int world, double timeout_s)
{
    dd_store_t *s = NULL;
    int port = server_port(world);
    if (dd_store_tcp_connect("127.0.0.1", port, TOKEN, rank, world, timeout_s,
                             &s) != DD_OK) {
        return NULL;
    }
    return s;
}

static int store_setup(void **state)
{
    return 0;
}

static int store_teardown(void **state)
{
    if (server != NULL) {
        dd_store_server_stop(server, 1.0);
        server = NULL;
    }
    return 0;
}

static void test_wrong_token_refused(void **state)
{
    dd_store_t *s = NULL;
    int port = server_port(2);
    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, TOKEN + 1, 1, 2, 2.0, &s),
        DD_ERR_REFUSED);
    assert_null(s);
    assert_non_null(strstr(dd_last_error(), "refused rank 1"));
    assert_non_null(strstr(dd_last_error(), "job token differs"));
}

static void test_world_mismatch_and_duplicate_rank(void **state)
{
    dd_store_t *a = NULL, *b = NULL;
    int port = server_port(2);

    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, TOKEN, 1, 3, 2.0, &b),
        DD_ERR_MISMATCH);
    assert_non_null(strstr(dd_last_error(),
                           "rank 1 says the world size is 3 but rank 0 "
                           "says 2"));
    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, TOKEN, 1, 2, 2.0, &a), DD_OK);
    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, TOKEN, 1, 2, 2.0, &b),
        DD_ERR_MISMATCH);
    assert_non_null(strstr(dd_last_error(), "rank 1 has already joined"));
    dd_store_close(a);
}

static void test_unreachable_master_names_address(void **state)
{
    dd_store_t *s = NULL;
    double t0 = dd_time_now();
    /* Port 9 (discard) has no listener here. */
    assert_int_equal(dd_store_tcp_connect("127.0.0.1", 9, TOKEN, 1, 2, 0.5, &s),
                     DD_ERR_UNREACHABLE);
    assert_true(dd_time_now() - t0 < 3.0);
    assert_non_null(strstr(dd_last_error(), "127.0.0.1:9"));
}

static void test_lost_master(void **state)
{
    dd_store_t *s = open_store(1, 2, 30.0);
    void *v;
    size_t len;

    assert_non_null(s);
    store_teardown(state); /* the master goes away while rank 1 waits */
    double t0 = dd_time_now();
    assert_int_equal(dd_store_get(s, "k", &v, &len), DD_ERR_PEER_LOST);
    assert_true(dd_time_now() - t0 < 10.0);
    assert_non_null(strstr(dd_last_error(), "closed the connection"));
    dd_store_close(s);
}

static int group_setup(void **state)
{
    return dd_log_configure(DD_LOG_ERROR, ~0u, "/dev/null", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        STORE_CASES,
        STORE_CASE(test_wrong_token_refused),
        STORE_CASE(test_world_mismatch_and_duplicate_rank),
        STORE_CASE(test_unreachable_master_names_address),
        STORE_CASE(test_lost_master),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
