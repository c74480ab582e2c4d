/*
 * The machine as the topology module sees it: CPUs, NICs and GPUs with their
 * PCI path and NUMA node, and the interface each rank should use. Probing
 * fills a dd_topo_t once; choosing never touches the system again, so the
 * same choice can be computed from a fixture tree or another machine's hwloc
 * XML. Nothing here calls a backend: backends read the choice.
 */
#ifndef DD_TOPO_TOPO_H
#define DD_TOPO_TOPO_H

#include "core/config.h"
#include "topo/topo_config.h"

#include <stddef.h>

#define DD_TOPO_NAME_MAX 64
#define DD_TOPO_PCI_MAX 16  /* "0000:07:00.0" */
#define DD_TOPO_DEPTH_MAX 8 /* PCI bridges above a device */
#define DD_TOPO_ADDRS_MAX 8
#define DD_TOPO_ADDR_MAX 48 /* an IPv6 address in text */

/*
 * The speed assumed for an interface whose link speed the system does not
 * report (virtual NICs, Wi-Fi, loopback, an offline XML): 10 Gb/s. Every
 * place that prints such a speed says it was assumed.
 */
#define DD_TOPO_DEFAULT_SPEED_MBPS 10000

/* Kinds in the default order of preference, best first. */
typedef enum {
    DD_TOPO_KIND_INFINIBAND = 0,
    DD_TOPO_KIND_ROCE,
    DD_TOPO_KIND_ETHERNET,
    DD_TOPO_KIND_WIFI,
    DD_TOPO_KIND_OTHER,
    DD_TOPO_KIND_VIRTUAL,
    DD_TOPO_KIND_LOOPBACK,
    DD_TOPO_KIND_LAST
} dd_topo_kind_t;

/* Where a device sits: its PCI bus id, the PCI bridges above it (outermost
 * first, host bridges left out) and its NUMA node. */
typedef struct {
    char pci[DD_TOPO_PCI_MAX]; /* "" when not a PCI device or unknown */
    char bridges[DD_TOPO_DEPTH_MAX][DD_TOPO_PCI_MAX];
    int n_bridges;
    int numa; /* -1: unknown */
} dd_topo_loc_t;

typedef struct {
    int family; /* AF_INET or AF_INET6 */
    char text[DD_TOPO_ADDR_MAX];
    int prefix; /* netmask length */
} dd_topo_addr_t;

typedef struct {
    char name[DD_TOPO_NAME_MAX]; /* the netdev: "ib0", "eth0" */
    char rdma[DD_TOPO_NAME_MAX]; /* its RDMA device ("mlx5_0"), or "" */
    int rdma_port;               /* 1-based, 0 when no RDMA device */
    dd_topo_kind_t kind;
    char detail[DD_TOPO_NAME_MAX]; /* why virtual: "docker", "bridge" ... */
    char state[16];                /* operstate: "up", "down", "unknown" */
    int speed_mbps;                /* DD_TOPO_DEFAULT_SPEED_MBPS if unknown */
    int speed_known;
    /* When not known but estimated (nicspeed.c): from what, "PCIe x16
     * Gen3" or the NIC family; "" when assumed. */
    char speed_source[96];
    int mtu; /* 0: unknown */
    dd_topo_loc_t loc;
    int n_addrs;
    dd_topo_addr_t addrs[DD_TOPO_ADDRS_MAX];
} dd_topo_nic_t;

typedef struct {
    int index;                    /* in PCI bus order, the CUDA_DEVICE_ORDER
                                     PCI_BUS_ID numbering */
    char model[DD_TOPO_NAME_MAX]; /* "10de:20b0" */
    dd_topo_loc_t loc;
} dd_topo_gpu_t;

typedef struct {
    char source[320]; /* how it was probed, for people */
    int hwloc;        /* PCI paths and NUMA nodes came from hwloc */
    int offline;      /* an XML without sysfs: states, addresses unknown */
    int packages, numa_nodes, cores, pus; /* 0: unknown */
    int n_nics;
    dd_topo_nic_t *nics; /* sorted by name */
    int n_gpus;
    dd_topo_gpu_t *gpus; /* by index */
} dd_topo_t;

/**
 * Probes this machine (or opts->sysfs_root, opts->topo_file): CPUs, NICs
 * with kind, state, speed, MTU, addresses and locality, and NVIDIA GPUs.
 * Writes this machine's hwloc XML to opts->dump_file when set.
 * @return DD_OK; DD_ERR_IO naming a file that cannot be read or written;
 *         DD_ERR_NO_MEMORY.
 */
dd_status_t dd_topo_probe(const dd_topo_opts_t *opts, dd_topo_t **topo_p);

/*
 * What hwloc says of this machine passed between the ranks of one host, so
 * that one of them starts hwloc and reads the PCI tree and the others read
 * its text (128 ranks each doing so cost seconds of a 2-core host's
 * startup): in, when set, is used instead of hwloc here (a text that is
 * not hwfacts.c's is logged and hwloc used here instead; used_in says
 * whether it was used); want_out asks for the text of what hwloc said, in
 * out (malloc'd, NUL-terminated, out_len bytes with the NUL; NULL when
 * hwloc was not used). sysfs and the addresses are read here either way.
 */
typedef struct {
    const char *in;
    size_t in_len;
    int used_in;
    int want_out;
    char *out;
    size_t out_len;
} dd_topo_share_t;

/* dd_topo_probe, with hwloc's part shared as share says (NULL: as
 * dd_topo_probe). */
dd_status_t dd_topo_probe_shared(const dd_topo_opts_t *opts,
                                 dd_topo_share_t *share, dd_topo_t **topo_p);

void dd_topo_free(dd_topo_t *topo);

/* "InfiniBand", "RoCE", "Ethernet", "Wi-Fi", "other", "virtual",
 * "loopback". */
const char *dd_topo_kind_name(dd_topo_kind_t kind);

/* Whether a NIC can carry traffic now: not down, and (unless offline) with
 * an address. why (may be NULL) says why not. */
int dd_topo_nic_usable(const dd_topo_t *topo, const dd_topo_nic_t *nic,
                       const char **why_p);

/* How close two devices are: 1 + the number of PCI bridges they share
 * (2 or more: the same PCI switch, deeper is nearer), else 1 when they share
 * a NUMA node, else 0. */
int dd_topo_proximity(const dd_topo_loc_t *a, const dd_topo_loc_t *b);

#endif
