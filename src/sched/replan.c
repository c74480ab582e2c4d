/*
 * The decisions built on the agreed figures: dreamddp's first plan and its
 * re-plans when the times drift, bubble filling's trial of extra syncs,
 * the deadline model of delayed averaging, and adaptive's periods. Every
 * decision is taken from values the workers first agree on (agree.c).
 */
#include "core/log.h"
#include "core/time.h"
#include "sched/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new plan replaces the one in force only when the model has it faster,
 * under the same agreed times, by more than this share of an iteration. */
#define DD_SCHED_REPLAN_GAIN 0.05
/* Bubble filling picks extra syncs that would still hide were every sync
 * this much slower, so that the extras hide under the noise of measured
 * times and stay in the plan while it stands. */
#define DD_SCHED_FILL_MARGIN 1.5
/* Under delayed averaging an extra sync holds the one FIFO channel into
 * the next step, ahead of that step's own syncs: the extras must hide
 * were every sync this much slower. */
#define DD_SCHED_FILL_MARGIN_DELAYED 3.0
/* Bubble filling's trial keeps the extra syncs while the agreed time per
 * iteration with them is at most this share above the time without: with
 * extras the model has free, the two checks measured up to 4.7 % apart,
 * either way round (train_mlp 101.7 ms with, 97.1 without; the train
 * simulator 308.2 with, 322.2 without), so 10 % drops only extras that
 * cost. */
#define DD_SCHED_TRIAL_TOLERANCE 0.10
static double dd_sched_sum(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += v[i];
    }
    return s;
}
static int dd_sched_plan_equal(const dd_plan_t *a, const dd_plan_t *b)
{
    size_t n = a->num_layers;
    return a->window == b->window && b->num_layers == n &&
           memcmp(a->slot, b->slot, n * sizeof(*a->slot)) == 0 &&
           memcmp(a->sync, b->sync, (size_t)a->window * n) == 0;
}
/* The schedule at info level, one layer after another in backward order
 * with the steps of the window it syncs in (its planned slot first), so
 * that two runs' plans can be compared. */
static void dd_sched_plan_print(const dd_sched_t *sched)
{
    const dd_plan_t *p = sched->plan;
    char line[4096];
    size_t len = 0;

    if (!dd_log_enabled(DD_LOG_INFO, DD_SUBSYS_SCHED)) {
        return;
    }
    line[0] = '\0';
    for (size_t i = sched->n_layers; i-- > 0 && len < sizeof(line) - 64;) {
        len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s %u",
                                len ? ", " : "", sched->layers[i]->name,
                                p->slot[i]);
        for (unsigned h = 0; h < p->window; h++) {
            if (h != p->slot[i] && dd_plan_syncs(p, h, i) &&
                len < sizeof(line) - 16) {
                len +=
                    (size_t)snprintf(line + len, sizeof(line) - len, "+%u", h);
            }
        }
    }
    dd_log_info(DD_SUBSYS_SCHED, "plan (layer slot+extra): %s%s", line,
                len >= sizeof(line) - 64 ? " ..." : "");
}
/* The primary slots of plan, without its extra syncs. */
static dd_status_t dd_sched_primaries(const dd_plan_t *plan, dd_plan_t **out_p)
{
    dd_plan_t *p;
    dd_status_t status = dd_plan_alloc(plan->num_layers, plan->window, &p);

    for (size_t i = 0; status == DD_OK && i < plan->num_layers; i++) {
        dd_plan_set_slot(p, i, plan->slot[i]);
    }
    if (status == DD_OK) {
        *out_p = p;
    }
    return status;
}
/*
 * Delayed averaging plans under the deadline model (deadline.c), from the
 * agreed profile's third row: the forward times between the workers'
 * forward marks (the last layer's forward counts in the first backward
 * layer's time), the deadline at those marks; or, where some worker makes
 * none, the deadline at the next backward mark, with forward in the first
 * backward layer's time. Every worker derives it alike from v.
 */
