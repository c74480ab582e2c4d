/*
 * ddbench timeline merge: the per-rank DREAMDDP_TIMELINE traces into one
 * Chrome trace on one clock, rank 0's. Each file's process_name metadata
 * gives the CLOCK_REALTIME instant its timestamps count from
 * (t0_realtime_us) and rank 0's clock minus that rank's, agreed at
 * dd_model_commit (clock_offset_us; files without it count as 0); every
 * file is shifted to the earliest start on rank 0's clock, and each keeps
 * its pid (the rank), so each rank is its own track. It reads traces, it
 * never reinterprets their events.
 */
#include "ddbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_JSONC
#include <json.h>

typedef struct {
    const char *path;
    json_object *root; /* the top array */
    double t0_us;      /* ts 0 on rank 0's CLOCK_REALTIME */
    int rank;
} ddbench_trace_t;

/* Finds the process_name metadata and its clock; -1 when absent. */
static int ddbench_trace_clock(ddbench_trace_t *t)
{
    size_t n = json_object_array_length(t->root);

    for (size_t i = 0; i < n; i++) {
        json_object *ev = json_object_array_get_idx(t->root, i);
        json_object *name, *args, *t0, *pid, *offset;
        if (json_object_object_get_ex(ev, "name", &name) &&
            strcmp(json_object_get_string(name), "process_name") == 0 &&
            json_object_object_get_ex(ev, "args", &args) &&
            json_object_object_get_ex(args, "t0_realtime_us", &t0) &&
            json_object_object_get_ex(ev, "pid", &pid)) {
            t->t0_us = json_object_get_double(t0);
            if (json_object_object_get_ex(args, "clock_offset_us", &offset)) {
                t->t0_us += json_object_get_double(offset);
            }
            t->rank = json_object_get_int(pid);
            return 0;
        }
    }
    fprintf(stderr,
            "ddbench timeline: %s has no process_name metadata with "
            "t0_realtime_us (written by an older dreamddp?)\n",
            t->path);
    return -1;
}

static int ddbench_trace_load(const char *path, ddbench_trace_t *t)
{
    t->path = path;
    t->root = json_object_from_file(path);
    if (t->root == NULL) {
        fprintf(stderr, "ddbench timeline: cannot read %s: %s\n", path,
                json_util_get_last_err());
        return -1;
    }
    if (!json_object_is_type(t->root, json_type_array)) {
        fprintf(stderr,
                "ddbench timeline: %s is not a Chrome trace (a JSON array)\n",
                path);
        return -1;
    }
    return ddbench_trace_clock(t);
}

/* Adds shift microseconds to obj[key] when it is a number; written with
 * the 0.1 us the traces are written with. */
static void ddbench_trace_shift(json_object *obj, const char *key, double shift)
{
    json_object *v;
    char text[64];

    if (obj == NULL || !json_object_object_get_ex(obj, key, &v) ||
        !(json_object_is_type(v, json_type_double) ||
          json_object_is_type(v, json_type_int))) {
        return;
    }
    double us = json_object_get_double(v) + shift;
    snprintf(text, sizeof(text), "%.1f", us);
    json_object_object_add(obj, key, json_object_new_double_s(us, text));
}

static void ddbench_trace_write(const ddbench_trace_t *t, double base_us,
                                int *first)
{
    double shift = t->t0_us - base_us;
    size_t n = json_object_array_length(t->root);

    for (size_t i = 0; i < n; i++) {
        json_object *ev = json_object_array_get_idx(t->root, i);
        json_object *args = NULL;
        ddbench_trace_shift(ev, "ts", shift);
        if (json_object_object_get_ex(ev, "args", &args)) {
            ddbench_trace_shift(args, "submit", shift);
        }
        printf(
            "%s%s", *first ? "" : ",\n",
            json_object_to_json_string_ext(
                ev, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        *first = 0;
    }
}

static int ddbench_timeline_merge(int n, char **paths)
{
    ddbench_trace_t *traces = calloc((size_t)n, sizeof(*traces));
    int rc = 0, first = 1;
    double base_us = 0;

    if (traces == NULL) {
        return 1;
    }
    for (int i = 0; i < n && rc == 0; i++) {
        rc = ddbench_trace_load(paths[i], &traces[i]) ? 1 : 0;
        for (int j = 0; j < i && rc == 0; j++) {
            if (traces[j].rank == traces[i].rank) {
                fprintf(stderr,
                        "ddbench timeline: %s and %s both hold rank %d\n",
                        traces[j].path, traces[i].path, traces[i].rank);
                rc = 1;
            }
        }
        if (rc == 0 && (i == 0 || traces[i].t0_us < base_us)) {
            base_us = traces[i].t0_us;
        }
    }
    if (rc == 0) {
        printf("[\n");
        for (int i = 0; i < n; i++) {
            ddbench_trace_write(&traces[i], base_us, &first);
        }
        printf("\n]\n");
        rc = fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    }
    for (int i = 0; i < n; i++) {
        json_object_put(traces[i].root);
    }
    free(traces);
    return rc;
}
#else
static int ddbench_timeline_merge(int n, char **paths)
{
    (void)n;
    (void)paths;
    fprintf(stderr, "ddbench timeline: built without json-c (configure "
                    "--with-json-c)\n");
    return 1;
}
#endif

int ddbench_timeline_main(int argc, char **argv)
{
    if (argc >= 2 &&
        (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: ddbench timeline merge FILE... > merged.json\n"
               "  merges per-rank DREAMDDP_TIMELINE traces into one Chrome "
               "trace,\n  one track per rank, on rank 0's CLOCK_REALTIME "
               "(the offsets agreed\n  at dd_model_commit)\n");
        return 0;
    }
    if (argc < 3 || strcmp(argv[1], "merge") != 0) {
        fprintf(stderr,
                "usage: ddbench timeline merge FILE... > merged.json\n");
        return 2;
    }
    return ddbench_timeline_merge(argc - 2, argv + 2);
}
