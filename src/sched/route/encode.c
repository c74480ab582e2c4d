/*
 * Compression of the syncs as a pipe around the host route (the workers'
 * allreduce or the aggregators): it encodes a job's packed f32 buffer into
 * the codec's wire dtype, runs the route on that, and decodes the average
 * back in place. Summable codecs (fp16, bf16) go through the route, and
 * no sum overflows where every input and the average fit the dtype: on
 * the workers' allreduce, whose ring hands partial sums on in the wire
 * dtype, each worker divides its values by the number of workers before
 * encoding and the ring only sums (as PyTorch's fp16 and bf16 hooks do);
 * the aggregators sum in f32 and divide, which holds fp16's range but not
 * bf16's (f32's), so bf16 is sent divided there too and multiplied back
 * after. topk's encodings (values and
 * indices) are allgathered among the workers on the allreduce route, and every
 * worker decodes and averages them in worker order; on the aggregation route
 * each worker's nonzero pairs go to the homes of their chunks, which scatter
 * them into f32 in worker order and send back the same average
 * (agg/client.c), and the job's wire bytes become what was pushed and
 * pulled. powersgd's rounds go through rounds.c's pipe. Also the codecs a
 * job opens once per spec, and what each puts on the wire.
 *
 * Parameter syncs send the change since the layer's last sync and rebuild
 * x = x_ref + decode(average) from the reference every replica holds
 * equal (the items' ref), so the replicas stay bit-identical after every
 * averaging. It must not change what syncs when, nor see device memory
 * (device tensors stay dense).
 */
#include "sched/route/encode.h"
#include "core/log.h"
#include "core/reduce.h"
#include "sched/route/agg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DD_ROUTE_CODECS_WIRED "none, fp16, bf16, topk:RATIO, powersgd:RANK"

static int dd_sched_codec_spec_is_identity(const char *spec)
{
    return strcmp(spec, "none") == 0;
}

dd_status_t dd_route_codec_open(dd_route_codecs_t *set, const char *what,
                                const char *spec,
                                const dd_sched_codec_t **codec_p)
{
    if (spec == NULL || dd_sched_codec_spec_is_identity(spec)) {
        *codec_p = NULL;
        return DD_OK;
    }
    for (size_t i = 0; i < set->n; i++) {
        if (strcmp(set->codec[i].spec, spec) == 0) {
            *codec_p = &set->codec[i];
            return DD_OK;
        }
    }
    char name[DD_CODEC_NAME_MAX + 1];
    size_t len = strcspn(spec, ":");
    snprintf(name, sizeof(name), "%.*s", (int)len, spec);
    const dd_codec_ops_t *ops = dd_codec_find(name);
    if (ops == NULL) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_SCHED,
                        "%s'%s': unknown codec, expected one "
                        "of " DD_ROUTE_CODECS_WIRED,
                        what, spec);
    }
    if (set->n == DD_SCHED_MAX_CODECS) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_SCHED,
                        "%s'%s': at most %d codec specs in one job", what, spec,
                        DD_SCHED_MAX_CODECS);
    }
    dd_sched_codec_t *c = &set->codec[set->n];
    dd_status_t status = dd_codec_open(spec, &c->ref);
    if (status != DD_OK) {
        return dd_error(status, DD_SUBSYS_SCHED, "%s'%s': %s", what, spec,
                        dd_last_error());
    }
    c->spec = strdup(spec);
    if (c->spec == NULL) {
        dd_codec_close(&c->ref);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for codec spec '%s'", spec);
    }
    c->wire_dtype = dd_codec_wire_dtype(ops, DD_DTYPE_F32);
    c->rounds = ops->rounds > 0;
    c->gather = !(ops->caps & DD_CODEC_CAP_SUMMABLE) && !c->rounds;
    set->n++;
    *codec_p = c;
    return DD_OK;
}

const char *dd_route_codec_name(const dd_sched_codec_t *codec)
{
    return codec != NULL ? codec->spec : "none";
}

size_t dd_route_codec_wire_size(const dd_sched_codec_t *codec,
                                const dd_tensor_t *x)
{
    size_t bytes = x->count * sizeof(float);

    if (codec != NULL && (codec->gather || codec->rounds)) {
        /* powersgd: the sum of its rounds, P and Q. */
        codec->ref.ops->encoded_size(codec->ref.codec, x->count, DD_DTYPE_F32,
                                     x->rows, x->cols, &bytes);
    } else if (codec != NULL) {
        bytes = x->count * dd_dtype_size(codec->wire_dtype);
    }
    return bytes;
}

void dd_route_codecs_close(dd_route_codecs_t *set)
{
    for (size_t i = 0; i < set->n; i++) {
        dd_codec_close(&set->codec[i].ref);
        free(set->codec[i].spec);
    }
    set->n = 0;
}