static void dd_sched_delay_model_set(dd_sched_t *sched, const double *v)
{
    size_t n = sched->n_layers;
    int marks = v[2 * n] >= 0; /* any DD_SCHED_NO_MARKS makes it negative */

    sched->delay.model = (dd_plan_delay_t){
        NULL,
        marks ? DD_PLAN_DEADLINE_FORWARD : DD_PLAN_DEADLINE_BACKWARD,
        0,
        NULL,
        NULL,
        (unsigned)dd_sched_channels(sched),
        sched->opts.next_launch == DD_NEXT_LAUNCH_EARLY};
    if (marks) {
        memcpy(sched->delay.fp, v + 2 * n, n * sizeof(double));
        sched->delay.model.fp_s = sched->delay.fp;
    }
}
static double dd_sched_iter_s(const dd_sched_t *sched,
                              const dd_plan_input_t *input,
                              const dd_plan_t *plan)
{
    dd_plan_cost_t cost;
    dd_status_t status =
        sched->strategy.delay
            ? dd_plan_cost_delayed(input, plan, &sched->delay.model, &cost)
            : dd_plan_cost(input, plan, &cost);
    return status == DD_OK ? cost.iter_s : INFINITY;
}
/* Bubble filling with DD_SCHED_FILL_MARGIN. */
static dd_status_t dd_sched_fill(const dd_sched_t *sched,
                                 const dd_plan_input_t *input, dd_plan_t *plan)
{
    size_t n = input->num_layers;
    double *slow = malloc(n * sizeof(*slow));

    if (slow == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the bubble filling's margins");
    }
    double m = sched->strategy.delay ? DD_SCHED_FILL_MARGIN_DELAYED
                                     : DD_SCHED_FILL_MARGIN;
    for (size_t i = 0; i < n; i++) {
        slow[i] = input->comm_s[i] * m;
    }
    dd_plan_input_t margin = {n, input->bp_s, slow};
    dd_status_t status =
        sched->strategy.delay
            ? dd_plan_fill_bubbles_delayed(&margin, &sched->delay.model, plan)
            : dd_plan_fill_bubbles(&margin, plan, NULL);
    free(slow);
    return status;
}
/*
 * The schedule for the agreed times v, from the one in force (the profiling
 * split before the first plan). Its primary slots stay unless the
 * planner's are faster in the model by more than DD_SCHED_REPLAN_GAIN, and
 * its extra syncs stay while they cost no more than that; otherwise bubble
 * filling (DREAMDDP_FILL_BUBBLES) runs again over the primary slots. Nothing
 * here depends on anything but v and the plan in force, which every worker
 * holds alike. *base_p: the new schedule, or NULL when the one in force
 * stands.
 */
static dd_status_t dd_sched_next_plan(dd_sched_t *sched,
                                      const dd_plan_input_t *input,
                                      dd_plan_t **base_p)
{
    dd_plan_params_t params = {.field_mask = DD_PLAN_FIELD_FILL_BUBBLES,
                               .fill_bubbles = 0};
    dd_plan_t *fresh, *kept;
    dd_status_t status =
        sched->strategy.delay
            ? dd_plan_dreamddp_delayed(input, sched->strategy.window, &params,
                                       &sched->delay.model, &fresh)
            : dd_plan_dreamddp(input, sched->strategy.window, &params, &fresh);

    if (status == DD_OK &&
        (status = dd_sched_primaries(sched->plan, &kept)) != DD_OK) {
        dd_plan_free(fresh);
    }
    if (status != DD_OK) {
        return status;
    }
    double t_fresh = dd_sched_iter_s(sched, input, fresh);
    double t_kept = dd_sched_iter_s(sched, input, kept);
    dd_plan_t *base = fresh;
    if (t_kept <= t_fresh * (1 + DD_SCHED_REPLAN_GAIN)) {
        base = kept;
        if (sched->planned && dd_sched_iter_s(sched, input, sched->plan) <=
                                  t_kept * (1 + DD_SCHED_REPLAN_GAIN)) {
            base = NULL; /* and the extra syncs still hide */
        }
    }
    if (base != fresh) {
        dd_plan_free(fresh);
    }
    if (base != kept) {
        dd_plan_free(kept);
    }
    if (base != NULL && sched->opts.fill_bubbles && !sched->trial.refused) {
        status = dd_sched_fill(sched, input, base);
    }
    if (base != NULL && sched->planned &&
        dd_sched_plan_equal(base, sched->plan)) {
        dd_plan_free(base);
        base = NULL;
    }
    *base_p = base;
    return status;
}
/* Puts plan in force from the next step (the caller owns what it
 * replaced): its fusion into sched->hold, the step's replanned flag, and a
 * fresh count of the steps the trial times, so that each of its checks
 * measures one plan. */
