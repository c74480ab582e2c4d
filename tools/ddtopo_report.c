/*
 * ddtopo's report, for a person (text) or a program (one JSON object). Both
 * show the same facts: machine, NICs in the rank's order with the reason
 * for each, GPUs with their nearest NIC, the stream count, the backends and
 * compressors that could be loaded, what each backend is told of the
 * interface (src/backends/netdev.h, the modules' own formatting) and the
 * topology configuration. Printing only: every fact was computed before.
 */
#include "ddtopo.h"

#include "backends/netdev.h"
#include "topo/addrs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef DD_PKGLIBDIR
#define DD_PKGLIBDIR "/usr/local/lib/dreamddp"
#endif

static const char *const ddtopo_backends[] = {"ucx", "gloo", "nccl", NULL};

/* Whether a backend module exists, and the sentence that says so. */
static int ddtopo_backend(const char *name, char *why, size_t size)
{
    char path[512];
    struct stat st;

    snprintf(path, sizeof(path), "%s/dd_backend_%s.so", DD_PKGLIBDIR, name);
    if (stat(path, &st) == 0) {
        snprintf(why, size, "module %s present (ddtopo does not load it)",
                 path);
        return 1;
    }
    snprintf(why, size, "not built yet: no %s", path);
    return 0;
}

