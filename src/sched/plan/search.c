/*
 * The planner's searches: the exact contiguous-block optimum (a dynamic
 * program), branch and bound over all assignments, and the search behind
 * dd_plan_dreamddp that runs them with the local search (local.c). The
 * only randomness comes from the seed in the parameters, so every rank
 * that plans from the same profile gets the same schedule without having
 * to exchange it. Pure.
 */
#include "sched/plan/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

dd_status_t dd_plan_dreamddp_exact(const dd_plan_input_t *input,
                                   unsigned window,
                                   const dd_plan_params_t *params,
                                   dd_plan_t **plan_p)
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
