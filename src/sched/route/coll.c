/*
 * The workers' allreduce route: a job's buffer averaged, or the collective
 * it carries run, over the backends' non-blocking collectives among the
 * workers; and the broadcast of the first worker's buffers (ddp's buffers).
 * Never the public blocking API.
 */
#include "sched/route/coll.h"
#include "core/log.h"
#include "core/ranks.h"
#include "core/reduce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Messages that say what they are. Equal-sized messages of different
 * steps, kinds or jobs would pair up in an allreduce and be summed, so
 * every collective the engine runs among the workers is preceded by a
 * digest of what it is (the step, the kind, the layers, the element
 * count, dtype and operation): 32 bits of its hash and their 32
 * complements, one f32 each, summed across the workers. Every sum must
 * be 0 or the number of workers: then every worker has every bit alike,
 * and the collective that follows on each is the same one. A single
 * difference anywhere makes some sum lie strictly between, and since every
 * worker reads the same sums, every worker fails, before the collective
 * runs. As each worker alternates digest and collective, the first place
 * where two workers' sequences differ is always a digest: a rank that
 * skipped a step or made an extra call is caught there, never summed (a
 * digest that meets another rank's data sees values not 0 and 1, and the
 * complements make a constant fail too). The cost is one allreduce of 256
 * bytes per collective, a latency and no copy, with no change to the data
 * messages; the aggregators' route has headers of its own. On a
 * mismatch, each worker writes what it was about to run to the store and
 * reads the others', so that the message names the ranks and their steps.
 *
 * Two collectives are in flight at once (the pipe's depth), and the
 * backends pair operations by the order they are posted in, so that order
 * must be the same on every worker: a digest is posted only while no
 * other digest is on the wire. The k-th collective's digest then always
 * follows the (k-1)-th collective itself, on every worker, and still runs
 * while that one's data drains.
 *
 * Foreseen collectives. A digest that waits for its sum before the data
 * leaves costs a round of small messages on the critical path, where it
 * meets the collective at the end of backward (ddp's last bucket): 6 ms an
 * iteration at 4 workers and 16 at 16 on the emulated cluster. So each
 * digest also carries what its worker foresees as the next collective:
 * what ran in the same place d steps back, where the step 2d back ran the
 * same collectives as that one and this step so far ran what it did, d
 * from 1 (ddp) to 4 (dreamddp:4's windows); an average of host memory
 * only. When every
 * worker foresaw the same (the digest's second 32 bits and their
 * complements, summed alike), the next collective leaves with its digest
 * instead of after it: a worker whose collective is the one foreseen sends
 * its values, and one whose collective is another sends zeros in the
 * foreseen shape, so that every worker posts the same operations and
 * nothing waits on a size it will not get. The digest lands first or with
 * the data, and is read before the data is handed back:
 * - every worker ran the foreseen collective: it is done;
 * - every worker ran the same other one (a change of plan): the zeros are
 *   thrown away and the collective runs after its digest as above; what
 *   it cost is one message of the foreseen size;
 * - the workers differ: every worker fails, naming the ranks and their
 *   collectives, and the values that came back are not used.
 * The foresight comes from the steps the digests agreed on, so it is the
 * same on every worker unless they already differ.
 */
#define DD_SEQ_BITS 32

/* After the digest's bits, one more sum: the workers whose values were not
 * all finite (DREAMDDP_CHECK_FINITE), so that every worker knows whether a
 * sum of divided terms is finite without reading it; then the bits of the
 * next collective foreseen and their complements. */
#define DD_DIGEST_FINITE (2 * DD_SEQ_BITS)
#define DD_DIGEST_NEXT (2 * DD_SEQ_BITS + 1)
#define DD_DIGEST_FLOATS (4 * DD_SEQ_BITS + 1)

typedef struct {
    dd_backends_op_t op; /* the digest, then (foreseen wrongly) the data */
    /* -1: the digest waits, 0: the digest, 1: the collective, 2: the
     * digest beside the foreseen collective (data_op) */
    int phase;
    int is_op;
    uint64_t seq;
    float digest[DD_DIGEST_FLOATS];
    dd_sched_coll_t data;
    dd_sync_job_t *job;
    /* Foresight: the next collective this worker foresees (next_hash 0:
     * none); in phase 2, what is in flight, the zeros sent in the foreseen
     * shape (NULL: the values were), and the error to give once nothing
     * is. */
    uint64_t next_hash;
    dd_route_coll_seen_t next;
    dd_backends_op_t data_op;
    int op_live, data_live, digest_done;
    void *zeros;
    dd_status_t fail;
    char what[200];
} dd_sched_coll_req_t;

/* The words for what a job averages, as the digest and its message say. */
static const char *dd_sched_kind_name(dd_job_kind_t kind)
{
    switch (kind) {
    case DD_JOB_GRADS:
        return "gradients";
    case DD_JOB_SYNC_ALL:
        return "parameters (dd_sync_all)";
    case DD_JOB_PARAMS:
        break;
    }
    return "parameters";
}

/* The layers of a job, as "layer 'fc2'" or "layers 'fc2', 'fc1' and 3
 * others", appended at what + o. */
static size_t dd_sched_coll_layers(const dd_route_env_t *env,
                                   const dd_sync_job_t *job, char *what,
                                   size_t o, size_t size)
{
    size_t shown = job->n_layers < 3 ? job->n_layers : 2;

    for (size_t k = 0; k < shown && o < size; k++) {
        o += (size_t)snprintf(
            what + o, size - o, "%s'%s'",
            k == 0 ? (job->n_layers > 1 ? " (layers " : " (layer ") : ", ",
            dd_route_layer_name(env, job->layers[k]));
    }
    if (job->n_layers > shown && o < size) {
        o += (size_t)snprintf(what + o, size - o, " and %zu others",
                              job->n_layers - shown);
    }
    if (job->n_layers > 0 && o < size) {
        o += (size_t)snprintf(what + o, size - o, ")");
    }
    return o;
}

/* What a job is, as every worker must agree: "step 12, average of 4099
 * f32 gradients (layers 'fc2', 'fc1')". */
static void dd_sched_coll_what(const dd_route_env_t *env,
                               const dd_sync_job_t *job,
                               const dd_sched_coll_t *c, int is_op, char *what,
                               size_t size)
{
    static const char *const ops[] = {"sum", "avg", "max", "min"};
    int n =
        snprintf(what, size, "step %llu, %s of %zu %s%s%s",
                 (unsigned long long)job->step,
                 !is_op                         ? "average"
                 : c->coll == DD_COLL_BROADCAST ? "broadcast"
                                                : dd_coll_name(c->coll),
                 c->args.count, dd_dtype_name(c->args.dtype), is_op ? "" : " ",
                 is_op ? "" : dd_sched_kind_name(job->kind));
    size_t o = n > 0 ? (size_t)n : 0;

    if (is_op && c->coll != DD_COLL_BROADCAST && o < size &&
        (unsigned)c->args.op < DD_REDUCE_LAST) {
        o += (size_t)snprintf(what + o, size - o, " (%s)", ops[c->args.op]);
    }
    dd_sched_coll_layers(env, job, what, o, size);
}

/* The bits of h and their complements at d. */
static void dd_sched_coll_bits(float *d, uint64_t h)
{
    h ^= h >> 32;
    for (int j = 0; j < DD_SEQ_BITS; j++) {
        d[j] = (float)((h >> j) & 1);
        d[DD_SEQ_BITS + j] = 1.0f - d[j];
    }
}

/* What a collective is but its step: what its message names after the
 * step, and the job's digest. */
static uint64_t dd_sched_coll_ident(const dd_sched_coll_req_t *req)
{
    const char *w = strstr(req->what, ", ");
    w = w != NULL ? w + 2 : req->what;
    return dd_route_job_digest(
        dd_route_fnv(0xcbf29ce484222325ull, w, strlen(w)), req->job);
}

/* A collective foreseen in a step, as its digest's bits carry it. */
static uint64_t dd_sched_coll_next_hash(const dd_route_coll_seen_t *seen,
                                        uint64_t step)
{
    uint64_t h =
        dd_route_fnv(0xcbf29ce484222325ull, &seen->ident, sizeof(seen->ident));
    h = dd_route_fnv(h, &step, sizeof(step));
    return h != 0 ? h : 1;
}

static int dd_sched_coll_same(const dd_route_coll_seen_t *a,
                              const dd_route_coll_seen_t *b)
{
    return a->ident == b->ident && a->count == b->count &&
           a->dtype == b->dtype && a->op == b->op &&
           a->foreseeable == b->foreseeable;
}

/* The collectives of the step d back (1 <= d <= r->steps), and their
 * number. */
static const dd_route_coll_seen_t *dd_sched_coll_past(const dd_route_coll_t *r,
                                                      size_t d, size_t *n_p)
{
    size_t slot = (r->steps - d) % DD_ROUTE_COLL_STEPS;

    *n_p = r->n_past[slot];
    return r->past[slot];
}

/* Whether the steps d and 2d back ran the same collectives. */
static int dd_sched_coll_steady(const dd_route_coll_t *r, size_t d)
{
    size_t n, n2;
    const dd_route_coll_seen_t *p = dd_sched_coll_past(r, d, &n);
    const dd_route_coll_seen_t *p2 = dd_sched_coll_past(r, 2 * d, &n2);

    if (n == 0 || n != n2) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!dd_sched_coll_same(&p[i], &p2[i])) {
            return 0;
        }
    }
    return 1;
}

/*
 * Remembers req as the next collective posted (in the order every worker
 * posts them) and foresees the one after it. For the shortest period d
 * with the step d back as the step 2d back, whole, and this step so far
 * as the step d back: the collective in the next place of the step d
 * back. ddp's steps repeat with d = 1, dreamddp:4's windows with d = 4
 * (consecutive steps of a window run other layers, even where two of them
 * start alike). A new plan (the job's plan_serial) forgets the steps of
 * the last.
 */
static void dd_sched_coll_remember(dd_route_coll_t *r, dd_sched_coll_req_t *req,
                                   const dd_route_coll_seen_t *seen)
{
    uint64_t step = req->job->step;

    if (req->job->plan_serial != r->plan_serial) { /* another plan */
        r->plan_serial = req->job->plan_serial;
        r->steps = 0;
        r->n_cur = 0;
    }
    if (step != r->step || r->n_cur == 0) {
        if (r->n_cur > 0) {
            size_t slot = r->steps % DD_ROUTE_COLL_STEPS;
            /* A step of more than it remembers counts as one of none. */
            r->n_past[slot] = r->n_cur <= DD_ROUTE_COLL_SEEN ? r->n_cur : 0;
            memcpy(r->past[slot], r->cur, r->n_past[slot] * sizeof(r->cur[0]));
            r->steps++;
        }
        r->n_cur = 0;
        r->follows = 0;
        for (size_t d = 1; d <= DD_ROUTE_COLL_PERIOD && 2 * d <= r->steps;
             d++) {
            r->follows |= dd_sched_coll_steady(r, d) ? 1u << (d - 1) : 0;
        }
        r->step = step;
    }
    size_t at = r->n_cur++, n;
    if (at < DD_ROUTE_COLL_SEEN) {
        r->cur[at] = *seen;
    }
    req->next_hash = 0;
    for (size_t d = 1; d <= DD_ROUTE_COLL_PERIOD; d++) {
        unsigned bit = 1u << (d - 1);
        if (!(r->follows & bit)) {
            continue;
        }
        const dd_route_coll_seen_t *p = dd_sched_coll_past(r, d, &n);
        if (at >= n || !dd_sched_coll_same(&p[at], seen)) {
            r->follows &= ~bit;
        } else if (req->next_hash == 0 && at + 1 < n && p[at + 1].foreseeable) {
            req->next = p[at + 1];
            req->next_hash = dd_sched_coll_next_hash(&req->next, step);
        }
    }
    dd_sched_coll_bits(req->digest + DD_DIGEST_NEXT, req->next_hash);
}

/* The digest covers what the message names and the job's digest. */
static void dd_sched_coll_digest(dd_sched_coll_req_t *req,
                                 const dd_sync_job_t *job)
{
    uint64_t h =
        dd_route_fnv(0xcbf29ce484222325ull, req->what, strlen(req->what));

    dd_sched_coll_bits(req->digest, dd_route_job_digest(h, job));
    req->digest[DD_DIGEST_FINITE] = job->check_finite && job->input_bad;
}

/* The workers' digests disagree: names who ran what, from the store. */
static dd_status_t dd_sched_coll_mismatch(const dd_route_coll_t *r,
                                          const dd_sched_coll_req_t *req)
{
    const dd_job_t *job = r->env->job;
    char key[64], msg[1536];
    char **values = calloc((size_t)job->world_size, sizeof(char *));

    snprintf(key, sizeof(key), "dd/seq/%llu/%d", (unsigned long long)req->seq,
             job->rank);
    dd_store_set(job->store, key, req->what, strlen(req->what));
    for (int i = 0; values != NULL && i < job->n_workers; i++) {
        int rank = job->worker_ranks[i];
        void *v = NULL;
        size_t len = 0;
        snprintf(key, sizeof(key), "dd/seq/%llu/%d",
                 (unsigned long long)req->seq, rank);
        if (dd_store_get_within(job->store, key, job->timeout_s / 4, &v,
                                &len) == DD_OK) {
            values[rank] = malloc(len + 1);
            if (values[rank] != NULL) {
                memcpy(values[rank], v, len);
                values[rank][len] = '\0';
            }
            free(v);
        }
        if (values[rank] == NULL &&
            (values[rank] = strdup("(no answer)")) == NULL) {
            break;
        }
    }
    snprintf(msg, sizeof(msg),
             "workers out of step at their collective %llu (%s):",
             (unsigned long long)req->seq,
             req->phase == 2 ? "it left beside its digest, on what every "
                               "worker foresaw, and what came back is not "
                               "used"
                             : "nothing was summed");
    if (values != NULL) {
        dd_ranks_by_value((const char *const *)values, job->world_size, msg,
                          sizeof(msg));
    }
    size_t used = strlen(msg);
    snprintf(msg + used, sizeof(msg) - used,
             "; a worker made a call that the others did not: likely a "
             "forward, a step, a sync_all or a collective run on some "
             "workers only (every worker must make the same calls in the "
             "same order)");
    for (int k = 0; values != NULL && k < job->world_size; k++) {
        free(values[k]);
    }
    free(values);
    return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_SCHED, "%s", msg);
}

