/*
 * Elastic workers (DREAMDDP_ELASTIC=yes): the commit a re-formed job
 * resumes from. Each worker keeps two slots, files of DREAMDDP_ELASTIC_DIR
 * named after the job, its generation and its id, the same across
 * generations (commit-J-gG-iI.S), mapped into its memory: a header (the job,
 * the generation and rank that wrote it, the next step, a digest of the
 * layer table and the state buffers, a checksum of the body), then every
 * registered layer's parameters and every state buffer, in order. A slot
 * that fails its checks (elastic_file.c) is skipped for the older one. A commit
 * is one copy into the older slot: its header is cleared first and written
 * last, so a worker killed while copying leaves the other slot as its newest
 * commit. On a tmpfs (ddrun's default, /dev/shm) the copy is all a commit
 * costs; the space is reserved when the slots are made, so a full file system
 * is an error then, not a SIGBUS later.
 *
 * The launcher (ddrun --elastic) re-forms the job: it starts the ranks
 * that remain, renumbered, as a new generation, and writes the number in
 * DIR/generation first, so that a rank of an older generation (one that
 * was frozen and dropped) knows it was left behind when it wakes. The new
 * generation's workers agree on a step they all hold and each goes on
 * from its own commit; a worker without one takes the others'.
 */
#include "api/context.h"
#include "api/elastic_file.h"
#include "boot/generation.h"
#include "core/log.h"
#include "core/time.h"
#include "sched/route/route.h"
#include "sched/sched.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- the layers and buffers a commit holds ------------------------------- */

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
        h = dd_route_fnv(h, l->name, strlen(l->name) + 1);
        for (size_t t = 0; t < l->n_tensors; t++) {
            const dd_tensor_t *x = &l->tensors[t];
            if (x->count > 0 && x->mem_type != DD_MEM_HOST) {
                return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                                "elastic commit: layer '%s' tensor %zu is in "
                                "%s memory; a commit holds host layers only",
                                l->name, t, dd_mem_type_name(x->mem_type));
            }
            uint64_t desc[2] = {x->count, (uint64_t)x->dtype};
            h = dd_route_fnv(h, desc, sizeof(desc));
            bytes += x->count * dd_dtype_size(x->dtype);
        }
    }
    for (size_t i = 0; i < e->n_states; i++) {
        uint64_t size = e->states[i].bytes;
        h = dd_route_fnv(h, e->states[i].name, strlen(e->states[i].name) + 1);
        h = dd_route_fnv(h, &size, sizeof(size));
        bytes += size;
    }
    *digest_p = h;
    *bytes_p = bytes;
    return DD_OK;
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

/* This worker's id: what DREAMDDP_ELASTIC_ID says (ddrun: the rank it was
 * first started as), else its rank. */
static int dd_elastic_id(dd_context_h ctx)
{
    return ctx->boot.elastic_id >= 0 ? ctx->boot.elastic_id : ctx->env.rank;
}

/* The path of this worker's slot k of this generation:
 * commit-J-gG-iI.k, J naming the job (dd_elastic_job_name). */
static void dd_elastic_slot_path(dd_context_h ctx, int k, char *path,
                                 size_t size)
{
    char job[17];
    dd_elastic_job_name(ctx->token_hash, job);
    snprintf(path, size, "%s/" DD_ELASTIC_PREFIX "%s-g%d-i%d.%d",
             ctx->boot.elastic_dir, job, ctx->boot.elastic_gen,
             dd_elastic_id(ctx), k);
}

/* Makes this worker's two slots of size bytes, mapped. */
static dd_status_t dd_elastic_slots(dd_context_h ctx, size_t size)
{
    struct dd_elastic *e = ctx->elastic;

    e->size = size; /* what dd_elastic_state_free unmaps, should slot 1 fail */
    for (int k = 0; k < 2; k++) {
        char path[PATH_MAX];
        void *map;
        dd_elastic_slot_path(ctx, k, path, sizeof(path));
        dd_status_t status = dd_elastic_file_make(path, size, &map);
        if (status != DD_OK) {
            return status;
        }
        e->slot[k] = map;
    }
    return DD_OK;
}