/* Compressor modules (dd_compress_*.so) next to the backends. */
static int ddtopo_compressors(char names[][64], int max)
{
    DIR *dir = opendir(DD_PKGLIBDIR);
    struct dirent *de;
    int n = 0;

    while (dir != NULL && (de = readdir(dir)) != NULL && n < max) {
        size_t len = strlen(de->d_name);
        if (strncmp(de->d_name, "dd_compress_", 12) == 0 && len > 15 &&
            len < 64 + 12 && strcmp(de->d_name + len - 3, ".so") == 0) {
            snprintf(names[n++], 64, "%.*s", (int)(len - 15), de->d_name + 12);
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
    return n;
}

static void ddtopo_speed(const dd_topo_nic_t *nic, char *buf, size_t size)
{
    int m = nic->speed_mbps;

    if (m % 1000 == 0) {
        snprintf(buf, size, "%d Gb/s", m / 1000);
    } else if (m > 1000) {
        snprintf(buf, size, "%.1f Gb/s", m / 1000.0);
    } else {
        snprintf(buf, size, "%d Mb/s", m);
    }
    if (!nic->speed_known) {
        size_t o = strlen(buf);
        snprintf(buf + o, size - o, " (unknown, %d Mb/s assumed)",
                 DD_TOPO_DEFAULT_SPEED_MBPS);
    }
}

/* "2 packages", "1 package", "? packages" (unknown). */
static void ddtopo_count(FILE *out, int n, const char *one, const char *many,
                         const char *sep)
{
    if (n > 0) {
        fprintf(out, "%d %s%s", n, n == 1 ? one : many, sep);
    } else {
        fprintf(out, "? %s%s", many, sep);
    }
}

static void ddtopo_text_nic(FILE *out, const ddtopo_report_t *r,
                            const dd_topo_cand_t *c)
{
    const dd_topo_nic_t *nic = &r->topo->nics[c->nic];
    char speed[64];

    ddtopo_speed(nic, speed, sizeof(speed));
    if (c->order > 0) {
        fprintf(out, "  %2d. %s", c->order, nic->name);
    } else {
        fprintf(out, "   -  %s", nic->name);
    }
    if (nic->rdma[0] != '\0') {
        fprintf(out, " (%s:%d)", nic->rdma, nic->rdma_port);
    }
    fprintf(out, ": %s", dd_topo_kind_name(nic->kind));
    if (nic->detail[0] != '\0') {
        fprintf(out, " (%s)", nic->detail);
    }
    fprintf(out, ", %s, %s", speed, nic->state);
    if (nic->mtu > 0) {
        fprintf(out, ", MTU %d", nic->mtu);
    }
    if (nic->loc.numa >= 0) {
        fprintf(out, ", NUMA %d", nic->loc.numa);
    }
    if (nic->loc.pci[0] != '\0') {
        fprintf(out, ", PCI %s", nic->loc.pci);
    }
    fprintf(out, "\n       addresses:");
    for (int i = 0; i < nic->n_addrs; i++) {
        fprintf(out, " %s/%d", nic->addrs[i].text, nic->addrs[i].prefix);
    }
    fprintf(out, "%s\n", nic->n_addrs ? "" : " none");
    fprintf(out, "       %s: %s\n",
            c->order == 1 ? "chosen"
            : c->order    ? "not chosen"
                          : "not usable",
            c->why);
}

static void ddtopo_text_gpus(FILE *out, const ddtopo_report_t *r)
{
    const dd_topo_t *topo = r->topo;

    if (topo->n_gpus == 0) {
        fprintf(out, "\nGPUs: none\n");
        return;
    }
    fprintf(out, "\nGPUs (numbered in PCI bus order, as CUDA_DEVICE_ORDER="
                 "PCI_BUS_ID):\n");
    for (int g = 0; g < topo->n_gpus; g++) {
        const dd_topo_gpu_t *gpu = &topo->gpus[g];
        fprintf(out, "  GPU %d: %s, PCI %s", gpu->index, gpu->model,
                gpu->loc.pci);
        if (gpu->loc.numa >= 0) {
            fprintf(out, ", NUMA %d", gpu->loc.numa);
        }
        int nic = r->gpu_nic[g];
        if (nic < 0) {
            fprintf(out, ", no usable NIC\n");
            continue;
        }
        int near = dd_topo_proximity(&topo->nics[nic].loc, &gpu->loc);
        fprintf(out, ", nearest NIC %s (%s)\n", topo->nics[nic].name,
                near >= 2   ? "same PCI switch"
                : near == 1 ? "same NUMA node"
                            : "not local");
    }
}

static void ddtopo_text_streams(FILE *out, const ddtopo_report_t *r)
{
    const dd_topo_choice_t *c = r->choice;

    fprintf(out, "\nstreams: %d ", c->streams);
    if (r->opts->num_streams > 0) {
        fprintf(out, "(DREAMDDP_NUM_STREAMS)\n");
        return;
    }
    fprintf(out, "(%d per %s NIC, shared by %d local rank%s)\n",
            dd_topo_streams_per_nic(c->kind, c->speed_mbps),
            dd_topo_kind_name(c->kind), r->local_size,
            r->local_size == 1 ? "" : "s");
}

static void ddtopo_text_modules(FILE *out)
{
    char why[600], names[16][64];

    fprintf(out, "\nbackends:\n");
    for (int i = 0; ddtopo_backends[i] != NULL; i++) {
        int ok = ddtopo_backend(ddtopo_backends[i], why, sizeof(why));
        fprintf(out, "  %-5s %s: %s\n", ddtopo_backends[i],
                ok ? "available" : "unavailable", why);
    }
    int n = ddtopo_compressors(names, 16);
    fprintf(out, "compressors:");
    for (int i = 0; i < n; i++) {
        fprintf(out, " %s", names[i]);
    }
    fprintf(out, "%s\n",
            n ? ""
              : " none (not built yet: no dd_compress_*.so in " DD_PKGLIBDIR
                ")");
}

/* What the backend modules make of the choice, each named by the variable
 * with which a user overrides it. */
static int ddtopo_backend_settings(const dd_topo_choice_t *c,
                                   dd_netdev_setting_t env[DD_NETDEV_MAX])
{
    return dd_netdev_settings(c->name[0] != '\0' ? c->name : NULL,
                              dd_topo_choice_rdma(c), c->rdma_port, env);
}

static void ddtopo_text_env(FILE *out, const ddtopo_report_t *r)
{
    dd_netdev_setting_t env[DD_NETDEV_MAX];
    int n = ddtopo_backend_settings(r->choice, env);

    fprintf(out, "\nbackend settings (each module's own, unless the user set "
                 "the variable):\n");
    for (int i = 0; i < n; i++) {
        fprintf(out, "  %s=%s\n", env[i].name, env[i].value);
    }
}

static void ddtopo_text_config(FILE *out, const ddtopo_report_t *r)
{
    const dd_topo_opts_t *o = r->opts;
    char list[256];

    dd_topo_iflist_text(&o->ifname, list, sizeof(list));
    fprintf(out, "\nconfiguration (ddtopo --config lists every variable):\n");
    fprintf(out, "  DREAMDDP_NET_IFNAME=%s\n", o->ifname.n ? list : "(unset)");
    if (o->num_streams > 0) {
        fprintf(out, "  DREAMDDP_NUM_STREAMS=%d\n", o->num_streams);
    } else {
        fprintf(out, "  DREAMDDP_NUM_STREAMS=(unset)\n");
    }
    fprintf(out, "  DREAMDDP_SYSFS_ROOT=%s\n",
            o->sysfs_root ? o->sysfs_root : "(unset)");
    fprintf(out, "  DREAMDDP_TOPO_FILE=%s\n",
            o->topo_file ? o->topo_file : "(unset)");
}

void ddtopo_print_text(FILE *out, const ddtopo_report_t *r)
{
    const dd_topo_t *topo = r->topo;

    fprintf(out, "topology: %s\nmachine: ", topo->source);
    ddtopo_count(out, topo->packages, "package", "packages", ", ");
    ddtopo_count(out, topo->numa_nodes, "NUMA node", "NUMA nodes", ", ");
    ddtopo_count(out, topo->cores, "core", "cores", ", ");
    ddtopo_count(out, topo->pus, "hardware thread", "hardware threads", "\n");
    fprintf(out, "\nNICs, in the order local rank %d prefers", r->local_rank);
    if (r->gpu >= 0) {
        fprintf(out, " (its GPU: %d)", r->gpu);
    }
    fprintf(out, ":\n");
    for (int i = 0; i < topo->n_nics; i++) {
        ddtopo_text_nic(out, r, &r->cands[i]);
    }
    fprintf(out, "\nchosen: %s: %s\n", r->choice->name, r->choice->reason);
    ddtopo_text_gpus(out, r);
    ddtopo_text_streams(out, r);
    ddtopo_text_modules(out);
    ddtopo_text_env(out, r);
    ddtopo_text_config(out, r);
}

/* ---- JSON --------------------------------------------------------------- */

static void ddtopo_json_str(FILE *out, const char *s)
{
    if (s == NULL) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            fprintf(out, "\\%c", ch);
        } else if (ch < 0x20) {
            fprintf(out, "\\u%04x", ch);
        } else {
            fputc(ch, out);
        }
    }
    fputc('"', out);
}