/* Whether every worker's bits at d were alike: every sum 0 or n. */
static int dd_sched_coll_agreed(const dd_route_coll_t *r, const float *d)
{
    float n = (float)r->env->job->n_workers;

    for (int j = 0; j < 2 * DD_SEQ_BITS; j++) {
        if (d[j] != 0.0f && d[j] != n) {
            return 0;
        }
    }
    return 1;
}

/* A digest landed and agreed: the next collective is armed when every
 * worker foresaw the same one. */
static void dd_sched_coll_arm(dd_route_coll_t *r,
                              const dd_sched_coll_req_t *req)
{
    r->armed = req->next_hash != 0 &&
               dd_sched_coll_agreed(r, req->digest + DD_DIGEST_NEXT);
    r->next = req->next;
    r->next_step = req->job->step;
}

/* A sum that landed: divided as asked, and (DREAMDDP_CHECK_FINITE)
 * whether it is finite: read in that pass, known from the digest's count
 * for divided terms, or read. */
static void dd_sched_coll_landed(dd_sched_coll_req_t *req)
{
    dd_sync_job_t *job = req->job;
    const dd_backend_args_t *a = &req->data.args;
    int finite = 1;

    if (req->data.divide_after != 0) {
        finite = dd_coll_quotient_finite(a->recvbuf, a->recvbuf, a->count,
                                         a->dtype, req->data.divide_after);
    }
    if (!job->check_finite || req->data.coll != DD_COLL_ALLREDUCE) {
        return;
    }
    job->result_bad = req->data.divide_after != 0 ? !finite
                      : req->data.divided
                          ? req->digest[DD_DIGEST_FINITE] > 0.0f
                          : !dd_values_finite(a->recvbuf, a->count, a->dtype);
}

