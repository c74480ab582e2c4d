/*
 * The worker's side of aggregation: cuts a message into chunks, gives each
 * its home (the same choice on every worker), pushes the chunks homed
 * elsewhere and pulls their averages back, serving its own home's share
 * meanwhile. Pushes of later chunks go out while earlier averages come
 * back, so both directions of the link stay busy; a window bounds the
 * chunks in flight and the staging memory. An average is written in place
 * only after its header has been checked. A sparse message (topk's pairs)
 * is cut by its dense elements, so every worker's pieces of a chunk meet at
 * one home; each piece holds the pairs that fall in its chunk, and its
 * answer is received once its header says its size.
 */
#include "agg/wire.h"
#include "core/log.h"
#include "core/reduce.h"
#include "core/status.h"
#include "core/time.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* In flight at once: at most DD_AGG_WINDOW pieces (wire.h) and
 * DD_AGG_WINDOW_CHUNKS chunks' worth of bytes. More large pieces at once
 * would share the link and all finish late; more small ones keep every home
 * busy. */
#define DD_AGG_WINDOW_CHUNKS 12
/* A message is cut into pieces of DD_AGG_INCAST / n bytes on the wire, n
 * the workers, within DD_AGG_LEAST_PIECE and DD_AGG_MAX_PIECE (64 KB up to 8
 * workers, 32 KB at 16), and at most DREAMDDP_CHUNK_BYTES: every worker
 * pushes a piece to the same home at once, so a home takes n pieces at a
 * time on its one link, and past a switch port's buffer TCP's losses cost
 * more than the link. Many small pieces also spread a message over every
 * home's link, and a home sends back the average of a piece while the next
 * ones arrive. Measured: bench/NOTES.md, "Measurements moved from code
 * comments". */
#define DD_AGG_MAX_PIECE (64 * 1024)
#define DD_AGG_INCAST (512 * 1024)
#define DD_AGG_LEAST_PIECE 4096
/* The pieces a worker has at one home at once, as TCP's slow start: a
 * burst (the first pushes after none were in flight) puts at most
 * DD_AGG_HOME_BUDGET / n bytes not yet answered at each home (one piece
 * always), and every answer adds its bytes to that. An aggregator's share
 * is several workers' (3.5x at 8 workers and 4 aggregators), so of the 24
 * pieces a worker starts at once about 4 meet at each one, and a lost
 * segment waits for TCP's 200 ms timeout. A fixed window with no growth
 * slows a long stream: the answers come back over the same link before the
 * next pushes go. Measured: bench/NOTES.md, "Measurements moved from
 * code comments". */
#define DD_AGG_HOME_BUDGET (1024 * 1024)

/* A message being synced: the engine starts at most DD_AGG_MSGS at once,
 * and its pieces are launched in the order the messages started, so that
 * every worker numbers them alike. */
#define DD_AGG_MSGS 2

typedef struct {
    int in_use;
    dd_agg_id_t id;
    char *buf;
    size_t count;
    dd_dtype_t dtype;
    size_t per; /* elements per piece */
    size_t next, n_chunks, done;
    uint64_t end_seq; /* the sequence number after its last piece */
    /* A sparse message: chunk c's piece is pair_off[c + 1] - pair_off[c]
     * pairs at 8 * pair_off[c] in pieces (offsets, then values), its
     * average goes to out; wire_per_el sizes the pieces. */
    int sparse;
    char *pieces;
    size_t *pair_off;
    float *out;
    double wire_per_el;
    size_t *wire_bytes_p;
    /* DREAMDDP_AGG_LOSS=survive: its place in the order every worker
     * starts messages, and a copy of what it averages (dense: input;
     * sparse: the pairs), from which a lost chunk is redone. A ghost is a
     * message this worker finished that the others redo: it pushes its
     * copy again and drops the answer. */
    uint64_t no;
    int ghost;
    /* A send of its data to an aggregator was abandoned in a round: a
     * frozen or cut-off one may still take the data when it wakes, so its
     * copies are not freed before the client is (dd_agg_bury). */
    int pinned;
    void *input;
    size_t copied; /* elements of input copied from buf, in chunk order:
                      each chunk just before it leaves, the rest (still
                      intact in buf) when a round begins */
    size_t nnz, *s_index;
    float *s_value;
    size_t wire_estimate;
    int *input_bad, *result_bad; /* dd_agg_msg_start's; NULL: not read */
} dd_agg_msg_t;

/* Messages a worker keeps after they end (survive): one worker ends a
 * message only once every worker has pushed all of it, and each has at
 * most DD_AGG_MSGS started, so none is more than DD_AGG_MSGS ahead. */
#define DD_AGG_KEEP DD_AGG_MSGS
#define DD_AGG_ALL_MSGS (DD_AGG_MSGS + DD_AGG_KEEP)

typedef struct {
    int busy;
    dd_agg_msg_t *msg;
    size_t chunk;
    int home;           /* job rank */
    dd_agg_hdr_t push;  /* the header pushed */
    dd_agg_hdr_t reply; /* the header received */
    void *staging;      /* the average before it is checked */
    size_t staging_size;
    void *dense; /* a sparse piece sent dense */
    size_t dense_size;
    size_t inflight;      /* its bytes in a->inflight_bytes */
    size_t reply_bytes;   /* a sparse answer's data */
    dd_agg_req_t *req[4]; /* push header, push data, result header, data */
    int got_reply;
    int lost_home;        /* a transfer with its home failed */
    dd_agg_local_t local; /* when homed here */
    int is_local;
} dd_agg_flight_t;

struct dd_agg {
    const dd_agg_env_t *env;
    dd_agg_transport_t t;
    dd_agg_server_t *server;
    int n, k, n_homes;
    int *home_rank; /* aggregators first, then workers */
    double *weight, *load;
    uint64_t next_seq;
    size_t chunk_bytes;
    size_t inflight_bytes; /* pushed and not yet back */
    size_t home_grown;     /* answered since the pushes began: a home's
                              budget grows by it (dd_agg_home_budget) */
    int said_goodbye;
    dd_status_t failed; /* once a sync failed, every later one fails */
    char why[DD_AGG_WHY];
    double idle_since; /* when anything last moved */
    dd_agg_flight_t flight[DD_AGG_WINDOW];
    dd_agg_msg_t msg[DD_AGG_ALL_MSGS];
    dd_agg_msg_t *queue[DD_AGG_ALL_MSGS]; /* started, in order */
    int n_queued;
    /* DREAMDDP_AGG_LOSS=survive (dd_agg_recover). */
    int survive;
    uint64_t started, ended; /* messages, in the order every worker has */
    int round;               /* recovery rounds done */
    int in_round;            /* this worker's state is out; waiting */
    double round_since, round_poll;
    int64_t downs_seen;
    unsigned char *lost; /* per job rank, agreed lost */
    dd_agg_msg_t kept[DD_AGG_KEEP];
    uint64_t last_step;
    dd_agg_req_t *reset_req[DD_AGG_WINDOW];
    void **grave; /* pinned copies, freed with the client */
    size_t n_grave;
    /* Copies' buffers no longer kept, for the next messages: a fresh
     * buffer of a large message costs its pages' faults every time. */
    void *spare[DD_AGG_ALL_MSGS];
    size_t spare_size[DD_AGG_ALL_MSGS];
    /* The last change, for the timeline (dd_agg_take_event). */
    pthread_mutex_t event_lock;
    char event[256];
    double event_at;
    dd_agg_hdr_t reset_hdr;
};

/* The homes: the aggregators not lost, then the workers, each with its
 * share; loads start at zero. */
