/*
 * What sysfs says about NICs, GPUs and CPUs. Every path is prefixed with the
 * root (DREAMDDP_SYSFS_ROOT, "" for the real /sys), so tests run on fixture
 * trees. Readers never fail on a missing file: the field stays unknown.
 */
#ifndef DD_TOPO_SYSFS_H
#define DD_TOPO_SYSFS_H

#include "topo/topo.h"

/**
 * Names of the interfaces under ROOT/sys/class/net, sorted, in a malloc'ed
 * array of n_p strings of DD_TOPO_NAME_MAX bytes.
 * @return DD_OK; DD_ERR_IO (not reported: the caller names the
 * directory); DD_ERR_NO_MEMORY, reported.
 */
dd_status_t dd_topo_sysfs_list_nics(const char *root,
                                    char (**names_p)[DD_TOPO_NAME_MAX],
                                    int *n_p);

/* Fills kind, detail, state, speed, MTU, RDMA device and the locality that
 * sysfs gives (PCI path when the device link resolves, NUMA node) of the
 * interface nic->name. */
void dd_topo_sysfs_nic(const char *root, dd_topo_nic_t *nic);

/* Parses an InfiniBand rate ("200 Gb/sec (4X HDR)") into Mb/s; 0 when it
 * does not parse. */
int dd_topo_sysfs_parse_rate(const char *text);

/**
 * NVIDIA display and 3D controllers under ROOT/sys/bus/pci/devices, in PCI
 * bus order, numbered from 0.
 * @return DD_OK (none found is fine) or DD_ERR_NO_MEMORY, reported.
 */
dd_status_t dd_topo_sysfs_gpus(const char *root, dd_topo_gpu_t **gpus_p,
                               int *n_p);

/* Counts packages, cores, hardware threads and NUMA nodes; leaves 0 where
 * sysfs says nothing. */
void dd_topo_sysfs_cpus(const char *root, dd_topo_t *topo);

/* Fills loc from a resolved sysfs device path: its last PCI component is the
 * device, the earlier ones the bridges above it. Returns 0 when the path
 * holds a PCI bus id. */
int dd_topo_sysfs_parse_pci_path(const char *path, dd_topo_loc_t *loc);

#endif
