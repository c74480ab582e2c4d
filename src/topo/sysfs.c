/*
 * sysfs readers: the kind, state, speed, MTU and locality of network
 * interfaces, NVIDIA GPUs on the PCI bus, and CPU counts. Every path starts
 * with the root given by DREAMDDP_SYSFS_ROOT. Nothing here decides anything: a
 * missing or unreadable file leaves the field unknown.
 */
#include "topo/sysfs.h"
#include "core/log.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ARPHRD_* values of /sys/class/net/IF/type. */
#define DD_ARPHRD_ETHER 1
#define DD_ARPHRD_INFINIBAND 32
#define DD_ARPHRD_LOOPBACK 772

static void dd_topo_sysfs_path(char *path, size_t size, const char *root,
                               const char *fmt, va_list ap)
{
    int n = snprintf(path, size, "%s", root);
    vsnprintf(path + n, size - (size_t)n, fmt, ap);
}

/* Reads the first line of a sysfs file, without its newline. Returns 0, or
 * -1 when the file is missing or unreadable (some, like the speed of a
 * down link, fail on read). */
static int dd_topo_sysfs_read(char *buf, size_t size, const char *root,
                              const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int dd_topo_sysfs_read(char *buf, size_t size, const char *root,
                              const char *fmt, ...)
{
    char path[PATH_MAX];
    va_list ap;

    va_start(ap, fmt);
    dd_topo_sysfs_path(path, sizeof(path), root, fmt, ap);
    va_end(ap);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    char *line = fgets(buf, (int)size, f);
    fclose(f);
    if (line == NULL) {
        return -1;
    }
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

static int dd_topo_sysfs_exists(const char *root, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int dd_topo_sysfs_exists(const char *root, const char *fmt, ...)
{
    char path[PATH_MAX];
    struct stat st;
    va_list ap;

    va_start(ap, fmt);
    dd_topo_sysfs_path(path, sizeof(path), root, fmt, ap);
    va_end(ap);
    return stat(path, &st) == 0;
}

/* Reads an integer file; fallback when missing or not a number. */
static long dd_topo_sysfs_long(const char *root, long fallback,
                               const char *name, const char *file)
{
    char buf[64], *end;

    if (dd_topo_sysfs_read(buf, sizeof(buf), root, "/sys/class/net/%s/%s", name,
                           file) != 0) {
        return fallback;
    }
    long v = strtol(buf, &end, 0);
    return end == buf ? fallback : v;
}

static int dd_topo_name_cmp(const void *a, const void *b)
{
    return strverscmp((const char *)a, (const char *)b);
}

dd_status_t dd_topo_sysfs_list_nics(const char *root,
                                    char (**names_p)[DD_TOPO_NAME_MAX],
                                    int *n_p)
{
    char path[PATH_MAX];
    char(*names)[DD_TOPO_NAME_MAX] = NULL;
    int n = 0;
    struct dirent *de;

    snprintf(path, sizeof(path), "%s/sys/class/net", root);
    DIR *dir = opendir(path);
    if (dir == NULL) {
        return DD_ERR_IO;
    }
    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.' || strlen(de->d_name) >= DD_TOPO_NAME_MAX) {
            continue;
        }
        void *grown = realloc(names, sizeof(*names) * (size_t)(n + 1));
        if (grown == NULL) {
            closedir(dir);
            free(names);
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                            "no memory for the interfaces under %s (%d found)",
                            path, n);
        }
        names = grown;
        snprintf(names[n++], DD_TOPO_NAME_MAX, "%s", de->d_name);
    }
    closedir(dir);
    if (n > 0) {
        qsort(names, (size_t)n, sizeof(*names), dd_topo_name_cmp);
    }
    *names_p = names;
    *n_p = n;
    return DD_OK;
}

static int dd_topo_is_pci_id(const char *s, size_t len)
{
    /* dddd:bb:dd.f */
    static const char pattern[] = "xxxx:xx:xx.x";

    if (len != sizeof(pattern) - 1) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        if (pattern[i] == 'x' ? !isxdigit((unsigned char)s[i])
                              : s[i] != pattern[i]) {
            return 0;
        }
    }
    return 1;
}