static dd_status_t dd_agg_homes(dd_agg_t *a)
{
    const dd_job_t *job = a->env->job;

    a->k = 0;
    for (int r = 0; r < job->world_size; r++) {
        a->k += job->roles[r] == DD_ROLE_AGGREGATOR &&
                (a->lost == NULL || !a->lost[r]);
    }
    double x = dd_agg_share(a->n, a->k);
    free(a->home_rank);
    free(a->weight);
    free(a->load);
    a->n_homes = a->k + a->n;
    a->home_rank = calloc((size_t)a->n_homes, sizeof(int));
    a->weight = calloc((size_t)a->n_homes, sizeof(double));
    a->load = calloc((size_t)a->n_homes, sizeof(double));
    if (!a->home_rank || !a->weight || !a->load) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                        "no memory for the shares of %d aggregation homes",
                        a->n_homes);
    }
    int h = 0;
    for (int r = 0; r < job->world_size; r++) {
        if (job->roles[r] == DD_ROLE_AGGREGATOR &&
            (a->lost == NULL || !a->lost[r])) {
            a->home_rank[h] = r;
            a->weight[h++] = x / a->k;
        }
    }
    for (int w = 0; w < a->n; w++) {
        a->home_rank[h] = job->worker_ranks[w];
        a->weight[h++] = (1.0 - x) / a->n;
    }
    dd_log_info(DD_SUBSYS_AGG,
                "aggregation: %d workers, %d aggregators; %.0f %% of the "
                "bytes summed by aggregators, chunks of %zu bytes",
                a->n, a->k, 100 * x, a->chunk_bytes);
    return DD_OK;
}

int dd_agg_take_event(dd_agg_t *a, char *what, size_t size, double *at_p)
{
    int any;
    pthread_mutex_lock(&a->event_lock);
    any = a->event[0] != '\0';
    if (any) {
        snprintf(what, size, "%s", a->event);
        *at_p = a->event_at;
        a->event[0] = '\0';
    }
    pthread_mutex_unlock(&a->event_lock);
    return any;
}

dd_status_t dd_agg_create(const dd_agg_env_t *env, dd_agg_t **agg_p)
{
    dd_agg_t *a = calloc(1, sizeof(*a));
    dd_status_t status;

    if (a == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                        "no memory for the aggregation client");
    }
    pthread_mutex_init(&a->event_lock, NULL);
    a->env = env;
    a->n = env->job->n_workers;
    a->k = dd_job_n_aggregators(env->job);
    a->chunk_bytes = env->chunk_bytes;
    a->survive = env->survive && a->k > 0;
    if (a->survive &&
        (a->lost = calloc((size_t)env->job->world_size, 1)) == NULL) {
        free(a);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                        "no memory for the aggregation client");
    }
    if ((status = dd_agg_transport_init(env, &a->t)) != DD_OK ||
        (status = dd_agg_homes(a)) != DD_OK ||
        (status = dd_agg_server_create(
             env, &a->t, dd_job_worker_index(env->job, env->job->rank),
             &a->server)) != DD_OK) {
        dd_agg_destroy(a);
        return status;
    }
    *agg_p = a;
    return DD_OK;
}

static dd_status_t dd_agg_grow(void **buf, size_t *size, size_t bytes)
{
    if (*size < bytes) {
        void *grown = realloc(*buf, bytes);
        if (grown == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                            "no memory for a %zu-byte piece", bytes);
        }
        *buf = grown;
        *size = bytes;
    }
    return DD_OK;
}

/* The data of a sparse message's piece c of n elements: its pairs, or the
 * chunk dense when pairs would take more bytes. */
static dd_status_t dd_agg_sparse_piece(dd_agg_flight_t *f, dd_agg_msg_t *m,
                                       size_t c, size_t n, dd_agg_hdr_t *p,
                                       const void **data_p, size_t *bytes_p)
{
    size_t nnz = m->pair_off[c + 1] - m->pair_off[c];
    const char *pairs = m->pieces + 2 * sizeof(uint32_t) * m->pair_off[c];

    p->kind = DD_AGG_PUSH_SPARSE;
    if (2 * nnz <= n) {
        p->format = DD_AGG_FMT_PAIRS;
        p->nnz = nnz;
        *data_p = pairs;
        *bytes_p = nnz * 2 * sizeof(uint32_t);
        return DD_OK;
    }
    dd_status_t st = dd_agg_grow(&f->dense, &f->dense_size, n * sizeof(float));
    if (st == DD_OK) {
        dd_agg_expand_sparse(f->dense, pairs, DD_AGG_FMT_PAIRS, nnz, n);
        p->format = DD_AGG_FMT_DENSE;
        *data_p = f->dense;
        *bytes_p = n * sizeof(float);
    }
    return st;
}

/* Starts chunk c of the message: homed here, or pushed and pulled. */
/* dst = src, n values of dtype; *bad = 1 if one is not finite (NULL: not
 * read). */
static void dd_agg_copy_finite(void *dst, const void *src, size_t n,
                               dd_dtype_t dtype, int *bad)
{
    if (bad == NULL) {
        memcpy(dst, src, n * dd_dtype_size(dtype));
    } else if (!dd_coll_quotient_finite(dst, src, n, dtype, 1)) {
        *bad = 1;
    }
}

/* Copies m's buffer into its copy for survival up to element end. */
static void dd_agg_copy_in(dd_agg_msg_t *m, size_t end)
{
    size_t esize = dd_dtype_size(m->dtype);

    dd_agg_copy_finite((char *)m->input + m->copied * esize,
                       m->buf + m->copied * esize, end - m->copied, m->dtype,
                       m->input_bad);
    m->copied = end;
}

/* What piece c of m costs its home: its bytes (a sparse piece's, as
 * estimated), the measure of the homes' loads and of the window. */
static size_t dd_agg_piece_cost(const dd_agg_msg_t *m, size_t c)
{
    size_t off = c * m->per;
    size_t n = m->count - off < m->per ? m->count - off : m->per;
    return m->sparse ? (size_t)((double)n * m->wire_per_el) + 1
                     : n * dd_dtype_size(m->dtype);
}

static dd_status_t dd_agg_launch(dd_agg_t *a, dd_agg_flight_t *f,
                                 dd_agg_msg_t *m, size_t c)
{
    char *buf = m->buf;
    dd_dtype_t dtype = m->dtype;
    size_t esize = dd_dtype_size(dtype);
    size_t per = m->per;
    size_t off = c * per, n = m->count - off < per ? m->count - off : per;
    size_t cost = dd_agg_piece_cost(m, c);
    int h = dd_agg_pick_home(a->weight, a->load, a->n_homes, cost);
    dd_agg_hdr_t *p = &f->push;
    if (m->input != NULL && m->copied < off + n) {
        /* The copy a lost aggregator's chunk is redone from, made as the
         * chunk leaves: its average may land in buf before the others'. */
        dd_agg_copy_in(m, off + n);
    } else if (m->input == NULL && m->input_bad != NULL) {
        *m->input_bad |= !dd_values_finite(buf + off * esize, n, dtype);
    }
    const void *data = (m->input ? (char *)m->input : buf) + off * esize;
    size_t bytes = n * esize;
    dd_status_t st = DD_OK;

    memset(f->req, 0, sizeof(f->req));
    memset(p, 0, sizeof(*p));
    *p = (dd_agg_hdr_t){.magic = DD_AGG_MAGIC,
                        .version = DD_AGG_VERSION,
                        .kind = DD_AGG_PUSH,
                        .token = a->t.token,
                        .seq = a->next_seq++,
                        .step = m->id.step,
                        .layer = m->id.layer,
                        .what = m->id.what,
                        .chunk = (uint32_t)c,
                        .offset = off,
                        .count = n,
                        .dtype = (uint32_t)dtype,
                        .sender = a->env->job->rank};
    f->busy = 1;
    f->msg = m;
    f->chunk = c;
    f->home = a->home_rank[h];
    f->got_reply = 0;
    f->lost_home = 0;
    f->inflight = 0;
    f->is_local = f->home == a->env->job->rank;
    if (m->sparse &&
        (st = dd_agg_sparse_piece(f, m, c, n, p, &data, &bytes)) != DD_OK) {
        return st;
    }
    if (f->is_local) {
        f->local.hdr = *p;
        f->local.data = data;
        f->local.dest = m->sparse ? (void *)(m->out + off) : buf + off * esize;
        return dd_agg_server_local(a->server, &f->local);
    }
    if ((st = dd_agg_grow(&f->staging, &f->staging_size, n * esize)) != DD_OK) {
        return st;
    }
    f->inflight = cost;
    a->inflight_bytes += cost;
    if (m->wire_bytes_p != NULL) {
        *m->wire_bytes_p += bytes;
    }
    if ((st = dd_agg_recv(&a->t, f->home, dd_agg_tag(DD_AGG_TAG_RHDR, p->seq),
                          &f->reply, sizeof(f->reply), &f->req[2])) ||
        (!m->sparse &&
         (st = dd_agg_recv(&a->t, f->home, dd_agg_tag(DD_AGG_TAG_RDATA, p->seq),
                           f->staging, n * esize, &f->req[3]))) ||
        (st = dd_agg_send(&a->t, f->home, dd_agg_tag(DD_AGG_TAG_HDR, 0), p,
                          sizeof(*p), &f->req[0])) ||
        (bytes > 0 &&
         (st = dd_agg_send(&a->t, f->home, dd_agg_tag(DD_AGG_TAG_DATA, p->seq),
                           data, bytes, &f->req[1])))) {
        return st;
    }
    return DD_OK;
}

