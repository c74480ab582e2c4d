/*
 * ddtopo's report, for a person (text) or a program (one JSON object). Both
 * show the same facts: machine, NICs in the rank's order with the reason
 * for each, GPUs with their nearest NIC, the stream count, the backends and
 * codecs built in, what each backend is told of the
 * interface (src/backends/netdev.h, the modules' own formatting) and the
 * topology configuration. Printing only: every fact was computed before.
 */
#include "ddtopo.h"

#include "backends/netdev.h"
#include "compress/codec.h"
#include "core/json_write.h"
#include "topo/addrs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef DD_PKGLIBDIR
#define DD_PKGLIBDIR "/usr/local/lib/dreamddp"
#endif

/* The codecs built into the library, from its registry. */
static int ddtopo_compressors(char names[][64], int max)
{
    char list[1024];
    int n = 0;

    dd_codec_names(list, sizeof(list));
    for (char *p = strtok(list, ", "); p != NULL && n < max;
         p = strtok(NULL, ", ")) {
        snprintf(names[n++], 64, "%s", p);
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
    if (!nic->speed_known && nic->speed_source[0] != '\0') {
        size_t o = strlen(buf);
        snprintf(buf + o, size - o, " (estimated from %s)", nic->speed_source);
    } else if (!nic->speed_known) {
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
    char speed[160];

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

/* The device module's devices, as dd_init would see them. */
static void ddtopo_text_devices(FILE *out, const ddtopo_report_t *r)
{
    const ddtopo_devices_t *d = r->devices;

    if (!d->probed) {
        fprintf(out, "\ndevices: %s\n", d->why);
        return;
    }
    fprintf(out,
            "\ndevices (DREAMDDP_DEVICE=%s, loaded as dd_init does): %s: "
            "%s\n",
            dd_device_kind_names[d->kind], d->module[0] ? d->module : "none",
            d->why);
    for (int g = 0; g < d->n; g++) {
        const dd_device_info_t *i = &d->info[g];
        fprintf(out, "  device %d: %s", g, i->name);
        if (i->pci[0] != '\0') {
            fprintf(out, ", PCI %s", i->pci);
        }
        if (i->memory_bytes > 0) {
            fprintf(out, ", %zu MiB", i->memory_bytes >> 20);
        }
        if (i->major > 0) {
            fprintf(out, ", compute capability %d.%d", i->major, i->minor);
        }
        fputc('\n', out);
    }
}

/* What each backend makes of the count (a job uses the least any of its
 * ranks asks for; this is this rank's). */
static void ddtopo_text_stream_use(FILE *out, int streams)
{
    int threads, socks;

    fprintf(out, "  gloo: %d context%s, each its own TCP connections", streams,
            streams == 1 ? "" : "s");
    if (streams > 1) {
        fprintf(out,
                "; collectives of %zu MiB and more cut across them, each "
                "slice at least %zu MiB",
                2 * DD_NETDEV_GLOO_STRIPE_BYTES >> 20,
                DD_NETDEV_GLOO_STRIPE_BYTES >> 20);
    }
    fprintf(out, "\n  ucx: %d endpoint%s per peer", streams,
            streams == 1 ? "" : "s");
    if (streams > 1) {
        fprintf(out, "; the 1 MiB chunks of a large message spread across "
                     "them");
    }
    fputc('\n', out);
    if (dd_netdev_nccl_streams(streams, &threads, &socks)) {
        fprintf(out,
                "  nccl: NCCL_SOCKET_NTHREADS=%d NCCL_NSOCKS_PERTHREAD=%d, "
                "unless the user set either\n",
                threads, socks);
    } else {
        fprintf(out, "  nccl: NCCL's own socket threads (1 stream)\n");
    }
}

static void ddtopo_text_streams(FILE *out, const ddtopo_report_t *r)
{
    const dd_topo_choice_t *c = r->choice;

    fprintf(out, "\nstreams: %d ", c->streams);
    if (r->opts->num_streams > 0) {
        fprintf(out, "(DREAMDDP_NUM_STREAMS)\n");
    } else {
        fprintf(out, "(%d per %s NIC, shared by %d local rank%s)\n",
                dd_topo_streams_per_nic(c->kind, c->speed_mbps),
                dd_topo_kind_name(c->kind), r->local_size,
                r->local_size == 1 ? "" : "s");
    }
    ddtopo_text_stream_use(out, c->streams);
}

/* The backend modules as the registry finds them for dd_init. */
static void ddtopo_text_modules(FILE *out, const ddtopo_report_t *r)
{
    const ddtopo_backends_t *b = r->backends;
    char names[16][64];

    if (!b->probed) {
        fprintf(out, "\nbackends: %s\n", b->why);
    } else {
        fprintf(out,
                "\nbackends (DREAMDDP_BACKENDS=%s, loaded and queried as "
                "dd_init does, not started):\n",
                b->spec[0] ? b->spec : "(unset)");
    }
    for (int i = 0; i < b->n; i++) {
        const dd_backend_probe_t *p = &b->b[i];
        fprintf(out, "  %-5s %s: %s%s\n", p->name,
                p->available ? "available" : "unavailable",
                p->available ? p->path : p->why,
                !p->available && p->explicit_request
                    ? " (DREAMDDP_BACKENDS names it: dd_init fails)"
                    : "");
    }
    int n = ddtopo_compressors(names, 16);
    fprintf(out, "compressors:");
    for (int i = 0; i < n; i++) {
        fprintf(out, " %s", names[i]);
    }
    fprintf(out, " (built in)\n");
}

/* Whether a UCX resource ("tcp/eth0", "sysv/memory") is a network one. */
static int ddtopo_transport_net(const char *tl)
{
    const char *dev = strchr(tl, '/');
    return dev != NULL && strncmp(dev + 1, "memory", 6) != 0;
}

/* What UCX will use on the chosen interface. */
static void ddtopo_text_transports(FILE *out, const ddtopo_report_t *r)
{
    const ddtopo_transports_t *t = r->transports;

    if (!t->probed) {
        fprintf(out, "transports (UCX): %s\n", t->why);
        return;
    }
    fprintf(out,
            "transports (UCX %s, UCX_NET_DEVICES=%s, started as the UCX "
            "module starts it):\n",
            t->version, t->net_devices[0] ? t->net_devices : "(UCX's own)");
    for (int net = 1; net >= 0; net--) {
        int shown = 0;
        fprintf(out, "  %s:", net ? "network" : "within the host");
        for (int i = 0; i < t->n; i++) {
            if (ddtopo_transport_net(t->list[i]) == net) {
                fprintf(out, " %s", t->list[i]);
                shown++;
            }
        }
        fprintf(out, "%s\n", shown ? "" : " none");
    }
}

static void ddtopo_json_transports(dd_json_writer_t *w,
                                   const ddtopo_report_t *r)
{
    const ddtopo_transports_t *t = r->transports;

    dd_json_key(w, "ucx_transports");
    dd_json_object_begin(w, DD_JSON_INLINE);
    dd_json_key(w, "probed");
    dd_json_bool(w, t->probed);
    dd_json_key(w, "why");
    dd_json_string(w, t->probed ? NULL : t->why);
    dd_json_key(w, "version");
    dd_json_string(w, t->probed ? t->version : NULL);
    dd_json_key(w, "net_devices");
    dd_json_string(w, t->probed && t->net_devices[0] ? t->net_devices : NULL);
    dd_json_key(w, "list");
    dd_json_array_begin(w, DD_JSON_INLINE);
    for (int i = 0; i < t->n; i++) {
        dd_json_object_begin(w, DD_JSON_INLINE);
        dd_json_key(w, "name");
        dd_json_string(w, t->list[i]);
        dd_json_key(w, "network");
        dd_json_bool(w, ddtopo_transport_net(t->list[i]));
        dd_json_object_end(w);
    }
    dd_json_array_end(w);
    dd_json_object_end(w);
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
    ddtopo_text_devices(out, r);
    ddtopo_text_streams(out, r);
    ddtopo_text_modules(out, r);
    ddtopo_text_transports(out, r);
    ddtopo_text_env(out, r);
    ddtopo_text_config(out, r);
}

/* ---- JSON --------------------------------------------------------------- */

/* The layout the goldens keep: the top object and the lists of NICs, GPUs
 * and backends one entry a line, everything else inline. */

static void ddtopo_json_int_or_null(dd_json_writer_t *w, int v)
{
    if (v >= 0) {
        dd_json_int(w, v);
    } else {
        dd_json_null(w);
    }
}

static void ddtopo_json_str_member(dd_json_writer_t *w, const char *key,
                                   const char *value)
{
    dd_json_key(w, key);
    dd_json_string(w, value);
}

static void ddtopo_json_int_member(dd_json_writer_t *w, const char *key, int v)
{
    dd_json_key(w, key);
    dd_json_int(w, v);
}

static void ddtopo_json_nic(dd_json_writer_t *w, const ddtopo_report_t *r,
                            const dd_topo_cand_t *c)
{
    const dd_topo_nic_t *nic = &r->topo->nics[c->nic];
    char rdma[DD_TOPO_NAME_MAX + 16];

    snprintf(rdma, sizeof(rdma), "%s:%d", nic->rdma, nic->rdma_port);
    dd_json_object_begin(w, DD_JSON_INLINE);
    ddtopo_json_str_member(w, "name", nic->name);
    ddtopo_json_str_member(w, "kind", dd_topo_kind_name(nic->kind));
    ddtopo_json_str_member(w, "detail", nic->detail[0] ? nic->detail : NULL);
    ddtopo_json_str_member(w, "rdma", nic->rdma[0] ? rdma : NULL);
    ddtopo_json_str_member(w, "state", nic->state);
    ddtopo_json_int_member(w, "speed_mbps", nic->speed_mbps);
    dd_json_key(w, "speed_known");
    dd_json_bool(w, nic->speed_known);
    ddtopo_json_str_member(w, "speed_estimated_from",
                           nic->speed_source[0] ? nic->speed_source : NULL);
    dd_json_key(w, "mtu");
    ddtopo_json_int_or_null(w, nic->mtu > 0 ? nic->mtu : -1);
    dd_json_key(w, "numa");
    ddtopo_json_int_or_null(w, nic->loc.numa);
    ddtopo_json_str_member(w, "pci", nic->loc.pci[0] ? nic->loc.pci : NULL);
    dd_json_key(w, "addrs");
    dd_json_array_begin(w, DD_JSON_INLINE);
    for (int i = 0; i < nic->n_addrs; i++) {
        char a[DD_TOPO_ADDR_MAX + 8];
        snprintf(a, sizeof(a), "%s/%d", nic->addrs[i].text,
                 nic->addrs[i].prefix);
        dd_json_string(w, a);
    }
    dd_json_array_end(w);
    dd_json_key(w, "usable");
    dd_json_bool(w, c->usable);
    dd_json_key(w, "order");
    ddtopo_json_int_or_null(w, c->order > 0 ? c->order : -1);
    ddtopo_json_str_member(w, "why", c->why);
    dd_json_object_end(w);
}

static void ddtopo_json_devices(dd_json_writer_t *w, const ddtopo_report_t *r)
{
    const ddtopo_devices_t *d = r->devices;

    dd_json_key(w, "devices");
    dd_json_object_begin(w, DD_JSON_INLINE);
    dd_json_key(w, "probed");
    dd_json_bool(w, d->probed);
    ddtopo_json_str_member(w, "variable",
                           d->probed ? dd_device_kind_names[d->kind] : NULL);
    ddtopo_json_str_member(w, "module", d->module[0] ? d->module : NULL);
    ddtopo_json_str_member(w, "why", d->why);
    dd_json_key(w, "list");
    dd_json_array_begin(w, DD_JSON_INLINE);
    for (int g = 0; g < d->n; g++) {
        const dd_device_info_t *i = &d->info[g];
        dd_json_object_begin(w, DD_JSON_INLINE);
        ddtopo_json_int_member(w, "index", g);
        ddtopo_json_str_member(w, "name", i->name);
        ddtopo_json_str_member(w, "pci", i->pci[0] ? i->pci : NULL);
        dd_json_key(w, "memory_bytes");
        dd_json_uint(w, i->memory_bytes);
        dd_json_object_end(w);
    }
    dd_json_array_end(w);
    dd_json_object_end(w);
}

static void ddtopo_json_gpus(dd_json_writer_t *w, const ddtopo_report_t *r)
{
    dd_json_key(w, "gpus");
    dd_json_array_begin(w, DD_JSON_BLOCK);
    for (int g = 0; g < r->topo->n_gpus; g++) {
        const dd_topo_gpu_t *gpu = &r->topo->gpus[g];
        dd_json_object_begin(w, DD_JSON_INLINE);
        ddtopo_json_int_member(w, "index", gpu->index);
        ddtopo_json_str_member(w, "model", gpu->model);
        ddtopo_json_str_member(w, "pci", gpu->loc.pci[0] ? gpu->loc.pci : NULL);
        dd_json_key(w, "numa");
        ddtopo_json_int_or_null(w, gpu->loc.numa);
        ddtopo_json_str_member(
            w, "nearest_nic",
            r->gpu_nic[g] >= 0 ? r->topo->nics[r->gpu_nic[g]].name : NULL);
        dd_json_object_end(w);
    }
    dd_json_array_end(w);
}

static void ddtopo_json_modules(dd_json_writer_t *w, const ddtopo_report_t *r)
{
    const ddtopo_backends_t *b = r->backends;
    char names[16][64];

    dd_json_key(w, "backends_probed");
    dd_json_bool(w, b->probed);
    ddtopo_json_str_member(w, "backends_why", b->probed ? NULL : b->why);
    dd_json_key(w, "backends");
    dd_json_array_begin(w, DD_JSON_BLOCK);
    for (int i = 0; i < b->n; i++) {
        const dd_backend_probe_t *p = &b->b[i];
        dd_json_object_begin(w, DD_JSON_INLINE);
        ddtopo_json_str_member(w, "name", p->name);
        dd_json_key(w, "available");
        dd_json_bool(w, p->available);
        ddtopo_json_str_member(w, "path", p->path);
        ddtopo_json_str_member(w, "reason", p->available ? NULL : p->why);
        dd_json_key(w, "requested");
        dd_json_bool(w, p->explicit_request);
        dd_json_object_end(w);
    }
    dd_json_array_end(w);
    int n = ddtopo_compressors(names, 16);
    dd_json_key(w, "compressors");
    dd_json_array_begin(w, DD_JSON_INLINE);
    for (int i = 0; i < n; i++) {
        dd_json_object_begin(w, DD_JSON_INLINE);
        ddtopo_json_str_member(w, "name", names[i]);
        dd_json_key(w, "available");
        dd_json_bool(w, 1);
        dd_json_object_end(w);
    }
    dd_json_array_end(w);
}

/* ddtopo_text_stream_use's facts: Gloo's contexts and smallest slice,
 * UCX's endpoints per peer, and the NCCL variables the module sets. */
static void ddtopo_json_stream_use(dd_json_writer_t *w, int streams)
{
    int threads, socks;

    dd_json_key(w, "stream_use");
    dd_json_object_begin(w, DD_JSON_INLINE);
    ddtopo_json_int_member(w, "gloo_contexts", streams);
    ddtopo_json_int_member(w, "gloo_slice_min_bytes",
                           (int)DD_NETDEV_GLOO_STRIPE_BYTES);
    ddtopo_json_int_member(w, "ucx_endpoints_per_peer", streams);
    dd_json_key(w, "nccl_env");
    dd_json_object_begin(w, DD_JSON_INLINE);
    if (dd_netdev_nccl_streams(streams, &threads, &socks)) {
        ddtopo_json_int_member(w, "NCCL_SOCKET_NTHREADS", threads);
        ddtopo_json_int_member(w, "NCCL_NSOCKS_PERTHREAD", socks);
    }
    dd_json_object_end(w);
    dd_json_object_end(w);
}

static void ddtopo_json_choice(dd_json_writer_t *w, const ddtopo_report_t *r)
{
    const dd_topo_choice_t *c = r->choice;
    dd_netdev_setting_t env[DD_NETDEV_MAX];
    int n = ddtopo_backend_settings(c, env);

    dd_json_key(w, "chosen");
    dd_json_object_begin(w, DD_JSON_INLINE);
    ddtopo_json_str_member(w, "name", c->name);
    ddtopo_json_str_member(w, "kind", dd_topo_kind_name(c->kind));
    ddtopo_json_int_member(w, "speed_mbps", c->speed_mbps);
    dd_json_key(w, "gpu");
    ddtopo_json_int_or_null(w, c->gpu);
    ddtopo_json_str_member(w, "reason", c->reason);
    dd_json_object_end(w);
    ddtopo_json_int_member(w, "streams", c->streams);
    ddtopo_json_str_member(w, "streams_source",
                           r->opts->num_streams > 0 ? "DREAMDDP_NUM_STREAMS"
                                                    : "table");
    ddtopo_json_stream_use(w, c->streams);
    dd_json_key(w, "backend_env");
    dd_json_object_begin(w, DD_JSON_INLINE);
    for (int i = 0; i < n; i++) {
        ddtopo_json_str_member(w, env[i].name, env[i].value);
    }
    dd_json_object_end(w);
}

static void ddtopo_json_config(dd_json_writer_t *w, const ddtopo_report_t *r)
{
    char list[256];

    dd_topo_iflist_text(&r->opts->ifname, list, sizeof(list));
    dd_json_key(w, "config");
    dd_json_object_begin(w, DD_JSON_INLINE);
    ddtopo_json_str_member(w, "DREAMDDP_NET_IFNAME",
                           r->opts->ifname.n ? list : NULL);
    dd_json_key(w, "DREAMDDP_NUM_STREAMS");
    ddtopo_json_int_or_null(w, r->opts->num_streams);
    ddtopo_json_str_member(w, "DREAMDDP_SYSFS_ROOT", r->opts->sysfs_root);
    ddtopo_json_str_member(w, "DREAMDDP_TOPO_FILE", r->opts->topo_file);
    dd_json_object_end(w);
}

void ddtopo_print_json(FILE *out, const ddtopo_report_t *r)
{
    const dd_topo_t *topo = r->topo;
    dd_json_writer_t w;

    dd_json_writer_init(&w, out, 2);
    dd_json_object_begin(&w, DD_JSON_BLOCK);
    ddtopo_json_str_member(&w, "source", topo->source);
    dd_json_key(&w, "hwloc");
    dd_json_bool(&w, topo->hwloc);
    dd_json_key(&w, "machine");
    dd_json_object_begin(&w, DD_JSON_INLINE);
    ddtopo_json_int_member(&w, "packages", topo->packages);
    ddtopo_json_int_member(&w, "numa_nodes", topo->numa_nodes);
    ddtopo_json_int_member(&w, "cores", topo->cores);
    ddtopo_json_int_member(&w, "pus", topo->pus);
    dd_json_object_end(&w);
    ddtopo_json_int_member(&w, "local_rank", r->local_rank);
    ddtopo_json_int_member(&w, "local_size", r->local_size);
    dd_json_key(&w, "nics");
    dd_json_array_begin(&w, DD_JSON_BLOCK);
    for (int i = 0; i < topo->n_nics; i++) {
        ddtopo_json_nic(&w, r, &r->cands[i]);
    }
    dd_json_array_end(&w);
    ddtopo_json_choice(&w, r);
    ddtopo_json_gpus(&w, r);
    ddtopo_json_devices(&w, r);
    ddtopo_json_modules(&w, r);
    ddtopo_json_transports(&w, r);
    ddtopo_json_config(&w, r);
    dd_json_object_end(&w);
    fputc('\n', out);
}
