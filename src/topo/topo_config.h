/*
 * The topology module's DREAMDDP_* variables: interface choice, stream count,
 * and where probing reads from (fixture trees, another machine's XML).
 */
#ifndef DD_TOPO_TOPO_CONFIG_H
#define DD_TOPO_TOPO_CONFIG_H

#include "core/config.h"

typedef struct {
    dd_iflist_t ifname; /* DREAMDDP_NET_IFNAME; unset matches every interface */
    int num_streams;    /* -1: from the table in streams.c */
    char *sysfs_root;   /* NULL: the real /sys */
    char *topo_file;    /* NULL: probe this machine */
    char *dump_file;    /* NULL: write nothing */
} dd_topo_opts_t;

extern const dd_config_table_t dd_topo_config_table;

#endif
