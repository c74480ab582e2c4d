/*
 * Strategies: parsing their names and, for each, which layers sync in which
 * step. Pure: no I/O, no clocks.
 */
#ifndef DD_SCHED_STRATEGY_H
#define DD_SCHED_STRATEGY_H

#include <dreamddp.h>

#include <stddef.h>

typedef enum {
    DD_STRATEGY_DDP = 0,  /* gradients, every layer, every step */
    DD_STRATEGY_LOCALSGD, /* parameters, all layers, end of every H-th step */
    DD_STRATEGY_PLSGD,    /* parameters, layers split evenly over H steps */
    DD_STRATEGY_DREAMDDP, /* parameters, planned slots + bubble filling */
    DD_STRATEGY_ADAPTIVE  /* parameters, per-layer period from gradients */
} dd_strategy_kind_t;

/* What drives adaptive's periods. */
typedef enum {
    DD_ADAPT_GRAD = 0, /* adaptive: the gradient-norm EMA's change */
    DD_ADAPT_DRIFT     /* adaptive:drift: the agreed divergence */
} dd_adapt_signal_t;

typedef struct {
    dd_strategy_kind_t kind;
    unsigned window; /* H; 1 for ddp and adaptive */
    dd_adapt_signal_t signal;
    /* "+next": a layer's average may land as late as its next use (the
     * next step's forward mark, or its next backward mark) and is applied
     * with the local steps taken meanwhile (delay.c). Parameter-averaging
     * window strategies only. */
    int delay;
} dd_strategy_t;

#define DD_STRATEGY_ACCEPTED                                                   \
    "ddp, localsgd:H, plsgd:H, dreamddp:H (H from 1 to 1024, each also with "  \
    "'+next' for delayed averaging), adaptive or adaptive:drift"

/** Parses "dreamddp:4", "dreamddp:4+next" and the like. DD_ERR_INVALID_PARAM,
 * without logging, for anything else. */
dd_status_t dd_strategy_parse(const char *s, dd_strategy_t *strategy_p);

/** Writes the canonical name ("dreamddp:4", "dreamddp:4+next"). */
void dd_strategy_format(const dd_strategy_t *strategy, char *buf, size_t size);

/** Whether the strategy averages gradients (else parameters). */
int dd_strategy_syncs_grads(const dd_strategy_t *strategy);

/**
 * The next adaptive period of a layer from the ratio of its gradient-norm
 * EMA now to the EMA at the previous update: one step shorter above high,
 * one step longer below low, clamped to [kmin, kmax].
 */
int dd_strategy_adapt_period(int period, double ratio, double high, double low,
                             int kmin, int kmax);

/**
 * adaptive:drift's next period of a layer from its divergence across the
 * workers: one step shorter above target, one step longer below half of
 * it, clamped to [kmin, kmax].
 */
int dd_strategy_drift_period(int period, double divergence, double target,
                             int kmin, int kmax);

#endif
