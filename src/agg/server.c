/*
 * A home's summation. Each worker's pushes arrive on its own in-order
 * stream into one of two inbox buffers; a chunk's copies are added in
 * worker order into an accumulator slot; the average goes back to every
 * worker. Sparse pieces (topk's) are scattered, in worker order too, into
 * a zeroed f32 chunk, checked first: an offset out of the chunk or out of
 * order fails the home naming the worker and the layer. Memory stays
 * bounded: two inbox buffers per worker and a few slots, whatever the
 * model's size. A message that does not fit what is
 * expected is never summed: the home fails, logs why naming the rank, and
 * answers every chunk with that error, so no worker waits and none writes a
 * wrong sum.
 */
#include "agg/wire.h"
#include "core/log.h"
#include "core/time.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DD_AGG_INBOX 4 /* buffers per worker */
#define DD_AGG_SLOTS 6 /* chunks summed or answered at once */

enum { IN_FREE = 0, IN_HDR, IN_DATA, IN_READY, IN_BYE };

typedef struct {
    int state;
    uint64_t order; /* the header receive's place in its worker's stream */
    dd_agg_hdr_t hdr;
    dd_agg_req_t *req;
    void *data;
} dd_agg_inbox_t;

typedef struct {
    int used;
    dd_agg_hdr_t hdr; /* the first copy's, which the others must match */
    void *acc;
    int next; /* worker whose copy is added next */
    double started;
    int answering; /* the result is out; waiting for the sends */
    void *result;
    size_t result_bytes;
    dd_agg_hdr_t reply;
    int sparse;           /* a sparse message's chunk: acc starts at zero */
    dd_agg_req_t **sends; /* two per worker */
} dd_agg_slot_t;

struct dd_agg_server {
    const dd_agg_env_t *env;
    dd_agg_transport_t *t;
    int n;                 /* workers */
    int local;             /* this process's worker index, or -1 */
    size_t cap;            /* bytes of the largest chunk */
    float scale;           /* of every copy as it is added (sum.c) */
    dd_agg_inbox_t *inbox; /* [n][DD_AGG_INBOX] */
    uint64_t *last_seq;    /* per worker, of its last push */
    uint64_t *posted;      /* per worker: header receives posted */
    uint64_t *handled;     /* per worker: headers handled, in order */
    int *has_pushed;
    int *said_bye;         /* per worker: its goodbye came */
    uint64_t *reset_round; /* per worker: the round of its last RESET taken */
    /* The newest round whose record was read and found complete, and the
     * numbering it agreed on: the other workers' RESETs of that round are
     * checked against it without reading the store again. */
    uint64_t known_round, known_seq;
    dd_agg_slot_t slot[DD_AGG_SLOTS];
    dd_agg_local_t *locals[DD_AGG_WINDOW];
    int byes;
    uint64_t floor; /* chunks numbered below it were abandoned (RESET) */
    void **grave;   /* inbox buffers an abandoned receive may still fill */
    int n_grave;
    dd_status_t failed;
    char why[DD_AGG_WHY];
};

static dd_agg_inbox_t *dd_agg_inbox(dd_agg_server_t *s, int w, int i)
{
    return &s->inbox[w * DD_AGG_INBOX + i];
}

/* The first failure: logged once, then every chunk is answered with it. */
static void dd_agg_fail(dd_agg_server_t *s, dd_status_t status, const char *fmt,
                        ...) __attribute__((format(printf, 3, 4)));

static void dd_agg_fail(dd_agg_server_t *s, dd_status_t status, const char *fmt,
                        ...)
{
    va_list ap;
    if (s->failed != DD_OK) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof(s->why), fmt, ap);
    va_end(ap);
    s->failed = status;
    dd_error(status, DD_SUBSYS_AGG, "home rank %d: %s", s->env->job->rank,
             s->why);
}

