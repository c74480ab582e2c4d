/*
 * DREAMDDP_TIMELINE: a Chrome-trace JSON (the array form, which Perfetto and
 * chrome://tracing open) of each rank's backward marks, syncs and layers'
 * divergence (counter tracks). Written by the application's thread at
 * dd_step_end (a step's marks then, from the times the marks kept, in
 * their order), never on the marks' own threads. Each file's timestamps count
 * from its own monotonic start; the process_name metadata carries that
 * start on this rank's CLOCK_REALTIME (t0_realtime_us) and rank 0's clock
 * minus this one's, agreed at dd_model_commit (clock_offset_us, within
 * clock_uncertainty_us), which `ddbench timeline merge` adds to put every
 * rank on rank 0's clock, whatever NTP keeps across hosts.
 */
#include "core/clock.h"
#include "core/json_write.h"
#include "core/log.h"
#include "core/time.h"
#include "sched/sched.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct dd_timeline {
    FILE *file;
    char path[4096];
    dd_json_writer_t json; /* the top array, one event a line */
    int rank;
    double t0;
};

/* Layer names are at most 200 bytes (dd_layer_register checks). */
#define DD_TIMELINE_NAME_MAX 256

dd_status_t dd_timeline_open(const dd_sched_t *sched,
                             dd_timeline_t **timeline_p)
{
    char path[4096];
    int rank = sched->env.job->rank;
    const char *pattern = sched->opts.timeline;

    dd_path_expand_rank(path, sizeof(path), pattern, rank);
    dd_timeline_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the timeline");
    }
    t->file = fopen(path, "w");
    if (t->file == NULL) {
        free(t);
        return dd_error(DD_ERR_IO, DD_SUBSYS_SCHED,
                        "cannot open DREAMDDP_TIMELINE file %s: %m", path);
    }
    t->rank = rank;
    snprintf(t->path, sizeof(t->path), "%s", path);
    /* The realtime read between two monotonic ones, so that t0 and its
     * wall-clock value name the same instant to within the reads. */
    double before = dd_time_now();
    double t0_realtime_us = dd_clock_realtime_us(sched->opts.clock_skew_us);
    t->t0 = 0.5 * (before + dd_time_now());
    char name[32];
    snprintf(name, sizeof(name), "rank %d", rank);
    dd_json_writer_init(&t->json, t->file, 0);
    dd_json_array_begin(&t->json, DD_JSON_BLOCK);
    dd_json_object_begin(&t->json, DD_JSON_COMPACT);
    dd_json_key(&t->json, "name");
    dd_json_string(&t->json, "process_name");
    dd_json_key(&t->json, "ph");
    dd_json_string(&t->json, "M");
    dd_json_key(&t->json, "pid");
    dd_json_int(&t->json, rank);
    dd_json_key(&t->json, "args");
    dd_json_object_begin(&t->json, DD_JSON_COMPACT);
    dd_json_key(&t->json, "name");
    dd_json_string(&t->json, name);
    dd_json_key(&t->json, "t0_realtime_us");
    dd_json_fixed(&t->json, t0_realtime_us, 1);
    dd_json_key(&t->json, "clock_offset_us");
    dd_json_fixed(&t->json, sched->clock_offset_us, 1);
    dd_json_key(&t->json, "clock_uncertainty_us");
    dd_json_fixed(&t->json, sched->clock_uncertainty_us, 1);
    dd_json_object_end(&t->json);
    dd_json_object_end(&t->json);
    *timeline_p = t;
    return DD_OK;
}

static double dd_timeline_us(const dd_timeline_t *t, double at)
{
    return (at - t->t0) * 1e6;
}

/* The members every event starts with: what it is, and where and when
 * (this rank's track, thread row tid, at the time at). */
static void dd_timeline_event(dd_timeline_t *t, const char *name,
                              const char *cat, const char *ph, int tid,
                              double at)
{
    dd_json_object_begin(&t->json, DD_JSON_COMPACT);
    dd_json_key(&t->json, "name");
    dd_json_string(&t->json, name);
    dd_json_key(&t->json, "cat");
    dd_json_string(&t->json, cat);
    dd_json_key(&t->json, "ph");
    dd_json_string(&t->json, ph);
    dd_json_key(&t->json, "pid");
    dd_json_int(&t->json, t->rank);
    dd_json_key(&t->json, "tid");
    dd_json_int(&t->json, tid);
    dd_json_key(&t->json, "ts");
    dd_json_fixed(&t->json, dd_timeline_us(t, at), 1);
}

static void dd_timeline_mark(dd_timeline_t *t, const char *layer, uint64_t step,
                             double at)
{
    char name[DD_TIMELINE_NAME_MAX];

    snprintf(name, sizeof(name), "backward %s", layer);
    dd_timeline_event(t, name, "backward", "i", 0, at);
    dd_json_key(&t->json, "s");
    dd_json_string(&t->json, "t");
    dd_json_key(&t->json, "args");
    dd_json_object_begin(&t->json, DD_JSON_COMPACT);
    dd_json_key(&t->json, "step");
    dd_json_uint(&t->json, step);
    dd_json_object_end(&t->json);
    dd_json_object_end(&t->json);
}

static int dd_timeline_by_ready(const void *a, const void *b)
{
    double x = (*(const struct dd_layer *const *)a)->ready_t;
    double y = (*(const struct dd_layer *const *)b)->ready_t;
    return (x > y) - (x < y);
}

