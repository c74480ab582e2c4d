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
/* The largest DREAMDDP_PLAN taken: 4096 layers of the longest line a
 * plan may hold (4096 characters). */
#define DD_PLAN_FILE_MAX (16u << 20)

/**
 * DREAMDDP_PLAN as read at dd_model_commit (planfile.c), before any rank
 * trains: the file's text with the CR of each CRLF dropped (a plan copied
 * through Windows is the same plan), and its digest, which the workers
 * agree on with the other settings. text is NULL when there is no plan or
 * it could not be read; then why says what was wrong (no path).
 */
typedef struct {
    char *text;
    size_t len;
    uint64_t digest;
    char why[160];
} dd_plan_file_t;

/* Reads DREAMDDP_PLAN under dreamddp without blocking (a FIFO, a device or
 * a directory is never read): a failure lands in sched->plan_file.why and
 * the settings, so that every rank learns it at the agreement. */
void dd_sched_plan_read(struct dd_sched *sched);
/* After the agreement: this rank's plan file could be read (DD_OK) or the
 * error naming the variable, the file and what is taken. */
dd_status_t dd_sched_plan_readable(struct dd_sched *sched);
/* The plan's identity in the agreed settings: "none", "digest X" or
 * "unreadable: why". */
void dd_sched_plan_identity(const struct dd_sched *sched, char *out,
                            size_t size);
void dd_sched_plan_file_free(struct dd_sched *sched);
/* DREAMDDP_PLAN: the saved plan, checked against the job and the model
 * (DD_ERR_MISMATCH naming the difference). A plan for another number of
 * workers under DREAMDDP_ELASTIC=yes (a re-formed job) gives *plan_p NULL:
 * the caller plans for the workers left. */
dd_status_t dd_sched_plan_load(struct dd_sched *sched, dd_plan_t **plan_p);

#endif
