/* Helpers of the topology tests: fixture paths and probing a fixture
 * machine (its sysfs tree, and its hwloc XML when with_xml). */
#ifndef DD_TESTS_TOPO_FIXTURE_H
#define DD_TESTS_TOPO_FIXTURE_H

#include "topo/ifchoice.h"
#include "topo/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const char *topo_fixture(const char *machine, const char *file)
{
    static char path[4][1024];
    static int next;
    const char *top = getenv("top_srcdir");
    char *p = path[next++ % 4];

    snprintf(p, sizeof(path[0]), "%s/tests/fixtures/topo/%s%s%s",
             top ? top : ".", machine, file ? "/" : "", file ? file : "");
    return p;
}

/* Options for a fixture machine; release with topo_opts_release. */
static inline void topo_opts(dd_topo_opts_t *opts, const char *machine,
                             int with_xml, const char *ifname)
{
    memset(opts, 0, sizeof(*opts));
    opts->num_streams = -1;
    opts->sysfs_root = strdup(topo_fixture(machine, NULL));
    opts->topo_file =
        with_xml ? strdup(topo_fixture(machine, "topo.xml")) : NULL;
    if (ifname != NULL &&
        dd_config_parse_iflist(ifname, &opts->ifname) != DD_OK) {
        abort();
    }
}

static inline void topo_opts_release(dd_topo_opts_t *opts)
{
    free(opts->sysfs_root);
    free(opts->topo_file);
    free(opts->dump_file);
    dd_iflist_release(&opts->ifname);
}

static inline const dd_topo_nic_t *topo_nic(const dd_topo_t *topo,
                                            const char *name)
{
    for (int i = 0; i < topo->n_nics; i++) {
        if (strcmp(topo->nics[i].name, name) == 0) {
            return &topo->nics[i];
        }
    }
    return NULL;
}

#endif