dd_status_t dd_agg_server_create(const dd_agg_env_t *env,
                                 dd_agg_transport_t *transport,
                                 int local_worker, dd_agg_server_t **server_p)
{
    dd_agg_server_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                        "no memory for the aggregation server");
    }
    s->env = env;
    s->t = transport;
    s->n = env->job->n_workers;
    s->local = local_worker;
    s->cap = env->chunk_bytes;
    s->scale = dd_agg_sum_scale(s->n);
    s->inbox = calloc((size_t)s->n * DD_AGG_INBOX, sizeof(dd_agg_inbox_t));
    s->last_seq = calloc((size_t)s->n, sizeof(uint64_t));
    s->has_pushed = calloc((size_t)s->n, sizeof(int));
    s->posted = calloc((size_t)s->n, sizeof(uint64_t));
    s->handled = calloc((size_t)s->n, sizeof(uint64_t));
    s->said_bye = calloc((size_t)s->n, sizeof(int));
    s->reset_round = calloc((size_t)s->n, sizeof(uint64_t));
    int ok = s->inbox && s->last_seq && s->has_pushed && s->posted &&
             s->handled && s->said_bye && s->reset_round;
    for (int i = 0; ok && i < s->n * DD_AGG_INBOX; i++) {
        ok = (s->inbox[i].data = malloc(s->cap)) != NULL;
    }
    for (int i = 0; ok && i < DD_AGG_SLOTS; i++) {
        s->slot[i].sends = calloc(2 * (size_t)s->n, sizeof(dd_agg_req_t *));
        s->slot[i].acc = malloc(2 * s->cap + 8);
        s->slot[i].result = malloc(s->cap);
        ok = s->slot[i].sends && s->slot[i].acc && s->slot[i].result;
    }
    if (!ok) {
        dd_agg_server_destroy(s);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                        "no memory for the summation buffers");
    }
    *server_p = s;
    return DD_OK;
}

/* Keeps a header receive posted in every free inbox buffer. */
static void dd_agg_post_headers(dd_agg_server_t *s, int w)
{
    int peer = s->env->job->worker_ranks[w];
    for (int i = 0; i < DD_AGG_INBOX; i++) {
        dd_agg_inbox_t *in = dd_agg_inbox(s, w, i);
        if (in->state != IN_FREE) {
            continue;
        }
        if (dd_agg_recv(s->t, peer, dd_agg_tag(DD_AGG_TAG_HDR, 0), &in->hdr,
                        sizeof(in->hdr), &in->req) != DD_OK) {
            dd_agg_fail(s, DD_ERR_PEER_LOST,
                        "cannot receive from worker rank %d", peer);
            return;
        }
        in->state = IN_HDR;
        in->order = s->posted[w]++;
    }
}

/* A goodbye: counted once per worker, so that repeats cannot end the
 * service while another worker still pushes. */
static void dd_agg_on_bye(dd_agg_server_t *s, int w, dd_agg_inbox_t *in)
{
    int peer = s->env->job->worker_ranks[w];

    in->state = IN_BYE;
    if (s->said_bye[w]) {
        dd_log_warn(DD_SUBSYS_AGG,
                    "home rank %d: ignored a repeated goodbye from worker "
                    "rank %d",
                    s->env->job->rank, peer);
        return;
    }
    s->said_bye[w] = 1;
    s->byes++;
    if (in->hdr.status != DD_OK) {
        in->hdr.why[DD_AGG_WHY - 1] = '\0';
        dd_agg_fail(s, (dd_status_t)in->hdr.status,
                    "worker rank %d gave up: %s", peer, in->hdr.why);
    }
}

/* The numbering recovery round `round` agreed on (the highest next_seq of
 * its rows) into *seq_p, once the store holds every worker's row of it;
 * else 0 with why. Reads n + 2 keys, none of them waited for. */
