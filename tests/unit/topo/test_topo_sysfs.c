/* Probing on fixture trees: sysfs readers (kind, state, speed, MTU, RDMA
 * device, locality), GPUs and CPU counts, the addrs file, and hwloc XML
 * loading, dumping and offline mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/log.h"
#include "topo/addrs.h"
#include "topo/sysfs.h"
#include "topo_fixture.h"

#include <sys/socket.h>
#include <unistd.h>

static void test_parse_rate(void **state)
{
    assert_int_equal(dd_topo_sysfs_parse_rate("200 Gb/sec (4X HDR)"), 200000);
    assert_int_equal(dd_topo_sysfs_parse_rate("2.5 Gb/sec (1X SDR)"), 2500);
    assert_int_equal(dd_topo_sysfs_parse_rate("fast"), 0);
    assert_int_equal(dd_topo_sysfs_parse_rate("100 Mb/sec"), 0);
}

static void test_parse_pci_path(void **state)
{
    dd_topo_loc_t loc;

    memset(&loc, 0, sizeof(loc));
    assert_int_equal(dd_topo_sysfs_parse_pci_path(
                         "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/"
                         "0000:42:0c.0/0000:46:00.0/net/ib3",
                         &loc),
                     0);
    assert_string_equal(loc.pci, "0000:46:00.0");
    assert_int_equal(loc.n_bridges, 3);
    assert_string_equal(loc.bridges[0], "0000:40:01.1");
    assert_string_equal(loc.bridges[2], "0000:42:0c.0");
    assert_int_equal(
        dd_topo_sysfs_parse_pci_path("/sys/devices/virtual/net/docker0", &loc),
        -1);
}

static void sysfs_nic(const char *machine, const char *name, dd_topo_nic_t *nic)
{
    memset(nic, 0, sizeof(*nic));
    snprintf(nic->name, sizeof(nic->name), "%s", name);
    dd_topo_sysfs_nic(topo_fixture(machine, NULL), nic);
}

static void test_nic_infiniband(void **state)
{
    dd_topo_nic_t nic;

    sysfs_nic("dgx", "ib3", &nic);
    assert_int_equal(nic.kind, DD_TOPO_KIND_INFINIBAND);
    assert_string_equal(nic.rdma, "mlx5_3");
    assert_int_equal(nic.rdma_port, 1);
    assert_int_equal(nic.speed_mbps, 200000);
    assert_true(nic.speed_known);
    assert_int_equal(nic.mtu, 4092);
    assert_string_equal(nic.state, "up");
    assert_string_equal(nic.loc.pci, "0000:46:00.0");
    assert_int_equal(nic.loc.numa, 1);
}

static void test_nic_kinds(void **state)
{
    dd_topo_nic_t nic;

    sysfs_nic("dgx", "docker0", &nic);
    assert_int_equal(nic.kind, DD_TOPO_KIND_VIRTUAL);
    assert_string_equal(nic.detail, "docker");
    assert_false(nic.speed_known);
    assert_int_equal(nic.speed_mbps, DD_TOPO_DEFAULT_SPEED_MBPS);
    assert_string_equal(nic.loc.pci, "");

    sysfs_nic("dgx", "enp225s0f0", &nic);
    assert_int_equal(nic.kind, DD_TOPO_KIND_ETHERNET);
    assert_int_equal(nic.speed_mbps, 25000);
    assert_int_equal(nic.loc.numa, 3);

    sysfs_nic("dgx", "enp225s0f1", &nic);
    assert_string_equal(nic.state, "down");

    sysfs_nic("laptop", "wlp2s0", &nic);
    assert_int_equal(nic.kind, DD_TOPO_KIND_WIFI);
    assert_false(nic.speed_known);

    sysfs_nic("cpu2s", "eno1", &nic);
    assert_int_equal(nic.kind, DD_TOPO_KIND_ETHERNET);
    assert_int_equal(nic.speed_mbps, 1000);
    assert_int_equal(nic.mtu, 1500);

    sysfs_nic("thismachine", "eth0", &nic);
    assert_int_equal(nic.kind, DD_TOPO_KIND_ETHERNET);
    assert_false(nic.speed_known); /* virtio reports -1 */
    assert_int_equal(nic.mtu, 1400);

    sysfs_nic("thismachine", "lo", &nic);
    assert_int_equal(nic.kind, DD_TOPO_KIND_LOOPBACK);
    assert_string_equal(nic.state, "unknown");
}

