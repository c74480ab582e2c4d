/*
 * The PMIx exchange of boot/pmix.h. The client is initialized for the
 * exchange only and finalized after it (PMIx counts its inits, so an
 * application's own MPI keeps its client); nothing else of the library
 * talks to PMIx. Which address rank 0 publishes is a guess that holds on
 * the clusters this serves (one routable IPv4 address a host): the
 * interface choice of src/topo comes later, over the store itself.
 */
#include "boot/pmix.h"
#include "core/log.h"

#include <stdio.h>
#include <string.h>

#ifdef HAVE_PMIX
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pmix.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

int dd_boot_pmix_built(void)
{
    return 1;
}

static int dd_boot_pmix_virtual(const char *name)
{
    static const char *const prefixes[] = {"docker", "virbr", "veth", "br-"};

    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) {
            return 1;
        }
    }
    return 0;
}

/* This host's first IPv4 address that is up and not loopback, virtual
 * bridges only when nothing else has one; "-" when none. */
static void dd_boot_pmix_ipv4(char *addr, size_t size)
{
    struct ifaddrs *ifs, *ifa;

    snprintf(addr, size, "-");
    if (getifaddrs(&ifs) != 0) {
        return;
    }
    for (int pass = 0; pass < 2 && strcmp(addr, "-") == 0; pass++) {
        for (ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
            if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != AF_INET ||
                !(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK) ||
                dd_boot_pmix_virtual(ifa->ifa_name) != pass) {
                continue;
            }
            const struct sockaddr_in *in = (void *)ifa->ifa_addr;
            if (inet_ntop(AF_INET, &in->sin_addr, addr, (socklen_t)size)) {
                break;
            }
        }
    }
    freeifaddrs(ifs);
}

static dd_status_t dd_boot_pmix_fail(const char *call, pmix_status_t rc)
{
    return dd_error(DD_ERR_UNREACHABLE, DD_SUBSYS_BOOT,
                    "%s failed: %s; the launcher's PMIx server (PMIX_SERVER_"
                    "URI*) cannot give rank 0's store address: set "
                    "DREAMDDP_MASTER_ADDR to rank 0's host instead",
                    call, PMIx_Error_string(rc));
}

static dd_status_t dd_boot_pmix_put(int port)
{
    char host[256] = "", ipv4[INET_ADDRSTRLEN], text[512];
    pmix_value_t value;
    pmix_status_t rc;

    gethostname(host, sizeof(host) - 1);
    dd_boot_pmix_ipv4(ipv4, sizeof(ipv4));
    snprintf(text, sizeof(text), "%s %s %d", ipv4, host[0] ? host : "-", port);
    PMIX_VALUE_LOAD(&value, text, PMIX_STRING);
    rc = PMIx_Put(PMIX_GLOBAL, DD_BOOT_PMIX_KEY, &value);
    PMIX_VALUE_DESTRUCT(&value);
    if (rc != PMIX_SUCCESS) {
        return dd_boot_pmix_fail("PMIx_Put", rc);
    }
    rc = PMIx_Commit();
    return rc == PMIX_SUCCESS ? DD_OK : dd_boot_pmix_fail("PMIx_Commit", rc);
}

/* Reads rank 0's record into addr and *port_p. */
static dd_status_t dd_boot_pmix_get(const pmix_proc_t *me, char *addr,
                                    size_t addr_size, int *port_p)
{
    pmix_proc_t root;
    pmix_value_t *value = NULL;
    char ipv4[64], host[256], mine[256] = "";
    int port;

    PMIX_LOAD_PROCID(&root, me->nspace, 0);
    pmix_status_t rc = PMIx_Get(&root, DD_BOOT_PMIX_KEY, NULL, 0, &value);
    if (rc != PMIX_SUCCESS) {
        return dd_boot_pmix_fail("PMIx_Get of rank 0's " DD_BOOT_PMIX_KEY, rc);
    }
    int ok =
        value->type == PMIX_STRING && value->data.string != NULL &&
        sscanf(value->data.string, "%63s %255s %d", ipv4, host, &port) == 3 &&
        port > 0 && port < 65536;
    PMIX_VALUE_RELEASE(value);
    if (!ok) {
        return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_BOOT,
                        "rank 0's PMIx key %s is not 'IPV4 HOST PORT' (another "
                        "dreamddp version?)",
                        DD_BOOT_PMIX_KEY);
    }
    gethostname(mine, sizeof(mine) - 1);
    const char *pick = strcmp(mine, host) == 0  ? "127.0.0.1"
                       : strcmp(ipv4, "-") != 0 ? ipv4
                                                : host;
    if (strlen(pick) >= addr_size) {
        return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_BOOT,
                        "rank 0's host name %.40s... is too long", pick);
    }
    snprintf(addr, addr_size, "%s", pick);
    *port_p = port;
    return DD_OK;
}

dd_status_t dd_boot_pmix_exchange(int rank, double timeout_s, char *addr,
                                  size_t addr_size, int *port_p)
{
    pmix_proc_t me, all;
    pmix_info_t info[2];
    bool collect = true;
    int timeout = timeout_s < 1     ? 1
                  : timeout_s > 1e6 ? 1000000
                                    : (int)timeout_s;
    dd_status_t status;

    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        return dd_boot_pmix_fail("PMIx_Init", rc);
    }
    if ((int)me.rank != rank) {
        status = dd_error(DD_ERR_MISMATCH, DD_SUBSYS_BOOT,
                          "rank %d is PMIx rank %u of namespace %s: the ranks "
                          "disagree, set DREAMDDP_MASTER_ADDR",
                          rank, me.rank, me.nspace);
        goto out_finalize;
    }
    if (rank == 0 && (status = dd_boot_pmix_put(*port_p)) != DD_OK) {
        goto out_finalize;
    }
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
    rc = PMIx_Fence(&all, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) {
        status = dd_boot_pmix_fail("PMIx_Fence", rc);
        goto out_finalize;
    }
    status = rank == 0 ? DD_OK : dd_boot_pmix_get(&me, addr, addr_size, port_p);
    if (rank == 0) {
        snprintf(addr, addr_size, "127.0.0.1");
    }
out_finalize:
    PMIx_Finalize(NULL, 0);
    return status;
}
#else
int dd_boot_pmix_built(void)
{
    return 0;
}

dd_status_t dd_boot_pmix_exchange(int rank, double timeout_s, char *addr,
                                  size_t addr_size, int *port_p)
{
    (void)rank;
    (void)timeout_s;
    (void)addr;
    (void)addr_size;
    (void)port_p;
    return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_BOOT,
                    "this dreamddp is built without PMIx (configure "
                    "--with-pmix)");
}
#endif
