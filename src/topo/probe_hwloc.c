/*
 * Probing through hwloc (2.x, and 3.0): packages, NUMA nodes, cores, the PCI
 * tree, network and OpenFabrics OS devices, NVIDIA GPUs. It reads this
 * machine or an XML file and may write this machine's XML. It only records
 * what hwloc says, as facts (hwfacts.c applies them to a topology, and
 * passes them between the ranks of a host).
 */
#include "core/log.h"
#include "topo/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_HWLOC

#include <hwloc.h>

int dd_topo_hwloc_built(void)
{
    return 1;
}

#if HWLOC_API_VERSION >= 0x00030000
#define DD_HWLOC_IS_OSDEV(obj, t) (((obj)->attr->osdev.type & (t)) != 0)
#else
#define DD_HWLOC_IS_OSDEV(obj, t) ((obj)->attr->osdev.type == (t))
#endif

#define DD_PCI_VENDOR_NVIDIA 0x10de

static void dd_topo_hwloc_busid(char *buf, unsigned domain, unsigned bus,
                                unsigned dev, unsigned func)
{
    snprintf(buf, DD_TOPO_PCI_MAX, "%04x:%02x:%02x.%01x", domain & 0xffff,
             bus & 0xff, dev & 0x1f, func & 0x7);
}

/* The location of a PCI device: its bus id, the PCI-to-PCI bridges above
 * it (host bridges are not switches and are left out) and the NUMA node of
 * its CPU-side ancestor when that holds exactly one. */
static void dd_topo_hwloc_loc(hwloc_topology_t t, hwloc_obj_t pci,
                              dd_topo_loc_t *loc)
{
    char chain[DD_TOPO_DEPTH_MAX][DD_TOPO_PCI_MAX];
    int n = 0;

    memset(loc, 0, sizeof(*loc));
    loc->numa = -1;
    dd_topo_hwloc_busid(loc->pci, pci->attr->pcidev.domain,
                        pci->attr->pcidev.bus, pci->attr->pcidev.dev,
                        pci->attr->pcidev.func);
    for (hwloc_obj_t p = pci->parent;
         p != NULL && p->type == HWLOC_OBJ_BRIDGE && n < DD_TOPO_DEPTH_MAX;
         p = p->parent) {
        if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
            const struct hwloc_pcidev_attr_s *up =
                &p->attr->bridge.upstream.pci;
            dd_topo_hwloc_busid(chain[n++], up->domain, up->bus, up->dev,
                                up->func);
        }
    }
    for (int i = 0; i < n; i++) {
        memcpy(loc->bridges[i], chain[n - 1 - i], DD_TOPO_PCI_MAX);
    }
    loc->n_bridges = n;
    hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(t, pci);
    if (cpu_side != NULL && cpu_side->nodeset != NULL &&
        hwloc_bitmap_weight(cpu_side->nodeset) == 1) {
        loc->numa = hwloc_bitmap_first(cpu_side->nodeset);
    }
}

/* A PCI device's facts: ids, link, location. */
static void dd_topo_hwloc_pcidev(hwloc_topology_t t, hwloc_obj_t pci,
                                 dd_topo_hwdev_t *d)
{
    d->vendor = pci->attr->pcidev.vendor_id;
    d->device = pci->attr->pcidev.device_id;
    d->class_id = pci->attr->pcidev.class_id;
    d->link_gbytes_s = pci->attr->pcidev.linkspeed;
    dd_topo_hwloc_loc(t, pci, &d->loc);
}

/* Appends a zeroed device to f; NULL when out of memory. */
static dd_topo_hwdev_t *dd_topo_hwloc_add(dd_topo_hwfacts_t *f)
{
    if (f->n % 16 == 0) {
        dd_topo_hwdev_t *grown =
            realloc(f->devs, sizeof(*grown) * (size_t)(f->n + 16));
        if (grown == NULL) {
            dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                     "no memory for the devices hwloc lists");
            return NULL;
        }
        f->devs = grown;
    }
    dd_topo_hwdev_t *d = &f->devs[f->n++];
    memset(d, 0, sizeof(*d));
    return d;
}

/* NVIDIA display controllers, in bus order (hwloc lists PCI devices in
 * bus order: the CUDA PCI_BUS_ID order). */
static dd_status_t dd_topo_hwloc_gpus(hwloc_topology_t t, dd_topo_hwfacts_t *f)
{
    for (hwloc_obj_t o = hwloc_get_next_pcidev(t, NULL); o != NULL;
         o = hwloc_get_next_pcidev(t, o)) {
        if (o->attr->pcidev.vendor_id != DD_PCI_VENDOR_NVIDIA ||
            (o->attr->pcidev.class_id >> 8) != 0x03) {
            continue;
        }
        dd_topo_hwdev_t *d = dd_topo_hwloc_add(f);
        if (d == NULL) {
            return DD_ERR_NO_MEMORY;
        }
        d->what = DD_TOPO_HWDEV_GPU;
        dd_topo_hwloc_pcidev(t, o, d);
    }
    return DD_OK;
}

