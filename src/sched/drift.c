/*
 * The divergence monitor: at every parameter sync the engine measures, per
 * item, how far this worker's replica lies from the average before writing
 * the average back (dd_drift_norms, on the engine's thread); dd_step_end
 * turns the sums into each layer's relative divergence; the workers' figures
 * travel in the window-start agreement (measure.c) or adaptive's, and every
 * worker takes the same maximum and mean from them, warns on the same
 * layers, and (adaptive:drift) picks the same periods. Nothing here sends a
 * message of its own, nor touches a parameter.
 */
#include "sched/drift.h"
#include "core/log.h"
#include "core/time.h"
#include "sched/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dd_drift_reduce(const double *all, int n_workers, size_t stride,
                     size_t offset, size_t n, double *max, double *mean)
{
    for (size_t i = 0; i < n; i++) {
        double hi = DD_DRIFT_NONE, sum = 0;
        int k = 0;
        for (int r = 0; r < n_workers; r++) {
            double v = all[(size_t)r * stride + offset + i];
            if (!(v >= 0)) {
                continue; /* not measured there (or NaN, never agreed) */
            }
            hi = v > hi ? v : hi;
            sum += v;
            k++;
        }
        max[i] = hi;
        mean[i] = k > 0 ? sum / k : DD_DRIFT_NONE;
    }
}

int dd_drift_watch(dd_drift_watch_t *w, double max, int windows, double warn)
{
    int why = 0;

    if (max < 0) {
        return 0;
    }
    w->rises =
        w->agreed > 0 && max > w->last * DD_DRIFT_RISE ? w->rises + 1 : 0;
    w->last = max;
    w->agreed++;
    if (windows > 0 && w->rises >= windows) {
        why |= DD_DRIFT_WARN_RISING;
    }
    if (warn > 0 && max > warn) {
        why |= DD_DRIFT_WARN_ABOVE;
    }
    if (why == 0 || w->agreed < w->quiet_to) {
        return 0;
    }
    w->quiet_to = w->agreed + (uint64_t)(windows > 0 ? windows : 1);
    return why;
}

void dd_sched_drift_gather(dd_sched_t *sched, const dd_sync_job_t *job)
{
    for (size_t j = 0; j < job->n_items; j++) {
        const dd_sync_item_t *it = &job->items[j];
        if (!it->measured) {
            continue;
        }
        struct dd_layer *l = sched->layers[it->layer];
        l->drift.diff2 += it->diff2;
        l->drift.norm2 += it->norm2;
        l->drift.seen = 1;
    }
}

/* The layer's counter track: this worker's figure and the agreed ones. */
static void dd_sched_drift_counter(dd_sched_t *sched, const struct dd_layer *l)
{
    if (sched->timeline != NULL) {
        dd_timeline_counter(sched->timeline, l->name, dd_time_now(),
                            l->stats.divergence, l->stats.divergence_max,
                            l->stats.divergence_mean);
    }
}

void dd_sched_drift_step(dd_sched_t *sched)
{
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        if (!l->drift.seen) {
            continue;
        }
        l->stats.divergence = dd_drift_relative(l->drift.diff2, l->drift.norm2);
        l->drift.fresh = 1;
        l->drift.diff2 = l->drift.norm2 = 0;
        l->drift.seen = 0;
        dd_sched_drift_counter(sched, l);
    }
}

void dd_sched_drift_mine(dd_sched_t *sched, double *v)
{
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        v[i] = l->drift.fresh ? l->stats.divergence : DD_DRIFT_NONE;
        l->drift.fresh = 0;
    }
}

static void dd_sched_drift_warn(const dd_sched_t *sched,
                                const struct dd_layer *l, int why)
{
    const dd_sched_opts_t *o = &sched->opts;

    if (dd_job_worker_index(sched->env.job, sched->env.job->rank) != 0) {
        return; /* the figures are agreed: the first worker speaks */
    }
    if (why & DD_DRIFT_WARN_ABOVE) {
        dd_log_warn(DD_SUBSYS_SCHED,
                    "layer '%s': divergence across workers %.4g (mean %.4g) "
                    "at step %llu is above DREAMDDP_DRIFT_WARN=%g",
                    l->name, l->stats.divergence_max, l->stats.divergence_mean,
                    (unsigned long long)sched->step, o->drift_warn);
    }
    if (why & DD_DRIFT_WARN_RISING) {
        dd_log_warn(DD_SUBSYS_SCHED,
                    "layer '%s': divergence across workers rose at %d "
                    "windows in a row (DREAMDDP_DRIFT_WINDOWS), to %.4g (mean "
                    "%.4g) at step %llu",
                    l->name, l->drift.watch.rises, l->stats.divergence_max,
                    l->stats.divergence_mean, (unsigned long long)sched->step);
    }
}

dd_status_t dd_sched_drift_agreed(dd_sched_t *sched, const double *all,
                                  size_t stride, size_t offset)
{
    size_t n = sched->n_layers;
    double *v = malloc(2 * n * sizeof(double));

    if (v == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the layers' divergence figures");
    }
    dd_drift_reduce(all, sched->env.job->n_workers, stride, offset, n, v,
                    v + n);
    for (size_t i = 0; i < n; i++) {
        struct dd_layer *l = sched->layers[i];
        if (v[i] < 0) {
            continue; /* no worker synced it since the last agreement */
        }
        l->stats.divergence_max = v[i];
        l->stats.divergence_mean = v[n + i];
        l->stats.divergence_agreed++;
        int why =
            dd_drift_watch(&l->drift.watch, v[i], sched->opts.drift_windows,
                           sched->opts.drift_warn);
        if (why) {
            dd_sched_drift_warn(sched, l, why);
        }
        dd_sched_drift_counter(sched, l);
    }
    free(v);
    return DD_OK;
}

void dd_sched_drift_summary(const dd_sched_t *sched, char *buf, size_t size)
{
    const struct dd_layer *worst = NULL;
    double sum = 0;
    size_t k = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < sched->n_layers; i++) {
        const struct dd_layer *l = sched->layers[i];
        if (l->stats.divergence_agreed == 0) {
            continue;
        }
        if (worst == NULL ||
            l->stats.divergence_max > worst->stats.divergence_max) {
            worst = l;
        }
        sum += l->stats.divergence_mean;
        k++;
    }
    if (worst != NULL) {
        snprintf(buf, size, ", divergence max %.3g (layer %s) mean %.3g",
                 worst->stats.divergence_max, worst->name, sum / (double)k);
    }
}

/* adaptive:drift needs the figures whatever DREAMDDP_DRIFT says. */
int dd_sched_drift_on(const dd_sched_t *sched)
{
    return sched->opts.drift || (sched->strategy.kind == DD_STRATEGY_ADAPTIVE &&
                                 sched->strategy.signal == DD_ADAPT_DRIFT);
}
