/* Cross-rank agreement (src/api/net_agree.c): record encoding, the pick
 * across hosts and its errors naming ranks, and dd_net_setup through a
 * one-rank file store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api/net_agree.h"
#include "core/log.h"
#include "topo_fixture.h"

#include <unistd.h>

/* A peer from "name subnet" pairs ("-" for none). */
static void peer(dd_net_peer_t *p, const char *host, int n,
                 const char *const *ifs)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->host, sizeof(p->host), "%s", host);
    for (int i = 0; i < n; i++) {
        dd_net_peer_if_t *pif = &p->ifs[p->n++];
        snprintf(pif->name, sizeof(pif->name), "%s", ifs[2 * i]);
        snprintf(pif->kind, sizeof(pif->kind), "Ethernet");
        if (strcmp(ifs[2 * i + 1], "-") != 0) {
            snprintf(pif->subnets[pif->n_subnets++], sizeof(pif->subnets[0]),
                     "%s", ifs[2 * i + 1]);
        }
    }
}

static void test_encode_decode(void **state)
{
    dd_topo_opts_t opts;
    dd_topo_t *topo;
    dd_topo_choice_t c;
    dd_net_peer_t p;
    char buf[DD_NET_RECORD_SIZE];

    topo_opts(&opts, "cpu2s", 0, NULL);
    assert_int_equal(dd_topo_probe(&opts, &topo), DD_OK);
    dd_topo_cand_t cands[3];
    assert_int_equal(dd_topo_choose(topo, &opts, -1, 0, 1, cands, &c), DD_OK);
    dd_net_peer_encode("node7|net:[1]", topo, cands, NULL, buf, sizeof(buf));
    assert_int_equal(dd_net_peer_decode(buf, sizeof(buf), &p), DD_OK);
    assert_string_equal(p.host, "node7|net:[1]");
    assert_int_equal(p.n, 3);
    assert_string_equal(p.ifs[0].name, "ens3f0");
    assert_int_equal(p.ifs[0].n_subnets, 2);
    assert_string_equal(p.ifs[0].subnets[0], "10.1.0.0/24");
    assert_string_equal(p.ifs[0].subnets[1], "fd10::/64");
    assert_string_equal(p.ifs[2].name, "lo");
    assert_int_equal(p.ifs[2].n_subnets, 0); /* loopback reaches no host */

    dd_net_peer_encode("node7", topo, cands, "no usable interface", buf,
                       sizeof(buf));
    assert_int_equal(dd_net_peer_decode(buf, sizeof(buf), &p), DD_OK);
    assert_string_equal(p.error, "no usable interface");
    assert_int_equal(p.n, 0);
    assert_int_equal(dd_net_peer_decode("if x y z\n", 9, &p),
                     DD_ERR_MESSAGE); /* no host line */
    dd_topo_free(topo);
    topo_opts_release(&opts);
}

static void test_pick_one_host(void **state)
{
    static const char *const a[] = {"eth0", "192.0.2.0/24", "lo", "-"};
    static const char *const b[] = {"lo", "-"};
    dd_net_peer_t peers[2];
    int pick = -1;

    peer(&peers[0], "h", 2, a);
    peer(&peers[1], "h", 1, b);
    assert_int_equal(dd_net_agree_pick(peers, 2, NULL, 0, &pick), DD_OK);
    assert_int_equal(pick, 0);
    assert_int_equal(dd_net_agree_pick(peers, 2, NULL, 1, &pick), DD_OK);
    assert_int_equal(pick, 0); /* lo reaches ranks on its own host */
}

static void test_pick_skips_unshared(void **state)
{
    static const char *const a[] = {
        "ib0", "10.100.0.0/16", "eth0", "192.168.1.0/24", "lo", "-"};
    static const char *const b[] = {"eth3", "192.168.1.0/24", "lo", "-"};
    dd_net_peer_t peers[3];
    int pick = -1;

    peer(&peers[0], "a", 3, a);
    peer(&peers[1], "a", 3, a);
    peer(&peers[2], "b", 2, b);
    assert_int_equal(dd_net_agree_pick(peers, 3, NULL, 0, &pick), DD_OK);
    assert_int_equal(pick, 1); /* eth0: ib0's subnet is not on host b */
    assert_int_equal(dd_net_agree_pick(peers, 3, NULL, 2, &pick), DD_OK);
    assert_int_equal(pick, 0);
}