int dd_topo_sysfs_parse_pci_path(const char *path, dd_topo_loc_t *loc)
{
    char ids[DD_TOPO_DEPTH_MAX + 1][DD_TOPO_PCI_MAX];
    int n = 0;

    for (const char *p = path; *p != '\0';) {
        size_t len = strcspn(p, "/");
        if (dd_topo_is_pci_id(p, len)) {
            if (n == DD_TOPO_DEPTH_MAX + 1) {
                memmove(ids[0], ids[1], sizeof(ids[0]) * DD_TOPO_DEPTH_MAX);
                n--;
            }
            memcpy(ids[n], p, len);
            ids[n++][len] = '\0';
        }
        p += len + (p[len] == '/');
    }
    if (n == 0) {
        return -1;
    }
    snprintf(loc->pci, sizeof(loc->pci), "%s", ids[n - 1]);
    loc->n_bridges = n - 1;
    memcpy(loc->bridges, ids, sizeof(ids[0]) * (size_t)(n - 1));
    return 0;
}

/* The PCI location of a sysfs device directory (".../device"): from the
 * link's target when it resolves into /sys/devices, else from the
 * PCI_SLOT_NAME of its uevent (fixture trees copied without links). */
static void dd_topo_sysfs_loc(const char *root, const char *dev,
                              dd_topo_loc_t *loc)
{
    char path[PATH_MAX], real[PATH_MAX], buf[128];

    loc->numa = -1;
    snprintf(path, sizeof(path), "%s%s", root, dev);
    if (realpath(path, real) == NULL) {
        return;
    }
    if (dd_topo_sysfs_parse_pci_path(real, loc) != 0) {
        int len = snprintf(path, sizeof(path), "%s/uevent", real);
        FILE *f = len < (int)sizeof(path) ? fopen(path, "r") : NULL;
        while (f != NULL && fgets(buf, sizeof(buf), f) != NULL) {
            buf[strcspn(buf, "\n")] = '\0';
            if (strncmp(buf, "PCI_SLOT_NAME=", 14) == 0 &&
                dd_topo_is_pci_id(buf + 14, strlen(buf + 14))) {
                snprintf(loc->pci, sizeof(loc->pci), "%s", buf + 14);
            }
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    if (dd_topo_sysfs_read(buf, sizeof(buf), "", "%s/numa_node", real) == 0) {
        loc->numa = atoi(buf) < 0 ? -1 : atoi(buf);
    }
}

/* Names that mark a host-side virtual interface, and what they are. */
static const char *dd_topo_virtual_prefix(const char *name)
{
    static const char *const prefixes[] = {"docker", "virbr", "veth",    "br-",
                                           "vnet",   "cni",   "flannel", "cali",
                                           "vxlan",  "lxcbr", "lxdbr",   NULL};

    for (int i = 0; prefixes[i] != NULL; i++) {
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) {
            return prefixes[i];
        }
    }
    return NULL;
}

/* A host-side virtual interface: a named container link, a bridge, a port
 * of a bridge, a tun/tap. A veth inside a namespace (its own link, named
 * like eth0) is not one: it is that host's Ethernet. */
static const char *dd_topo_sysfs_virtual(const char *root, const char *name)
{
    const char *prefix = dd_topo_virtual_prefix(name);

    if (prefix != NULL) {
        return strcmp(prefix, "br-") == 0 ? "bridge" : prefix;
    }
    if (dd_topo_sysfs_exists(root, "/sys/class/net/%s/bridge", name)) {
        return "bridge";
    }
    if (dd_topo_sysfs_exists(root, "/sys/class/net/%s/brport", name)) {
        return "bridge port";
    }
    if (dd_topo_sysfs_exists(root, "/sys/class/net/%s/tun_flags", name)) {
        return "tun/tap";
    }
    return NULL;
}

/* The RDMA device behind a netdev (IPoIB or RoCE) and its port. */
static void dd_topo_sysfs_rdma(const char *root, dd_topo_nic_t *nic)
{
    char path[PATH_MAX];
    struct dirent *de;

    snprintf(path, sizeof(path), "%s/sys/class/net/%s/device/infiniband", root,
             nic->name);
    DIR *dir = opendir(path);
    if (dir == NULL) {
        return;
    }
    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] != '.' && nic->rdma[0] == '\0') {
            snprintf(nic->rdma, sizeof(nic->rdma), "%.63s", de->d_name);
        }
    }
    closedir(dir);
    if (nic->rdma[0] != '\0') {
        nic->rdma_port =
            (int)dd_topo_sysfs_long(root, 0, nic->name, "dev_port") + 1;
    }
}

int dd_topo_sysfs_parse_rate(const char *text)
{
    char *end;
    double gbps = strtod(text, &end);

    if (end == text || gbps <= 0 || strncmp(end, " Gb/sec", 7) != 0) {
        return 0;
    }
    return (int)(gbps * 1000.0 + 0.5);
}

