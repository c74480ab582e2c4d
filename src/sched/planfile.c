/*
 * Reproducible plans: DREAMDDP_DETERMINISTIC=yes plans from the layers'
 * sizes and a fixed rate model instead of measured times (and never
 * re-plans or runs bubble filling's trial); DREAMDDP_PLAN_SAVE=FILE writes
 * every plan the run puts in force (worker rank 0; %r in FILE becomes the
 * rank); DREAMDDP_PLAN=FILE puts a saved plan in force, checked against
 * the model and the job first. The file is text, one line a layer:
 *
 *     dreamddp-plan 1
 *     strategy dreamddp:4
 *     workers 4
 *     window 4
 *     layers 15
 *     layer BYTES SLOT SYNCS NAME
 *
 * SYNCS has one character a step of the window, 1 where the layer syncs
 * (its primary SLOT and any extra from bubble filling).
 */
#include "core/log.h"
#include "sched/sched.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fixed rate model: backward 1 ms per MB of parameters, a sync 50 us
 * plus 8 ms per MB on the wire (1 Gbit/s). Only the ratios matter to the
 * plan, which are those of a GPU worker on a 1 Gbit/s link; forward, when
 * marked, as long as backward. */
#define DD_MODEL_BP_S_PER_BYTE 1e-9
#define DD_MODEL_ALPHA_S 50e-6
#define DD_MODEL_WIRE_S_PER_BYTE 8e-9

void dd_sched_model_profile(dd_sched_t *sched, double *v)
{
    size_t n = sched->n_layers;
    for (size_t i = 0; i < n; i++) {
        const struct dd_layer *l = sched->layers[i];
        v[i] = (double)l->bytes * DD_MODEL_BP_S_PER_BYTE;
        v[n + i] = DD_MODEL_ALPHA_S + (double)dd_sched_layer_wire_bytes(l) *
                                          DD_MODEL_WIRE_S_PER_BYTE;
        v[2 * n + i] = sched->delay.marked ? v[i] : DD_SCHED_NO_MARKS;
    }
    v[DD_SCHED_PROFILE_ROWS * n] = 0.0;
}

void dd_sched_plan_save(const dd_sched_t *sched, const dd_plan_t *plan)
{
    const dd_job_t *job = sched->env.job;
    char path[4096];
    FILE *f;

    if (sched->opts.plan_save == NULL || plan == NULL ||
        dd_job_worker_index(job, job->rank) != 0) {
        return;
    }
    dd_path_expand_rank(path, sizeof(path), sched->opts.plan_save, job->rank);
    if ((f = fopen(path, "w")) == NULL) {
        dd_log_warn(DD_SUBSYS_SCHED,
                    "DREAMDDP_PLAN_SAVE: cannot write %s: %s; the plan is "
                    "not saved",
                    path, strerror(errno));
        return;
    }
    fprintf(f,
            "dreamddp-plan 1\nstrategy %s\nworkers %d\nwindow %u\n"
            "layers %zu\n",
            sched->strategy_name, job->n_workers, plan->window,
            plan->num_layers);
    for (size_t l = 0; l < plan->num_layers; l++) {
        fprintf(f, "layer %zu %u ", sched->layers[l]->bytes, plan->slot[l]);
        for (unsigned s = 0; s < plan->window; s++) {
            fputc(plan->sync[(size_t)s * plan->num_layers + l] ? '1' : '0', f);
        }
        fprintf(f, " %s\n", sched->layers[l]->name);
    }
    if (fclose(f) != 0) {
        dd_log_warn(DD_SUBSYS_SCHED, "DREAMDDP_PLAN_SAVE: writing %s failed",
                    path);
    }
}

/* A mismatch between the file and this job: the variable, the file and
 * what differs. */
static dd_status_t dd_plan_file_error(const char *path, const char *what)
{
    return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_SCHED, "DREAMDDP_PLAN=%s: %s",
                    path, what);
}

dd_status_t dd_sched_plan_load(dd_sched_t *sched, dd_plan_t **plan_p)
{
    const char *path = sched->opts.plan;
    char line[4096], why[512], name[2048], syncs[1024];
    unsigned version = 0, window = 0;
    int workers = 0;
    size_t n = 0;
    dd_plan_t *plan = NULL;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_SCHED,
                        "DREAMDDP_PLAN=%s: cannot read it: %s", path,
                        strerror(errno));
    }
    char strategy[64] = "";
    if (!fgets(line, sizeof(line), f) ||
        sscanf(line, "dreamddp-plan %u", &version) != 1 || version != 1 ||
        !fgets(line, sizeof(line), f) ||
        sscanf(line, "strategy %63s", strategy) != 1 ||
        !fgets(line, sizeof(line), f) ||
        sscanf(line, "workers %d", &workers) != 1 ||
        !fgets(line, sizeof(line), f) ||
        sscanf(line, "window %u", &window) != 1 ||
        !fgets(line, sizeof(line), f) || sscanf(line, "layers %zu", &n) != 1) {
        fclose(f);
        return dd_plan_file_error(path, "not a dreamddp plan (version 1)");
    }
    dd_status_t status = DD_OK;
    if (workers != sched->env.job->n_workers) {
        snprintf(why, sizeof(why),
                 "the plan is for %d workers, this job has %d", workers,
                 sched->env.job->n_workers);
        status = dd_plan_file_error(path, why);
    } else if (window != sched->strategy.window) {
        snprintf(why, sizeof(why),
                 "the plan's window is %u steps (%s), this job's %u (%s)",
                 window, strategy, sched->strategy.window,
                 sched->strategy_name);
        status = dd_plan_file_error(path, why);
    } else if (n != sched->n_layers) {
        snprintf(why, sizeof(why), "the plan has %zu layers, this model %zu", n,
                 sched->n_layers);
        status = dd_plan_file_error(path, why);
    } else if (dd_plan_alloc(n, window, &plan) != DD_OK) {
        status = dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                          "no memory for the plan of %zu layers", n);
    }
    for (size_t l = 0; status == DD_OK && l < n; l++) {
        size_t bytes = 0;
        unsigned slot = 0;
        int at = 0;
        const struct dd_layer *y = sched->layers[l];
        if (!fgets(line, sizeof(line), f) ||
            sscanf(line, "layer %zu %u %1023s %n", &bytes, &slot, syncs, &at) !=
                3 ||
            strlen(syncs) != window || slot >= window) {
            snprintf(why, sizeof(why), "layer line %zu is malformed", l + 1);
            status = dd_plan_file_error(path, why);
            break;
        }
        snprintf(name, sizeof(name), "%s", line + at);
        name[strcspn(name, "\n")] = '\0';
        if (strcmp(name, y->name) != 0 || bytes != y->bytes) {
            snprintf(why, sizeof(why),
                     "layer %zu is '%.200s' of %zu bytes in the plan, "
                     "'%.200s' of %zu bytes in this model",
                     l, name, bytes, y->name, y->bytes);
            status = dd_plan_file_error(path, why);
            break;
        }
        plan->slot[l] = slot;
        for (unsigned s = 0; s < window; s++) {
            plan->sync[(size_t)s * n + l] = syncs[s] == '1';
        }
        if (!plan->sync[(size_t)slot * n + l]) {
            snprintf(why, sizeof(why),
                     "layer %zu ('%.200s') does not sync in its own slot %u", l,
                     y->name, slot);
            status = dd_plan_file_error(path, why);
        }
    }
    fclose(f);
    if (status != DD_OK) {
        dd_plan_free(plan);
        return status;
    }
    *plan_p = plan;
    return DD_OK;
}
