/*
 * Bubble filling: extra syncs where they leave an iteration's wait
 * unchanged, and the fusion rule that says which layers' messages wait
 * for the next layer. Pure.
 */
#include "sched/plan/model.h"

#include <stdlib.h>
#include <string.h>

/* Adds to row every layer that leaves its wait unchanged; returns how
 * many. Exact comparison is right here: a sync that fits in an idle gap of
 * the channel leaves every later start time bit-identical. */
static size_t dd_plan_fill_row(const dd_plan_model_t *m, unsigned char *row)
{
    double wait = dd_plan_row_wait(m, row);
    size_t added = 0;

    for (size_t i = m->n; i-- > 0;) {
        if (row[i]) {
            continue;
        }
        row[i] = 1;
        double with = dd_plan_row_wait(m, row);
        if (with <= wait) {
            wait = with;
            added++;
        } else {
            row[i] = 0;
        }
    }
    return added;
}

dd_status_t dd_plan_fill_bubbles(const dd_plan_input_t *input, dd_plan_t *plan,
                                 size_t *added_p)
{
    dd_plan_model_t m;
    size_t added = 0;

    dd_status_t status = dd_plan_model_of(&m, input, plan);
    if (status != DD_OK) {
        return status;
    }
    for (unsigned h = 0; h < m.H; h++) {
        added += dd_plan_fill_row(&m, plan->sync + (size_t)h * m.n);
    }
    if (added_p != NULL) {
        *added_p = added;
    }
    dd_plan_model_cleanup(&m);
    return DD_OK;
}

/* One iteration's row of dd_plan_fusion: group_start is when the model
 * starts the open message's first layer. */
static void dd_plan_fusion_row(const dd_plan_model_t *m,
                               const unsigned char *row, unsigned char *hold)
{
    double free_at = 0.0, group_start = 0.0;
    size_t open = m->n; /* the last layer of the open message; n: none */

    memset(hold, 0, m->n);
    for (size_t i = m->n; i-- > 0;) {
        if (!row[i]) {
            continue;
        }
        if (open < m->n && group_start >= m->done[i]) {
            hold[open] = 1;
        } else {
            group_start = dd_plan_max(free_at, m->done[i]);
        }
        free_at = dd_plan_max(free_at, m->done[i]) + m->comm[i];
        open = i;
    }
}

dd_status_t dd_plan_fusion(const dd_plan_input_t *input, const dd_plan_t *plan,
                           unsigned char *hold)
{
    dd_plan_model_t m;

    if (hold == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_model_of(&m, input, plan);
    if (status != DD_OK) {
        return status;
    }
    for (unsigned h = 0; h < m.H; h++) {
        dd_plan_fusion_row(&m, plan->sync + (size_t)h * m.n,
                           hold + (size_t)h * m.n);
    }
    dd_plan_model_cleanup(&m);
    return DD_OK;
}