/* Posts collective c on op, among the workers. */
static dd_status_t dd_sched_coll_post(const dd_route_coll_t *r,
                                      const dd_sched_coll_t *c,
                                      dd_backends_op_t *op)
{
    return dd_backends_op_start(r->env->coll, c->coll, &c->args,
                                dd_route_coll_bytes(c, r->env->job->n_workers),
                                op);
}

/* Sends the collective foreseen beside its digest: this worker's values
 * when its collective is the one foreseen, else zeros in that shape. */
static dd_status_t dd_sched_coll_post_foreseen(dd_route_coll_t *r,
                                               dd_sched_coll_req_t *req,
                                               const dd_route_coll_seen_t *seen)
{
    const dd_route_coll_seen_t *next = &r->next;
    dd_sched_coll_t c = req->data;

    if (!dd_sched_coll_same(seen, next) || req->job->step != r->next_step) {
        req->zeros =
            calloc(next->count ? next->count : 1, dd_dtype_size(next->dtype));
        if (req->zeros == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                            "no memory for a collective's stand-in");
        }
        c = (dd_sched_coll_t){.coll = DD_COLL_ALLREDUCE,
                              .args = {.sendbuf = req->zeros,
                                       .recvbuf = req->zeros,
                                       .count = next->count,
                                       .dtype = next->dtype,
                                       .op = next->op,
                                       .mem_type = DD_MEM_HOST}};
        r->missed++;
        dd_log_debug(DD_SUBSYS_SCHED,
                     "collective %llu foreseen as %zu %s, ran as %s: zeros "
                     "sent in its shape",
                     (unsigned long long)req->seq, next->count,
                     dd_dtype_name(next->dtype), req->what);
    }
    r->foreseen++;
    return dd_sched_coll_post(r, &c, &req->data_op);
}