static void ddtopo_json_int_or_null(FILE *out, int v)
{
    if (v >= 0) {
        fprintf(out, "%d", v);
    } else {
        fputs("null", out);
    }
}

static void ddtopo_json_nic(FILE *out, const ddtopo_report_t *r,
                            const dd_topo_cand_t *c)
{
    const dd_topo_nic_t *nic = &r->topo->nics[c->nic];
    char rdma[DD_TOPO_NAME_MAX + 16];

    fprintf(out, "    {\"name\": ");
    ddtopo_json_str(out, nic->name);
    fprintf(out, ", \"kind\": ");
    ddtopo_json_str(out, dd_topo_kind_name(nic->kind));
    fprintf(out, ", \"detail\": ");
    ddtopo_json_str(out, nic->detail[0] ? nic->detail : NULL);
    snprintf(rdma, sizeof(rdma), "%s:%d", nic->rdma, nic->rdma_port);
    fprintf(out, ", \"rdma\": ");
    ddtopo_json_str(out, nic->rdma[0] ? rdma : NULL);
    fprintf(out, ", \"state\": ");
    ddtopo_json_str(out, nic->state);
    fprintf(out, ", \"speed_mbps\": %d, \"speed_known\": %s, \"mtu\": ",
            nic->speed_mbps, nic->speed_known ? "true" : "false");
    ddtopo_json_int_or_null(out, nic->mtu > 0 ? nic->mtu : -1);
    fprintf(out, ", \"numa\": ");
    ddtopo_json_int_or_null(out, nic->loc.numa);
    fprintf(out, ", \"pci\": ");
    ddtopo_json_str(out, nic->loc.pci[0] ? nic->loc.pci : NULL);
    fprintf(out, ", \"addrs\": [");
    for (int i = 0; i < nic->n_addrs; i++) {
        char a[DD_TOPO_ADDR_MAX + 8];
        snprintf(a, sizeof(a), "%s/%d", nic->addrs[i].text,
                 nic->addrs[i].prefix);
        fprintf(out, "%s", i ? ", " : "");
        ddtopo_json_str(out, a);
    }
    fprintf(out,
            "], \"usable\": %s, \"order\": ", c->usable ? "true" : "false");
    ddtopo_json_int_or_null(out, c->order > 0 ? c->order : -1);
    fprintf(out, ", \"why\": ");
    ddtopo_json_str(out, c->why);
    fprintf(out, "}");
}

static void ddtopo_json_gpus(FILE *out, const ddtopo_report_t *r)
{
    fprintf(out, "  \"gpus\": [");
    for (int g = 0; g < r->topo->n_gpus; g++) {
        const dd_topo_gpu_t *gpu = &r->topo->gpus[g];
        fprintf(out, "%s\n    {\"index\": %d, \"model\": ", g ? "," : "",
                gpu->index);
        ddtopo_json_str(out, gpu->model);
        fprintf(out, ", \"pci\": ");
        ddtopo_json_str(out, gpu->loc.pci[0] ? gpu->loc.pci : NULL);
        fprintf(out, ", \"numa\": ");
        ddtopo_json_int_or_null(out, gpu->loc.numa);
        fprintf(out, ", \"nearest_nic\": ");
        ddtopo_json_str(
            out, r->gpu_nic[g] >= 0 ? r->topo->nics[r->gpu_nic[g]].name : NULL);
        fprintf(out, "}");
    }
    fprintf(out, "%s],\n", r->topo->n_gpus ? "\n  " : "");
}

