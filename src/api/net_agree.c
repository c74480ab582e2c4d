/*
 * The network step of dd_init: the topology probes and chooses this rank's
 * interface, then the ranks agree through the store on which interfaces
 * reach each other (src/topo never talks to the store). A record is text
 * ("host ID", "error MSG", "if NAME KIND SUBNET,SUBNET") so that a store
 * dump can be read by a person. Only subnets decide reachability; loopback
 * and link-local addresses reach nothing off the host. Backends learn the
 * outcome from their services struct, never from a variable set here.
 */
#include "api/net_agree.h"
#include "core/log.h"
#include "topo/addrs.h"
#include "topo/probe.h"
#include "topo/topo_config.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void dd_net_host_id(char *buf, size_t size)
{
    char host[256] = "", ns[64] = "";

    gethostname(host, sizeof(host) - 1);
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    ns[n > 0 ? n : 0] = '\0';
    snprintf(buf, size, "%s|%s", host, ns);
}

static size_t dd_net_encode_if(const dd_topo_nic_t *nic, char *buf, size_t size)
{
    char subnet[64];
    int n = 0;
    size_t o = (size_t)snprintf(buf, size, "if %s %s ", nic->name,
                                dd_topo_kind_name(nic->kind));

    for (int i = 0; i < nic->n_addrs && n < DD_NET_PEER_SUBNETS; i++) {
        if (dd_topo_addr_is_local(&nic->addrs[i]) ||
            dd_topo_addr_subnet(&nic->addrs[i], subnet, sizeof(subnet)) != 0) {
            continue;
        }
        o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "%s%s",
                              n++ ? "," : "", subnet);
    }
    o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "%s\n",
                          n ? "" : "-");
    return o;
}

void dd_net_peer_encode(const char *host, const dd_topo_t *topo,
                        const dd_topo_cand_t *cands, const char *error,
                        char *buf, size_t size)
{
    char line[512];
    size_t o;

    memset(buf, 0, size);
    o = (size_t)snprintf(buf, size, "host %s\n", host);
    if (error != NULL) {
        snprintf(buf + o, size - o, "error %s\n", error);
        return;
    }
    for (int i = 0, n = 0;
         i < topo->n_nics && cands[i].usable && n < DD_NET_PEER_IFS; i++, n++) {
        size_t len =
            dd_net_encode_if(&topo->nics[cands[i].nic], line, sizeof(line));
        if (o + len >= size) {
            break; /* the rest of the order: never reached in practice */
        }
        memcpy(buf + o, line, len + 1);
        o += len;
    }
}

static dd_status_t dd_net_decode_if(char *line, dd_net_peer_t *peer)
{
    char name[DD_TOPO_NAME_MAX], kind[16], subnets[512];

    if (peer->n == DD_NET_PEER_IFS ||
        sscanf(line, "if %63s %15s %511s", name, kind, subnets) != 3) {
        return DD_ERR_MESSAGE;
    }
    dd_net_peer_if_t *pif = &peer->ifs[peer->n++];
    memset(pif, 0, sizeof(*pif));
    snprintf(pif->name, sizeof(pif->name), "%s", name);
    snprintf(pif->kind, sizeof(pif->kind), "%s", kind);
    if (strcmp(subnets, "-") == 0) {
        return DD_OK;
    }
    for (char *save, *s = strtok_r(subnets, ",", &save);
         s != NULL && pif->n_subnets < DD_NET_PEER_SUBNETS;
         s = strtok_r(NULL, ",", &save)) {
        snprintf(pif->subnets[pif->n_subnets++], sizeof(pif->subnets[0]), "%s",
                 s);
    }
    return DD_OK;
}