static void dd_sched_install(dd_sched_t *sched, const dd_plan_input_t *input,
                             dd_plan_t *plan)
{
    dd_plan_fusion(input, plan, sched->hold);
    sched->plan = plan;
    sched->plan_serial++;
    sched->replanned = 1;
    sched->trial.iter_sum_s = 0;
    sched->trial.iter_n = 0;
}
/* Plans from v (bp then comm) and installs the schedule, unless the one in
 * force stands: then only the fusion and the times it is checked against
 * follow v. */
static dd_status_t dd_sched_plan(dd_sched_t *sched, const double *v,
                                 dd_plan_t *given)
{
    size_t n = sched->n_layers;
    dd_plan_input_t input = {n, v, v + n};
    dd_plan_t *plan = given;
    unsigned char *hold = malloc((size_t)sched->strategy.window * n);
    dd_status_t status = DD_ERR_NO_MEMORY;

    if (sched->delay.fp == NULL) {
        sched->delay.fp = calloc(n, sizeof(double));
    }
    if (hold != NULL && sched->delay.fp != NULL) {
        dd_sched_delay_model_set(sched, v);
        status =
            given != NULL ? DD_OK : dd_sched_next_plan(sched, &input, &plan);
    }

    if (status != DD_OK) {
        free(hold);
        dd_plan_free(plan);
        return dd_error(status, DD_SUBSYS_SCHED, "planning failed: %s",
                        dd_status_string(status));
    }
    sched->plan_bp_total = dd_sched_sum(v, n);
    sched->plan_comm_total = dd_sched_sum(v + n, n);
    if (plan == NULL) {
        dd_log_info(DD_SUBSYS_SCHED,
                    "step %llu: the plan stands (modeled %.1f ms per "
                    "iteration)",
                    (unsigned long long)sched->step,
                    dd_sched_iter_s(sched, &input, sched->plan) * 1e3);
        dd_plan_fusion(&input, sched->plan, hold);
        free(sched->hold);
        sched->hold = hold;
        sched->plan_serial++;
        return DD_OK;
    }
    dd_plan_free(sched->plan);
    free(sched->hold);
    sched->hold = hold;
    dd_sched_install(sched, &input, plan);
    char groups[160] = "";
    size_t k = dd_plan_groups(&input);
    if (given == NULL && k < input.num_layers) {
        snprintf(groups, sizeof(groups),
                 "; as %zu groups of consecutive layers, over %d layers "
                 "being too many to plan one by one",
                 k, DD_PLAN_EXACT_LAYERS);
    }
    dd_plan_free(sched->trial.extras);
    sched->trial.extras = NULL;
    sched->trial.state =
        dd_plan_num_extra(plan) > 0 ? DD_SCHED_TRIAL_WITH : DD_SCHED_TRIAL_NONE;
    dd_log_info(
        DD_SUBSYS_SCHED,
        "%s at step %llu (%s, %s%s): backward %.1f ms, sync %.1f ms "
        "per window pass, modeled %.1f ms per iteration, %zu extra "
        "syncs",
        sched->planned ? "re-planned" : "planned",
        (unsigned long long)sched->step,
        sched->opts.deterministic ? "deterministic" : "not deterministic",
        given != NULL                ? "from DREAMDDP_PLAN"
        : dd_sched_plan_fixed(sched) ? "from the layers' sizes and "
                                       "the fixed rate model"
                                     : "from measured times",
        groups, sched->plan_bp_total * 1e3, sched->plan_comm_total * 1e3,
        dd_sched_iter_s(sched, &input, plan) * 1e3, dd_plan_num_extra(plan));
    dd_sched_plan_save(sched, plan);
    sched->planned = 1;
    dd_sched_plan_print(sched);
    return DD_OK;
}
static double dd_sched_drift(double now, double planned)
{
    return planned > 0 ? fabs(now - planned) / planned : (now > 0);
}
/* Checks the agreed times against the plan's: a re-plan needs the drift
 * past DREAMDDP_REPLAN_DRIFT at DD_SCHED_REPLAN_PERSIST checks in a row,
 * so that one noisy window does not churn the plan. */
