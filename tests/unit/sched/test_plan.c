/*
 * Tests of the planner (src/sched/plan.c): the cost model on hand-computed
 * cases, the baselines, and properties on random profiles checked against
 * brute force (the contiguous DP is the contiguous optimum; the planner is
 * never worse than the DP, is optimal where every assignment can be tried,
 * and bubble filling never costs anything). Needs no files and no network.
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
#include <string.h>

#define MAX_LAYERS 10
#define MAX_WINDOW 4
#define SEEDS_PER_CASE 6
/* Brute force over all H^n assignments only where it stays fast. */
#define MAX_ASSIGNMENTS 70000

/* Two ways of adding the same waits may differ in the last bits. */
static int close_or_below(double a, double b)
{
    return a <= b + 1e-9 * (1.0 + fabs(b));
}

/* A random profile: some layers without backward time or traffic, and a
 * traffic scale that ranges from fully hidden to far exposed. */
typedef struct {
    double bp[MAX_LAYERS];
    double comm[MAX_LAYERS];
    dd_plan_input_t input;
} profile_t;

static void random_profile(size_t n, uint64_t seed, profile_t *p)
{
    static const double scales[] = {0.2, 1.0, 3.0, 10.0};
    uint64_t state = seed;
    double scale = scales[next_random(&state) % 4];

    for (size_t i = 0; i < n; i++) {
        p->bp[i] = unit_random(&state) < 0.2 ? 0.0 : unit_random(&state);
        p->comm[i] =
            unit_random(&state) < 0.1 ? 0.0 : scale * unit_random(&state);
    }
    p->input.num_layers = n;
    p->input.bp_s = p->bp;
    p->input.comm_s = p->comm;
}

static double cost_of(const dd_plan_input_t *input, const dd_plan_t *plan)
{
    dd_plan_cost_t cost;
    assert_int_equal(dd_plan_cost(input, plan, &cost), DD_OK);
    return cost.iter_s;
}

/* Gives layer i (forward index) the slot g[i]. */
static void assign(dd_plan_t *plan, const unsigned *g)
{
    for (size_t i = 0; i < plan->num_layers; i++) {
        assert_int_equal(dd_plan_set_slot(plan, i, g[i]), DD_OK);
    }
}

/* Minimum over all contiguous-block schedules: iteration h takes the
 * backward positions [from, to) for every choice of to, the last iteration
 * takes the rest. g is scratch. */
static double brute_contiguous(const dd_plan_input_t *input, unsigned H,
                               dd_plan_t *plan, unsigned h, size_t from,
                               unsigned *g)
{
    size_t n = input->num_layers;
    double best = INFINITY;

    if (h + 1 == H) {
        for (size_t k = from; k < n; k++) {
            g[n - 1 - k] = h;
        }
        assign(plan, g);
        return cost_of(input, plan);
    }
    for (size_t to = from; to <= n; to++) {
        for (size_t k = from; k < to; k++) {
            g[n - 1 - k] = h;
        }
        double c = brute_contiguous(input, H, plan, h + 1, to, g);
        best = c < best ? c : best;
    }
    return best;
}

/* Minimum over all H^n assignments of one slot per layer. */
static double brute_all(const dd_plan_input_t *input, unsigned H,
                        dd_plan_t *plan)
{
    size_t n = input->num_layers;
    unsigned g[MAX_LAYERS] = {0};
    double best = INFINITY;

    for (;;) {
        assign(plan, g);
        double c = cost_of(input, plan);
        best = c < best ? c : best;
        size_t i = 0;
        while (i < n && ++g[i] == H) {
            g[i++] = 0;
        }
        if (i == n) {
            return best;
        }
    }
}

static size_t assignments(size_t n, unsigned H)
{
    size_t count = 1;
    for (size_t i = 0; i < n && count <= MAX_ASSIGNMENTS; i++) {
        count *= H;
    }
    return count;
}

/* Each layer has a valid primary slot, synced there. */
static void assert_every_layer_synced(const dd_plan_t *plan)
{
    for (size_t i = 0; i < plan->num_layers; i++) {
        assert_true(plan->slot[i] < plan->window);
        assert_true(dd_plan_syncs(plan, plan->slot[i], i));
    }
}