static int dd_agg_round_record(dd_agg_server_t *s, uint64_t round,
                               uint64_t *seq_p, char *why, size_t size)
{
    const dd_job_t *job = s->env->job;
    size_t len = sizeof(dd_agg_row_t) + (size_t)job->world_size;
    int64_t rows = 0;
    int exists = 0;
    char key[64];

    if (job->store == NULL || round == 0 || round > INT32_MAX) {
        snprintf(why, size, "no recovery round %llu is recorded in the store",
                 (unsigned long long)round);
        return 0;
    }
    dd_agg_round_key((int)round, -1, key, sizeof(key));
    if (dd_store_check(job->store, key, &exists) != DD_OK || !exists ||
        dd_store_add(job->store, key, 0, &rows) != DD_OK || rows < s->n) {
        snprintf(why, size,
                 "the store records %lld of %d workers' rows of recovery "
                 "round %llu",
                 (long long)rows, s->n, (unsigned long long)round);
        return 0;
    }
    *seq_p = 0;
    for (int w = 0; w < s->n; w++) {
        void *v = NULL;
        size_t vlen = 0;
        dd_agg_row_t head;
        dd_agg_round_key((int)round, w, key, sizeof(key));
        if (dd_store_check(job->store, key, &exists) != DD_OK || !exists ||
            dd_store_get_within(job->store, key, 1.0, &v, &vlen) != DD_OK ||
            vlen != len) {
            free(v);
            snprintf(why, size,
                     "worker %d's row of recovery round %llu is missing or "
                     "malformed in the store",
                     w, (unsigned long long)round);
            return 0;
        }
        memcpy(&head, v, sizeof(head));
        free(v);
        *seq_p = head.next_seq > *seq_p ? head.next_seq : *seq_p;
    }
    return 1;
}

/* Whether worker w's RESET is the one a recovery round recorded: a round
 * newer than w's last, complete in the store, numbering from where it
 * agreed. Anything else (no round, a replay, another numbering) would
 * make this home drop the honest pushes below its number, silently. */
static int dd_agg_reset_recorded(dd_agg_server_t *s, int w,
                                 const dd_agg_hdr_t *h, char *why, size_t size)
{
    uint64_t seq = s->known_seq;

    if (h->step <= s->reset_round[w]) {
        snprintf(why, size,
                 "round %llu is not newer than its last RESET's (round %llu)",
                 (unsigned long long)h->step,
                 (unsigned long long)s->reset_round[w]);
        return 0;
    }
    if (h->step != s->known_round &&
        !dd_agg_round_record(s, h->step, &seq, why, size)) {
        return 0;
    }
    s->known_round = h->step;
    s->known_seq = seq;
    if (h->seq != seq) {
        snprintf(why, size, "recovery round %llu numbers from %llu, not %llu",
                 (unsigned long long)h->step, (unsigned long long)seq,
                 (unsigned long long)h->seq);
        return 0;
    }
    s->reset_round[w] = h->step;
    return 1;
}

/* A RESET on worker w's stream: taken when its round is on record, else
 * refused naming the sender; the stream stays trusted either way, since
 * a refused RESET changed nothing, and every push is summed as before. */
static void dd_agg_on_reset(dd_agg_server_t *s, int w, dd_agg_inbox_t *in)
{
    char why[160];

    in->state = IN_FREE;
    if (!dd_agg_reset_recorded(s, w, &in->hdr, why, sizeof(why))) {
        dd_log_error(DD_SUBSYS_AGG,
                     "home rank %d: refused a RESET from worker rank %d "
                     "(round %llu, numbering from %llu): %s; nothing "
                     "abandoned, every push summed as before",
                     s->env->job->rank, s->env->job->worker_ranks[w],
                     (unsigned long long)in->hdr.step,
                     (unsigned long long)in->hdr.seq, why);
        return;
    }
    dd_agg_server_reset(s, in->hdr.seq);
}

