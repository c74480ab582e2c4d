/* What each backend library is told of the chosen interface
 * (src/backends/netdev.h): UCX's and NCCL's values with and without an RDMA
 * device, the list ddtopo shows, and what counts as a user's setting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/netdev.h"

#include <string.h>

static void test_ucx_value(void **state)
{
    char buf[DD_NETDEV_VALUE_MAX];

    dd_netdev_ucx("ib0", "mlx5_0", 1, buf, sizeof(buf));
    assert_string_equal(buf, "mlx5_0:1");
    dd_netdev_ucx("ens3f1np1", "mlx5_1", 2, buf, sizeof(buf));
    assert_string_equal(buf, "mlx5_1:2");
    dd_netdev_ucx("eth0", NULL, 0, buf, sizeof(buf));
    assert_string_equal(buf, "eth0");
}

static void test_nccl_values(void **state)
{
    char buf[DD_NETDEV_VALUE_MAX];

    dd_netdev_nccl_socket("ib3", buf, sizeof(buf));
    assert_string_equal(buf, "=ib3");
    assert_int_equal(dd_netdev_nccl_ib_hca("mlx5_3", 1, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "=mlx5_3:1");
    assert_int_equal(dd_netdev_nccl_ib_hca(NULL, 0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
}

/* NCCL's socket threads for a stream count: nothing for one stream, one
 * thread of one socket per stream otherwise, within NCCL's limits (16
 * threads, 64 sockets in all). */
static void test_nccl_streams(void **state)
{
    int threads = -1, socks = -1;

    assert_int_equal(dd_netdev_nccl_streams(1, &threads, &socks), 0);
    assert_int_equal(threads, -1);
    assert_int_equal(dd_netdev_nccl_streams(0, &threads, &socks), 0);
    assert_int_equal(dd_netdev_nccl_streams(2, &threads, &socks), 1);
    assert_int_equal(threads, 2);
    assert_int_equal(socks, 1);
    for (int n = 2; n <= 8; n++) {
        assert_int_equal(dd_netdev_nccl_streams(n, &threads, &socks), 1);
        assert_int_equal(threads * socks, n);
        assert_true(threads <= 16 && threads * socks <= 64);
    }
}

static void test_settings_rdma(void **state)
{
    dd_netdev_setting_t s[DD_NETDEV_MAX];

    assert_int_equal(dd_netdev_settings("ib0", "mlx5_0", 1, s), 4);
    assert_string_equal(s[0].name, "UCX_NET_DEVICES");
    assert_string_equal(s[0].value, "mlx5_0:1");
    assert_string_equal(s[1].name, "GLOO_SOCKET_IFNAME");
    assert_string_equal(s[1].value, "ib0");
    assert_string_equal(s[2].name, "NCCL_SOCKET_IFNAME");
    assert_string_equal(s[2].value, "=ib0");
    assert_string_equal(s[3].name, "NCCL_IB_HCA");
    assert_string_equal(s[3].value, "=mlx5_0:1");
}

static void test_settings_tcp(void **state)
{
    dd_netdev_setting_t s[DD_NETDEV_MAX];

    assert_int_equal(dd_netdev_settings("ens3f0", NULL, 0, s), 3);
    assert_string_equal(s[0].name, "UCX_NET_DEVICES");
    assert_string_equal(s[0].value, "ens3f0");
    assert_string_equal(s[1].value, "ens3f0");
    assert_string_equal(s[2].value, "=ens3f0");
    /* no choice: every library keeps its own default */
    assert_int_equal(dd_netdev_settings(NULL, NULL, 0, s), 0);
}

static void test_user_set(void **state)
{
    unsetenv("DDTEST_NETDEV");
    assert_false(dd_netdev_user_set("DDTEST_NETDEV"));
    setenv("DDTEST_NETDEV", "", 1);
    assert_false(dd_netdev_user_set("DDTEST_NETDEV")); /* empty is unset */
    setenv("DDTEST_NETDEV", "mine0", 1);
    assert_true(dd_netdev_user_set("DDTEST_NETDEV"));
    unsetenv("DDTEST_NETDEV");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ucx_value),
        cmocka_unit_test(test_nccl_values),
        cmocka_unit_test(test_nccl_streams),
        cmocka_unit_test(test_settings_rdma),
        cmocka_unit_test(test_settings_tcp),
        cmocka_unit_test(test_user_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
