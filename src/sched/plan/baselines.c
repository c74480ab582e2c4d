/*
 * The baselines' schedules: full Local SGD, uniform partial Local SGD and
 * DDP (every layer every step), made from the layer count alone. Pure.
 */
#include "sched/plan/model.h"

#include <stdlib.h>
#include <string.h>

/* Allocates a schedule and gives each layer i the slot slot_of names. */
static dd_status_t dd_plan_baseline(size_t num_layers, unsigned window,
                                    unsigned (*slot_of)(size_t, size_t,
                                                        unsigned),
                                    dd_plan_t **plan_p)
{
    dd_plan_t *plan;

    if (plan_p == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_alloc(num_layers, window, &plan);
    if (status != DD_OK) {
        return status;
    }
    for (size_t i = 0; i < num_layers; i++) {
        dd_plan_set_slot(plan, i, slot_of(i, num_layers, window));
    }
    *plan_p = plan;
    return DD_OK;
}

static unsigned dd_plan_flsgd_slot(size_t i, size_t n, unsigned window)
{
    (void)i;
    (void)n;
    return window - 1;
}

dd_status_t dd_plan_flsgd(size_t num_layers, unsigned window,
                          dd_plan_t **plan_p)
{
    return dd_plan_baseline(num_layers, window, dd_plan_flsgd_slot, plan_p);
}

dd_status_t dd_plan_flsgd_cost(const dd_plan_input_t *input, unsigned window,
                               dd_plan_cost_t *cost_p)
{
    dd_plan_model_t m;

    if (cost_p == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_model_init(&m, input, window);
    if (status != DD_OK) {
        return status;
    }
    double comm = 0.0; /* in backward order, as schedsim.py adds it */
    for (size_t i = m.n; i-- > 0;) {
        comm += m.comm[i];
    }
    dd_plan_cost_fill(&m, comm, cost_p);
    dd_plan_model_cleanup(&m);
    return DD_OK;
}

static unsigned dd_plan_plsgd_slot(size_t i, size_t n, unsigned window)
{
    size_t per = (n + window - 1) / window;
    size_t k = n - 1 - i; /* position in backward order */
    return k / per < window ? (unsigned)(k / per) : window - 1;
}

dd_status_t dd_plan_plsgd(size_t num_layers, unsigned window,
                          dd_plan_t **plan_p)
{
    return dd_plan_baseline(num_layers, window, dd_plan_plsgd_slot, plan_p);
}

static unsigned dd_plan_ssgd_slot(size_t i, size_t n, unsigned window)
{
    (void)i;
    (void)n;
    (void)window;
    return 0;
}

dd_status_t dd_plan_ssgd(size_t num_layers, unsigned window, dd_plan_t **plan_p)
{
    dd_status_t status =
        dd_plan_baseline(num_layers, window, dd_plan_ssgd_slot, plan_p);
    if (status == DD_OK) {
        memset((*plan_p)->sync, 1, (size_t)window * num_layers);
    }
    return status;
}
