/*
 * The interface choice of one rank: DREAMDDP_NET_IFNAME filters, then the
 * default order (kind, speed, nearness to the rank's GPU) ranks, and ties are
 * shared out so that each GPU of a DGX-like node gets its own NIC. Each
 * interface gets a sentence saying why it was or was not chosen. Pure: no I/O
 * beyond dd_error on failure.
 */
#include "topo/ifchoice.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dd_topo_rank_gpu(const dd_topo_t *topo, int local_rank,
                     const char *cuda_visible)
{
    int visible[256], n = 0;

    if (topo->n_gpus == 0) {
        return -1;
    }
    for (const char *p = cuda_visible; p != NULL && *p != '\0' && n < 256;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0')) {
            n = -1; /* a UUID or MIG name: cannot map without CUDA */
            break;
        }
        if (v < 0 || v >= topo->n_gpus) {
            break; /* CUDA ignores the list from the first invalid entry */
        }
        visible[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    if (cuda_visible != NULL && n == 0) {
        return -1; /* CUDA_VISIBLE_DEVICES hides every GPU */
    }
    int r = local_rank < 0 ? 0 : local_rank;
    return n > 0 ? visible[r % n] : r % topo->n_gpus;
}

void dd_topo_iflist_text(const dd_iflist_t *list, char *buf, size_t size)
{
    size_t o = (size_t)snprintf(buf, size, "%s%s", list->exclude ? "^" : "",
                                list->exact ? "=" : "");
    for (int i = 0; i < list->n && o < size; i++) {
        o += (size_t)snprintf(buf + o, size - o, "%s%s", i ? "," : "",
                              list->names[i]);
    }
}

/* Kinds grouped as the default order ranks them. */
static int dd_topo_kind_class(dd_topo_kind_t kind)
{
    switch (kind) {
    case DD_TOPO_KIND_INFINIBAND:
    case DD_TOPO_KIND_ROCE:
        return 0;
    case DD_TOPO_KIND_ETHERNET:
        return 1;
    case DD_TOPO_KIND_VIRTUAL:
        return 3;
    case DD_TOPO_KIND_LOOPBACK:
        return 4;
    default:
        return 2;
    }
}

typedef struct {
    const dd_topo_t *topo;
    int gpu;
} dd_topo_rank_ctx_t;

static int dd_topo_near(const dd_topo_t *topo, int nic, int gpu)
{
    if (gpu < 0) {
        return 0;
    }
    return dd_topo_proximity(&topo->nics[nic].loc, &topo->gpus[gpu].loc);
}

/* Negative when a comes first; 0 for a tie on kind, speed and nearness. */
static int dd_topo_rank_cmp(const dd_topo_rank_ctx_t *c, int a, int b)
{
    const dd_topo_nic_t *x = &c->topo->nics[a], *y = &c->topo->nics[b];
    int d = dd_topo_kind_class(x->kind) - dd_topo_kind_class(y->kind);

    if (d == 0) {
        d = (y->speed_mbps > x->speed_mbps) - (y->speed_mbps < x->speed_mbps);
    }
    if (d == 0) {
        d = dd_topo_near(c->topo, b, c->gpu) - dd_topo_near(c->topo, a, c->gpu);
    }
    return d;
}

static int dd_topo_full_cmp(const dd_topo_rank_ctx_t *c,
                            const dd_topo_cand_t *a, const dd_topo_cand_t *b)
{
    if (a->usable != b->usable) {
        return b->usable - a->usable;
    }
    int d = a->usable ? dd_topo_rank_cmp(c, a->nic, b->nic) : 0;
    return d != 0 ? d : a->nic - b->nic; /* nics are sorted by name */
}

static void dd_topo_sort(const dd_topo_rank_ctx_t *c, dd_topo_cand_t *cands,
                         int n)
{
    for (int i = 1; i < n; i++) {
        dd_topo_cand_t tmp = cands[i];
        int j = i;
        while (j > 0 && dd_topo_full_cmp(c, &tmp, &cands[j - 1]) < 0) {
            cands[j] = cands[j - 1];
            j--;
        }
        cands[j] = tmp;
    }
}

/* Whether GPU g finds the same NICs tied at the top as the head group:
 * those of the head's kind and speed at g's best nearness. */
static int dd_topo_same_tie(const dd_topo_t *topo, const dd_topo_cand_t *cands,
                            int n_usable, int group, int g)
{
    dd_topo_rank_ctx_t any = {topo, -1};
    int best = -1;

    for (int i = 0; i < n_usable; i++) {
        int near = dd_topo_near(topo, cands[i].nic, g);
        if (dd_topo_rank_cmp(&any, cands[i].nic, cands[0].nic) == 0 &&
            near > best) {
            best = near;
        }
    }
    for (int i = 0; i < n_usable; i++) {
        int in_g = dd_topo_rank_cmp(&any, cands[i].nic, cands[0].nic) == 0 &&
                   dd_topo_near(topo, cands[i].nic, g) == best;
        if ((i < group) != in_g) {
            return 0;
        }
    }
    return 1;
}

/* Shares out the head group of tied NICs: rotates it so that this rank's
 * turn comes first. Returns the group's size. */
static int dd_topo_share_ties(const dd_topo_t *topo, dd_topo_cand_t *cands,
                              int n_usable, int gpu, int local_rank)
{
    dd_topo_rank_ctx_t c = {topo, gpu};
    int group = 1, turn = 0;

    while (group < n_usable &&
           dd_topo_rank_cmp(&c, cands[0].nic, cands[group].nic) == 0) {
        group++;
    }
    if (group < 2) {
        return group;
    }
    if (gpu >= 0) {
        for (int g = 0; g < gpu; g++) {
            turn += dd_topo_same_tie(topo, cands, n_usable, group, g);
        }
    } else {
        turn = local_rank > 0 ? local_rank : 0;
    }
    for (turn %= group; turn > 0; turn--) {
        dd_topo_cand_t first = cands[0];
        memmove(cands, cands + 1, sizeof(*cands) * (size_t)(group - 1));
        cands[group - 1] = first;
    }
    return group;
}

static void dd_topo_speed_text(const dd_topo_nic_t *nic, char *buf, size_t size)
{
    int m = nic->speed_mbps;

    if (m >= 1000 && m % 1000 == 0) {
        snprintf(buf, size, "%d Gb/s", m / 1000);
    } else if (m >= 1000) {
        snprintf(buf, size, "%.1f Gb/s", m / 1000.0);
    } else {
        snprintf(buf, size, "%d Mb/s", m);
    }
    if (!nic->speed_known && nic->speed_source[0] != '\0') {
        snprintf(buf + strlen(buf), size - strlen(buf), " estimated from %s",
                 nic->speed_source);
    } else if (!nic->speed_known) {
        snprintf(buf + strlen(buf), size - strlen(buf), " assumed");
    }
}

/* "InfiniBand 200 Gb/s, same PCI switch as GPU 3" */
static void dd_topo_describe(const dd_topo_t *topo, int nic, int gpu, char *buf,
                             size_t size)
{
    char speed[160];
    int near = dd_topo_near(topo, nic, gpu);

    dd_topo_speed_text(&topo->nics[nic], speed, sizeof(speed));
    snprintf(buf, size, "%s %s", dd_topo_kind_name(topo->nics[nic].kind),
             speed);
    if (near >= 1) {
        snprintf(buf + strlen(buf), size - strlen(buf), ", same %s as GPU %d",
                 near >= 2 ? "PCI switch" : "NUMA node", topo->gpus[gpu].index);
    }
}

/* Why a usable interface lost to the chosen one. */
static void dd_topo_why_not(const dd_topo_t *topo, int gpu, int chosen, int nic,
                            char *buf, size_t size)
{
    const dd_topo_nic_t *c = &topo->nics[chosen], *x = &topo->nics[nic];

    if (dd_topo_kind_class(x->kind) != dd_topo_kind_class(c->kind)) {
        snprintf(buf, size, "%s ranks after %s", dd_topo_kind_name(x->kind),
                 dd_topo_kind_name(c->kind));
    } else if (x->speed_mbps != c->speed_mbps) {
        snprintf(buf, size, "slower than %s (%d < %d Mb/s)", c->name,
                 x->speed_mbps, c->speed_mbps);
    } else if (dd_topo_near(topo, nic, gpu) !=
               dd_topo_near(topo, chosen, gpu)) {
        snprintf(buf, size, "farther from GPU %d than %s", gpu, c->name);
    } else {
        snprintf(buf, size, "tied with %s; left to another local rank",
                 c->name);
    }
}

/* Marks each candidate usable or not, with why not. */
static int dd_topo_filter(const dd_topo_t *topo, const dd_topo_opts_t *opts,
                          dd_topo_cand_t *cands, int *n_matched_p)
{
    char list[256];
    int n_usable = 0, n_matched = 0;

    dd_topo_iflist_text(&opts->ifname, list, sizeof(list));
    for (int i = 0; i < topo->n_nics; i++) {
        const char *why = NULL;
        memset(&cands[i], 0, sizeof(cands[i]));
        cands[i].nic = i;
        if (!dd_iflist_match(&opts->ifname, topo->nics[i].name)) {
            snprintf(cands[i].why, sizeof(cands[i].why),
                     "excluded by DREAMDDP_NET_IFNAME=%.150s", list);
            continue;
        }
        n_matched++;
        if (!dd_topo_nic_usable(topo, &topo->nics[i], &why)) {
            snprintf(cands[i].why, sizeof(cands[i].why), "%s", why);
            continue;
        }
        cands[i].usable = 1;
        n_usable++;
    }
    *n_matched_p = n_matched;
    return n_usable;
}

/* Lists "name (why)" of every interface, or only those the filter allows. */
static void dd_topo_list_text(const dd_topo_t *topo,
                              const dd_topo_cand_t *cands, int with_why,
                              char *buf, size_t size)
{
    size_t o = 0;

    buf[0] = '\0';
    for (int i = 0; i < topo->n_nics && o < size; i++) {
        const dd_topo_cand_t *c = &cands[i];
        if (with_why && strncmp(c->why, "excluded", 8) == 0) {
            continue;
        }
        o += (size_t)snprintf(buf + o, size - o, "%s%s", o ? ", " : "",
                              topo->nics[c->nic].name);
        if (with_why && o < size) {
            o += (size_t)snprintf(buf + o, size - o, " (%s)", c->why);
        }
    }
    if (o == 0) {
        snprintf(buf, size, "none");
    }
}

static dd_status_t dd_topo_choose_error(const dd_topo_t *topo,
                                        const dd_topo_opts_t *opts,
                                        const dd_topo_cand_t *cands,
                                        int n_matched)
{
    char list[256], names[1024];

    dd_topo_iflist_text(&opts->ifname, list, sizeof(list));
    if (n_matched == 0) {
        dd_topo_list_text(topo, cands, 0, names, sizeof(names));
        return dd_error(
            DD_ERR_INVALID_CONFIG, DD_SUBSYS_TOPO,
            "DREAMDDP_NET_IFNAME='%s' matches no interface; this host "
            "has %s",
            list, names);
    }
    dd_topo_list_text(topo, cands, 1, names, sizeof(names));
    if (opts->ifname.n > 0) {
        return dd_error(
            DD_ERR_NO_DEVICE, DD_SUBSYS_TOPO,
            "DREAMDDP_NET_IFNAME='%s' leaves no usable interface: %s", list,
            names);
    }
    return dd_error(DD_ERR_NO_DEVICE, DD_SUBSYS_TOPO,
                    "no usable network interface: %s", names);
}

void dd_topo_choice_fill(const dd_topo_t *topo, const dd_topo_opts_t *opts,
                         const dd_topo_cand_t *cands, int pick, int gpu,
                         int local_size, dd_topo_choice_t *choice)
{
    const dd_topo_nic_t *nic = &topo->nics[cands[pick].nic];
    char list[256], desc[256];
    int n_usable = 0;
    size_t o = 0;

    for (int i = 0; i < topo->n_nics; i++) {
        n_usable += cands[i].usable;
    }
    memset(choice, 0, sizeof(*choice));
    snprintf(choice->name, sizeof(choice->name), "%s", nic->name);
    snprintf(choice->rdma, sizeof(choice->rdma), "%s", nic->rdma);
    choice->rdma_port = nic->rdma_port;
    choice->kind = nic->kind;
    choice->speed_mbps = nic->speed_mbps;
    choice->speed_known = nic->speed_known;
    choice->gpu = gpu;
    choice->streams = dd_topo_streams(topo, nic, local_size, opts->num_streams);
    if (opts->ifname.n > 0) {
        dd_topo_iflist_text(&opts->ifname, list, sizeof(list));
        o = (size_t)snprintf(choice->reason, sizeof(choice->reason),
                             "DREAMDDP_NET_IFNAME=%s allows it; ", list);
    }
    dd_topo_describe(topo, cands[pick].nic, gpu, desc, sizeof(desc));
    if (n_usable == 1) {
        snprintf(choice->reason + o, sizeof(choice->reason) - o,
                 "the only usable interface: %s", desc);
    } else if (pick == 0) {
        snprintf(choice->reason + o, sizeof(choice->reason) - o,
                 "first of %d usable by kind, speed and nearness: %s", n_usable,
                 desc);
    } else {
        snprintf(choice->reason + o, sizeof(choice->reason) - o,
                 "place %d of %d usable (%s); the ones before it do not "
                 "reach every host",
                 cands[pick].order, n_usable, desc);
    }
}

const char *dd_topo_choice_rdma(const dd_topo_choice_t *choice)
{
    int rdma_kind = choice->kind == DD_TOPO_KIND_INFINIBAND ||
                    choice->kind == DD_TOPO_KIND_ROCE;

    return choice->name[0] != '\0' && choice->rdma[0] != '\0' && rdma_kind
               ? choice->rdma
               : NULL;
}

/* Fills order and the why of every usable candidate against the chosen. */
static void dd_topo_explain(const dd_topo_t *topo, int gpu, int group,
                            dd_topo_cand_t *cands, int n_usable)
{
    char desc[256];

    for (int i = 0; i < n_usable; i++) {
        cands[i].order = i + 1;
        if (i == 0) {
            dd_topo_describe(topo, cands[0].nic, gpu, desc, sizeof(desc));
            snprintf(cands[0].why, sizeof(cands[0].why), "%.130s%s", desc,
                     group > 1 ? "; tied NICs are shared out one per GPU "
                                 "(or local rank)"
                               : "");
        } else {
            dd_topo_why_not(topo, gpu, cands[0].nic, cands[i].nic, cands[i].why,
                            sizeof(cands[i].why));
        }
    }
}

dd_status_t dd_topo_choose(const dd_topo_t *topo, const dd_topo_opts_t *opts,
                           int gpu, int local_rank, int local_size,
                           dd_topo_cand_t *cands, dd_topo_choice_t *choice_p)
{
    dd_topo_rank_ctx_t c = {topo, gpu};
    int n_matched;
    int n_usable = dd_topo_filter(topo, opts, cands, &n_matched);

    if (n_usable == 0) {
        return dd_topo_choose_error(topo, opts, cands, n_matched);
    }
    dd_topo_sort(&c, cands, topo->n_nics);
    int group = dd_topo_share_ties(topo, cands, n_usable, gpu, local_rank);
    dd_topo_explain(topo, gpu, group, cands, n_usable);
    dd_topo_choice_fill(topo, opts, cands, 0, gpu, local_size, choice_p);
    return DD_OK;
}
