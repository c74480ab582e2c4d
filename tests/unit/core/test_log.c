/* Logging: prefix, levels, subsystem filter, %r, %h and %p in
 * DREAMDDP_LOG_FILE. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/dd-test-log-XXXXXX";

static char *slurp(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    buf[n] = '\0';
    if (f) {
        fclose(f);
    }
    return buf;
}

static int setup(void **state)
{
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    dd_log_close();
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd);
}

static void test_rank_in_file_name_and_prefix(void **state)
{
    char pattern[256], path[256];
    snprintf(pattern, sizeof(pattern), "%s/log.%%r.txt", dir);
    snprintf(path, sizeof(path), "%s/log.7.txt", dir);

    assert_int_equal(dd_log_configure(DD_LOG_INFO, ~0u, pattern, 7), DD_OK);
    dd_log_info(DD_SUBSYS_SCHED, "layer %s synced", "h.3.mlp");
    dd_log_debug(DD_SUBSYS_SCHED, "too detailed");
    dd_log_close();
    assert_string_equal(slurp(path),
                        "[rank 7] dreamddp INFO sched: layer h.3.mlp synced\n");
}

static void test_host_and_pid_in_file_name(void **state)
{
    char pattern[256], path[512], host[256] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(pattern, sizeof(pattern), "%s/%%h-%%p-r%%r.log", dir);
    snprintf(path, sizeof(path), "%s/%s-%ld-r3.log", dir, host, (long)getpid());

    assert_int_equal(dd_log_configure(DD_LOG_WARN, ~0u, pattern, 3), DD_OK);
    dd_log_warn(DD_SUBSYS_BOOT, "hello");
    dd_log_close();
    assert_string_equal(slurp(path), "[rank 3] dreamddp WARN boot: hello\n");
}

static void test_expand_keeps_other_percents(void **state)
{
    char out[64];
    dd_path_expand_rank(out, sizeof(out), "a%x-%r%", 12);
    assert_string_equal(out, "a%x-12%");
    /* Truncated to the buffer, never past it. */
    dd_path_expand_rank(out, 6, "run-%r", 123456);
    assert_string_equal(out, "run-1");
    dd_path_expand_rank(out, 4, "%p", 0);
    assert_int_equal(strlen(out), 3);
}

static void test_subsys_filter_keeps_errors(void **state)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/filter.txt", dir);

    unsigned only_boot = 1u << DD_SUBSYS_BOOT;
    assert_int_equal(dd_log_configure(DD_LOG_TRACE, only_boot, path, 0), DD_OK);
    dd_log_info(DD_SUBSYS_NET, "hidden");
    dd_log_trace(DD_SUBSYS_BOOT, "shown");
    dd_log_warn(DD_SUBSYS_NET, "warnings pass the filter");
    dd_error(DD_ERR_IO, DD_SUBSYS_NET, "errors pass the filter");
    dd_log_close();
    assert_string_equal(
        slurp(path), "[rank 0] dreamddp TRACE boot: shown\n"
                     "[rank 0] dreamddp WARN net: warnings pass the filter\n"
                     "[rank 0] dreamddp ERROR net: errors pass the filter\n");
}

static void test_unknown_rank(void **state)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/unknown.txt", dir);
    assert_int_equal(dd_log_configure(DD_LOG_WARN, ~0u, path, -1), DD_OK);
    dd_log_warn(DD_SUBSYS_CORE, "early");
    dd_log_close();
    assert_string_equal(slurp(path), "[rank ?] dreamddp WARN core: early\n");
}

static void test_unwritable_file(void **state)
{
    assert_int_equal(
        dd_log_configure(DD_LOG_WARN, ~0u, "/nonexistent-dir/x.log", 1),
        DD_ERR_IO);
    assert_non_null(strstr(dd_last_error(), "/nonexistent-dir/x.log"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_in_file_name_and_prefix),
        cmocka_unit_test(test_host_and_pid_in_file_name),
        cmocka_unit_test(test_expand_keeps_other_percents),
        cmocka_unit_test(test_subsys_filter_keeps_errors),
        cmocka_unit_test(test_unknown_rank),
        cmocka_unit_test(test_unwritable_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
