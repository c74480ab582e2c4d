/*
 * Which interface a rank uses, and why: DREAMDDP_NET_IFNAME, the default order
 * of kinds and speeds, nearness to the rank's GPU, then what every host can
 * reach. Pure functions of a probed dd_topo_t, so fixtures test them.
 */
#ifndef DD_TOPO_IFCHOICE_H
#define DD_TOPO_IFCHOICE_H

#include "topo/topo.h"

/* One interface's place in a rank's order. */
typedef struct {
    int nic;       /* index in topo->nics */
    int usable;    /* can carry traffic and DREAMDDP_NET_IFNAME allows it */
    int order;     /* 1-based place among the usable ones; 0 if not usable */
    char why[192]; /* why not usable, or how it ranks against the chosen */
} dd_topo_cand_t;

/* The outcome, as backends and ddtopo read it. */
typedef struct {
    char name[DD_TOPO_NAME_MAX]; /* the netdev, "" when none */
    char rdma[DD_TOPO_NAME_MAX]; /* its RDMA device, or "" */
    int rdma_port;
    dd_topo_kind_t kind;
    int speed_mbps;
    int speed_known;
    int gpu;     /* the rank's GPU index, -1 when none */
    int streams; /* communication streams (connections) to use */
    char reason[512];
} dd_topo_choice_t;

/**
 * The GPU a local rank drives: the GPUs CUDA_VISIBLE_DEVICES leaves visible
 * (integer indices in PCI bus order; other forms such as UUIDs cannot be
 * mapped without the CUDA runtime and leave every GPU visible), then local
 * rank modulo their number. -1 when the machine has none.
 */
int dd_topo_rank_gpu(const dd_topo_t *topo, int local_rank,
                     const char *cuda_visible);

/* Writes an interface list back in the grammar it was read in ("^=lo"). */
void dd_topo_iflist_text(const dd_iflist_t *list, char *buf, size_t size);

/**
 * Orders topo's interfaces for one rank and chooses the first: usable ones
 * first (DREAMDDP_NET_IFNAME allows it, not down, has an address), by kind
 * (InfiniBand/RoCE, Ethernet, others, virtual, loopback), then speed, then
 * nearness to gpu; interfaces tied on all three are shared out, the k-th GPU
 * of those that find the same tie (or local rank k without a GPU) taking the
 * k-th. cands gets topo->n_nics entries in that order.
 * @return DD_OK; DD_ERR_INVALID_CONFIG when DREAMDDP_NET_IFNAME matches no
 *         interface (naming the value and the interfaces that exist);
 *         DD_ERR_NO_DEVICE when none is usable (naming each and why).
 *         Errors are reported with dd_error.
 */
dd_status_t dd_topo_choose(const dd_topo_t *topo, const dd_topo_opts_t *opts,
                           int gpu, int local_rank, int local_size,
                           dd_topo_cand_t *cands, dd_topo_choice_t *choice_p);

/* Makes cands[pick] (a usable one) the choice, with reason and streams. */
void dd_topo_choice_fill(const dd_topo_t *topo, const dd_topo_opts_t *opts,
                         const dd_topo_cand_t *cands, int pick, int gpu,
                         int local_size, dd_topo_choice_t *choice);

/* The RDMA device backends are told of: the choice's, when it is
 * InfiniBand or RoCE (a soft RDMA device on another kind of interface is
 * not worth leaving TCP for); NULL otherwise, and when nothing was chosen. */
const char *dd_topo_choice_rdma(const dd_topo_choice_t *choice);

/* The stream count for a chosen NIC: DREAMDDP_NUM_STREAMS when set (override >
 * 0), else the table in streams.c. */
int dd_topo_streams(const dd_topo_t *topo, const dd_topo_nic_t *nic,
                    int local_size, int override);

/* Streams per NIC, before sharing among local ranks (the table). */
int dd_topo_streams_per_nic(dd_topo_kind_t kind, int speed_mbps);

#endif
