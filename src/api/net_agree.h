/*
 * Cross-rank agreement on interfaces, and the dd_init step around it: every
 * rank publishes its host and its usable interfaces (in its own order,
 * with their subnets) through the store; each rank then takes the first of
 * its own that shares a subnet with every other host. Encoding, decoding
 * and the pick are pure, so they are tested without a store. This is the
 * only code that puts the topology's choice and the store together.
 */
#ifndef DD_API_NET_AGREE_H
#define DD_API_NET_AGREE_H

#include "boot/store.h"
#include "topo/ifchoice.h"

#define DD_NET_RECORD_SIZE 4096 /* bytes each rank publishes */
#define DD_NET_PEER_IFS 16      /* interfaces a record holds, at most */
#define DD_NET_PEER_SUBNETS 4   /* subnets per interface, at most */

typedef struct {
    char name[DD_TOPO_NAME_MAX];
    char kind[16];
    int n_subnets;
    char subnets[DD_NET_PEER_SUBNETS][64];
} dd_net_peer_if_t;

typedef struct {
    char host[320];  /* host name and network namespace */
    char error[512]; /* why the rank could not choose; "" when it could */
    int n;
    dd_net_peer_if_t ifs[DD_NET_PEER_IFS];
} dd_net_peer_t;

/* This machine's identity: host name and network namespace, since emulated
 * hosts share a name but not a network. */
void dd_net_host_id(char *buf, size_t size);

/* Writes a rank's record into buf (NUL-padded to size): host, then its
 * error or its usable candidates in order with their routable subnets. */
void dd_net_peer_encode(const char *host, const dd_topo_t *topo,
                        const dd_topo_cand_t *cands, const char *error,
                        char *buf, size_t size);

/* Parses a record. DD_ERR_MESSAGE when it is not one. */
dd_status_t dd_net_peer_decode(const char *buf, size_t size,
                               dd_net_peer_t *peer);

/**
 * Picks, for peers[me], the first of its interfaces that shares a subnet
 * with some interface of every peer on another host (any of them when all
 * share one host). peers are the ranks' records, or only the different
 * ones with ranks[i] the rank of peers[i] (ranks NULL: peers[i] is rank
 * i's), which gives the same pick.
 * @return DD_OK with *pick_p the index in peers[me].ifs; DD_ERR_NOT_FOUND
 *         naming the rank that could not choose, or, when no interface
 *         reaches every host, every rank and what it had.
 */
dd_status_t dd_net_agree_pick(const dd_net_peer_t *peers, int world,
                              const int *ranks, int me, int *pick_p);

/**
 * Publishes this rank's candidates (or local_error), gathers every rank's,
 * and settles the choice: choice is refilled when the first candidate does
 * not reach every host.
 * @return DD_OK; local_status when this rank had failed; the errors of
 *         dd_net_agree_pick; the store's errors.
 */
dd_status_t dd_net_agree(dd_store_t *store, const dd_topo_t *topo,
                         const dd_topo_opts_t *opts,
                         const dd_topo_cand_t *cands, dd_status_t local_status,
                         int local_size, dd_topo_choice_t *choice);

/**
 * The network step of dd_init: reads the topology configuration, probes,
 * chooses this rank's interface, agrees with every rank through the store and
 * logs the choice once at info level.
 * @return DD_OK; the errors of dd_config_load, dd_topo_probe,
 *         dd_topo_choose and dd_net_agree, each reported where detected.
 */
dd_status_t dd_net_setup(dd_store_t *store, int local_rank, int local_size,
                         dd_topo_choice_t *choice_p);

#endif