/* In backward order, the slots of a contiguous-block schedule never go
 * down. */
static void assert_contiguous(const dd_plan_t *plan)
{
    for (size_t i = plan->num_layers; i-- > 1;) {
        assert_true(plan->slot[i] <= plan->slot[i - 1]);
    }
    assert_int_equal(dd_plan_num_extra(plan), 0);
}

/*
 * bp = {1, 2, 3}, comm = {4, 1, 2} (forward). Backward runs layer 2 (ends
 * at 3), layer 1 (ends at 5), layer 0 (ends at 6).
 */
static const double ex_bp[] = {1, 2, 3};
static const double ex_comm[] = {4, 1, 2};
static const dd_plan_input_t ex_input = {3, ex_bp, ex_comm};

static void test_cost_all_in_one_iteration(void **state)
{
    (void)state;
    dd_plan_t *plan;
    dd_plan_cost_t cost;

    /* Syncs: layer 2 from 3 to 5, layer 1 from 5 to 6, layer 0 from 6 to
     * 10: 4 exposed after backward ends at 6. */
    assert_int_equal(dd_plan_alloc(3, 1, &plan), DD_OK);
    assert_int_equal(dd_plan_cost(&ex_input, plan, &cost), DD_OK);
    assert_true(cost.exposed_s == 4.0);
    assert_true(cost.window_s == 10.0);
    assert_true(cost.iter_s == 10.0);
    dd_plan_free(plan);
}

static void test_cost_two_iterations(void **state)
{
    (void)state;
    dd_plan_t *plan;
    dd_plan_cost_t cost;
    const unsigned last_alone[] = {1, 0, 0};
    const unsigned first_alone[] = {0, 0, 1};

    assert_int_equal(dd_plan_alloc(3, 2, &plan), DD_OK);
    /* Iteration 0: layers 2 and 1 end by 6, hidden. Iteration 1: layer 0
     * from 6 to 10. Window 2 * 6 + 4. */
    assign(plan, last_alone);
    assert_int_equal(dd_plan_cost(&ex_input, plan, &cost), DD_OK);
    assert_true(cost.exposed_s == 4.0);
    assert_true(cost.window_s == 16.0);
    assert_true(cost.iter_s == 8.0);
    /* Iteration 0: layer 1 from 5 to 6, layer 0 from 6 to 10 (4).
     * Iteration 1: layer 2 from 3 to 5 (0). */
    assign(plan, first_alone);
    assert_int_equal(dd_plan_cost(&ex_input, plan, &cost), DD_OK);
    assert_true(cost.exposed_s == 4.0);
    /* An extra sync counts: layer 2 again in iteration 0 starts at 3,
     * ends at 5, and pushes nothing (layer 1 starts at 5 anyway). */
    assert_int_equal(dd_plan_add_sync(plan, 2, 0), DD_OK);
    assert_int_equal(dd_plan_num_extra(plan), 1);
    assert_int_equal(dd_plan_cost(&ex_input, plan, &cost), DD_OK);
    assert_true(cost.exposed_s == 4.0);
    dd_plan_free(plan);
}

static void test_cost_channel_gap(void **state)
{
    (void)state;
    const double bp[] = {1, 1, 1};
    const double comm[] = {0.5, 3, 0.5};
    const dd_plan_input_t input = {3, bp, comm};
    dd_plan_t *plan;
    dd_plan_cost_t cost;

    /* Layer 2: 1 to 1.5; layer 1 waits for its backward (2) and runs to
     * 5; layer 0 from 5 to 5.5. Backward ends at 3: 2.5 exposed. */
    assert_int_equal(dd_plan_alloc(3, 1, &plan), DD_OK);
    assert_int_equal(dd_plan_cost(&input, plan, &cost), DD_OK);
    assert_true(cost.exposed_s == 2.5);
    assert_true(cost.iter_s == 5.5);
    dd_plan_free(plan);
}

