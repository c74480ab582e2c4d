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
 *
 * The file is read once, at dd_model_commit, without ever waiting on it (a
 * FIFO or a device named by mistake would hold every rank in open or read
 * with no bound): only a regular file of at most DD_PLAN_FILE_MAX is read.
 * Its digest goes into the settings the workers agree on, so a rank with
 * another plan (or none) fails the commit instead of syncing other layers.
 */
#include "core/log.h"
#include "sched/sched.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* What a file that is not regular is, for the message. */
static const char *dd_plan_file_kind(mode_t mode)
{
    return S_ISFIFO(mode)   ? "a FIFO"
           : S_ISDIR(mode)  ? "a directory"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a file";
}

/* The whole of the open regular file fd, of size bytes, into text; "" or
 * why it failed. A regular file's read never waits on a writer. */
static int dd_plan_file_slurp(int fd, size_t size, char **text_p, size_t *len_p,
                              char *why, size_t why_size)
{
    char *text = malloc(size + 1);
    size_t len = 0;

    while (text != NULL && len < size) {
        ssize_t got = read(fd, text + len, size - len);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            snprintf(why, why_size, "cannot read it: %s",
                     got < 0 ? strerror(errno) : "it shrank while read");
            free(text);
            return -1;
        }
        len += (size_t)got;
    }
    if (text == NULL) {
        snprintf(why, why_size, "no memory for its %zu bytes", size);
        return -1;
    }
    /* CRLF line ends: the CR dropped, so that the names match. */
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (!(text[i] == '\r' && i + 1 < len && text[i + 1] == '\n')) {
            text[o++] = text[i];
        }
    }
    text[o] = '\0';
    *text_p = text;
    *len_p = o;
    return 0;
}

/* Opens path without blocking and reads it when it is a regular file of at
 * most DD_PLAN_FILE_MAX; -1 and why otherwise. */
static int dd_plan_file_open_read(const char *path, char **text_p,
                                  size_t *len_p, char *why, size_t why_size)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    int rc = -1;

    if (fd < 0) {
        snprintf(why, why_size, "cannot open it: %s", strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_size, "cannot stat it: %s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(why, why_size, "not a regular file but %s",
                 dd_plan_file_kind(st.st_mode));
    } else if ((uint64_t)st.st_size > DD_PLAN_FILE_MAX) {
        snprintf(why, why_size, "%lld bytes, over the bound",
                 (long long)st.st_size);
    } else {
        rc = dd_plan_file_slurp(fd, (size_t)st.st_size, text_p, len_p, why,
                                why_size);
    }
    close(fd);
    return rc;
}

/* FNV-1a: an identity for the agreement, not a defence (the token guards
 * the store). */
static uint64_t dd_plan_file_digest(const char *text, size_t len)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
    }
    return h;
}

void dd_sched_plan_read(dd_sched_t *sched)
{
    dd_plan_file_t *f = &sched->plan_file;

    /* Only dreamddp plans: another strategy never reads the file. */
    if (sched->opts.plan == NULL || f->text != NULL || f->why[0] != '\0' ||
        sched->strategy.kind != DD_STRATEGY_DREAMDDP) {
        return;
    }
    if (dd_plan_file_open_read(sched->opts.plan, &f->text, &f->len, f->why,
                               sizeof(f->why)) == 0) {
        f->digest = dd_plan_file_digest(f->text, f->len);
    }
}

dd_status_t dd_sched_plan_readable(dd_sched_t *sched)
{
    if (sched->plan_file.why[0] == '\0') {
        return DD_OK;
    }
    return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_SCHED,
                    "DREAMDDP_PLAN=%s: %s; it takes a plan saved by "
                    "DREAMDDP_PLAN_SAVE, a regular file of at most %u MiB",
                    sched->opts.plan, sched->plan_file.why,
                    DD_PLAN_FILE_MAX >> 20);
}

void dd_sched_plan_identity(const dd_sched_t *sched, char *out, size_t size)
{
    const dd_plan_file_t *f = &sched->plan_file;

    if (f->why[0] != '\0') {
        snprintf(out, size, "unreadable: %s", f->why);
    } else if (f->text != NULL) {
        snprintf(out, size, "digest %016" PRIx64, f->digest);
    } else {
        snprintf(out, size, "none");
    }
}

void dd_sched_plan_file_free(dd_sched_t *sched)
{
    free(sched->plan_file.text);
    sched->plan_file.text = NULL;
}

/* A mismatch between the file and this job: the variable, the file and
 * what differs. */
static dd_status_t dd_plan_file_error(const char *path, const char *what)
{
    return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_SCHED, "DREAMDDP_PLAN=%s: %s",
                    path, what);
}

