/*
 * IPv4 and IPv6 addresses of the probed interfaces, and the subnets that
 * decide which interfaces of two hosts can reach each other.
 */
#ifndef DD_TOPO_ADDRS_H
#define DD_TOPO_ADDRS_H

#include "core/log.h"
#include "topo/topo.h"

#include <stddef.h>

/**
 * Adds the addresses of topo's interfaces: from DREAMDDP_SYSFS_ROOT/addrs when
 * a root is set (none when that file is missing), else from getifaddrs.
 * @return DD_OK; DD_ERR_IO for a malformed addrs line or a failed
 *         getifaddrs, reported with dd_error.
 */
dd_status_t dd_topo_addrs_fill(const char *sysfs_root, dd_topo_t *topo);

/* Parses "10.0.0.1/24" or "fd00::2/64" (prefix optional: a host address).
 * DD_ERR_INVALID_PARAM when it is neither. */
dd_status_t dd_topo_addr_parse(const char *text, dd_topo_addr_t *addr_p);

/* Writes the subnet of an address ("10.0.0.0/24"). Returns 0, or -1 for an
 * address that does not parse. */
int dd_topo_addr_subnet(const dd_topo_addr_t *addr, char *buf, size_t size);

/* Whether an address only reaches this host or link: 127/8, ::1, fe80::/10
 * (link-local prefixes look alike on every link, so they say nothing about
 * reachability). */
int dd_topo_addr_is_local(const dd_topo_addr_t *addr);

#endif