static dd_status_t dd_sched_check_drift(dd_sched_t *sched, const double *v)
{
    size_t n = sched->n_layers;
    double bp = dd_sched_drift(dd_sched_sum(v, n), sched->plan_bp_total);
    double comm =
        dd_sched_drift(dd_sched_sum(v + n, n), sched->plan_comm_total);

    if (bp <= sched->opts.replan_drift && comm <= sched->opts.replan_drift) {
        sched->drift_checks = 0;
        return DD_OK;
    }
    if (++sched->drift_checks < DD_SCHED_REPLAN_PERSIST) {
        return DD_OK;
    }
    sched->drift_checks = 0;
    dd_log_info(DD_SUBSYS_SCHED,
                "measured times drifted from the plan's (backward %.0f %%, "
                "sync %.0f %%) at %d checks in a row: planning again",
                bp * 100, comm * 100, DD_SCHED_REPLAN_PERSIST);
    return dd_sched_plan(sched, v, NULL);
}
/*
 * Bubble filling's trial. The model has an extra sync cost nothing, but
 * the extras add traffic, and where they slow the syncs around them
 * (aggregators on hosts that share cores) the measured times rise with
 * them and the model keeps them: with 4 aggregators and fp16 some runs
 * filled 15.6 MB per iteration and took 0.43-0.47 s per iteration, others
 * none and took 0.29-0.30 (bench/NOTES.md). So a new plan with extras runs
 * DD_SCHED_TRIAL_STEPS steps with them, then as many without (the trial
 * checks the times at every window, dd_sched_schedule_window); the extras come
 * back only when the agreed mean time per iteration with them was at most
 * DD_SCHED_TRIAL_TOLERANCE above the time without. A plan change restarts the
 * count, so each row measures one plan; a row without steps (0) waits for
 * the next. Every worker takes the same agreed values, so every worker
 * switches at the same step.
 */
