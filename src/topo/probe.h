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

/* Appends a zeroed NIC named name; NULL when out of memory. */
dd_topo_nic_t *dd_topo_add_nic(dd_topo_t *topo, const char *name);

#endif