/* Posts a waiting digest unless another is on the wire, and beside it the
 * collective when every worker foresaw it. */
static dd_status_t dd_sched_coll_post_digest(dd_route_coll_t *r,
                                             dd_sched_coll_req_t *req)
{
    dd_backend_args_t args = {.sendbuf = req->digest,
                              .recvbuf = req->digest,
                              .count = DD_DIGEST_FLOATS,
                              .dtype = DD_DTYPE_F32,
                              .op = DD_REDUCE_SUM,
                              .mem_type = DD_MEM_HOST};
    const dd_backend_args_t *a = &req->data.args;

    if (req->phase != -1 || r->digesting > 0) {
        return DD_OK;
    }
    dd_route_coll_seen_t seen = {
        .ident = dd_sched_coll_ident(req),
        .count = a->count,
        .dtype = a->dtype,
        .op = a->op,
        .foreseeable = !req->is_op && req->data.coll == DD_COLL_ALLREDUCE &&
                       a->mem_type == DD_MEM_HOST};
    int armed = r->armed;
    r->armed = 0;
    dd_sched_coll_remember(r, req, &seen);
    dd_status_t status = dd_backends_op_start(
        r->env->coll, DD_COLL_ALLREDUCE, &args, sizeof(req->digest), &req->op);
    if (status != DD_OK) {
        return status;
    }
    r->digesting++;
    req->phase = 0;
    if (!armed) {
        return DD_OK;
    }
    /* The digest is on the wire: from here the request lives until it
     * lands, whatever else fails. */
    req->phase = 2;
    req->op_live = 1;
    status = dd_sched_coll_post_foreseen(r, req, &seen);
    req->data_live = status == DD_OK;
    req->fail = status;
    return DD_OK;
}

