/*
 * The workers' agreement (agree.c): the window-start agreement's state,
 * and the collectives every decision is made from.
 */
#ifndef DD_SCHED_AGREE_H
#define DD_SCHED_AGREE_H

#include "sched/route/route.h"

#include <stddef.h>

struct dd_sched;

/**
 * The window-start agreement is one allgather of every worker's row, in
 * the background: the profile when a check is due ([2n]), then the
 * layers' divergence when the monitor is on ([n]); all holds the rows in
 * worker order, every worker reduces them alike.
 */
typedef struct {
    enum {
        DD_SCHED_AGREE_IDLE,
        DD_SCHED_AGREE_RUNNING, /* on the engine's queue */
        DD_SCHED_AGREE_READY    /* v holds the agreed times */
    } state;
    double *v; /* [2n] bp, then comm */
    double *mine, *all;
    size_t stride;
    int profile, drift;
    dd_sched_coll_t coll;
} dd_agree_t;

/* Makes v identical on every worker: the average, as the first worker has
 * it (an allreduce alone need not be bitwise equal everywhere). */
dd_status_t dd_sched_agree(struct dd_sched *sched, double *v, size_t n);
/* Starts the window-start agreement (the profile, the divergence). */
dd_status_t dd_sched_agree_start(struct dd_sched *sched, int profile,
                                 int drift);
/* dd_step_end drained the step's jobs: a background agreement is done. */
void dd_sched_agree_done(struct dd_sched *sched);
/* The mean of the workers' rows, in worker order: v[i] for i < n. */
void dd_sched_rows_mean(const double *all, int n_workers, size_t stride,
                        size_t n, double *v);
/* Every worker's row of n values, in worker order, into all: blocking. */
dd_status_t dd_sched_gather_rows(struct dd_sched *sched, double *mine, size_t n,
                                 double *all);

#endif