static void ddtopo_json_modules(FILE *out)
{
    char why[600], names[16][64];

    fprintf(out, "  \"backends\": [");
    for (int i = 0; ddtopo_backends[i] != NULL; i++) {
        int ok = ddtopo_backend(ddtopo_backends[i], why, sizeof(why));
        fprintf(out,
                "%s\n    {\"name\": \"%s\", \"available\": %s, "
                "\"reason\": ",
                i ? "," : "", ddtopo_backends[i], ok ? "true" : "false");
        ddtopo_json_str(out, why);
        fprintf(out, "}");
    }
    int n = ddtopo_compressors(names, 16);
    fprintf(out, "\n  ],\n  \"compressors\": [");
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s{\"name\": ", i ? ", " : "");
        ddtopo_json_str(out, names[i]);
        fprintf(out, ", \"available\": true}");
    }
    fprintf(out, "],\n  \"compressors_note\": ");
    ddtopo_json_str(
        out, n ? NULL : "not built yet: no dd_compress_*.so in " DD_PKGLIBDIR);
    fprintf(out, ",\n");
}

static void ddtopo_json_choice(FILE *out, const ddtopo_report_t *r)
{
    const dd_topo_choice_t *c = r->choice;
    dd_netdev_setting_t env[DD_NETDEV_MAX];
    int n = ddtopo_backend_settings(c, env);

    fprintf(out, "  \"chosen\": {\"name\": ");
    ddtopo_json_str(out, c->name);
    fprintf(out, ", \"kind\": ");
    ddtopo_json_str(out, dd_topo_kind_name(c->kind));
    fprintf(out, ", \"speed_mbps\": %d, \"gpu\": ", c->speed_mbps);
    ddtopo_json_int_or_null(out, c->gpu);
    fprintf(out, ", \"reason\": ");
    ddtopo_json_str(out, c->reason);
    fprintf(out, "},\n  \"streams\": %d,\n  \"streams_source\": \"%s\",\n",
            c->streams, r->opts->num_streams > 0 ? "DREAMDDP_NUM_STREAMS" : "table");
    fprintf(out, "  \"backend_env\": {");
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s\"%s\": ", i ? ", " : "", env[i].name);
        ddtopo_json_str(out, env[i].value);
    }
    fprintf(out, "},\n");
}

void ddtopo_print_json(FILE *out, const ddtopo_report_t *r)
{
    const dd_topo_t *topo = r->topo;
    char list[256];

    fprintf(out, "{\n  \"source\": ");
    ddtopo_json_str(out, topo->source);
    fprintf(out, ",\n  \"hwloc\": %s,\n", topo->hwloc ? "true" : "false");
    fprintf(out,
            "  \"machine\": {\"packages\": %d, \"numa_nodes\": %d, "
            "\"cores\": %d, \"pus\": %d},\n",
            topo->packages, topo->numa_nodes, topo->cores, topo->pus);
    fprintf(out, "  \"local_rank\": %d,\n  \"local_size\": %d,\n",
            r->local_rank, r->local_size);
    fprintf(out, "  \"nics\": [");
    for (int i = 0; i < topo->n_nics; i++) {
        fprintf(out, "%s\n", i ? "," : "");
        ddtopo_json_nic(out, r, &r->cands[i]);
    }
    fprintf(out, "\n  ],\n");
    ddtopo_json_choice(out, r);
    ddtopo_json_gpus(out, r);
    ddtopo_json_modules(out);
    dd_topo_iflist_text(&r->opts->ifname, list, sizeof(list));
    fprintf(out, "  \"config\": {\"DREAMDDP_NET_IFNAME\": ");
    ddtopo_json_str(out, r->opts->ifname.n ? list : NULL);
    fprintf(out, ", \"DREAMDDP_NUM_STREAMS\": ");
    ddtopo_json_int_or_null(out, r->opts->num_streams);
    fprintf(out, ", \"DREAMDDP_SYSFS_ROOT\": ");
    ddtopo_json_str(out, r->opts->sysfs_root);
    fprintf(out, ", \"DREAMDDP_TOPO_FILE\": ");
    ddtopo_json_str(out, r->opts->topo_file);
    fprintf(out, "}\n}\n");
}