static dd_status_t dd_sched_coll_begin(dd_route_coll_t *r, dd_sync_job_t *job,
                                       const dd_sched_coll_t *c, int is_op,
                                       void **handle_p)
{
    dd_sched_coll_req_t *req = calloc(1, sizeof(*req));

    if (req == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory to start a collective");
    }
    req->data = *c;
    req->job = job;
    req->is_op = is_op;
    req->seq = r->seq++;
    if (job->check_finite && !c->divided && c->coll == DD_COLL_ALLREDUCE) {
        job->input_bad =
            !dd_values_finite(c->args.sendbuf, c->args.count, c->args.dtype);
    }
    dd_sched_coll_what(r->env, job, c, is_op, req->what, sizeof(req->what));
    dd_sched_coll_digest(req, job);
    req->phase = -1;
    dd_status_t status = dd_sched_coll_post_digest(r, req);
    if (status != DD_OK) {
        free(req);
        return status;
    }
    *handle_p = req;
    return DD_OK;
}

static dd_status_t dd_sched_coll_start(void *arg, dd_sync_job_t *job, void *buf,
                                       size_t count, void **handle_p)
{
    dd_route_coll_t *r = arg;
    dd_sched_coll_t avg = {.coll = DD_COLL_ALLREDUCE,
                           .args = {.sendbuf = buf,
                                    .recvbuf = buf,
                                    .count = count,
                                    .dtype = job->dtype,
                                    .op = DD_REDUCE_AVG,
                                    .mem_type = job->mem_type}};
    int n = r->env->job->n_workers, pow2 = 1;

    while (pow2 < n) {
        pow2 *= 2;
    }
    if (job->op == NULL && job->mem_type == DD_MEM_HOST && n > 1 &&
        dd_dtype_is_float(job->dtype) && (pow2 == n || job->check_finite)) {
        /* Each worker scales its values by 1/pow2 (exactly) and the
         * collective sums: no partial sum overflows where the average
         * fits, and the finite check rides on the scaling's pass. The sum
         * is then divided by n/pow2 (also exact), which gives the bits of
         * sum/n, or kept as it is when n is pow2. */
        int finite = dd_coll_quotient_finite(buf, buf, count, job->dtype, pow2);
        job->input_bad = job->check_finite && !finite;
        avg.args.op = DD_REDUCE_SUM;
        avg.divided = 1;
        avg.divide_after = pow2 == n ? 0 : (double)n / pow2;
    }
    return dd_sched_coll_begin(
        r, job, job->op != NULL ? (const dd_sched_coll_t *)job->op : &avg,
        job->op != NULL, handle_p);
}

