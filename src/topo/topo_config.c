/*
 * The topology module's configuration table. Declares variables only;
 * dd_config_load parses them.
 */
#include "topo/topo_config.h"

#include <stddef.h>

static const dd_config_field_t dd_topo_fields[] = {
    {"DREAMDDP_NET_IFNAME", NULL,
     "Interfaces the job may use, in the grammar of NCCL_SOCKET_IFNAME "
     "(ib,eth prefixes; ^docker excludes; =eth0 exact); unset: the best by "
     "kind, speed and nearness to the rank's GPU.",
     DD_CONFIG_IFLIST, offsetof(dd_topo_opts_t, ifname), 0, 0, NULL},
    {"DREAMDDP_NUM_STREAMS", NULL,
     "Communication streams (connections) each rank opens to each peer; "
     "Gloo cuts large messages across them, NCCL opens that many sockets, "
     "UCX opens that many endpoints; unset: from the link speed and how many "
     "local "
     "ranks share "
     "the NIC (ddtopo(1) has the table); the job uses the least any rank "
     "asks for.",
     DD_CONFIG_INT, offsetof(dd_topo_opts_t, num_streams), 1, 8, NULL},
    {"DREAMDDP_SYSFS_ROOT", NULL,
     "Prefix of every sysfs path the probe reads (a fixture tree); its "
     "addrs file, when present, replaces getifaddrs.",
     DD_CONFIG_STRING, offsetof(dd_topo_opts_t, sysfs_root), 0, 0, NULL},
    {"DREAMDDP_TOPO_FILE", NULL,
     "Read the topology from this hwloc XML file instead of probing (another "
     "machine, offline).",
     DD_CONFIG_STRING, offsetof(dd_topo_opts_t, topo_file), 0, 0, NULL},
    {"DREAMDDP_TOPO_DUMP_FILE", NULL,
     "Write this machine's hwloc XML topology to this file when probing.",
     DD_CONFIG_STRING, offsetof(dd_topo_opts_t, dump_file), 0, 0, NULL},
};

const dd_config_table_t dd_topo_config_table = {
    "topo", dd_topo_fields, DD_CONFIG_FIELDS_COUNT(dd_topo_fields)};