/* A compressed job in flight: its wire buffer and the route's handle. */
typedef struct {
    dd_sync_job_t wire_job; /* the job as the route sees it */
    dd_sync_job_t *job;
    float *buf;
    size_t count;
    void *wire;
    size_t wire_size;
    void *gathered; /* gather: every worker's wire, in worker order */
    int divided;    /* summable on the allreduce: encoded divided, summed */
    int rescale;    /* bf16 through the aggregators: encoded divided */
    dd_sched_coll_t coll;
    void *inner;
    /* gather through the aggregators: this worker's nonzero pairs, and the
     * bytes pushed and pulled. */
    int sparse;
    size_t nnz, *index;
    float *value;
    size_t wire_done;
} dd_sched_codec_op_t;

/* The bytes of item j's encoding in the wire buffer (fp16, bf16, topk:
 * codecs that need no shape). */
static size_t dd_sched_item_wire(const dd_sync_job_t *job, size_t j)
{
    dd_tensor_t x = {.count = job->items[j].count};

    return dd_route_codec_wire_size(job->codec, &x);
}

/* Encodes the job's buffer (the change since the last sync where the item
 * has a reference), divided by divisor unless it is 1. */
static dd_status_t dd_sched_codec_encode(const dd_sync_job_t *job,
                                         const float *buf, void *wire,
                                         int divisor)
{
    const dd_codec_ref_t *ref = &job->codec->ref;
    size_t off = 0, woff = 0;
    float *delta = NULL;

    for (size_t j = 0; j < job->n_items; j++) {
        const dd_sync_item_t *it = &job->items[j];
        const float *in = buf + off;
        if (it->ref != NULL || divisor != 1) {
            float *d = realloc(delta, it->count * sizeof(float));
            if (d == NULL) {
                free(delta);
                return dd_error(
                    DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                    "no memory for the change since the last sync, to encode");
            }
            delta = d;
            for (size_t i = 0; it->ref != NULL && i < it->count; i++) {
                delta[i] = in[i] - it->ref[i];
            }
            if (divisor != 1) {
                (void)dd_coll_quotient_finite(delta,
                                              it->ref != NULL ? delta : in,
                                              it->count, DD_DTYPE_F32, divisor);
            }
            in = delta;
        }
        size_t bytes, want = dd_sched_item_wire(job, j);
        dd_status_t status =
            ref->ops->encode(ref->codec, it->state, in, it->count, DD_DTYPE_F32,
                             (char *)wire + woff, &bytes);
        if (status == DD_OK && bytes != want) {
            status = dd_error(DD_ERR_INTERNAL, DD_SUBSYS_SCHED,
                              "%s wrote %zu bytes for %zu elements, not the "
                              "%zu it announced",
                              job->codec->spec, bytes, it->count, want);
        }
        if (status != DD_OK) {
            free(delta);
            return status;
        }
        off += it->count;
        woff += want;
    }
    free(delta);
    return DD_OK;
}

/* The average over the workers of their encodings of one item, into out:
 * decoded and summed in worker order, the same on every worker. */
static dd_status_t dd_sched_codec_average(const dd_sync_job_t *job,
                                          const dd_sched_codec_op_t *op,
                                          size_t j, size_t woff, int n,
                                          float *out, float *tmp)
{
    const dd_codec_ref_t *ref = &job->codec->ref;
    const dd_sync_item_t *it = &job->items[j];
    size_t bytes = dd_sched_item_wire(job, j);

    memset(out, 0, it->count * sizeof(float));
    for (int r = 0; r < n; r++) {
        const char *in = (const char *)op->gathered + r * op->wire_size + woff;
        dd_status_t status = ref->ops->decode(ref->codec, it->state, in, bytes,
                                              tmp, it->count, DD_DTYPE_F32);
        if (status != DD_OK) {
            return status;
        }
        for (size_t i = 0; i < it->count; i++) {
            out[i] += tmp[i];
        }
    }
    for (size_t i = 0; i < it->count; i++) {
        out[i] /= (float)n;
    }
    return DD_OK;
}

/* Writes the average back: x_ref + decode(average of the changes) for
 * parameters, which becomes the new reference; decode(average) otherwise. */