/* What a test of an operation in flight adds to *busy_p: whether it
 * moves only when tested, and whether its completion rings. */
static int dd_sched_coll_flags(const dd_backends_op_t *op)
{
    int caps = op->ref.ops->caps;

    return (caps & DD_BACKEND_CAP_ASYNC ? 0 : DD_SYNC_POLL) |
           (caps & DD_BACKEND_CAP_NOTIFY ? DD_SYNC_NOTIFY : 0);
}

/* The digest landed beside the collective foreseen: the next one is armed,
 * and the collective is done (foreseen rightly), follows (every worker ran
 * the same other one), or fails (the workers differ). */
static void dd_sched_coll_foreseen_digest(dd_route_coll_t *r,
                                          dd_sched_coll_req_t *req,
                                          dd_status_t status)
{
    req->digest_done = 1;
    if (status != DD_OK) {
        req->fail = req->fail != DD_OK ? req->fail : status;
    } else if (!dd_sched_coll_agreed(r, req->digest)) {
        dd_status_t m = dd_sched_coll_mismatch(r, req);
        req->fail = req->fail != DD_OK ? req->fail : m;
    } else {
        dd_sched_coll_arm(r, req);
        if (req->zeros != NULL && req->fail == DD_OK) {
            req->fail = dd_sched_coll_post(r, &req->data, &req->op);
            req->op_live = req->fail == DD_OK;
        }
    }
    r->digesting--; /* after the collective that follows it, if any */
}

