/* dd_init and dd_finalize in one process: a single rank, bad DREAMDDP_* values,
 * roles, the file store, and the printed configuration. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dreamddp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const touched[] = {
    "DREAMDDP_TIMEOUT_S", "DREAMDDP_STORE",      "DREAMDDP_ROLE",      "DREAMDDP_LOG_FILE",
    "DREAMDDP_RANK",      "DREAMDDP_WORLD_SIZE", "DREAMDDP_LOG_LEVEL", "DREAMDDP_NUM_AGGREGATORS",
    "RANK",         "WORLD_SIZE"};

static int clean_env(void **state)
{
    for (size_t i = 0; i < sizeof(touched) / sizeof(touched[0]); i++) {
        unsetenv(touched[i]);
    }
    setenv("DREAMDDP_LOG_FILE", "/dev/null", 1);
    return 0;
}

static void test_single_rank(void **state)
{
    dd_context_h ctx = NULL;
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_int_equal(dd_rank(ctx), 0);
    assert_int_equal(dd_world_size(ctx), 1);
    assert_int_equal(dd_local_rank(ctx), 0);
    assert_int_equal(dd_local_size(ctx), 1);
    assert_int_equal(dd_role(ctx), DD_ROLE_WORKER);
    assert_int_equal(dd_num_workers(ctx), 1);
    assert_int_equal(dd_barrier(ctx), DD_OK);
    assert_int_equal(dd_finalize(ctx), DD_OK);
}

static void test_bad_value_fails_init(void **state)
{
    dd_context_h ctx = NULL;
    setenv("DREAMDDP_TIMEOUT_S", "soon", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_ERR_INVALID_CONFIG);
    assert_null(ctx);
    assert_string_equal(dd_last_error(),
                        "invalid value DREAMDDP_TIMEOUT_S='soon': expected a "
                        "duration such as 30s, 500ms, 2m");
    unsetenv("DREAMDDP_TIMEOUT_S");

    setenv("DREAMDDP_LOG_LEVEL", "loud", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "DREAMDDP_LOG_LEVEL='loud'"));
    assert_non_null(strstr(dd_last_error(), "error, warn, info, debug, trace"));
    unsetenv("DREAMDDP_LOG_LEVEL");

    setenv("DREAMDDP_STORE", "redis://x", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "DREAMDDP_STORE='redis://x'"));
    unsetenv("DREAMDDP_STORE");
}

static void test_multi_rank_needs_master(void **state)
{
    dd_context_h ctx = NULL;
    setenv("DREAMDDP_RANK", "1", 1);
    setenv("DREAMDDP_WORLD_SIZE", "2", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "set DREAMDDP_MASTER_ADDR"));
}

static void test_role_override(void **state)
{
    dd_context_h ctx = NULL;
    dd_init_params_t params = {.field_mask = DD_INIT_FIELD_ROLE,
                               .role = DD_ROLE_AGGREGATOR};
    /* A single rank that is an aggregator leaves no worker. */
    assert_int_equal(dd_init(&params, &ctx), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "at least one worker"));
    params.role = (dd_role_t)7;
    assert_int_equal(dd_init(&params, &ctx), DD_ERR_INVALID_PARAM);
}

static void test_file_store(void **state)
{
    char dir[] = "/tmp/dd-test-init-XXXXXX", store[64], cmd[96];
    dd_context_h ctx = NULL;

    assert_non_null(mkdtemp(dir));
    snprintf(store, sizeof(store), "file:%s", dir);
    setenv("DREAMDDP_STORE", store, 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_int_equal(dd_barrier(ctx), DD_OK);
    assert_int_equal(dd_finalize(ctx), DD_OK);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_config_print(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    setenv("DREAMDDP_TIMEOUT_S", "45s", 1);
    assert_int_equal(dd_config_print(f, 0), DD_OK);
    fclose(f);
    const char *vars[] = {
        "DREAMDDP_LOG_LEVEL",   "DREAMDDP_LOG_SUBSYS",      "DREAMDDP_LOG_FILE",
        "DREAMDDP_RANK",        "DREAMDDP_WORLD_SIZE",      "DREAMDDP_LOCAL_RANK",
        "DREAMDDP_ROLE",        "DREAMDDP_NUM_AGGREGATORS", "DREAMDDP_MASTER_ADDR",
        "DREAMDDP_MASTER_PORT", "DREAMDDP_JOB_TOKEN",       "DREAMDDP_STORE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        assert_non_null(strstr(buf, vars[i]));
    }
    assert_non_null(strstr(buf, "DREAMDDP_TIMEOUT_S = 45s (set; default 300s)"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_single_rank, clean_env),
        cmocka_unit_test_setup(test_bad_value_fails_init, clean_env),
        cmocka_unit_test_setup(test_multi_rank_needs_master, clean_env),
        cmocka_unit_test_setup(test_role_override, clean_env),
        cmocka_unit_test_setup(test_file_store, clean_env),
        cmocka_unit_test_setup(test_config_print, clean_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
