/* The interface choice on fixture machines: default order, ties shared out
 * so that local rank r of a DGX-like node takes the NIC nearest GPU r,
 * DREAMDDP_NET_IFNAME, its errors, CUDA_VISIBLE_DEVICES, the stream table and
 * what the backends are told. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/netdev.h"
#include "core/log.h"
#include "topo/probe.h"
#include "topo_fixture.h"

/* Probes machine and chooses for a local rank; returns the status. */
static dd_status_t choose(const char *machine, int with_xml, const char *ifname,
                          int local_rank, int local_size,
                          const char *cuda_visible, dd_topo_choice_t *choice)
{
    dd_topo_opts_t opts;
    dd_topo_t *topo;

    topo_opts(&opts, machine, with_xml, ifname);
    assert_int_equal(dd_topo_probe(&opts, &topo), DD_OK);
    dd_topo_cand_t *cands = calloc((size_t)topo->n_nics, sizeof(*cands));
    int gpu = dd_topo_rank_gpu(topo, local_rank, cuda_visible);
    memset(choice, 0, sizeof(*choice));
    dd_status_t status =
        dd_topo_choose(topo, &opts, gpu, local_rank, local_size, cands, choice);
    free(cands);
    dd_topo_free(topo);
    topo_opts_release(&opts);
    return status;
}

static void test_dgx_rank_takes_nic_nearest_its_gpu(void **state)
{
    dd_topo_choice_t c;
    char want[16];

    if (!dd_topo_hwloc_built()) {
        skip();
    }
    for (int r = 0; r < 8; r++) {
        assert_int_equal(choose("dgx", 1, NULL, r, 8, NULL, &c), DD_OK);
        snprintf(want, sizeof(want), "ib%d", r);
        assert_string_equal(c.name, want);
        assert_int_equal(c.gpu, r);
        assert_int_equal(c.kind, DD_TOPO_KIND_INFINIBAND);
        assert_int_equal(c.speed_mbps, 200000);
        assert_int_equal(c.streams, 2);
        assert_non_null(strstr(c.reason, "same PCI switch as GPU"));
    }
}

static void test_dgx_sysfs_only_uses_numa(void **state)
{
    dd_topo_choice_t c;
    char want[16];

    for (int r = 0; r < 8; r++) {
        assert_int_equal(choose("dgx", 0, NULL, r, 8, NULL, &c), DD_OK);
        snprintf(want, sizeof(want), "ib%d", r);
        assert_string_equal(c.name, want);
        assert_non_null(strstr(c.reason, "same NUMA node as GPU"));
    }
}

static void test_cuda_visible_devices(void **state)
{
    dd_topo_choice_t c;

    assert_int_equal(choose("dgx", 0, NULL, 1, 2, "4,5", &c), DD_OK);
    assert_int_equal(c.gpu, 5);
    assert_string_equal(c.name, "ib5");
    /* a UUID cannot be mapped without CUDA: every GPU stays visible */
    assert_int_equal(choose("dgx", 0, NULL, 2, 8, "GPU-1234", &c), DD_OK);
    assert_int_equal(c.gpu, 2);
    /* an empty list hides every GPU */
    assert_int_equal(choose("dgx", 0, NULL, 2, 8, "", &c), DD_OK);
    assert_int_equal(c.gpu, -1);
}

static void test_dgx_filters(void **state)
{
    dd_topo_choice_t c;

    assert_int_equal(choose("dgx", 0, "^ib", 0, 1, NULL, &c), DD_OK);
    assert_string_equal(c.name, "enp225s0f0");
    assert_non_null(strstr(c.reason, "DREAMDDP_NET_IFNAME=^ib allows it"));
    assert_int_equal(choose("dgx", 0, "docker,lo", 0, 1, NULL, &c), DD_OK);
    assert_string_equal(c.name, "docker0"); /* virtual before loopback */
    assert_int_equal(choose("dgx", 0, "=enp225s0f1", 0, 1, NULL, &c),
                     DD_ERR_NO_DEVICE);
    assert_non_null(strstr(dd_last_error(), "enp225s0f1 (link down)"));
}

static void test_cpu_node_fastest_ethernet(void **state)
{
    dd_topo_choice_t c;

    assert_int_equal(choose("cpu2s", 0, NULL, 0, 1, NULL, &c), DD_OK);
    assert_string_equal(c.name, "ens3f0");
    assert_int_equal(c.speed_mbps, 25000);
    assert_int_equal(c.gpu, -1);
    assert_int_equal(c.streams, 4);
    /* four local ranks share the one 25 Gb/s NIC */
    assert_int_equal(choose("cpu2s", 0, NULL, 2, 4, NULL, &c), DD_OK);
    assert_string_equal(c.name, "ens3f0");
    assert_int_equal(c.streams, 1);
    assert_int_equal(choose("cpu2s", 0, "eno", 0, 1, NULL, &c), DD_OK);
    assert_string_equal(c.name, "eno1");
    assert_int_equal(c.streams, 1);
}