static dd_status_t dd_sched_fill_trial(dd_sched_t *sched, const double *v)
{
    size_t n = sched->n_layers;
    double t = v[DD_SCHED_PROFILE_ROWS * n];
    dd_plan_input_t input = {n, v, v + n};

    if (sched->replanned || sched->trial.state == DD_SCHED_TRIAL_NONE ||
        !(t > 0)) {
        return DD_OK;
    }
    if (sched->trial.state == DD_SCHED_TRIAL_WITH) {
        dd_plan_t *bare = NULL;
        dd_status_t status = dd_sched_primaries(sched->plan, &bare);
        if (status != DD_OK) {
            return status;
        }
        dd_log_info(DD_SUBSYS_SCHED,
                    "step %llu: %.1f ms per iteration with bubble filling's "
                    "%zu extra syncs; trying the plan without them",
                    (unsigned long long)sched->step, t * 1e3,
                    dd_plan_num_extra(sched->plan));
        sched->trial.with_s = t;
        sched->trial.extras = sched->plan;
        sched->plan = bare;
        sched->plan_serial++;
        sched->trial.state = DD_SCHED_TRIAL_WITHOUT;
    } else {
        int keep = sched->trial.with_s <= t * (1 + DD_SCHED_TRIAL_TOLERANCE);
        dd_log_info(
            DD_SUBSYS_SCHED,
            "step %llu: %.1f ms per iteration without the extra "
            "syncs, %.1f ms with them: %s",
            (unsigned long long)sched->step, t * 1e3, sched->trial.with_s * 1e3,
            keep ? "they stay" : "they go, and no later plan fills bubbles");
        if (keep) {
            dd_plan_free(sched->plan);
            sched->plan = sched->trial.extras;
            sched->plan_serial++;
        } else {
            dd_plan_free(sched->trial.extras);
            sched->trial.refused = 1;
        }
        sched->trial.extras = NULL;
        sched->trial.state = DD_SCHED_TRIAL_NONE;
    }
    dd_sched_install(sched, &input, sched->plan);
    return DD_OK;
}
/* The first plan waits for the agreement, once. */
static dd_status_t dd_sched_first_plan(dd_sched_t *sched)
{
    size_t n = sched->n_layers;
    double *v = malloc(DD_SCHED_PROFILE_LEN(n) * sizeof(double));

    if (v == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the agreed profile");
    }
    dd_status_t status = DD_OK;
    dd_plan_t *given = NULL;
    if (dd_sched_plan_fixed(sched)) {
        /* The same on every worker without a word: the layer table is
         * agreed at commit. */
        dd_sched_model_profile(sched, v);
    } else {
        dd_sched_profile(sched, v);
        status = dd_sched_agree(sched, v, DD_SCHED_PROFILE_LEN(n));
    }
    if (status == DD_OK && sched->opts.plan != NULL) {
        status = dd_sched_plan_load(sched, &given);
    }
    if (status == DD_OK) {
        status = dd_sched_plan(sched, v, given);
    }
    free(v);
    return status;
}
/* Takes a finished window-start agreement: the divergence, then the check
 * of the times against the plan's. */
static dd_status_t dd_sched_agree_take(dd_sched_t *sched)
{
    size_t n = sched->n_layers;
    int w = sched->env.job->n_workers;
    dd_status_t status = DD_OK;

    sched->agree.state = DD_SCHED_AGREE_IDLE;
    if (sched->agree.drift) {
        status = dd_sched_drift_agreed(
            sched, sched->agree.all, sched->agree.stride,
            sched->agree.profile ? DD_SCHED_PROFILE_LEN(n) : 0);
    }
    if (status == DD_OK && sched->agree.profile) {
        dd_sched_rows_mean(sched->agree.all, w, sched->agree.stride,
                           DD_SCHED_PROFILE_LEN(n), sched->agree.v);
        status = dd_sched_check_drift(sched, sched->agree.v);
    }
    if (status == DD_OK && sched->agree.profile) {
        status = dd_sched_fill_trial(sched, sched->agree.v);
    }
    return status;
}
dd_status_t dd_sched_schedule_window(dd_sched_t *sched)
{
    unsigned h = sched->strategy.window;
    int dream = sched->strategy.kind == DD_STRATEGY_DREAMDDP;
    dd_status_t status = DD_OK;

    if (sched->plan == NULL && sched->strategy.kind != DD_STRATEGY_LOCALSGD) {
        /* plsgd always, dreamddp while it profiles: layers split evenly,
         * so every layer is synced, and timed, once per window. */
        status = dd_plan_plsgd(sched->n_layers, h, &sched->plan);
        if (status != DD_OK) {
            return status;
        }
    }
    if (sched->step % h != 0) {
        return DD_OK;
    }
    /* A fixed plan (deterministic, or loaded) is never checked against
     * measured times: no re-plan, no bubble filling trial. */
    int checks =
        dream && sched->planned && !dd_sched_plan_fixed(sched) &&
        dd_sched_steps_run(sched) >= (uint64_t)sched->opts.profile_steps;
    /* A fixed plan needs no profile: a run resumed past the profiling
     * steps (dd_step_set) takes it at once, as the run it resumes had. */
    uint64_t profiled =
        dd_sched_plan_fixed(sched) ? sched->step : dd_sched_steps_run(sched);
    if (dream && !sched->planned &&
        profiled >= (uint64_t)sched->opts.profile_steps) {
        status = dd_sched_first_plan(sched);
    }
    if (status == DD_OK && sched->agree.state == DD_SCHED_AGREE_READY) {
        status = dd_sched_agree_take(sched);
    }
    if (status != DD_OK || sched->agree.state != DD_SCHED_AGREE_IDLE) {
        return status;
    }
    /* The times once every DREAMDDP_REPLAN_WINDOWS windows, and at every
     * window while bubble filling's trial runs, so that it decides within
     * a few windows of the plan whatever the period of the checks; the
     * divergence at every window once a window has synced. */
    int profile =
        checks && (++sched->windows_unchecked >= sched->opts.replan_windows ||
                   sched->trial.state != DD_SCHED_TRIAL_NONE);
    int drift = dd_sched_drift_on(sched) && dd_sched_steps_run(sched) > 0;
    if (profile) {
        sched->windows_unchecked = 0;
    }
    return profile || drift ? dd_sched_agree_start(sched, profile, drift)
                            : DD_OK;
}
/* A layer's next period under adaptive's rule, from the agreed figures. */
static int dd_sched_next_period(dd_sched_t *sched, const struct dd_layer *l,
                                double grad_ema, double drift_max)
{
    const dd_sched_opts_t *o = &sched->opts;

    if (sched->strategy.signal == DD_ADAPT_DRIFT) {
        return drift_max < 0
                   ? l->period
                   : dd_strategy_drift_period(l->period, drift_max,
                                              o->drift_target, o->adaptive_kmin,
                                              o->adaptive_kmax);
    }
    double ratio = l->grad_ema_prev > 0 ? grad_ema / l->grad_ema_prev : 1.0;
    return dd_strategy_adapt_period(l->period, ratio, o->adaptive_high,
                                    o->adaptive_low, o->adaptive_kmin,
                                    o->adaptive_kmax);
}
/*
 * adaptive's update, every DREAMDDP_ADAPTIVE_INTERVAL steps: one allgather
 * of every worker's gradient-norm EMAs and, with the monitor on, the
 * layers' divergence since the last update; the new periods follow from
 * the agreed figures, so every worker picks the same.
 */