static void test_cost_landing(void **state)
{
    (void)state;
    dd_plan_t *plan;
    dd_plan_cost_t cost;
    const unsigned last_alone[] = {1, 0, 0};

    assert_int_equal(dd_plan_alloc(3, 2, &plan), DD_OK);
    assign(plan, last_alone);
    /* Iteration 0: layers 2 and 1 leave the wire at 6, as backward ends,
     * and land 1 later: 1 exposed. Iteration 1: layer 0 leaves at 10 and
     * lands at 11: 5. */
    assert_int_equal(dd_plan_cost_landing(&ex_input, plan, 1.0, &cost), DD_OK);
    assert_true(cost.exposed_s == 6.0);
    assert_true(cost.window_s == 18.0);
    /* An iteration that syncs nothing waits for nothing: layer 0 moved to
     * iteration 0 leaves iteration 1 empty. */
    assign(plan, (const unsigned[]){0, 0, 0});
    assert_int_equal(dd_plan_cost_landing(&ex_input, plan, 1.0, &cost), DD_OK);
    assert_true(cost.exposed_s == 5.0);
    /* Landing 0 is dd_plan_cost. */
    assert_int_equal(dd_plan_cost_landing(&ex_input, plan, 0.0, &cost), DD_OK);
    assert_true(cost.exposed_s == 4.0);
    assert_int_equal(dd_plan_cost_landing(&ex_input, plan, -1.0, &cost),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_cost_landing(&ex_input, plan, NAN, &cost),
                     DD_ERR_INVALID_PARAM);
    dd_plan_free(plan);
}

static void test_baselines(void **state)
{
    (void)state;
    dd_plan_t *plan;
    dd_plan_cost_t cost;

    assert_int_equal(dd_plan_flsgd(3, 2, &plan), DD_OK);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(plan->slot[i], 1);
    }
    assert_int_equal(dd_plan_num_extra(plan), 0);
    /* Overlapped: layer 2 3..5, layer 1 5..6, layer 0 6..10. */
    assert_true(cost_of(&ex_input, plan) == 6.0 + 4.0 / 2);
    dd_plan_free(plan);

    /* schedsim.py's figure: 6 + (4 + 1 + 2) / 2. */
    assert_int_equal(dd_plan_flsgd_cost(&ex_input, 2, &cost), DD_OK);
    assert_true(cost.iter_s == 9.5);
    assert_true(cost.window_s == 19.0);

    /* S-SGD: every iteration costs the H = 1 case, 10. */
    assert_int_equal(dd_plan_ssgd(3, 2, &plan), DD_OK);
    assert_int_equal(dd_plan_num_extra(plan), 3);
    assert_true(cost_of(&ex_input, plan) == 10.0);
    dd_plan_free(plan);
}

