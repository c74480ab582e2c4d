/*
 * The planner's iterated local search: single-layer moves and swaps on an
 * assignment of one iteration per layer, costed incrementally, and kicks
 * from a seeded generator. Pure.
 */
#include "sched/plan/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Iterated local search from g, which it improves in place. */
dd_status_t dd_plan_local(const dd_plan_model_t *m,
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