/* A push header arrived: check it, then receive its data. */
static void dd_agg_on_header(dd_agg_server_t *s, int w, dd_agg_inbox_t *in)
{
    int peer = s->env->job->worker_ranks[w];
    size_t bytes = 0;
    char why[128];
    int valid =
        dd_agg_hdr_valid(s->t, &in->hdr, DD_AGG_PUSH, peer, why, sizeof(why));

    if (valid && in->hdr.kind != DD_AGG_BYE && in->hdr.kind != DD_AGG_RESET) {
        valid = dd_agg_hdr_bytes(&in->hdr, s->cap, &bytes, why, sizeof(why));
    }
    if (valid && in->hdr.kind != DD_AGG_BYE && s->said_bye[w]) {
        snprintf(why, sizeof(why), "a push after its goodbye");
        valid = 0;
    }
    if (!valid) {
        in->state = IN_BYE; /* this stream can no longer be trusted */
        dd_agg_fail(s, DD_ERR_MESSAGE,
                    "rejected a malformed message from rank %d: %s", peer, why);
        return;
    }
    dd_log_trace(DD_SUBSYS_AGG,
                 "push header from rank %d: seq %llu chunk %u "
                 "(last %llu), buffer order %llu",
                 peer, (unsigned long long)in->hdr.seq, in->hdr.chunk,
                 (unsigned long long)s->last_seq[w],
                 (unsigned long long)in->order);
    if (in->hdr.kind == DD_AGG_BYE) {
        dd_agg_on_bye(s, w, in);
        return;
    }
    if (in->hdr.kind == DD_AGG_RESET) {
        dd_agg_on_reset(s, w, in);
        return;
    }
    if (in->hdr.seq < s->floor) {
        in->state = IN_FREE; /* sent before its worker abandoned it */
        return;
    }
    if (s->has_pushed[w] && in->hdr.seq <= s->last_seq[w]) {
        char layer[96];
        dd_agg_layer_name(s->env, in->hdr.layer, layer, sizeof(layer));
        in->state = IN_BYE;
        dd_agg_fail(s, DD_ERR_MESSAGE,
                    "rejected a duplicate of chunk %u of layer %s (step "
                    "%llu) from rank %d: never summed twice",
                    in->hdr.chunk, layer, (unsigned long long)in->hdr.step,
                    peer);
        return;
    }
    s->has_pushed[w] = 1;
    s->last_seq[w] = in->hdr.seq;
    if (bytes == 0) { /* a sparse piece with no pair in this chunk */
        in->state = IN_READY;
        return;
    }
    if (dd_agg_recv(s->t, peer, dd_agg_tag(DD_AGG_TAG_DATA, in->hdr.seq),
                    in->data, bytes, &in->req) != DD_OK) {
        dd_agg_fail(s, DD_ERR_PEER_LOST, "cannot receive from worker rank %d",
                    peer);
        return;
    }
    in->state = IN_DATA;
}

/* Headers are handled in the order their receives were posted, which is
 * the order the worker sent them, whichever buffer they landed in. */
static int dd_agg_poll_inbox(dd_agg_server_t *s, int w)
{
    int busy = 0, tested_data = 0;
    for (int k = 0; k < DD_AGG_INBOX * DD_AGG_INBOX; k++) {
        dd_agg_inbox_t *in = dd_agg_inbox(s, w, k % DD_AGG_INBOX);
        if ((in->state != IN_HDR && in->state != IN_DATA) ||
            (in->state == IN_HDR && in->order != s->handled[w])) {
            continue;
        }
        /* A worker's data arrives in order, so one open data receive per
         * pass is enough to look at. */
        if (in->state == IN_DATA && tested_data++ > 0) {
            continue;
        }
        dd_status_t st = dd_agg_check(s->t, in->req);
        if (st == DD_INPROGRESS) {
            continue;
        }
        in->req = NULL;
        busy = 1;
        if (st != DD_OK) {
            in->state = IN_BYE;
            dd_agg_fail(s, DD_ERR_PEER_LOST, "lost worker rank %d: %s",
                        s->env->job->worker_ranks[w], dd_status_string(st));
        } else if (in->state == IN_HDR) {
            s->handled[w]++;
            dd_agg_on_header(s, w, in);
        } else {
            in->state = IN_READY;
        }
    }
    return busy;
}

static dd_agg_slot_t *dd_agg_find_slot(dd_agg_server_t *s, uint64_t seq)
{
    for (int i = 0; i < DD_AGG_SLOTS; i++) {
        if (s->slot[i].used && s->slot[i].hdr.seq == seq) {
            return &s->slot[i];
        }
    }
    return NULL;
}

