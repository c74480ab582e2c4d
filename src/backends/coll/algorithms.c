/*
 * Plans of the shared collectives: which messages go where, in which
 * chunks, and what each step waits for. Pure: no I/O, no clocks. Both sides
 * of every message compute the same message id from the same geometry, so
 * chunks match whatever order they arrive in.
 */
#include "backends/coll/coll.h"
#include "core/reduce.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    dd_coll_plan_t *plan;
    size_t esize;
    size_t chunk; /* elements */
    size_t *off;  /* world + 1 block offsets, elements */
    int rank;
    int world;
    size_t maxc; /* chunks of the largest block */
} dd_coll_ring_t;

static uint32_t dd_coll_push(dd_coll_plan_t *plan, dd_coll_step_kind_t kind,
                             int peer, uint32_t msg, void *dst, const void *src,
                             size_t count, uint32_t dep0, uint32_t dep1)
{
    if (plan->n_steps == plan->cap) {
        size_t cap = plan->cap ? 2 * plan->cap : 64;
        dd_coll_step_t *steps = realloc(plan->steps, cap * sizeof(*steps));
        if (steps == NULL) {
            return 0;
        }
        plan->steps = steps;
        plan->cap = cap;
    }
    dd_coll_step_t *s = &plan->steps[plan->n_steps++];
    s->kind = kind;
    s->peer = peer;
    s->msg = msg;
    s->dst = dst;
    s->src = src;
    s->count = count;
    s->dep[0] = dep0;
    s->dep[1] = dep1;
    return (uint32_t)plan->n_steps;
}

static size_t dd_coll_nchunks(size_t count, size_t chunk)
{
    return (count + chunk - 1) / chunk;
}

static char *dd_coll_at(void *buf, size_t elems, size_t esize)
{
    return (char *)buf + elems * esize;
}

/*
 * Ring reduce-scatter of own into acc: after it, rank r holds block r fully
 * reduced in acc. Step k sends block r-k-1 to r+1 (from own at step 0, when
 * it holds this rank's share only) and receives block r-k-2 from r-1.
 * In place (own == acc), a block arrives in one of two scratch blocks and
 * is reduced into acc. Otherwise it arrives straight in acc, whose blocks
 * are not yet in use, and this rank's share is reduced into it from own:
 * no copy of own, and every receive can be posted at once. send_ids and
 * reduce_ids ((world - 1) * maxc each) return the steps, for what follows.
 */
static int dd_coll_ring_rs(dd_coll_ring_t *g, const void *own, void *acc,
                           void *scratch, uint32_t first, uint32_t *send_ids,
                           uint32_t *reduce_ids)
{
    dd_coll_plan_t *plan = g->plan;
    int n = g->world, r = g->rank;
    size_t half = g->off[1] + 1; /* elements of one scratch block */
    int direct = own != acc;

    for (int k = 0; k < n - 1; k++) {
        int sb = ((r - k - 1) % n + n) % n, rb = ((r - k - 2) % n + n) % n;
        size_t slen = g->off[sb + 1] - g->off[sb];
        size_t rlen = g->off[rb + 1] - g->off[rb];
        const void *from = k == 0 ? own : acc;
        char *sbuf =
            direct ? dd_coll_at(acc, g->off[rb], g->esize)
                   : dd_coll_at(scratch, (size_t)(k % 2) * half, g->esize);
        for (size_t c = 0; c * g->chunk < (slen > rlen ? slen : rlen); c++) {
            size_t at = c * g->chunk;
            uint32_t msg = (uint32_t)((size_t)k * g->maxc + c);
            uint32_t *sid = &send_ids[(size_t)k * g->maxc + c];
            uint32_t *rid = &reduce_ids[(size_t)k * g->maxc + c];
            if (at < slen) {
                uint32_t dep =
                    k ? reduce_ids[(size_t)(k - 1) * g->maxc + c] : first;
                size_t len = slen - at < g->chunk ? slen - at : g->chunk;
                *sid = dd_coll_push(
                    plan, DD_COLL_STEP_SEND, (r + 1) % n, msg, NULL,
                    dd_coll_at((void *)from, g->off[sb] + at, g->esize), len,
                    dep, 0);
                if (*sid == 0) {
                    return -1;
                }
            }
            if (at < rlen) {
                uint32_t dep = k >= 2 && !direct
                                   ? reduce_ids[(size_t)(k - 2) * g->maxc + c]
                                   : 0;
                size_t len = rlen - at < g->chunk ? rlen - at : g->chunk;
                void *tmp = dd_coll_at(sbuf, at, g->esize);
                void *dst = dd_coll_at(acc, g->off[rb] + at, g->esize);
                const void *src =
                    direct ? dd_coll_at((void *)own, g->off[rb] + at, g->esize)
                           : tmp;
                uint32_t rv =
                    dd_coll_push(plan, DD_COLL_STEP_RECV, (r - 1 + n) % n, msg,
                                 tmp, NULL, len, dep, 0);
                *rid = rv ? dd_coll_push(plan, DD_COLL_STEP_REDUCE, -1, 0, dst,
                                         src, len, rv, first)
                          : 0;
                if (*rid == 0) {
                    return -1;
                }
            }
        }
    }
    return 0;
}

