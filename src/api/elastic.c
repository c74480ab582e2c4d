/*
 * Elastic workers (DREAMDDP_ELASTIC=yes): the commit a re-formed job
 * resumes from. A commit is one file per worker in DREAMDDP_ELASTIC_DIR:
 * a header (the job, the generation and rank that wrote it, the next
 * step, a digest of the layer table and the state buffers), then every
 * registered layer's parameters and every state buffer, in order. The
 * copy is taken in the caller's thread and written by a thread of its
 * own, to a temporary file renamed over the last one.
 *
 * The launcher (ddrun --elastic) re-forms the job: it starts the ranks
 * that remain, renumbered, as a new generation, and writes the number in
 * DIR/generation first, so that a rank of an older generation (one that
 * was frozen and dropped) knows it was left behind when it wakes.
 */
#include "api/elastic.h"
#include "api/context.h"
#include "core/log.h"
#include "sched/sched.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DD_ELASTIC_MAGIC "DDCOMMIT"
#define DD_ELASTIC_VERSION 1u
#define DD_ELASTIC_PREFIX "commit-"

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t generation; /* of the job that wrote it */
    int32_t rank;        /* that wrote it, in that generation */
    int32_t workers;
    uint64_t token_tag; /* the job's: another job's file is not ours */
    uint64_t step;      /* the next step */
    uint64_t layout;    /* digest of the layers and state buffers */
    uint64_t body;      /* bytes after the header */
} dd_elastic_header_t;

typedef struct {
    char *name;
    void *buf;
    size_t bytes;
} dd_elastic_state_t;

struct dd_elastic {
    dd_elastic_state_t *states;
    size_t n_states, cap_states;
    int committed; /* a commit was taken: the state list is frozen */
    unsigned char *snap;
    size_t snap_size;
    pthread_t writer;
    int writing;
    dd_status_t write_status;
    char write_error[PATH_MAX + 320];
    char path[PATH_MAX];
};

/* ---- the layers and buffers a commit holds ------------------------------- */

static uint64_t dd_elastic_fnv(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

/* The layers as registered (before any cut into parts). */
static struct dd_layer **dd_elastic_layers(dd_context_h ctx, size_t *n_p)
{
    dd_sched_t *sched = ctx->sched;
    if (sched->handles != NULL) {
        *n_p = sched->n_handles;
        return sched->handles;
    }
    *n_p = sched->n_layers;
    return sched->layers;
}

/* The digest of what a commit holds, and its size; DD_ERR_UNSUPPORTED for
 * a layer in device memory. */
static dd_status_t dd_elastic_layout(dd_context_h ctx, uint64_t *digest_p,
                                     uint64_t *bytes_p)
{
    struct dd_elastic *e = ctx->elastic;
    uint64_t h = 0xcbf29ce484222325ull, bytes = 0;
    size_t n;
    struct dd_layer **layers = dd_elastic_layers(ctx, &n);

    for (size_t i = 0; i < n; i++) {
        const struct dd_layer *l = layers[i];
        h = dd_elastic_fnv(h, l->name, strlen(l->name) + 1);
        for (size_t t = 0; t < l->n_tensors; t++) {
            const dd_tensor_t *x = &l->tensors[t];
            if (x->count > 0 && x->mem_type != DD_MEM_HOST) {
                return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                                "elastic commit: layer '%s' tensor %zu is in "
                                "%s memory; a commit holds host layers only",
                                l->name, t, dd_mem_type_name(x->mem_type));
            }
            uint64_t desc[2] = {x->count, (uint64_t)x->dtype};
            h = dd_elastic_fnv(h, desc, sizeof(desc));
            bytes += x->count * dd_dtype_size(x->dtype);
        }
    }
    for (size_t i = 0; i < e->n_states; i++) {
        uint64_t size = e->states[i].bytes;
        h = dd_elastic_fnv(h, e->states[i].name, strlen(e->states[i].name) + 1);
        h = dd_elastic_fnv(h, &size, sizeof(size));
        bytes += size;
    }
    *digest_p = h;
    *bytes_p = bytes;
    return DD_OK;
}