static void test_gpus_and_cpus(void **state)
{
    dd_topo_gpu_t *gpus;
    dd_topo_t topo;
    int n;

    assert_int_equal(dd_topo_sysfs_gpus(topo_fixture("dgx", NULL), &gpus, &n),
                     DD_OK);
    assert_int_equal(n, 8);
    assert_string_equal(gpus[5].loc.pci, "0000:84:00.0");
    assert_int_equal(gpus[5].loc.numa, 2);
    assert_int_equal(gpus[5].index, 5);
    assert_string_equal(gpus[0].model, "10de:20b0");
    free(gpus);
    assert_int_equal(dd_topo_sysfs_gpus(topo_fixture("cpu2s", NULL), &gpus, &n),
                     DD_OK);
    assert_int_equal(n, 0);
    free(gpus);

    memset(&topo, 0, sizeof(topo));
    dd_topo_sysfs_cpus(topo_fixture("dgx", NULL), &topo);
    assert_int_equal(topo.packages, 2);
    assert_int_equal(topo.cores, 16);
    assert_int_equal(topo.pus, 16);
    assert_int_equal(topo.numa_nodes, 4);
}

static void test_addr_parse_and_subnet(void **state)
{
    dd_topo_addr_t a;
    char subnet[64];

    assert_int_equal(dd_topo_addr_parse("10.1.2.3/16", &a), DD_OK);
    assert_int_equal(a.family, AF_INET);
    assert_int_equal(a.prefix, 16);
    assert_int_equal(dd_topo_addr_subnet(&a, subnet, sizeof(subnet)), 0);
    assert_string_equal(subnet, "10.1.0.0/16");
    assert_int_equal(dd_topo_addr_parse("fd00::2/64", &a), DD_OK);
    assert_int_equal(a.family, AF_INET6);
    assert_int_equal(dd_topo_addr_subnet(&a, subnet, sizeof(subnet)), 0);
    assert_string_equal(subnet, "fd00::/64");
    assert_int_equal(dd_topo_addr_parse("192.168.1.9/27", &a), DD_OK);
    dd_topo_addr_subnet(&a, subnet, sizeof(subnet));
    assert_string_equal(subnet, "192.168.1.0/27");
    assert_false(dd_topo_addr_is_local(&a));
    assert_int_equal(dd_topo_addr_parse("127.0.0.1", &a), DD_OK);
    assert_int_equal(a.prefix, 32);
    assert_true(dd_topo_addr_is_local(&a));
    assert_int_equal(dd_topo_addr_parse("fe80::1/64", &a), DD_OK);
    assert_true(dd_topo_addr_is_local(&a));
    assert_int_equal(dd_topo_addr_parse("10.0.0.1/33", &a),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_topo_addr_parse("eth0", &a), DD_ERR_INVALID_PARAM);
}

static void test_probe_sysfs_only(void **state)
{
    dd_topo_opts_t opts;
    dd_topo_t *topo;

    topo_opts(&opts, "laptop", 0, NULL);
    assert_int_equal(dd_topo_probe(&opts, &topo), DD_OK);
    assert_int_equal(topo->n_nics, 3);
    assert_string_equal(topo->nics[0].name, "enp0s31f6"); /* sorted */
    assert_false(topo->hwloc);
    assert_non_null(strstr(topo->source, "sysfs under"));
    const dd_topo_nic_t *wifi = topo_nic(topo, "wlp2s0");
    assert_int_equal(wifi->n_addrs, 2);
    assert_string_equal(wifi->addrs[0].text, "192.168.1.23");
    assert_int_equal(wifi->addrs[0].prefix, 24);
    assert_true(dd_topo_nic_usable(topo, wifi, NULL));
    const char *why = NULL;
    assert_false(dd_topo_nic_usable(topo, topo_nic(topo, "enp0s31f6"), &why));
    assert_string_equal(why, "link down");
    dd_topo_free(topo);
    topo_opts_release(&opts);
}

static void test_probe_hwloc_xml(void **state)
{
    dd_topo_opts_t opts;
    dd_topo_t *topo;

    if (!dd_topo_hwloc_built()) {
        skip();
    }
    topo_opts(&opts, "dgx", 1, NULL);
    assert_int_equal(dd_topo_probe(&opts, &topo), DD_OK);
    assert_true(topo->hwloc);
    assert_int_equal(topo->packages, 2);
    assert_int_equal(topo->numa_nodes, 4);
    assert_int_equal(topo->cores, 16);
    assert_int_equal(topo->n_gpus, 8);
    assert_string_equal(topo->gpus[3].loc.pci, "0000:44:00.0");
    assert_int_equal(topo->gpus[3].loc.numa, 1);
    assert_int_equal(topo->gpus[3].loc.n_bridges, 3);
    const dd_topo_nic_t *ib3 = topo_nic(topo, "ib3");
    assert_int_equal(ib3->loc.n_bridges, 3);
    assert_string_equal(ib3->loc.bridges[0], "0000:40:01.1");
    assert_int_equal(dd_topo_proximity(&ib3->loc, &topo->gpus[3].loc), 3);
    assert_int_equal(dd_topo_proximity(&ib3->loc, &topo->gpus[2].loc), 3);
    assert_int_equal(dd_topo_proximity(&ib3->loc, &topo->gpus[0].loc), 0);
    /* sysfs-only NICs (docker0, lo) are there too */
    assert_non_null(topo_nic(topo, "docker0"));
    assert_int_equal(topo->n_nics, 12);
    dd_topo_free(topo);
    topo_opts_release(&opts);
}