static void dd_topo_sysfs_speed(const char *root, dd_topo_nic_t *nic)
{
    char buf[64];
    long mbps = -1;

    if (nic->kind == DD_TOPO_KIND_INFINIBAND && nic->rdma[0] != '\0' &&
        dd_topo_sysfs_read(buf, sizeof(buf), root,
                           "/sys/class/infiniband/%s/ports/%d/rate", nic->rdma,
                           nic->rdma_port) == 0) {
        mbps = dd_topo_sysfs_parse_rate(buf);
    }
    if (mbps <= 0) {
        mbps = dd_topo_sysfs_long(root, -1, nic->name, "speed");
    }
    nic->speed_known = mbps > 0 && mbps < INT_MAX;
    nic->speed_mbps = nic->speed_known ? (int)mbps : DD_TOPO_DEFAULT_SPEED_MBPS;
}

static dd_topo_kind_t dd_topo_sysfs_kind(const char *root, dd_topo_nic_t *nic)
{
    long type = dd_topo_sysfs_long(root, -1, nic->name, "type");
    const char *virt;

    if (type == DD_ARPHRD_LOOPBACK) {
        return DD_TOPO_KIND_LOOPBACK;
    }
    if (type == DD_ARPHRD_INFINIBAND) {
        return DD_TOPO_KIND_INFINIBAND;
    }
    if ((virt = dd_topo_sysfs_virtual(root, nic->name)) != NULL) {
        snprintf(nic->detail, sizeof(nic->detail), "%s", virt);
        return DD_TOPO_KIND_VIRTUAL;
    }
    if (dd_topo_sysfs_exists(root, "/sys/class/net/%s/wireless", nic->name) ||
        dd_topo_sysfs_exists(root, "/sys/class/net/%s/phy80211", nic->name)) {
        return DD_TOPO_KIND_WIFI;
    }
    if (type == DD_ARPHRD_ETHER) {
        return nic->rdma[0] != '\0' ? DD_TOPO_KIND_ROCE : DD_TOPO_KIND_ETHERNET;
    }
    return DD_TOPO_KIND_OTHER;
}

void dd_topo_sysfs_nic(const char *root, dd_topo_nic_t *nic)
{
    char dev[PATH_MAX];

    dd_topo_sysfs_rdma(root, nic);
    nic->kind = dd_topo_sysfs_kind(root, nic);
    if (dd_topo_sysfs_read(nic->state, sizeof(nic->state), root,
                           "/sys/class/net/%s/operstate", nic->name) != 0) {
        snprintf(nic->state, sizeof(nic->state), "unknown");
    }
    nic->mtu = (int)dd_topo_sysfs_long(root, 0, nic->name, "mtu");
    dd_topo_sysfs_speed(root, nic);
    snprintf(dev, sizeof(dev), "/sys/class/net/%s/device", nic->name);
    dd_topo_sysfs_loc(root, dev, &nic->loc);
}

static int dd_topo_gpu_cmp(const void *a, const void *b)
{
    return strcmp(((const dd_topo_gpu_t *)a)->loc.pci,
                  ((const dd_topo_gpu_t *)b)->loc.pci);
}

/* Whether a PCI device is an NVIDIA display or 3D controller. */
static int dd_topo_sysfs_is_gpu(const char *root, const char *id, char *model,
                                size_t size)
{
    char vendor[32], class[32], device[32];

    if (dd_topo_sysfs_read(vendor, sizeof(vendor), root,
                           "/sys/bus/pci/devices/%s/vendor", id) != 0 ||
        dd_topo_sysfs_read(class, sizeof(class), root,
                           "/sys/bus/pci/devices/%s/class", id) != 0) {
        return 0;
    }
    if (strtol(vendor, NULL, 16) != 0x10de ||
        (strtol(class, NULL, 16) >> 16) != 0x03) {
        return 0;
    }
    if (dd_topo_sysfs_read(device, sizeof(device), root,
                           "/sys/bus/pci/devices/%s/device", id) != 0) {
        snprintf(device, sizeof(device), "0x0000");
    }
    snprintf(model, size, "10de:%04lx", strtol(device, NULL, 16));
    return 1;
}

