/*
 * Aggregation's shared pieces: the BytePS load split, the choice of homes,
 * the transport over the job's point-to-point backend, and header checks.
 */
#include "agg/wire.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double dd_agg_share(int n, int k)
{
    if (k <= 0) {
        return 0.0;
    }
    if (k >= n) {
        return 1.0;
    }
    return 2.0 * k * (n - 1) / ((double)n * n + (double)k * n - 2.0 * k);
}

double dd_agg_model_s(int n, int k, double bytes, double bytes_per_s)
{
    if (n <= 1) {
        return 0.0;
    }
    int kk = k > n ? n : k;
    return 2.0 * n * (n - 1) * bytes /
           (((double)n * n + (double)kk * n - 2.0 * kk) * bytes_per_s);
}

int dd_agg_next_home(const double *weight, const double *load, int n_homes,
                     size_t bytes)
{
    int best = -1;
    double best_fill = 0;

    for (int h = 0; h < n_homes; h++) {
        if (weight[h] <= 0) {
            continue;
        }
        double fill = (load[h] + (double)bytes) / weight[h];
        if (best < 0 || fill < best_fill) {
            best = h;
            best_fill = fill;
        }
    }
    return best;
}

int dd_agg_pick_home(const double *weight, double *load, int n_homes,
                     size_t bytes)
{
    int best = dd_agg_next_home(weight, load, n_homes, bytes);
    if (best >= 0) {
        load[best] += (double)bytes;
    }
    return best;
}

/* A multiple of every stream count (1 to 8): the backends send a message
 * on connection (tag mod streams), and every tag of the aggregation route
 * is 0 mod all of them, so all of it goes over the first connection to
 * each peer. Its push headers must arrive in the order sent, on one
 * connection; a piece's data sent on another one arrived before its
 * header and its receive (UCX then holds it as unexpected), and 100 MB
 * through 4 aggregators at 1 Gbit/s took 1.07-1.23 s with 4 streams
 * against 0.95-1.05 s with 1. The route still spreads over connections:
 * each piece goes to its home, every home its own peer. */
#define DD_AGG_TAG_STRIDE 840u

void dd_agg_round_key(int round, int w, char *key, size_t size)
{
    if (w < 0) {
        snprintf(key, size, "dd/agg/round/%d/n", round);
    } else {
        snprintf(key, size, "dd/agg/round/%d/%d", round, w);
    }
}

uint64_t dd_agg_tag(int kind, uint64_t seq)
{
    /* Bit 46 keeps aggregation apart from the collectives' tags (bit 47);
     * the low 40 bits are the sequence number's multiple of the stride,
     * offset so that the whole tag is one too. */
    uint64_t high = (1ull << 46) | ((uint64_t)kind << 40);
    uint64_t offset =
        (DD_AGG_TAG_STRIDE - high % DD_AGG_TAG_STRIDE) % DD_AGG_TAG_STRIDE;
    return high | ((seq * DD_AGG_TAG_STRIDE + offset) & ((1ull << 40) - 1));
}

dd_status_t dd_agg_transport_init(const dd_agg_env_t *env,
                                  dd_agg_transport_t *t)
{
    if (env->ops == NULL) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_AGG,
                        "aggregation needs a point-to-point backend (ucx or "
                        "gloo), and none is loaded");
    }
    t->env = env;
    t->ops = env->ops;
    t->backend = env->backend;
    t->token = env->job->token_hash;
    dd_log_debug(DD_SUBSYS_AGG, "aggregation over %s", env->ops->name);
    return DD_OK;
}

static dd_status_t dd_agg_start(dd_agg_transport_t *t, dd_backend_op_fn_t op,
                                int peer, uint64_t tag, const void *sendbuf,
                                void *recvbuf, size_t bytes,
                                dd_agg_req_t **req_p)
{
    dd_backend_args_t args = {.sendbuf = sendbuf,
                              .recvbuf = recvbuf,
                              .count = bytes,
                              .dtype = DD_DTYPE_U8,
                              .peer = peer,
                              .tag = tag,
                              .mem_type = DD_MEM_HOST};

    return op(t->backend, &args, req_p);
}

