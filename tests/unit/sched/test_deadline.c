/*
 * Tests of the deadline model and its planner (src/sched/deadline.c):
 * hand-computed steady states for each deadline, the same-iteration model
 * and Local SGD's as its special cases, and the planner never worse than
 * its starting points nor, on small cases, than brute force.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "plan_random.h"
#include "sched/plan/plan.h"

#include <math.h>
#include <stdlib.h>

/*
 * Two layers, both synced every iteration: forward 0.5 each, backward 1
 * each, sync 2 (layer 0) and 1 (layer 1). By hand, from the second
 * iteration on:
 *  - deadline at the next forward: layer 0's sync (launched last, at the
 *    end of backward) lands 2 after backward ends, and layer 0's forward
 *    comes first: every iteration waits 2, and takes 1 + 2 + 2 = 5;
 *  - at the next backward: the syncs (3 per iteration) hide behind the
 *    next iteration's 3 of compute: 3 per iteration, no wait;
 *  - at the step's end: 3 + 2 = 5, dd_plan_cost's 4 plus the forward.
 */
static void test_hand_case(void **state)
{
    (void)state;
    double bp[2] = {1, 1}, comm[2] = {2, 1}, fp[2] = {0.5, 0.5};
    dd_plan_input_t in = {2, bp, comm};
    dd_plan_t *plan;
    dd_plan_cost_t c, same;
    assert_int_equal(dd_plan_ssgd(2, 1, &plan), DD_OK);

    dd_plan_delay_t d = {fp, DD_PLAN_DEADLINE_FORWARD, 0, NULL, NULL, 1, 0};
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.iter_s, 5.0));
    assert_true(same_cost(c.exposed_s, 2.0));

    d.deadline = DD_PLAN_DEADLINE_BACKWARD;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.iter_s, 3.0));
    assert_true(same_cost(c.exposed_s, 0.0));

    d.deadline = DD_PLAN_DEADLINE_STEP_END;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_int_equal(dd_plan_cost(&in, plan, &same), DD_OK);
    assert_true(same_cost(same.iter_s, 4.0));
    assert_true(same_cost(c.iter_s, 5.0));
    assert_true(same_cost(c.exposed_s, same.exposed_s));
    dd_plan_free(plan);
}

/*
 * Early launches (launch_early): the sync of the case below, at H = 2 in
 * slot 0, has nothing in flight when its iteration starts, so it leaves
 * then, not after the layer's backward: it lands at 3, the next
 * iteration's forward (at 1) waits 2, and the window takes 1 + 2 + 1 = 4
 * instead of 5. A forward mark in the iteration that launched it does not
 * wait for it. With the deadline at the end of the next backward: leaving
 * at the start, it lands at 3, and the next iteration's backward (done at
 * 2) waits 1: 3 per window; leaving after backward (at 1), it lands at 4:
 * 4 per window. Local SGD's launches at the end of backward ignore the
 * flag.
 */
static void test_early_launch(void **state)
{
    (void)state;
    double bp[1] = {1}, comm[1] = {3};
    dd_plan_input_t in = {1, bp, comm};
    dd_plan_delay_t d = {NULL, DD_PLAN_DEADLINE_FORWARD, 0, NULL, NULL, 1, 1};
    dd_plan_t *plan;
    dd_plan_cost_t c;

    assert_int_equal(dd_plan_alloc(1, 2, &plan), DD_OK);
    assert_int_equal(dd_plan_set_slot(plan, 0, 0), DD_OK);
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.window_s, 4.0));
    assert_true(same_cost(c.exposed_s, 2.0));
    d.launch_early = 0;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.window_s, 5.0));

    d.deadline = DD_PLAN_DEADLINE_BACKWARD;
    d.launch_early = 1;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.window_s, 3.0));
    assert_true(same_cost(c.exposed_s, 1.0));
    d.launch_early = 0;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.window_s, 4.0));

    d.launch_at_end = 1;
    d.launch_early = 1;
    dd_plan_cost_t at_end;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    d.launch_early = 0;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &at_end), DD_OK);
    assert_true(same_cost(c.window_s, at_end.window_s));
    dd_plan_free(plan);
}

/*
 * A sync longer than a whole iteration: layer 0 (backward 1, no forward)
 * syncs for 3. Launched at the end of backward, it lands 3 later, and the
 * next iteration's forward, which comes at once, waits for all of it: 4
 * per iteration. At H = 2, with the layer synced in slot 0 only, the wait
 * falls in the window's second iteration: 1 + (3 + 1) = 5 per window.
 */
static void test_sync_across_iterations(void **state)
{
    (void)state;
    double bp[1] = {1}, comm[1] = {3};
    dd_plan_input_t in = {1, bp, comm};
    dd_plan_delay_t d = {NULL, DD_PLAN_DEADLINE_FORWARD, 0, NULL, NULL, 1, 0};
    dd_plan_t *plan;
    dd_plan_cost_t c;

    assert_int_equal(dd_plan_ssgd(1, 1, &plan), DD_OK);
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.iter_s, 4.0));
    assert_true(same_cost(c.exposed_s, 3.0));
    dd_plan_free(plan);

    assert_int_equal(dd_plan_alloc(1, 2, &plan), DD_OK);
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.window_s, 5.0));
    assert_true(same_cost(c.exposed_s, 3.0));
    dd_plan_free(plan);
}