dd_status_t dd_sched_adapt(dd_sched_t *sched)
{
    size_t n = sched->n_layers, w = (size_t)sched->env.job->n_workers;
    int drift = dd_sched_drift_on(sched);
    size_t m = drift ? 2 * n : n;

    if (dd_sched_steps_run(sched) == 0 ||
        sched->step % (uint64_t)sched->opts.adaptive_interval) {
        return DD_OK;
    }
    double *mine = malloc(m * sizeof(double));
    double *all = malloc(m * w * sizeof(double));
    double *v = malloc(3 * n * sizeof(double)); /* mean EMA, max, mean */
    dd_status_t status = DD_ERR_NO_MEMORY;
    if (mine != NULL && all != NULL && v != NULL) {
        for (size_t i = 0; i < n; i++) {
            mine[i] = sched->layers[i]->grad_ema;
        }
        if (drift) {
            dd_sched_drift_mine(sched, mine + n);
        }
        status = dd_sched_gather_rows(sched, mine, m, all);
    }
    if (status == DD_OK) {
        dd_sched_rows_mean(all, (int)w, m, n, v);
        for (size_t i = 0; i < n; i++) {
            v[n + i] = DD_DRIFT_NONE;
        }
        if (drift) {
            dd_drift_reduce(all, (int)w, m, n, n, v + n, v + 2 * n);
            status = dd_sched_drift_agreed(sched, all, m, n);
        }
    }
    for (size_t i = 0; status == DD_OK && i < n; i++) {
        struct dd_layer *l = sched->layers[i];
        int period = dd_sched_next_period(sched, l, v[i], v[n + i]);
        if (period != l->period) {
            dd_log_debug(DD_SUBSYS_SCHED,
                         "adaptive: layer '%s' period %d -> %d (gradient "
                         "EMA %.3g, was %.3g; divergence %.3g)",
                         l->name, l->period, period, v[i], l->grad_ema_prev,
                         v[n + i]);
        }
        l->period = period;
        l->stats.period = period;
        l->grad_ema_prev = v[i];
    }
    free(mine);
    free(all);
    free(v);
    return status;
}
