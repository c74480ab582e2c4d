/*
 * hwloc's facts (probe_hwloc.c) applied to a topology, and written as text
 * so that one rank of a host reads the PCI tree and the others read its
 * text from the store (api/net_agree.c): hwloc's start and probe cost
 * 20 ms to 50 ms of CPU a process, seconds when 128 ranks share 2 cores.
 * The text reads:
 *
 *   dd-hwloc-facts 1
 *   cpus PACKAGES NUMA_NODES CORES PUS
 *   dev gpu|net|rdma NAME RDMA VENDOR DEVICE CLASS LINK NUMA PCI BRIDGES
 *   end DEVICES
 *
 * (a text without its end, cut short, does not read), ids in hex, "-" for an
 * empty name, RDMA device, bus id or bridge list, bridges joined by commas,
 * outermost first.
 */
#include "core/log.h"
#include "topo/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DD_HWFACTS_MAGIC "dd-hwloc-facts 1"
#define DD_PCI_CLASS_INFINIBAND 0x0207

static const char *const dd_hwdev_names[] = {"gpu", "net", "rdma"};

void dd_topo_hwfacts_release(dd_topo_hwfacts_t *f)
{
    free(f->devs);
    memset(f, 0, sizeof(*f));
}

static dd_topo_nic_t *dd_hwfacts_find(dd_topo_t *topo, const char *name,
                                      int rdma)
{
    for (int i = 0; i < topo->n_nics; i++) {
        if (strcmp(rdma ? topo->nics[i].rdma : topo->nics[i].name, name) == 0) {
            return &topo->nics[i];
        }
    }
    return NULL;
}

/* What an offline XML says of a NIC: InfiniBand by PCI class, RoCE when an
 * Ethernet function has an RDMA device; state and speed unknown. */
static void dd_hwfacts_offline_nic(const dd_topo_hwdev_t *d, dd_topo_nic_t *nic)
{
    if (d->rdma[0] != '\0') {
        snprintf(nic->rdma, sizeof(nic->rdma), "%s", d->rdma);
        nic->rdma_port = 1;
    }
    if (d->class_id == DD_PCI_CLASS_INFINIBAND) {
        nic->kind = DD_TOPO_KIND_INFINIBAND;
    } else {
        nic->kind =
            d->rdma[0] != '\0' ? DD_TOPO_KIND_ROCE : DD_TOPO_KIND_ETHERNET;
    }
    snprintf(nic->state, sizeof(nic->state), "unknown");
    nic->speed_mbps = DD_TOPO_DEFAULT_SPEED_MBPS;
}

dd_status_t dd_topo_hwfacts_apply(const dd_topo_hwfacts_t *f, dd_topo_t *topo)
{
    int n = 0;

    for (int i = 0; i < f->n; i++) {
        n += f->devs[i].what == DD_TOPO_HWDEV_GPU;
    }
    dd_topo_gpu_t *gpus = calloc((size_t)(n ? n : 1), sizeof(*gpus));
    if (gpus == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                        "no memory for the %d GPUs hwloc lists", n);
    }
    topo->packages = f->packages;
    topo->numa_nodes = f->numa_nodes;
    topo->cores = f->cores;
    topo->pus = f->pus;
    topo->hwloc = 1;
    n = 0;
    for (int i = 0; i < f->n; i++) {
        const dd_topo_hwdev_t *d = &f->devs[i];
        if (d->what == DD_TOPO_HWDEV_GPU) {
            gpus[n].index = n;
            snprintf(gpus[n].model, sizeof(gpus[n].model), "10de:%04x",
                     d->device & 0xffff);
            gpus[n].loc = d->loc;
            n++;
        }
    }
    free(topo->gpus);
    topo->gpus = gpus;
    topo->n_gpus = n;
    for (int i = 0; i < f->n; i++) {
        const dd_topo_hwdev_t *d = &f->devs[i];
        if (d->what == DD_TOPO_HWDEV_GPU) {
            continue;
        }
        dd_topo_nic_t *nic =
            dd_hwfacts_find(topo, d->name, d->what == DD_TOPO_HWDEV_RDMA);
        if (nic == NULL && d->what == DD_TOPO_HWDEV_NET && topo->offline) {
            nic = dd_topo_add_nic(topo, d->name);
            if (nic == NULL) {
                return DD_ERR_NO_MEMORY; /* dd_topo_add_nic reported it */
            }
            dd_hwfacts_offline_nic(d, nic);
        }
        if (nic != NULL) {
            nic->loc = d->loc;
            dd_topo_nic_estimate(nic, d->vendor, d->device, d->link_gbytes_s);
        }
    }
    return DD_OK;
}

static const char *dd_hwfacts_or_dash(const char *s)
{
    return s[0] != '\0' ? s : "-";
}

