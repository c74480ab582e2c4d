/*
 * The worker's side of aggregation: cuts a message into chunks, gives each
 * its home (the same choice on every worker), pushes the chunks homed
 * elsewhere and pulls their averages back, serving its own home's share
 * meanwhile. Pushes of later chunks go out while earlier averages come
 * back, so both directions of the link stay busy; a window bounds the
 * chunks in flight and the staging memory. An average is written in place
 * only after its header has been checked.
 */
#include "agg/wire.h"
#include "core/log.h"
#include "core/status.h"
#include "core/time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* In flight at once: at most DD_AGG_WINDOW pieces (wire.h) and
 * DD_AGG_WINDOW_CHUNKS chunks' worth of bytes. More large pieces at once
 * would share the link and all finish late; more small ones keep every home
 * busy. */
#define DD_AGG_WINDOW_CHUNKS 12
/* A message is cut into pieces of at most DREAMDDP_CHUNK_BYTES and, when it is
 * small, into DD_AGG_SPREAD pieces per home, down to DD_AGG_MIN_PIECE
 * bytes: so that it still spreads over every home's link, and a home sends
 * back the average of a piece while the next ones arrive. Measured with
 * ddbench sync, 4 workers and 4 aggregators at 1 Gbit/s: 2 MB in 63 ms as
 * two 1 MiB chunks, 25 ms cut into 16; and in the train simulator
 * (gpt2-blocks, dreamddp:4) 0.44 s per iteration with 4 pieces per home and
 * 12 in flight, 0.40 s with 16 and 24. */
#define DD_AGG_SPREAD 16
#define DD_AGG_MIN_PIECE (64 * 1024)

/* A message being synced: the engine starts at most DD_AGG_MSGS at once,
 * and its pieces are launched in the order the messages started, so that
 * every worker numbers them alike. */
#define DD_AGG_MSGS 2

typedef struct {
    int in_use;
    uint64_t step;
    uint32_t layer;
    char *buf;
    size_t count;
    dd_dtype_t dtype;
    size_t per; /* elements per piece */
    size_t next, n_chunks, done;
    uint64_t end_seq; /* the sequence number after its last piece */
} dd_agg_msg_t;

typedef struct {
    int busy;
    dd_agg_msg_t *msg;
    size_t chunk;
    int home;           /* job rank */
    dd_agg_hdr_t push;  /* the header pushed */
    dd_agg_hdr_t reply; /* the header received */
    void *staging;      /* the average before it is checked */
    size_t staging_size;
    dd_agg_req_t *req[4]; /* push header, push data, result header, data */
    int got_reply;
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
    int n_active;          /* homes with a share of the bytes */
    size_t inflight_bytes; /* pushed and not yet back */
    int said_goodbye;
    dd_status_t failed; /* once a sync failed, every later one fails */
    char why[DD_AGG_WHY];
    double idle_since; /* when anything last moved */
    dd_agg_flight_t flight[DD_AGG_WINDOW];
    dd_agg_msg_t msg[DD_AGG_MSGS];
    dd_agg_msg_t *queue[DD_AGG_MSGS]; /* started, in order */
    int n_queued;
};

static dd_status_t dd_agg_homes(dd_agg_t *a)
{
    const dd_job_t *job = a->env->job;
    double x = dd_agg_share(a->n, a->k);

    a->n_homes = a->k + a->n;
    a->home_rank = calloc((size_t)a->n_homes, sizeof(int));
    a->weight = calloc((size_t)a->n_homes, sizeof(double));
    a->load = calloc((size_t)a->n_homes, sizeof(double));
    if (!a->home_rank || !a->weight || !a->load) {
        return DD_ERR_NO_MEMORY;
    }
    int h = 0;
    for (int r = 0; r < job->world_size; r++) {
        if (job->roles[r] == DD_ROLE_AGGREGATOR) {
            a->home_rank[h] = r;
            a->weight[h++] = x / a->k;
        }
    }
    for (int w = 0; w < a->n; w++) {
        a->home_rank[h] = job->worker_ranks[w];
        a->weight[h++] = (1.0 - x) / a->n;
    }
    a->n_active = x < 1.0 ? a->n_homes : a->k;
    dd_log_info(DD_SUBSYS_AGG,
                "aggregation: %d workers, %d aggregators; %.0f %% of the "
                "bytes summed by aggregators, chunks of %zu bytes",
                a->n, a->k, 100 * x, a->chunk_bytes);
    return DD_OK;
}

