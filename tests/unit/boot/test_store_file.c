/* The file store (DREAMDDP_STORE=file:DIR): the shared store cases, and jobs
 * with different tokens kept apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/log.h"
#include "store_cases.h"

#include <unistd.h>

static char dir[64];

static dd_store_t *open_store(int rank, int world, double timeout_s)
{
    dd_store_t *s = NULL;
    if (dd_store_file_open(dir, 42, rank, world, timeout_s, &s) != DD_OK) {
        return NULL;
    }
    return s;
}

static int store_setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/dd-test-filestore-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int store_teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd);
}

static void test_tokens_keep_jobs_apart(void **state)
{
    dd_store_t *a = NULL, *b = NULL;
    int exists = 1;

    assert_int_equal(dd_store_file_open(dir, 1, 0, 1, 1.0, &a), DD_OK);
    assert_int_equal(dd_store_file_open(dir, 2, 0, 1, 1.0, &b), DD_OK);
    assert_int_equal(dd_store_set(a, "k", "v", 1), DD_OK);
    assert_int_equal(dd_store_check(b, "k", &exists), DD_OK);
    assert_false(exists);
    /* No server answers with a clock: dd_clock_agree pings rank 0. */
    double us = 0;
    assert_int_equal(dd_store_clock(a, &us), DD_ERR_UNSUPPORTED);
    dd_store_close(a);
    dd_store_close(b);
}

static void test_unwritable_dir(void **state)
{
    dd_store_t *s = NULL;
    assert_int_equal(dd_store_file_open("/proc/no-such-dir", 1, 0, 1, 1.0, &s),
                     DD_ERR_IO);
    assert_non_null(
        strstr(dd_last_error(), "DREAMDDP_STORE=file:/proc/no-such-dir"));
}

static int group_setup(void **state)
{
    return dd_log_configure(DD_LOG_ERROR, ~0u, "/dev/null", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        STORE_CASES,
        STORE_CASE(test_tokens_keep_jobs_apart),
        STORE_CASE(test_unwritable_dir),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
