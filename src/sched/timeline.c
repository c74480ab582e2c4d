/*
 * DREAMDDP_TIMELINE: a Chrome-trace JSON (the array form, which Perfetto and
 * chrome://tracing open) of each rank's backward marks and syncs. Written
 * by the application's threads, one at a time: at dd_layer_ready, under the
 * scheduler's ready_lock, and at dd_step_end.
 */
#include "core/log.h"
#include "core/time.h"
#include "sched/sched.h"

#include <stdio.h>
#include <stdlib.h>

struct dd_timeline {
    FILE *file;
    int rank;
    double t0;
};

dd_status_t dd_timeline_open(const char *pattern, int rank,
                             dd_timeline_t **timeline_p)
{
    char path[4096];

    dd_path_expand_rank(path, sizeof(path), pattern, rank);
    dd_timeline_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    t->file = fopen(path, "w");
    if (t->file == NULL) {
        free(t);
        return dd_error(DD_ERR_IO, DD_SUBSYS_SCHED,
                        "cannot open DREAMDDP_TIMELINE file %s: %m", path);
    }
    t->rank = rank;
    t->t0 = dd_time_now();
    fprintf(t->file,
            "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
            "\"args\":{\"name\":\"rank %d\"}}",
            rank, rank);
    *timeline_p = t;
    return DD_OK;
}

static double dd_timeline_us(const dd_timeline_t *t, double at)
{
    return (at - t->t0) * 1e6;
}

void dd_timeline_mark(dd_timeline_t *t, const char *layer, double at)
{
    fprintf(t->file,
            ",\n{\"name\":\"backward %s\",\"cat\":\"backward\",\"ph\":\"i\","
            "\"s\":\"t\",\"pid\":%d,\"tid\":0,\"ts\":%.1f}",
            layer, t->rank, dd_timeline_us(t, at));
}

void dd_timeline_sync(dd_timeline_t *t, const dd_sched_t *sched,
                      const dd_sync_job_t *job)
{
    const char *first = sched->layers[job->layers[0]]->name;
    fprintf(t->file,
            ",\n{\"name\":\"sync %s%s\",\"cat\":\"sync\",\"ph\":\"X\","
            "\"pid\":%d,\"tid\":1,\"ts\":%.1f,\"dur\":%.1f,\"args\":{"
            "\"step\":%llu,\"layers\":%zu,\"bytes\":%zu}}",
            first, job->n_layers > 1 ? "+" : "", t->rank,
            dd_timeline_us(t, job->t_start), (job->t_end - job->t_start) * 1e6,
            (unsigned long long)job->step, job->n_layers, job->bytes);
}

void dd_timeline_close(dd_timeline_t *t)
{
    if (t != NULL) {
        fprintf(t->file, "\n]\n");
        fclose(t->file);
        free(t);
    }
}
