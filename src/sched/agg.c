/*
 * Aggregation's shared pieces: the BytePS load split, the choice of homes,
 * the transport over the job's point-to-point backend, and header checks.
 */
#include "backends/registry.h"
#include "core/log.h"
#include "sched/agg_impl.h"
#include "sched/context.h"
#include "sched/sched.h"

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

int dd_agg_pick_home(const double *weight, double *load, int n_homes,
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
    if (best >= 0) {
        load[best] += (double)bytes;
    }
    return best;
}

uint64_t dd_agg_tag(int kind, uint64_t seq)
{
    /* Bit 46 keeps aggregation apart from the collectives' tags (bit 47). */
    return (1ull << 46) | ((uint64_t)kind << 40) | (seq & ((1ull << 40) - 1));
}

dd_status_t dd_agg_transport_init(struct dd_context *ctx, dd_agg_transport_t *t)
{
    dd_backend_ref_t ref;
    dd_status_t status = dd_backends_pick_op(ctx->backends, DD_BACKEND_OP_SEND,
                                             DD_MEM_HOST, 4u << 20, &ref);
    if (status != DD_OK) {
        return dd_error(status, DD_SUBSYS_AGG,
                        "aggregation needs a point-to-point backend (ucx or "
                        "gloo): %s",
                        dd_status_string(status));
    }
    t->ctx = ctx;
    t->ops = ref.ops;
    t->backend = ref.instance;
    t->token = ctx->token_hash;
    dd_log_debug(DD_SUBSYS_AGG, "aggregation over %s", ref.ops->name);
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

void dd_agg_cancel(dd_agg_transport_t *t, dd_agg_req_t *req)
{
    if (req != NULL) {
        t->ops->cancel(t->backend, req);
    }
}

int dd_agg_hdr_valid(const dd_agg_transport_t *t, const dd_agg_hdr_t *h,
                     uint32_t kind, int sender, char *why, size_t size)
{
    if (h->magic != DD_AGG_MAGIC) {
        snprintf(why, size, "not an aggregation header (magic %08x)", h->magic);
    } else if (h->token != t->token) {
        snprintf(why, size, "the job token differs");
    } else if (h->sender != sender) {
        snprintf(why, size, "it claims to come from rank %d", h->sender);
    } else if (h->kind != kind &&
               !(kind == DD_AGG_PUSH && h->kind == DD_AGG_BYE)) {
        snprintf(why, size, "unexpected message kind %u", h->kind);
    } else if (h->kind != DD_AGG_BYE &&
               !dd_agg_dtype_ok((dd_dtype_t)h->dtype)) {
        snprintf(why, size, "unsupported dtype %u", h->dtype);
    } else {
        return 1;
    }
    return 0;
}

void dd_agg_layer_name(struct dd_context *ctx, uint32_t layer, char *buf,
                       size_t size)
{
    /* Workers know their table; an aggregator reads the first worker's
     * from the store, where dd_model_commit left it. */
    if (ctx->sched != NULL && layer < ctx->sched->n_layers) {
        snprintf(buf, size, "'%s'", ctx->sched->layers[layer]->name);
        return;
    }
    char key[64], *table = NULL;
    size_t len;
    int exists = 0;
    snprintf(key, sizeof(key), "dd/layers/%d",
             ctx->n_workers > 0 ? ctx->worker_ranks[0] : 0);
    if (dd_store_check(ctx->store, key, &exists) == DD_OK && exists &&
        dd_store_get(ctx->store, key, (void **)&table, &len) == DD_OK) {
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