dd_status_t dd_elastic_commit(dd_context_h ctx)
{
    dd_status_t status = dd_elastic_check_call(ctx, "dd_elastic_commit");
    uint64_t layout, body;

    if (status != DD_OK || ctx->elastic == NULL) {
        return status;
    }
    struct dd_elastic *e = ctx->elastic;
    size_t size;
    if ((status = dd_boot_generation_check(&ctx->boot, ctx->env.rank)) !=
            DD_OK ||
        (status = dd_elastic_layout(ctx, &layout, &body)) != DD_OK ||
        (size = sizeof(dd_elastic_header_t) + (size_t)body,
         e->slot[0] == NULL &&
             (status = dd_elastic_slots(ctx, size)) != DD_OK)) {
        return status;
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
    unsigned char *slot = e->slot[e->next];
    /* Not a commit until the header is back, written last. */
    memset(slot, 0, sizeof(h));
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    unsigned char *p = slot + sizeof(h);
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
    h.sum = dd_elastic_sum(DD_ELASTIC_SUM_INIT, slot + sizeof(h), body);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    memcpy(slot, &h, sizeof(h));
    e->committed = 1;
    e->next ^= 1;
    return DD_OK;
}

/* ---- restore ------------------------------------------------------------- */

/* The generation and worker id in a slot's name (commit-J-gG-iI.S) when
 * it is one of this job's slots; -1 otherwise (another job's, a slot
 * being made). */
static int dd_elastic_name_parse(dd_context_h ctx, const char *name, int *id_p)
{
    char job[17], ours[17];
    int gen, slot, end = 0;

    dd_elastic_job_name(ctx->token_hash, ours);
    if (sscanf(name, DD_ELASTIC_PREFIX "%16[0-9a-f]-g%d-i%d.%d%n", job, &gen,
               id_p, &slot, &end) != 4 ||
        name[end] != '\0' || strcmp(job, ours) != 0) {
        return -1;
    }
    return gen;
}

typedef struct {
    int64_t step;
    char path[PATH_MAX];
} dd_elastic_found_t;

/* What the scan of the directory found of this worker's slots. */
typedef struct {
    dd_elastic_found_t found[2]; /* the two newest whole ones, newest first */
    int damaged;                 /* slots skipped as damaged */
    char damaged_path[PATH_MAX]; /* the last of them */
} dd_elastic_scan_t;

/* Takes one of this worker's slots into the scan: kept among the two
 * newest when whole, skipped (saying why) when damaged; an error when it
 * must be refused (a link, another user's). */
static dd_status_t dd_elastic_consider(dd_context_h ctx, const char *path,
                                       uint64_t layout, uint64_t body,
                                       dd_elastic_scan_t *scan)
{
    dd_elastic_header_t h;
    char why[256] = "";
    dd_elastic_found_t *found = scan->found;

    switch (dd_elastic_file_check(path, ctx->token_hash, layout, body, &h, why,
                                  sizeof(why))) {
    case DD_ELASTIC_FILE_REFUSED:
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "elastic restore: refusing %s: %s; something other "
                        "than this job put it in DREAMDDP_ELASTIC_DIR",
                        path, why);
    case DD_ELASTIC_FILE_DAMAGED:
        scan->damaged++;
        snprintf(scan->damaged_path, sizeof(scan->damaged_path), "%s", path);
        dd_log_warn(DD_SUBSYS_BOOT,
                    "elastic restore: skipping %s: %s; an older commit is "
                    "taken if there is one",
                    path, why);
        return DD_OK;
    case DD_ELASTIC_FILE_OTHER:
        return DD_OK;
    case DD_ELASTIC_FILE_VALID:
        break;
    }
    int at = (int64_t)h.step > found[0].step   ? 0
             : (int64_t)h.step > found[1].step ? 1
                                               : 2;
    if (at == 0) {
        found[1] = found[0];
    }
    if (at < 2) {
        found[at].step = (int64_t)h.step;
        snprintf(found[at].path, sizeof(found[at].path), "%s", path);
    }
    return DD_OK;
}

/* Removes this worker's slots of generations two or more before the
 * newest, but those a restore takes. */