static void test_impossible_ifname(void **state)
{
    dd_topo_choice_t c;

    assert_int_equal(choose("cpu2s", 0, "=nosuchif0", 0, 1, NULL, &c),
                     DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "nosuchif0"));
    assert_non_null(strstr(dd_last_error(), "eno1, ens3f0, lo"));
    assert_int_equal(choose("cpu2s", 0, "=ens3", 0, 1, NULL, &c),
                     DD_ERR_INVALID_CONFIG); /* exact: no prefix match */
}

static void test_laptop_and_thismachine(void **state)
{
    dd_topo_choice_t c;

    assert_int_equal(choose("laptop", 0, NULL, 0, 1, NULL, &c), DD_OK);
    assert_string_equal(c.name, "wlp2s0");
    assert_int_equal(c.kind, DD_TOPO_KIND_WIFI);
    assert_false(c.speed_known);
    assert_int_equal(choose("thismachine", 0, NULL, 0, 1, NULL, &c), DD_OK);
    assert_string_equal(c.name, "eth0");
    assert_int_equal(choose("thismachine", 0, "lo", 0, 1, NULL, &c), DD_OK);
    assert_string_equal(c.name, "lo");
    assert_int_equal(c.streams, 1);
    assert_int_equal(choose("thismachine", 0, "ifb", 0, 1, NULL, &c),
                     DD_ERR_NO_DEVICE);
    assert_non_null(strstr(dd_last_error(), "ifb0 (link down)"));
}

static void test_reasons_per_interface(void **state)
{
    dd_topo_opts_t opts;
    dd_topo_t *topo;
    dd_topo_choice_t c;

    topo_opts(&opts, "cpu2s", 0, NULL);
    assert_int_equal(dd_topo_probe(&opts, &topo), DD_OK);
    dd_topo_cand_t cands[3];
    assert_int_equal(dd_topo_choose(topo, &opts, -1, 0, 1, cands, &c), DD_OK);
    assert_string_equal(topo->nics[cands[0].nic].name, "ens3f0");
    assert_int_equal(cands[0].order, 1);
    assert_string_equal(topo->nics[cands[1].nic].name, "eno1");
    assert_string_equal(cands[1].why, "slower than ens3f0 (1000 < 25000 Mb/s)");
    assert_string_equal(topo->nics[cands[2].nic].name, "lo");
    assert_string_equal(cands[2].why, "loopback ranks after Ethernet");
    dd_topo_free(topo);
    topo_opts_release(&opts);
}

static void test_streams_table(void **state)
{
    assert_int_equal(dd_topo_streams_per_nic(DD_TOPO_KIND_INFINIBAND, 200000),
                     2);
    assert_int_equal(dd_topo_streams_per_nic(DD_TOPO_KIND_LOOPBACK, 10000), 1);
    assert_int_equal(dd_topo_streams_per_nic(DD_TOPO_KIND_ETHERNET, 1000), 1);
    assert_int_equal(dd_topo_streams_per_nic(DD_TOPO_KIND_ETHERNET, 10000), 2);
    assert_int_equal(dd_topo_streams_per_nic(DD_TOPO_KIND_ETHERNET, 25000), 4);
    assert_int_equal(dd_topo_streams_per_nic(DD_TOPO_KIND_ETHERNET, 100000), 8);

    dd_topo_opts_t opts;
    dd_topo_t *topo;
    topo_opts(&opts, "cpu2s", 0, NULL);
    assert_int_equal(dd_topo_probe(&opts, &topo), DD_OK);
    const dd_topo_nic_t *fast = topo_nic(topo, "ens3f0");
    assert_int_equal(dd_topo_streams(topo, fast, 1, -1), 4);
    assert_int_equal(dd_topo_streams(topo, fast, 2, -1), 2);
    assert_int_equal(dd_topo_streams(topo, fast, 2, 6), 6); /* override */
    dd_topo_free(topo);
    topo_opts_release(&opts);
}

/* What the modules are told of a choice: the RDMA device only on
 * InfiniBand and RoCE, formatted as ddtopo shows it. */
