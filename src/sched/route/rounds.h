/*
 * The pipe of codecs with a multi-round protocol (rounds.c): each round's
 * f32 output averaged through the host route.
 */
#ifndef DD_SCHED_ROUTE_ROUNDS_H
#define DD_SCHED_ROUTE_ROUNDS_H

#include "sched/route/route.h"

/** The route's state: the host route its rounds travel. */
typedef struct {
    const dd_sync_pipe_t *inner;
    dd_sync_pipe_t pipe; /* depth 1: its rounds must not interleave */
} dd_route_rounds_t;

void dd_route_rounds_init(dd_route_rounds_t *r, const dd_sync_pipe_t *inner);

#endif