static void dd_elastic_prune(dd_context_h ctx, int newest_gen,
                             const dd_elastic_found_t found[2])
{
    int id = dd_elastic_id(ctx);
    DIR *d = newest_gen >= 2 ? opendir(ctx->boot.elastic_dir) : NULL;
    struct dirent *ent;

    while (d != NULL && (ent = readdir(d)) != NULL) {
        int who, gen = dd_elastic_name_parse(ctx, ent->d_name, &who);
        char path[PATH_MAX];
        int keep = 0;
        for (int k = 0; k < 2; k++) {
            keep |= found[k].step >= 0 &&
                    strcmp(ent->d_name, strrchr(found[k].path, '/') + 1) == 0;
        }
        if (gen >= 0 && who == id && gen < newest_gen - 1 && !keep) {
            snprintf(path, sizeof(path), "%s/%s", ctx->boot.elastic_dir,
                     ent->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
}

/* This worker's two newest whole commits of this model in the directory
 * (any generation), newest first; step -1 where there is none. A damaged
 * slot is skipped for the older one; an error when a slot must be
 * refused, or when every slot there is damaged. */
static dd_status_t dd_elastic_own(dd_context_h ctx, dd_elastic_scan_t *scan)
{
    uint64_t layout, body;
    int id = dd_elastic_id(ctx), newest_gen = -1;
    dd_status_t status = dd_elastic_layout(ctx, &layout, &body);
    DIR *d = status == DD_OK ? opendir(ctx->boot.elastic_dir) : NULL;
    struct dirent *ent;

    memset(scan, 0, sizeof(*scan));
    scan->found[0].step = scan->found[1].step = -1;
    if (status != DD_OK) {
        return DD_OK; /* a layer a commit cannot hold: there is none */
    }
    if (d == NULL) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_BOOT,
                        "elastic restore: cannot read DREAMDDP_ELASTIC_DIR=%s: "
                        "%m",
                        ctx->boot.elastic_dir);
    }
    while (status == DD_OK && (ent = readdir(d)) != NULL) {
        int who, gen = dd_elastic_name_parse(ctx, ent->d_name, &who);
        char path[PATH_MAX];
        newest_gen = gen > newest_gen ? gen : newest_gen;
        if (gen < 0 || who != id) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", ctx->boot.elastic_dir,
                 ent->d_name);
        status = dd_elastic_consider(ctx, path, layout, body, scan);
    }
    if (d != NULL) {
        closedir(d);
    }
    if (status == DD_OK && scan->found[0].step < 0 && scan->damaged > 0) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_BOOT,
                        "elastic restore: rank %d (worker id %d) has no "
                        "whole commit left: %d slot(s) damaged, the last "
                        "%s (the warnings above say how); it stops rather "
                        "than start afresh",
                        ctx->env.rank, id, scan->damaged, scan->damaged_path);
    }
    if (status == DD_OK) {
        dd_elastic_prune(ctx, newest_gen, scan->found);
    }
    return status;
}

/* Reads the commit at path into the layers and the state buffers. */
static dd_status_t dd_elastic_load(dd_context_h ctx, const char *path)
{
    FILE *f = fopen(path, "rb");
    int ok =
        f != NULL && fseek(f, (long)sizeof(dd_elastic_header_t), SEEK_SET) == 0;
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
    return DD_OK;
}

/* A digest of the layers' parameters, 8 bytes at a time. */
static uint64_t dd_elastic_digest(dd_context_h ctx)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t n;
    struct dd_layer **layers = dd_elastic_layers(ctx, &n);

    for (size_t i = 0; i < n; i++) {
        for (size_t t = 0; t < layers[i]->n_tensors; t++) {
            const dd_tensor_t *x = &layers[i]->tensors[t];
            const unsigned char *p = x->param;
            size_t bytes = x->count * dd_dtype_size(x->dtype), k = 0;
            for (; k + 8 <= bytes; k += 8) {
                uint64_t w;
                memcpy(&w, p + k, 8);
                h = (h ^ w) * 0x100000001b3ull;
            }
            h = dd_route_fnv(h, p + k, bytes - k);
        }
    }
    return h;
}

/* The average of the commits the workers that have one loaded (count of
 * them; the others add zeros), for f32 and f64 tensors; the tensors of
 * other types and the state buffers come from the first such worker.
 * When the commits hold the same parameters (same), they are kept as
 * they are: the first such worker's go to those without one. */