/*
 * Ring allgather on buf, whose block r is this rank's: step k sends block
 * r-k to r+1 and receives block r-k-1 from r-1. first_send[c] is what the
 * first send of chunk c waits for; recv_after ((world - 1) * maxc, or NULL)
 * what each receive waits for.
 */
static int dd_coll_ring_ag(dd_coll_ring_t *g, void *buf, uint32_t msg_base,
                           const uint32_t *first_send,
                           const uint32_t *recv_after)
{
    int n = g->world, r = g->rank;
    uint32_t *prev = calloc(g->maxc ? g->maxc : 1, sizeof(*prev));

    if (prev == NULL) {
        return -1;
    }
    for (size_t c = 0; c < g->maxc; c++) {
        prev[c] = first_send[c];
    }
    for (int k = 0; k < n - 1; k++) {
        int sb = ((r - k) % n + n) % n, rb = ((r - k - 1) % n + n) % n;
        size_t slen = g->off[sb + 1] - g->off[sb];
        size_t rlen = g->off[rb + 1] - g->off[rb];
        for (size_t c = 0; c < g->maxc; c++) {
            size_t at = c * g->chunk;
            uint32_t msg = msg_base + (uint32_t)((size_t)k * g->maxc + c);
            if (at < slen) {
                size_t len = slen - at < g->chunk ? slen - at : g->chunk;
                if (!dd_coll_push(g->plan, DD_COLL_STEP_SEND, (r + 1) % n, msg,
                                  NULL,
                                  dd_coll_at(buf, g->off[sb] + at, g->esize),
                                  len, prev[c], 0)) {
                    goto err_free_prev;
                }
            }
            prev[c] = 0;
            if (at < rlen) {
                size_t len = rlen - at < g->chunk ? rlen - at : g->chunk;
                uint32_t dep =
                    recv_after ? recv_after[(size_t)k * g->maxc + c] : 0;
                prev[c] = dd_coll_push(
                    g->plan, DD_COLL_STEP_RECV, (r - 1 + n) % n, msg,
                    dd_coll_at(buf, g->off[rb] + at, g->esize), NULL, len, dep,
                    0);
                if (prev[c] == 0) {
                    goto err_free_prev;
                }
            }
        }
    }
    free(prev);
    return 0;

err_free_prev:
    free(prev);
    return -1;
}

/* Splits count elements into world blocks, chunked; off has world + 1. */
static int dd_coll_ring_init(dd_coll_ring_t *g, dd_coll_plan_t *plan,
                             size_t count, size_t block_count, int rank,
                             int world, size_t chunk_bytes)
{
    g->plan = plan;
    g->esize = dd_coll_dtype_size(plan->dtype);
    g->rank = rank;
    g->world = world;
    g->off = malloc(sizeof(size_t) * ((size_t)world + 1));
    if (g->off == NULL) {
        return -1;
    }
    for (int b = 0; b <= world; b++) {
        g->off[b] = block_count ? (size_t)b * block_count
                                : (size_t)((unsigned __int128)count *
                                           (unsigned)b / (unsigned)world);
    }
    size_t biggest = g->off[world] - g->off[world - 1];
    g->chunk = chunk_bytes / g->esize ? chunk_bytes / g->esize : 1;
    /* Keep every message id of the collective within DD_COLL_MSG_BITS. */
    size_t limit = ((size_t)1 << DD_COLL_MSG_BITS) / (2 * (size_t)world);
    if (dd_coll_nchunks(biggest, g->chunk) > limit) {
        g->chunk = (biggest + limit - 1) / limit;
    }
    g->maxc = dd_coll_nchunks(biggest, g->chunk);
    return 0;
}

