/*
 * The topology's table (topo.h): its interfaces added one by one, freed,
 * and read (which interface is usable, how near two devices are). The
 * probes fill it (probe.c, probe_hwloc.c); nothing here probes or chooses.
 */
#include "core/log.h"
#include "topo/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const dd_topo_kind_names[DD_TOPO_KIND_LAST] = {
    "InfiniBand", "RoCE", "Ethernet", "Wi-Fi", "other", "virtual", "loopback"};

const char *dd_topo_kind_name(dd_topo_kind_t kind)
{
    return (unsigned)kind < DD_TOPO_KIND_LAST ? dd_topo_kind_names[kind]
                                              : "unknown";
}

dd_topo_nic_t *dd_topo_add_nic(dd_topo_t *topo, const char *name)
{
    dd_topo_nic_t *nics =
        realloc(topo->nics, sizeof(*nics) * (size_t)(topo->n_nics + 1));
    if (nics == NULL) {
        dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                 "no memory for interface %s (%d found before it)", name,
                 topo->n_nics);
        return NULL;
    }
    topo->nics = nics;
    dd_topo_nic_t *nic = &nics[topo->n_nics++];
    memset(nic, 0, sizeof(*nic));
    snprintf(nic->name, sizeof(nic->name), "%s", name);
    nic->loc.numa = -1;
    return nic;
}

void dd_topo_free(dd_topo_t *topo)
{
    if (topo != NULL) {
        free(topo->nics);
        free(topo->gpus);
        free(topo);
    }
}

int dd_topo_nic_usable(const dd_topo_t *topo, const dd_topo_nic_t *nic,
                       const char **why_p)
{
    static const char *const down[] = {"down", "lowerlayerdown", "notpresent",
                                       "dormant", NULL};
    const char *why = NULL;
    int routable = 0;

    for (int i = 0; down[i] != NULL; i++) {
        if (strcmp(nic->state, down[i]) == 0) {
            why = "link down";
        }
    }
    for (int i = 0; i < nic->n_addrs; i++) {
        routable += strncasecmp(nic->addrs[i].text, "fe80:", 5) != 0;
    }
    if (why == NULL && !topo->offline && routable == 0) {
        why = "no address";
    }
    if (why_p != NULL) {
        *why_p = why;
    }
    return why == NULL;
}

int dd_topo_proximity(const dd_topo_loc_t *a, const dd_topo_loc_t *b)
{
    int shared = 0;

    if (a->pci[0] != '\0' && b->pci[0] != '\0') {
        while (shared < a->n_bridges && shared < b->n_bridges &&
               strcmp(a->bridges[shared], b->bridges[shared]) == 0) {
            shared++;
        }
    }
    if (shared > 0) {
        return 1 + shared;
    }
    return a->numa >= 0 && a->numa == b->numa ? 1 : 0;
}
