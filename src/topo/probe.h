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

/**
 * Loads opts->topo_file, or this machine, with hwloc; writes it to
 * opts->dump_file when set. Sets CPU counts, replaces the GPU list, and
 * gives every NIC of topo that hwloc knows its PCI location and RDMA
 * device. When topo->offline, adds the XML's NICs, which topo lacks.
 * @return DD_OK; DD_ERR_IO naming the file that cannot be read or written;
 *         DD_ERR_UNSUPPORTED when built without hwloc; DD_ERR_NO_MEMORY.
 */
dd_status_t dd_topo_hwloc_probe(const dd_topo_opts_t *opts, dd_topo_t *topo);

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