static void assert_same_loc(const dd_topo_loc_t *a, const dd_topo_loc_t *b)
{
    assert_string_equal(a->pci, b->pci);
    assert_int_equal(a->numa, b->numa);
    assert_int_equal(a->n_bridges, b->n_bridges);
    for (int i = 0; i < a->n_bridges; i++) {
        assert_string_equal(a->bridges[i], b->bridges[i]);
    }
}

/* Whether two probes of the dgx fixture agree on what hwloc gave. */
static void assert_same_hwloc(const dd_topo_t *a, const dd_topo_t *b)
{
    assert_int_equal(a->packages, b->packages);
    assert_int_equal(a->numa_nodes, b->numa_nodes);
    assert_int_equal(a->cores, b->cores);
    assert_int_equal(a->pus, b->pus);
    assert_int_equal(a->n_gpus, b->n_gpus);
    for (int g = 0; g < a->n_gpus; g++) {
        assert_string_equal(a->gpus[g].model, b->gpus[g].model);
        assert_same_loc(&a->gpus[g].loc, &b->gpus[g].loc);
    }
    assert_int_equal(a->n_nics, b->n_nics);
    for (int i = 0; i < a->n_nics; i++) {
        assert_string_equal(a->nics[i].name, b->nics[i].name);
        assert_same_loc(&a->nics[i].loc, &b->nics[i].loc);
        assert_int_equal(a->nics[i].speed_mbps, b->nics[i].speed_mbps);
        assert_string_equal(a->nics[i].speed_source, b->nics[i].speed_source);
    }
}

/* One rank of a host reads hwloc and writes what it said as text; another
 * reads the text instead of hwloc and ends with the same topology. A
 * text that does not read is refused, and hwloc used there instead. */
static void test_probe_shared(void **state)
{
    dd_topo_opts_t opts;
    dd_topo_t *direct, *shared, *fallback;
    dd_topo_share_t out = {.want_out = 1};

    if (!dd_topo_hwloc_built()) {
        skip();
    }
    topo_opts(&opts, "dgx", 1, NULL);
    assert_int_equal(dd_topo_probe_shared(&opts, &out, &direct), DD_OK);
    assert_non_null(out.out);
    assert_int_equal(out.out_len, strlen(out.out) + 1);
    assert_non_null(strstr(out.out, "dev rdma mlx5_3 - 15b3"));
    free(opts.topo_file);
    opts.topo_file = NULL;

    dd_topo_share_t in = {.in = out.out, .in_len = out.out_len};
    assert_int_equal(dd_topo_probe_shared(&opts, &in, &shared), DD_OK);
    assert_true(in.used_in);
    assert_true(shared->hwloc);
    assert_non_null(strstr(shared->source, "read by another rank"));
    assert_same_hwloc(direct, shared);
    assert_int_equal(topo_nic(shared, "ib3")->loc.n_bridges, 3);
    assert_string_equal(shared->gpus[3].loc.pci, "0000:44:00.0");

    /* Cut inside a device's line: refused, this machine probed. */
    dd_topo_share_t cut = {.in = out.out, .in_len = out.out_len / 2};
    assert_int_equal(dd_topo_probe_shared(&opts, &cut, &fallback), DD_OK);
    assert_false(cut.used_in);
    assert_null(strstr(fallback->source, "another rank"));
    dd_topo_free(fallback);

    dd_topo_hwfacts_t f;
    assert_int_equal(
        dd_topo_hwfacts_decode("dd-hwloc-facts 2\ncpus 1 1 1 1\n", 30, &f),
        DD_ERR_MESSAGE);
    const char *odd = "dd-hwloc-facts 1\ncpus 1 1 2 2\n"
                      "dev nic eth0 - 8086 1572 200 0 0 0000:01:00.0 -\n";
    assert_int_equal(dd_topo_hwfacts_decode(odd, strlen(odd) + 1, &f),
                     DD_ERR_MESSAGE);
    const char *one = "dd-hwloc-facts 1\ncpus 1 1 2 2\n"
                      "dev net eth0 - 8086 1572 200 7.88 0 0000:01:00.0 "
                      "0000:00:01.0\nend 1\n";
    assert_int_equal(dd_topo_hwfacts_decode(one, strlen(one) + 1, &f), DD_OK);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.cores, 2);
    assert_int_equal(f.devs[0].vendor, 0x8086);
    assert_string_equal(f.devs[0].loc.bridges[0], "0000:00:01.0");
    assert_string_equal(f.devs[0].rdma, "");
    dd_topo_hwfacts_release(&f);

    dd_topo_free(shared);
    dd_topo_free(direct);
    free(out.out);
    topo_opts_release(&opts);
}

