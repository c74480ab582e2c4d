/*
 * The settings every worker must share, compared at dd_model_commit: each
 * one changes what goes on the wire (which layers sync in which step, how
 * they are grouped into messages, in which codec, by which route), so two
 * workers that differ would pair messages of different content and sum
 * them. Every worker publishes its own in the store and reads everyone
 * else's; all read the same texts, so all fail with the same message,
 * naming each variable that differs, its values and the ranks that hold
 * them. It must not decide anything else: the values are read, not used.
 */
#include "core/log.h"
#include "core/ranks.h"
#include "sched/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DD_SETTINGS_SIZE 2048

/* One "DREAMDDP_NAME=value" line per setting that shapes the wire under
 * this strategy (the others cannot pair wrong messages). */
static void dd_sched_settings_text(const dd_sched_t *sched, char *text,
                                   size_t size)
{
    const dd_sched_opts_t *o = &sched->opts;
    dd_strategy_kind_t kind = sched->strategy.kind;
    size_t n = 0;

#define DD_SETTING(...)                                                        \
    n += (size_t)snprintf(text + n, n < size ? size - n : 0, __VA_ARGS__)
    text[0] = '\0';
    DD_SETTING("DREAMDDP_STRATEGY=%s\n", sched->strategy_name);
    DD_SETTING("DREAMDDP_ROUTE=%s\n", dd_route_names[o->route]);
    DD_SETTING("DREAMDDP_COMPRESSION=%s\n",
               sched->comp.spec != NULL ? sched->comp.spec : o->compression);
    DD_SETTING("DREAMDDP_CHUNK_BYTES=%zu\n", o->chunk_bytes);
    DD_SETTING("DREAMDDP_AGG_LOSS=%s\n", dd_agg_loss_names[o->agg_loss]);
    DD_SETTING("DREAMDDP_DETERMINISTIC=%s\n", o->deterministic ? "yes" : "no");
    DD_SETTING("DREAMDDP_FIND_UNUSED=%s\n", o->find_unused ? "yes" : "no");
    if (kind == DD_STRATEGY_DDP) {
        DD_SETTING("DREAMDDP_BUCKET_BYTES=%zu\n", o->bucket_bytes);
        DD_SETTING("DREAMDDP_FIRST_BUCKET_BYTES=%zu\n", o->first_bucket_bytes);
    } else {
        DD_SETTING("DREAMDDP_FUSION_BYTES=%zu\n", o->fusion_bytes);
        /* The limit the layer cuts follow (auto: the model's share). */
        DD_SETTING("DREAMDDP_LAYER_SPLIT=%zu\n", dd_sched_split_limit(sched));
    }
    if (kind == DD_STRATEGY_DREAMDDP) {
        DD_SETTING("DREAMDDP_PROFILE_STEPS=%d\n", o->profile_steps);
        DD_SETTING("DREAMDDP_REPLAN_DRIFT=%.17g\n", o->replan_drift);
        DD_SETTING("DREAMDDP_REPLAN_WINDOWS=%d\n", o->replan_windows);
        DD_SETTING("DREAMDDP_FILL_BUBBLES=%s\n",
                   o->fill_bubbles ? "yes" : "no");
        /* The plan's digest, not its path: each rank may keep a copy. */
        char plan[128];
        dd_sched_plan_identity(sched, plan, sizeof(plan));
        DD_SETTING("DREAMDDP_PLAN=%s\n", plan);
    }
    if (sched->strategy.delay) {
        DD_SETTING("DREAMDDP_NEXT_LAUNCH=%s\n",
                   dd_next_launch_names[o->next_launch]);
    }
    if (kind == DD_STRATEGY_ADAPTIVE) {
        DD_SETTING("DREAMDDP_ADAPTIVE_KMIN=%d\n", o->adaptive_kmin);
        DD_SETTING("DREAMDDP_ADAPTIVE_KMAX=%d\n", o->adaptive_kmax);
        DD_SETTING("DREAMDDP_ADAPTIVE_KSTART=%d\n", o->adaptive_kstart);
        DD_SETTING("DREAMDDP_ADAPTIVE_HIGH=%.17g\n", o->adaptive_high);
        DD_SETTING("DREAMDDP_ADAPTIVE_LOW=%.17g\n", o->adaptive_low);
        DD_SETTING("DREAMDDP_ADAPTIVE_INTERVAL=%d\n", o->adaptive_interval);
    }
#undef DD_SETTING
}

