/*
 * What the planner's files share (plan/, private to it): the profile in
 * the form the cost model walks it, an assignment with what makes a local
 * change cheap to cost, and the model's helpers. Pure, as plan.h.
 */
#ifndef DD_SCHED_PLAN_MODEL_H
#define DD_SCHED_PLAN_MODEL_H

#include "sched/plan/plan.h"

#include <stdint.h>

#define DD_PLAN_DEFAULT_SEARCH_ROUNDS 50
#define DD_PLAN_DEFAULT_EXACT_NODES 2000000
#define DD_PLAN_DEFAULT_SEED 0x9e3779b97f4a7c15ull
#define DD_PLAN_DEFAULT_SEARCH_WORK 100000000ull

/* The profile in the form the cost model walks it. */
typedef struct {
    size_t n;
    unsigned H;
    const double *bp;
    const double *comm;
    double *done;  /* [n] when layer i's backward ends */
    double t_end;  /* when backward ends */
    double bp_sum; /* sum of bp in forward order, as schedsim.py adds it */
} dd_plan_model_t;

/*
 * An assignment of one iteration per layer, with what makes a local change
 * cheap to cost. For iteration h, pre[i] is when its channel is free after
 * the layers n-1..i; and since one FIFO step, f -> max(f, done) + comm, is
 * the max-plus map f -> max(f + comm, done + comm), the layers i-1..0
 * together act as f -> max(f + sa[i], sb[i]). Adding or removing layer i
 * then costs O(1): start from pre[i + 1], step over i, apply (sa, sb)[i].
 */
typedef struct {
    const dd_plan_model_t *m;
    unsigned *g;     /* [n] iteration of layer i */
    double *pre;     /* [H * (n + 1)] */
    double *sa;      /* [H * (n + 1)] */
    double *sb;      /* [H * (n + 1)] */
    double *w;       /* [H] exposed wait of each iteration, exact */
    double total;    /* sum of w in iteration order */
    uint64_t work;   /* layer visits so far */
    uint64_t budget; /* the search stops when work reaches it */
} dd_plan_state_t;

/* Costs are compared with a margin so that rounding differences between
 * two ways of adding the same waits never count as an improvement; this
 * keeps the searches from cycling and from trading a schedule for an equal
 * one. */
int dd_plan_better(double a, double b);
/* A schedule the cost model can evaluate: the right size, and every layer
 * synced in its primary slot, so that no layer goes a window unsynced. */
dd_status_t dd_plan_check(const dd_plan_model_t *m, const dd_plan_t *plan);
void dd_plan_cost_fill(const dd_plan_model_t *m, double exposed,
                       dd_plan_cost_t *cost_p);
double dd_plan_max(double a, double b);
void dd_plan_model_cleanup(dd_plan_model_t *m);
dd_status_t dd_plan_model_init(dd_plan_model_t *m, const dd_plan_input_t *input,
                               unsigned window);
/* The model for plan's window with plan checked against it (dd_plan_check);
 * on an error nothing is left to clean up. */
dd_status_t dd_plan_model_of(dd_plan_model_t *m, const dd_plan_input_t *input,
                             const dd_plan_t *plan);
/* Takes the fields the caller set and the defaults for the others, so a
 * caller built against fewer fields keeps working. */
void dd_plan_params_merge(const dd_plan_params_t *given, dd_plan_params_t *out);
double dd_plan_pos(double x);
/* Whether t is a time: finite and not negative. */
int dd_plan_time_ok(double t);
/* dd_plan_dreamddp and dd_plan_dreamddp_delayed on every layer, however
 * many (group.c plans groups of them above DD_PLAN_EXACT_LAYERS). */
dd_status_t dd_plan_dreamddp_exact(const dd_plan_input_t *input,
                                   unsigned window,
                                   const dd_plan_params_t *params,
                                   dd_plan_t **plan_p);
dd_status_t dd_plan_dreamddp_delayed_exact(const dd_plan_input_t *input,
                                           unsigned window,
                                           const dd_plan_params_t *params,
                                           const dd_plan_delay_t *delay,
                                           dd_plan_t **plan_p);
/* An exact planner on every layer of input (delay NULL: the same-iteration
 * one), as dd_plan_grouped runs it on the groups. */
typedef dd_status_t (*dd_plan_exact_fn)(const dd_plan_input_t *input,
                                        unsigned window,
                                        const dd_plan_params_t *params,
                                        const dd_plan_delay_t *delay,
                                        dd_plan_t **plan_p);
/* Whether input is planned by groups (above DD_PLAN_EXACT_LAYERS). */
int dd_plan_by_groups(const dd_plan_input_t *input);
/* Plans input by its groups with exact, delay (NULL: the same-iteration
 * planner) summed per group, into *plan_p (group.c). */
dd_status_t dd_plan_grouped(const dd_plan_input_t *input, unsigned window,
                            const dd_plan_params_t *params,
                            const dd_plan_delay_t *delay,
                            dd_plan_exact_fn exact, dd_plan_t **plan_p);
/* The exposed wait of one iteration that syncs the layers marked in row. */
double dd_plan_row_wait(const dd_plan_model_t *m, const unsigned char *row);
/* Sum of the waits of H rows, in iteration order. */
double dd_plan_rows_exposed(const dd_plan_model_t *m,
                            const unsigned char *rows);
/* Copies a one-iteration-per-layer assignment into plan, without extras. */
void dd_plan_store(dd_plan_t *plan, const unsigned *g);
/* Iterated local search from g, which it improves in place. */
dd_status_t dd_plan_local(const dd_plan_model_t *m,
                          const dd_plan_params_t *params, unsigned *g);

#endif
