/*
 * Tests of the N-channel model (src/sched/channels.c): one channel is the
 * FIFO channel of plan.h; N channels share the NIC's rate (hand-computed
 * landings); a small sync launched after a large one lands first; the
 * channel rule; the deadline model with N channels (a hand case, and at
 * the step's end the one channel's figure whatever N); bad input.
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

/* One channel: finish[j] = max(release[j], finish[j - 1]) + comm[j]. */
static void test_one_channel_is_fifo(void **state)
{
    (void)state;
    uint64_t rng = 7;
    double release[40], comm[40], finish[40];
    uint64_t step[40];

    for (int round = 0; round < 50; round++) {
        double t = 0.0, fifo = 0.0;
        for (int j = 0; j < 40; j++) {
            t += uniform(&rng, 0.0, 1.0);
            release[j] = t;
            comm[j] = uniform(&rng, 0.0, 2.0);
            step[j] = (uint64_t)j / 7;
        }
        assert_int_equal(
            dd_plan_channels_finish(release, comm, step, 40, 1, finish), DD_OK);
        for (int j = 0; j < 40; j++) {
            fifo = (fifo > release[j] ? fifo : release[j]) + comm[j];
            assert_true(same_cost(finish[j], fifo));
        }
    }
}

/*
 * A large sync (4) at 0, a small one (1) at 1. One channel: 4 and 5. Two
 * channels: the large runs alone until 1 (3 left), then both at half the
 * rate: the small lands at 3, the large, with 2 left, alone again, at 5.
 */
static void test_small_after_large(void **state)
{
    (void)state;
    double release[2] = {0, 1}, comm[2] = {4, 1}, finish[2];

    assert_int_equal(dd_plan_channels_finish(release, comm, NULL, 2, 1, finish),
                     DD_OK);
    assert_true(same_cost(finish[0], 4.0) && same_cost(finish[1], 5.0));
    assert_int_equal(dd_plan_channels_finish(release, comm, NULL, 2, 2, finish),
                     DD_OK);
    assert_true(same_cost(finish[1], 3.0)); /* before the large one */
    assert_true(same_cost(finish[0], 5.0)); /* the NIC's work is the same */
}

/*
 * Sharing: two syncs of 2 at 0 on two channels land together at 4, not at
 * 2. Three syncs of 1 at 0 on two channels: the rule puts the third
 * behind the first (channel 0), so the first two land at 2 and the third,
 * alone, at 3. Four channels with three syncs: all at once, all at 3.
 */
static void test_bandwidth_shared(void **state)
{
    (void)state;
    double release[3] = {0, 0, 0}, two[2] = {2, 2}, ones[3] = {1, 1, 1};
    double finish[3];

    assert_int_equal(dd_plan_channels_finish(release, two, NULL, 2, 2, finish),
                     DD_OK);
    assert_true(same_cost(finish[0], 4.0) && same_cost(finish[1], 4.0));
    assert_int_equal(dd_plan_channels_finish(release, ones, NULL, 3, 2, finish),
                     DD_OK);
    assert_true(same_cost(finish[0], 2.0) && same_cost(finish[1], 2.0) &&
                same_cost(finish[2], 3.0));
    assert_int_equal(dd_plan_channels_finish(release, ones, NULL, 3, 4, finish),
                     DD_OK);
    for (int j = 0; j < 3; j++) {
        assert_true(same_cost(finish[j], 3.0));
    }
}

/* However many channels, the NIC is busy while a sync waits: the last
 * landing of a burst is the one channel's. */
static void test_last_landing_is_fifo(void **state)
{
    (void)state;
    uint64_t rng = 11;
    double release[30], comm[30], one[30], many[30];

    for (int round = 0; round < 50; round++) {
        double t = 0.0;
        for (int j = 0; j < 30; j++) {
            t += uniform(&rng, 0.0, 0.5);
            release[j] = t;
            comm[j] = uniform(&rng, 0.0, 1.0);
        }
        unsigned n = 2 + (unsigned)(next_random(&rng) % 7);
        assert_int_equal(
            dd_plan_channels_finish(release, comm, NULL, 30, 1, one), DD_OK);
        assert_int_equal(
            dd_plan_channels_finish(release, comm, NULL, 30, n, many), DD_OK);
        double last = 0.0;
        for (int j = 0; j < 30; j++) {
            last = many[j] > last ? many[j] : last;
            assert_true(many[j] >= release[j] + comm[j] - 1e-9);
        }
        assert_true(same_cost(last, one[29]));
    }
}

/* The rule: least work in the step so far, lowest index on a tie, and a
 * new step starts every channel empty. */
static void test_assign_rule(void **state)
{
    (void)state;
    dd_plan_assign_t a;

    dd_plan_assign_init(&a, 3);
    assert_int_equal(dd_plan_assign_next(&a, 0, 10), 0);
    assert_int_equal(dd_plan_assign_next(&a, 0, 1), 1);
    assert_int_equal(dd_plan_assign_next(&a, 0, 1), 2);
    assert_int_equal(dd_plan_assign_next(&a, 0, 5), 1); /* 1 < 10, tie 1 */
    assert_int_equal(dd_plan_assign_next(&a, 0, 1), 2); /* 1 < 6 */
    assert_int_equal(dd_plan_assign_next(&a, 1, 1), 0); /* new step */
    assert_int_equal(dd_plan_assign_next(&a, 1, 1), 1);
    dd_plan_assign_init(&a, 0); /* at least one channel */
    assert_int_equal(dd_plan_assign_next(&a, 0, 1), 0);
    assert_int_equal(dd_plan_assign_next(&a, 0, 1), 0);
    dd_plan_assign_init(&a, 99); /* at most DD_PLAN_MAX_CHANNELS */
    for (unsigned c = 0; c < DD_PLAN_MAX_CHANNELS; c++) {
        assert_int_equal(dd_plan_assign_next(&a, 0, 1), c);
    }
    assert_int_equal(dd_plan_assign_next(&a, 0, 1), 0);
}