/* The header's five lines: the plan's workers, window and layers. */
static int dd_plan_file_header(FILE *f, int *workers_p, unsigned *window_p,
                               size_t *n_p, char *strategy)
{
    char line[4096];
    unsigned version = 0;

    return fgets(line, sizeof(line), f) &&
           sscanf(line, "dreamddp-plan %u", &version) == 1 && version == 1 &&
           fgets(line, sizeof(line), f) &&
           sscanf(line, "strategy %63s", strategy) == 1 &&
           fgets(line, sizeof(line), f) &&
           sscanf(line, "workers %d", workers_p) == 1 &&
           fgets(line, sizeof(line), f) &&
           sscanf(line, "window %u", window_p) == 1 &&
           fgets(line, sizeof(line), f) && sscanf(line, "layers %zu", n_p) == 1;
}

/* Layer line l into plan, checked against the model's layer l. */
static dd_status_t dd_plan_file_layer(dd_sched_t *sched, FILE *f, size_t l,
                                      dd_plan_t *plan)
{
    const char *path = sched->opts.plan;
    const struct dd_layer *y = sched->layers[l];
    char line[4096], why[512], name[2048], syncs[1024];
    size_t bytes = 0, n = plan->num_layers;
    unsigned slot = 0, window = plan->window;
    int at = 0;

    if (!fgets(line, sizeof(line), f) ||
        sscanf(line, "layer %zu %u %1023s %n", &bytes, &slot, syncs, &at) !=
            3 ||
        strlen(syncs) != window || slot >= window) {
        snprintf(why, sizeof(why), "layer line %zu is malformed", l + 1);
        return dd_plan_file_error(path, why);
    }
    snprintf(name, sizeof(name), "%s", line + at);
    name[strcspn(name, "\n")] = '\0';
    if (strcmp(name, y->name) != 0 || bytes != y->bytes) {
        snprintf(why, sizeof(why),
                 "layer %zu is '%.200s' of %zu bytes in the plan, "
                 "'%.200s' of %zu bytes in this model",
                 l, name, bytes, y->name, y->bytes);
        return dd_plan_file_error(path, why);
    }
    plan->slot[l] = slot;
    for (unsigned s = 0; s < window; s++) {
        plan->sync[(size_t)s * n + l] = syncs[s] == '1';
    }
    if (!plan->sync[(size_t)slot * n + l]) {
        snprintf(why, sizeof(why),
                 "layer %zu ('%.200s') does not sync in its own slot %u", l,
                 y->name, slot);
        return dd_plan_file_error(path, why);
    }
    return DD_OK;
}

/* The plan is for another number of workers: an error, unless the job is
 * elastic, where the workers left are planned for (the slots were chosen
 * for another count, and their traffic with it) and it is said once. */
static dd_status_t dd_plan_file_workers(dd_sched_t *sched, int workers,
                                        dd_plan_t **plan_p)
{
    const dd_job_t *job = sched->env.job;
    char why[512];

    snprintf(why, sizeof(why), "the plan is for %d workers, this job has %d",
             workers, job->n_workers);
    if (!sched->env.elastic) {
        return dd_plan_file_error(sched->opts.plan, why);
    }
    if (dd_job_worker_index(job, job->rank) == 0) {
        dd_log_warn(DD_SUBSYS_SCHED,
                    "DREAMDDP_PLAN=%s: the plan is for %d workers, this "
                    "elastic job (generation %d) has %d: planned again for "
                    "the %d workers left, from the layers' sizes and the "
                    "fixed rate model",
                    sched->opts.plan, workers, sched->env.elastic_gen,
                    job->n_workers, job->n_workers);
    }
    dd_plan_free(*plan_p);
    *plan_p = NULL;
    return DD_OK;
}

dd_status_t dd_sched_plan_load(dd_sched_t *sched, dd_plan_t **plan_p)
{
    const char *path = sched->opts.plan;
    const dd_plan_file_t *file = &sched->plan_file;
    char why[512], strategy[64] = "";
    unsigned window = 0;
    int workers = 0;
    size_t n = 0;
    dd_plan_t *plan = NULL;
    /* Read at commit; the text is never empty here (an empty file fails
     * the header), so the buffer is one fmemopen takes. */
    FILE *f = file->text != NULL && file->len > 0
                  ? fmemopen(file->text, file->len, "r")
                  : NULL;

    if (f == NULL || !dd_plan_file_header(f, &workers, &window, &n, strategy)) {
        if (f != NULL) {
            fclose(f);
        }
        return dd_plan_file_error(path, "not a dreamddp plan (version 1)");
    }
    dd_status_t status = DD_OK;
    if (window != sched->strategy.window) {
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
        status = dd_plan_file_layer(sched, f, l, plan);
    }
    fclose(f);
    if (status == DD_OK && workers != sched->env.job->n_workers) {
        status = dd_plan_file_workers(sched, workers, &plan);
    }
    if (status != DD_OK) {
        dd_plan_free(plan);
        return status;
    }
    *plan_p = plan;
    return DD_OK;
}