dd_status_t dd_topo_sysfs_gpus(const char *root, dd_topo_gpu_t **gpus_p,
                               int *n_p)
{
    char path[PATH_MAX], model[DD_TOPO_NAME_MAX];
    dd_topo_gpu_t *gpus = NULL;
    struct dirent *de;
    int n = 0;

    *gpus_p = NULL;
    *n_p = 0;
    snprintf(path, sizeof(path), "%s/sys/bus/pci/devices", root);
    DIR *dir = opendir(path);
    if (dir == NULL) {
        return DD_OK;
    }
    while ((de = readdir(dir)) != NULL) {
        if (!dd_topo_is_pci_id(de->d_name, strlen(de->d_name)) ||
            !dd_topo_sysfs_is_gpu(root, de->d_name, model, sizeof(model))) {
            continue;
        }
        void *grown = realloc(gpus, sizeof(*gpus) * (size_t)(n + 1));
        if (grown == NULL) {
            closedir(dir);
            free(gpus);
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                            "no memory for the GPUs under "
                            "%s/sys/bus/pci/devices (%d found)",
                            root, n);
        }
        gpus = grown;
        memset(&gpus[n], 0, sizeof(gpus[n]));
        snprintf(gpus[n].model, sizeof(gpus[n].model), "%s", model);
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", de->d_name);
        dd_topo_sysfs_loc(root, path, &gpus[n].loc);
        snprintf(gpus[n].loc.pci, sizeof(gpus[n].loc.pci), "%s", de->d_name);
        n++;
    }
    closedir(dir);
    if (n > 0) {
        qsort(gpus, (size_t)n, sizeof(*gpus), dd_topo_gpu_cmp);
    }
    for (int i = 0; i < n; i++) {
        gpus[i].index = i;
    }
    *gpus_p = gpus;
    *n_p = n;
    return DD_OK;
}

/* Counts entries of dir named prefix followed by digits. */
static int dd_topo_sysfs_count(const char *root, const char *dir_name,
                               const char *prefix, int *ids, int max)
{
    char path[PATH_MAX];
    struct dirent *de;
    size_t plen = strlen(prefix);
    int n = 0;

    snprintf(path, sizeof(path), "%s%s", root, dir_name);
    DIR *dir = opendir(path);
    if (dir == NULL) {
        return 0;
    }
    while ((de = readdir(dir)) != NULL) {
        if (strncmp(de->d_name, prefix, plen) == 0 &&
            isdigit((unsigned char)de->d_name[plen]) &&
            strspn(de->d_name + plen, "0123456789") ==
                strlen(de->d_name + plen)) {
            if (ids != NULL && n < max) {
                ids[n] = atoi(de->d_name + plen);
            }
            n++;
        }
    }
    closedir(dir);
    return n;
}

void dd_topo_sysfs_cpus(const char *root, dd_topo_t *topo)
{
    enum { MAX_CPUS = 4096 };
    static const char cpu_dir[] = "/sys/devices/system/cpu";
    int *ids = malloc(sizeof(int) * MAX_CPUS);
    long *keys = malloc(sizeof(long) * MAX_CPUS * 2);
    char buf[32];

    topo->numa_nodes =
        dd_topo_sysfs_count(root, "/sys/devices/system/node", "node", NULL, 0);
    if (ids == NULL || keys == NULL) {
        goto out_free;
    }
    int n = dd_topo_sysfs_count(root, cpu_dir, "cpu", ids, MAX_CPUS);
    n = n < MAX_CPUS ? n : MAX_CPUS;
    int n_pkg = 0, n_core = 0;
    for (int i = 0; i < n; i++) {
        long pkg = -1, core = -1;
        if (dd_topo_sysfs_read(buf, sizeof(buf), root,
                               "%s/cpu%d/topology/physical_package_id", cpu_dir,
                               ids[i]) == 0) {
            pkg = atol(buf);
        }
        if (dd_topo_sysfs_read(buf, sizeof(buf), root,
                               "%s/cpu%d/topology/core_id", cpu_dir,
                               ids[i]) == 0) {
            core = atol(buf);
        }
        if (pkg < 0 || core < 0) {
            continue;
        }
        int new_pkg = 1, new_core = 1;
        for (int j = 0; j < n_core; j++) {
            new_pkg &= keys[2 * j] != pkg;
            new_core &= !(keys[2 * j] == pkg && keys[2 * j + 1] == core);
        }
        n_pkg += new_pkg;
        if (new_core) {
            keys[2 * n_core] = pkg;
            keys[2 * n_core + 1] = core;
            n_core++;
        }
    }
    topo->pus = n;
    topo->packages = n_pkg;
    topo->cores = n_core;
out_free:
    free(keys);
    free(ids);
}