dd_status_t dd_net_peer_decode(const char *buf, size_t size,
                               dd_net_peer_t *peer)
{
    char *text = strndup(buf, size);
    dd_status_t status = DD_OK;

    if (text == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                        "no memory for this rank's interfaces");
    }
    memset(peer, 0, sizeof(*peer));
    for (char *save, *line = strtok_r(text, "\n", &save);
         line != NULL && status == DD_OK; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "host ", 5) == 0) {
            snprintf(peer->host, sizeof(peer->host), "%s", line + 5);
        } else if (strncmp(line, "error ", 6) == 0) {
            snprintf(peer->error, sizeof(peer->error), "%s", line + 6);
        } else {
            status = dd_net_decode_if(line, peer);
        }
    }
    free(text);
    if (status == DD_OK && peer->host[0] == '\0') {
        status = DD_ERR_MESSAGE;
    }
    return status;
}

static int dd_net_if_meets(const dd_net_peer_if_t *a, const dd_net_peer_if_t *b)
{
    for (int i = 0; i < a->n_subnets; i++) {
        for (int j = 0; j < b->n_subnets; j++) {
            if (strcmp(a->subnets[i], b->subnets[j]) == 0) {
                return 1;
            }
        }
    }
    return 0;
}

/* Whether interface pif of rank me meets some interface of every rank on
 * another host. */
static int dd_net_if_reaches_all(const dd_net_peer_t *peers, int world, int me,
                                 const dd_net_peer_if_t *pif)
{
    for (int r = 0; r < world; r++) {
        int met = strcmp(peers[r].host, peers[me].host) == 0;
        for (int j = 0; j < peers[r].n && !met; j++) {
            met = dd_net_if_meets(pif, &peers[r].ifs[j]);
        }
        if (!met) {
            return 0;
        }
    }
    return 1;
}

/* "rank 0 on h|ns has eth0 10.0.0.0/24, lo -; rank 1 ..." */
static void dd_net_peers_text(const dd_net_peer_t *peers, int world,
                              const int *ranks, char *buf, size_t size)
{
    size_t o = 0;

    for (int r = 0; r < world && o < size; r++) {
        if (r == 8 && world > 9) {
            snprintf(buf + o, size - o, "; and %d more", world - r);
            return;
        }
        o += (size_t)snprintf(buf + o, size - o, "%srank %d on %s has",
                              r ? "; " : "", ranks != NULL ? ranks[r] : r,
                              peers[r].host);
        for (int j = 0; j < peers[r].n && o < size; j++) {
            const dd_net_peer_if_t *pif = &peers[r].ifs[j];
            o += (size_t)snprintf(buf + o, size - o, "%s %s %s", j ? "," : "",
                                  pif->name,
                                  pif->n_subnets ? pif->subnets[0] : "-");
        }
        if (peers[r].n == 0 && o < size) {
            o += (size_t)snprintf(buf + o, size - o, " nothing usable");
        }
    }
}

dd_status_t dd_net_agree_pick(const dd_net_peer_t *peers, int world,
                              const int *ranks, int me, int *pick_p)
{
    char text[2048];

    for (int r = 0; r < world; r++) {
        if (peers[r].error[0] != '\0') {
            return dd_error(DD_ERR_NOT_FOUND, DD_SUBSYS_TOPO,
                            "rank %d could not choose a network interface: "
                            "%s",
                            ranks != NULL ? ranks[r] : r, peers[r].error);
        }
    }
    for (int i = 0; i < peers[me].n; i++) {
        if (dd_net_if_reaches_all(peers, world, me, &peers[me].ifs[i])) {
            *pick_p = i;
            return DD_OK;
        }
    }
    dd_net_peers_text(peers, world, ranks, text, sizeof(text));
    return dd_error(DD_ERR_NOT_FOUND, DD_SUBSYS_TOPO,
                    "no network interface of rank %d shares a subnet with "
                    "every other host: %s",
                    ranks != NULL ? ranks[me] : me, text);
}

/* A record's hash, to find its twins quickly. */
static uint64_t dd_net_record_hash(const char *rec)
{
    uint64_t h = 1469598103934665603ULL;

    for (size_t i = 0; i < DD_NET_RECORD_SIZE && rec[i] != '\0'; i++) {
        h = (h ^ (unsigned char)rec[i]) * 1099511628211ULL;
    }
    return h;
}

