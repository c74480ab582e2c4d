/*
 * The deadline cost model and its planner, for delayed averaging ("+next",
 * delay.c). A layer's sync, launched after its backward, occupies the FIFO
 * channel until it ends and may run across the iteration boundary: it
 * must land by the layer's deadline (its next forward, or its next
 * backward), where compute waits for it. An iteration is its forward and
 * backward plus those waits; dd_step_end waits for nothing. With the
 * deadline at the end of the same iteration it is the model of plan.h
 * (plus forward time). Pure, as plan.c: no I/O, no clocks, no globals.
 */
#include "sched/plan/model.h"
#include "sched/plan/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Passes over the window before the measured one: the channel's backlog
 * and the syncs in flight at the window's end carry over to the next. */
#define DD_PLAN_DEADLINE_WARM_PASSES 2

typedef struct {
    size_t n;
    unsigned H;
    const double *bp, *fp, *comm, *launch, *land_cost;
    dd_plan_deadline_t deadline;
    int at_end, early;
    unsigned char *launched; /* [n] this iteration's sync launched (early) */
    double *land; /* [n] when the sync in flight lands; -1: none, -2: not
                     known yet (net) */
    unsigned channels;
    dd_plan_net_t *net; /* N channels (channels.c); NULL: one FIFO */
    uint64_t iter;      /* iterations run, the steps of the net's rule */
} dd_plan_dl_t;

static dd_status_t dd_plan_dl_init(dd_plan_dl_t *m, const dd_plan_input_t *in,
                                   const dd_plan_delay_t *delay)
{
    if (in == NULL || in->num_layers == 0 || in->bp_s == NULL ||
        in->comm_s == NULL || delay == NULL ||
        (unsigned)delay->deadline > DD_PLAN_DEADLINE_BACKWARD ||
        delay->channels > DD_PLAN_MAX_CHANNELS) {
        return DD_ERR_INVALID_PARAM;
    }
    for (size_t i = 0; i < in->num_layers; i++) {
        double f = delay->fp_s != NULL ? delay->fp_s[i] : 0.0;
        double a = delay->launch_s != NULL ? delay->launch_s[i] : 0.0;
        double b = delay->land_s != NULL ? delay->land_s[i] : 0.0;
        if (!isfinite(in->bp_s[i]) || in->bp_s[i] < 0 ||
            !isfinite(in->comm_s[i]) || in->comm_s[i] < 0 || !isfinite(f) ||
            f < 0 || !isfinite(a) || a < 0 || !isfinite(b) || b < 0) {
            return DD_ERR_INVALID_PARAM;
        }
    }
    m->n = in->num_layers;
    m->bp = in->bp_s;
    m->comm = in->comm_s;
    m->fp = delay->fp_s;
    m->launch = delay->launch_s;
    m->land_cost = delay->land_s;
    m->deadline = delay->deadline;
    m->at_end = delay->launch_at_end;
    m->early = delay->launch_early && !delay->launch_at_end &&
               delay->deadline != DD_PLAN_DEADLINE_STEP_END;
    m->channels = delay->channels;
    m->net = NULL;
    m->land = malloc(m->n * sizeof(*m->land));
    m->launched = calloc(m->n, 1);
    if (m->land == NULL || m->launched == NULL ||
        (m->channels > 1 &&
         dd_plan_net_create(m->channels, m->n, &m->net) != DD_OK)) {
        free(m->land);
        free(m->launched);
        return DD_ERR_NO_MEMORY;
    }
    return DD_OK;
}

static void dd_plan_dl_cleanup(dd_plan_dl_t *m)
{
    free(m->land);
    free(m->launched);
    dd_plan_net_free(m->net);
}

/* Compute at *t waits for layer i's sync in flight, if any, and applies
 * it. */
