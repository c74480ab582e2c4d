/* Slurm host lists: counts, the host at each place, zero padding, several
 * bracket groups, and lists that must be refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "boot/nodelist.h"

#include <string.h>

static void expect_hosts(const char *list, const char *const *hosts, int n)
{
    char host[64];
    int count = -1;

    assert_int_equal(dd_boot_nodelist_count(list, &count), DD_OK);
    assert_int_equal(count, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(dd_boot_nodelist_host(list, i, host, sizeof(host)),
                         DD_OK);
        assert_string_equal(host, hosts[i]);
    }
    assert_int_equal(dd_boot_nodelist_host(list, n, host, sizeof(host)),
                     DD_ERR_NOT_FOUND);
}

static void test_plain_names(void **state)
{
    const char *const one[] = {"node7"};
    expect_hosts("node7", one, 1);
    const char *const three[] = {"a", "b.example.org", "c-1"};
    expect_hosts("a,b.example.org,c-1", three, 3);
}

static void test_range_keeps_zero_padding(void **state)
{
    const char *const a[] = {"node01", "node02", "node03"};
    expect_hosts("node[01-03]", a, 3);
    const char *const b[] = {"n08", "n09", "n10"};
    expect_hosts("n[08-10]", b, 3);
    const char *const c[] = {"gpu9", "gpu10"};
    expect_hosts("gpu[9-10]", c, 2);
}

static void test_mixed_items(void **state)
{
    const char *const hosts[] = {"a1", "b2", "b3", "b4", "b7", "c"};
    expect_hosts("a1,b[2-4,7],c", hosts, 6);
}

static void test_suffix_after_group(void **state)
{
    const char *const hosts[] = {"r1-ib", "r2-ib"};
    expect_hosts("r[1-2]-ib", hosts, 2);
}

static void test_several_groups(void **state)
{
    const char *const hosts[] = {"rack1-n01", "rack1-n02", "rack2-n01",
                                 "rack2-n02"};
    expect_hosts("rack[1-2]-n[01-02]", hosts, 4);
}

static void test_large_list_is_not_expanded(void **state)
{
    char host[64];
    int count;
    assert_int_equal(dd_boot_nodelist_count("n[0-99999]", &count), DD_OK);
    assert_int_equal(count, 100000);
    assert_int_equal(
        dd_boot_nodelist_host("n[0-99999]", 99999, host, sizeof(host)), DD_OK);
    assert_string_equal(host, "n99999");
}

static void test_malformed(void **state)
{
    static const char *const bad[] = {
        "",        "node[01-03", "node01-03]", "node[03-01]",
        "a,,b",    "a,",         "node[]",     "node[1,]",
        "node[x]", "n[1-]",      "n[[1]]",     "n[1-2]]",
    };
    char host[64];
    int count;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(dd_boot_nodelist_count(bad[i], &count),
                         DD_ERR_INVALID_PARAM);
        assert_int_equal(dd_boot_nodelist_host(bad[i], 0, host, sizeof(host)),
                         DD_ERR_INVALID_PARAM);
    }
}

static void test_host_must_fit(void **state)
{
    char host[8] = "keep";
    assert_int_equal(dd_boot_nodelist_host("node[01-03]", 0, host, 6),
                     DD_ERR_INVALID_PARAM);
    assert_string_equal(host, "keep"); /* untouched on failure */
    assert_int_equal(dd_boot_nodelist_host("node[01-03]", 0, host, 7), DD_OK);
    assert_string_equal(host, "node01");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_names),
        cmocka_unit_test(test_range_keeps_zero_padding),
        cmocka_unit_test(test_mixed_items),
        cmocka_unit_test(test_suffix_after_group),
        cmocka_unit_test(test_several_groups),
        cmocka_unit_test(test_large_list_is_not_expanded),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_host_must_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
