/*
 * Planning many layers. The planner's dynamic program is O(H n^2) and its
 * searches visit every layer per move, so above DD_PLAN_EXACT_LAYERS
 * layers dd_plan_dreamddp (here) and dd_plan_dreamddp_delayed (deadline.c,
 * which calls into this file, never the other way) plan groups of
 * consecutive layers instead: at most DD_PLAN_EXACT_LAYERS of them, cut so
 * that each holds about as much of the model's time (backward plus sync)
 * as of its layer count, their times summed; every layer of a group then
 * syncs where its group does. A layer that is a big share of the model's
 * time stays a group of its own. Pure, deterministic.
 */
#include "sched/plan/model.h"

#include <stdlib.h>

/* The group of each layer (group[l]), returning how many there are. */
static size_t dd_plan_group_cut(const dd_plan_input_t *in, size_t *group)
{
    size_t n = in->num_layers, k = 0;
    double total = 0.0, acc = 0.0;

    for (size_t l = 0; l < n; l++) {
        total += in->bp_s[l] + in->comm_s[l];
    }
    /* Each layer weighs its share of the time plus its share of the count:
     * the weights sum to 2, and a group closes once it holds its share. */
    double target = 2.0 / DD_PLAN_EXACT_LAYERS;
    for (size_t l = 0; l < n; l++) {
        double w = 1.0 / (double)n;
        if (total > 0) {
            w += (in->bp_s[l] + in->comm_s[l]) / total;
        }
        if (acc > 0 && acc + w > target * 1.5) {
            k++; /* l would overfill the open group */
            acc = 0;
        }
        group[l] = k;
        acc += w;
        if (acc >= target) {
            k++;
            acc = 0;
        }
    }
    return acc > 0 ? k + 1 : k;
}

/* Sums per-layer times into per-group ones (NULL stays NULL). */
static double *dd_plan_group_sum(const double *v, const size_t *group, size_t n,
                                 size_t k)
{
    double *out;

    if (v == NULL || (out = calloc(k, sizeof(*out))) == NULL) {
        return NULL;
    }
    for (size_t l = 0; l < n; l++) {
        out[group[l]] += v[l];
    }
    return out;
}

/* The layers' plan from their groups'. */
static dd_status_t dd_plan_group_expand(const dd_plan_t *gp,
                                        const size_t *group, size_t n,
                                        dd_plan_t **plan_p)
{
    dd_plan_t *plan;
    dd_status_t status = dd_plan_alloc(n, gp->window, &plan);

    if (status != DD_OK) {
        return status;
    }
    for (size_t l = 0; l < n; l++) {
        plan->slot[l] = gp->slot[group[l]];
        for (unsigned h = 0; h < gp->window; h++) {
            plan->sync[(size_t)h * n + l] =
                gp->sync[(size_t)h * gp->num_layers + group[l]];
        }
    }
    *plan_p = plan;
    return DD_OK;
}

/* Whether input is planned by groups (dd_plan_grouped checks its times
 * layer by layer; the exact planner checks the rest). */
int dd_plan_by_groups(const dd_plan_input_t *input)
{
    return input != NULL && input->num_layers > DD_PLAN_EXACT_LAYERS &&
           input->bp_s != NULL && input->comm_s != NULL;
}

size_t dd_plan_groups(const dd_plan_input_t *input)
{
    if (!dd_plan_by_groups(input)) {
        return input != NULL ? input->num_layers : 0;
    }
    size_t *group = malloc(input->num_layers * sizeof(*group));
    size_t k = group != NULL ? dd_plan_group_cut(input, group) : 0;
    free(group);
    return k;
}

/* The same-iteration planner on every layer, as dd_plan_grouped runs it
 * (it has no delay). */
static dd_status_t dd_plan_same_exact(const dd_plan_input_t *input,
                                      unsigned window,
                                      const dd_plan_params_t *params,
                                      const dd_plan_delay_t *delay,
                                      dd_plan_t **plan_p)
{
    (void)delay;
    return dd_plan_dreamddp_exact(input, window, params, plan_p);
}

dd_status_t dd_plan_grouped(const dd_plan_input_t *input, unsigned window,
                            const dd_plan_params_t *params,
                            const dd_plan_delay_t *delay,
                            dd_plan_exact_fn exact, dd_plan_t **plan_p)
{
    size_t n = input->num_layers;

    /* Checked layer by layer, before sums could hide a bad time. */
    for (size_t l = 0; l < n; l++) {
        if (!dd_plan_time_ok(input->bp_s[l]) ||
            !dd_plan_time_ok(input->comm_s[l]) ||
            (delay != NULL &&
             ((delay->fp_s != NULL && !dd_plan_time_ok(delay->fp_s[l])) ||
              (delay->launch_s != NULL &&
               !dd_plan_time_ok(delay->launch_s[l])) ||
              (delay->land_s != NULL && !dd_plan_time_ok(delay->land_s[l]))))) {
            return DD_ERR_INVALID_PARAM;
        }
    }
    size_t *group = malloc(n * sizeof(*group));
    if (group == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    size_t k = dd_plan_group_cut(input, group);
    dd_plan_input_t gin = {.num_layers = k};
    double *bp = dd_plan_group_sum(input->bp_s, group, n, k);
    double *comm = dd_plan_group_sum(input->comm_s, group, n, k);
    dd_plan_delay_t gd = delay != NULL ? *delay : (dd_plan_delay_t){0};
    double *fp = NULL, *launch = NULL, *land = NULL;
    dd_status_t status = DD_ERR_NO_MEMORY;
    dd_plan_t *gp = NULL;

    if (delay != NULL) {
        fp = dd_plan_group_sum(delay->fp_s, group, n, k);
        launch = dd_plan_group_sum(delay->launch_s, group, n, k);
        land = dd_plan_group_sum(delay->land_s, group, n, k);
        gd.fp_s = fp;
        gd.launch_s = launch;
        gd.land_s = land;
    }
    if (bp != NULL && comm != NULL &&
        (delay == NULL || ((delay->fp_s == NULL || fp != NULL) &&
                           (delay->launch_s == NULL || launch != NULL) &&
                           (delay->land_s == NULL || land != NULL)))) {
        gin.bp_s = bp;
        gin.comm_s = comm;
        status = exact(&gin, window, params, delay != NULL ? &gd : NULL, &gp);
    }
    if (status == DD_OK) {
        status = dd_plan_group_expand(gp, group, n, plan_p);
    }
    dd_plan_free(gp);
    free(bp);
    free(comm);
    free(fp);
    free(launch);
    free(land);
    free(group);
    return status;
}

dd_status_t dd_plan_dreamddp(const dd_plan_input_t *input, unsigned window,
                             const dd_plan_params_t *params, dd_plan_t **plan_p)
{
    if (plan_p == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    return dd_plan_by_groups(input)
               ? dd_plan_grouped(input, window, params, NULL,
                                 dd_plan_same_exact, plan_p)
               : dd_plan_dreamddp_exact(input, window, params, plan_p);
}
