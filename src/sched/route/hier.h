/*
 * The hierarchical route (hier.c): a host's workers sum a device layer
 * through CUDA IPC, its leader moves the sum through the staged host route,
 * and the peers copy the average back.
 */
#ifndef DD_SCHED_ROUTE_HIER_H
#define DD_SCHED_ROUTE_HIER_H

#include "sched/route/route.h"

typedef struct dd_hier dd_hier_t;

/** The route's state. */
typedef struct {
    const dd_route_env_t *env;
    dd_hier_t *h;                  /* NULL until opened */
    const dd_sync_pipe_t *staging; /* the leader's sum travels staged */
    dd_sync_pipe_t pipe;           /* a device layer's sync */
    dd_sync_pipe_t leaders;        /* without aggregators: a staged chunk of the
                                      host's sum across the leaders, divided by
                                      every worker */
} dd_route_hier_t;

void dd_route_hier_init(dd_route_hier_t *r, const dd_route_env_t *env,
                        const dd_sync_pipe_t *staging);

/**
 * At commit: groups the workers of this host and, when the process has
 * device layers (ordinal >= 0, the largest tensor bytes bytes), maps the
 * host's scratch buffers through IPC and the host's counters through
 * shared memory (measure: the divergence monitor's host views too).
 * *leader_p: this rank leads its host's device layers.
 */
dd_status_t dd_route_hier_open(dd_route_hier_t *r, int ordinal, size_t bytes,
                               int measure, int *leader_p);

void dd_route_hier_close(dd_route_hier_t *r);

#endif
