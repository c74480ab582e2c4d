/*
 * The workers' wall clocks against rank 0's, agreed through the store at
 * dd_model_commit, for the timeline.
 */
#ifndef DD_API_CLOCK_AGREE_H
#define DD_API_CLOCK_AGREE_H

#include "api/context.h"

/* Ping-pong rounds per worker; the one with the shortest round trip wins. */
#define DD_CLOCK_ROUNDS 8

/**
 * Every worker runs DD_CLOCK_ROUNDS ping-pongs with rank 0 through the
 * store (rank 0 answers each worker in turn) and estimates rank 0's clock
 * minus its own; rank 0's is 0. Collective over the workers. Store errors
 * (a worker missing, a timeout) come back as they are, naming the key.
 */
dd_status_t dd_clock_agree(dd_context_h ctx, double *offset_us_p,
                           double *uncertainty_us_p);

#endif