/* ---- the generation ------------------------------------------------------ */

/* The generation the launcher last formed: DIR/generation, or the rank's
 * own when the file is absent (a launcher other than ddrun). */
static int dd_elastic_job_generation(dd_context_h ctx)
{
    char path[PATH_MAX], buf[32] = "";
    int gen = ctx->boot.elastic_gen;

    snprintf(path, sizeof(path), "%s/generation", ctx->boot.elastic_dir);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(buf, sizeof(buf), f) != NULL) {
            gen = atoi(buf);
        }
        fclose(f);
    }
    return gen;
}

/* DD_ERR_CANCELED, saying so, when the job went on without this rank. */
static dd_status_t dd_elastic_dropped(dd_context_h ctx)
{
    int now = dd_elastic_job_generation(ctx);
    if (now <= ctx->boot.elastic_gen) {
        return DD_OK;
    }
    return dd_error(DD_ERR_CANCELED, DD_SUBSYS_BOOT,
                    "rank %d of generation %d was dropped: the job went on "
                    "without it and is at generation %d; it leaves without "
                    "committing (started again, it would rejoin)",
                    ctx->env.rank, ctx->boot.elastic_gen, now);
}

dd_status_t dd_elastic_fault(dd_context_h ctx, dd_status_t status)
{
    if (status == DD_OK || ctx == NULL || ctx->elastic == NULL) {
        return status;
    }
    dd_status_t dropped = dd_elastic_dropped(ctx);
    return dropped != DD_OK ? dropped : status;
}

dd_status_t dd_elastic_setup(dd_context_h ctx)
{
    if (!ctx->boot.elastic) {
        return DD_OK;
    }
    if (ctx->boot.elastic_dir == NULL || ctx->boot.elastic_dir[0] == '\0') {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "DREAMDDP_ELASTIC=yes needs DREAMDDP_ELASTIC_DIR, a "
                        "directory for the commits (ddrun --elastic makes "
                        "one)");
    }
    if (ctx->role == DD_ROLE_WORKER && ctx->n_workers < ctx->boot.elastic_min) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "the job has %d worker%s, fewer than "
                        "DREAMDDP_ELASTIC_MIN=%d: it stops",
                        ctx->n_workers, ctx->n_workers == 1 ? "" : "s",
                        ctx->boot.elastic_min);
    }
    ctx->elastic = calloc(1, sizeof(*ctx->elastic));
    if (ctx->elastic == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "no memory for the elastic state");
    }
    snprintf(ctx->elastic->path, sizeof(ctx->elastic->path),
             "%s/" DD_ELASTIC_PREFIX "%d", ctx->boot.elastic_dir,
             ctx->env.rank);
    return dd_elastic_dropped(ctx);
}

static dd_status_t dd_elastic_join(struct dd_elastic *e)
{
    if (!e->writing) {
        return DD_OK;
    }
    pthread_join(e->writer, NULL);
    e->writing = 0;
    if (e->write_status != DD_OK) {
        return dd_error(e->write_status, DD_SUBSYS_BOOT, "%s", e->write_error);
    }
    return DD_OK;
}

void dd_elastic_free(dd_context_h ctx)
{
    struct dd_elastic *e = ctx->elastic;

    if (e == NULL) {
        return;
    }
    dd_elastic_join(e);
    for (size_t i = 0; i < e->n_states; i++) {
        free(e->states[i].name);
    }
    free(e->states);
    free(e->snap);
    free(e);
    ctx->elastic = NULL;
}