static void test_plsgd_slots(void **state)
{
    (void)state;
    /* Backward position k gets k / ceil(n / H); slots listed by forward
     * index, so the last layer comes first in backward order. */
    static const struct {
        size_t n;
        unsigned H;
        unsigned slots[10];
    } cases[] = {
        {3, 2, {1, 0, 0}},
        {5, 2, {1, 1, 0, 0, 0}},
        {10, 4, {3, 2, 2, 2, 1, 1, 1, 0, 0, 0}},
        {7, 3, {2, 1, 1, 1, 0, 0, 0}},
        {3, 4, {2, 1, 0}},
        {10, 6, {4, 4, 3, 3, 2, 2, 1, 1, 0, 0}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        dd_plan_t *plan;
        assert_int_equal(dd_plan_plsgd(cases[c].n, cases[c].H, &plan), DD_OK);
        for (size_t i = 0; i < cases[c].n; i++) {
            assert_int_equal(plan->slot[i], cases[c].slots[i]);
        }
        assert_every_layer_synced(plan);
        assert_int_equal(dd_plan_num_extra(plan), 0);
        dd_plan_free(plan);
    }
}

/* Non-contiguous wins: backward order A (bp 1, comm 2), B (0, 4), C (2, 2),
 * D (2, 0). {A, C} and {B, D} hide everything; the best contiguous split
 * exposes 2. Forward order is D, C, B, A. */
static void test_noncontiguous_beats_dp(void **state)
{
    (void)state;
    const double bp[] = {2, 2, 0, 1};
    const double comm[] = {0, 2, 4, 2};
    const dd_plan_input_t input = {4, bp, comm};
    dd_plan_t *dp, *plan;
    dd_plan_cost_t cost;

    assert_int_equal(dd_plan_contiguous(&input, 2, &dp), DD_OK);
    assert_int_equal(dd_plan_cost(&input, dp, &cost), DD_OK);
    assert_true(cost.exposed_s == 2.0);
    assert_contiguous(dp);
    assert_int_equal(dd_plan_dreamddp(&input, 2, NULL, &plan), DD_OK);
    assert_int_equal(dd_plan_cost(&input, plan, &cost), DD_OK);
    assert_true(cost.exposed_s == 0.0);
    assert_true(cost.iter_s == 5.0);
    /* A and C share an iteration, B has the other. */
    assert_int_equal(plan->slot[3], plan->slot[1]);
    assert_int_not_equal(plan->slot[3], plan->slot[2]);
    assert_every_layer_synced(plan);
    dd_plan_free(dp);
    dd_plan_free(plan);
}

/* Single moves and swaps from the DP optimum stop at 9 here (found by a
 * search over random small profiles); only the exact search reaches 8,
 * the optimum over all 3^7 assignments. */
static void test_exact_search_escapes_local_optimum(void **state)
{
    (void)state;
    const double bp[] = {4, 0, 2, 0, 0, 4, 1};
    const double comm[] = {5, 3, 6, 1, 5, 4, 6};
    const dd_plan_input_t input = {7, bp, comm};
    dd_plan_params_t exact_only = {.field_mask = DD_PLAN_FIELD_SEARCH_ROUNDS |
                                                 DD_PLAN_FIELD_FILL_BUBBLES,
                                   .search_rounds = 0,
                                   .fill_bubbles = 0};
    dd_plan_t *plan, *scratch;
    dd_plan_cost_t cost;

    assert_int_equal(dd_plan_dreamddp(&input, 3, &exact_only, &plan), DD_OK);
    assert_int_equal(dd_plan_cost(&input, plan, &cost), DD_OK);
    assert_true(cost.exposed_s == 8.0);
    assert_int_equal(dd_plan_alloc(7, 3, &scratch), DD_OK);
    assert_true(brute_all(&input, 3, scratch) == 11.0 + 8.0 / 3);
    dd_plan_free(scratch);
    dd_plan_free(plan);
}

static void test_dp_is_contiguous_optimum(void **state)
{
    (void)state;
    unsigned g[MAX_LAYERS];
    profile_t p;

    for (size_t n = 1; n <= MAX_LAYERS; n++) {
        for (unsigned H = 1; H <= MAX_WINDOW; H++) {
            for (uint64_t s = 0; s < SEEDS_PER_CASE; s++) {
                dd_plan_t *dp, *scratch;
                random_profile(n, 1000 * n + 10 * H + s, &p);
                assert_int_equal(dd_plan_contiguous(&p.input, H, &dp), DD_OK);
                assert_int_equal(dd_plan_alloc(n, H, &scratch), DD_OK);
                double best = brute_contiguous(&p.input, H, scratch, 0, 0, g);
                assert_true(same_cost(cost_of(&p.input, dp), best));
                assert_contiguous(dp);
                assert_every_layer_synced(dp);
                dd_plan_free(dp);
                dd_plan_free(scratch);
            }
        }
    }
}

/* The planner with the given effort on a random profile: never worse than
 * the DP, never worse than brute force where that is feasible. */
static double check_effort(const profile_t *p, unsigned H,
                           const dd_plan_params_t *params, double c_dp,
                           double best)
{
    dd_plan_t *plan;

    assert_int_equal(dd_plan_dreamddp(&p->input, H, params, &plan), DD_OK);
    double c = cost_of(&p->input, plan);
    assert_true(close_or_below(c, c_dp));
    assert_true(close_or_below(c, best));
    assert_every_layer_synced(plan);
    dd_plan_free(plan);
    return c;
}

/* One random case of the planner property test: the full planner, and
 * each of its two searches alone (in the full planner the exact search
 * completes on profiles this small, so the local search would go untested
 * otherwise). */
static void check_planner(size_t n, unsigned H, uint64_t seed)
{
    dd_plan_params_t bare, exact_only, local_only;
    dd_plan_t *dp, *plan, *scratch;
    profile_t p;
    double best = INFINITY;

    random_profile(n, seed, &p);
    dd_plan_params_default(&bare);
    bare.fill_bubbles = 0;
    exact_only = bare;
    exact_only.search_rounds = 0;
    exact_only.search_work = 0;
    local_only = bare;
    local_only.exact_nodes = 0;
    assert_int_equal(dd_plan_contiguous(&p.input, H, &dp), DD_OK);
    double c_dp = cost_of(&p.input, dp);
    if (assignments(n, H) <= MAX_ASSIGNMENTS) {
        assert_int_equal(dd_plan_alloc(n, H, &scratch), DD_OK);
        best = brute_all(&p.input, H, scratch);
        dd_plan_free(scratch);
    }
    double c_bare = check_effort(&p, H, &bare, c_dp, best);
    check_effort(&p, H, &exact_only, c_dp, best);
    check_effort(&p, H, &local_only, c_dp, best);

    /* Bubble filling keeps the primary slots and costs nothing, bit for
     * bit. */
    assert_int_equal(dd_plan_dreamddp(&p.input, H, NULL, &plan), DD_OK);
    assert_true(cost_of(&p.input, plan) <= c_bare);
    assert_every_layer_synced(plan);
    dd_plan_free(dp);
    dd_plan_free(plan);
}

static void test_planner_properties(void **state)
{
    (void)state;
    for (size_t n = 1; n <= MAX_LAYERS; n++) {
        for (unsigned H = 1; H <= MAX_WINDOW; H++) {
            for (uint64_t s = 0; s < SEEDS_PER_CASE; s++) {
                check_planner(n, H, 5000 * n + 100 * H + s);
            }
        }
    }
}

/* The planner's cost on a larger profile: a local search alone (no exact
 * search) must still never be worse than the DP. */
static void test_planner_large_without_exact(void **state)
{
    (void)state;
    double bp[60], comm[60];
    dd_plan_input_t input = {60, bp, comm};
    dd_plan_params_t params = {.field_mask = DD_PLAN_FIELD_EXACT_NODES,
                               .exact_nodes = 0};
    uint64_t rng = 42;

    for (size_t i = 0; i < 60; i++) {
        bp[i] = unit_random(&rng);
        comm[i] = 3.0 * unit_random(&rng);
    }
    for (unsigned H = 1; H <= 12; H += 5) {
        dd_plan_t *dp, *plan;
        assert_int_equal(dd_plan_contiguous(&input, H, &dp), DD_OK);
        assert_int_equal(dd_plan_dreamddp(&input, H, &params, &plan), DD_OK);
        assert_true(close_or_below(cost_of(&input, plan), cost_of(&input, dp)));
        assert_every_layer_synced(plan);
        dd_plan_free(dp);
        dd_plan_free(plan);
    }
}

/* Above DD_PLAN_EXACT_LAYERS layers the planner plans groups of
 * consecutive layers: at most about DD_PLAN_EXACT_LAYERS of them, each
 * layer where its group is, every layer synced, and the modeled time
 * within 2 % of the contiguous optimum over every layer one by one (the
 * DP, still fast at this size). A negative time in one layer is refused
 * even where its group's sum would not be. */
static void test_planner_groups_many_layers(void **state)
{
    (void)state;
    enum { N = 3000 };
    double *bp = malloc(N * sizeof(*bp)), *comm = malloc(N * sizeof(*comm));
    dd_plan_input_t input = {N, bp, comm};
    uint64_t rng = 7;

    assert_non_null(bp);
    assert_non_null(comm);
    for (size_t i = 0; i < N; i++) {
        bp[i] = 1e-4 * unit_random(&rng);
        comm[i] = (i % 500 == 0 ? 0.2 : 1e-3) * unit_random(&rng);
    }
    size_t k = dd_plan_groups(&input);
    assert_true(k > DD_PLAN_EXACT_LAYERS / 2 && k <= DD_PLAN_EXACT_LAYERS + 1);
    dd_plan_input_t small = {DD_PLAN_EXACT_LAYERS, bp, comm};
    assert_int_equal(dd_plan_groups(&small), DD_PLAN_EXACT_LAYERS);
    for (unsigned H = 2; H <= 8; H *= 2) {
        dd_plan_t *dp, *plan;
        assert_int_equal(dd_plan_contiguous(&input, H, &dp), DD_OK);
        assert_int_equal(dd_plan_dreamddp(&input, H, NULL, &plan), DD_OK);
        assert_every_layer_synced(plan);
        size_t runs = 1;
        for (size_t i = 1; i < N; i++) {
            runs += plan->slot[i] != plan->slot[i - 1];
        }
        assert_true(runs <= k);
        assert_true(cost_of(&input, plan) <= 1.02 * cost_of(&input, dp));
        dd_plan_free(dp);
        dd_plan_free(plan);
    }
    dd_plan_t *plan = NULL;
    bp[1234] = -1e-6; /* its neighbours' times would outweigh it */
    assert_int_equal(dd_plan_dreamddp(&input, 4, NULL, &plan),
                     DD_ERR_INVALID_PARAM);
    assert_null(plan);
    free(bp);
    free(comm);
}

/* Whether some single move or swap of slots lowers the cost of plan. */
static int improvable(const dd_plan_input_t *input, dd_plan_t *plan)
{
    size_t n = plan->num_layers;
    double c = cost_of(input, plan);

    for (size_t i = 0; i < n; i++) {
        unsigned from = plan->slot[i];
        for (unsigned h = 0; h < plan->window; h++) {
            dd_plan_set_slot(plan, i, h);
            int better = cost_of(input, plan) < c - 1e-9 * (1 + c);
            dd_plan_set_slot(plan, i, from);
            if (better) {
                return 1;
            }
        }
        for (size_t k = 0; k < i; k++) {
            unsigned other = plan->slot[k];
            dd_plan_set_slot(plan, i, other);
            dd_plan_set_slot(plan, k, from);
            int better = cost_of(input, plan) < c - 1e-9 * (1 + c);
            dd_plan_set_slot(plan, i, from);
            dd_plan_set_slot(plan, k, other);
            if (better) {
                return 1;
            }
        }
    }
    return 0;
}

/* The local search alone, without perturbation, ends in a local optimum:
 * no single move or swap improves on it. This holds the incremental cost
 * estimates of the search to the plain cost function. */
static void test_local_search_reaches_local_optimum(void **state)
{
    dd_plan_params_t descent = {.field_mask = DD_PLAN_FIELD_SEARCH_ROUNDS |
                                              DD_PLAN_FIELD_EXACT_NODES |
                                              DD_PLAN_FIELD_FILL_BUBBLES,
                                .search_rounds = 0,
                                .exact_nodes = 0,
                                .fill_bubbles = 0};
    double bp[40], comm[40];
    dd_plan_input_t input = {0, bp, comm};

    (void)state;
    for (uint64_t s = 0; s < 40; s++) {
        uint64_t rng = 700 + s;
        input.num_layers = 10 + next_random(&rng) % 31;
        unsigned H = 2 + (unsigned)(next_random(&rng) % 7);
        double scale = 0.5 + 4.0 * unit_random(&rng);
        for (size_t i = 0; i < input.num_layers; i++) {
            bp[i] = unit_random(&rng);
            comm[i] = scale * unit_random(&rng);
        }
        dd_plan_t *dp, *plan;
        assert_int_equal(dd_plan_contiguous(&input, H, &dp), DD_OK);
        assert_int_equal(dd_plan_dreamddp(&input, H, &descent, &plan), DD_OK);
        assert_true(close_or_below(cost_of(&input, plan), cost_of(&input, dp)));
        assert_false(improvable(&input, plan));
        dd_plan_free(dp);
        dd_plan_free(plan);
    }
}

static void test_planner_deterministic(void **state)
{
    (void)state;
    profile_t p;
    dd_plan_t *a, *b;

    random_profile(9, 77, &p);
    assert_int_equal(dd_plan_dreamddp(&p.input, 3, NULL, &a), DD_OK);
    assert_int_equal(dd_plan_dreamddp(&p.input, 3, NULL, &b), DD_OK);
    assert_memory_equal(a->slot, b->slot, 9 * sizeof(*a->slot));
    assert_memory_equal(a->sync, b->sync, 9 * 3);
    dd_plan_free(a);
    dd_plan_free(b);
}

/* Backward (layers 3, 2, 1, 0) ends at 1, 1.1, 1.2 and 3; every layer
 * syncs in iteration 0. Layer 3's message starts at 1 on an idle channel
 * and can take no layer ready later. Layer 2's starts at 2, when layer 3's
 * ends, and layer 1, ready at 1.2, joins it for free; layer 0, ready at 3,
 * does not. */
static void test_fusion_follows_the_model(void **state)
{
    (void)state;
    const double bp[] = {1.8, 0.1, 0.1, 1};
    const double comm[] = {0.5, 0.5, 0.5, 1};
    const dd_plan_input_t input = {4, bp, comm};
    dd_plan_t *plan;
    unsigned char hold[2 * 4];

    assert_int_equal(dd_plan_alloc(4, 2, &plan), DD_OK);
    assert_int_equal(dd_plan_fusion(&input, plan, hold), DD_OK);
    const unsigned char want[] = {0, 0, 1, 0, 0, 0, 0, 0};
    assert_memory_equal(hold, want, sizeof(want));
    /* Without layer 2, layer 1's message starts at 2 and nothing after it
     * is ready by then. */
    assert_int_equal(dd_plan_set_slot(plan, 2, 1), DD_OK);
    assert_int_equal(dd_plan_fusion(&input, plan, hold), DD_OK);
    const unsigned char want2[] = {0, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(hold, want2, sizeof(want2));
    assert_int_equal(dd_plan_fusion(&input, NULL, hold), DD_ERR_INVALID_PARAM);
    dd_plan_free(plan);
}

/* bp = {1, 1}, comm = {0.5, 0.5}; layer 1 in iteration 0, layer 0 in 1.
 * Iteration 1 can take layer 1 too (1 to 1.5, before layer 0 is ready at
 * 2); iteration 0 cannot take layer 0 (2 to 2.5 after backward ends). */
static void test_fill_hand_example(void **state)
{
    (void)state;
    const double bp[] = {1, 1};
    const double comm[] = {0.5, 0.5};
    const dd_plan_input_t input = {2, bp, comm};
    const unsigned g[] = {1, 0};
    dd_plan_t *plan;
    size_t added = 99;

    assert_int_equal(dd_plan_alloc(2, 2, &plan), DD_OK);
    assign(plan, g);
    double before = cost_of(&input, plan);
    assert_int_equal(dd_plan_fill_bubbles(&input, plan, &added), DD_OK);
    assert_int_equal(added, 1);
    assert_true(dd_plan_syncs(plan, 0, 1) && dd_plan_syncs(plan, 1, 1));
    assert_true(!dd_plan_syncs(plan, 0, 0) && dd_plan_syncs(plan, 1, 0));
    assert_int_equal(plan->slot[0], 1);
    assert_int_equal(plan->slot[1], 0);
    assert_true(cost_of(&input, plan) == before);
    dd_plan_free(plan);
}

static void test_fill_never_increases(void **state)
{
    (void)state;
    unsigned g[MAX_LAYERS];
    profile_t p;

    for (uint64_t s = 0; s < 300; s++) {
        uint64_t rng = s;
        size_t n = 1 + next_random(&rng) % MAX_LAYERS;
        unsigned H = 1 + (unsigned)(next_random(&rng) % 6);
        dd_plan_t *plan;
        size_t added;

        random_profile(n, 90000 + s, &p);
        for (size_t i = 0; i < n; i++) {
            g[i] = (unsigned)(next_random(&rng) % H);
        }
        assert_int_equal(dd_plan_alloc(n, H, &plan), DD_OK);
        assign(plan, g);
        double before = cost_of(&p.input, plan);
        assert_int_equal(dd_plan_fill_bubbles(&p.input, plan, &added), DD_OK);
        assert_true(cost_of(&p.input, plan) <= before);
        assert_int_equal(dd_plan_num_extra(plan), added);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(plan->slot[i], g[i]);
        }
        dd_plan_free(plan);
    }
}

static void test_params_defaults(void **state)
{
    (void)state;
    dd_plan_params_t params;
    dd_plan_params_t none = {.field_mask = 0};
    profile_t p;
    dd_plan_t *a, *b;

    dd_plan_params_default(&params);
    assert_int_equal(params.search_rounds, 50);
    assert_true(params.exact_nodes > 0);
    assert_true(params.search_work > 0);
    assert_int_equal(params.fill_bubbles, 1);
    /* An empty field_mask means every default. */
    random_profile(8, 5, &p);
    assert_int_equal(dd_plan_dreamddp(&p.input, 3, &none, &a), DD_OK);
    assert_int_equal(dd_plan_dreamddp(&p.input, 3, NULL, &b), DD_OK);
    assert_memory_equal(a->sync, b->sync, 8 * 3);
    dd_plan_free(a);
    dd_plan_free(b);
}

static void test_invalid(void **state)
{
    (void)state;
    const double bad_bp[] = {1, -1, 1};
    const double nan_comm[] = {1, NAN, 1};
    const double inf_bp[] = {1, INFINITY, 1};
    const dd_plan_input_t negative = {3, bad_bp, ex_comm};
    const dd_plan_input_t not_a_number = {3, ex_bp, nan_comm};
    const dd_plan_input_t infinite = {3, inf_bp, ex_comm};
    const dd_plan_input_t empty = {0, ex_bp, ex_comm};
    const dd_plan_input_t no_arrays = {3, NULL, ex_comm};
    dd_plan_t *plan = NULL, *small;
    dd_plan_cost_t cost;

    assert_int_equal(dd_plan_contiguous(&negative, 2, &plan),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_dreamddp(&not_a_number, 2, NULL, &plan),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_dreamddp(&infinite, 2, NULL, &plan),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_contiguous(&empty, 2, &plan),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_contiguous(&no_arrays, 2, &plan),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_contiguous(NULL, 2, &plan), DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_contiguous(&ex_input, 0, &plan),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_flsgd_cost(&ex_input, 0, &cost),
                     DD_ERR_INVALID_PARAM);
    assert_null(plan);
    assert_int_equal(dd_plan_alloc(0, 2, &plan), DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_alloc(SIZE_MAX / 2, 4, &plan),
                     DD_ERR_INVALID_PARAM);

    assert_int_equal(dd_plan_alloc(3, 2, &plan), DD_OK);
    assert_int_equal(dd_plan_set_slot(plan, 3, 0), DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_set_slot(plan, 0, 2), DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_add_sync(plan, 0, 2), DD_ERR_INVALID_PARAM);
    /* A layer not synced in its primary slot would go a window unsynced. */
    plan->sync[0] = 0;
    assert_int_equal(dd_plan_cost(&ex_input, plan, &cost),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_plan_fill_bubbles(&ex_input, plan, NULL),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(plan->sync[0], 0);
    /* The schedule must be for as many layers as the profile. */
    assert_int_equal(dd_plan_alloc(2, 2, &small), DD_OK);
    assert_int_equal(dd_plan_cost(&ex_input, small, &cost),
                     DD_ERR_INVALID_PARAM);
    dd_plan_free(small);
    dd_plan_free(plan);
    dd_plan_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_all_in_one_iteration),
        cmocka_unit_test(test_cost_two_iterations),
        cmocka_unit_test(test_cost_channel_gap),
        cmocka_unit_test(test_cost_landing),
        cmocka_unit_test(test_baselines),
        cmocka_unit_test(test_plsgd_slots),
        cmocka_unit_test(test_noncontiguous_beats_dp),
        cmocka_unit_test(test_exact_search_escapes_local_optimum),
        cmocka_unit_test(test_dp_is_contiguous_optimum),
        cmocka_unit_test(test_planner_properties),
        cmocka_unit_test(test_planner_large_without_exact),
        cmocka_unit_test(test_planner_groups_many_layers),
        cmocka_unit_test(test_local_search_reaches_local_optimum),
        cmocka_unit_test(test_planner_deterministic),
        cmocka_unit_test(test_fusion_follows_the_model),
        cmocka_unit_test(test_fill_hand_example),
        cmocka_unit_test(test_fill_never_increases),
        cmocka_unit_test(test_params_defaults),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