/* The value of name in a settings text ("" when it has none: another
 * strategy leaves it out), into value. */
static void dd_sched_setting_value(const char *text, const char *name,
                                   char *value, size_t size)
{
    size_t len = strlen(name);

    value[0] = '\0';
    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n')) {
        p += *p == '\n';
        if (strncmp(p, name, len) == 0 && p[len] == '=') {
            snprintf(value, size, "%.*s", (int)strcspn(p + len + 1, "\n"),
                     p + len + 1);
            return;
        }
    }
}

/*
 * "DREAMDDP_X differs: rank 0..2 'a', rank 3 'b'" for one variable, appended
 * to msg, when the workers' texts disagree on it.
 */
static int dd_sched_setting_compare(char **texts, int world, const char *name,
                                    char *msg, size_t size)
{
    char(*values)[128] = calloc((size_t)world, sizeof(*values));
    const char **view = calloc((size_t)world, sizeof(char *));
    int differ = 0, first = -1;

    for (int r = 0; values != NULL && view != NULL && r < world; r++) {
        if (texts[r] != NULL) {
            dd_sched_setting_value(texts[r], name, values[r],
                                   sizeof(values[r]));
            view[r] = values[r];
        }
        /* A variable another strategy leaves out is no disagreement: the
         * strategy's own line says it. */
        if (texts[r] != NULL && values[r][0] != '\0') {
            first = first < 0 ? r : first;
            differ |= strcmp(values[r], values[first]) != 0;
        }
    }
    if (differ) {
        size_t o = strlen(msg);
        snprintf(msg + o, size - o, "%s%s differs:", o ? "; " : "", name);
        dd_ranks_by_value(view, world, msg, size);
    }
    free(view);
    free(values);
    return differ;
}

static const char *const dd_sched_setting_names[] = {
    "DREAMDDP_STRATEGY",
    "DREAMDDP_ROUTE",
    "DREAMDDP_COMPRESSION",
    "DREAMDDP_CHUNK_BYTES",
    "DREAMDDP_AGG_LOSS",
    "DREAMDDP_DETERMINISTIC",
    "DREAMDDP_FIND_UNUSED",
    "DREAMDDP_BUCKET_BYTES",
    "DREAMDDP_FIRST_BUCKET_BYTES",
    "DREAMDDP_FUSION_BYTES",
    "DREAMDDP_PROFILE_STEPS",
    "DREAMDDP_REPLAN_DRIFT",
    "DREAMDDP_REPLAN_WINDOWS",
    "DREAMDDP_FILL_BUBBLES",
    "DREAMDDP_ADAPTIVE_KMIN",
    "DREAMDDP_ADAPTIVE_KMAX",
    "DREAMDDP_ADAPTIVE_KSTART",
    "DREAMDDP_ADAPTIVE_HIGH",
    "DREAMDDP_ADAPTIVE_LOW",
    "DREAMDDP_ADAPTIVE_INTERVAL",
    "DREAMDDP_LAYER_SPLIT",
    "DREAMDDP_NEXT_LAUNCH",
    "DREAMDDP_PLAN",
};

