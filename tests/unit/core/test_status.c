/* Status strings and names, and the last-error channel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/registry.h"
#include "core/log.h"
#include "core/status.h"

#include <stdio.h>
#include <string.h>

static void test_values(void **state)
{
    assert_int_equal(DD_OK, 0);
    assert_int_equal(DD_INPROGRESS, 1);
    assert_true(DD_ERR_NO_MEMORY < 0);
    assert_true(DD_ERR_INTERNAL < 0);
}

static void test_strings(void **state)
{
    assert_string_equal(dd_status_string(DD_OK), "success");
    assert_string_equal(dd_status_string(DD_ERR_TIMED_OUT), "timed out");
    assert_string_equal(dd_status_string(DD_ERR_INVALID_CONFIG),
                        "invalid configuration variable");
    assert_string_equal(dd_status_string((dd_status_t)-999), "unknown status");
    assert_string_equal(dd_status_name(DD_ERR_REFUSED), "DD_ERR_REFUSED");
    assert_string_equal(dd_status_name((dd_status_t)42), "DD_STATUS_UNKNOWN");
}

/* Every status in the list has a distinct, non-empty description. */
static void test_strings_distinct(void **state)
{
#define ITEM(name, value, desc) name,
    const dd_status_t all[] = {DD_STATUS_LIST(ITEM)};
#undef ITEM
    size_t n = sizeof(all) / sizeof(all[0]);
    for (size_t i = 0; i < n; i++) {
        assert_true(strlen(dd_status_string(all[i])) > 0);
        for (size_t j = i + 1; j < n; j++) {
            assert_int_not_equal(all[i], all[j]);
            assert_string_not_equal(dd_status_string(all[i]),
                                    dd_status_string(all[j]));
        }
    }
}

/* The public enum names the collectives only; the point-to-point operations
 * are the backends' and carry on after them. */
static void test_coll_names(void **state)
{
    assert_int_equal(DD_COLL_LAST, 4);
    assert_string_equal(dd_coll_name(DD_COLL_ALLREDUCE), "allreduce");
    assert_string_equal(dd_coll_name(DD_COLL_ALLGATHER), "allgather");
    assert_string_equal(dd_coll_name(DD_COLL_LAST), "?");
    assert_int_equal(DD_BACKEND_OP_ALLGATHER, DD_COLL_ALLGATHER);
    assert_int_equal(DD_BACKEND_OP_SEND, DD_COLL_LAST);
    assert_string_equal(dd_backend_op_name(DD_BACKEND_OP_REDUCE_SCATTER),
                        "reduce_scatter");
    assert_string_equal(dd_backend_op_name(DD_BACKEND_OP_SEND), "send");
    assert_string_equal(dd_backend_op_name(DD_BACKEND_OP_RECV), "recv");
    assert_string_equal(dd_backend_op_name(DD_BACKEND_OP_LAST), "?");
}

/* The version is written once (dreamddp/version.h); the library's string
 * is those macros, joined with dots. */
static void test_version(void **state)
{
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", DD_VERSION_MAJOR, DD_VERSION_MINOR,
             DD_VERSION_PATCH);
    assert_string_equal(dd_version_string(), want);
}

static void test_last_error(void **state)
{
    dd_log_configure(DD_LOG_ERROR, ~0u, "/dev/null", 3);
    dd_last_error_clear();
    assert_string_equal(dd_last_error(), "");
    dd_status_t s = dd_error(DD_ERR_PEER_LOST, DD_SUBSYS_NET,
                             "peer %d of layer %s is gone", 5, "h.3");
    assert_int_equal(s, DD_ERR_PEER_LOST);
    assert_string_equal(dd_last_error(), "peer 5 of layer h.3 is gone");
    dd_log_close();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_strings_distinct),
        cmocka_unit_test(test_coll_names),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_last_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