static void test_probe_offline_and_dump(void **state)
{
    dd_topo_opts_t opts;
    dd_topo_t *topo, *again;
    char dump[] = "/tmp/dd_topo_dump_XXXXXX";

    if (!dd_topo_hwloc_built()) {
        skip();
    }
    memset(&opts, 0, sizeof(opts));
    opts.num_streams = -1;
    opts.topo_file = strdup(topo_fixture("dgx", "topo.xml"));
    assert_int_equal(dd_topo_probe(&opts, &topo), DD_OK);
    assert_true(topo->offline);
    assert_int_equal(topo->n_nics, 10); /* ib0..7 and two Ethernet ports */
    const dd_topo_nic_t *ib5 = topo_nic(topo, "ib5");
    assert_int_equal(ib5->kind, DD_TOPO_KIND_INFINIBAND);
    assert_string_equal(ib5->rdma, "mlx5_5");
    assert_int_equal(topo_nic(topo, "enp225s0f1")->kind, DD_TOPO_KIND_ETHERNET);
    assert_true(dd_topo_nic_usable(topo, ib5, NULL));
    dd_topo_free(topo);

    int fd = mkstemp(dump);
    assert_true(fd >= 0);
    close(fd);
    opts.dump_file = strdup(dump);
    assert_int_equal(dd_topo_probe(&opts, &topo), DD_OK);
    free(opts.topo_file);
    free(opts.dump_file);
    opts.dump_file = NULL;
    opts.topo_file = strdup(dump);
    assert_int_equal(dd_topo_probe(&opts, &again), DD_OK);
    assert_int_equal(again->n_gpus, 8);
    assert_int_equal(again->n_nics, topo->n_nics);
    dd_topo_free(again);
    dd_topo_free(topo);
    unlink(dump);
    topo_opts_release(&opts);
}

static void test_probe_errors(void **state)
{
    dd_topo_opts_t opts;
    dd_topo_t *topo = NULL;
    char dir[] = "/tmp/dd_topo_bad_XXXXXX", path[256];

    memset(&opts, 0, sizeof(opts));
    opts.sysfs_root = strdup("/nonexistent/dd");
    assert_int_equal(dd_topo_probe(&opts, &topo), DD_ERR_IO);
    assert_non_null(strstr(dd_last_error(), "/nonexistent/dd/sys/class/net"));
    assert_null(topo);

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path),
             "mkdir -p %s/sys/class/net/x0 && "
             "echo 'x0 not-an-address' > %s/addrs",
             dir, dir);
    assert_int_equal(system(path), 0);
    free(opts.sysfs_root);
    opts.sysfs_root = strdup(dir);
    assert_int_equal(dd_topo_probe(&opts, &topo), DD_ERR_IO);
    assert_non_null(strstr(dd_last_error(), "addrs:1"));
    snprintf(path, sizeof(path), "rm -rf %s", dir);
    assert_int_equal(system(path), 0);

    if (dd_topo_hwloc_built()) {
        free(opts.sysfs_root);
        opts.sysfs_root = NULL;
        opts.topo_file = strdup(topo_fixture("dgx", "addrs"));
        assert_int_equal(dd_topo_probe(&opts, &topo), DD_ERR_IO);
        assert_non_null(strstr(dd_last_error(), "DREAMDDP_TOPO_FILE"));
    }
    topo_opts_release(&opts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_rate),
        cmocka_unit_test(test_parse_pci_path),
        cmocka_unit_test(test_nic_infiniband),
        cmocka_unit_test(test_nic_kinds),
        cmocka_unit_test(test_gpus_and_cpus),
        cmocka_unit_test(test_addr_parse_and_subnet),
        cmocka_unit_test(test_probe_sysfs_only),
        cmocka_unit_test(test_probe_shared),
        cmocka_unit_test(test_probe_hwloc_xml),
        cmocka_unit_test(test_probe_offline_and_dump),
        cmocka_unit_test(test_probe_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