/* Reports a failed chunk, naming the home and, from its answer, the rank at
 * fault. */
static dd_status_t dd_agg_chunk_error(dd_agg_t *a, dd_agg_flight_t *f,
                                      dd_status_t status, const char *why)
{
    char layer[96];
    dd_agg_layer_name(a->env, f->push.layer, layer, sizeof(layer));
    return dd_error(status, DD_SUBSYS_AGG,
                    "layer %s chunk %zu (step %llu) through home rank %d: %s",
                    layer, f->chunk, (unsigned long long)f->push.step, f->home,
                    why);
}

/* The result header came: check it before its data may land in place. */
static dd_status_t dd_agg_check_reply(dd_agg_t *a, dd_agg_flight_t *f)
{
    char why[160];
    dd_agg_hdr_t *r = &f->reply;
    uint32_t kind = f->msg->sparse ? DD_AGG_RESULT_SPARSE : DD_AGG_RESULT;

    if (!dd_agg_hdr_valid(&a->t, r, kind, f->home, why, sizeof(why)) ||
        r->seq != f->push.seq || r->count != f->push.count ||
        r->offset != f->push.offset || r->dtype != f->push.dtype) {
        if (r->magic == DD_AGG_MAGIC && r->seq != f->push.seq) {
            snprintf(why, sizeof(why), "its answer is for another chunk");
        }
        return dd_agg_chunk_error(a, f, DD_ERR_MESSAGE, why);
    }
    if (r->status != DD_OK) {
        r->why[DD_AGG_WHY - 1] = '\0';
        return dd_agg_chunk_error(a, f, (dd_status_t)r->status, r->why);
    }
    if (f->msg->sparse) {
        /* Its data is received into staging, of the chunk's dense size. */
        if (!dd_agg_hdr_bytes(r, r->count * sizeof(float), &f->reply_bytes, why,
                              sizeof(why))) {
            return dd_agg_chunk_error(a, f, DD_ERR_MESSAGE, why);
        }
        if (f->msg->wire_bytes_p != NULL) {
            *f->msg->wire_bytes_p += f->reply_bytes;
        }
        if (f->reply_bytes > 0) {
            return dd_agg_recv(&a->t, f->home,
                               dd_agg_tag(DD_AGG_TAG_RDATA, r->seq), f->staging,
                               f->reply_bytes, &f->req[3]);
        }
    }
    return DD_OK;
}

/* A sparse answer, checked, into the message's output. */
static dd_status_t dd_agg_land_sparse(dd_agg_t *a, dd_agg_flight_t *f)
{
    const dd_agg_hdr_t *r = &f->reply;
    char why[128];

    if (r->format == DD_AGG_FMT_PAIRS &&
        !dd_agg_pairs_valid(f->staging, r->nnz, r->count, why, sizeof(why))) {
        return dd_agg_chunk_error(a, f, DD_ERR_MESSAGE, why);
    }
    dd_agg_expand_sparse(f->msg->out + f->push.offset, f->staging, r->format,
                         (size_t)r->nnz, (size_t)r->count);
    return DD_OK;
}

/* Progresses one chunk; *done_p when its average is in place. */
static dd_status_t dd_agg_poll(dd_agg_t *a, dd_agg_flight_t *f, int *done_p,
                               int *busy_p)
{
    char *buf = f->msg->buf;
    size_t esize = dd_dtype_size((dd_dtype_t)f->push.dtype);
    *done_p = 0;
    if (f->is_local) {
        if (f->local.done) {
            *done_p = 1;
            *busy_p = 1;
            if (f->local.status == DD_OK && f->msg->result_bad != NULL &&
                !dd_values_finite(buf + f->push.offset * esize, f->push.count,
                                  f->msg->dtype)) {
                /* This worker's own home wrote the average in place. */
                *f->msg->result_bad = 1;
            }
            return f->local.status == DD_OK
                       ? DD_OK
                       : dd_agg_chunk_error(a, f, f->local.status,
                                            f->local.why);
        }
        return DD_OK;
    }
    /* A flight's requests complete in order (push header, push data, result
     * header, result data): so only the first one still open is looked at
     * (dd_agg_pass progressed the transport). */
    for (int i = 0; i < 4; i++) {
        if (f->req[i] == NULL) {
            continue;
        }
        dd_status_t st = dd_agg_check(&a->t, f->req[i]);
        if (st == DD_INPROGRESS) {
            break;
        }
        f->req[i] = NULL;
        *busy_p = 1;
        if (st != DD_OK) {
            f->lost_home = 1;
            if (a->survive &&
                a->env->job->roles[f->home] == DD_ROLE_AGGREGATOR) {
                return DD_ERR_PEER_LOST; /* survived: dd_agg_pass */
            }
            return dd_agg_chunk_error(a, f, st, "the transfer failed");
        }
        if (i == 2) {
            f->got_reply = 1;
            st = dd_agg_check_reply(a, f);
            if (st != DD_OK) {
                return st;
            }
        }
    }
    if (f->got_reply && f->req[3] == NULL && f->req[0] == NULL &&
        f->req[1] == NULL) {
        a->inflight_bytes -= f->inflight;
        a->home_grown += f->inflight;
        f->inflight = 0;
        *done_p = 1;
        if (f->msg->sparse) {
            return dd_agg_land_sparse(a, f);
        }
        dd_agg_copy_finite(buf + f->push.offset * esize, f->staging,
                           f->push.count, f->msg->dtype, f->msg->result_bad);
    }
    return DD_OK;
}

/* The homes of the chunks still in flight, for a timeout's message. */
static void dd_agg_pending_homes(dd_agg_t *a, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        const dd_agg_flight_t *f = &a->flight[i];
        char me[16];
        snprintf(me, sizeof(me), "%d", f->home);
        if (!f->busy || strstr(buf, me) != NULL || o + 16 > size) {
            continue;
        }
        o +=
            (size_t)snprintf(buf + o, size - o, "%s%d", o ? ", " : "", f->home);
    }
}

/* Frees p, or keeps it until the client is freed when pinned. */
static void dd_agg_bury(dd_agg_t *a, void *p, int pinned);