dd_status_t dd_agg_send(dd_agg_transport_t *t, int peer, uint64_t tag,
                        const void *buf, size_t bytes, dd_agg_req_t **req_p)
{
    return dd_agg_start(t, t->ops->send, peer, tag, buf, NULL, bytes, req_p);
}

dd_status_t dd_agg_recv(dd_agg_transport_t *t, int peer, uint64_t tag,
                        void *buf, size_t bytes, dd_agg_req_t **req_p)
{
    return dd_agg_start(t, t->ops->recv, peer, tag, NULL, buf, bytes, req_p);
}

dd_status_t dd_agg_test(dd_agg_transport_t *t, dd_agg_req_t *req)
{
    return t->ops->test(t->backend, req);
}

dd_status_t dd_agg_check(dd_agg_transport_t *t, dd_agg_req_t *req)
{
    return t->ops->check(t->backend, req);
}

void dd_agg_progress(dd_agg_transport_t *t)
{
    t->ops->progress(t->backend);
}

void dd_agg_idle(dd_agg_transport_t *t, double timeout_s)
{
    t->ops->idle(t->backend, timeout_s);
}

void dd_agg_cancel(dd_agg_transport_t *t, dd_agg_req_t *req)
{
    if (req != NULL) {
        t->ops->cancel(t->backend, req);
    }
}

/* Whether a header of kind is welcome where want is expected: a home takes
 * both kinds of push and goodbyes on its header stream. */
static int dd_agg_kind_ok(uint32_t kind, uint32_t want)
{
    return kind == want || (want == DD_AGG_PUSH &&
                            (kind == DD_AGG_BYE || kind == DD_AGG_RESET ||
                             kind == DD_AGG_PUSH_SPARSE));
}

int dd_agg_hdr_valid(const dd_agg_transport_t *t, const dd_agg_hdr_t *h,
                     uint32_t kind, int sender, char *why, size_t size)
{
    int sparse =
        h->kind == DD_AGG_PUSH_SPARSE || h->kind == DD_AGG_RESULT_SPARSE;

    if (h->magic != DD_AGG_MAGIC) {
        snprintf(why, size, "not an aggregation header (magic %08x)", h->magic);
    } else if (h->version != DD_AGG_VERSION) {
        snprintf(why, size,
                 "wire version %u, where this rank speaks %u: are all ranks "
                 "of one build?",
                 h->version, DD_AGG_VERSION);
    } else if (h->token != t->token) {
        snprintf(why, size, "the job token differs");
    } else if (h->sender != sender) {
        snprintf(why, size, "it claims to come from rank %d", h->sender);
    } else if (!dd_agg_kind_ok(h->kind, kind)) {
        snprintf(why, size, "unexpected message kind %u", h->kind);
    } else if (h->kind != DD_AGG_BYE && h->kind != DD_AGG_RESET &&
               !dd_agg_dtype_ok((dd_dtype_t)h->dtype)) {
        snprintf(why, size, "unsupported dtype %u", h->dtype);
    } else if (sparse && h->dtype != DD_DTYPE_F32) {
        snprintf(why, size, "a sparse piece of dtype %u, not f32", h->dtype);
    } else if (h->format > DD_AGG_FMT_PAIRS ||
               (!sparse && h->format != DD_AGG_FMT_DENSE)) {
        snprintf(why, size, "unknown format %u for message kind %u", h->format,
                 h->kind);
    } else if (h->format == DD_AGG_FMT_DENSE && h->nnz != 0) {
        snprintf(why, size, "%llu pairs in a dense piece",
                 (unsigned long long)h->nnz);
    } else if (h->status > 0) {
        snprintf(why, size, "status %d is neither success nor an error",
                 h->status);
    } else if (h->kind != DD_AGG_BYE && (h->seq >> 40) != 0) {
        /* Tags carry 40 bits of it: a larger one would alias another. */
        snprintf(why, size, "sequence number %llu is out of range",
                 (unsigned long long)h->seq);
    } else {
        return 1;
    }
    return 0;
}

