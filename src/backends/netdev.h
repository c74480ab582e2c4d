/*
 * How each backend library is told the interface and the stream count the
 * topology chose: the value of that library's own setting, formatted from
 * the services struct's ifname, rdma, rdma_port and streams. Header-only,
 * because the modules (separate .so files that see nothing of the core) and
 * ddtopo (which shows what they are told) must format it with the same code. It
 * only formats and reads the environment; it never sets a variable.
 */
#ifndef DD_BACKENDS_NETDEV_H
#define DD_BACKENDS_NETDEV_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define DD_NETDEV_VALUE_MAX 80 /* a device name, ':', a port, '=' */
#define DD_NETDEV_MAX 4        /* settings dd_netdev_settings() writes */

/* One backend setting: the variable a user sets to override it, and the
 * value the module uses when the user has not. */
typedef struct {
    const char *name;
    char value[DD_NETDEV_VALUE_MAX];
} dd_netdev_setting_t;

/* Whether the user set the variable: set and not empty, so that an empty
 * value means "unset", as UCX, Gloo and NCCL read their own. */
static inline int dd_netdev_user_set(const char *name)
{
    const char *value = getenv(name);
    return value != NULL && value[0] != '\0';
}

/* UCX_NET_DEVICES, which the UCX module passes to ucp_config_modify() as
 * "NET_DEVICES": the RDMA device and port ("mlx5_0:1") when there is one,
 * else the interface ("eth0"). */
static inline void dd_netdev_ucx(const char *ifname, const char *rdma,
                                 int rdma_port, char *buf, size_t size)
{
    if (rdma != NULL) {
        snprintf(buf, size, "%s:%d", rdma, rdma_port);
    } else {
        snprintf(buf, size, "%s", ifname);
    }
}

/* NCCL_SOCKET_IFNAME: "=eth0", an exact match rather than a prefix. */
static inline void dd_netdev_nccl_socket(const char *ifname, char *buf,
                                         size_t size)
{
    snprintf(buf, size, "=%s", ifname);
}

/* NCCL_IB_HCA: "=mlx5_0:1", only when there is an RDMA device; returns 0
 * (and writes "") when there is none. */
static inline int dd_netdev_nccl_ib_hca(const char *rdma, int rdma_port,
                                        char *buf, size_t size)
{
    if (rdma == NULL) {
        snprintf(buf, size, "%s", "");
        return 0;
    }
    snprintf(buf, size, "=%s:%d", rdma, rdma_port);
    return 1;
}

/* Gloo's slices of a striped collective carry at least this many bytes
 * (gloo.cc says why); ddtopo shows it. */
#define DD_NETDEV_GLOO_STRIPE_BYTES ((size_t)1 << 20)

/*
 * NCCL's socket transport, for streams connections per peer: one helper
 * thread per socket (NCCL_SOCKET_NTHREADS=streams, 1 to 16) with one socket
 * each (NCCL_NSOCKS_PERTHREAD=1), as each Gloo stream has its own reading
 * thread; NCCL caps the product at 64, DD_BACKEND_MAX_STREAMS keeps it at 8.
 * Returns 0 for a single stream: NCCL's own default (1 and 1) stays, and
 * the module sets nothing.
 */
static inline int dd_netdev_nccl_streams(int streams, int *threads_p,
                                         int *socks_p)
{
    if (streams <= 1) {
        return 0;
    }
    *threads_p = streams < 16 ? streams : 16;
    *socks_p = 1;
    return 1;
}

/*
 * Every backend's setting for an interface, in the order ddtopo shows
 * them: UCX_NET_DEVICES, GLOO_SOCKET_IFNAME (Gloo's TCP device attribute
 * iface), NCCL_SOCKET_IFNAME and, with an RDMA device, NCCL_IB_HCA.
 * Returns how many it wrote: 0 when ifname is NULL (no choice: each
 * library keeps its own default).
 */
static inline int dd_netdev_settings(const char *ifname, const char *rdma,
                                     int rdma_port,
                                     dd_netdev_setting_t out[DD_NETDEV_MAX])
{
    int n = 0;

    if (ifname == NULL) {
        return 0;
    }
    out[n].name = "UCX_NET_DEVICES";
    dd_netdev_ucx(ifname, rdma, rdma_port, out[n].value, sizeof(out[n].value));
    n++;
    out[n].name = "GLOO_SOCKET_IFNAME";
    snprintf(out[n].value, sizeof(out[n].value), "%s", ifname);
    n++;
    out[n].name = "NCCL_SOCKET_IFNAME";
    dd_netdev_nccl_socket(ifname, out[n].value, sizeof(out[n].value));
    n++;
    out[n].name = "NCCL_IB_HCA";
    if (dd_netdev_nccl_ib_hca(rdma, rdma_port, out[n].value,
                              sizeof(out[n].value))) {
        n++;
    }
    return n;
}

#endif