/* Cancels every chunk in flight. A result's receive canceled once its data
 * began to arrive still lands (UCP cannot cancel a matched receive; Gloo's
 * pair keeps a posted one): its staging is kept until the client is freed
 * and the flight's next chunk lands in a new one, never under late bytes
 * or in memory freed by growing it. */
static void dd_agg_abandon(dd_agg_t *a)
{
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        dd_agg_flight_t *f = &a->flight[i];
        if (f->req[3] != NULL && f->staging != NULL) {
            dd_agg_bury(a, f->staging, 1);
            f->staging = NULL;
            f->staging_size = 0;
        }
        for (int j = 0; j < 4; j++) {
            dd_agg_cancel(&a->t, a->flight[i].req[j]);
            a->flight[i].req[j] = NULL;
        }
        a->flight[i].busy = 0;
    }
    a->inflight_bytes = 0;
}

/* ---- DREAMDDP_AGG_LOSS=survive ----
 *
 * A lost aggregator (declared in the store by the store's host when its
 * process dies, by a worker's watch when its heartbeat stands still, or
 * here when a transfer with it fails) starts a round: every worker
 * abandons what is in flight and publishes how far it got (messages
 * started and ended, chunks numbered, the aggregators it knows lost).
 * Once every worker has, all take the same decisions from the same rows:
 * the lost set is their union; the homes are rebuilt over the aggregators
 * left (the workers' own homes when none is); numbering goes on from the
 * highest; and every message some worker has not ended is redone whole,
 * from the workers' copies, in the order started, by the workers that
 * ended it too (a ghost: its answer is dropped). So every average is what
 * an uninterrupted run over the new homes computes (a home sums in worker
 * order whoever it is), and none is summed twice into a buffer or
 * dropped. The aggregators left learn the new numbering from a RESET on
 * each worker's header stream, after which a late push of an abandoned
 * chunk is dropped; the RESET names its round, whose rows the aggregator
 * reads back from the store before it believes it.
 */

static size_t dd_agg_per(const dd_agg_t *a, size_t esize, double wire_per_el);
static dd_status_t dd_agg_sparse_layout(dd_agg_msg_t *m,
                                        const dd_agg_sparse_msg_t *sp);
static void dd_agg_msg_release(dd_agg_t *a, dd_agg_msg_t *m);
static void dd_agg_abandon(dd_agg_t *a);
static dd_status_t dd_agg_pass(dd_agg_t *a, int *busy_p);

/* A buffer of at least bytes for a message's copy: a spare one when one
 * is large enough, else a new one. */
static void *dd_agg_copy_buffer(dd_agg_t *a, size_t bytes)
{
    for (int i = 0; i < DD_AGG_ALL_MSGS; i++) {
        if (a->spare[i] != NULL && a->spare_size[i] >= bytes) {
            void *p = a->spare[i];
            a->spare[i] = NULL;
            return p;
        }
    }
    size_t *size = malloc(sizeof(size_t) + bytes);
    if (size == NULL) {
        return NULL;
    }
    *size = bytes;
    return size + 1;
}

/* A message's copy is done with: a spare for the next, unless pinned. */
static void dd_agg_copy_done(dd_agg_t *a, void *p, int pinned)
{
    if (p == NULL) {
        return;
    }
    size_t *size = (size_t *)p - 1;
    if (pinned) {
        dd_agg_bury(a, size, 1);
        return;
    }
    int at = -1;
    for (int i = 0; i < DD_AGG_ALL_MSGS && at < 0; i++) {
        at = a->spare[i] == NULL ? i : -1;
    }
    if (at < 0) { /* full: the smallest gives way */
        at = 0;
        for (int i = 1; i < DD_AGG_ALL_MSGS; i++) {
            at = a->spare_size[i] < a->spare_size[at] ? i : at;
        }
        if (a->spare_size[at] >= *size) {
            free(size);
            return;
        }
        free((size_t *)a->spare[at] - 1);
    }
    a->spare[at] = p;
    a->spare_size[at] = *size;
}

static void dd_agg_bury(dd_agg_t *a, void *p, int pinned)
{
    void **grave;
    if (p != NULL && pinned &&
        (grave = realloc(a->grave, (a->n_grave + 1) * sizeof(void *)))) {
        a->grave = grave;
        a->grave[a->n_grave++] = p;
        return;
    }
    free(p); /* not pinned (or no memory to keep it: freed as before) */
}

static int dd_agg_is_aggregator(const dd_agg_t *a, int rank)
{
    return a->env->job->roles[rank] == DD_ROLE_AGGREGATOR;
}

/* Whether the store names an aggregator lost that the workers have not
 * yet agreed on. */
static int dd_agg_news(const dd_agg_t *a)
{
    const dd_job_t *job = a->env->job;
    for (int r = 0; r < job->world_size; r++) {
        if (dd_agg_is_aggregator(a, r) && !a->lost[r] &&
            dd_agg_is_lost(job->store, r)) {
            return 1;
        }
    }
    return 0;
}

/* Abandons what is in flight and publishes this worker's row. */
static dd_status_t dd_agg_round_begin(dd_agg_t *a)
{
    const dd_job_t *job = a->env->job;
    size_t len = sizeof(dd_agg_row_t) + (size_t)job->world_size;
    unsigned char *row = calloc(1, len);
    dd_agg_row_t head = {a->started, a->ended, a->next_seq};
    char key[64];

    if (row == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                        "no memory for a recovery row");
    }
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        dd_agg_flight_t *f = &a->flight[i];
        if (f->busy && !f->is_local && f->req[1] != NULL &&
            dd_agg_is_aggregator(a, f->home)) {
            f->msg->pinned = 1;
        }
    }
    dd_agg_abandon(a);
    dd_agg_server_reset(a->server, a->next_seq);
    for (int q = 0; q < a->n_queued; q++) {
        dd_agg_msg_t *m = a->queue[q];
        m->next = m->done = 0;
        if (m->input != NULL && m->copied < m->count) {
            /* Never launched, so never landed: still the input in buf. */
            dd_agg_copy_in(m, m->count);
        }
    }
    memcpy(row, &head, sizeof(head));
    for (int r = 0; r < job->world_size; r++) {
        row[sizeof(head) + (size_t)r] =
            a->lost[r] ||
            (dd_agg_is_aggregator(a, r) && dd_agg_is_lost(job->store, r));
    }
    a->in_round = 1;
    a->round_since = dd_time_now();
    a->round_poll = 0;
    dd_agg_round_key(a->round + 1, dd_job_worker_index(job, job->rank), key,
                     sizeof(key));
    dd_status_t st = dd_store_set(job->store, key, row, len);
    free(row);
    if (st == DD_OK) {
        dd_agg_round_key(a->round + 1, -1, key, sizeof(key));
        st = dd_store_add(job->store, key, 1, NULL);
    }
    return st;
}

/* The lost aggregators' ranks and why, for the log line. */
static void dd_agg_lost_names(const dd_agg_t *a, const unsigned char *was,
                              char *out, size_t size)
{
    const dd_job_t *job = a->env->job;
    size_t o = 0;

    out[0] = '\0';
    for (int r = 0; r < job->world_size && o + 8 < size; r++) {
        if (!a->lost[r] || was[r]) {
            continue;
        }
        char key[64];
        void *why = NULL;
        size_t len = 0;
        snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d/why", r);
        if (dd_store_get_within(job->store, key, 1.0, &why, &len) != DD_OK) {
            why = NULL;
            len = 0;
        }
        int n = snprintf(out + o, size - o, "%s%.*s", o ? "; " : "", (int)len,
                         why ? (char *)why : "");
        if (len == 0) {
            n = snprintf(out + o, size - o, "%srank %d was lost", o ? "; " : "",
                         r);
        }
        o += n > 0 ? (size_t)n : 0;
        free(why);
    }
}