char *dd_topo_hwfacts_encode(const dd_topo_hwfacts_t *f, size_t *len_p)
{
    size_t line = 4 * DD_TOPO_NAME_MAX + (DD_TOPO_DEPTH_MAX + 2) * 20;
    size_t size = 96 + (size_t)f->n * line, o;
    char *text = malloc(size);

    if (text == NULL) {
        return NULL;
    }
    o = (size_t)snprintf(text, size, DD_HWFACTS_MAGIC "\ncpus %d %d %d %d\n",
                         f->packages, f->numa_nodes, f->cores, f->pus);
    for (int i = 0; i < f->n; i++) {
        const dd_topo_hwdev_t *d = &f->devs[i];
        o += (size_t)snprintf(
            text + o, size - o, "dev %s %s %s %x %x %x %.9g %d %s ",
            dd_hwdev_names[d->what], dd_hwfacts_or_dash(d->name),
            dd_hwfacts_or_dash(d->rdma), d->vendor, d->device, d->class_id,
            (double)d->link_gbytes_s, d->loc.numa,
            dd_hwfacts_or_dash(d->loc.pci));
        for (int b = 0; b < d->loc.n_bridges; b++) {
            o += (size_t)snprintf(text + o, size - o, "%s%s", b ? "," : "",
                                  d->loc.bridges[b]);
        }
        o += (size_t)snprintf(text + o, size - o, "%s\n",
                              d->loc.n_bridges ? "" : "-");
    }
    o += (size_t)snprintf(text + o, size - o, "end %d\n", f->n);
    *len_p = o + 1;
    return text;
}

static void dd_hwfacts_undash(char *s)
{
    if (strcmp(s, "-") == 0) {
        s[0] = '\0';
    }
}

static dd_status_t dd_hwfacts_decode_dev(const char *line, dd_topo_hwdev_t *d)
{
    char what[8], bridges[DD_TOPO_DEPTH_MAX * DD_TOPO_PCI_MAX + 8];
    double link;
    int end = 0;

    memset(d, 0, sizeof(*d));
    if (sscanf(line, "dev %7s %63s %63s %x %x %x %lf %d %15s %135s%n", what,
               d->name, d->rdma, &d->vendor, &d->device, &d->class_id, &link,
               &d->loc.numa, d->loc.pci, bridges, &end) != 10 ||
        line[end] != '\0') {
        return DD_ERR_MESSAGE;
    }
    int kind = -1;
    for (int k = 0; k < 3; k++) {
        kind = strcmp(what, dd_hwdev_names[k]) == 0 ? k : kind;
    }
    if (kind < 0) {
        return DD_ERR_MESSAGE;
    }
    d->what = (dd_topo_hwdev_kind_t)kind;
    d->link_gbytes_s = (float)link;
    dd_hwfacts_undash(d->name);
    dd_hwfacts_undash(d->rdma);
    dd_hwfacts_undash(d->loc.pci);
    if (strcmp(bridges, "-") == 0) {
        return DD_OK;
    }
    for (char *save, *b = strtok_r(bridges, ",", &save); b != NULL;
         b = strtok_r(NULL, ",", &save)) {
        if (d->loc.n_bridges == DD_TOPO_DEPTH_MAX ||
            strlen(b) >= DD_TOPO_PCI_MAX) {
            return DD_ERR_MESSAGE;
        }
        snprintf(d->loc.bridges[d->loc.n_bridges++], DD_TOPO_PCI_MAX, "%s", b);
    }
    return DD_OK;
}

dd_status_t dd_topo_hwfacts_decode(const char *text, size_t len,
                                   dd_topo_hwfacts_t *f)
{
    char *copy = strndup(text, len);
    dd_status_t status = DD_ERR_MESSAGE;
    int n = 0;

    memset(f, 0, sizeof(*f));
    if (copy == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    for (const char *c = copy; *c != '\0'; c++) {
        n += *c == '\n';
    }
    char *save, *line = strtok_r(copy, "\n", &save);
    if (line == NULL || strcmp(line, DD_HWFACTS_MAGIC) != 0) {
        goto out;
    }
    line = strtok_r(NULL, "\n", &save);
    if (line == NULL || sscanf(line, "cpus %d %d %d %d", &f->packages,
                               &f->numa_nodes, &f->cores, &f->pus) != 4) {
        goto out;
    }
    f->devs = calloc((size_t)(n > 0 ? n : 1), sizeof(*f->devs));
    if (f->devs == NULL) {
        status = DD_ERR_NO_MEMORY;
        goto out;
    }
    while ((line = strtok_r(NULL, "\n", &save)) != NULL &&
           strncmp(line, "end ", 4) != 0) {
        if (f->n == n || dd_hwfacts_decode_dev(line, &f->devs[f->n]) != DD_OK) {
            goto out;
        }
        f->n++;
    }
    int end = -1;
    if (line != NULL && sscanf(line, "end %d", &end) == 1 && end == f->n &&
        strtok_r(NULL, "\n", &save) == NULL) {
        status = DD_OK;
    }
out:
    free(copy);
    if (status != DD_OK) {
        dd_topo_hwfacts_release(f);
    }
    return status;
}
