/*
 * The two probing back ends behind dd_topo_probe: hwloc (this machine or an
 * XML file) and sysfs. hwloc adds what sysfs cannot give reliably (CPU
 * structure, PCI bridges, NUMA nodes of devices); sysfs gives what hwloc
 * does not (kind, state, speed, MTU, virtual interfaces).
 */
#ifndef DD_TOPO_PROBE_H
#define DD_TOPO_PROBE_H

#include "topo/topo.h"

/* Whether this build has hwloc (HAVE_HWLOC at configure time). */
int dd_topo_hwloc_built(void);

/* What hwloc says of a device that matters here. */
typedef enum {
    DD_TOPO_HWDEV_GPU,  /* an NVIDIA display controller */
    DD_TOPO_HWDEV_NET,  /* a network OS device (name: the netdev) */
    DD_TOPO_HWDEV_RDMA, /* an OpenFabrics OS device (name: "mlx5_0") */
} dd_topo_hwdev_kind_t;

typedef struct {
    dd_topo_hwdev_kind_t what;
    char name[DD_TOPO_NAME_MAX]; /* "" for a GPU */
    char rdma[DD_TOPO_NAME_MAX]; /* a netdev's sibling RDMA device, or "" */
    unsigned vendor, device, class_id;
    float link_gbytes_s; /* hwloc's PCIe linkspeed; 0: unknown */
    dd_topo_loc_t loc;
} dd_topo_hwdev_t;

/* What hwloc saw, in its order (GPUs in bus order first). */
typedef struct {
    int packages, numa_nodes, cores, pus;
    int n;
    dd_topo_hwdev_t *devs;
} dd_topo_hwfacts_t;

/**
 * Loads opts->topo_file, or this machine, with hwloc and records its facts
 * in f; writes the XML to opts->dump_file when set.
 * @return DD_OK; DD_ERR_IO naming the file that cannot be read or written;
 *         DD_ERR_UNSUPPORTED when built without hwloc; DD_ERR_NO_MEMORY.
 */
dd_status_t dd_topo_hwloc_facts(const dd_topo_opts_t *opts,
                                dd_topo_hwfacts_t *f);

/**
 * Applies f to topo: sets CPU counts, replaces the GPU list, and gives every
 * NIC of topo that f names (by netdev or RDMA device) its PCI location,
 * estimating a speed sysfs did not give. When topo->offline, adds f's
 * netdevs, which topo lacks.
 * @return DD_OK or DD_ERR_NO_MEMORY.
 */
dd_status_t dd_topo_hwfacts_apply(const dd_topo_hwfacts_t *f, dd_topo_t *topo);

/* f as text, one line per device (malloc'd, NUL-terminated; *len_p counts
 * the NUL); NULL when out of memory. */
char *dd_topo_hwfacts_encode(const dd_topo_hwfacts_t *f, size_t *len_p);

/* Reads dd_topo_hwfacts_encode's text into f; DD_ERR_MESSAGE (nothing
 * logged) when it is not that. */
dd_status_t dd_topo_hwfacts_decode(const char *text, size_t len,
                                   dd_topo_hwfacts_t *f);

void dd_topo_hwfacts_release(dd_topo_hwfacts_t *f);

/**
 * Where the system gave no speed (speed_known 0), estimates nic's from its
 * PCI vendor and device ids (well-known NIC families: NVIDIA/Mellanox
 * ConnectX, Intel E810, X710, I210 and others, Broadcom NetXtreme) and
 * its PCIe link (link_gbytes_s, hwloc's linkspeed; 0: unknown), never
 * above what the link carries; sets speed_mbps and speed_source ("PCIe x16
 * Gen3", "ConnectX-5 (15b3:1017) on PCIe x16 Gen3"). Leaves
 * Wi-Fi, virtual and loopback interfaces, and unknown devices on unknown
 * links, as they are.
 */
void dd_topo_nic_estimate(dd_topo_nic_t *nic, unsigned vendor, unsigned device,
                          float link_gbytes_s);

/* Appends a zeroed NIC named name; NULL when out of memory. */
dd_topo_nic_t *dd_topo_add_nic(dd_topo_t *topo, const char *name);

#endif