dd_status_t dd_elastic_state_add(dd_context_h ctx, const char *name, void *buf,
                                 size_t bytes)
{
    if (ctx == NULL || name == NULL || name[0] == '\0' || buf == NULL ||
        bytes == 0) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BOOT,
                        "dd_elastic_state_add: %s",
                        ctx == NULL                       ? "ctx is NULL"
                        : name == NULL || name[0] == '\0' ? "no name"
                                                          : "no buffer");
    }
    struct dd_elastic *e = ctx->elastic;
    if (e == NULL) {
        return DD_OK; /* not elastic: nothing is committed */
    }
    if (e->committed) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_BOOT,
                        "dd_elastic_state_add: '%s' comes after the first "
                        "dd_elastic_commit",
                        name);
    }
    for (size_t i = 0; i < e->n_states; i++) {
        if (strcmp(e->states[i].name, name) == 0) {
            return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BOOT,
                            "dd_elastic_state_add: '%s' was added already",
                            name);
        }
    }
    if (e->n_states == e->cap_states) {
        size_t cap = e->cap_states ? 2 * e->cap_states : 8;
        dd_elastic_state_t *s = realloc(e->states, cap * sizeof(*s));
        if (s == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                            "no memory for state '%s'", name);
        }
        e->states = s;
        e->cap_states = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "no memory for state '%s'", name);
    }
    e->states[e->n_states++] = (dd_elastic_state_t){copy, buf, bytes};
    return DD_OK;
}

/* Outside a step, after dd_model_commit, on a worker. */
static dd_status_t dd_elastic_check_call(dd_context_h ctx, const char *what)
{
    if (ctx == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BOOT, "%s: ctx is NULL",
                        what);
    }
    if (ctx->role != DD_ROLE_WORKER || !ctx->sched->committed ||
        ctx->sched->in_step) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_BOOT,
                        "%s: call it on a worker, after dd_model_commit and "
                        "outside a step",
                        what);
    }
    return DD_OK;
}

/* ---- commit -------------------------------------------------------------- */

