/*
 * Delayed averaging's state ("+next" strategies, delay.c): a layer's and
 * the scheduler's, and the calls the runtime makes of it.
 */
#ifndef DD_SCHED_DELAY_H
#define DD_SCHED_DELAY_H

#include "sched/engine/engine.h"
#include "sched/plan/plan.h"

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

struct dd_sched;
struct dd_layer;
struct dd_device_event;

/** A layer's. */
typedef struct {
    /* Per tensor, the copy of the parameters at the launch that travels
     * (average - copy once it landed); whether a sync is in flight and the
     * step that launched it; the seconds this step's backward mark waited
     * for it. */
    void **wire;
    int pending;
    uint64_t step;
    double wait_s;
    /* A device layer's: the stream the application last named
     * (dd_layer_ready_stream, dd_layer_forward_stream), where its launches
     * and landings queue their device work, and the event after a launch's
     * copy there, which its job waits for. */
    void *stream;
    int stream_known;
    struct dd_device_event *event;
    /* Its sync of this step left before its backward
     * (DREAMDDP_NEXT_LAUNCH=early, runtime.c). */
    int early;
    /* The replica's own cost of its delayed averages since commit: the
     * copies at their launches and the corrections where they landed. */
    double copy_s, correct_s;
    uint64_t landings;
} dd_delay_layer_t;

/** The scheduler's. */
typedef struct {
    /* The deferred jobs in flight, those whose layers all landed (for
     * dd_step_end's accounting), and the seconds the deadlines waited:
     * since the last dd_step_end, and in this step's forward marks. */
    struct dd_delay_entry *jobs;
    size_t n, cap;
    dd_sync_job_t *landed;
    double wait_s, fwd_wait_s;
    /* Whether the application makes forward marks, and the deadline model
     * the plan is made under (replan.c), with its forward times. */
    int marked;
    dd_plan_delay_t model;
    double *fp;
    /* The library's own stream and event for device layers whose stream
     * the application never named. */
    void *dev_stream;
    struct dd_device_event *dev_event;
} dd_delay_t;

int dd_sched_delay_on(const struct dd_sched *sched);
/* At commit: checks the layers (f32/f64, host or device) and allocates
 * the copies. */
dd_status_t dd_sched_delay_commit(struct dd_sched *sched);
/* Copies a tensor's parameters at the launch of its layer's sync; *buf_p:
 * the buffer the sync averages. */
dd_status_t dd_sched_delay_launch(struct dd_sched *sched,
                                  struct dd_layer *layer, size_t tensor,
                                  void **buf_p);
/* A deferred job just submitted. */
dd_status_t dd_sched_delay_track(struct dd_sched *sched, dd_sync_job_t *job);
/* The layer's deadline: waits for its sync in flight (if any) and applies
 * it with the correction; the seconds waited are added to *waited_p. */
dd_status_t dd_sched_delay_land(struct dd_sched *sched, struct dd_layer *layer,
                                double *waited_p);
dd_status_t dd_sched_delay_land_all(struct dd_sched *sched);
/* The jobs whose layers all landed since the last call, for accounting. */
dd_sync_job_t *dd_sched_delay_take_landed(struct dd_sched *sched);
/* Before the engine stops: lands what is in flight. */
void dd_sched_delay_quiesce(struct dd_sched *sched);
void dd_sched_delay_free(struct dd_sched *sched);

#endif