/* A message cut anew for the homes there are now, from its first piece. */
static dd_status_t dd_agg_recut(dd_agg_t *a, dd_agg_msg_t *m)
{
    size_t esize = dd_dtype_size(m->dtype);

    m->next = m->done = 0;
    m->end_seq = 0;
    m->per = dd_agg_per(a, esize, m->sparse ? m->wire_per_el : (double)esize);
    m->n_chunks = (m->count + m->per - 1) / m->per;
    if (!m->sparse) {
        return DD_OK;
    }
    dd_agg_bury(a, m->pieces, m->pinned);
    free(m->pair_off);
    m->pieces = NULL;
    m->pair_off = NULL;
    dd_agg_sparse_msg_t sp = {.count = m->count,
                              .nnz = m->nnz,
                              .index = m->s_index,
                              .value = m->s_value};
    return dd_agg_sparse_layout(m, &sp);
}

/* A message this worker ended, back from the kept ones, to push again. */
static dd_status_t dd_agg_ghost(dd_agg_t *a, uint64_t no)
{
    dd_agg_msg_t *k = &a->kept[no % DD_AGG_KEEP], *m = NULL;

    if (!k->in_use || k->no != no) {
        return dd_error(DD_ERR_INTERNAL, DD_SUBSYS_AGG,
                        "a lost aggregator: message %llu, which another "
                        "worker redoes, is no longer held here",
                        (unsigned long long)no);
    }
    for (int i = 0; i < DD_AGG_ALL_MSGS && m == NULL; i++) {
        m = a->msg[i].in_use ? NULL : &a->msg[i];
    }
    size_t bytes = k->count * dd_dtype_size(k->dtype);
    void *scratch = m != NULL ? malloc(bytes ? bytes : 1) : NULL;
    if (scratch == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                        "no memory to redo message %llu",
                        (unsigned long long)no);
    }
    *m = *k;
    memset(k, 0, sizeof(*k));
    m->ghost = 1;
    m->buf = scratch;
    m->out = m->sparse ? scratch : NULL;
    m->wire_bytes_p = NULL;
    m->pieces = NULL;
    m->pair_off = NULL;
    a->queue[a->n_queued++] = m;
    return DD_OK;
}

/* Tells the aggregators left where numbering goes on, after the round
 * (a->round + 1) whose record in the store they check it against. */
static void dd_agg_send_resets(dd_agg_t *a)
{
    a->reset_hdr = (dd_agg_hdr_t){.magic = DD_AGG_MAGIC,
                                  .version = DD_AGG_VERSION,
                                  .kind = DD_AGG_RESET,
                                  .token = a->t.token,
                                  .seq = a->next_seq,
                                  .step = (uint64_t)a->round + 1,
                                  .sender = a->env->job->rank};
    for (int h = 0; h < a->k; h++) {
        int i = 0;
        while (i < DD_AGG_WINDOW && a->reset_req[i] != NULL) {
            i++;
        }
        if (i == DD_AGG_WINDOW ||
            dd_agg_send(&a->t, a->home_rank[h], dd_agg_tag(DD_AGG_TAG_HDR, 0),
                        &a->reset_hdr, sizeof(a->reset_hdr),
                        &a->reset_req[i]) != DD_OK) {
            dd_log_warn(DD_SUBSYS_AGG,
                        "cannot tell aggregator rank %d of "
                        "the new numbering",
                        a->home_rank[h]);
        }
    }
}

static int dd_agg_by_no(const void *x, const void *y)
{
    const dd_agg_msg_t *m = *(dd_agg_msg_t *const *)x;
    const dd_agg_msg_t *n = *(dd_agg_msg_t *const *)y;
    return m->no < n->no ? -1 : m->no > n->no;
}

/* Every row is in: the same decisions on every worker. */
static dd_status_t dd_agg_round_end(dd_agg_t *a)
{
    const dd_job_t *job = a->env->job;
    size_t len = sizeof(dd_agg_row_t) + (size_t)job->world_size;
    uint64_t floor_ended = UINT64_MAX, next_seq = 0;
    unsigned char *was = malloc((size_t)job->world_size);
    dd_status_t st = was != NULL ? DD_OK : DD_ERR_NO_MEMORY;

    if (was != NULL) {
        memcpy(was, a->lost, (size_t)job->world_size);
    }
    for (int w = 0; st == DD_OK && w < a->n; w++) {
        char key[64];
        void *v = NULL;
        size_t vlen = 0;
        dd_agg_row_t head;
        dd_agg_round_key(a->round + 1, w, key, sizeof(key));
        st = dd_store_get(job->store, key, &v, &vlen);
        if (st == DD_OK && vlen != len) {
            st = dd_error(DD_ERR_MISMATCH, DD_SUBSYS_AGG,
                          "a lost aggregator: worker %d's recovery row has "
                          "%zu bytes, not %zu",
                          w, vlen, len);
        }
        if (st == DD_OK) {
            memcpy(&head, v, sizeof(head));
            floor_ended = head.ended < floor_ended ? head.ended : floor_ended;
            next_seq = head.next_seq > next_seq ? head.next_seq : next_seq;
            for (int r = 0; r < job->world_size; r++) {
                a->lost[r] |= ((unsigned char *)v)[sizeof(head) + (size_t)r];
            }
        }
        free(v);
    }
    if (st == DD_OK && floor_ended + DD_AGG_KEEP < a->ended) {
        st = dd_error(DD_ERR_INTERNAL, DD_SUBSYS_AGG,
                      "a lost aggregator: a worker is %llu messages behind",
                      (unsigned long long)(a->ended - floor_ended));
    }
    if (st == DD_OK) {
        st = dd_agg_homes(a);
    }
    int ghosts = 0;
    for (uint64_t no = floor_ended; st == DD_OK && no < a->ended; no++) {
        st = dd_agg_ghost(a, no);
        ghosts++;
    }
    if (st != DD_OK) {
        free(was);
        return st;
    }
    a->next_seq = next_seq;
    dd_agg_server_reset(a->server, next_seq);
    qsort(a->queue, (size_t)a->n_queued, sizeof(a->queue[0]), dd_agg_by_no);
    for (int q = 0; st == DD_OK && q < a->n_queued; q++) {
        st = dd_agg_recut(a, a->queue[q]);
    }
    dd_agg_send_resets(a);
    a->round++;
    a->in_round = 0;
    char names[768];
    dd_agg_lost_names(a, was, names, sizeof(names));
    free(was);
    dd_log_warn(DD_SUBSYS_AGG,
                "%s: the workers go on without it (round %d, %.2f s after "
                "it began here, at step %llu): %d message(s) redone from "
                "the workers' copies (%d this worker had ended); now %d "
                "aggregator(s) and %d workers sum, %.0f %% of the bytes by "
                "aggregators",
                names[0] ? names : "an aggregator was lost", a->round,
                dd_time_now() - a->round_since,
                (unsigned long long)a->last_step, a->n_queued, ghosts, a->k,
                a->n, 100 * dd_agg_share(a->n, a->k));
    pthread_mutex_lock(&a->event_lock);
    snprintf(a->event, sizeof(a->event),
             "aggregator lost (round %d): %d message(s) redone, now %d "
             "aggregator(s)",
             a->round, a->n_queued, a->k);
    a->event_at = dd_time_now();
    pthread_mutex_unlock(&a->event_lock);
    return st;
}