static void *dd_elastic_write(void *arg)
{
    struct dd_elastic *e = arg;
    char tmp[PATH_MAX + 8];
    size_t done = 0;

    snprintf(tmp, sizeof(tmp), "%s.tmp", e->path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    while (fd >= 0 && done < e->snap_size) {
        ssize_t n = write(fd, e->snap + done, e->snap_size - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        done += (size_t)n;
    }
    int err = fd < 0 ? errno : done < e->snap_size ? (errno ? errno : EIO) : 0;
    if (fd >= 0 && close(fd) != 0 && err == 0) {
        err = errno;
    }
    if (err == 0 && rename(tmp, e->path) != 0) {
        err = errno;
    }
    if (err != 0) {
        unlink(tmp);
        snprintf(e->write_error, sizeof(e->write_error),
                 "elastic commit: writing %s failed: %s", tmp, strerror(err));
        e->write_status = DD_ERR_IO;
    }
    return NULL;
}

dd_status_t dd_elastic_commit(dd_context_h ctx)
{
    dd_status_t status = dd_elastic_check_call(ctx, "dd_elastic_commit");
    uint64_t layout, body;

    if (status != DD_OK || ctx->elastic == NULL) {
        return status;
    }
    struct dd_elastic *e = ctx->elastic;
    if ((status = dd_elastic_dropped(ctx)) != DD_OK ||
        (status = dd_elastic_join(e)) != DD_OK ||
        (status = dd_elastic_layout(ctx, &layout, &body)) != DD_OK) {
        return status;
    }
    size_t size = sizeof(dd_elastic_header_t) + (size_t)body;
    if (size != e->snap_size) {
        unsigned char *snap = realloc(e->snap, size);
        if (snap == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                            "elastic commit: no memory for %zu bytes", size);
        }
        e->snap = snap;
        e->snap_size = size;
    }
    dd_elastic_header_t h = {.magic = DD_ELASTIC_MAGIC,
                             .version = DD_ELASTIC_VERSION,
                             .generation = (uint32_t)ctx->boot.elastic_gen,
                             .rank = ctx->env.rank,
                             .workers = ctx->n_workers,
                             .token_tag = ctx->token_hash,
                             .step = ctx->sched->step,
                             .layout = layout,
                             .body = body};
    memcpy(e->snap, &h, sizeof(h));
    unsigned char *p = e->snap + sizeof(h);
    size_t n;
    struct dd_layer **layers = dd_elastic_layers(ctx, &n);
    for (size_t i = 0; i < n; i++) {
        for (size_t t = 0; t < layers[i]->n_tensors; t++) {
            const dd_tensor_t *x = &layers[i]->tensors[t];
            size_t bytes = x->count * dd_dtype_size(x->dtype);
            if (bytes > 0) {
                memcpy(p, x->param, bytes);
            }
            p += bytes;
        }
    }
    for (size_t i = 0; i < e->n_states; i++) {
        memcpy(p, e->states[i].buf, e->states[i].bytes);
        p += e->states[i].bytes;
    }
    e->committed = 1;
    e->write_status = DD_OK;
    if (pthread_create(&e->writer, NULL, dd_elastic_write, e) != 0) {
        dd_elastic_write(e); /* no thread: write it here */
        return e->write_status == DD_OK
                   ? DD_OK
                   : dd_error(e->write_status, DD_SUBSYS_BOOT, "%s",
                              e->write_error);
    }
    e->writing = 1;
    return DD_OK;
}

/* ---- restore ------------------------------------------------------------- */

/* Reads a commit's header; 0 when it is one of this job's. */
static int dd_elastic_read_header(dd_context_h ctx, const char *path,
                                  dd_elastic_header_t *h)
{
    FILE *f = fopen(path, "rb");
    int ok = f != NULL && fread(h, sizeof(*h), 1, f) == 1 &&
             memcmp(h->magic, DD_ELASTIC_MAGIC, 8) == 0 &&
             h->version == DD_ELASTIC_VERSION &&
             h->token_tag == ctx->token_hash;
    if (f != NULL) {
        fclose(f);
    }
    return ok ? 0 : -1;
}

/* The newest of this job's commits in the directory; 1 if there is one. */
static int dd_elastic_newest(dd_context_h ctx, char *path, size_t size,
                             dd_elastic_header_t *best)
{
    DIR *d = opendir(ctx->boot.elastic_dir);
    struct dirent *ent;
    int found = 0;

    while (d != NULL && (ent = readdir(d)) != NULL) {
        size_t len = strlen(ent->d_name);
        dd_elastic_header_t h;
        char candidate[PATH_MAX];
        if (strncmp(ent->d_name, DD_ELASTIC_PREFIX,
                    strlen(DD_ELASTIC_PREFIX)) != 0 ||
            (len > 4 && strcmp(ent->d_name + len - 4, ".tmp") == 0)) {
            continue;
        }
        snprintf(candidate, sizeof(candidate), "%s/%s", ctx->boot.elastic_dir,
                 ent->d_name);
        if (dd_elastic_read_header(ctx, candidate, &h) != 0 ||
            (found && h.step <= best->step)) {
            continue;
        }
        *best = h;
        snprintf(path, size, "%s", candidate);
        found = 1;
    }
    if (d != NULL) {
        closedir(d);
    }
    return found;
}

/* The first worker: reads the newest commit into the layers and the state
 * buffers. */
static dd_status_t dd_elastic_load(dd_context_h ctx, int *found_p,
                                   dd_elastic_header_t *h)
{
    char path[PATH_MAX];
    uint64_t layout, body;
    dd_status_t status = dd_elastic_layout(ctx, &layout, &body);

    *found_p = status == DD_OK && dd_elastic_newest(ctx, path, sizeof(path), h);
    if (status != DD_OK || !*found_p) {
        return status;
    }
    if (h->layout != layout || h->body != body) {
        return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_BOOT,
                        "elastic restore: %s was committed by another model "
                        "or other state buffers (%llu bytes, this job's "
                        "commit holds %llu); remove it to start afresh",
                        path, (unsigned long long)h->body,
                        (unsigned long long)body);
    }
    FILE *f = fopen(path, "rb");
    int ok = f != NULL && fseek(f, (long)sizeof(*h), SEEK_SET) == 0;
    size_t n;
    struct dd_layer **layers = dd_elastic_layers(ctx, &n);
    for (size_t i = 0; ok && i < n; i++) {
        for (size_t t = 0; ok && t < layers[i]->n_tensors; t++) {
            const dd_tensor_t *x = &layers[i]->tensors[t];
            size_t bytes = x->count * dd_dtype_size(x->dtype);
            ok = bytes == 0 || fread(x->param, bytes, 1, f) == 1;
        }
    }
    struct dd_elastic *e = ctx->elastic;
    for (size_t i = 0; ok && i < e->n_states; i++) {
        ok = fread(e->states[i].buf, e->states[i].bytes, 1, f) == 1;
    }
    int err = errno;
    if (f != NULL) {
        fclose(f);
    }
    if (!ok) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_BOOT,
                        "elastic restore: reading %s failed: %s", path,
                        f == NULL ? strerror(err) : "the file is short");
    }
    dd_log_warn(DD_SUBSYS_BOOT,
                "elastic: generation %d restores %s (step %llu, committed by "
                "rank %d of %d workers in generation %u)",
                ctx->boot.elastic_gen, path, (unsigned long long)h->step,
                h->rank, h->workers, h->generation);
    return DD_OK;
}