static double dd_plan_dl_wait(dd_plan_dl_t *m, size_t i, double *t)
{
    double w = 0.0;
    if (m->land[i] == -2.0) {
        dd_plan_net_wait(m->net, &m->land[i], *t);
    }
    if (m->land[i] < 0.0) {
        return 0.0;
    }
    if (m->land[i] > *t) {
        w = m->land[i] - *t;
        *t = m->land[i];
    }
    *t += m->land_cost != NULL ? m->land_cost[i] : 0.0;
    m->land[i] = -1.0;
    return w;
}

/* Launches layer i's sync at *t, after the copy of its parameters. */
static void dd_plan_dl_launch(dd_plan_dl_t *m, size_t i, double *t,
                              double *chan)
{
    *t += m->launch != NULL ? m->launch[i] : 0.0;
    if (m->net != NULL) {
        /* Room for every layer was made at the start: no failure. */
        (void)dd_plan_net_launch(m->net, *t, m->iter, m->comm[i], &m->land[i]);
        return;
    }
    *chan = (*chan > *t ? *chan : *t) + m->comm[i];
    m->land[i] = *chan;
}

/* Early launches at the iteration's start: the row's layers with no sync
 * in flight, in the order of their deadlines (forward order under forward
 * marks, backward order otherwise). */
static void dd_plan_dl_launch_start(dd_plan_dl_t *m, const unsigned char *row,
                                    double *t, double *chan)
{
    int fwd = m->deadline == DD_PLAN_DEADLINE_FORWARD;

    for (size_t k = 0; k < m->n; k++) {
        size_t i = fwd ? k : m->n - 1 - k;
        m->launched[i] = 0;
        if (row[i] && m->land[i] == -1.0) {
            dd_plan_dl_launch(m, i, t, chan);
            m->launched[i] = 1;
        }
    }
}

/* One iteration h of the schedule from time *t with the channel free at
 * *chan; returns its waits. */
static double dd_plan_dl_iter(dd_plan_dl_t *m, const dd_plan_t *plan,
                              unsigned h, double *t, double *chan)
{
    double wait = 0.0;
    const unsigned char *row = plan->sync + (size_t)h * m->n;

    if (m->early) {
        dd_plan_dl_launch_start(m, row, t, chan);
    }
    /* A sync launched early in this iteration has its deadline in the
     * next. */
    for (size_t i = 0; i < m->n; i++) {
        if (m->deadline == DD_PLAN_DEADLINE_FORWARD && !m->launched[i]) {
            wait += dd_plan_dl_wait(m, i, t);
            if (m->early && row[i]) {
                dd_plan_dl_launch(m, i, t, chan);
                m->launched[i] = 1;
            }
        }
        *t += m->fp != NULL ? m->fp[i] : 0.0;
    }
    for (size_t i = m->n; i-- > 0;) {
        *t += m->bp[i];
        if (m->deadline == DD_PLAN_DEADLINE_BACKWARD && !m->launched[i]) {
            wait += dd_plan_dl_wait(m, i, t);
        }
        if (row[i] && !m->at_end && !m->launched[i]) {
            dd_plan_dl_launch(m, i, t, chan);
        }
    }
    for (size_t i = m->n; m->at_end && i-- > 0;) {
        if (row[i]) {
            dd_plan_dl_launch(m, i, t, chan);
        }
    }
    if (m->deadline == DD_PLAN_DEADLINE_STEP_END && m->net != NULL) {
        *chan = dd_plan_net_idle(m->net, *t);
    }
    m->iter++;
    if (m->deadline == DD_PLAN_DEADLINE_STEP_END && *chan > *t) {
        wait += *chan - *t;
        *t = *chan;
    }
    for (size_t i = 0; m->deadline == DD_PLAN_DEADLINE_STEP_END && i < m->n;
         i++) {
        wait += dd_plan_dl_wait(m, i, t); /* 0: all landed by now */
    }
    return wait;
}

/* The cost of plan in the steady state: the window after the warm-up
 * passes. */