/* The copy of worker w for the slot's chunk, if it is here. */
static const void *dd_agg_copy(dd_agg_server_t *s, dd_agg_slot_t *sl, int w,
                               dd_agg_inbox_t **in_p, dd_agg_local_t **loc_p)
{
    *in_p = NULL;
    *loc_p = NULL;
    if (w == s->local) {
        for (int i = 0; i < DD_AGG_WINDOW; i++) {
            if (s->locals[i] && s->locals[i]->hdr.seq == sl->hdr.seq) {
                *loc_p = s->locals[i];
                return s->locals[i]->data;
            }
        }
        return NULL;
    }
    for (int i = 0; i < DD_AGG_INBOX; i++) {
        dd_agg_inbox_t *in = dd_agg_inbox(s, w, i);
        if (in->state == IN_READY && in->hdr.seq == sl->hdr.seq) {
            *in_p = in;
            return in->data;
        }
    }
    return NULL;
}

static int dd_agg_same_chunk(const dd_agg_hdr_t *a, const dd_agg_hdr_t *b)
{
    return a->kind == b->kind && a->step == b->step && a->layer == b->layer &&
           a->what == b->what && a->chunk == b->chunk &&
           a->offset == b->offset && a->count == b->count &&
           a->dtype == b->dtype;
}

/* The worker may reuse a local copy's record once it is done, so the
 * server lets go of it first. */
static void dd_agg_forget_local(dd_agg_server_t *s, dd_agg_local_t *loc)
{
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        if (s->locals[i] == loc) {
            s->locals[i] = NULL;
        }
    }
    loc->done = 1;
}

/* Sends the slot's answer (the average, or the failure) to every worker. */
static void dd_agg_answer(dd_agg_server_t *s, dd_agg_slot_t *sl)
{
    size_t dense = sl->hdr.count * dd_dtype_size((dd_dtype_t)sl->hdr.dtype);
    size_t bytes = dense;
    dd_agg_hdr_t *r = &sl->reply;

    *r = sl->hdr;
    r->kind = sl->sparse ? DD_AGG_RESULT_SPARSE : DD_AGG_RESULT;
    r->sender = s->env->job->rank;
    r->n_workers = (uint32_t)s->n;
    r->status = s->failed;
    r->format = DD_AGG_FMT_DENSE;
    r->nnz = 0;
    snprintf(r->why, sizeof(r->why), "%s", s->failed ? s->why : "");
    if (s->failed == DD_OK && sl->sparse) {
        /* acc becomes the dense average, which the local copy takes. */
        bytes = dd_agg_out_sparse(sl->result, sl->acc, sl->hdr.count, s->n,
                                  s->scale, &r->format, &r->nnz);
    } else if (s->failed == DD_OK) {
        dd_agg_out(sl->result, sl->acc, sl->hdr.count,
                   (dd_dtype_t)sl->hdr.dtype,
                   s->env->avg_over > 0 ? s->env->avg_over : s->n, s->scale);
    }
    sl->answering = 1;
    /* Copies not yet summed are answered too: a failed chunk is final. */
    for (int i = 0; i < s->n * DD_AGG_INBOX; i++) {
        if (s->inbox[i].state == IN_READY && s->inbox[i].hdr.seq == r->seq) {
            s->inbox[i].state = IN_FREE;
        }
    }
    for (int w = 0; w < s->n; w++) {
        int peer = s->env->job->worker_ranks[w];
        dd_agg_req_t **q = &sl->sends[2 * w];
        q[0] = q[1] = NULL;
        if (w == s->local) {
            dd_agg_inbox_t *in;
            dd_agg_local_t *loc;
            dd_agg_copy(s, sl, w, &in, &loc);
            if (loc != NULL) {
                if (s->failed == DD_OK) {
                    memcpy(loc->dest, sl->sparse ? sl->acc : sl->result, dense);
                }
                loc->status = s->failed;
                snprintf(loc->why, sizeof(loc->why), "%s", r->why);
                dd_agg_forget_local(s, loc);
            }
            continue;
        }
        /* A send that fails means the worker is gone; it is reported by
         * that worker's own stream, so the send is simply dropped. */
        if (dd_agg_send(s->t, peer, dd_agg_tag(DD_AGG_TAG_RHDR, r->seq), r,
                        sizeof(*r), &q[0]) != DD_OK) {
            q[0] = NULL;
        }
        if (s->failed == DD_OK && bytes > 0 &&
            dd_agg_send(s->t, peer, dd_agg_tag(DD_AGG_TAG_RDATA, r->seq),
                        sl->result, bytes, &q[1]) != DD_OK) {
            q[1] = NULL;
        }
    }
}

