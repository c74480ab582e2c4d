/* dd_init and dd_finalize in one process: a single rank, bad DREAMDDP_* values,
 * roles, the file store, the printed configuration, and the backend
 * libraries' variables, which dd_init leaves alone. */
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

/* The backend libraries' own variables: dd_init leaves them as it found
 * them, since the modules hear of the interface through their services
 * struct. Only NCCL's module sets its two, having no other way in. */
static const char *const backend_vars[] = {"UCX_NET_DEVICES",
                                           "GLOO_SOCKET_IFNAME",
                                           "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"};
#define N_BACKEND_VARS (sizeof(backend_vars) / sizeof(backend_vars[0]))

static void unset_backend_vars(void)
{
    for (size_t i = 0; i < N_BACKEND_VARS; i++) {
        unsetenv(backend_vars[i]);
    }
}

/* Fails naming the first variable of backend_vars[from..] that is set. */
static void expect_unset_from(size_t from, const char *when)
{
    for (size_t i = from; i < N_BACKEND_VARS; i++) {
        const char *value = getenv(backend_vars[i]);
        if (value != NULL) {
            fail_msg("%s set %s=%s", when, backend_vars[i], value);
        }
    }
}

static void test_init_sets_no_backend_variable(void **state)
{
    dd_context_h ctx = NULL;

    unset_backend_vars();
    setenv("DREAMDDP_BACKENDS", "^nccl", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    expect_unset_from(0, "dd_init");
    assert_int_equal(dd_barrier(ctx), DD_OK);
    assert_int_equal(dd_finalize(ctx), DD_OK);
    expect_unset_from(0, "dd_finalize");

    /* what the user set stays as it was */
    setenv("UCX_NET_DEVICES", "all", 1);
    setenv("GLOO_SOCKET_IFNAME", "lo", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_string_equal(getenv("UCX_NET_DEVICES"), "all");
    assert_string_equal(getenv("GLOO_SOCKET_IFNAME"), "lo");
    expect_unset_from(2, "dd_init");
    assert_int_equal(dd_finalize(ctx), DD_OK);
    unset_backend_vars();
    unsetenv("DREAMDDP_BACKENDS");
}

/* Where a GPU is: the NCCL module sets NCCL_SOCKET_IFNAME (an exact match)
 * and, without RDMA, not NCCL_IB_HCA, and keeps a value the user set. */
static void test_nccl_sets_its_own(void **state)
{
    dd_context_h ctx = NULL;

    unset_backend_vars();
    setenv("DREAMDDP_BACKENDS", "nccl", 1);
    setenv("DREAMDDP_NET_IFNAME", "=lo", 1);
    dd_status_t status = dd_init(NULL, &ctx);
    if (status != DD_OK) {
        print_message("no NCCL here: %s\n", dd_last_error());
        unsetenv("DREAMDDP_BACKENDS");
        unsetenv("DREAMDDP_NET_IFNAME");
        skip();
    }
    assert_string_equal(getenv("NCCL_SOCKET_IFNAME"), "=lo");
    expect_unset_from(3, "the NCCL module");
    assert_null(getenv("UCX_NET_DEVICES"));
    assert_null(getenv("GLOO_SOCKET_IFNAME"));
    assert_int_equal(dd_finalize(ctx), DD_OK);

    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_string_equal(getenv("NCCL_SOCKET_IFNAME"), "lo");
    assert_int_equal(dd_finalize(ctx), DD_OK);
    unset_backend_vars();
    unsetenv("DREAMDDP_BACKENDS");
    unsetenv("DREAMDDP_NET_IFNAME");
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
        cmocka_unit_test_setup(test_init_sets_no_backend_variable, clean_env),
        cmocka_unit_test_setup(test_nccl_sets_its_own, clean_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