void dd_timeline_marks(dd_timeline_t *t, const dd_sched_t *sched)
{
    struct dd_layer **order = malloc(sched->n_layers * sizeof(*order));
    size_t n = 0;

    if (order == NULL) {
        return; /* a timeline is a diagnostic: the step goes on */
    }
    for (size_t i = 0; i < sched->n_layers; i++) {
        if (sched->layers[i]->ready) {
            order[n++] = sched->layers[i];
        }
    }
    qsort(order, n, sizeof(*order), dd_timeline_by_ready);
    for (size_t k = 0; k < n; k++) {
        dd_timeline_mark(t, order[k]->name, sched->step, order[k]->ready_t);
    }
    free(order);
}

void dd_timeline_sync(dd_timeline_t *t, const dd_sched_t *sched,
                      const dd_sync_job_t *job)
{
    char name[DD_TIMELINE_NAME_MAX];

    snprintf(name, sizeof(name), "sync %s%s",
             sched->layers[job->layers[0]]->name, job->n_layers > 1 ? "+" : "");
    /* One row per engine channel (the first is row 1, as with one). */
    dd_timeline_event(t, name, "sync", "X", 1 + job->channel, job->t_start);
    dd_json_key(&t->json, "dur");
    dd_json_fixed(&t->json, (job->t_end - job->t_start) * 1e6, 1);
    dd_json_key(&t->json, "args");
    dd_json_object_begin(&t->json, DD_JSON_COMPACT);
    dd_json_key(&t->json, "step");
    dd_json_uint(&t->json, job->step);
    dd_json_key(&t->json, "layers");
    dd_json_uint(&t->json, job->n_layers);
    dd_json_key(&t->json, "bytes");
    dd_json_uint(&t->json, job->bytes);
    dd_json_key(&t->json, "codec");
    dd_json_string(&t->json, dd_route_codec_name(job->codec));
    dd_json_key(&t->json, "wire_bytes");
    dd_json_uint(&t->json, job->wire_bytes);
    /* Its channel, and its share of the wire in us (dur with one). */
    dd_json_key(&t->json, "channel");
    dd_json_int(&t->json, job->channel);
    dd_json_key(&t->json, "wire_us");
    dd_json_fixed(&t->json, job->wire_s * 1e6, 1);
    /* When the runtime handed the job to the engine: what start lags
     * behind it is the channel's queue. */
    dd_json_key(&t->json, "submit");
    dd_json_fixed(&t->json, dd_timeline_us(t, job->t_submit), 1);
    /* When the engine put it on the wire: before ts when it overlapped
     * the job ahead of it (ts is when it had the channel to itself). */
    dd_json_key(&t->json, "launch");
    dd_json_fixed(&t->json, dd_timeline_us(t, job->t_launch), 1);
    dd_json_key(&t->json, "names");
    dd_json_array_begin(&t->json, DD_JSON_COMPACT);
    for (size_t k = 0; k < job->n_layers; k++) {
        dd_json_string(&t->json, sched->layers[job->layers[k]]->name);
    }
    dd_json_array_end(&t->json);
    dd_json_object_end(&t->json);
    dd_json_object_end(&t->json);
}

/* A counter per layer, in the trace's own thread row: Perfetto and
 * chrome://tracing draw each name as a track of its three series. */
void dd_timeline_counter(dd_timeline_t *t, const char *layer, double at,
                         double local, double max, double mean)
{
    char name[DD_TIMELINE_NAME_MAX];

    snprintf(name, sizeof(name), "divergence %s", layer);
    dd_timeline_event(t, name, "divergence", "C", 0, at);
    dd_json_key(&t->json, "args");
    dd_json_object_begin(&t->json, DD_JSON_COMPACT);
    dd_json_key(&t->json, "local");
    dd_json_double(&t->json, local);
    dd_json_key(&t->json, "max");
    dd_json_double(&t->json, max);
    dd_json_key(&t->json, "mean");
    dd_json_double(&t->json, mean);
    dd_json_object_end(&t->json);
    dd_json_object_end(&t->json);
}

/* An instant event of the whole job (a lost aggregator, ...), on the
 * trace's own thread row. */
void dd_timeline_instant(dd_timeline_t *t, const char *name, const char *cat,
                         double at)
{
    dd_timeline_event(t, name, cat, "i", 0, at);
    dd_json_key(&t->json, "s");
    dd_json_string(&t->json, "g");
    dd_json_object_end(&t->json);
}

/* A trace that could not be written whole (a full disk) is removed where
 * it is a plain file, rather than left as JSON that does not parse. */
void dd_timeline_close(dd_timeline_t *t)
{
    if (t == NULL) {
        return;
    }
    dd_json_array_end(&t->json);
    fputc('\n', t->file);
    int err = fflush(t->file) != 0 ? errno : 0;
    int bad = err != 0 || dd_json_writer_finish(&t->json) != DD_OK;
    if (fclose(t->file) != 0 && err == 0) {
        err = errno;
        bad = 1;
    }
    if (bad) {
        struct stat st;
        int removed = stat(t->path, &st) == 0 && S_ISREG(st.st_mode) &&
                      unlink(t->path) == 0;
        dd_log_warn(DD_SUBSYS_SCHED,
                    "the DREAMDDP_TIMELINE trace of rank %d could not be "
                    "written whole to %s (%s)%s",
                    t->rank, t->path, strerror(err ? err : EIO),
                    removed ? ": removed" : "");
    }
    free(t);
}