/* Waits for every worker's row without stopping the caller. */
static dd_status_t dd_agg_round_poll(dd_agg_t *a)
{
    const dd_job_t *job = a->env->job;
    double now = dd_time_now();
    int64_t n = 0;
    char key[64];

    if (now - a->round_poll < 1e-3) {
        return DD_INPROGRESS;
    }
    a->round_poll = now;
    if (dd_abort_raised(job->abort)) {
        return dd_abort_error(job->abort, DD_SUBSYS_AGG);
    }
    dd_agg_round_key(a->round + 1, -1, key, sizeof(key));
    dd_status_t st = dd_store_add(job->store, key, 0, &n);
    if (st != DD_OK) {
        return st;
    }
    if (n >= a->n) {
        return dd_agg_round_end(a);
    }
    if (now - a->round_since > job->timeout_s) {
        return dd_error(DD_ERR_TIMED_OUT, DD_SUBSYS_AGG,
                        "a lost aggregator: %lld of %d workers joined the "
                        "recovery within %.0f s (DREAMDDP_TIMEOUT_S)",
                        (long long)n, a->n, job->timeout_s);
    }
    return DD_INPROGRESS;
}

/* A transfer with aggregator rank failed: it is lost. */
static dd_status_t dd_agg_home_lost(dd_agg_t *a, int rank)
{
    char why[160], key[64];
    int expendable = 0;
    snprintf(key, sizeof(key), DD_STORE_EXPENDABLE_KEY "%d", rank);
    if (dd_store_check(a->env->job->store, key, &expendable) != DD_OK ||
        !expendable) {
        /* It never began serving: the job stops, as for any peer. */
        return dd_error(DD_ERR_PEER_LOST, DD_SUBSYS_AGG,
                        "aggregator rank %d was lost before it began serving",
                        rank);
    }
    snprintf(why, sizeof(why),
             "aggregator rank %d was lost: a transfer of worker rank %d with "
             "it failed",
             rank, a->env->job->rank);
    dd_agg_declare_lost(a->env->job->store, rank, why);
    return dd_agg_round_begin(a);
}

/* Progresses the RESETs and the round; DD_INPROGRESS while in one. */
static dd_status_t dd_agg_survive(dd_agg_t *a, int *busy_p)
{
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        if (a->reset_req[i] != NULL &&
            dd_agg_test(&a->t, a->reset_req[i]) != DD_INPROGRESS) {
            a->reset_req[i] = NULL;
        }
    }
    if (a->in_round) {
        return dd_agg_round_poll(a);
    }
    int64_t downs = __atomic_load_n(&a->env->downs, __ATOMIC_ACQUIRE);
    if (downs != a->downs_seen) {
        a->downs_seen = downs;
        if (dd_agg_news(a)) {
            *busy_p = 1;
            dd_status_t st = dd_agg_round_begin(a);
            return st == DD_OK ? DD_INPROGRESS : st;
        }
    }
    return DD_OK;
}

/* Ghosts whose every piece is back are dropped (their copy kept). */
static void dd_agg_end_ghosts(dd_agg_t *a)
{
    for (int q = 0; q < a->n_queued; q++) {
        dd_agg_msg_t *m = a->queue[q];
        if (m->ghost && m->next == m->n_chunks && m->done == m->n_chunks &&
            dd_agg_server_idle(a->server, m->end_seq)) {
            dd_agg_msg_release(a, m);
            q--;
        }
    }
}

/* A message's copy, kept after it ends in case another worker must redo
 * it; the newest DD_AGG_KEEP are. */
static void dd_agg_keep(dd_agg_t *a, dd_agg_msg_t *m)
{
    dd_agg_msg_t *k = &a->kept[m->no % DD_AGG_KEEP];

    if (m->input == NULL && m->s_index == NULL) {
        return;
    }
    if (k->in_use && k->no > m->no) {
        dd_agg_copy_done(a, m->input, m->pinned);
        free(m->s_index);
        free(m->s_value);
    } else {
        dd_agg_copy_done(a, k->input, k->pinned);
        free(k->s_index);
        free(k->s_value);
        *k = *m;
        k->in_use = 1;
        k->ghost = 0;
        k->buf = NULL;
        k->out = NULL;
        k->pieces = NULL;
        k->pair_off = NULL;
    }
    m->input = NULL;
    m->s_index = NULL;
    m->s_value = NULL;
}

/* Before goodbye: no worker leaves while another may still need it to
 * redo a message. Each says it has nothing left in round g; once all
 * have, no round can need them. */
static void dd_agg_settle(dd_agg_t *a)
{
    const dd_job_t *job = a->env->job;
    double deadline = dd_time_now() + job->timeout_s;
    int said = -1;
    char key[64];

    while (a->survive && a->failed == DD_OK && !dd_abort_raised(job->abort) &&
           dd_time_now() < deadline) {
        int64_t n = 0;
        int busy = 0;
        snprintf(key, sizeof(key), "dd/agg/settled/%d", a->round);
        if (!a->in_round && a->n_queued == 0 && said != a->round) {
            if (dd_store_add(job->store, key, 1, NULL) != DD_OK) {
                return;
            }
            said = a->round;
        }
        if (said == a->round &&
            (dd_store_add(job->store, key, 0, &n) != DD_OK || n >= a->n)) {
            return;
        }
        if (dd_agg_pass(a, &busy) != DD_OK) {
            return;
        }
        if (!busy) {
            usleep(500);
        }
    }
}

/* Bytes this worker pushed to home rank whose answer has not begun to come
 * back. */
static size_t dd_agg_at_home(const dd_agg_t *a, int rank)
{
    size_t bytes = 0;
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        const dd_agg_flight_t *f = &a->flight[i];
        if (f->busy && !f->is_local && !f->got_reply && f->home == rank) {
            bytes += f->inflight;
        }
    }
    return bytes;
}

static size_t dd_agg_home_budget(const dd_agg_t *a)
{
    return DD_AGG_HOME_BUDGET / (size_t)(a->n > 0 ? a->n : 1) + a->home_grown;
}

/* Whether piece c of m waits: its home already holds this worker's budget
 * (one piece always goes). Picks are deterministic and made in order, so
 * a piece that waits holds back the later ones and every worker still
 * numbers its pieces alike. */
static int dd_agg_home_full(const dd_agg_t *a, const dd_agg_msg_t *m, size_t c)
{
    size_t cost = dd_agg_piece_cost(m, c);
    int h = dd_agg_next_home(a->weight, a->load, a->n_homes, cost);
    if (h < 0 || a->home_rank[h] == a->env->job->rank) {
        return 0;
    }
    size_t held = dd_agg_at_home(a, a->home_rank[h]);
    return held > 0 && held + cost > dd_agg_home_budget(a);
}

/* One pass: the pieces in flight, then new ones while the window allows,
 * from the messages in the order they started, then this worker's home.
 * Under DREAMDDP_AGG_LOSS=survive a lost aggregator starts a round of
 * recovery first (dd_agg_survive, above), during which nothing moves. */
