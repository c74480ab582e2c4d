/*
 * The planner's cost model (plan.h): the profile as the model walks it,
 * the exposed wait of a schedule, and the schedule's storage. Pure: no
 * I/O, no clocks, no logging, no globals.
 *
 * Layers keep their forward index i everywhere; backward order is i from
 * n - 1 down to 0.
 */
#include "sched/plan/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void dd_plan_params_default(dd_plan_params_t *params_p)
{
    params_p->field_mask = DD_PLAN_FIELD_SEARCH_ROUNDS |
                           DD_PLAN_FIELD_EXACT_NODES | DD_PLAN_FIELD_SEED |
                           DD_PLAN_FIELD_FILL_BUBBLES |
                           DD_PLAN_FIELD_SEARCH_WORK;
    params_p->search_rounds = DD_PLAN_DEFAULT_SEARCH_ROUNDS;
    params_p->exact_nodes = DD_PLAN_DEFAULT_EXACT_NODES;
    params_p->seed = DD_PLAN_DEFAULT_SEED;
    params_p->fill_bubbles = 1;
    params_p->search_work = DD_PLAN_DEFAULT_SEARCH_WORK;
}

/* Takes the fields the caller set and the defaults for the others, so a
 * caller built against fewer fields keeps working. */
void dd_plan_params_merge(const dd_plan_params_t *given, dd_plan_params_t *out)
{
    dd_plan_params_default(out);
    if (given == NULL) {
        return;
    }
    if (given->field_mask & DD_PLAN_FIELD_SEARCH_ROUNDS) {
        out->search_rounds = given->search_rounds;
    }
    if (given->field_mask & DD_PLAN_FIELD_EXACT_NODES) {
        out->exact_nodes = given->exact_nodes;
    }
    if (given->field_mask & DD_PLAN_FIELD_SEED) {
        out->seed = given->seed;
    }
    if (given->field_mask & DD_PLAN_FIELD_FILL_BUBBLES) {
        out->fill_bubbles = given->fill_bubbles;
    }
    if (given->field_mask & DD_PLAN_FIELD_SEARCH_WORK) {
        out->search_work = given->search_work;
    }
}

/* Costs are compared with a margin so that rounding differences between
 * two ways of adding the same waits never count as an improvement; this
 * keeps the searches from cycling and from trading a schedule for an equal
 * one. */
int dd_plan_better(double a, double b)
{
    return a < b - 1e-12 * (1.0 + fabs(b));
}

double dd_plan_pos(double x)
{
    return x > 0.0 ? x : 0.0;
}

int dd_plan_time_ok(double t)
{
    return isfinite(t) && t >= 0.0;
}

