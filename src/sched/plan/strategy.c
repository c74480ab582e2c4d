/*
 * Strategy names and the adaptive period rules. Pure.
 */
#include "sched/plan/strategy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dd_strategy_names[] = {"ddp", "localsgd", "plsgd",
                                                "dreamddp", "adaptive"};

dd_status_t dd_strategy_parse(const char *s, dd_strategy_t *strategy_p)
{
    for (int k = 0; k < 5; k++) {
        size_t len = strlen(dd_strategy_names[k]);
        if (strncmp(s, dd_strategy_names[k], len) != 0) {
            continue;
        }
        int windowed = k != DD_STRATEGY_DDP && k != DD_STRATEGY_ADAPTIVE;
        if (k == DD_STRATEGY_ADAPTIVE && strcmp(s + len, ":drift") == 0) {
            *strategy_p =
                (dd_strategy_t){DD_STRATEGY_ADAPTIVE, 1, DD_ADAPT_DRIFT, 0};
            return DD_OK;
        }
        if (!windowed) {
            if (s[len] != '\0') {
                return DD_ERR_INVALID_PARAM;
            }
            *strategy_p =
                (dd_strategy_t){(dd_strategy_kind_t)k, 1, DD_ADAPT_GRAD, 0};
            return DD_OK;
        }
        if (s[len] != ':') {
            return DD_ERR_INVALID_PARAM;
        }
        /* Digits only: strtol alone would take "dreamddp: 4" and
         * "dreamddp:+4". */
        const char *w = s + len + 1;
        const char *plus = strchr(w, '+');
        int delay = plus != NULL && strcmp(plus, "+next") == 0;
        char digits[8];
        size_t nd = plus != NULL ? (size_t)(plus - w) : strlen(w);
        if ((plus != NULL && !delay) || nd == 0 || nd >= sizeof(digits)) {
            return DD_ERR_INVALID_PARAM;
        }
        memcpy(digits, w, nd);
        digits[nd] = '\0';
        w = digits;
        char *end;
        errno = 0;
        long h = strtol(w, &end, 10);
        if (*w < '0' || *w > '9' || errno != 0 || *end != '\0' || h < 1 ||
            h > 1024) {
            return DD_ERR_INVALID_PARAM;
        }
        *strategy_p = (dd_strategy_t){(dd_strategy_kind_t)k, (unsigned)h,
                                      DD_ADAPT_GRAD, delay};
        return DD_OK;
    }
    return DD_ERR_INVALID_PARAM;
}

void dd_strategy_format(const dd_strategy_t *strategy, char *buf, size_t size)
{
    const char *name = dd_strategy_names[strategy->kind];
    if (strategy->kind == DD_STRATEGY_ADAPTIVE &&
        strategy->signal == DD_ADAPT_DRIFT) {
        snprintf(buf, size, "%s:drift", name);
    } else if (strategy->kind == DD_STRATEGY_DDP ||
               strategy->kind == DD_STRATEGY_ADAPTIVE) {
        snprintf(buf, size, "%s", name);
    } else {
        snprintf(buf, size, "%s:%u%s", name, strategy->window,
                 strategy->delay ? "+next" : "");
    }
}

int dd_strategy_syncs_grads(const dd_strategy_t *strategy)
{
    return strategy->kind == DD_STRATEGY_DDP;
}

int dd_strategy_adapt_period(int period, double ratio, double high, double low,
                             int kmin, int kmax)
{
    if (ratio > high) {
        period--;
    } else if (ratio < low) {
        period++;
    }
    if (period < kmin) {
        period = kmin;
    }
    return period > kmax ? kmax : period;
}

int dd_strategy_drift_period(int period, double divergence, double target,
                             int kmin, int kmax)
{
    if (divergence > target) {
        period--;
    } else if (divergence < 0.5 * target) {
        period++;
    }
    if (period < kmin) {
        period = kmin;
    }
    return period > kmax ? kmax : period;
}