dd_status_t dd_elastic_restore(dd_context_h ctx, uint64_t *step_p)
{
    dd_status_t status = dd_elastic_check_call(ctx, "dd_elastic_restore");

    if (step_p != NULL) {
        *step_p = 0;
    }
    if (status != DD_OK || ctx->elastic == NULL) {
        return status;
    }
    if (dd_sched_steps_run(ctx->sched) > 0) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_BOOT,
                        "dd_elastic_restore: call it before the first step");
    }
    int root = ctx->worker_ranks[0], found = 0;
    dd_elastic_header_t h = {0};
    int64_t msg[3] = {0, 0, 0}; /* status, found, step */
    if (ctx->env.rank == root) {
        msg[0] = dd_elastic_load(ctx, &found, &h);
        msg[1] = found;
        msg[2] = (int64_t)h.step;
    }
    char mine[512];
    snprintf(mine, sizeof(mine), "%s", dd_last_error());
    status = dd_broadcast(ctx, msg, 3, DD_DTYPE_I64, root, DD_MEM_HOST);
    if (status != DD_OK) {
        return status;
    }
    if (msg[0] != DD_OK) {
        return ctx->env.rank == root
                   ? dd_error((dd_status_t)msg[0], DD_SUBSYS_BOOT, "%s", mine)
                   : dd_error((dd_status_t)msg[0], DD_SUBSYS_BOOT,
                              "elastic restore: the first worker (rank %d) "
                              "could not read the newest commit: %s",
                              root, dd_status_string((dd_status_t)msg[0]));
    }
    if (!msg[1]) {
        return DD_OK;
    }
    size_t n;
    struct dd_layer **layers = dd_elastic_layers(ctx, &n);
    for (size_t i = 0; i < n && status == DD_OK; i++) {
        for (size_t t = 0; t < layers[i]->n_tensors && status == DD_OK; t++) {
            const dd_tensor_t *x = &layers[i]->tensors[t];
            status = dd_broadcast(ctx, x->param, x->count, x->dtype, root,
                                  DD_MEM_HOST);
        }
    }
    struct dd_elastic *e = ctx->elastic;
    for (size_t i = 0; i < e->n_states && status == DD_OK; i++) {
        status = dd_broadcast(ctx, e->states[i].buf, e->states[i].bytes,
                              DD_DTYPE_U8, root, DD_MEM_HOST);
    }
    if (status == DD_OK) {
        status = dd_step_set(ctx, (uint64_t)msg[2]);
    }
    if (status == DD_OK) {
        if (ctx->env.rank != root) {
            dd_log_warn(DD_SUBSYS_BOOT,
                        "elastic: generation %d of %d workers resumes at "
                        "step %lld from the first worker's commit",
                        ctx->boot.elastic_gen, ctx->n_workers,
                        (long long)msg[2]);
        }
        if (step_p != NULL) {
            *step_p = (uint64_t)msg[2];
        }
    }
    return status;
}