static dd_status_t dd_elastic_average(dd_context_h ctx, int have, int count,
                                      int first, int same)
{
    dd_status_t status = DD_OK;
    size_t n;
    struct dd_layer **layers = dd_elastic_layers(ctx, &n);

    for (size_t i = 0; i < n && status == DD_OK; i++) {
        for (size_t t = 0; t < layers[i]->n_tensors && status == DD_OK; t++) {
            const dd_tensor_t *x = &layers[i]->tensors[t];
            if (same ||
                (x->dtype != DD_DTYPE_F32 && x->dtype != DD_DTYPE_F64)) {
                status = dd_broadcast(ctx, x->param, x->count, x->dtype, first,
                                      DD_MEM_HOST);
                continue;
            }
            if (!have) {
                memset(x->param, 0, x->count * dd_dtype_size(x->dtype));
            }
            status = dd_allreduce(ctx, x->param, x->param, x->count, x->dtype,
                                  DD_REDUCE_SUM, DD_MEM_HOST);
            for (size_t k = 0; k < x->count && status == DD_OK; k++) {
                if (x->dtype == DD_DTYPE_F32) {
                    ((float *)x->param)[k] /= (float)count;
                } else {
                    ((double *)x->param)[k] /= (double)count;
                }
            }
        }
    }
    struct dd_elastic *e = ctx->elastic;
    for (size_t i = 0; i < e->n_states && status == DD_OK; i++) {
        status = dd_broadcast(ctx, e->states[i].buf, e->states[i].bytes,
                              DD_DTYPE_U8, first, DD_MEM_HOST);
    }
    return status;
}

/* The step to resume from: the newest that every worker with a commit
 * has (each keeps two); -1 when none has one. The workers that do not
 * have it are left out. */
static int64_t dd_elastic_agree_step(const int64_t *all, int workers)
{
    int64_t step = -1;
    for (int w = 0; w < workers; w++) {
        if (all[2 * w] >= 0 && (step < 0 || all[2 * w] < step)) {
            step = all[2 * w];
        }
    }
    return step;
}

/* A worker's step in the allgather when its commits were refused. */
#define DD_ELASTIC_REFUSED (-2)

/* Every worker stops when one refused its commits (its own error says
 * why; the others name it). */
static dd_status_t dd_elastic_refused(dd_context_h ctx, const int64_t *all,
                                      dd_status_t own)
{
    if (own != DD_OK) {
        return own;
    }
    for (int w = 0; w < ctx->n_workers; w++) {
        if (all[2 * w] == DD_ELASTIC_REFUSED) {
            return dd_error(DD_ERR_IO, DD_SUBSYS_BOOT,
                            "elastic restore: worker rank %d refused its "
                            "commits (its log says why): every worker stops",
                            ctx->worker_ranks[w]);
        }
    }
    return DD_OK;
}

/* Under ddp the replicas hold the same bits at every step, so the commits
 * the workers loaded must too: one that differs was changed after it was
 * written (in a way its checksum missed) and would keep the replicas apart
 * for the rest of the run. Names the workers that differ from the first. */