static void random_profile(uint64_t *rng, size_t n, double *bp, double *comm,
                           double *fp)
{
    for (size_t i = 0; i < n; i++) {
        bp[i] = uniform(rng, 0.001, 0.05);
        comm[i] = uniform(rng, 0.0, 0.08);
        fp[i] = 0.5 * bp[i];
    }
}

/* The step's end as the deadline, without forward, is dd_plan_cost's
 * model; Local SGD's launch at the end is dd_plan_flsgd_cost's. */
static void test_special_cases(void **state)
{
    (void)state;
    uint64_t rng = 7;
    double bp[12], comm[12], fp[12];
    for (int trial = 0; trial < 30; trial++) {
        size_t n = 1 + (size_t)(next_random(&rng) % 12);
        unsigned H = 1 + (unsigned)(next_random(&rng) % 4);
        random_profile(&rng, n, bp, comm, fp);
        dd_plan_input_t in = {n, bp, comm};
        dd_plan_t *plan;
        dd_plan_cost_t a, b;
        assert_int_equal(dd_plan_dreamddp(&in, H, NULL, &plan), DD_OK);
        dd_plan_delay_t d = {NULL, DD_PLAN_DEADLINE_STEP_END, 0, NULL, NULL, 1,
                             0};
        assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &a), DD_OK);
        assert_int_equal(dd_plan_cost(&in, plan, &b), DD_OK);
        assert_true(same_cost(a.window_s, b.window_s));
        assert_true(same_cost(a.exposed_s, b.exposed_s));
        dd_plan_free(plan);

        assert_int_equal(dd_plan_flsgd(n, H, &plan), DD_OK);
        d.launch_at_end = 1;
        assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &a), DD_OK);
        assert_int_equal(dd_plan_flsgd_cost(&in, H, &b), DD_OK);
        assert_true(same_cost(a.iter_s, b.iter_s));
        dd_plan_free(plan);
    }
}

/* Every assignment of n layers to H iterations: the least window time. */
static double brute_force(const dd_plan_input_t *in, unsigned H,
                          const dd_plan_delay_t *d)
{
    size_t n = in->num_layers, total = 1;
    double best = INFINITY;
    for (size_t i = 0; i < n; i++) {
        total *= H;
    }
    dd_plan_t *plan;
    assert_int_equal(dd_plan_alloc(n, H, &plan), DD_OK);
    for (size_t code = 0; code < total; code++) {
        size_t c = code;
        for (size_t i = 0; i < n; i++, c /= H) {
            dd_plan_set_slot(plan, i, (unsigned)(c % H));
        }
        dd_plan_cost_t cost;
        assert_int_equal(dd_plan_cost_delayed(in, plan, d, &cost), DD_OK);
        best = cost.window_s < best ? cost.window_s : best;
    }
    dd_plan_free(plan);
    return best;
}

/* The delayed planner is never worse than the same-iteration plan nor the
 * uniform split under the deadline model, its extra syncs cost nothing,
 * and on small cases it is within 5 % of the optimum. */
static void test_planner(void **state)
{
    (void)state;
    uint64_t rng = 11;
    double bp[8], comm[8], fp[8];
    for (int trial = 0; trial < 40; trial++) {
        size_t n = 1 + (size_t)(next_random(&rng) % 6);
        unsigned H = 1 + (unsigned)(next_random(&rng) % 3);
        random_profile(&rng, n, bp, comm, fp);
        dd_plan_input_t in = {n, bp, comm};
        dd_plan_delay_t d = {
            fp,
            trial % 2 ? DD_PLAN_DEADLINE_FORWARD : DD_PLAN_DEADLINE_BACKWARD,
            0,
            NULL,
            NULL,
            1,
            0};
        dd_plan_t *delayed, *same, *uniform_plan;
        dd_plan_cost_t c_delayed, c_same, c_uniform, c_nofill;
        dd_plan_params_t nofill;
        dd_plan_params_default(&nofill);
        nofill.fill_bubbles = 0;
        assert_int_equal(dd_plan_dreamddp_delayed(&in, H, NULL, &d, &delayed),
                         DD_OK);
        assert_int_equal(dd_plan_dreamddp(&in, H, &nofill, &same), DD_OK);
        assert_int_equal(dd_plan_plsgd(n, H, &uniform_plan), DD_OK);
        assert_int_equal(dd_plan_cost_delayed(&in, delayed, &d, &c_delayed),
                         DD_OK);
        assert_int_equal(dd_plan_cost_delayed(&in, same, &d, &c_same), DD_OK);
        assert_int_equal(
            dd_plan_cost_delayed(&in, uniform_plan, &d, &c_uniform), DD_OK);
        assert_true(c_delayed.window_s <= c_same.window_s + 1e-12);
        assert_true(c_delayed.window_s <= c_uniform.window_s + 1e-12);
        dd_plan_free(same);
        assert_int_equal(dd_plan_dreamddp_delayed(&in, H, &nofill, &d, &same),
                         DD_OK);
        assert_int_equal(dd_plan_cost_delayed(&in, same, &d, &c_nofill), DD_OK);
        assert_true(c_delayed.window_s <= c_nofill.window_s);
        assert_true(c_delayed.window_s <=
                    1.05 * brute_force(&in, H, &d) + 1e-12);
        dd_plan_free(delayed);
        dd_plan_free(same);
        dd_plan_free(uniform_plan);
    }
}

