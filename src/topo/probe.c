/*
 * dd_topo_probe: lists the interfaces from sysfs, adds addresses, and lets
 * hwloc add CPU structure and PCI locality (this machine, or
 * DREAMDDP_TOPO_FILE). The combination used is written into topo->source, so
 * every report says how much it could see. Nothing here chooses.
 */
#include "topo/probe.h"
#include "core/log.h"
#include "topo/addrs.h"
#include "topo/sysfs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dd_status_t dd_topo_probe_sysfs(const char *root, dd_topo_t *topo)
{
    char(*names)[DD_TOPO_NAME_MAX];
    int n;
    dd_status_t status = dd_topo_sysfs_list_nics(root, &names, &n);

    if (status == DD_ERR_IO) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_TOPO,
                        "cannot list %s/sys/class/net: %m%s", root,
                        root[0] ? " (check DREAMDDP_SYSFS_ROOT)" : "");
    }
    if (status != DD_OK) {
        return status;
    }
    for (int i = 0; i < n && status == DD_OK; i++) {
        dd_topo_nic_t *nic = dd_topo_add_nic(topo, names[i]);
        if (nic == NULL) {
            status = DD_ERR_NO_MEMORY; /* dd_topo_add_nic reported it */
            break;
        }
        dd_topo_sysfs_nic(root, nic);
    }
    free(names);
    if (status == DD_OK) {
        status = dd_topo_sysfs_gpus(root, &topo->gpus, &topo->n_gpus);
    }
    if (status == DD_OK) {
        dd_topo_sysfs_cpus(root, topo);
    }
    return status;
}

/* Says, for people, what the probe could see. */
static void dd_topo_describe_source(const dd_topo_opts_t *opts, int use_hwloc,
                                    int shared, dd_topo_t *topo)
{
    const char *root = opts->sysfs_root;

    if (shared) {
        snprintf(topo->source, sizeof(topo->source),
                 "hwloc (read by another rank on this host) and sysfs "
                 "under %s",
                 root ? root : "/");
    } else if (topo->offline) {
        snprintf(topo->source, sizeof(topo->source),
                 "hwloc XML %s (offline: link states, speeds and addresses "
                 "unknown)",
                 opts->topo_file);
    } else if (use_hwloc && opts->topo_file != NULL) {
        snprintf(topo->source, sizeof(topo->source),
                 "hwloc XML %s, sysfs under %s", opts->topo_file,
                 root ? root : "/");
    } else if (use_hwloc) {
        snprintf(topo->source, sizeof(topo->source),
                 "hwloc and sysfs (this machine)");
    } else if (!dd_topo_hwloc_built()) {
        snprintf(topo->source, sizeof(topo->source),
                 "sysfs under %s only: built without hwloc, so PCI "
                 "locality only where sysfs device links resolve",
                 root ? root : "/");
    } else {
        snprintf(topo->source, sizeof(topo->source),
                 "sysfs under %s only (DREAMDDP_SYSFS_ROOT without "
                 "DREAMDDP_TOPO_FILE: "
                 "hwloc not used)",
                 root);
    }
}

static int dd_topo_nic_cmp(const void *a, const void *b)
{
    return strverscmp(((const dd_topo_nic_t *)a)->name,
                      ((const dd_topo_nic_t *)b)->name);
}

dd_status_t dd_topo_probe(const dd_topo_opts_t *opts, dd_topo_t **topo_p)
{
    return dd_topo_probe_shared(opts, NULL, topo_p);
}

/* hwloc's facts from share->in, else from hwloc here; applied to topo,
 * and written to share->out when asked. */
static dd_status_t dd_topo_probe_hwloc(const dd_topo_opts_t *opts,
                                       dd_topo_share_t *share, int given,
                                       dd_topo_t *topo)
{
    dd_topo_hwfacts_t f;
    dd_status_t status = DD_ERR_MESSAGE;

    if (given) {
        status = dd_topo_hwfacts_decode(share->in, share->in_len, &f);
        share->used_in = status == DD_OK;
        if (status != DD_OK) {
            dd_log_info(DD_SUBSYS_TOPO,
                        "another rank on this host published a topology that "
                        "does not read (%zu bytes); probing here",
                        share->in_len);
        }
    }
    if (status != DD_OK) {
        status = dd_topo_hwloc_facts(opts, &f);
    }
    if (status != DD_OK) {
        return status;
    }
    if (share != NULL && share->want_out) {
        share->out = dd_topo_hwfacts_encode(&f, &share->out_len);
    }
    status = dd_topo_hwfacts_apply(&f, topo);
    dd_topo_hwfacts_release(&f);
    if (status == DD_OK && share != NULL && share->want_out &&
        share->out == NULL) {
        status = dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                          "no memory for this host's topology text");
    }
    return status;
}

dd_status_t dd_topo_probe_shared(const dd_topo_opts_t *opts,
                                 dd_topo_share_t *share, dd_topo_t **topo_p)
{
    const char *root = opts->sysfs_root ? opts->sysfs_root : "";
    dd_status_t status = DD_OK;
    dd_topo_t *topo = calloc(1, sizeof(*topo));

    if (topo == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                        "no memory for the topology");
    }
    topo->offline = opts->topo_file != NULL && opts->sysfs_root == NULL;
    if (!topo->offline) {
        status = dd_topo_probe_sysfs(root, topo);
    }
    if (status == DD_OK && !topo->offline) {
        status = dd_topo_addrs_fill(opts->sysfs_root, topo);
    }
    int given = share != NULL && share->in != NULL && opts->topo_file == NULL;
    int use_hwloc =
        given || (dd_topo_hwloc_built() &&
                  (opts->topo_file != NULL || opts->sysfs_root == NULL));
    if (status == DD_OK &&
        (use_hwloc || opts->topo_file != NULL || opts->dump_file != NULL)) {
        status = dd_topo_probe_hwloc(opts, share, given, topo);
    }
    if (status != DD_OK) {
        dd_topo_free(topo);
        return status;
    }
    if (topo->n_nics > 1) {
        qsort(topo->nics, (size_t)topo->n_nics, sizeof(*topo->nics),
              dd_topo_nic_cmp);
    }
    dd_topo_describe_source(opts, use_hwloc, given && share->used_in, topo);
    *topo_p = topo;
    return DD_OK;
}