/* Scatters worker sl->next's sparse piece into the chunk, once its pairs
 * are checked; 0 (and the home failed) when they are not. */
static int dd_agg_sum_piece(dd_agg_server_t *s, dd_agg_slot_t *sl,
                            const dd_agg_hdr_t *h, const void *data)
{
    char why[128], layer[96];

    if (h->format == DD_AGG_FMT_PAIRS &&
        !dd_agg_pairs_valid(data, h->nnz, h->count, why, sizeof(why))) {
        dd_agg_layer_name(s->env, h->layer, layer, sizeof(layer));
        dd_agg_fail(s, DD_ERR_MESSAGE,
                    "rejected a malformed sparse piece of layer %s (chunk %u, "
                    "step %llu) from worker rank %d: %s: never summed",
                    layer, h->chunk, (unsigned long long)h->step,
                    s->env->job->worker_ranks[sl->next], why);
        return 0;
    }
    dd_agg_add_sparse(sl->acc, data, h->format, (size_t)h->nnz,
                      (size_t)h->count, s->scale);
    return 1;
}

/* Adds the copies that are here, in worker order; answers when complete. */
static int dd_agg_sum(dd_agg_server_t *s, dd_agg_slot_t *sl)
{
    int busy = 0;
    while (!sl->answering && s->failed == DD_OK && sl->next < s->n) {
        dd_agg_inbox_t *in;
        dd_agg_local_t *loc;
        const void *copy = dd_agg_copy(s, sl, sl->next, &in, &loc);
        if (copy == NULL) {
            break;
        }
        if (sl->sparse) {
            if (!dd_agg_sum_piece(s, sl, in != NULL ? &in->hdr : &loc->hdr,
                                  copy)) {
                break;
            }
        } else {
            dd_agg_add(sl->acc, copy, sl->hdr.count, (dd_dtype_t)sl->hdr.dtype,
                       sl->next == 0, s->scale);
        }
        if (in != NULL) {
            in->state = IN_FREE;
        }
        sl->next++;
        busy = 1;
    }
    if (!sl->answering && (sl->next == s->n || s->failed != DD_OK)) {
        dd_agg_answer(s, sl);
        busy = 1;
    }
    return busy;
}

/* Frees a slot whose answer has left. */
static int dd_agg_reap(dd_agg_server_t *s, dd_agg_slot_t *sl)
{
    int pending = 0;
    for (int i = 0; i < 2 * s->n; i++) {
        if (sl->sends[i] == NULL) {
            continue;
        }
        if (dd_agg_check(s->t, sl->sends[i]) == DD_INPROGRESS) {
            pending++;
        } else {
            sl->sends[i] = NULL;
        }
    }
    if (pending > 0) {
        return 0;
    }
    sl->used = 0;
    sl->answering = 0;
    return 1;
}

/* Opens a slot for a chunk first seen in hdr; checks later copies. */
static void dd_agg_admit(dd_agg_server_t *s, const dd_agg_hdr_t *hdr,
                         int sender)
{
    dd_agg_slot_t *sl = dd_agg_find_slot(s, hdr->seq);
    if (sl != NULL) {
        if (!dd_agg_same_chunk(&sl->hdr, hdr)) {
            char layer[96];
            dd_agg_layer_name(s->env, hdr->layer, layer, sizeof(layer));
            dd_agg_fail(s, DD_ERR_MISMATCH,
                        "rank %d pushed chunk %u of layer %s (step %llu, "
                        "%llu elements) where rank %d pushed another chunk "
                        "or another kind of sync (never summed): do the "
                        "workers make the same calls?",
                        sender, hdr->chunk, layer,
                        (unsigned long long)hdr->step,
                        (unsigned long long)hdr->count, sl->hdr.sender);
        }
        return;
    }
    for (int i = 0; i < DD_AGG_SLOTS; i++) {
        if (!s->slot[i].used) {
            sl = &s->slot[i];
            sl->used = 1;
            sl->hdr = *hdr;
            sl->next = 0;
            sl->sparse = hdr->kind == DD_AGG_PUSH_SPARSE;
            if (sl->sparse) {
                memset(sl->acc, 0, hdr->count * sizeof(float));
            }
            sl->started = dd_time_now();
            return;
        }
    }
}