/*
 * The planner on a hand case, H = 2: layer 0 (last in backward, first in
 * forward) syncs for 2, layer 1 for 0.5; backward and forward 1 each, 4
 * of compute per iteration. Under the forward deadline layer 0's sync,
 * launched as backward ends, is needed at once by the next forward: its 2
 * are exposed in whatever slot, and layer 1's 0.5 fits before its own
 * deadline (2 later) only if layer 0's is not ahead of it on the channel,
 * which holds in either slot as layer 1 launches first: the optimum is
 * 2 x 4 + 2 = 10. Under the backward deadline layer 0's sync has the next
 * iteration's forward and backward (4) to land: 8, no wait.
 */
static void test_planner_hand(void **state)
{
    (void)state;
    double bp[2] = {1, 1}, comm[2] = {2, 0.5}, fp[2] = {1, 1};
    dd_plan_input_t in = {2, bp, comm};
    dd_plan_delay_t d = {fp, DD_PLAN_DEADLINE_FORWARD, 0, NULL, NULL, 1, 0};
    dd_plan_params_t p;
    dd_plan_t *plan;
    dd_plan_cost_t c;
    dd_plan_params_default(&p);
    p.fill_bubbles = 0;
    assert_int_equal(dd_plan_dreamddp_delayed(&in, 2, &p, &d, &plan), DD_OK);
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.window_s, 10.0));
    assert_true(same_cost(c.exposed_s, 2.0));
    dd_plan_free(plan);
    d.deadline = DD_PLAN_DEADLINE_BACKWARD;
    assert_int_equal(dd_plan_dreamddp_delayed(&in, 2, &p, &d, &plan), DD_OK);
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.window_s, 8.0));
    assert_true(same_cost(c.exposed_s, 0.0));
    dd_plan_free(plan);
}

/*
 * The replica's own cost of a sync: the copy at its launch and the
 * correction where it lands. One layer, backward 1, sync 1, copy 0.25,
 * correction 0.5, the deadline at the next forward (none: 0). Launched at
 * 1.25 after backward and the copy, it lands at 2.25; the next iteration
 * waits 1, corrects for 0.5, then runs backward: 1 + 0.25 + 1 + 0.5 =
 * 2.75 per iteration, 1 of it waiting.
 */
static void test_launch_and_land_costs(void **state)
{
    (void)state;
    double bp[1] = {1}, comm[1] = {1}, copy[1] = {0.25}, fix[1] = {0.5};
    dd_plan_input_t in = {1, bp, comm};
    dd_plan_delay_t d = {NULL, DD_PLAN_DEADLINE_FORWARD, 0, copy, fix, 1, 0};
    dd_plan_t *plan;
    dd_plan_cost_t c;
    assert_int_equal(dd_plan_ssgd(1, 1, &plan), DD_OK);
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
    assert_true(same_cost(c.iter_s, 2.75));
    assert_true(same_cost(c.exposed_s, 1.0));
    copy[0] = -1;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c),
                     DD_ERR_INVALID_PARAM);
    dd_plan_free(plan);
}

static void test_invalid(void **state)
{
    (void)state;
    double bp[2] = {1, 1}, comm[2] = {1, 1}, bad[2] = {-1, 0};
    dd_plan_input_t in = {2, bp, comm};
    dd_plan_delay_t d = {bad, DD_PLAN_DEADLINE_FORWARD, 0, NULL, NULL, 1, 0};
    dd_plan_t *plan, *out = NULL;
    dd_plan_cost_t c;
    assert_int_equal(dd_plan_ssgd(2, 1, &plan), DD_OK);
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c),
                     DD_ERR_INVALID_PARAM);
    d.fp_s = NULL;
    d.deadline = (dd_plan_deadline_t)7;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c),
                     DD_ERR_INVALID_PARAM);
    d.deadline = DD_PLAN_DEADLINE_FORWARD;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, NULL, &c),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_dreamddp_delayed(&in, 0, NULL, &d, &out),
                     DD_ERR_INVALID_PARAM);
    assert_null(out);
    dd_plan_free(plan);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_case),
        cmocka_unit_test(test_sync_across_iterations),
        cmocka_unit_test(test_early_launch),
        cmocka_unit_test(test_special_cases),
        cmocka_unit_test(test_planner),
        cmocka_unit_test(test_planner_hand),
        cmocka_unit_test(test_launch_and_land_costs),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