/*
 * Every rank's record, decoded once for each different one (the ranks of
 * a host mostly publish the same list: 128 of them decoded by each of 128
 * ranks were 4 ms of a rank's start): peers[u] is the u-th different
 * record, first published by ranks[u]; *me_p is this rank's.
 */
static dd_status_t dd_net_decode_all(const char *all, int world, int me,
                                     dd_net_peer_t *peers, int *ranks,
                                     uint64_t *hashes, int *n_p, int *me_p)
{
    int n = 0;

    for (int r = 0; r < world; r++) {
        const char *rec = all + (size_t)r * DD_NET_RECORD_SIZE;
        uint64_t h = dd_net_record_hash(rec);
        int u = 0;
        while (u < n &&
               (hashes[u] != h ||
                strncmp(rec, all + (size_t)ranks[u] * DD_NET_RECORD_SIZE,
                        DD_NET_RECORD_SIZE) != 0)) {
            u++;
        }
        if (u == n) {
            if (dd_net_peer_decode(rec, DD_NET_RECORD_SIZE, &peers[n]) !=
                DD_OK) {
                return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_TOPO,
                                "rank %d published a malformed interface "
                                "list",
                                r);
            }
            hashes[n] = h;
            ranks[n++] = r;
        }
        if (r == me) {
            *me_p = u;
        }
    }
    *n_p = n;
    return DD_OK;
}

dd_status_t dd_net_agree(dd_store_t *store, const dd_topo_t *topo,
                         const dd_topo_opts_t *opts,
                         const dd_topo_cand_t *cands, dd_status_t local_status,
                         int local_size, dd_topo_choice_t *choice)
{
    int world = store->world_size, me = store->rank, pick = 0, n = 0,
        mine_u = 0;
    char host[320], mine[DD_NET_RECORD_SIZE];
    char *all = malloc((size_t)world * DD_NET_RECORD_SIZE);
    dd_net_peer_t *peers = calloc((size_t)world, sizeof(*peers));
    int *ranks = malloc((size_t)world * sizeof(int));
    uint64_t *hashes = malloc((size_t)world * sizeof(uint64_t));
    dd_status_t status = DD_ERR_NO_MEMORY;

    if (all == NULL || peers == NULL || ranks == NULL || hashes == NULL) {
        goto out_free;
    }
    dd_net_host_id(host, sizeof(host));
    dd_net_peer_encode(host, topo, cands,
                       local_status == DD_OK ? NULL : dd_last_error(), mine,
                       sizeof(mine));
    status = dd_store_allgather(store, "topo", mine, sizeof(mine), all);
    if (status == DD_OK) {
        status = dd_net_decode_all(all, world, me, peers, ranks, hashes, &n,
                                   &mine_u);
    }
    if (status == DD_OK && local_status != DD_OK) {
        status = local_status;
    } else if (status == DD_OK) {
        status = dd_net_agree_pick(peers, n, ranks, mine_u, &pick);
    }
    if (status == DD_OK && pick > 0) {
        dd_topo_choice_fill(topo, opts, cands, pick, choice->gpu, local_size,
                            choice);
    }
out_free:
    free(hashes);
    free(ranks);
    free(peers);
    free(all);
    return status;
}

static dd_status_t dd_net_setup_local(const dd_topo_opts_t *opts,
                                      dd_topo_share_t *share, int local_rank,
                                      int local_size, dd_topo_t **topo_p,
                                      dd_topo_cand_t **cands_p,
                                      dd_topo_choice_t *choice)
{
    dd_status_t status = dd_topo_probe_shared(opts, share, topo_p);

    if (status != DD_OK) {
        return status;
    }
    dd_log_info(DD_SUBSYS_TOPO, "topology from %s", (*topo_p)->source);
    *cands_p = calloc((size_t)(*topo_p)->n_nics + 1, sizeof(**cands_p));
    if (*cands_p == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                        "no memory for the candidate interfaces");
    }
    int gpu =
        dd_topo_rank_gpu(*topo_p, local_rank, getenv("CUDA_VISIBLE_DEVICES"));
    return dd_topo_choose(*topo_p, opts, gpu, local_rank, local_size, *cands_p,
                          choice);
}