static dd_status_t dd_elastic_same_replicas(dd_context_h ctx, int have,
                                            int64_t step)
{
    int workers = ctx->n_workers, ref = -1, differ = 0;
    int64_t mine[2] = {have, have ? (int64_t)dd_elastic_digest(ctx) : 0};
    int64_t *all = malloc(sizeof(int64_t) * 2 * (size_t)workers);
    char list[256] = "";
    size_t len = 0;

    if (all == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "elastic restore: no memory");
    }
    dd_status_t status =
        dd_allgather(ctx, mine, all, 2, DD_DTYPE_I64, DD_MEM_HOST);
    for (int w = 0; w < workers && status == DD_OK; w++) {
        if (!all[2 * w]) {
            continue; /* no commit: it takes the others' */
        }
        if (ref < 0) {
            ref = w;
            continue;
        }
        if (all[2 * w + 1] != all[2 * ref + 1] && len < sizeof(list)) {
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d",
                                    differ++ ? ", " : "", ctx->worker_ranks[w]);
        }
    }
    free(all);
    if (status != DD_OK || differ == 0) {
        return status;
    }
    return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_BOOT,
                    "elastic restore: under ddp the replicas are the same "
                    "at every step, but the commits of step %lld differ: "
                    "worker rank(s) %s hold parameters other than rank %d's; "
                    "a commit was changed after it was written, and the job "
                    "stops rather than train replicas that differ",
                    (long long)step, list, ctx->worker_ranks[ref]);
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
    dd_elastic_scan_t scan;
    dd_elastic_found_t *own = scan.found;
    int workers = ctx->n_workers;
    int64_t mine[2], *all = malloc(sizeof(int64_t) * 2 * (size_t)workers);
    if (all == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "elastic restore: no memory");
    }
    dd_status_t scanned = dd_elastic_own(ctx, &scan);
    mine[0] = scanned != DD_OK ? DD_ELASTIC_REFUSED : own[0].step;
    mine[1] = own[1].step;
    status = dd_allgather(ctx, mine, all, 2, DD_DTYPE_I64, DD_MEM_HOST);
    if (status == DD_OK) {
        status = dd_elastic_refused(ctx, all, scanned);
    }
    int64_t step = status == DD_OK ? dd_elastic_agree_step(all, workers) : -1;
    int count = 0, first = -1, have = -1;
    for (int w = 0; w < workers && step >= 0; w++) {
        int k = all[2 * w] == step ? 0 : all[2 * w + 1] == step ? 1 : -1;
        if (k >= 0) {
            count++;
            first = first < 0 ? ctx->worker_ranks[w] : first;
        }
        if (ctx->worker_ranks[w] == ctx->env.rank) {
            have = k;
        }
    }
    free(all);
    if (status != DD_OK || step < 0) {
        return status; /* a fresh job */
    }
    /* Every worker takes part in the averages, whether its load failed or
     * not: the failure is then agreed by a sum. */
    dd_status_t loaded =
        have >= 0 ? dd_elastic_load(ctx, own[have].path) : DD_OK;
    char why[512];
    snprintf(why, sizeof(why), "%s", loaded != DD_OK ? dd_last_error() : "");
    int64_t failed = loaded != DD_OK;
    if ((status = dd_allreduce(ctx, &failed, &failed, 1, DD_DTYPE_I64,
                               DD_REDUCE_SUM, DD_MEM_HOST)) != DD_OK) {
        return status;
    }
    if (failed) {
        return loaded != DD_OK
                   ? dd_error(loaded, DD_SUBSYS_BOOT, "%s", why)
                   : dd_error(DD_ERR_IO, DD_SUBSYS_BOOT,
                              "elastic restore: %lld worker(s) could not "
                              "read their commit of step %lld (their logs "
                              "say why)",
                              (long long)failed, (long long)step);
    }
    if (ctx->sched->strategy.kind == DD_STRATEGY_DDP &&
        (status = dd_elastic_same_replicas(ctx, have >= 0, step)) != DD_OK) {
        return status;
    }
    /* Every worker has its commit (the same world started again, or fewer
     * workers): each goes on from its own, as it would have. Otherwise a
     * new worker takes the others': their bits where they are the same
     * (ddp's replicas), else their average. */
    int64_t lo = 0, hi = 0;
    const char *how = NULL;
    if (count < workers) {
        lo = INT64_MAX; /* the bounds of the digests */
        hi = INT64_MIN;
        if (have >= 0) {
            lo = hi = (int64_t)dd_elastic_digest(ctx);
        }
        if ((status = dd_allreduce(ctx, &lo, &lo, 1, DD_DTYPE_I64,
                                   DD_REDUCE_MIN, DD_MEM_HOST)) != DD_OK ||
            (status = dd_allreduce(ctx, &hi, &hi, 1, DD_DTYPE_I64,
                                   DD_REDUCE_MAX, DD_MEM_HOST)) != DD_OK ||
            (status = dd_elastic_average(ctx, have >= 0, count, first,
                                         lo == hi)) != DD_OK) {
            return status;
        }
        how = lo == hi ? "the same bits in" : "the average of";
    }
    if ((status = dd_step_set(ctx, (uint64_t)step)) != DD_OK) {
        return status;
    }
    char what[PATH_MAX + 256], from[64];
    snprintf(from, sizeof(from), "%s %d worker(s)' commits", how, count);
    snprintf(what, sizeof(what),
             "elastic: generation %d of %d workers resumes at step %lld, %s "
             "(this worker's: %s)",
             ctx->boot.elastic_gen, workers, (long long)step,
             count < workers ? from : "each worker from its own commit",
             have >= 0 ? own[have].path : "none");
    dd_log_warn(DD_SUBSYS_BOOT, "%s", what);
    if (ctx->sched->timeline != NULL) {
        dd_timeline_instant(ctx->sched->timeline, what, "elastic",
                            dd_time_now());
    }
    if (step_p != NULL) {
        *step_p = (uint64_t)step;
    }
    return DD_OK;
}