int dd_agg_hdr_bytes(const dd_agg_hdr_t *h, size_t cap, size_t *bytes_p,
                     char *why, size_t size)
{
    size_t esize = dd_dtype_size((dd_dtype_t)h->dtype);
    uint64_t bytes, end, pair_bytes = 0;

    /* Every product and sum of header fields is checked before it sizes a
     * receive or a summation: a wrapped one would pass the bound below. */
    if (h->count == 0) {
        snprintf(why, size, "an empty chunk");
    } else if (esize == 0 || __builtin_mul_overflow(h->count, esize, &bytes) ||
               bytes > cap) {
        snprintf(why, size,
                 "%llu elements of dtype %u do not fit a chunk of %zu bytes",
                 (unsigned long long)h->count, h->dtype, cap);
    } else if (__builtin_add_overflow(h->offset, h->count, &end) ||
               end > SIZE_MAX / esize) {
        snprintf(why, size, "offset %llu and %llu elements run past any buffer",
                 (unsigned long long)h->offset, (unsigned long long)h->count);
    } else if (h->format == DD_AGG_FMT_PAIRS &&
               (h->nnz > h->count ||
                __builtin_mul_overflow(h->nnz, 2 * sizeof(uint32_t),
                                       &pair_bytes) ||
                pair_bytes > cap)) {
        snprintf(why, size,
                 "%llu pairs in a chunk of %llu elements (%zu bytes at most)",
                 (unsigned long long)h->nnz, (unsigned long long)h->count, cap);
    } else {
        *bytes_p = (size_t)(h->format == DD_AGG_FMT_PAIRS ? pair_bytes : bytes);
        return 1;
    }
    return 0;
}

int dd_agg_pairs_valid(const uint32_t *idx, uint64_t nnz, uint64_t count,
                       char *why, size_t size)
{
    for (uint64_t j = 0, next = 0; j < nnz; j++) {
        uint32_t i;
        memcpy(&i, idx + j, sizeof(i));
        if (i >= count || i < next) { /* increasing, so no repeats */
            snprintf(why, size,
                     "offset %u of pair %llu of %llu is %s the chunk's %llu "
                     "elements",
                     (unsigned)i, (unsigned long long)j,
                     (unsigned long long)nnz,
                     i >= count ? "out of" : "out of order in",
                     (unsigned long long)count);
            return 0;
        }
        next = (uint64_t)i + 1;
    }
    return 1;
}

void dd_agg_layer_name(const dd_agg_env_t *env, uint32_t layer, char *buf,
                       size_t size)
{
    /* Only error messages name layers: read the first worker's table from
     * the store, where dd_model_commit left it, on workers and aggregators
     * alike. */
    const dd_job_t *job = env->job;
    char key[64], *table = NULL;
    size_t len;
    int exists = 0;
    snprintf(key, sizeof(key), "dd/layers/%d",
             job->n_workers > 0 ? job->worker_ranks[0] : 0);
    if (job->store != NULL &&
        dd_store_check(job->store, key, &exists) == DD_OK && exists &&
        dd_store_get(job->store, key, (void **)&table, &len) == DD_OK) {
        const char *line = table;
        for (uint32_t i = 0; i < layer && line != NULL; i++) {
            line = strchr(line, '\n');
            line = line ? line + 1 : NULL;
        }
        if (line != NULL && *line != '\0') {
            snprintf(buf, size, "'%.*s'", (int)strcspn(line, " \n"), line);
            free(table);
            return;
        }
    }
    free(table);
    snprintf(buf, size, "%u", layer);
}

int dd_agg_declare_lost(dd_store_t *store, int rank, const char *why)
{
    char key[64];
    int64_t claims = 0;
    int exists = 0;

    snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d", rank);
    if (dd_store_check(store, key, &exists) != DD_OK || exists) {
        return 0;
    }
    snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d/claim", rank);
    if (dd_store_add(store, key, 1, &claims) != DD_OK || claims != 1) {
        return 0;
    }
    /* why and the key before the count, which readers take as the sign
     * to look at the keys. */
    snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d/why", rank);
    dd_store_set(store, key, why, strlen(why));
    snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d", rank);
    dd_store_set(store, key, "1", 1);
    dd_store_add(store, DD_STORE_LOSTS_KEY, 1, NULL);
    return 1;
}

int dd_agg_is_lost(dd_store_t *store, int rank)
{
    char key[64];
    int exists = 0;

    snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d", rank);
    return dd_store_check(store, key, &exists) == DD_OK && exists;
}