/* The store key of what hwloc said of this host: its identity and this
 * process's CPUs (hwloc leaves out those a process may not use, so ranks
 * bound to different CPUs do not share). */
static void dd_net_hwloc_key(char *key, size_t size)
{
    char host[320];
    cpu_set_t set;
    size_t o;

    dd_net_host_id(host, sizeof(host));
    o = (size_t)snprintf(key, size, "dd/topo/hwloc/%s/", host);
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        snprintf(key + o, size - o, "any");
        return;
    }
    const unsigned char *bytes = (const unsigned char *)&set;
    size_t n = sizeof(set);
    while (n > 1 && bytes[n - 1] == 0) {
        n--;
    }
    for (size_t i = 0; i < n && o + 3 < size; i++) {
        o += (size_t)snprintf(key + o, size - o, "%02x", bytes[i]);
    }
}

/*
 * Which rank of this host starts hwloc and reads the PCI tree: the first
 * to ask (a counter in the store) probes and publishes what hwloc said
 * (src/topo/hwfacts.c's text), or an empty value when it could not; the
 * others read that text, or probe for themselves when it is empty. At 128
 * ranks on 2 cores this took the network step of dd_init from 3 s to
 * 0.1 s. Not for a lone rank, nor where the probe reads files
 * (DREAMDDP_SYSFS_ROOT, _TOPO_FILE, _TOPO_DUMP_FILE). Returns whether
 * this rank publishes.
 */
static int dd_net_hwloc_share(dd_store_t *store, const dd_topo_opts_t *opts,
                              int local_size, const char *key,
                              dd_topo_share_t *share, void **got_p)
{
    char count_key[528];
    int64_t n = 0;
    size_t len = 0;

    if (local_size < 2 || opts->sysfs_root != NULL || opts->topo_file != NULL ||
        opts->dump_file != NULL || !dd_topo_hwloc_built()) {
        return 0;
    }
    snprintf(count_key, sizeof(count_key), "%s/n", key);
    if (dd_store_add(store, count_key, 1, &n) != DD_OK) {
        return 0; /* this rank probes; the store's error shows next */
    }
    if (n == 1) {
        share->want_out = 1;
        return 1;
    }
    if (dd_store_get(store, key, got_p, &len) == DD_OK && len > 0) {
        share->in = *got_p;
        share->in_len = len;
    }
    return 0;
}

dd_status_t dd_net_setup(dd_store_t *store, int local_rank, int local_size,
                         dd_topo_choice_t *choice_p)
{
    dd_topo_opts_t opts;
    dd_topo_t *topo = NULL;
    dd_topo_cand_t *cands = NULL;
    dd_topo_choice_t choice;
    dd_topo_share_t share = {0};
    void *got = NULL;
    char key[512];
    dd_status_t status =
        dd_config_load(&dd_topo_config_table, &opts, dd_config_getenv, NULL);

    if (status != DD_OK) {
        return status;
    }
    memset(&choice, 0, sizeof(choice));
    dd_net_hwloc_key(key, sizeof(key));
    int publish =
        dd_net_hwloc_share(store, &opts, local_size, key, &share, &got);
    dd_status_t local = dd_net_setup_local(&opts, &share, local_rank,
                                           local_size, &topo, &cands, &choice);
    if (publish) {
        status = dd_store_set(store, key, share.out != NULL ? share.out : "",
                              share.out != NULL ? share.out_len : 0);
    }
    if (status == DD_OK) {
        status =
            dd_net_agree(store, topo, &opts, cands, local, local_size, &choice);
    }
    if (status == DD_OK) {
        dd_log_info(DD_SUBSYS_TOPO,
                    "network interface %s (%s), %d stream%s: %s", choice.name,
                    dd_topo_kind_name(choice.kind), choice.streams,
                    choice.streams == 1 ? "" : "s", choice.reason);
        *choice_p = choice;
    }
    free(share.out);
    free(got);
    free(cands);
    dd_topo_free(topo);
    dd_config_release(&dd_topo_config_table, &opts);
    return status;
}