/*
 * The deadline model, deadline at the next forward, both layers synced
 * every iteration: forward 0.5 each, backward 1 each, sync 1 (layer 0)
 * and 3 (layer 1, launched first). Backward starts at B. One channel:
 * layer 1's sync runs B+1..B+4, layer 0's B+4..B+5; layer 0's forward
 * waits until B+5, layer 1's then finds its landed: 3 of wait, 6 per
 * iteration. Two channels: layer 1's runs alone B+1..B+2 (2 left), then
 * both share: layer 0's lands at B+4, layer 1's (1 left) at B+5; forward
 * waits 2 for layer 0, then 0.5 for layer 1: 5.5 per iteration.
 */
static void test_deadline_two_channels(void **state)
{
    (void)state;
    double bp[2] = {1, 1}, comm[2] = {1, 3}, fp[2] = {0.5, 0.5};
    dd_plan_input_t in = {2, bp, comm};
    dd_plan_t *plan;
    dd_plan_cost_t one, two;
    assert_int_equal(dd_plan_ssgd(2, 1, &plan), DD_OK);

    dd_plan_delay_t d = {fp, DD_PLAN_DEADLINE_FORWARD, 0, NULL, NULL, 1, 0};
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &one), DD_OK);
    assert_true(same_cost(one.iter_s, 6.0) && same_cost(one.exposed_s, 3.0));
    d.channels = 2;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &two), DD_OK);
    assert_true(same_cost(two.iter_s, 5.5) && same_cost(two.exposed_s, 2.5));
    d.channels = 0; /* the one FIFO channel */
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &two), DD_OK);
    assert_true(same_cost(two.iter_s, 6.0));
    d.channels = DD_PLAN_MAX_CHANNELS + 1;
    assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &two),
                     DD_ERR_INVALID_PARAM);
    dd_plan_free(plan);
}

/* With the deadline at the step's end, N channels model what one does, on
 * random profiles and plans: dd_plan_cost's figure plus forward. */
static void test_step_end_any_channels(void **state)
{
    (void)state;
    uint64_t rng = 5;
    enum { N = 12 };
    double bp[N], comm[N];
    dd_plan_input_t in = {N, bp, comm};

    for (int round = 0; round < 30; round++) {
        dd_plan_t *plan;
        for (int i = 0; i < N; i++) {
            bp[i] = uniform(&rng, 0.01, 1.0);
            comm[i] = uniform(&rng, 0.0, 1.5);
        }
        assert_int_equal(dd_plan_alloc(N, 3, &plan), DD_OK);
        for (size_t i = 0; i < N; i++) {
            dd_plan_set_slot(plan, i, (unsigned)(next_random(&rng) % 3));
        }
        dd_plan_cost_t base, c;
        assert_int_equal(dd_plan_cost(&in, plan, &base), DD_OK);
        for (unsigned ch = 1; ch <= DD_PLAN_MAX_CHANNELS; ch++) {
            dd_plan_delay_t d = {
                NULL, DD_PLAN_DEADLINE_STEP_END, 0, NULL, NULL, ch, 0};
            assert_int_equal(dd_plan_cost_delayed(&in, plan, &d, &c), DD_OK);
            assert_true(same_cost(c.iter_s, base.iter_s));
        }
        dd_plan_free(plan);
    }
}

static void test_bad_input(void **state)
{
    (void)state;
    double release[2] = {1, 0}, comm[2] = {1, 1}, finish[2];
    dd_plan_net_t *net;

    /* Releases out of order, a negative time, channels out of range. */
    assert_int_equal(dd_plan_channels_finish(release, comm, NULL, 2, 2, finish),
                     DD_ERR_INVALID_PARAM);
    release[0] = 0;
    comm[1] = -1;
    assert_int_equal(dd_plan_channels_finish(release, comm, NULL, 2, 2, finish),
                     DD_ERR_INVALID_PARAM);
    comm[1] = 1;
    assert_int_equal(dd_plan_channels_finish(release, comm, NULL, 2, 0, finish),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_channels_finish(release, comm, NULL, 2,
                                             DD_PLAN_MAX_CHANNELS + 1, finish),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_channels_finish(NULL, comm, NULL, 2, 2, finish),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_net_create(0, 4, &net), DD_ERR_INVALID_PARAM);
    /* The net grows past its first capacity and is reusable. */
    assert_int_equal(dd_plan_net_create(2, 1, &net), DD_OK);
    double land[5];
    for (int r = 0; r < 2; r++) {
        for (int j = 0; j < 5; j++) {
            assert_int_equal(dd_plan_net_launch(net, 0, 0, 1, &land[j]), DD_OK);
            assert_true(land[j] == -2.0);
        }
        assert_true(same_cost(dd_plan_net_idle(net, 0), 5.0));
        assert_true(same_cost(dd_plan_net_wait(net, &land[4], 6.0), 5.0));
        dd_plan_net_reset(net);
    }
    dd_plan_net_free(net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_channel_is_fifo),
        cmocka_unit_test(test_small_after_large),
        cmocka_unit_test(test_bandwidth_shared),
        cmocka_unit_test(test_last_landing_is_fifo),
        cmocka_unit_test(test_assign_rule),
        cmocka_unit_test(test_deadline_two_channels),
        cmocka_unit_test(test_step_end_any_channels),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