dd_status_t dd_sched_first_verdict(dd_sched_t *sched, const char *name,
                                   const char *what,
                                   dd_status_t (*check)(dd_sched_t *sched))
{
    const dd_job_t *job = sched->env.job;
    int first = job->worker_ranks[0];
    char key[64], *text = NULL;
    size_t len = 0;

    snprintf(key, sizeof(key), "dd/verdict/%s", name);
    if (job->rank == first) {
        dd_status_t status = check(sched);
        char verdict[2100];
        int n = snprintf(verdict, sizeof(verdict), "%d\n%s", (int)status,
                         status == DD_OK ? "" : dd_last_error());
        dd_status_t published = dd_store_set(
            job->store, key, verdict,
            n < (int)sizeof(verdict) ? (size_t)n : sizeof(verdict) - 1);
        return status != DD_OK ? status : published;
    }
    dd_status_t status = dd_store_get(job->store, key, (void **)&text, &len);
    if (status == DD_ERR_TIMED_OUT) {
        return dd_error(DD_ERR_TIMED_OUT, DD_SUBSYS_SCHED,
                        "dd_model_commit: the first worker (rank %d) gave no "
                        "verdict on the workers' %s within %.0f s "
                        "(DREAMDDP_TIMEOUT_S)",
                        first, what, job->timeout_s);
    }
    if (status != DD_OK) {
        return status;
    }
    /* The store's values are not terminated: the code ends at the line. */
    char *msg = memchr(text, '\n', len);
    int code = msg != NULL ? atoi(text) : 1;
    if (code > 0) {
        free(text);
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "dd_model_commit: the first worker's verdict on the "
                        "workers' %s is malformed",
                        what);
    }
    if (code != DD_OK) {
        status = dd_error((dd_status_t)code, DD_SUBSYS_SCHED, "%.*s",
                          (int)(len - (size_t)(msg + 1 - text)), msg + 1);
    }
    free(text);
    return status;
}

/* The first worker's check: every worker's settings read and compared. */
static dd_status_t dd_sched_compare_settings(dd_sched_t *sched)
{
    const dd_job_t *job = sched->env.job;
    int world = job->world_size;
    char key[64], msg[2048] = "";
    char **texts = calloc((size_t)world, sizeof(char *));
    dd_status_t status =
        texts != NULL ? DD_OK
                      : dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                                 "no memory for %d ranks' settings", world);

    for (int r = 0; status == DD_OK && r < world; r++) {
        if (job->roles[r] != DD_ROLE_WORKER) {
            continue;
        }
        size_t len;
        char *text;
        snprintf(key, sizeof(key), "dd/settings/%d", r);
        status = dd_store_get(job->store, key, (void **)&text, &len);
        if (status == DD_ERR_TIMED_OUT) {
            status = dd_error(
                DD_ERR_TIMED_OUT, DD_SUBSYS_SCHED,
                "dd_model_commit: worker rank %d did not commit within "
                "%.0f s (DREAMDDP_TIMEOUT_S)",
                r, job->timeout_s);
        } else if (status == DD_OK) {
            /* The store's values are not terminated. */
            texts[r] = malloc(len + 1);
            if (texts[r] != NULL) {
                memcpy(texts[r], text, len);
                texts[r][len] = '\0';
            }
            free(text);
            status = texts[r] != NULL
                         ? DD_OK
                         : dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                                    "no memory for rank %d's settings", r);
        }
    }
    size_t n_names =
        sizeof(dd_sched_setting_names) / sizeof(dd_sched_setting_names[0]);
    for (size_t i = 0; status == DD_OK && i < n_names; i++) {
        dd_sched_setting_compare(texts, world, dd_sched_setting_names[i], msg,
                                 sizeof(msg));
    }
    if (status == DD_OK && msg[0] != '\0') {
        status = dd_error(DD_ERR_MISMATCH, DD_SUBSYS_SCHED,
                          "dd_model_commit: workers disagree on settings "
                          "that shape the syncs: %s",
                          msg);
    }
    for (int r = 0; texts != NULL && r < world; r++) {
        free(texts[r]);
    }
    free(texts);
    return status;
}

dd_status_t dd_sched_check_settings(dd_sched_t *sched)
{
    const dd_job_t *job = sched->env.job;
    char key[64], mine[DD_SETTINGS_SIZE];

    dd_sched_settings_text(sched, mine, sizeof(mine));
    snprintf(key, sizeof(key), "dd/settings/%d", job->rank);
    dd_status_t status = dd_store_set(job->store, key, mine, strlen(mine));
    return status != DD_OK
               ? status
               : dd_sched_first_verdict(sched, "settings", "settings",
                                        dd_sched_compare_settings);
}