static dd_status_t dd_sched_codec_decode(const dd_route_encode_t *r,
                                         const dd_sched_codec_op_t *op)
{
    const dd_sync_job_t *job = op->job;
    const dd_codec_ref_t *ref = &job->codec->ref;
    size_t off = 0, woff = 0, most = 0;
    float *tmp = NULL;
    dd_status_t status = DD_OK;

    for (size_t j = 0; job->codec->gather && !op->sparse && j < job->n_items;
         j++) {
        most = job->items[j].count > most ? job->items[j].count : most;
    }
    if (most > 0 && (tmp = malloc(most * sizeof(float))) == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for decoding the workers' encodings");
    }
    for (size_t j = 0; status == DD_OK && j < job->n_items; j++) {
        const dd_sync_item_t *it = &job->items[j];
        float *out = op->buf + off;
        size_t bytes = dd_sched_item_wire(job, j);
        if (op->sparse) {
            /* The aggregators wrote the average of the changes in place. */
        } else if (job->codec->gather) {
            status = dd_sched_codec_average(job, op, j, woff,
                                            r->env->job->n_workers, out, tmp);
        } else {
            status = ref->ops->decode(ref->codec, it->state,
                                      (const char *)op->wire + woff, bytes, out,
                                      it->count, DD_DTYPE_F32);
            for (size_t i = 0; op->rescale && i < it->count; i++) {
                out[i] *= (float)r->env->job->n_workers;
            }
        }
        if (status == DD_OK && it->ref != NULL) {
            for (size_t i = 0; i < it->count; i++) {
                out[i] += it->ref[i];
            }
            memcpy(it->ref, out, it->count * sizeof(float));
        }
        off += it->count;
        woff += bytes;
    }
    free(tmp);
    return status;
}

static void dd_sched_codec_op_free(dd_sched_codec_op_t *op)
{
    if (op != NULL) {
        free(op->wire);
        free(op->gathered);
        free(op->index);
        free(op->value);
        free(op);
    }
}

/* The route's view of the job: the summable wire averaged as an array of
 * its dtype, or every worker's wire gathered as bytes. */
static const dd_sync_pipe_t *dd_sched_codec_route(dd_route_encode_t *r,
                                                  dd_sched_codec_op_t *op)
{
    dd_sync_job_t *job = op->job;

    op->wire_job = *job;
    op->wire_job.bytes = op->wire_size;
    if (!job->codec->gather) {
        op->wire_job.dtype = job->codec->wire_dtype;
        if (op->divided) {
            op->coll =
                (dd_sched_coll_t){.coll = DD_COLL_ALLREDUCE,
                                  .args = {.sendbuf = op->wire,
                                           .recvbuf = op->wire,
                                           .count = op->count,
                                           .dtype = job->codec->wire_dtype,
                                           .op = DD_REDUCE_SUM,
                                           .mem_type = DD_MEM_HOST},
                                  .divided = 1};
            op->wire_job.op = &op->coll;
        }
        return r->inner;
    }
    op->coll = (dd_sched_coll_t){.coll = DD_COLL_ALLGATHER,
                                 .args = {.sendbuf = op->wire,
                                          .recvbuf = op->gathered,
                                          .count = op->wire_size,
                                          .dtype = DD_DTYPE_U8,
                                          .mem_type = DD_MEM_HOST}};
    op->wire_job.dtype = DD_DTYPE_U8;
    op->wire_job.op = &op->coll;
    return r->coll;
}

/* This worker's own encodings, decoded into the job's buffer (what it
 * sends, dense), as increasing (index, value) pairs of its nonzeros. */
static dd_status_t dd_sched_codec_pairs(dd_sched_codec_op_t *op)
{
    const dd_sync_job_t *job = op->job;
    const dd_codec_ref_t *ref = &job->codec->ref;
    size_t off = 0, woff = 0, most = 0;

    for (size_t j = 0; j < job->n_items; j++) {
        const dd_sync_item_t *it = &job->items[j];
        size_t bytes = dd_sched_item_wire(job, j);
        dd_status_t status =
            ref->ops->decode(ref->codec, it->state, (char *)op->wire + woff,
                             bytes, op->buf + off, it->count, DD_DTYPE_F32);
        if (status != DD_OK) {
            return status;
        }
        off += it->count;
        woff += bytes;
    }
    for (size_t i = 0; i < op->count; i++) {
        most += op->buf[i] != 0.0f;
    }
    op->index = malloc((most ? most : 1) * sizeof(size_t));
    op->value = malloc((most ? most : 1) * sizeof(float));
    if (op->index == NULL || op->value == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for this worker's sparse pairs");
    }
    for (size_t i = 0; i < op->count; i++) {
        if (op->buf[i] != 0.0f) {
            op->index[op->nnz] = i;
            op->value[op->nnz++] = op->buf[i];
        }
    }
    return DD_OK;
}

/* gather through the aggregators: the pairs to the homes of their chunks,
 * the average of every worker's back into the job's buffer. */
static dd_status_t dd_sched_codec_sparse_start(dd_route_encode_t *r,
                                               dd_sched_codec_op_t *op)
{
    const dd_sync_job_t *job = op->job;
    dd_status_t status = dd_sched_codec_pairs(op);

    if (status != DD_OK) {
        return status;
    }
    dd_agg_sparse_msg_t msg = {.count = op->count,
                               .nnz = op->nnz,
                               .index = op->index,
                               .value = op->value,
                               .out = op->buf,
                               .wire_estimate = op->wire_size,
                               .wire_bytes_p = &op->wire_done};
    dd_agg_id_t id;
    dd_route_agg_id(job, &id);
    status = dd_agg_sparse_start(r->agg, &id, &msg, &op->inner);
    free(op->index);
    free(op->value);
    op->index = NULL;
    op->value = NULL;
    return status;
}