/* The OpenFabrics device beside a netdev under the same PCI function. */
static hwloc_obj_t dd_topo_hwloc_sibling_rdma(hwloc_obj_t pci)
{
    for (hwloc_obj_t c = pci->io_first_child; c != NULL; c = c->next_sibling) {
        if (c->type == HWLOC_OBJ_OS_DEVICE &&
            DD_HWLOC_IS_OSDEV(c, HWLOC_OBJ_OSDEV_OPENFABRICS)) {
            return c;
        }
    }
    return NULL;
}

/* Network and OpenFabrics OS devices on a PCI function. */
static dd_status_t dd_topo_hwloc_nics(hwloc_topology_t t, dd_topo_hwfacts_t *f)
{
    for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o != NULL;
         o = hwloc_get_next_osdev(t, o)) {
        hwloc_obj_t pci = o->parent;
        int is_net = DD_HWLOC_IS_OSDEV(o, HWLOC_OBJ_OSDEV_NETWORK);
        int is_rdma = DD_HWLOC_IS_OSDEV(o, HWLOC_OBJ_OSDEV_OPENFABRICS);

        if ((!is_net && !is_rdma) || o->name == NULL || pci == NULL ||
            pci->type != HWLOC_OBJ_PCI_DEVICE) {
            continue;
        }
        dd_topo_hwdev_t *d = dd_topo_hwloc_add(f);
        if (d == NULL) {
            return DD_ERR_NO_MEMORY;
        }
        d->what = is_rdma ? DD_TOPO_HWDEV_RDMA : DD_TOPO_HWDEV_NET;
        snprintf(d->name, sizeof(d->name), "%s", o->name);
        hwloc_obj_t rdma = is_net ? dd_topo_hwloc_sibling_rdma(pci) : NULL;
        if (rdma != NULL && rdma->name != NULL) {
            snprintf(d->rdma, sizeof(d->rdma), "%s", rdma->name);
        }
        dd_topo_hwloc_pcidev(t, pci, d);
    }
    return DD_OK;
}

static dd_status_t dd_topo_hwloc_load(const dd_topo_opts_t *opts,
                                      hwloc_topology_t *t_p)
{
    hwloc_topology_t t;

    if (hwloc_topology_init(&t) != 0) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                        "hwloc_topology_init: %m");
    }
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (opts->topo_file != NULL &&
        hwloc_topology_set_xml(t, opts->topo_file) != 0) {
        hwloc_topology_destroy(t);
        return dd_error(DD_ERR_IO, DD_SUBSYS_TOPO,
                        "cannot read DREAMDDP_TOPO_FILE='%s': %m",
                        opts->topo_file);
    }
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        if (opts->topo_file != NULL) {
            return dd_error(
                DD_ERR_IO, DD_SUBSYS_TOPO,
                "DREAMDDP_TOPO_FILE='%s' is not an hwloc XML topology",
                opts->topo_file);
        }
        return dd_error(DD_ERR_IO, DD_SUBSYS_TOPO, "hwloc cannot probe: %m");
    }
    *t_p = t;
    return DD_OK;
}

dd_status_t dd_topo_hwloc_facts(const dd_topo_opts_t *opts,
                                dd_topo_hwfacts_t *f)
{
    hwloc_topology_t t = NULL;
    dd_status_t status = dd_topo_hwloc_load(opts, &t);

    memset(f, 0, sizeof(*f));
    if (status != DD_OK) {
        return status;
    }
    if (opts->dump_file != NULL &&
        hwloc_topology_export_xml(t, opts->dump_file, 0) != 0) {
        status = dd_error(DD_ERR_IO, DD_SUBSYS_TOPO,
                          "cannot write DREAMDDP_TOPO_DUMP_FILE='%s': %m",
                          opts->dump_file);
        goto out_destroy;
    }
    f->packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
    f->numa_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    f->cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    f->pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    status = dd_topo_hwloc_gpus(t, f);
    if (status == DD_OK) {
        status = dd_topo_hwloc_nics(t, f);
    }
out_destroy:
    hwloc_topology_destroy(t);
    if (status != DD_OK) {
        dd_topo_hwfacts_release(f);
    }
    return status;
}

#else /* !HAVE_HWLOC */

int dd_topo_hwloc_built(void)
{
    return 0;
}

dd_status_t dd_topo_hwloc_facts(const dd_topo_opts_t *opts,
                                dd_topo_hwfacts_t *f)
{
    memset(f, 0, sizeof(*f));
    if (opts->topo_file != NULL || opts->dump_file != NULL) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_TOPO,
                        "%s needs hwloc, and this build has none (configure "
                        "--with-hwloc)",
                        opts->topo_file != NULL ? "DREAMDDP_TOPO_FILE"
                                                : "DREAMDDP_TOPO_DUMP_FILE");
    }
    return DD_ERR_UNSUPPORTED;
}

#endif