static void dd_plan_dl_run(dd_plan_dl_t *m, const dd_plan_t *plan,
                           dd_plan_cost_t *cost_p)
{
    double t = 0.0, chan = 0.0, wait = 0.0, t0 = 0.0;

    for (size_t i = 0; i < m->n; i++) {
        m->land[i] = -1.0;
    }
    m->iter = 0;
    if (m->net != NULL) {
        dd_plan_net_reset(m->net);
    }
    for (int pass = 0; pass <= DD_PLAN_DEADLINE_WARM_PASSES; pass++) {
        t0 = t;
        wait = 0.0;
        for (unsigned h = 0; h < plan->window; h++) {
            wait += dd_plan_dl_iter(m, plan, h, &t, &chan);
        }
    }
    cost_p->window_s = t - t0;
    cost_p->iter_s = cost_p->window_s / plan->window;
    cost_p->exposed_s = wait;
}

static dd_status_t dd_plan_dl_check(const dd_plan_dl_t *m,
                                    const dd_plan_t *plan)
{
    if (plan == NULL || plan->num_layers != m->n || plan->window == 0 ||
        plan->slot == NULL || plan->sync == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    for (size_t i = 0; i < m->n; i++) {
        if (plan->slot[i] >= plan->window ||
            !dd_plan_syncs(plan, plan->slot[i], i)) {
            return DD_ERR_INVALID_PARAM;
        }
    }
    return DD_OK;
}

dd_status_t dd_plan_cost_delayed(const dd_plan_input_t *input,
                                 const dd_plan_t *plan,
                                 const dd_plan_delay_t *delay,
                                 dd_plan_cost_t *cost_p)
{
    dd_plan_dl_t m;

    if (cost_p == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_dl_init(&m, input, delay);
    if (status != DD_OK) {
        return status;
    }
    status = dd_plan_dl_check(&m, plan);
    if (status == DD_OK) {
        dd_plan_dl_run(&m, plan, cost_p);
    }
    dd_plan_dl_cleanup(&m);
    return status;
}

/* Whether a is better than b by more than rounding. */
static int dd_plan_dl_better(double a, double b)
{
    return a < b - 1e-12 * (1.0 + fabs(b));
}

/* Single-layer moves between slots, first improvement, until none helps
 * or the evaluations run out. */
static void dd_plan_dl_moves(dd_plan_dl_t *m, dd_plan_t *plan, double *best,
                             uint64_t *evals)
{
    int improved = 1;
    dd_plan_cost_t c;

    while (improved && *evals > 0) {
        improved = 0;
        for (size_t k = m->n; k-- > 0 && *evals > 0;) {
            unsigned from = plan->slot[k];
            for (unsigned to = 0; to<plan->window && * evals> 0; to++) {
                if (to == from) {
                    continue;
                }
                dd_plan_set_slot(plan, k, to);
                dd_plan_dl_run(m, plan, &c);
                (*evals)--;
                if (dd_plan_dl_better(c.window_s, *best)) {
                    *best = c.window_s;
                    from = to;
                    improved = 1;
                } else {
                    dd_plan_set_slot(plan, k, from);
                }
            }
        }
    }
}

/* Extra syncs that leave the window's time as it is, iteration by
 * iteration, layers in backward order. */
static void dd_plan_dl_fill(dd_plan_dl_t *m, dd_plan_t *plan, double best,
                            uint64_t *evals)
{
    dd_plan_cost_t c;

    for (unsigned h = 0; h < plan->window; h++) {
        for (size_t i = m->n; i-- > 0 && *evals > 0;) {
            unsigned char *cell = &plan->sync[(size_t)h * m->n + i];
            if (*cell) {
                continue;
            }
            *cell = 1;
            dd_plan_dl_run(m, plan, &c);
            (*evals)--;
            if (c.window_s > best) {
                *cell = 0;
            }
        }
    }
}

dd_status_t dd_plan_fill_bubbles_delayed(const dd_plan_input_t *input,
                                         const dd_plan_delay_t *delay,
                                         dd_plan_t *plan)
{
    dd_plan_dl_t m;
    dd_plan_cost_t c;
    uint64_t evals = UINT64_MAX;

    dd_status_t status = dd_plan_dl_init(&m, input, delay);
    if (status != DD_OK) {
        return status;
    }
    status = dd_plan_dl_check(&m, plan);
    if (status == DD_OK) {
        dd_plan_dl_run(&m, plan, &c);
        dd_plan_dl_fill(&m, plan, c.window_s, &evals);
    }
    dd_plan_dl_cleanup(&m);
    return status;
}

/* The candidate of the lower cost into *best_p (the other is freed). */
static void dd_plan_dl_keep(dd_plan_dl_t *m, dd_plan_t *cand,
                            dd_plan_t **best_p, double *best)
{
    dd_plan_cost_t c;

    if (cand == NULL) {
        return;
    }
    dd_plan_dl_run(m, cand, &c);
    if (*best_p == NULL || dd_plan_dl_better(c.window_s, *best)) {
        dd_plan_free(*best_p);
        *best_p = cand;
        *best = c.window_s;
    } else {
        dd_plan_free(cand);
    }
}

dd_status_t dd_plan_dreamddp_delayed_exact(const dd_plan_input_t *input,
                                           unsigned window,
                                           const dd_plan_params_t *params,
                                           const dd_plan_delay_t *delay,
                                           dd_plan_t **plan_p)
{
    dd_plan_dl_t m;
    dd_plan_t *best_plan = NULL, *cand = NULL;
    double best = 0.0;
    dd_plan_params_t p;

    if (plan_p == NULL || window == 0) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_dl_init(&m, input, delay);
    if (status != DD_OK) {
        return status;
    }
    dd_plan_params_default(&p);
    if (params != NULL) {
        p = *params;
    }
    int fill =
        (params == NULL || !(params->field_mask & DD_PLAN_FIELD_FILL_BUBBLES))
            ? 1
            : params->fill_bubbles;
    uint64_t work =
        (params != NULL && (params->field_mask & DD_PLAN_FIELD_SEARCH_WORK))
            ? params->search_work
            : 100000000ull;
    /* One evaluation visits every layer of the window three times. */
    uint64_t evals = work / (3 * (uint64_t)window * m.n + 1) + 1;

    /* Starts: the same-iteration plan (its search, without its extra
     * syncs), the contiguous blocks and the uniform split. */
    dd_plan_params_t same = p;
    same.field_mask |= DD_PLAN_FIELD_FILL_BUBBLES;
    same.fill_bubbles = 0;
    if ((status = dd_plan_dreamddp(input, window, &same, &cand)) == DD_OK) {
        dd_plan_dl_keep(&m, cand, &best_plan, &best);
    }
    if (status == DD_OK &&
        (status = dd_plan_contiguous(input, window, &cand)) == DD_OK) {
        dd_plan_dl_keep(&m, cand, &best_plan, &best);
    }
    if (status == DD_OK &&
        (status = dd_plan_plsgd(m.n, window, &cand)) == DD_OK) {
        dd_plan_dl_keep(&m, cand, &best_plan, &best);
    }
    if (status == DD_OK) {
        dd_plan_dl_moves(&m, best_plan, &best, &evals);
        if (fill) {
            dd_plan_dl_fill(&m, best_plan, best, &evals);
        }
        *plan_p = best_plan;
    } else {
        dd_plan_free(best_plan);
    }
    dd_plan_dl_cleanup(&m);
    return status;
}

/* The delayed planner's front: above DD_PLAN_EXACT_LAYERS layers it plans
 * groups of them (group.c), else every layer. */
dd_status_t dd_plan_dreamddp_delayed(const dd_plan_input_t *input,
                                     unsigned window,
                                     const dd_plan_params_t *params,
                                     const dd_plan_delay_t *delay,
                                     dd_plan_t **plan_p)
{
    if (plan_p == NULL || delay == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    return dd_plan_by_groups(input)
               ? dd_plan_grouped(input, window, params, delay,
                                 dd_plan_dreamddp_delayed_exact, plan_p)
               : dd_plan_dreamddp_delayed_exact(input, window, params, delay,
                                                plan_p);
}
