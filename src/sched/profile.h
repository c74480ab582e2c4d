/*
 * The profiler (profile.c): what this worker measured, for the planner.
 */
#ifndef DD_SCHED_PROFILE_H
#define DD_SCHED_PROFILE_H

#include "sched/engine/engine.h"

struct dd_sched;

/* The rows of the profile the workers agree on: bp, comm, forward; a
 * worker without forward marks sends DD_SCHED_NO_MARKS as its forward. */
#define DD_SCHED_PROFILE_ROWS 3
#define DD_SCHED_NO_MARKS (-1e9)
/* The profile's length: its rows, then the mean time per iteration. */
#define DD_SCHED_PROFILE_LEN(n) (DD_SCHED_PROFILE_ROWS * (n) + 1)

dd_status_t dd_sched_fit_network(struct dd_sched *sched);
void dd_sched_record_backward(struct dd_sched *sched);
void dd_sched_record_syncs(struct dd_sched *sched, const dd_sync_job_t *done);
/* The planner's inputs from this worker's measurements: bp, comm, then
 * forward, then the mean time per iteration ([DD_SCHED_PROFILE_LEN(n)]). */
void dd_sched_profile(struct dd_sched *sched, double *v);

#endif
