/*
 * The pipe of codecs with a multi-round protocol (powersgd, compress.h's
 * rounds): a job's items run round 0 on their buffers (or, for parameter
 * syncs, on the change since their reference), the route averages the
 * round's f32 output of every item at once (the workers' allreduce, or
 * the aggregators, which sum f32 chunks), round 1 reads that average, and
 * so on; an item whose rounds are done decodes the last average into its
 * buffer (x_ref + it for parameters, the new reference). The route
 * averages rather than sums: powersgd orthogonalises the first round's P,
 * whatever its scale, and its decode of the averaged Q is the average of
 * the ranks' products. Every worker runs the same rounds on the same
 * averages, so the replicas stay bit-identical.
 *
 * Its rounds must not interleave with other jobs on the route: the
 * aggregators match chunks by their order, so the pipe has depth 1. It
 * must not change what syncs when.
 */
#include "sched/route/rounds.h"
#include "core/log.h"
#include "sched/route/encode.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    dd_sync_job_t wire_job; /* the job as the route sees it */
    dd_sync_job_t *job;
    float *buf; /* the job's packed items */
    unsigned round;
    float *wire;            /* this round's outputs, then their average */
    float *prev;            /* the previous round's average */
    size_t *off, *prev_off; /* [n_items + 1]: each item's floats in them */
    void *inner;
} dd_sched_rounds_op_t;

static unsigned dd_rounds_of(const dd_sync_job_t *job, size_t j)
{
    const dd_codec_ref_t *ref = &job->codec->ref;

    return ref->ops->state_rounds(ref->codec, job->items[j].state);
}

/* Where each item's output of round goes: off[j] to off[j + 1] floats. */
static void dd_rounds_layout(const dd_sync_job_t *job, unsigned round,
                             size_t *off)
{
    const dd_codec_ref_t *ref = &job->codec->ref;

    off[0] = 0;
    for (size_t j = 0; j < job->n_items; j++) {
        size_t bytes = 0;
        if (dd_rounds_of(job, j) > round) {
            ref->ops->round_size(ref->codec, job->items[j].state, round,
                                 &bytes);
        }
        off[j + 1] = off[j] + bytes / sizeof(float);
    }
}

static void dd_rounds_op_free(dd_sched_rounds_op_t *op)
{
    if (op != NULL) {
        free(op->wire);
        free(op->prev);
        free(op->off);
        free(op->prev_off);
        free(op);
    }
}

/* Runs round (> 0 reads op->prev) of every item that takes it into a new
 * op->wire. */
static dd_status_t dd_rounds_encode(dd_sched_rounds_op_t *op, unsigned round)
{
    const dd_sync_job_t *job = op->job;
    const dd_codec_ref_t *ref = &job->codec->ref;
    size_t total, item_off = 0;
    float *delta = NULL;
    dd_status_t status = DD_OK;

    dd_rounds_layout(job, round, op->off);
    total = op->off[job->n_items];
    op->wire = malloc((total ? total : 1) * sizeof(float));
    if (op->wire == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a round's outputs");
    }
    for (size_t j = 0; status == DD_OK && j < job->n_items; j++) {
        const dd_sync_item_t *it = &job->items[j];
        const float *in =
            round == 0 ? op->buf + item_off : op->prev + op->prev_off[j];
        size_t in_bytes = round == 0 ? it->count * sizeof(float)
                                     : (op->prev_off[j + 1] - op->prev_off[j]) *
                                           sizeof(float);
        size_t bytes;
        item_off += it->count;
        if (dd_rounds_of(job, j) <= round) {
            continue;
        }
        if (round == 0 && it->ref != NULL) {
            float *d = realloc(delta, it->count * sizeof(float));
            if (d == NULL) {
                status = DD_ERR_NO_MEMORY;
                break;
            }
            delta = d;
            for (size_t i = 0; i < it->count; i++) {
                delta[i] = in[i] - it->ref[i];
            }
            in = delta;
        }
        status =
            ref->ops->encode_round(ref->codec, it->state, round, in, in_bytes,
                                   op->wire + op->off[j], &bytes);
    }
    free(delta);
    return status;
}

