/*
 * The decisions built on the agreed figures (replan.c): bubble filling's
 * trial state, and the calls the runtime makes at a window's start.
 */
#ifndef DD_SCHED_REPLAN_H
#define DD_SCHED_REPLAN_H

#include "sched/plan/plan.h"

#include <dreamddp.h>

#include <stdint.h>

struct dd_sched;

/**
 * Bubble filling's trial: a plan with extra syncs runs one check period
 * with them and one without, on the agreed mean time per iteration (the
 * profile's last value), and keeps them only when they cost at most
 * DD_SCHED_TRIAL_TOLERANCE; dropped once, no later plan fills. iter_sum_s
 * and iter_n: this worker's step-to-step times since the last profile row
 * or plan change.
 */
typedef struct {
    enum {
        DD_SCHED_TRIAL_NONE,
        DD_SCHED_TRIAL_WITH,   /* measuring the plan with its extras */
        DD_SCHED_TRIAL_WITHOUT /* measuring it without; extras kept aside */
    } state;
    dd_plan_t *extras; /* the plan with its extras, while without */
    double with_s;
    int refused;
    double iter_sum_s;
    uint64_t iter_n;
} dd_trial_t;

/* The steps each of bubble filling's trial's two measurements spans at
 * least, whatever the window: a window of 2 steps lets one slow step
 * decide (a parallel make check kept extras that cost 40 ms a step). */
#define DD_SCHED_TRIAL_STEPS 8

#define DD_SCHED_REPLAN_PERSIST 2

/* At a window's start: the plan, a finished agreement taken, the next
 * started. */
dd_status_t dd_sched_schedule_window(struct dd_sched *sched);
/* adaptive's update, every DREAMDDP_ADAPTIVE_INTERVAL steps. */
dd_status_t dd_sched_adapt(struct dd_sched *sched);

/* planfile.c: reproducible plans. Whether the plan is fixed
 * (DREAMDDP_DETERMINISTIC=yes or DREAMDDP_PLAN): made from the layers'
 * sizes and a fixed rate model, or loaded, and never re-made. */
#define dd_sched_plan_fixed(sched)                                             \
    ((sched)->opts.deterministic || (sched)->opts.plan != NULL)
/* The planner's inputs from the layers' sizes and the fixed rate model. */
void dd_sched_model_profile(struct dd_sched *sched, double *v);
/* DREAMDDP_PLAN_SAVE: writes plan (worker rank 0). */
void dd_sched_plan_save(const struct dd_sched *sched, const dd_plan_t *plan);
/* DREAMDDP_PLAN: the saved plan, checked against the job and the model
 * (DD_ERR_MISMATCH naming the difference). */
dd_status_t dd_sched_plan_load(struct dd_sched *sched, dd_plan_t **plan_p);

#endif