/* Names the workers whose copy of a late chunk never came. */
static void dd_agg_check_late(dd_agg_server_t *s, dd_agg_slot_t *sl)
{
    double timeout = s->env->job->timeout_s;
    if (sl->answering || dd_time_now() - sl->started < timeout) {
        return;
    }
    char ranks[128] = "", layer[96];
    for (int w = sl->next; w < s->n; w++) {
        dd_agg_inbox_t *in;
        dd_agg_local_t *loc;
        if (dd_agg_copy(s, sl, w, &in, &loc) == NULL) {
            size_t o = strlen(ranks);
            snprintf(ranks + o, sizeof(ranks) - o, "%s%d", o ? ", " : "",
                     s->env->job->worker_ranks[w]);
        }
    }
    dd_agg_layer_name(s->env, sl->hdr.layer, layer, sizeof(layer));
    dd_agg_fail(s, DD_ERR_TIMED_OUT,
                "worker rank(s) %s did not push chunk %u of layer %s (step "
                "%llu) within %.0f s (DREAMDDP_TIMEOUT_S)",
                ranks, sl->hdr.chunk, layer, (unsigned long long)sl->hdr.step,
                timeout);
}

dd_status_t dd_agg_server_progress(dd_agg_server_t *s, int *busy_p)
{
    int busy = 0;

    /* Once for the pass: the requests below are only looked at. */
    dd_agg_progress(s->t);
    for (int w = 0; w < s->n; w++) {
        if (w == s->local) {
            continue;
        }
        dd_agg_post_headers(s, w);
        busy |= dd_agg_poll_inbox(s, w);
        for (int i = 0; i < DD_AGG_INBOX; i++) {
            dd_agg_inbox_t *in = dd_agg_inbox(s, w, i);
            if (in->state == IN_READY) {
                dd_agg_admit(s, &in->hdr, s->env->job->worker_ranks[w]);
            }
        }
    }
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        if (s->locals[i] != NULL && !s->locals[i]->done) {
            dd_agg_admit(s, &s->locals[i]->hdr, s->env->job->rank);
        }
    }
    for (int i = 0; i < DD_AGG_SLOTS; i++) {
        dd_agg_slot_t *sl = &s->slot[i];
        if (!sl->used) {
            continue;
        }
        busy |= dd_agg_sum(s, sl);
        dd_agg_check_late(s, sl);
        if (sl->answering) {
            busy |= dd_agg_reap(s, sl);
        }
    }
    if (s->failed != DD_OK) {
        /* Answer copies that no slot took, so no worker waits on them. */
        for (int i = 0; i < DD_AGG_WINDOW; i++) {
            if (s->locals[i] != NULL && !s->locals[i]->done &&
                dd_agg_find_slot(s, s->locals[i]->hdr.seq) == NULL) {
                s->locals[i]->status = s->failed;
                snprintf(s->locals[i]->why, DD_AGG_WHY, "%s", s->why);
                dd_agg_forget_local(s, s->locals[i]);
            }
        }
    }
    *busy_p = busy;
    return s->failed;
}

/* A receive canceled once its data began to arrive still lands (UCP
 * cannot cancel a matched receive; Gloo's pair keeps a posted one), so
 * the inbox takes a new buffer and the old one is kept until the server
 * is freed: the late bytes never reach the next push's data. */