/* Ring allreduce of own into acc: reduce-scatter then allgather, chunk by
 * chunk. Only in place does it need scratch. */
static dd_status_t dd_coll_plan_ring_allreduce(dd_coll_plan_t *plan,
                                               const void *own, void *acc,
                                               size_t count, int rank,
                                               int world, size_t chunk_bytes)
{
    dd_coll_ring_t g;
    dd_status_t status = DD_ERR_NO_MEMORY;

    if (dd_coll_ring_init(&g, plan, count, 0, rank, world, chunk_bytes)) {
        return DD_ERR_NO_MEMORY;
    }
    size_t ids = (size_t)(world - 1) * g.maxc;
    uint32_t *send_ids = calloc(ids, sizeof(uint32_t));
    uint32_t *reduce_ids = calloc(ids, sizeof(uint32_t));
    if (own == acc) {
        plan->scratch = malloc(2 * (g.off[1] + 1) * g.esize);
    }
    if (send_ids == NULL || reduce_ids == NULL ||
        (own == acc && plan->scratch == NULL) ||
        dd_coll_ring_rs(&g, own, acc, plan->scratch, 0, send_ids, reduce_ids)) {
        goto out_free_ids;
    }
    /* The first allgather send of a chunk of block r waits for its last
     * reduction; a receive into block r-k-1 waits for that block's send in
     * reduce-scatter step k, which itself came after the block's reduce. */
    if (dd_coll_ring_ag(&g, acc, (uint32_t)ids,
                        &reduce_ids[(size_t)(world - 2) * g.maxc],
                        send_ids) == 0) {
        status = DD_OK;
    }
out_free_ids:
    free(send_ids);
    free(reduce_ids);
    free(g.off);
    return status;
}

/* The partner of newrank's round mask, as a real rank. */
static int dd_coll_rd_partner(int newpeer, int rem)
{
    return newpeer < rem ? 2 * newpeer + 1 : newpeer + rem;
}

/*
 * Recursive doubling allreduce for any world size: with p the largest power
 * of two <= world and rem = world - p, the first 2 * rem ranks fold in
 * pairs (odd ranks keep the sum), the p survivors exchange and reduce whole
 * buffers log2(p) times, and the odd ranks hand the result back.
 */