static void test_backend_settings(void **state)
{
    dd_topo_choice_t c;
    dd_netdev_setting_t s[DD_NETDEV_MAX];

    assert_int_equal(choose("dgx", 0, NULL, 3, 8, NULL, &c), DD_OK);
    assert_string_equal(dd_topo_choice_rdma(&c), "mlx5_3");
    assert_int_equal(
        dd_netdev_settings(c.name, dd_topo_choice_rdma(&c), c.rdma_port, s), 4);
    assert_string_equal(s[0].name, "UCX_NET_DEVICES");
    assert_string_equal(s[0].value, "mlx5_3:1");
    assert_string_equal(s[1].name, "GLOO_SOCKET_IFNAME");
    assert_string_equal(s[1].value, "ib3");
    assert_string_equal(s[2].name, "NCCL_SOCKET_IFNAME");
    assert_string_equal(s[2].value, "=ib3");
    assert_string_equal(s[3].name, "NCCL_IB_HCA");
    assert_string_equal(s[3].value, "=mlx5_3:1");

    assert_int_equal(choose("cpu2s", 0, NULL, 0, 1, NULL, &c), DD_OK);
    assert_null(dd_topo_choice_rdma(&c));
    assert_int_equal(
        dd_netdev_settings(c.name, dd_topo_choice_rdma(&c), c.rdma_port, s), 3);
    assert_string_equal(s[0].value, "ens3f0");

    /* a soft RDMA device on a virtual interface stays on TCP */
    snprintf(c.rdma, sizeof(c.rdma), "rxe0");
    c.rdma_port = 1;
    c.kind = DD_TOPO_KIND_VIRTUAL;
    assert_null(dd_topo_choice_rdma(&c));
    c.kind = DD_TOPO_KIND_ROCE;
    assert_string_equal(dd_topo_choice_rdma(&c), "rxe0");
    c.name[0] = '\0';
    assert_null(dd_topo_choice_rdma(&c));
}

static void test_iflist_text(void **state)
{
    const char *cases[] = {"eth,ib", "^docker,lo", "=eth0", "^=lo"};
    char buf[64];

    for (int i = 0; i < 4; i++) {
        dd_iflist_t list;
        assert_int_equal(dd_config_parse_iflist(cases[i], &list), DD_OK);
        dd_topo_iflist_text(&list, buf, sizeof(buf));
        assert_string_equal(buf, cases[i]);
        dd_iflist_release(&list);
    }
}

/* An offline NIC's speed from its family and PCIe link, bounded by the
 * link, named as an estimate; measured speeds and radios stay. */
static void estimate(dd_topo_kind_t kind, int known, unsigned vendor,
                     unsigned device, float link, int mbps, const char *from)
{
    dd_topo_nic_t nic = {.kind = kind,
                         .speed_known = known,
                         .speed_mbps =
                             known ? 25000 : DD_TOPO_DEFAULT_SPEED_MBPS};

    dd_topo_nic_estimate(&nic, vendor, device, link);
    assert_int_equal(nic.speed_mbps, mbps);
    assert_string_equal(nic.speed_source, from);
}

static void test_speed_estimates(void **state)
{
    (void)state;
    estimate(DD_TOPO_KIND_ETHERNET, 0, 0x15b3, 0x1017, 15.753846f, 100000,
             "ConnectX-5 (15b3:1017) on PCIe x16 Gen3");
    estimate(DD_TOPO_KIND_INFINIBAND, 0, 0x15b3, 0x1021, 31.507692f, 200000,
             "ConnectX-7 (15b3:1021) on PCIe x16 Gen4");
    estimate(DD_TOPO_KIND_ETHERNET, 0, 0x8086, 0x1593, 0, 25000,
             "E810-C (8086:1593)");
    estimate(DD_TOPO_KIND_ETHERNET, 0, 0x14e4, 0x165f, 0.5f, 1000,
             "BCM5720 (14e4:165f) on PCIe x1 Gen2");
    estimate(DD_TOPO_KIND_ETHERNET, 0, 0x1dd8, 0x1002, 7.876923f, 50000,
             "PCIe x8 Gen3");
    estimate(DD_TOPO_KIND_ETHERNET, 0, 0x1dd8, 0x1002, 0,
             DD_TOPO_DEFAULT_SPEED_MBPS, "");
    estimate(DD_TOPO_KIND_ETHERNET, 1, 0x15b3, 0x1017, 15.753846f, 25000, "");
    estimate(DD_TOPO_KIND_WIFI, 0, 0x8086, 0x2723, 0.5f,
             DD_TOPO_DEFAULT_SPEED_MBPS, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx_rank_takes_nic_nearest_its_gpu),
        cmocka_unit_test(test_dgx_sysfs_only_uses_numa),
        cmocka_unit_test(test_cuda_visible_devices),
        cmocka_unit_test(test_dgx_filters),
        cmocka_unit_test(test_cpu_node_fastest_ethernet),
        cmocka_unit_test(test_impossible_ifname),
        cmocka_unit_test(test_laptop_and_thismachine),
        cmocka_unit_test(test_reasons_per_interface),
        cmocka_unit_test(test_streams_table),
        cmocka_unit_test(test_backend_settings),
        cmocka_unit_test(test_iflist_text),
        cmocka_unit_test(test_speed_estimates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