static dd_status_t dd_agg_pass(dd_agg_t *a, int *busy_p)
{
    dd_status_t status = DD_OK;
    size_t window = DD_AGG_WINDOW_CHUNKS * a->chunk_bytes;
    int busy = 0, f_next = 0;

    *busy_p = 0;
    if (a->survive && (status = dd_agg_survive(a, busy_p)) != DD_OK) {
        return status == DD_INPROGRESS ? DD_OK : status;
    }
    dd_agg_progress(&a->t); /* once: the flights are only looked at */
    for (int i = 0; i < DD_AGG_WINDOW && status == DD_OK; i++) {
        dd_agg_flight_t *f = &a->flight[i];
        int done = 0;
        if (f->busy) {
            status = dd_agg_poll(a, f, &done, &busy);
        }
        if (status != DD_OK && a->survive && f->lost_home &&
            a->env->job->roles[f->home] == DD_ROLE_AGGREGATOR) {
            *busy_p = 1;
            return dd_agg_home_lost(a, f->home);
        }
        if (done) {
            f->busy = 0;
            f->msg->done++;
        }
    }
    if (a->survive) {
        dd_agg_end_ghosts(a);
    }
    for (int q = 0; q < a->n_queued && status == DD_OK; q++) {
        dd_agg_msg_t *m = a->queue[q];
        size_t piece = m->sparse ? (size_t)((double)m->per * m->wire_per_el)
                                 : m->per * dd_dtype_size(m->dtype);
        while (m->next < m->n_chunks && status == DD_OK) {
            while (f_next < DD_AGG_WINDOW && a->flight[f_next].busy) {
                f_next++;
            }
            if (f_next == DD_AGG_WINDOW || a->inflight_bytes + piece > window ||
                dd_agg_home_full(a, m, m->next)) {
                goto launched; /* later pieces wait their turn */
            }
            dd_agg_flight_t *f = &a->flight[f_next];
            if (a->inflight_bytes == 0) {
                a->home_grown = 0; /* idle: the next pushes start a burst */
            }
            status = dd_agg_launch(a, f, m, m->next++);
            busy = 1;
            if (status != DD_OK && a->survive && f->busy && !f->is_local &&
                dd_agg_is_aggregator(a, f->home)) {
                *busy_p = 1;
                return dd_agg_home_lost(a, f->home);
            }
            if (m->next == m->n_chunks) {
                m->end_seq = a->next_seq;
            }
        }
    }
launched:
    if (status == DD_OK) {
        int served = 0;
        dd_agg_server_progress(a->server, &served);
        busy |= served;
    }
    *busy_p = busy;
    return status;
}

static void dd_agg_goodbye(dd_agg_t *a, dd_status_t status, const char *why);

/* After a failed sync the workers no longer agree on what comes next: the
 * aggregators are told, so that they stop instead of waiting. */
static dd_status_t dd_agg_give_up(dd_agg_t *a, dd_status_t status)
{
    char why[DD_AGG_WHY];
    snprintf(why, sizeof(why), "%s", dd_last_error());
    dd_agg_abandon(a);
    dd_agg_goodbye(a, status, why);
    dd_last_error_set(why);
    return status;
}

/* A free message, after the checks every start makes. */
static dd_status_t dd_agg_msg_open(dd_agg_t *a, dd_agg_msg_t **m_p)
{
    if (a->failed != DD_OK) {
        return dd_error(DD_ERR_CANCELED, DD_SUBSYS_AGG,
                        "an earlier sync through the aggregators failed");
    }
    int live = 0;
    dd_agg_msg_t *free_msg = NULL;
    for (int i = 0; i < DD_AGG_ALL_MSGS; i++) {
        if (!a->msg[i].in_use) {
            free_msg = free_msg != NULL ? free_msg : &a->msg[i];
        } else {
            live += !a->msg[i].ghost;
        }
    }
    if (live < DD_AGG_MSGS && free_msg != NULL) {
        *m_p = free_msg;
        return DD_OK;
    }
    return dd_error(DD_ERR_STATE, DD_SUBSYS_AGG,
                    "more than %d messages started at once", DD_AGG_MSGS);
}

/* Elements per piece: DD_AGG_INCAST / n bytes on the wire, within
 * DD_AGG_LEAST_PIECE and DD_AGG_MAX_PIECE, at most a chunk of esize elements
 * (wire_per_el a dense element). */
static size_t dd_agg_per(const dd_agg_t *a, size_t esize, double wire_per_el)
{
    size_t per = a->chunk_bytes / esize;
    size_t bytes = DD_AGG_INCAST / (size_t)(a->n > 0 ? a->n : 1);
    bytes = bytes < DD_AGG_LEAST_PIECE ? DD_AGG_LEAST_PIECE
            : bytes > DD_AGG_MAX_PIECE ? DD_AGG_MAX_PIECE
                                       : bytes;
    double el = (double)bytes / wire_per_el;
    if (el < (double)per) {
        per = (size_t)el;
    }
    return per > 0 ? per : 1;
}

static void dd_agg_msg_queue(dd_agg_t *a, dd_agg_msg_t *m)
{
    if (a->n_queued == 0) {
        a->idle_since = dd_time_now();
    }
    m->no = a->started++;
    a->last_step = m->id.step;
    a->queue[a->n_queued++] = m;
}

dd_status_t dd_agg_msg_start(dd_agg_t *a, const dd_agg_id_t *id, void *buf,
                             size_t count, dd_dtype_t dtype,
                             dd_mem_type_t mem_type, int *input_bad,
                             int *result_bad, void **handle_p)
{
    size_t esize = dd_dtype_size(dtype);
    dd_agg_msg_t *m = NULL;

    if (mem_type != DD_MEM_HOST || !dd_agg_dtype_ok(dtype)) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_AGG,
                        "aggregators sum f32, f64, f16 and bf16 host "
                        "buffers, not %s %s memory",
                        dd_dtype_name(dtype), dd_mem_type_name(mem_type));
    }
    dd_status_t st = dd_agg_msg_open(a, &m);
    if (st != DD_OK) {
        return st;
    }
    size_t per = dd_agg_per(a, esize, (double)esize);
    void *input = NULL;
    if (a->survive) {
        /* The copy a lost aggregator's chunks are redone from. */
        if ((input = dd_agg_copy_buffer(a, count * esize)) == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                            "no memory for the %zu-byte copy of a message",
                            count * esize);
        }
    }
    *m = (dd_agg_msg_t){.in_use = 1,
                        .id = *id,
                        .buf = buf,
                        .count = count,
                        .dtype = dtype,
                        .per = per,
                        .n_chunks = (count + per - 1) / per,
                        .input = input,
                        .input_bad = input_bad,
                        .result_bad = result_bad};
    dd_agg_msg_queue(a, m);
    *handle_p = m;
    return DD_OK;
}

/* Lays the pairs out piece by piece: offsets in the chunk, then values. */
static dd_status_t dd_agg_sparse_layout(dd_agg_msg_t *m,
                                        const dd_agg_sparse_msg_t *sp)
{
    m->pair_off = calloc(m->n_chunks + 1, sizeof(size_t));
    m->pieces = malloc(sp->nnz * 2 * sizeof(uint32_t) + 1);
    if (m->pair_off == NULL || m->pieces == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                        "no memory for %zu sparse pairs", sp->nnz);
    }
    for (size_t j = 0, c = 0; c < m->n_chunks; c++) {
        size_t start = j, end = (c + 1) * m->per;
        while (j < sp->nnz && sp->index[j] < end) {
            j++;
        }
        uint32_t *idx = (uint32_t *)m->pieces + 2 * start;
        float *val = (float *)(idx + (j - start));
        for (size_t q = start; q < j; q++) {
            idx[q - start] = (uint32_t)(sp->index[q] - c * m->per);
            val[q - start] = sp->value[q];
        }
        m->pair_off[c + 1] = j;
    }
    return DD_OK;
}