static dd_status_t dd_coll_plan_rd_allreduce(dd_coll_plan_t *plan, void *acc,
                                             uint32_t prev, size_t count,
                                             int rank, int world)
{
    int p = 1, rounds = 0;
    while (2 * p <= world) {
        p *= 2;
        rounds++;
    }
    int rem = world - p, newrank;
    uint32_t final_msg = (uint32_t)rounds + 1;

    plan->scratch = malloc(count * dd_coll_dtype_size(plan->dtype));
    if (plan->scratch == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    if (rank < 2 * rem && rank % 2 == 0) {
        uint32_t s = dd_coll_push(plan, DD_COLL_STEP_SEND, rank + 1, 0, NULL,
                                  acc, count, prev, 0);
        if (!s || !dd_coll_push(plan, DD_COLL_STEP_RECV, rank + 1, final_msg,
                                acc, NULL, count, s, 0)) {
            return DD_ERR_NO_MEMORY;
        }
        return DD_OK;
    }
    if (rank < 2 * rem) {
        uint32_t rv = dd_coll_push(plan, DD_COLL_STEP_RECV, rank - 1, 0,
                                   plan->scratch, NULL, count, 0, 0);
        prev = rv ? dd_coll_push(plan, DD_COLL_STEP_REDUCE, -1, 0, acc,
                                 plan->scratch, count, rv, prev)
                  : 0;
        if (prev == 0) {
            return DD_ERR_NO_MEMORY;
        }
        newrank = rank / 2;
    } else {
        newrank = rank - rem;
    }
    for (int i = 0; i < rounds; i++) {
        int peer = dd_coll_rd_partner(newrank ^ (1 << i), rem);
        uint32_t s = dd_coll_push(plan, DD_COLL_STEP_SEND, peer,
                                  (uint32_t)i + 1, NULL, acc, count, prev, 0);
        uint32_t rv =
            dd_coll_push(plan, DD_COLL_STEP_RECV, peer, (uint32_t)i + 1,
                         plan->scratch, NULL, count, prev, 0);
        prev = s && rv ? dd_coll_push(plan, DD_COLL_STEP_REDUCE, -1, 0, acc,
                                      plan->scratch, count, rv, s)
                       : 0;
        if (prev == 0) {
            return DD_ERR_NO_MEMORY;
        }
    }
    if (rank < 2 * rem && !dd_coll_push(plan, DD_COLL_STEP_SEND, rank - 1,
                                        final_msg, NULL, acc, count, prev, 0)) {
        return DD_ERR_NO_MEMORY;
    }
    return DD_OK;
}

static dd_status_t dd_coll_plan_allreduce(dd_coll_plan_t *plan,
                                          const dd_backend_args_t *args,
                                          int rank, int world,
                                          size_t chunk_bytes)
{
    size_t bytes = args->count * dd_coll_dtype_size(args->dtype);
    int ring = world > 1 && bytes > DD_COLL_SMALL_BYTES &&
               args->count >= (size_t)world;
    uint32_t first = 0;

    if (args->op == DD_REDUCE_AVG) {
        plan->divide_buf = args->recvbuf;
        plan->divide_count = args->count;
    }
    if (ring) {
        return dd_coll_plan_ring_allreduce(plan, args->sendbuf, args->recvbuf,
                                           args->count, rank, world,
                                           chunk_bytes);
    }
    if (args->sendbuf != args->recvbuf) {
        first = dd_coll_push(plan, DD_COLL_STEP_COPY, -1, 0, args->recvbuf,
                             args->sendbuf, args->count, 0, 0);
        if (first == 0) {
            return DD_ERR_NO_MEMORY;
        }
    }
    if (world == 1) {
        return DD_OK;
    }
    return dd_coll_plan_rd_allreduce(plan, args->recvbuf, first, args->count,
                                     rank, world);
}

static dd_status_t dd_coll_plan_reduce_scatter(dd_coll_plan_t *plan,
                                               const dd_backend_args_t *args,
                                               int rank, int world,
                                               size_t chunk_bytes)
{
    size_t esize = dd_coll_dtype_size(args->dtype), n = args->count;
    const char *mine = (const char *)args->sendbuf + (size_t)rank * n * esize;
    dd_coll_ring_t g;
    dd_status_t status = DD_ERR_NO_MEMORY;

    if (args->op == DD_REDUCE_AVG) {
        plan->divide_buf = args->recvbuf;
        plan->divide_count = n;
    }
    if (world == 1) {
        return dd_coll_push(plan, DD_COLL_STEP_COPY, -1, 0, args->recvbuf, mine,
                            n, 0, 0)
                   ? DD_OK
                   : DD_ERR_NO_MEMORY;
    }
    if (dd_coll_ring_init(&g, plan, 0, n, rank, world, chunk_bytes)) {
        return DD_ERR_NO_MEMORY;
    }
    /* The ring reduces in place, so it works on a copy of sendbuf, placed
     * after the two scratch blocks. */
    size_t ids = (size_t)(world - 1) * g.maxc;
    uint32_t *send_ids = calloc(ids, sizeof(uint32_t));
    uint32_t *reduce_ids = calloc(ids, sizeof(uint32_t));
    plan->scratch = malloc((2 * (n + 1) + (size_t)world * n) * esize);
    if (send_ids == NULL || reduce_ids == NULL || plan->scratch == NULL) {
        goto out_free_ids;
    }
    char *acc = dd_coll_at(plan->scratch, 2 * (n + 1), esize);
    uint32_t first = dd_coll_push(plan, DD_COLL_STEP_COPY, -1, 0, acc,
                                  args->sendbuf, (size_t)world * n, 0, 0);
    if (first == 0 || dd_coll_ring_rs(&g, acc, acc, plan->scratch, first,
                                      send_ids, reduce_ids)) {
        goto out_free_ids;
    }
    const uint32_t *last = &reduce_ids[(size_t)(world - 2) * g.maxc];
    for (size_t c = 0; c < g.maxc; c++) {
        size_t at = c * g.chunk, len = n - at < g.chunk ? n - at : g.chunk;
        if (!dd_coll_push(plan, DD_COLL_STEP_COPY, -1, 0,
                          dd_coll_at(args->recvbuf, at, esize),
                          dd_coll_at(acc, (size_t)rank * n + at, esize), len,
                          last[c], 0)) {
            goto out_free_ids;
        }
    }
    status = DD_OK;
out_free_ids:
    free(send_ids);
    free(reduce_ids);
    free(g.off);
    return status;
}

/* Recursive doubling allgather, for a power-of-two world: round i swaps
 * the 2^i blocks each side holds. */
static dd_status_t dd_coll_plan_rd_allgather(dd_coll_plan_t *plan,
                                             void *recvbuf, size_t n,
                                             uint32_t prev, int rank, int world)
{
    size_t esize = dd_coll_dtype_size(plan->dtype);

    for (int mask = 1; mask < world; mask <<= 1) {
        int peer = rank ^ mask;
        size_t mine = (size_t)(rank & ~(mask - 1)) * n;
        size_t theirs = (size_t)(peer & ~(mask - 1)) * n;
        uint32_t msg = (uint32_t)__builtin_ctz((unsigned)mask);
        uint32_t s = dd_coll_push(plan, DD_COLL_STEP_SEND, peer, msg, NULL,
                                  dd_coll_at(recvbuf, mine, esize),
                                  (size_t)mask * n, prev, 0);
        prev = s ? dd_coll_push(plan, DD_COLL_STEP_RECV, peer, msg,
                                dd_coll_at(recvbuf, theirs, esize), NULL,
                                (size_t)mask * n, 0, 0)
                 : 0;
        if (prev == 0) {
            return DD_ERR_NO_MEMORY;
        }
        /* The next round forwards what this one received and sent. */
        prev = dd_coll_push(plan, DD_COLL_STEP_COPY, -1, 0, NULL, NULL, 0, s,
                            prev);
        if (prev == 0) {
            return DD_ERR_NO_MEMORY;
        }
    }
    return DD_OK;
}

static dd_status_t dd_coll_plan_allgather(dd_coll_plan_t *plan,
                                          const dd_backend_args_t *args,
                                          int rank, int world,
                                          size_t chunk_bytes)
{
    size_t esize = dd_coll_dtype_size(args->dtype), n = args->count;
    dd_coll_ring_t g;

    uint32_t first =
        dd_coll_push(plan, DD_COLL_STEP_COPY, -1, 0,
                     dd_coll_at(args->recvbuf, (size_t)rank * n, esize),
                     args->sendbuf, n, 0, 0);
    if (first == 0) {
        return DD_ERR_NO_MEMORY;
    }
    if (world == 1) {
        return DD_OK;
    }
    if ((world & (world - 1)) == 0 &&
        (size_t)world * n * esize <= DD_COLL_SMALL_BYTES) {
        return dd_coll_plan_rd_allgather(plan, args->recvbuf, n, first, rank,
                                         world);
    }
    if (dd_coll_ring_init(&g, plan, 0, n, rank, world, chunk_bytes)) {
        return DD_ERR_NO_MEMORY;
    }
    uint32_t *firsts = malloc(sizeof(uint32_t) * (g.maxc ? g.maxc : 1));
    dd_status_t status = DD_ERR_NO_MEMORY;
    if (firsts != NULL) {
        for (size_t c = 0; c < g.maxc; c++) {
            firsts[c] = first;
        }
        if (dd_coll_ring_ag(&g, args->recvbuf, 0, firsts, NULL) == 0) {
            status = DD_OK;
        }
    }
    free(firsts);
    free(g.off);
    return status;
}

/* Binomial tree from root, chunk by chunk: a rank forwards chunk c to its
 * children as soon as it has received it. */
static dd_status_t dd_coll_plan_broadcast(dd_coll_plan_t *plan,
                                          const dd_backend_args_t *args,
                                          int rank, int world,
                                          size_t chunk_bytes)
{
    size_t esize = dd_coll_dtype_size(args->dtype), n = args->count;
    size_t chunk = chunk_bytes / esize ? chunk_bytes / esize : 1;
    int vr = (rank - args->root + world) % world, parent = -1, mask = 1;

    if (dd_coll_nchunks(n, chunk) >= ((size_t)1 << DD_COLL_MSG_BITS)) {
        chunk = dd_coll_nchunks(n, ((size_t)1 << DD_COLL_MSG_BITS) - 1);
    }
    while (mask < world) {
        if (vr & mask) {
            parent = (vr - mask + args->root) % world;
            break;
        }
        mask <<= 1;
    }
    for (size_t c = 0; c * chunk < n; c++) {
        size_t len = n - c * chunk < chunk ? n - c * chunk : chunk;
        char *at = dd_coll_at(args->recvbuf, c * chunk, esize);
        uint32_t got = 0;
        if (parent >= 0) {
            got = dd_coll_push(plan, DD_COLL_STEP_RECV, parent, (uint32_t)c, at,
                               NULL, len, 0, 0);
            if (got == 0) {
                return DD_ERR_NO_MEMORY;
            }
        }
        for (int m = mask >> 1; m > 0; m >>= 1) {
            if (vr + m < world &&
                !dd_coll_push(plan, DD_COLL_STEP_SEND,
                              (vr + m + args->root) % world, (uint32_t)c, NULL,
                              at, len, got, 0)) {
                return DD_ERR_NO_MEMORY;
            }
        }
    }
    return DD_OK;
}

dd_status_t dd_coll_plan_build(dd_coll_plan_t *plan, dd_coll_t coll,
                               const dd_backend_args_t *args, int rank,
                               int world, size_t chunk_bytes)
{
    dd_status_t status;

    memset(plan, 0, sizeof(*plan));
    plan->dtype = args->dtype;
    plan->op = args->op;
    plan->divisor = world;
    if (dd_coll_dtype_size(args->dtype) == 0 ||
        (unsigned)args->op >= DD_REDUCE_LAST || world < 1 || rank < 0 ||
        rank >= world || chunk_bytes == 0) {
        return DD_ERR_INVALID_PARAM;
    }
    if (args->count == 0) {
        return DD_OK;
    }
    switch (coll) {
    case DD_COLL_ALLREDUCE:
        status = dd_coll_plan_allreduce(plan, args, rank, world, chunk_bytes);
        break;
    case DD_COLL_REDUCE_SCATTER:
        status =
            dd_coll_plan_reduce_scatter(plan, args, rank, world, chunk_bytes);
        break;
    case DD_COLL_ALLGATHER:
        status = dd_coll_plan_allgather(plan, args, rank, world, chunk_bytes);
        break;
    case DD_COLL_BROADCAST:
        status =
            args->root >= 0 && args->root < world
                ? dd_coll_plan_broadcast(plan, args, rank, world, chunk_bytes)
                : DD_ERR_INVALID_PARAM;
        break;
    default:
        status = DD_ERR_INVALID_PARAM;
        break;
    }
    if (status != DD_OK) {
        dd_coll_plan_release(plan);
    }
    return status;
}

void dd_coll_plan_release(dd_coll_plan_t *plan)
{
    free(plan->steps);
    free(plan->scratch);
    memset(plan, 0, sizeof(*plan));
}

uint32_t dd_coll_signature(dd_coll_t coll, const dd_backend_args_t *args)
{
    uint64_t fields[5] = {(uint64_t)coll, (uint64_t)args->dtype,
                          (uint64_t)args->op, (uint64_t)args->count,
                          (uint64_t)args->root};
    uint64_t h = 1469598103934665603ull; /* FNV-1a */

    if (coll != DD_COLL_ALLREDUCE && coll != DD_COLL_REDUCE_SCATTER) {
        fields[2] = 0;
    }
    if (coll != DD_COLL_BROADCAST) {
        fields[4] = 0;
    }
    for (size_t i = 0; i < sizeof(fields); i++) {
        h = (h ^ ((const uint8_t *)fields)[i]) * 1099511628211ull;
    }
    return (uint32_t)(h ^ (h >> 11) ^ (h >> 22) ^ (h >> 33)) & 0x7ffu;
}

uint64_t dd_coll_tag(uint32_t sig, uint32_t seq, uint32_t msg)
{
    return (1ull << 47) | ((uint64_t)(sig & 0x7ffu) << 36) |
           ((uint64_t)(seq & 0xffffu) << DD_COLL_MSG_BITS) |
           (msg & ((1u << DD_COLL_MSG_BITS) - 1));
}