/* Phase 2: the digest and the collective foreseen in flight together. */
static dd_status_t dd_sched_coll_test_foreseen(dd_route_coll_t *r,
                                               dd_sched_coll_req_t *req,
                                               int *busy_p)
{
    dd_status_t status;

    *busy_p = 0;
    if (req->op_live &&
        (status = dd_backends_op_test(&req->op)) != DD_INPROGRESS) {
        req->op_live = 0;
        *busy_p = 1;
        if (!req->digest_done) {
            dd_sched_coll_foreseen_digest(r, req, status);
        } else if (status != DD_OK && req->fail == DD_OK) {
            req->fail = status;
        }
    }
    if (req->data_live &&
        (status = dd_backends_op_test(&req->data_op)) != DD_INPROGRESS) {
        req->data_live = 0;
        *busy_p = 1;
        if (status != DD_OK && req->fail == DD_OK) {
            req->fail = status;
        }
    }
    if (req->op_live || req->data_live) {
        int notify = DD_SYNC_NOTIFY;
        const dd_backends_op_t *ops[2] = {req->op_live ? &req->op : NULL,
                                          req->data_live ? &req->data_op
                                                         : NULL};
        for (int i = 0; i < 2; i++) {
            if (ops[i] != NULL) {
                int f = dd_sched_coll_flags(ops[i]);
                *busy_p |= f & DD_SYNC_POLL;
                notify &= f;
            }
        }
        *busy_p |= notify;
        return DD_INPROGRESS;
    }
    status = req->fail;
    if (status == DD_OK) {
        dd_sched_coll_landed(req);
    }
    free(req->zeros);
    free(req);
    return status;
}

static dd_status_t dd_sched_coll_test(void *arg, void *handle, int *busy_p)
{
    dd_route_coll_t *r = arg;
    dd_sched_coll_req_t *req = handle;

    if (req->phase == -1) {
        dd_status_t status = dd_sched_coll_post_digest(r, req);
        *busy_p = req->phase != -1;
        if (status != DD_OK) {
            free(req);
            return status;
        }
        return DD_INPROGRESS;
    }
    if (req->phase == 2) {
        return dd_sched_coll_test_foreseen(r, req, busy_p);
    }
    dd_status_t status = dd_backends_op_test(&req->op);

    *busy_p = status != DD_INPROGRESS;
    if (status == DD_INPROGRESS) {
        *busy_p |= dd_sched_coll_flags(&req->op);
    }
    if (status != DD_INPROGRESS && req->phase == 0) {
        r->digesting--;
    }
    if (status == DD_OK && req->phase == 1) {
        dd_sched_coll_landed(req);
    }
    if (status == DD_OK && req->phase == 0) {
        if (!dd_sched_coll_agreed(r, req->digest)) {
            status = dd_sched_coll_mismatch(r, req);
        } else {
            dd_sched_coll_arm(r, req);
            status = dd_sched_coll_post(r, &req->data, &req->op);
            req->phase = 1;
            if (status == DD_OK) {
                return DD_INPROGRESS;
            }
        }
    }
    if (status != DD_INPROGRESS) {
        free(req);
    }
    return status;
}

/* The first worker's values of a job's buffers to every worker. */
static dd_status_t dd_sched_bcast_start(void *arg, dd_sync_job_t *job,
                                        void *buf, size_t count,
                                        void **handle_p)
{
    dd_sched_coll_t bcast = {.coll = DD_COLL_BROADCAST,
                             .args = {.sendbuf = buf,
                                      .recvbuf = buf,
                                      .count = count,
                                      .dtype = job->dtype,
                                      .root = 0,
                                      .mem_type = job->mem_type}};

    return dd_sched_coll_begin(arg, job, &bcast, 1, handle_p);
}

void dd_route_coll_init(dd_route_coll_t *r, const dd_route_env_t *env)
{
    r->env = env;
    r->avg = (dd_sync_pipe_t){.start = dd_sched_coll_start,
                              .test = dd_sched_coll_test,
                              .depth = DD_ENGINE_DEPTH,
                              .arg = r,
                              .checks_finite = 1};
    r->bcast = (dd_sync_pipe_t){.start = dd_sched_bcast_start,
                                .test = dd_sched_coll_test,
                                .depth = 1,
                                .arg = r};
}