dd_status_t dd_agg_create(const dd_agg_env_t *env, dd_agg_t **agg_p)
{
    dd_agg_t *a = calloc(1, sizeof(*a));
    dd_status_t status;

    if (a == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    a->env = env;
    a->n = env->job->n_workers;
    a->k = dd_job_n_aggregators(env->job);
    a->chunk_bytes = env->chunk_bytes;
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

/* Starts chunk c of the message: homed here, or pushed and pulled. */
static dd_status_t dd_agg_launch(dd_agg_t *a, dd_agg_flight_t *f,
                                 dd_agg_msg_t *m, size_t c)
{
    char *buf = m->buf;
    dd_dtype_t dtype = m->dtype;
    size_t esize = dd_dtype_size(dtype);
    size_t per = m->per;
    size_t off = c * per, n = m->count - off < per ? m->count - off : per;
    int h = dd_agg_pick_home(a->weight, a->load, a->n_homes, n * esize);
    dd_agg_hdr_t *p = &f->push;

    memset(f->req, 0, sizeof(f->req));
    memset(p, 0, sizeof(*p));
    *p = (dd_agg_hdr_t){.magic = DD_AGG_MAGIC,
                        .kind = DD_AGG_PUSH,
                        .token = a->t.token,
                        .seq = a->next_seq++,
                        .step = m->step,
                        .layer = m->layer,
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
    f->is_local = f->home == a->env->job->rank;
    if (f->is_local) {
        f->local.hdr = *p;
        f->local.data = buf + off * esize;
        f->local.dest = buf + off * esize;
        return dd_agg_server_local(a->server, &f->local);
    }
    if (f->staging_size < n * esize) {
        void *grown = realloc(f->staging, n * esize);
        if (grown == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_AGG,
                            "no memory for a %zu-byte piece", n * esize);
        }
        f->staging = grown;
        f->staging_size = n * esize;
    }
    a->inflight_bytes += n * esize;
    dd_status_t st;
    if ((st = dd_agg_recv(&a->t, f->home, dd_agg_tag(DD_AGG_TAG_RHDR, p->seq),
                          &f->reply, sizeof(f->reply), &f->req[2])) ||
        (st = dd_agg_recv(&a->t, f->home, dd_agg_tag(DD_AGG_TAG_RDATA, p->seq),
                          f->staging, n * esize, &f->req[3])) ||
        (st = dd_agg_send(&a->t, f->home, dd_agg_tag(DD_AGG_TAG_HDR, 0), p,
                          sizeof(*p), &f->req[0])) ||
        (st = dd_agg_send(&a->t, f->home, dd_agg_tag(DD_AGG_TAG_DATA, p->seq),
                          buf + off * esize, n * esize, &f->req[1]))) {
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

    if (!dd_agg_hdr_valid(&a->t, r, DD_AGG_RESULT, f->home, why, sizeof(why)) ||
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
            return f->local.status == DD_OK
                       ? DD_OK
                       : dd_agg_chunk_error(a, f, f->local.status,
                                            f->local.why);
        }
        return DD_OK;
    }
    /* A flight's requests complete in order (push header, push data, result
     * header, result data), and every test progresses the transport: so
     * only the first one still open is tested. */
    for (int i = 0; i < 4; i++) {
        if (f->req[i] == NULL) {
            continue;
        }
        dd_status_t st = dd_agg_test(&a->t, f->req[i]);
        if (st == DD_INPROGRESS) {
            break;
        }
        f->req[i] = NULL;
        *busy_p = 1;
        if (st != DD_OK) {
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
        memcpy(buf + f->push.offset * esize, f->staging, f->push.count * esize);
        a->inflight_bytes -= f->push.count * esize;
        *done_p = 1;
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

static void dd_agg_abandon(dd_agg_t *a)
{
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        for (int j = 0; j < 4; j++) {
            dd_agg_cancel(&a->t, a->flight[i].req[j]);
            a->flight[i].req[j] = NULL;
        }
        a->flight[i].busy = 0;
    }
    a->inflight_bytes = 0;
}

/* One pass: the pieces in flight, then new ones while the window allows,
 * from the messages in the order they started, then this worker's home. */
static dd_status_t dd_agg_pass(dd_agg_t *a, int *busy_p)
{
    dd_status_t status = DD_OK;
    size_t window = DD_AGG_WINDOW_CHUNKS * a->chunk_bytes;
    int busy = 0, f_next = 0;

    for (int i = 0; i < DD_AGG_WINDOW && status == DD_OK; i++) {
        dd_agg_flight_t *f = &a->flight[i];
        int done = 0;
        if (f->busy) {
            status = dd_agg_poll(a, f, &done, &busy);
        }
        if (done) {
            f->busy = 0;
            f->msg->done++;
        }
    }
    for (int q = 0; q < a->n_queued && status == DD_OK; q++) {
        dd_agg_msg_t *m = a->queue[q];
        size_t piece = m->per * dd_dtype_size(m->dtype);
        while (m->next < m->n_chunks && status == DD_OK) {
            while (f_next < DD_AGG_WINDOW && a->flight[f_next].busy) {
                f_next++;
            }
            if (f_next == DD_AGG_WINDOW || a->inflight_bytes + piece > window) {
                goto launched; /* later pieces wait their turn */
            }
            status = dd_agg_launch(a, &a->flight[f_next], m, m->next++);
            busy = 1;
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

dd_status_t dd_agg_msg_start(dd_agg_t *a, uint64_t step, uint32_t layer,
                             void *buf, size_t count, dd_dtype_t dtype,
                             dd_mem_type_t mem_type, void **handle_p)
{
    size_t esize = dd_dtype_size(dtype);
    dd_agg_msg_t *m = NULL;

    if (mem_type != DD_MEM_HOST || !dd_agg_dtype_ok(dtype)) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_AGG,
                        "aggregators sum f32, f64, f16 and bf16 host "
                        "buffers, not %s %s memory",
                        dd_dtype_name(dtype), dd_mem_type_name(mem_type));
    }
    if (a->failed != DD_OK) {
        return dd_error(DD_ERR_CANCELED, DD_SUBSYS_AGG,
                        "an earlier sync through the aggregators failed");
    }
    for (int i = 0; i < DD_AGG_MSGS && m == NULL; i++) {
        m = a->msg[i].in_use ? NULL : &a->msg[i];
    }
    if (m == NULL) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_AGG,
                        "more than %d messages started at once", DD_AGG_MSGS);
    }
    size_t per = a->chunk_bytes / esize;
    size_t spread = (count + (size_t)(DD_AGG_SPREAD * a->n_active) - 1) /
                    (size_t)(DD_AGG_SPREAD * a->n_active);
    size_t least = DD_AGG_MIN_PIECE / esize;
    if (spread < per) {
        per = spread > least ? spread : least < per ? least : per;
    }
    *m = (dd_agg_msg_t){.in_use = 1,
                        .step = step,
                        .layer = layer,
                        .buf = buf,
                        .count = count,
                        .dtype = dtype,
                        .per = per,
                        .n_chunks = (count + per - 1) / per};
    if (a->n_queued == 0) {
        a->idle_since = dd_time_now();
    }
    a->queue[a->n_queued++] = m;
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
    if (m->done == m->n_chunks && dd_agg_server_idle(a->server, m->end_seq)) {
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
    dd_agg_goodbye(a, DD_OK, "");
    dd_agg_server_destroy(a->server);
    for (int i = 0; i < DD_AGG_WINDOW; i++) {
        free(a->flight[i].staging);
    }
    free(a->home_rank);
    free(a->weight);
    free(a->load);
    free(a);
}
