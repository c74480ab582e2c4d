/*
 * Interface addresses: from getifaddrs on a live system, or from the addrs
 * file of a fixture tree (DREAMDDP_SYSFS_ROOT/addrs: one "IFNAME
 * ADDRESS/PREFIX" a line, '#' starts a comment), so tests see fixed addresses.
 * Only IPv4 and IPv6 addresses are kept.
 */
#include "topo/addrs.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

static dd_topo_nic_t *dd_topo_find_nic(dd_topo_t *topo, const char *name)
{
    for (int i = 0; i < topo->n_nics; i++) {
        if (strcmp(topo->nics[i].name, name) == 0) {
            return &topo->nics[i];
        }
    }
    return NULL;
}

static void dd_topo_add_addr(dd_topo_nic_t *nic, int family, const char *text,
                             int prefix)
{
    if (nic == NULL || nic->n_addrs == DD_TOPO_ADDRS_MAX) {
        return;
    }
    dd_topo_addr_t *a = &nic->addrs[nic->n_addrs++];
    a->family = family;
    a->prefix = prefix;
    snprintf(a->text, sizeof(a->text), "%s", text);
}

dd_status_t dd_topo_addr_parse(const char *text, dd_topo_addr_t *addr_p)
{
    char buf[DD_TOPO_ADDR_MAX + 8], *slash, *end;
    unsigned char bin[sizeof(struct in6_addr)];
    dd_topo_addr_t addr;

    if (strlen(text) >= sizeof(buf)) {
        return DD_ERR_INVALID_PARAM;
    }
    snprintf(buf, sizeof(buf), "%s", text);
    slash = strchr(buf, '/');
    if (slash != NULL) {
        *slash = '\0';
    }
    if (inet_pton(AF_INET, buf, bin) == 1) {
        addr.family = AF_INET;
    } else if (inet_pton(AF_INET6, buf, bin) == 1) {
        addr.family = AF_INET6;
    } else {
        return DD_ERR_INVALID_PARAM;
    }
    int max = addr.family == AF_INET ? 32 : 128;
    addr.prefix = max;
    if (slash != NULL) {
        long p = strtol(slash + 1, &end, 10);
        if (end == slash + 1 || *end != '\0' || p < 0 || p > max) {
            return DD_ERR_INVALID_PARAM;
        }
        addr.prefix = (int)p;
    }
    snprintf(addr.text, sizeof(addr.text), "%.47s", buf);
    *addr_p = addr;
    return DD_OK;
}

/* The fixture's addrs file. Unknown interfaces are ignored; a malformed
 * line is an error naming the file and line. */
static dd_status_t dd_topo_addrs_file(const char *path, FILE *f,
                                      dd_topo_t *topo)
{
    char line[256], name[DD_TOPO_NAME_MAX], text[128];
    unsigned lineno = 0;
    dd_topo_addr_t addr;

    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        line[strcspn(line, "#\n")] = '\0';
        if (line[strspn(line, " \t")] == '\0') {
            continue;
        }
        if (sscanf(line, "%63s %127s", name, text) != 2 ||
            dd_topo_addr_parse(text, &addr) != DD_OK) {
            return dd_error(DD_ERR_IO, DD_SUBSYS_TOPO,
                            "%s:%u: expected IFNAME ADDRESS/PREFIX, got '%s'",
                            path, lineno, line);
        }
        dd_topo_add_addr(dd_topo_find_nic(topo, name), addr.family, addr.text,
                         addr.prefix);
    }
    return DD_OK;
}

static int dd_topo_mask_len(const struct sockaddr *mask)
{
    const unsigned char *b;
    size_t n;
    int bits = 0;

    if (mask == NULL) {
        return -1;
    }
    if (mask->sa_family == AF_INET) {
        b = (const unsigned char *)&((const struct sockaddr_in *)mask)
                ->sin_addr;
        n = 4;
    } else {
        b = (const unsigned char *)&((const struct sockaddr_in6 *)mask)
                ->sin6_addr;
        n = 16;
    }
    for (size_t i = 0; i < n; i++) {
        bits += __builtin_popcount(b[i]);
    }
    return bits;
}

static dd_status_t dd_topo_addrs_live(dd_topo_t *topo)
{
    struct ifaddrs *list;
    char text[INET6_ADDRSTRLEN];

    if (getifaddrs(&list) != 0) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_TOPO, "getifaddrs: %m");
    }
    for (struct ifaddrs *ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
        const struct sockaddr *sa = ifa->ifa_addr;
        const void *bin;

        if (sa == NULL ||
            (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) {
            continue;
        }
        bin = sa->sa_family == AF_INET
                  ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                  : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        inet_ntop(sa->sa_family, bin, text, sizeof(text));
        int prefix = dd_topo_mask_len(ifa->ifa_netmask);
        if (prefix < 0) {
            prefix = sa->sa_family == AF_INET ? 32 : 128;
        }
        dd_topo_add_addr(dd_topo_find_nic(topo, ifa->ifa_name), sa->sa_family,
                         text, prefix);
    }
    freeifaddrs(list);
    return DD_OK;
}

dd_status_t dd_topo_addrs_fill(const char *sysfs_root, dd_topo_t *topo)
{
    char path[PATH_MAX];

    if (sysfs_root == NULL || sysfs_root[0] == '\0') {
        return dd_topo_addrs_live(topo);
    }
    snprintf(path, sizeof(path), "%s/addrs", sysfs_root);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return DD_OK; /* a fixture without addresses */
    }
    dd_status_t status = dd_topo_addrs_file(path, f, topo);
    fclose(f);
    return status;
}

int dd_topo_addr_subnet(const dd_topo_addr_t *addr, char *buf, size_t size)
{
    unsigned char bin[sizeof(struct in6_addr)];
    char text[INET6_ADDRSTRLEN];
    int bytes = addr->family == AF_INET ? 4 : 16;

    if (inet_pton(addr->family, addr->text, bin) != 1) {
        return -1;
    }
    for (int i = 0; i < bytes; i++) {
        int keep = addr->prefix - 8 * i;
        if (keep <= 0) {
            bin[i] = 0;
        } else if (keep < 8) {
            bin[i] &= (unsigned char)(0xff << (8 - keep));
        }
    }
    inet_ntop(addr->family, bin, text, sizeof(text));
    snprintf(buf, size, "%s/%d", text, addr->prefix);
    return 0;
}

int dd_topo_addr_is_local(const dd_topo_addr_t *addr)
{
    if (addr->family == AF_INET) {
        return strncmp(addr->text, "127.", 4) == 0;
    }
    return strcmp(addr->text, "::1") == 0 ||
           strncasecmp(addr->text, "fe80:", 5) == 0;
}