static void dd_agg_inbox_renew(dd_agg_server_t *s, dd_agg_inbox_t *in)
{
    void *fresh = malloc(s->cap);
    void **grave = realloc(s->grave, (s->n_grave + 1) * sizeof(void *));
    if (grave != NULL) {
        s->grave = grave;
    }
    if (fresh == NULL || grave == NULL) {
        free(fresh);
        dd_agg_fail(s, DD_ERR_NO_MEMORY,
                    "no memory for a %zu-byte inbox after a reset", s->cap);
        return;
    }
    s->grave[s->n_grave++] = in->data;
    in->data = fresh;
}

void dd_agg_server_reset(dd_agg_server_t *s, uint64_t floor)
{
    if (floor <= s->floor) {
        return;
    }
    s->floor = floor;
    for (int i = 0; i < DD_AGG_SLOTS; i++) {
        dd_agg_slot_t *sl = &s->slot[i];
        if (!sl->used || sl->hdr.seq >= floor) {
            continue;
        }
        for (int j = 0; j < 2 * s->n; j++) {
            dd_agg_cancel(s->t, sl->sends[j]);
            sl->sends[j] = NULL;
        }
        sl->used = 0;
        sl->answering = 0;
    }
    for (int i = 0; i < s->n * DD_AGG_INBOX; i++) {
        dd_agg_inbox_t *in = &s->inbox[i];
        if ((in->state == IN_READY || in->state == IN_DATA) &&
            in->hdr.seq < floor) {
            if (in->state == IN_DATA) {
                dd_agg_cancel(s->t, in->req);
                in->req = NULL;
                dd_agg_inbox_renew(s, in);
            }
            in->state = IN_FREE;
        }
    }
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        if (s->locals[i] != NULL && s->locals[i]->hdr.seq < floor) {
            s->locals[i] = NULL;
        }
    }
}

dd_status_t dd_agg_server_local(dd_agg_server_t *s, dd_agg_local_t *local)
{
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        if (s->locals[i] == NULL) {
            local->done = 0;
            local->status = DD_OK;
            s->locals[i] = local;
            return DD_OK;
        }
    }
    /* A worker has at most DD_AGG_WINDOW pieces in flight. */
    return dd_error(DD_ERR_STATE, DD_SUBSYS_AGG,
                    "home rank %d: more than %d of its own pieces at once",
                    s->env->job->rank, DD_AGG_WINDOW);
}

const char *dd_agg_server_why(const dd_agg_server_t *s)
{
    return s->why;
}

int dd_agg_server_streams_closed(const dd_agg_server_t *s)
{
    for (int i = 0; i < s->n * DD_AGG_INBOX; i++) {
        if (i / DD_AGG_INBOX != s->local && s->inbox[i].state != IN_BYE) {
            return 0;
        }
    }
    return 1;
}

int dd_agg_server_byes(const dd_agg_server_t *s)
{
    return s->byes;
}

int dd_agg_server_idle(const dd_agg_server_t *s, uint64_t upto)
{
    for (int i = 0; i < DD_AGG_SLOTS; i++) {
        if (s->slot[i].used && s->slot[i].hdr.seq < upto) {
            return 0;
        }
    }
    return 1;
}

void dd_agg_server_destroy(dd_agg_server_t *s)
{
    if (s == NULL) {
        return;
    }
    for (int i = 0; s->inbox && i < s->n * DD_AGG_INBOX; i++) {
        if (s->inbox[i].state == IN_HDR || s->inbox[i].state == IN_DATA) {
            dd_agg_cancel(s->t, s->inbox[i].req);
        }
        free(s->inbox[i].data);
    }
    for (int i = 0; i < DD_AGG_SLOTS; i++) {
        for (int j = 0; s->slot[i].sends && j < 2 * s->n; j++) {
            dd_agg_cancel(s->t, s->slot[i].sends[j]);
        }
        free(s->slot[i].sends);
        free(s->slot[i].acc);
        free(s->slot[i].result);
    }
    for (int i = 0; i < s->n_grave; i++) {
        free(s->grave[i]);
    }
    free(s->grave);
    free(s->inbox);
    free(s->last_seq);
    free(s->has_pushed);
    free(s->posted);
    free(s->handled);
    free(s->said_bye);
    free(s->reset_round);
    free(s);
}
