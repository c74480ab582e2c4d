/*
 * How many communication streams (connections, or RDMA queue pairs) a rank
 * opens to each peer. The table, per NIC, by the chosen interface:
 *
 *   InfiniBand or RoCE (RDMA)         2
 *   loopback                          1
 *   below 10 Gb/s                     1
 *   10 Gb/s up to 25 Gb/s             2
 *   25 Gb/s up to 100 Gb/s            4
 *   100 Gb/s and faster               8
 *
 * An unknown speed counts as DD_TOPO_DEFAULT_SPEED_MBPS. The local ranks of
 * a host spread over the usable NICs of the chosen one's kind and speed, so
 * the count is divided by ceil(local ranks / such NICs), and is at least 1.
 * DREAMDDP_NUM_STREAMS overrides all of it. Pure arithmetic, no probing.
 */
#include "topo/ifchoice.h"

int dd_topo_streams_per_nic(dd_topo_kind_t kind, int speed_mbps)
{
    if (kind == DD_TOPO_KIND_INFINIBAND || kind == DD_TOPO_KIND_ROCE) {
        return 2;
    }
    if (kind == DD_TOPO_KIND_LOOPBACK || speed_mbps < 10000) {
        return 1;
    }
    if (speed_mbps < 25000) {
        return 2;
    }
    return speed_mbps < 100000 ? 4 : 8;
}

int dd_topo_streams(const dd_topo_t *topo, const dd_topo_nic_t *nic,
                    int local_size, int override)
{
    int peers = 0;

    if (override > 0) {
        return override;
    }
    for (int i = 0; i < topo->n_nics; i++) {
        const dd_topo_nic_t *x = &topo->nics[i];
        peers += x->kind == nic->kind && x->speed_mbps == nic->speed_mbps &&
                 dd_topo_nic_usable(topo, x, NULL);
    }
    peers = peers > 0 ? peers : 1;
    int ranks = local_size > 0 ? local_size : 1;
    int share = (ranks + peers - 1) / peers;
    int streams = dd_topo_streams_per_nic(nic->kind, nic->speed_mbps) / share;
    return streams > 0 ? streams : 1;
}
