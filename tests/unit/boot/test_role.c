/* Role resolution from DREAMDDP_ROLE, DREAMDDP_NUM_AGGREGATORS and dd_init's
 * override. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../fake_env.h"
#include "boot/env.h"
#include "core/log.h"

#include <string.h>

static dd_status_t resolve(const char **vars, int override, int rank, int world,
                           dd_role_t *role)
{
    dd_boot_opts_t opts;
    dd_status_t status =
        dd_config_load(&dd_boot_config_table, &opts, fake_getenv, vars);
    if (status == DD_OK) {
        status = dd_boot_role_resolve(&opts, override, rank, world, role);
        dd_config_release(&dd_boot_config_table, &opts);
    }
    return status;
}

static void test_default_worker(void **state)
{
    const char *vars[] = {NULL};
    dd_role_t role = DD_ROLE_AGGREGATOR;
    assert_int_equal(resolve(vars, -1, 0, 4, &role), DD_OK);
    assert_int_equal(role, DD_ROLE_WORKER);
}

static void test_dd_role(void **state)
{
    const char *vars[] = {"DREAMDDP_ROLE=aggregator", NULL};
    dd_role_t role = DD_ROLE_WORKER;
    assert_int_equal(resolve(vars, -1, 2, 4, &role), DD_OK);
    assert_int_equal(role, DD_ROLE_AGGREGATOR);
    assert_int_equal(resolve(vars, DD_ROLE_WORKER, 2, 4, &role), DD_OK);
    assert_int_equal(role, DD_ROLE_WORKER); /* the API wins */
    const char *bad[] = {"DREAMDDP_ROLE=server", NULL};
    assert_int_equal(resolve(bad, -1, 2, 4, &role), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "DREAMDDP_ROLE='server'"));
    assert_non_null(strstr(dd_last_error(), "worker, aggregator"));
}

static void test_last_k_ranks(void **state)
{
    const char *vars[] = {"DREAMDDP_NUM_AGGREGATORS=2", NULL};
    dd_role_t expected[] = {DD_ROLE_WORKER,     DD_ROLE_WORKER,
                            DD_ROLE_WORKER,     DD_ROLE_WORKER,
                            DD_ROLE_AGGREGATOR, DD_ROLE_AGGREGATOR};
    for (int r = 0; r < 6; r++) {
        dd_role_t role;
        assert_int_equal(resolve(vars, -1, r, 6, &role), DD_OK);
        assert_int_equal(role, expected[r]);
    }
}

static void test_conflicts(void **state)
{
    dd_role_t role;
    const char *a[] = {"DREAMDDP_NUM_AGGREGATORS=2", "DREAMDDP_ROLE=worker",
                       NULL};
    assert_int_equal(resolve(a, -1, 3, 4, &role), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(),
                           "DREAMDDP_ROLE=worker and "
                           "DREAMDDP_NUM_AGGREGATORS=2 disagree"));
    const char *b[] = {"DREAMDDP_NUM_AGGREGATORS=4", NULL};
    assert_int_equal(resolve(b, -1, 0, 4, &role), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "leaves no worker among 4"));
}

static int setup(void **state)
{
    return dd_log_configure(DD_LOG_ERROR, ~0u, "/dev/null", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_worker),
        cmocka_unit_test(test_dd_role),
        cmocka_unit_test(test_last_k_ranks),
        cmocka_unit_test(test_conflicts),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