static void test_pick_errors_name_ranks(void **state)
{
    static const char *const a[] = {"eth0", "10.0.0.0/24", "lo", "-"};
    static const char *const b[] = {"eth1", "10.9.0.0/24"};
    dd_net_peer_t peers[2];
    int pick = -1;

    peer(&peers[0], "a", 2, a);
    peer(&peers[1], "b", 1, b);
    assert_int_equal(dd_net_agree_pick(peers, 2, NULL, 0, &pick),
                     DD_ERR_NOT_FOUND);
    assert_int_equal(pick, -1);
    const char *msg = dd_last_error();
    assert_non_null(strstr(msg, "rank 0 on a has eth0 10.0.0.0/24, lo -"));
    assert_non_null(strstr(msg, "rank 1 on b has eth1 10.9.0.0/24"));

    snprintf(peers[1].error, sizeof(peers[1].error),
             "DREAMDDP_NET_IFNAME='=x' matches no interface");
    assert_int_equal(dd_net_agree_pick(peers, 2, NULL, 0, &pick),
                     DD_ERR_NOT_FOUND);
    assert_non_null(strstr(dd_last_error(), "rank 1 could not choose"));
    assert_non_null(strstr(dd_last_error(), "'=x'"));

    /* The different records only, first published by ranks 0 and 5: the
     * messages name those ranks. */
    const int ranks[] = {0, 5};
    assert_int_equal(dd_net_agree_pick(peers, 2, ranks, 0, &pick),
                     DD_ERR_NOT_FOUND);
    assert_non_null(strstr(dd_last_error(), "rank 5 could not choose"));
    peers[1].error[0] = '\0';
    assert_int_equal(dd_net_agree_pick(peers, 2, ranks, 1, &pick),
                     DD_ERR_NOT_FOUND);
    assert_non_null(strstr(dd_last_error(), "no network interface of rank 5"));
    assert_non_null(strstr(dd_last_error(), "rank 5 on b has eth1"));
}

static void test_setup_one_rank(void **state)
{
    char dir[] = "/tmp/dd_topo_store_XXXXXX", cmd[128];
    dd_store_t *store;
    dd_topo_choice_t c;

    assert_non_null(mkdtemp(dir));
    assert_int_equal(dd_store_file_open(dir, 42, 0, 1, 10.0, &store), DD_OK);
    setenv("DREAMDDP_SYSFS_ROOT", topo_fixture("cpu2s", NULL), 1);
    setenv("DREAMDDP_NUM_STREAMS", "3", 1);
    unsetenv("DREAMDDP_NET_IFNAME");
    unsetenv("DREAMDDP_TOPO_FILE");
    unsetenv("UCX_NET_DEVICES");
    unsetenv("GLOO_SOCKET_IFNAME");
    unsetenv("NCCL_SOCKET_IFNAME");
    assert_int_equal(dd_net_setup(store, 0, 1, &c), DD_OK);
    assert_string_equal(c.name, "ens3f0");
    assert_int_equal(c.streams, 3);
    /* the choice reaches backends through their services, not variables */
    assert_null(getenv("UCX_NET_DEVICES"));
    assert_null(getenv("GLOO_SOCKET_IFNAME"));
    assert_null(getenv("NCCL_SOCKET_IFNAME"));

    setenv("DREAMDDP_NET_IFNAME", "=nosuchif0", 1);
    assert_int_equal(dd_net_setup(store, 0, 1, &c), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "nosuchif0"));
    setenv("DREAMDDP_NET_IFNAME", "^", 1);
    assert_int_equal(dd_net_setup(store, 0, 1, &c), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "DREAMDDP_NET_IFNAME"));
    unsetenv("DREAMDDP_NET_IFNAME");
    unsetenv("DREAMDDP_NUM_STREAMS");
    unsetenv("DREAMDDP_SYSFS_ROOT");
    dd_store_close(store);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_decode),
        cmocka_unit_test(test_pick_one_host),
        cmocka_unit_test(test_pick_skips_unshared),
        cmocka_unit_test(test_pick_errors_name_ranks),
        cmocka_unit_test(test_setup_one_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
