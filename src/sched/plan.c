/*
 * The DreamDDP planner; plan.h has the cost model. Pure: no I/O, no clocks,
 * no logging, no globals. The only randomness comes from the seed in the
 * parameters, so every rank that plans from the same profile gets the same
 * schedule without having to exchange it.
 *
 * Layers keep their forward index i everywhere; backward order is i from
 * n - 1 down to 0. The search works on an assignment of one iteration per
 * layer; extra syncs are added only at the end, by bubble filling.
 */
#include "sched/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
static void dd_plan_params_merge(const dd_plan_params_t *given,
                                 dd_plan_params_t *out)
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
static int dd_plan_better(double a, double b)
{
    return a < b - 1e-12 * (1.0 + fabs(b));
}

static double dd_plan_pos(double x)
{
    return x > 0.0 ? x : 0.0;
}

static int dd_plan_time_ok(double t)
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

static dd_status_t dd_plan_model_init(dd_plan_model_t *m,
                                      const dd_plan_input_t *input,
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

static void dd_plan_model_cleanup(dd_plan_model_t *m)
{
    free(m->done);
}

/* The exposed wait of one iteration that syncs the layers marked in row. */
static double dd_plan_row_wait(const dd_plan_model_t *m,
                               const unsigned char *row)
{
    double free_at = 0.0;
    for (size_t i = m->n; i-- > 0;) {
        if (row[i]) {
            double start = free_at > m->done[i] ? free_at : m->done[i];
            free_at = start + m->comm[i];
        }
    }
    return dd_plan_pos(free_at - m->t_end);
}

/* Sum of the waits of H rows, in iteration order. */
static double dd_plan_rows_exposed(const dd_plan_model_t *m,
                                   const unsigned char *rows)
{
    double exposed = 0.0;
    for (unsigned h = 0; h < m->H; h++) {
        exposed += dd_plan_row_wait(m, rows + (size_t)h * m->n);
    }
    return exposed;
}

static void dd_plan_cost_fill(const dd_plan_model_t *m, double exposed,
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
static dd_status_t dd_plan_check(const dd_plan_model_t *m,
                                 const dd_plan_t *plan)
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

dd_status_t dd_plan_cost(const dd_plan_input_t *input, const dd_plan_t *plan,
                         dd_plan_cost_t *cost_p)
{
    dd_plan_model_t m;

    if (plan == NULL || cost_p == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_model_init(&m, input, plan->window);
    if (status != DD_OK) {
        return status;
    }
    status = dd_plan_check(&m, plan);
    if (status == DD_OK) {
        dd_plan_cost_fill(&m, dd_plan_rows_exposed(&m, plan->sync), cost_p);
    }
    dd_plan_model_cleanup(&m);
    return status;
}

/* Copies a one-iteration-per-layer assignment into plan, without extras. */
static void dd_plan_store(dd_plan_t *plan, const unsigned *g)
{
    memset(plan->sync, 0, (size_t)plan->window * plan->num_layers);
    for (size_t i = 0; i < plan->num_layers; i++) {
        plan->slot[i] = g[i];
        plan->sync[(size_t)g[i] * plan->num_layers + i] = 1;
    }
}

/*
 * One step of the dynamic program: given prev[a], the least exposed time
 * of iterations 0..h-1 syncing the first a layers of the backward order,
 * computes next[b] for iterations 0..h and the start cut[b] of iteration
 * h's block. The block's wait is simulated while b grows, so each step is
 * O(n^2) without a table of block costs.
 */
static void dd_plan_dp_step(const dd_plan_model_t *m, const double *prev,
                            double *next, size_t *cut)
{
    size_t n = m->n;

    for (size_t b = 0; b <= n; b++) {
        next[b] = INFINITY;
    }
    for (size_t a = 0; a <= n; a++) {
        if (isinf(prev[a])) {
            continue;
        }
        double free_at = 0.0, wait = 0.0;
        for (size_t b = a; b <= n; b++) {
            if (b > a) {
                size_t i = n - b; /* backward position b - 1 */
                double start = free_at > m->done[i] ? free_at : m->done[i];
                free_at = start + m->comm[i];
                wait = dd_plan_pos(free_at - m->t_end);
            }
            if (prev[a] + wait < next[b]) {
                next[b] = prev[a] + wait;
                cut[b] = a;
            }
        }
    }
}

/* The exact contiguous-block optimum, as one iteration per layer in g. */
static dd_status_t dd_plan_dp(const dd_plan_model_t *m, unsigned *g)
{
    size_t n = m->n;
    double *f = malloc(2 * (n + 1) * sizeof(*f));
    size_t *cut = malloc((size_t)m->H * (n + 1) * sizeof(*cut));
    if (f == NULL || cut == NULL) {
        free(f);
        free(cut);
        return DD_ERR_NO_MEMORY;
    }
    double *prev = f, *next = f + n + 1;
    /* Before iteration 0, only the empty prefix is covered. */
    prev[0] = 0.0;
    for (size_t a = 1; a <= n; a++) {
        prev[a] = INFINITY;
    }
    for (unsigned h = 0; h < m->H; h++) {
        dd_plan_dp_step(m, prev, next, cut + (size_t)h * (n + 1));
        double *t = prev;
        prev = next;
        next = t;
    }
    size_t b = n;
    for (unsigned h = m->H; h-- > 0;) {
        size_t a = cut[(size_t)h * (n + 1) + b];
        for (size_t k = a; k < b; k++) {
            g[n - 1 - k] = h;
        }
        b = a;
    }
    free(f);
    free(cut);
    return DD_OK;
}

static dd_status_t dd_plan_from_model(const dd_plan_model_t *m,
                                      const unsigned *g, dd_plan_t **plan_p)
{
    dd_plan_t *plan;
    dd_status_t status = dd_plan_alloc(m->n, m->H, &plan);
    if (status != DD_OK) {
        return status;
    }
    dd_plan_store(plan, g);
    *plan_p = plan;
    return DD_OK;
}

dd_status_t dd_plan_contiguous(const dd_plan_input_t *input, unsigned window,
                               dd_plan_t **plan_p)
{
    dd_plan_model_t m;

    if (plan_p == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_model_init(&m, input, window);
    if (status != DD_OK) {
        return status;
    }
    unsigned *g = malloc(m.n * sizeof(*g));
    status = g ? dd_plan_dp(&m, g) : DD_ERR_NO_MEMORY;
    if (status == DD_OK) {
        status = dd_plan_from_model(&m, g, plan_p);
    }
    free(g);
    dd_plan_model_cleanup(&m);
    return status;
}

static dd_status_t dd_plan_state_init(dd_plan_state_t *s,
                                      const dd_plan_model_t *m, uint64_t budget)
{
    size_t cells = (size_t)m->H * (m->n + 1);

    s->m = m;
    s->g = malloc(m->n * sizeof(*s->g));
    s->pre = malloc(3 * cells * sizeof(double));
    s->w = malloc(m->H * sizeof(*s->w));
    if (s->g == NULL || s->pre == NULL || s->w == NULL) {
        free(s->g);
        free(s->pre);
        free(s->w);
        return DD_ERR_NO_MEMORY;
    }
    s->sa = s->pre + cells;
    s->sb = s->sa + cells;
    s->work = 0;
    s->budget = budget;
    return DD_OK;
}

static void dd_plan_state_cleanup(dd_plan_state_t *s)
{
    free(s->g);
    free(s->pre);
    free(s->w);
}

static double dd_plan_max(double a, double b)
{
    return a > b ? a : b;
}

/* Recomputes iteration h's tables and its exact wait, O(n). The wait is
 * simulated step by step, exactly as dd_plan_row_wait does. */
static void dd_plan_state_row(dd_plan_state_t *s, unsigned h)
{
    const dd_plan_model_t *m = s->m;
    size_t n = m->n;
    double *pre = s->pre + (size_t)h * (n + 1);
    double *sa = s->sa + (size_t)h * (n + 1);
    double *sb = s->sb + (size_t)h * (n + 1);

    pre[n] = 0.0;
    for (size_t i = n; i-- > 0;) {
        pre[i] = s->g[i] == h ? dd_plan_max(pre[i + 1], m->done[i]) + m->comm[i]
                              : pre[i + 1];
    }
    sa[0] = 0.0;
    sb[0] = -INFINITY;
    for (size_t i = 1; i <= n; i++) {
        size_t j = i - 1;
        int member = s->g[j] == h;
        sa[i] = member ? m->comm[j] + sa[j] : sa[j];
        sb[i] = member ? dd_plan_max(m->done[j] + m->comm[j] + sa[j], sb[j])
                       : sb[j];
    }
    s->w[h] = dd_plan_pos(pre[0] - m->t_end);
    s->work += n;
}

static void dd_plan_state_total(dd_plan_state_t *s)
{
    s->total = 0.0;
    for (unsigned h = 0; h < s->m->H; h++) {
        s->total += s->w[h];
    }
}

/* Makes s hold assignment g (which may be s->g itself). */
static void dd_plan_state_load(dd_plan_state_t *s, const unsigned *g)
{
    if (g != s->g) {
        memcpy(s->g, g, s->m->n * sizeof(*g));
    }
    for (unsigned h = 0; h < s->m->H; h++) {
        dd_plan_state_row(s, h);
    }
    dd_plan_state_total(s);
}

/* The wait of iteration h when its channel is free at x just after layer
 * i's turn, from the map of the layers after i. */
static double dd_plan_state_finish(const dd_plan_state_t *s, unsigned h,
                                   size_t i, double x)
{
    size_t at = (size_t)h * (s->m->n + 1) + i;
    return dd_plan_pos(dd_plan_max(x + s->sa[at], s->sb[at]) - s->m->t_end);
}

/* The channel of iteration h, free at x, after it also sends layer i. */
static double dd_plan_step(const dd_plan_model_t *m, size_t i, double x)
{
    return dd_plan_max(x, m->done[i]) + m->comm[i];
}

/* The wait iteration h would have with layer i added or removed. */
static double dd_plan_wait_toggled(dd_plan_state_t *s, unsigned h, size_t i)
{
    double x = s->pre[(size_t)h * (s->m->n + 1) + i + 1];
    if (s->g[i] != h) {
        x = dd_plan_step(s->m, i, x);
    }
    s->work++;
    return dd_plan_state_finish(s, h, i, x);
}

/*
 * Keeps the change already written to s->g (layers i and k, which may be
 * the same, in iterations a and b) if it lowers the exact cost; otherwise
 * puts old_i and old_k back. The estimates that proposed the change use
 * reassociated sums; checking the exact cost means the search never
 * accepts a change that is not a strict improvement, so it cannot cycle.
 */
static int dd_plan_state_commit(dd_plan_state_t *s, unsigned a, unsigned b,
                                size_t i, unsigned old_i, size_t k,
                                unsigned old_k)
{
    double before = s->w[a] + s->w[b];

    dd_plan_state_row(s, a);
    dd_plan_state_row(s, b);
    if (dd_plan_better(s->w[a] + s->w[b], before)) {
        return 1;
    }
    s->g[i] = old_i;
    s->g[k] = old_k;
    dd_plan_state_row(s, a);
    dd_plan_state_row(s, b);
    return 0;
}

static int dd_plan_try_move(dd_plan_state_t *s, size_t i, unsigned to,
                            double w_from)
{
    unsigned from = s->g[i];
    double w_to = dd_plan_wait_toggled(s, to, i);

    if (!dd_plan_better(w_from + w_to, s->w[from] + s->w[to])) {
        return 0;
    }
    s->g[i] = to;
    return dd_plan_state_commit(s, from, to, i, from, i, from);
}

/* First-improvement pass over single-layer moves; returns whether any. */
static int dd_plan_improve_moves(dd_plan_state_t *s)
{
    const dd_plan_model_t *m = s->m;
    int improved = 0;

    for (size_t i = m->n; i-- > 0 && s->work < s->budget;) {
        double w_from = dd_plan_wait_toggled(s, s->g[i], i);
        for (unsigned h = 0; h < m->H; h++) {
            if (h != s->g[i] && dd_plan_try_move(s, i, h, w_from)) {
                w_from = dd_plan_wait_toggled(s, h, i);
                improved = 1;
            }
        }
    }
    dd_plan_state_total(s);
    return improved;
}

/* The waits of iterations a = g[i] and b = g[k] (i > k: i's backward ends
 * first) if the two layers traded places: both channels are stepped from
 * i down to k, then finished with the maps of the layers after k. */
static void dd_plan_swap_waits(dd_plan_state_t *s, size_t i, size_t k,
                               double *wa_p, double *wb_p)
{
    const dd_plan_model_t *m = s->m;
    unsigned a = s->g[i], b = s->g[k];
    double xa = s->pre[(size_t)a * (m->n + 1) + i + 1];
    double xb = dd_plan_step(m, i, s->pre[(size_t)b * (m->n + 1) + i + 1]);

    for (size_t j = i - 1; j > k; j--) {
        if (s->g[j] == a) {
            xa = dd_plan_step(m, j, xa);
        } else if (s->g[j] == b) {
            xb = dd_plan_step(m, j, xb);
        }
    }
    xa = dd_plan_step(m, k, xa);
    s->work += i - k;
    *wa_p = dd_plan_state_finish(s, a, k, xa);
    *wb_p = dd_plan_state_finish(s, b, k, xb);
}

/* Whether exchanging the iterations of layers i > k lowers the cost;
 * keeps the exchange if so. */
static int dd_plan_try_swap(dd_plan_state_t *s, size_t i, size_t k)
{
    unsigned a = s->g[i], b = s->g[k];
    double wa, wb;

    dd_plan_swap_waits(s, i, k, &wa, &wb);
    if (!dd_plan_better(wa + wb, s->w[a] + s->w[b])) {
        return 0;
    }
    s->g[i] = b;
    s->g[k] = a;
    return dd_plan_state_commit(s, a, b, i, a, k, b);
}

/* A swap escapes the local optima of single moves in which every
 * iteration is full: moving one layer overloads its target, but trading a
 * big layer for a small one does not. */
static int dd_plan_improve_swaps(dd_plan_state_t *s)
{
    int improved = 0;

    for (size_t i = s->m->n; i-- > 0 && s->work < s->budget;) {
        for (size_t k = i; k-- > 0;) {
            if (s->g[i] != s->g[k]) {
                improved |= dd_plan_try_swap(s, i, k);
            }
        }
    }
    dd_plan_state_total(s);
    return improved;
}

static void dd_plan_local_search(dd_plan_state_t *s)
{
    while (s->work < s->budget) {
        int moved = dd_plan_improve_moves(s);
        int swapped = dd_plan_improve_swaps(s);
        if (!moved && !swapped) {
            return;
        }
    }
}

/* splitmix64: small, good enough to pick layers, and its state is local. */
static uint64_t dd_plan_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Moves a few random layers to random other iterations. */
static void dd_plan_perturb(dd_plan_state_t *s, uint64_t *rng)
{
    const dd_plan_model_t *m = s->m;
    unsigned kicks = 2 + (unsigned)(dd_plan_random(rng) % 3);

    for (unsigned k = 0; k < kicks; k++) {
        size_t i = (size_t)(dd_plan_random(rng) % m->n);
        unsigned to = (unsigned)(dd_plan_random(rng) % (m->H - 1));
        s->g[i] = to >= s->g[i] ? to + 1 : to;
    }
    dd_plan_state_load(s, s->g);
}

/*
 * Iterated local search from the assignment in s: descend, then kick a few
 * layers and descend again, keeping the best, until the rounds or the work
 * budget run out. best holds the result; s is left in any state.
 */
static void dd_plan_iterated_search(dd_plan_state_t *s, unsigned rounds,
                                    uint64_t seed, unsigned *best,
                                    double *best_total_p)
{
    uint64_t rng = seed;

    dd_plan_local_search(s);
    memcpy(best, s->g, s->m->n * sizeof(*best));
    double best_total = s->total;
    for (unsigned r = 0; r < rounds && s->m->H > 1 && s->work < s->budget;
         r++) {
        dd_plan_perturb(s, &rng);
        dd_plan_local_search(s);
        if (dd_plan_better(s->total, best_total)) {
            memcpy(best, s->g, s->m->n * sizeof(*best));
            best_total = s->total;
        } else {
            dd_plan_state_load(s, best);
        }
    }
    *best_total_p = best_total;
}

/*
 * Branch and bound over all assignments, layers taken in backward order so
 * that each iteration's channel can be simulated incrementally. An
 * iteration is summed up by when its channel becomes free; two iterations
 * whose channels are free by the same time, or both before the current
 * layer's backward ends, have the same future, so only one of them is
 * tried. Bound: the communication still to place must be exposed except
 * for what runs before the end of backward, and that is at most the slack
 * every iteration's channel has left, and at most what the remaining
 * layers can send between the end of their own backward and the end of
 * backward (min(comm, t_end - done) each).
 */
typedef struct {
    const dd_plan_model_t *m;
    double *free_at;  /* [H] channel free time of each iteration */
    unsigned *assign; /* [n] iteration of the layer at each depth */
    unsigned *cand;   /* [n * H] iterations to try at each depth, in order */
    unsigned *ncand;  /* [n] */
    unsigned *next;   /* [n] index into cand of the branch being explored */
    double *saved;    /* [n] free_at of the chosen iteration before it */
    double *cur;      /* [n + 1] exposed so far, before each depth */
    double *rest;     /* [n + 1] communication from each depth on */
    double *hideable; /* [n + 1] of which could at best run before t_end */
    unsigned *best;   /* [n] best assignment, forward index */
    double best_total;
    unsigned char *rows; /* [H * n] scratch to cost a complete assignment */
    uint64_t nodes;
    uint64_t budget;
} dd_plan_bb_t;

/* The layer at depth k of the search. */
static size_t dd_plan_bb_layer(const dd_plan_bb_t *bb, size_t k)
{
    return bb->m->n - 1 - k;
}

static double dd_plan_bb_bound(const dd_plan_bb_t *bb, size_t k)
{
    const dd_plan_model_t *m = bb->m;
    double ready = m->done[dd_plan_bb_layer(bb, k)], slack = 0.0;

    for (unsigned h = 0; h < m->H; h++) {
        double start = bb->free_at[h] > ready ? bb->free_at[h] : ready;
        slack += dd_plan_pos(m->t_end - start);
    }
    double hidden = slack < bb->hideable[k] ? slack : bb->hideable[k];
    return bb->cur[k] + dd_plan_pos(bb->rest[k] - hidden);
}

/* Lists the distinct iterations for the layer at depth k, cheapest first. */
static void dd_plan_bb_expand(dd_plan_bb_t *bb, size_t k)
{
    const dd_plan_model_t *m = bb->m;
    size_t i = dd_plan_bb_layer(bb, k);
    unsigned *cand = bb->cand + k * m->H, count = 0;
    double key[64];

    for (unsigned h = 0; h < m->H; h++) {
        double start =
            bb->free_at[h] > m->done[i] ? bb->free_at[h] : m->done[i];
        int seen = 0;
        for (unsigned c = 0; c < count && !seen; c++) {
            seen = key[c] == start;
        }
        if (seen) {
            continue;
        }
        /* Insertion by start time: the idlest channel is the cheapest. */
        unsigned c = count++;
        while (c > 0 && key[c - 1] > start) {
            cand[c] = cand[c - 1];
            key[c] = key[c - 1];
            c--;
        }
        cand[c] = h;
        key[c] = start;
    }
    bb->ncand[k] = count;
    bb->next[k] = 0;
}

static void dd_plan_bb_apply(dd_plan_bb_t *bb, size_t k, unsigned h)
{
    const dd_plan_model_t *m = bb->m;
    size_t i = dd_plan_bb_layer(bb, k);
    double old = bb->free_at[h];
    double start = old > m->done[i] ? old : m->done[i];
    double now = start + m->comm[i];

    bb->saved[k] = old;
    bb->assign[k] = h;
    bb->free_at[h] = now;
    bb->cur[k + 1] =
        bb->cur[k] + dd_plan_pos(now - m->t_end) - dd_plan_pos(old - m->t_end);
    bb->nodes++;
}

static void dd_plan_bb_undo(dd_plan_bb_t *bb, size_t k)
{
    bb->free_at[bb->assign[k]] = bb->saved[k];
}

/* A complete assignment is costed exactly as dd_plan_cost would, so the
 * result never rests on the search's incremental sums. */
static void dd_plan_bb_leaf(dd_plan_bb_t *bb)
{
    const dd_plan_model_t *m = bb->m;

    memset(bb->rows, 0, (size_t)m->H * m->n);
    for (size_t k = 0; k < m->n; k++) {
        bb->rows[(size_t)bb->assign[k] * m->n + dd_plan_bb_layer(bb, k)] = 1;
    }
    double total = dd_plan_rows_exposed(m, bb->rows);
    if (dd_plan_better(total, bb->best_total)) {
        bb->best_total = total;
        for (size_t k = 0; k < m->n; k++) {
            bb->best[dd_plan_bb_layer(bb, k)] = bb->assign[k];
        }
    }
}

/* Depth-first, without recursion, so that the depth (the number of
 * layers) never meets a thread's stack limit. Returns whether the search
 * completed, which makes best optimal. */
static int dd_plan_bb_run(dd_plan_bb_t *bb)
{
    size_t n = bb->m->n, k = 0;

    dd_plan_bb_expand(bb, 0);
    for (;;) {
        if (bb->next[k] == bb->ncand[k]) {
            if (k == 0) {
                return 1;
            }
            k--;
            dd_plan_bb_undo(bb, k);
            bb->next[k]++;
            continue;
        }
        if (bb->nodes >= bb->budget) {
            return 0;
        }
        dd_plan_bb_apply(bb, k, bb->cand[k * bb->m->H + bb->next[k]]);
        if (k + 1 == n) {
            dd_plan_bb_leaf(bb);
        } else if (dd_plan_better(dd_plan_bb_bound(bb, k + 1),
                                  bb->best_total)) {
            dd_plan_bb_expand(bb, ++k);
            continue;
        }
        dd_plan_bb_undo(bb, k);
        bb->next[k]++;
    }
}

/* One allocation for all the search's arrays, doubles first for
 * alignment. */
static dd_status_t dd_plan_bb_init(dd_plan_bb_t *bb, const dd_plan_model_t *m,
                                   void **mem_p)
{
    size_t n = m->n, H = m->H;
    size_t doubles = H + n + 3 * (n + 1);
    size_t uints = n + n * H + 2 * n + n;
    char *mem =
        malloc(doubles * sizeof(double) + uints * sizeof(unsigned) + H * n);
    if (mem == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    double *d = (double *)mem;
    bb->m = m;
    bb->free_at = d, d += H;
    bb->saved = d, d += n;
    bb->cur = d, d += n + 1;
    bb->rest = d, d += n + 1;
    bb->hideable = d, d += n + 1;
    unsigned *u = (unsigned *)d;
    bb->assign = u, u += n;
    bb->cand = u, u += n * H;
    bb->ncand = u, u += n;
    bb->next = u, u += n;
    bb->best = u, u += n;
    bb->rows = (unsigned char *)u;
    memset(bb->free_at, 0, H * sizeof(double));
    bb->cur[0] = 0.0;
    bb->rest[n] = 0.0;
    bb->hideable[n] = 0.0;
    for (size_t k = n; k-- > 0;) {
        size_t i = dd_plan_bb_layer(bb, k);
        double window = m->t_end - m->done[i];
        bb->rest[k] = bb->rest[k + 1] + m->comm[i];
        bb->hideable[k] =
            bb->hideable[k + 1] + (m->comm[i] < window ? m->comm[i] : window);
    }
    bb->nodes = 0;
    *mem_p = mem;
    return DD_OK;
}

/* Improves g (of cost *total_p) by branch and bound within budget nodes;
 * *optimal_p tells whether the search completed, which proves g optimal. */
static dd_status_t dd_plan_exact(const dd_plan_model_t *m, uint64_t budget,
                                 unsigned *g, double *total_p, int *optimal_p)
{
    dd_plan_bb_t bb;
    void *mem;

    *optimal_p = 0;
    /* The candidate list of one depth lives on the stack. */
    if (budget == 0 || m->H > 64) {
        return DD_OK;
    }
    dd_status_t status = dd_plan_bb_init(&bb, m, &mem);
    if (status != DD_OK) {
        return status;
    }
    bb.budget = budget;
    bb.best_total = *total_p;
    memcpy(bb.best, g, m->n * sizeof(*g));
    *optimal_p = dd_plan_bb_run(&bb);
    memcpy(g, bb.best, m->n * sizeof(*g));
    *total_p = bb.best_total;
    free(mem);
    return DD_OK;
}

/* Iterations are interchangeable in the cost model, so labels are free:
 * number them by the first layer each syncs in backward order, as the
 * paper does, so iteration 0 syncs the layers whose backward ends first. */
static void dd_plan_canonical(const dd_plan_model_t *m, unsigned *g)
{
    unsigned label[64];
    unsigned *map = m->H <= 64 ? label : malloc(m->H * sizeof(*map));
    unsigned used = 0;

    if (map == NULL) {
        return; /* labels stay as found; the cost is the same */
    }
    for (unsigned h = 0; h < m->H; h++) {
        map[h] = m->H;
    }
    for (size_t i = m->n; i-- > 0;) {
        if (map[g[i]] == m->H) {
            map[g[i]] = used++;
        }
        g[i] = map[g[i]];
    }
    if (map != label) {
        free(map);
    }
}

/* Iterated local search from g, which it improves in place. */
static dd_status_t dd_plan_local(const dd_plan_model_t *m,
                                 const dd_plan_params_t *params, unsigned *g)
{
    dd_plan_state_t s;
    double total;

    dd_status_t status = dd_plan_state_init(&s, m, params->search_work);
    if (status != DD_OK) {
        return status;
    }
    dd_plan_state_load(&s, g);
    dd_plan_iterated_search(&s, params->search_rounds, params->seed, g, &total);
    dd_plan_state_cleanup(&s);
    return DD_OK;
}

/*
 * The search behind dd_plan_dreamddp, on assignments only. The exact
 * search runs first: its first descent (each layer, in backward order, on
 * the channel that is free soonest) is a strong schedule for big models on
 * its own, and when it completes there is nothing left to improve. Each
 * stage starts from the previous stage's result and keeps it unless it
 * finds a strictly better one, so the result is never worse than the DP.
 */
static dd_status_t dd_plan_search(const dd_plan_model_t *m,
                                  const dd_plan_params_t *params, unsigned *g)
{
    double total = 0.0;
    int optimal = 0;
    unsigned char *rows = calloc((size_t)m->H * m->n, 1);

    dd_status_t status = rows ? dd_plan_dp(m, g) : DD_ERR_NO_MEMORY;
    if (status == DD_OK) {
        for (size_t i = 0; i < m->n; i++) {
            rows[(size_t)g[i] * m->n + i] = 1;
        }
        total = dd_plan_rows_exposed(m, rows);
        status = dd_plan_exact(m, params->exact_nodes, g, &total, &optimal);
    }
    if (status == DD_OK && !optimal) {
        status = dd_plan_local(m, params, g);
    }
    if (status == DD_OK) {
        dd_plan_canonical(m, g);
    }
    free(rows);
    return status;
}

dd_status_t dd_plan_dreamddp(const dd_plan_input_t *input, unsigned window,
                             const dd_plan_params_t *params, dd_plan_t **plan_p)
{
    dd_plan_model_t m;
    dd_plan_params_t p;
    dd_plan_t *plan = NULL;

    if (plan_p == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_plan_params_merge(params, &p);
    dd_status_t status = dd_plan_model_init(&m, input, window);
    if (status != DD_OK) {
        return status;
    }
    unsigned *g = malloc(m.n * sizeof(*g));
    status = g ? dd_plan_search(&m, &p, g) : DD_ERR_NO_MEMORY;
    if (status == DD_OK) {
        status = dd_plan_from_model(&m, g, &plan);
    }
    if (status == DD_OK && p.fill_bubbles) {
        status = dd_plan_fill_bubbles(input, plan, NULL);
    }
    if (status == DD_OK) {
        *plan_p = plan;
    } else {
        dd_plan_free(plan);
    }
    free(g);
    dd_plan_model_cleanup(&m);
    return status;
}

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

    if (plan == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_model_init(&m, input, plan->window);
    if (status != DD_OK) {
        return status;
    }
    status = dd_plan_check(&m, plan);
    if (status == DD_OK) {
        for (unsigned h = 0; h < m.H; h++) {
            added += dd_plan_fill_row(&m, plan->sync + (size_t)h * m.n);
        }
        if (added_p != NULL) {
            *added_p = added;
        }
    }
    dd_plan_model_cleanup(&m);
    return status;
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

    if (plan == NULL || hold == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_model_init(&m, input, plan->window);
    if (status != DD_OK) {
        return status;
    }
    status = dd_plan_check(&m, plan);
    for (unsigned h = 0; status == DD_OK && h < m.H; h++) {
        dd_plan_fusion_row(&m, plan->sync + (size_t)h * m.n,
                           hold + (size_t)h * m.n);
    }
    dd_plan_model_cleanup(&m);
    return status;
}

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

dd_status_t dd_plan_ssgd(size_t num_layers, unsigned window, dd_plan_t **plan_p)
{
    dd_plan_t *plan;

    if (plan_p == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_status_t status = dd_plan_alloc(num_layers, window, &plan);
    if (status != DD_OK) {
        return status;
    }
    memset(plan->sync, 1, (size_t)window * num_layers);
    *plan_p = plan;
    return DD_OK;
}