/* Decodes the items whose last round was round from its average. */
static dd_status_t dd_rounds_decode(dd_sched_rounds_op_t *op, unsigned round)
{
    const dd_sync_job_t *job = op->job;
    const dd_codec_ref_t *ref = &job->codec->ref;
    size_t item_off = 0;

    for (size_t j = 0; j < job->n_items; j++) {
        const dd_sync_item_t *it = &job->items[j];
        float *out = op->buf + item_off;
        item_off += it->count;
        if (dd_rounds_of(job, j) != round + 1) {
            continue;
        }
        dd_status_t status = ref->ops->decode_round(
            ref->codec, it->state, op->wire + op->off[j],
            (op->off[j + 1] - op->off[j]) * sizeof(float), out, it->count,
            DD_DTYPE_F32);
        if (status != DD_OK) {
            return status;
        }
        if (it->ref != NULL) {
            for (size_t i = 0; i < it->count; i++) {
                out[i] += it->ref[i];
            }
            memcpy(it->ref, out, it->count * sizeof(float));
        }
    }
    return DD_OK;
}

static dd_status_t dd_rounds_start_inner(dd_route_rounds_t *r,
                                         dd_sched_rounds_op_t *op)
{
    size_t floats = op->off[op->job->n_items];
    const dd_sync_pipe_t *inner = r->inner;

    op->wire_job = *op->job;
    op->wire_job.dtype = DD_DTYPE_F32;
    op->wire_job.bytes = floats * sizeof(float);
    op->wire_job.op = NULL;
    return inner->start(inner->arg, &op->wire_job, op->wire, floats,
                        &op->inner);
}

static dd_status_t dd_rounds_start(void *arg, dd_sync_job_t *job, void *buf,
                                   size_t count, void **handle_p)
{
    dd_route_rounds_t *r = arg;
    dd_sched_rounds_op_t *op = calloc(1, sizeof(*op));
    dd_status_t status = DD_ERR_NO_MEMORY;

    if (op != NULL &&
        (op->off = calloc(job->n_items + 1, sizeof(size_t))) != NULL &&
        (op->prev_off = calloc(job->n_items + 1, sizeof(size_t))) != NULL) {
        op->job = job;
        op->buf = buf;
        status = dd_rounds_encode(op, 0);
    }
    if (status == DD_OK) {
        status = dd_rounds_start_inner(r, op);
    }
    if (status != DD_OK) {
        dd_rounds_op_free(op);
        return status == DD_ERR_NO_MEMORY
                   ? dd_error(status, DD_SUBSYS_SCHED,
                              "no memory to encode %zu elements in %s", count,
                              job->codec->spec)
                   : status;
    }
    *handle_p = op;
    return DD_OK;
}

/* The round in flight is averaged: decode what ends there, start the next
 * round of what does not. DD_INPROGRESS while a round is on the route. */
static dd_status_t dd_rounds_next(dd_route_rounds_t *r,
                                  dd_sched_rounds_op_t *op)
{
    dd_status_t status = dd_rounds_decode(op, op->round);
    int more = 0;

    for (size_t j = 0; j < op->job->n_items; j++) {
        more |= dd_rounds_of(op->job, j) > op->round + 1;
    }
    if (status != DD_OK || !more) {
        return status;
    }
    free(op->prev);
    op->prev = op->wire;
    op->wire = NULL;
    size_t *swap = op->prev_off;
    op->prev_off = op->off;
    op->off = swap;
    op->round++;
    status = dd_rounds_encode(op, op->round);
    if (status == DD_OK) {
        status = dd_rounds_start_inner(r, op);
    }
    return status == DD_OK ? DD_INPROGRESS : status;
}

static dd_status_t dd_rounds_test(void *arg, void *handle, int *busy_p)
{
    dd_route_rounds_t *r = arg;
    dd_sched_rounds_op_t *op = handle;
    const dd_sync_pipe_t *inner = r->inner;
    dd_status_t status = inner->test(inner->arg, op->inner, busy_p);

    if (status == DD_INPROGRESS) {
        return status;
    }
    if (status == DD_OK) {
        status = dd_rounds_next(r, op);
    }
    if (status == DD_INPROGRESS) {
        *busy_p = 1;
        return status;
    }
    dd_rounds_op_free(op);
    return status;
}

void dd_route_rounds_init(dd_route_rounds_t *r, const dd_sync_pipe_t *inner)
{
    r->inner = inner;
    r->pipe = (dd_sync_pipe_t){
        .start = dd_rounds_start, .test = dd_rounds_test, .depth = 1, .arg = r};
}