dd_status_t dd_agg_sparse_start(dd_agg_t *a, const dd_agg_id_t *id,
                                const dd_agg_sparse_msg_t *sp, void **handle_p)
{
    dd_agg_msg_t *m = NULL;

    for (size_t j = 0; j < sp->nnz; j++) {
        if (sp->index[j] >= sp->count ||
            (j > 0 && sp->index[j] <= sp->index[j - 1])) {
            return dd_error(DD_ERR_INTERNAL, DD_SUBSYS_AGG,
                            "sparse pair %zu of %zu: index %zu is out of "
                            "order or past the message's %zu elements",
                            j, sp->nnz, sp->index[j], sp->count);
        }
    }
    dd_status_t st = dd_agg_msg_open(a, &m);
    if (st != DD_OK) {
        return st;
    }
    double wire_per_el = sp->count > 0 && sp->wire_estimate > 0
                             ? (double)sp->wire_estimate / (double)sp->count
                             : 1.0;
    size_t per = dd_agg_per(a, sizeof(float), wire_per_el);
    *m = (dd_agg_msg_t){.in_use = 1,
                        .id = *id,
                        .buf = (char *)sp->out,
                        .count = sp->count,
                        .dtype = DD_DTYPE_F32,
                        .per = per,
                        .n_chunks = (sp->count + per - 1) / per,
                        .sparse = 1,
                        .out = sp->out,
                        .wire_per_el = wire_per_el,
                        .wire_bytes_p = sp->wire_bytes_p};
    if (a->survive) {
        m->nnz = sp->nnz;
        m->s_index = malloc(sp->nnz * sizeof(size_t) + 1);
        m->s_value = malloc(sp->nnz * sizeof(float) + 1);
        if (m->s_index == NULL || m->s_value == NULL) {
            st =
                dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                         "no memory for the copy of %zu sparse pairs", sp->nnz);
        } else {
            memcpy(m->s_index, sp->index, sp->nnz * sizeof(size_t));
            memcpy(m->s_value, sp->value, sp->nnz * sizeof(float));
        }
    }
    if (st != DD_OK || (st = dd_agg_sparse_layout(m, sp)) != DD_OK) {
        free(m->pieces);
        free(m->pair_off);
        free(m->s_index);
        free(m->s_value);
        m->in_use = 0;
        return st;
    }
    dd_agg_msg_queue(a, m);
    *handle_p = m;
    return DD_OK;
}

static void dd_agg_msg_release(dd_agg_t *a, dd_agg_msg_t *m)
{
    int j = 0;
    for (int i = 0; i < a->n_queued; i++) {
        if (a->queue[i] != m) {
            a->queue[j++] = a->queue[i];
        }
    }
    a->n_queued = j;
    m->input_bad = m->result_bad = NULL; /* the job's, which ends here */
    dd_agg_bury(a, m->pieces, m->pinned);
    free(m->pair_off);
    m->pieces = NULL;
    m->pair_off = NULL;
    dd_agg_keep(a, m);
    if (m->ghost) {
        free(m->buf);
        m->buf = NULL;
        m->ghost = 0;
    }
    m->in_use = 0;
}

/* After a failure every message started fails with it. */
static dd_status_t dd_agg_fail(dd_agg_t *a, dd_agg_msg_t *m, dd_status_t status)
{
    if (a->failed == DD_OK) {
        a->failed = status;
        dd_agg_give_up(a, status);
        snprintf(a->why, sizeof(a->why), "%s", dd_last_error());
    } else {
        dd_last_error_set(a->why);
    }
    dd_agg_msg_release(a, m);
    return a->failed;
}

dd_status_t dd_agg_test_msg(dd_agg_t *a, void *handle, int *busy_p)
{
    dd_agg_msg_t *m = handle;
    int busy = 0;

    *busy_p = 0;
    if (a->failed != DD_OK) {
        return dd_agg_fail(a, m, a->failed);
    }
    if (dd_abort_raised(a->env->job->abort)) {
        return dd_agg_fail(a, m,
                           dd_abort_error(a->env->job->abort, DD_SUBSYS_AGG));
    }
    dd_status_t status = dd_agg_pass(a, &busy);
    if (status != DD_OK) {
        return dd_agg_fail(a, m, status);
    }
    *busy_p = busy;
    if (m->done == m->n_chunks && m->next == m->n_chunks && !a->in_round &&
        dd_agg_server_idle(a->server, m->end_seq)) {
        a->ended++;
        dd_agg_msg_release(a, m);
        return DD_OK;
    }
    if (busy) {
        a->idle_since = dd_time_now();
    } else if (dd_time_now() - a->idle_since > a->env->job->timeout_s) {
        char homes[128];
        dd_agg_pending_homes(a, homes, sizeof(homes));
        dd_error(DD_ERR_TIMED_OUT, DD_SUBSYS_AGG,
                 "no aggregation progress for %.0f s (DREAMDDP_TIMEOUT_S): "
                 "%zu of %zu chunks done; home rank(s) %s never "
                 "answered",
                 a->env->job->timeout_s, m->done, m->n_chunks, homes);
        return dd_agg_fail(a, m, DD_ERR_TIMED_OUT);
    }
    return DD_INPROGRESS;
}

/* Goodbye to every aggregator, so that their serve loops end; with an
 * error, it tells them this worker gave up and why. */
static void dd_agg_goodbye(dd_agg_t *a, dd_status_t status, const char *why)
{
    dd_agg_hdr_t bye = {.magic = DD_AGG_MAGIC,
                        .version = DD_AGG_VERSION,
                        .kind = DD_AGG_BYE,
                        .token = a->t.token,
                        .sender = a->env->job->rank,
                        .status = status};

    if (a->said_goodbye) {
        return;
    }
    a->said_goodbye = 1;
    snprintf(bye.why, sizeof(bye.why), "%s", why);
    for (int h = 0; a->home_rank != NULL && a->t.ops != NULL && h < a->k; h++) {
        dd_agg_req_t *req = NULL;
        if (a->env->survive &&
            dd_agg_is_lost(a->env->job->store, a->home_rank[h])) {
            continue; /* nobody there to wait for it */
        }
        if (dd_agg_send(&a->t, a->home_rank[h], dd_agg_tag(DD_AGG_TAG_HDR, 0),
                        &bye, sizeof(bye), &req) != DD_OK) {
            continue;
        }
        double deadline = dd_time_now() + a->env->job->timeout_s;
        while (dd_agg_test(&a->t, req) == DD_INPROGRESS) {
            /* After a lost peer nobody waits for the goodbye. */
            if (dd_time_now() > deadline ||
                dd_abort_raised(a->env->job->abort)) {
                dd_agg_cancel(&a->t, req);
                break;
            }
            usleep(100);
        }
    }
}

void dd_agg_goodbye_all(const dd_agg_env_t *env)
{
    dd_agg_t a = {.env = env,
                  .n = env->job->n_workers,
                  .k = dd_job_n_aggregators(env->job)};
    int h = 0;

    /* A worker outside the job the aggregators serve (a local peer of the
     * hierarchical route) never pushed, and nobody waits for its goodbye. */
    if (dd_job_worker_index(env->job, env->job->rank) < 0 ||
        dd_agg_transport_init(env, &a.t) != DD_OK) {
        return;
    }
    a.home_rank = calloc((size_t)a.k, sizeof(int));
    for (int r = 0; a.home_rank != NULL && r < env->job->world_size; r++) {
        if (env->job->roles[r] == DD_ROLE_AGGREGATOR) {
            a.home_rank[h++] = r;
        }
    }
    dd_agg_goodbye(&a, DD_OK, "");
    free(a.home_rank);
}

void dd_agg_destroy(dd_agg_t *a)
{
    if (a == NULL) {
        return;
    }
    dd_agg_settle(a);
    dd_agg_goodbye(a, DD_OK, "");
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        dd_agg_cancel(&a->t, a->reset_req[i]);
    }
    dd_agg_server_destroy(a->server);
    for (int i = 0; i < DD_AGG_ALL_MSGS; i++) {
        if (a->msg[i].in_use) {
            dd_agg_msg_release(a, &a->msg[i]);
        }
    }
    for (int i = 0; i < DD_AGG_KEEP; i++) {
        dd_agg_copy_done(a, a->kept[i].input, a->kept[i].pinned);
        free(a->kept[i].s_index);
        free(a->kept[i].s_value);
    }
    for (int i = 0; i < DD_AGG_ALL_MSGS; i++) {
        free(a->spare[i] != NULL ? (size_t *)a->spare[i] - 1 : NULL);
    }
    for (size_t i = 0; i < a->n_grave; i++) {
        free(a->grave[i]);
    }
    free(a->grave);
    free(a->lost);
    pthread_mutex_destroy(&a->event_lock);
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        free(a->flight[i].staging);
        free(a->flight[i].dense);
    }
    free(a->home_rank);
    free(a->weight);
    free(a->load);
    free(a);
}
