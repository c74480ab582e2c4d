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
 */
#define DD_SEQ_BITS 32

/* After the digest's bits, one more sum: the workers whose values were not
 * all finite (DREAMDDP_CHECK_FINITE), so that every worker knows whether a
 * sum of divided terms is finite without reading it. */
#define DD_DIGEST_FLOATS (2 * DD_SEQ_BITS + 1)

typedef struct {
    dd_backends_op_t op;
    int phase; /* -1: the digest waits, 0: the digest, 1: the collective */
    uint64_t seq;
    float digest[DD_DIGEST_FLOATS];
    dd_sched_coll_t data;
    dd_sync_job_t *job;
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

/* The digest covers what the message names and the job's digest. */
static void dd_sched_coll_digest(dd_sched_coll_req_t *req,
                                 const dd_sync_job_t *job)
{
    uint64_t h =
        dd_route_fnv(0xcbf29ce484222325ull, req->what, strlen(req->what));

    h = dd_route_job_digest(h, job);
    h ^= h >> 32;
    for (int j = 0; j < DD_SEQ_BITS; j++) {
        req->digest[j] = (float)((h >> j) & 1);
        req->digest[DD_SEQ_BITS + j] = 1.0f - req->digest[j];
    }
    req->digest[2 * DD_SEQ_BITS] = job->check_finite && job->input_bad;
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
             "workers out of step at their collective %llu (nothing was "
             "summed):",
             (unsigned long long)req->seq);
    if (values != NULL) {
        dd_ranks_by_value((const char *const *)values, job->world_size, msg,
                          sizeof(msg));
    }
    for (int k = 0; values != NULL && k < job->world_size; k++) {
        free(values[k]);
    }
    free(values);
    return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_SCHED, "%s", msg);
}

/* Whether every worker's digest was this one: every sum 0 or n. */
static int dd_sched_coll_agreed(const dd_route_coll_t *r,
                                const dd_sched_coll_req_t *req)
{
    float n = (float)r->env->job->n_workers;

    for (int j = 0; j < 2 * DD_SEQ_BITS; j++) {
        if (req->digest[j] != 0.0f && req->digest[j] != n) {
            return 0;
        }
    }
    return 1;
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
                          ? req->digest[2 * DD_SEQ_BITS] > 0.0f
                          : !dd_values_finite(a->recvbuf, a->count, a->dtype);
}

/* Posts a waiting digest unless another is on the wire. */
static dd_status_t dd_sched_coll_post_digest(dd_route_coll_t *r,
                                             dd_sched_coll_req_t *req)
{
    dd_backend_args_t args = {.sendbuf = req->digest,
                              .recvbuf = req->digest,
                              .count = DD_DIGEST_FLOATS,
                              .dtype = DD_DTYPE_F32,
                              .op = DD_REDUCE_SUM,
                              .mem_type = DD_MEM_HOST};

    if (req->phase != -1 || r->digesting > 0) {
        return DD_OK;
    }
    dd_status_t status = dd_backends_op_start(
        r->env->coll, DD_COLL_ALLREDUCE, &args, sizeof(req->digest), &req->op);
    if (status == DD_OK) {
        req->phase = 0;
        r->digesting++;
    }
    return status;
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

static dd_status_t dd_sched_coll_test(void *arg, void *handle, int *busy_p)
{
    dd_route_coll_t *r = arg;
    dd_sched_coll_req_t *req = handle;

    if (req->phase == -1) {
        dd_status_t status = dd_sched_coll_post_digest(r, req);
        *busy_p = req->phase == 0;
        if (status != DD_OK) {
            free(req);
            return status;
        }
        return DD_INPROGRESS;
    }
    dd_status_t status = dd_backends_op_test(&req->op);

    *busy_p = status != DD_INPROGRESS;
    if (status == DD_INPROGRESS &&
        !(req->op.ref.ops->caps & DD_BACKEND_CAP_ASYNC)) {
        *busy_p |= DD_SYNC_POLL; /* it moves only when tested */
    }
    if (status == DD_INPROGRESS &&
        (req->op.ref.ops->caps & DD_BACKEND_CAP_NOTIFY)) {
        *busy_p |= DD_SYNC_NOTIFY; /* its completion rings */
    }
    if (status != DD_INPROGRESS && req->phase == 0) {
        r->digesting--;
    }
    if (status == DD_OK && req->phase == 1) {
        dd_sched_coll_landed(req);
    }
    if (status == DD_OK && req->phase == 0) {
        if (!dd_sched_coll_agreed(r, req)) {
            status = dd_sched_coll_mismatch(r, req);
        } else {
            const dd_sched_coll_t *c = &req->data;
            status = dd_backends_op_start(
                r->env->coll, c->coll, &c->args,
                dd_route_coll_bytes(c, r->env->job->n_workers), &req->op);
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