static dd_status_t dd_plan_input_check(const dd_plan_input_t *input)
{
    if (input == NULL || input->num_layers == 0 || input->bp_s == NULL ||
        input->comm_s == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    for (size_t i = 0; i < input->num_layers; i++) {
        if (!dd_plan_time_ok(input->bp_s[i]) ||
            !dd_plan_time_ok(input->comm_s[i])) {
            return DD_ERR_INVALID_PARAM;
        }
    }
    return DD_OK;
}

dd_status_t dd_plan_model_init(dd_plan_model_t *m, const dd_plan_input_t *input,
                               unsigned window)
{
    dd_status_t status = dd_plan_input_check(input);
    if (status != DD_OK) {
        return status;
    }
    if (window == 0 || input->num_layers > SIZE_MAX / window) {
        return DD_ERR_INVALID_PARAM;
    }
    m->n = input->num_layers;
    m->H = window;
    m->bp = input->bp_s;
    m->comm = input->comm_s;
    m->done = malloc(m->n * sizeof(*m->done));
    if (m->done == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    /* Accumulated in backward order, as the reference model does, so that
     * both compute bit-identical waits. */
    double t = 0.0;
    for (size_t i = m->n; i-- > 0;) {
        t += m->bp[i];
        m->done[i] = t;
    }
    m->t_end = t;
    m->bp_sum = 0.0;
    for (size_t i = 0; i < m->n; i++) {
        m->bp_sum += m->bp[i];
    }
    return DD_OK;
}

void dd_plan_model_cleanup(dd_plan_model_t *m)
{
    free(m->done);
}

/* The exposed wait of one iteration that syncs the layers marked in row,
 * its last sync landing land_s after it leaves the channel. */
static double dd_plan_row_wait_landing(const dd_plan_model_t *m,
                                       const unsigned char *row, double land_s)
{
    double free_at = 0.0;
    int any = 0;
    for (size_t i = m->n; i-- > 0;) {
        if (row[i]) {
            double start = free_at > m->done[i] ? free_at : m->done[i];
            free_at = start + m->comm[i];
            any = 1;
        }
    }
    return any ? dd_plan_pos(free_at + land_s - m->t_end) : 0.0;
}

/* The exposed wait of one iteration that syncs the layers marked in row. */
double dd_plan_row_wait(const dd_plan_model_t *m, const unsigned char *row)
{
    return dd_plan_row_wait_landing(m, row, 0.0);
}

/* Sum of the waits of H rows, in iteration order, each landing land_s
 * late. */
static double dd_plan_rows_exposed_landing(const dd_plan_model_t *m,
                                           const unsigned char *rows,
                                           double land_s)
{
    double exposed = 0.0;
    for (unsigned h = 0; h < m->H; h++) {
        exposed += dd_plan_row_wait_landing(m, rows + (size_t)h * m->n, land_s);
    }
    return exposed;
}

/* Sum of the waits of H rows, in iteration order. */
double dd_plan_rows_exposed(const dd_plan_model_t *m, const unsigned char *rows)
{
    return dd_plan_rows_exposed_landing(m, rows, 0.0);
}

void dd_plan_cost_fill(const dd_plan_model_t *m, double exposed,
                       dd_plan_cost_t *cost_p)
{
    cost_p->exposed_s = exposed;
    cost_p->window_s = m->H * m->bp_sum + exposed;
    cost_p->iter_s = m->bp_sum + exposed / m->H;
}

dd_status_t dd_plan_alloc(size_t num_layers, unsigned window,
                          dd_plan_t **plan_p)
{
    if (num_layers == 0 || window == 0 || num_layers > SIZE_MAX / window ||
        plan_p == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_plan_t *plan = calloc(1, sizeof(*plan));
    if (plan == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    plan->num_layers = num_layers;
    plan->window = window;
    plan->slot = calloc(num_layers, sizeof(*plan->slot));
    plan->sync = calloc(num_layers * window, 1);
    if (plan->slot == NULL || plan->sync == NULL) {
        dd_plan_free(plan);
        return DD_ERR_NO_MEMORY;
    }
    memset(plan->sync, 1, num_layers); /* row 0: slot 0 of every layer */
    *plan_p = plan;
    return DD_OK;
}

void dd_plan_free(dd_plan_t *plan)
{
    if (plan != NULL) {
        free(plan->slot);
        free(plan->sync);
        free(plan);
    }
}

dd_status_t dd_plan_set_slot(dd_plan_t *plan, size_t layer, unsigned slot)
{
    if (plan == NULL || layer >= plan->num_layers || slot >= plan->window) {
        return DD_ERR_INVALID_PARAM;
    }
    for (unsigned h = 0; h < plan->window; h++) {
        plan->sync[(size_t)h * plan->num_layers + layer] = h == slot;
    }
    plan->slot[layer] = slot;
    return DD_OK;
}

dd_status_t dd_plan_add_sync(dd_plan_t *plan, size_t layer, unsigned iter)
{
    if (plan == NULL || layer >= plan->num_layers || iter >= plan->window) {
        return DD_ERR_INVALID_PARAM;
    }
    plan->sync[(size_t)iter * plan->num_layers + layer] = 1;
    return DD_OK;
}

size_t dd_plan_num_extra(const dd_plan_t *plan)
{
    size_t syncs = 0;
    for (size_t k = 0; k < (size_t)plan->window * plan->num_layers; k++) {
        syncs += plan->sync[k] != 0;
    }
    return syncs - plan->num_layers;
}

/* A schedule the cost model can evaluate: the right size, and every layer
 * synced in its primary slot, so that no layer goes a window unsynced. */
dd_status_t dd_plan_check(const dd_plan_model_t *m, const dd_plan_t *plan)
{
    if (plan == NULL || plan->num_layers != m->n || plan->window != m->H ||
        plan->slot == NULL || plan->sync == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    for (size_t i = 0; i < m->n; i++) {
        if (plan->slot[i] >= m->H || !dd_plan_syncs(plan, plan->slot[i], i)) {
            return DD_ERR_INVALID_PARAM;
        }
    }
    return DD_OK;
}

/* The cost model of input for plan's window, plan checked against it; on
 * an error nothing is left to clean up. */
dd_status_t dd_plan_model_of(dd_plan_model_t *m, const dd_plan_input_t *input,
                             const dd_plan_t *plan)
{
    if (plan == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_model_init(m, input, plan->window);
    if (status != DD_OK) {
        return status;
    }
    status = dd_plan_check(m, plan);
    if (status != DD_OK) {
        dd_plan_model_cleanup(m);
    }
    return status;
}

dd_status_t dd_plan_cost(const dd_plan_input_t *input, const dd_plan_t *plan,
                         dd_plan_cost_t *cost_p)
{
    return dd_plan_cost_landing(input, plan, 0.0, cost_p);
}

dd_status_t dd_plan_cost_landing(const dd_plan_input_t *input,
                                 const dd_plan_t *plan, double land_s,
                                 dd_plan_cost_t *cost_p)
{
    dd_plan_model_t m;

    if (cost_p == NULL || !dd_plan_time_ok(land_s)) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_model_of(&m, input, plan);
    if (status != DD_OK) {
        return status;
    }
    dd_plan_cost_fill(&m, dd_plan_rows_exposed_landing(&m, plan->sync, land_s),
                      cost_p);
    dd_plan_model_cleanup(&m);
    return DD_OK;
}

/* Copies a one-iteration-per-layer assignment into plan, without extras. */
void dd_plan_store(dd_plan_t *plan, const unsigned *g)
{
    memset(plan->sync, 0, (size_t)plan->window * plan->num_layers);
    for (size_t i = 0; i < plan->num_layers; i++) {
        plan->slot[i] = g[i];
        plan->sync[(size_t)g[i] * plan->num_layers + i] = 1;
    }
}

double dd_plan_max(double a, double b)
{
    return a > b ? a : b;
}
