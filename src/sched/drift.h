/*
 * The divergence monitor's arithmetic beyond the measurement
 * (engine/divergence.h): the figures the workers agree on, and when a
 * layer's figures deserve a warning. Pure: no I/O, no clocks, no state
 * beyond what the caller hands in.
 */
#ifndef DD_SCHED_DRIFT_H
#define DD_SCHED_DRIFT_H

#include "sched/engine/divergence.h"

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

/** A layer's figure that was not measured since the last agreement. */
#define DD_DRIFT_NONE (-1.0)

/**
 * The cross-worker figures of n layers from every worker's row of all
 * ([n_workers][stride], the layers' figures at offset): the maximum and the
 * mean, in worker order, over the workers that measured the layer (a value
 * of DD_DRIFT_NONE elsewhere); DD_DRIFT_NONE in both where none did. The
 * same on every worker that holds the same rows.
 */
void dd_drift_reduce(const double *all, int n_workers, size_t stride,
                     size_t offset, size_t n, double *max, double *mean);

/** The warning state of one layer. */
typedef struct {
    double last;       /* the previous agreed maximum; < 0: none yet */
    int rises;         /* agreements in a row that raised it */
    uint64_t agreed;   /* agreements that carried a figure */
    uint64_t quiet_to; /* no warning before this many agreements */
} dd_drift_watch_t;

/* A rise counts when the agreed maximum grew by more than this factor:
 * the window-to-window noise of a steady run stays below it. */
#define DD_DRIFT_RISE 1.1

enum {
    DD_DRIFT_WARN_RISING = 1 << 0, /* rose at `windows` agreements in a row */
    DD_DRIFT_WARN_ABOVE = 1 << 1   /* past the threshold */
};

/**
 * Takes a layer's next agreed maximum: the DD_DRIFT_WARN_* reasons to warn
 * now (0: none). windows: rises in a row that warn (0: never), and the
 * agreements a warning silences the layer for; warn: the threshold (0:
 * none).
 */
int dd_drift_watch(dd_drift_watch_t *w, double max, int windows, double warn);

/** A layer's monitor state: this step's sums over the items the engine
 *  measured, whether a figure came since the last agreement, and the
 *  warning state; the figures are in the layer's stats. */
typedef struct {
    double diff2, norm2;
    int seen, fresh;
    dd_drift_watch_t watch;
} dd_drift_layer_t;

struct dd_sched;
struct dd_sync_job;

/* The monitor (drift.c). dd_sched_gather's part: adds what the engine
 * measured to its layers. */
void dd_sched_drift_gather(struct dd_sched *sched,
                           const struct dd_sync_job *job);
/* After a step's (or dd_sync_all's) jobs: each layer measured gets its
 * figure. */
void dd_sched_drift_step(struct dd_sched *sched);
/* This worker's row for the agreement ([n]: DD_DRIFT_NONE where no figure
 * came since the last one). */
void dd_sched_drift_mine(struct dd_sched *sched, double *v);
/* Takes the agreed rows ([n_workers][stride], the figures at offset):
 * stats, warnings, counters. */
dd_status_t dd_sched_drift_agreed(struct dd_sched *sched, const double *all,
                                  size_t stride, size_t offset);
/* ", divergence max X (layer L) mean Y" for the [SYNC] line, or "". */
void dd_sched_drift_summary(const struct dd_sched *sched, char *buf,
                            size_t size);
/* Whether parameter syncs measure the divergence. */
int dd_sched_drift_on(const struct dd_sched *sched);

#endif