static dd_status_t dd_sched_codec_start(void *arg, dd_sync_job_t *job,
                                        void *buf, size_t count,
                                        void **handle_p)
{
    dd_route_encode_t *r = arg;
    dd_sched_codec_op_t *op = calloc(1, sizeof(*op));
    size_t wsize = 0;

    for (size_t j = 0; j < job->n_items; j++) {
        wsize += dd_sched_item_wire(job, j);
    }
    int n = job->codec->gather && r->agg == NULL ? r->env->job->n_workers : 0;
    if (op == NULL || (op->wire = malloc(wsize)) == NULL ||
        (n > 0 && (op->gathered = malloc((size_t)n * wsize)) == NULL)) {
        dd_sched_codec_op_free(op);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory to encode %zu elements in %s", count,
                        job->codec->spec);
    }
    op->job = job;
    op->buf = buf;
    op->count = count;
    op->wire_size = wsize;
    op->sparse = job->codec->gather && r->agg != NULL;
    op->divided =
        !job->codec->gather && r->agg == NULL && r->env->job->n_workers > 1;
    op->rescale = !job->codec->gather && r->agg != NULL &&
                  job->codec->wire_dtype == DD_DTYPE_BF16;
    if (job->check_finite && job->codec->gather) {
        job->input_bad = !dd_values_finite(buf, count, DD_DTYPE_F32);
    }
    dd_status_t status = dd_sched_codec_encode(
        job, buf, op->wire,
        op->divided || op->rescale ? r->env->job->n_workers : 1);
    if (status == DD_OK && job->check_finite && !job->codec->gather &&
        (op->divided || !r->inner->checks_finite)) {
        /* What leaves is the encoding: a value it cannot hold is not
         * finite either. Divided, the workers' allreduce takes this; the
         * aggregators' route reads it in the copy it makes. */
        job->input_bad =
            !dd_values_finite(op->wire, count, job->codec->wire_dtype);
    }
    if (status == DD_OK && op->sparse) {
        status = dd_sched_codec_sparse_start(r, op);
    } else if (status == DD_OK) {
        const dd_sync_pipe_t *inner = dd_sched_codec_route(r, op);
        status = inner->start(inner->arg, &op->wire_job, op->wire,
                              job->codec->gather ? 0 : count, &op->inner);
    }
    if (status != DD_OK) {
        dd_sched_codec_op_free(op);
        return status;
    }
    *handle_p = op;
    return DD_OK;
}

static dd_status_t dd_sched_codec_test(void *arg, void *handle, int *busy_p)
{
    dd_route_encode_t *r = arg;
    dd_sched_codec_op_t *op = handle;
    const dd_sync_pipe_t *inner = op->job->codec->gather ? r->coll : r->inner;
    dd_status_t status = op->sparse
                             ? dd_agg_test_msg(r->agg, op->inner, busy_p)
                             : inner->test(inner->arg, op->inner, busy_p);

    if (status == DD_INPROGRESS) {
        return status;
    }
    if (status == DD_OK) {
        status = dd_sched_codec_decode(r, op);
    }
    if (status == DD_OK && op->job->check_finite) {
        /* The host route said whether the encodings and their sum were
         * finite; else the decoded average is read. */
        if (!op->sparse && !op->job->codec->gather && r->inner->checks_finite) {
            op->job->input_bad |= op->wire_job.input_bad;
            op->job->result_bad = op->wire_job.result_bad;
        } else {
            op->job->result_bad =
                !dd_values_finite(op->buf, op->count, DD_DTYPE_F32);
        }
    }
    if (status == DD_OK && op->sparse) {
        op->job->wire_bytes = op->wire_done;
    }
    dd_sched_codec_op_free(op);
    return status;
}

void dd_route_encode_init(dd_route_encode_t *r, const dd_route_env_t *env,
                          const dd_sync_pipe_t *inner,
                          const dd_sync_pipe_t *coll, dd_agg_t *agg)
{
    r->env = env;
    r->inner = inner;
    r->coll = coll;
    r->agg = agg;
    r->pipe = (dd_sync_pipe_t){.start = dd_sched_codec_start,
                               .test = dd_sched_codec_test,
                               .depth = inner->depth,
                               .arg = r,
                               .checks_finite = 1};
    r->gather = (dd_sync_pipe_t){.start = dd_sched_codec_start,
                                 .test = dd_sched_codec_test,
                                 .depth = coll->depth,
                                 .arg = r,
                                 .checks_finite = 1};
}
