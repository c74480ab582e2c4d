/* libFuzzer target: an aggregation home fed crafted messages. The input is
 * a stream of 257-byte records: a byte naming the sending worker and a
 * 256-byte header, delivered on the header stream; whenever the home posts
 * a data receive, the fake transport fills it (a sparse piece's offsets
 * then read 0x3c3c3c3c, past any chunk, or, with bit 2 of the record's
 * first byte, a run of 0, 1, 2, ...). Every header the home takes
 * must size its receive within the chunk, and the home must never crash,
 * write past a buffer or sum what it refused. */
#include "agg/wire.h"
#include "core/log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN 0xa66ull
#define CHUNK 1024
#define MAX_REQS 4096

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct dd_backend_request {
    int is_send, done, released, peer;
    uint64_t tag;
    void *buf;
    size_t bytes;
};

static struct dd_backend_request reqs[MAX_REQS];
static int n_reqs;

static dd_status_t fake_op(const dd_backend_args_t *a,
                           dd_backend_request_t **req_p, int is_send)
{
    if (n_reqs == MAX_REQS) {
        return DD_ERR_NO_MEMORY; /* the home reports it: a lost peer */
    }
    struct dd_backend_request *r = &reqs[n_reqs++];
    *r = (struct dd_backend_request){.is_send = is_send,
                                     .done = is_send,
                                     .peer = a->peer,
                                     .tag = a->tag,
                                     .buf = a->recvbuf,
                                     .bytes = a->count};
    if (is_send && a->count > 0) {
        /* Reading all of a send finds a source past its buffer. */
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < a->count; i++) {
            sum += ((const uint8_t *)a->sendbuf)[i];
        }
    }
    *req_p = r;
    return DD_OK;
}

static dd_status_t fake_send(dd_backend_t *b, const dd_backend_args_t *a,
                             dd_backend_request_t **req_p)
{
    return fake_op(a, req_p, 1);
}

static dd_status_t fake_recv(dd_backend_t *b, const dd_backend_args_t *a,
                             dd_backend_request_t **req_p)
{
    if ((a->tag >> 40 & 0x3f) == DD_AGG_TAG_DATA && a->count > CHUNK) {
        abort(); /* a receive larger than the chunk: the check failed */
    }
    return fake_op(a, req_p, 0);
}

static dd_status_t fake_test(dd_backend_t *b, dd_backend_request_t *r)
{
    if (!r->done) {
        return DD_INPROGRESS;
    }
    r->released = 1;
    return DD_OK;
}

static void fake_cancel(dd_backend_t *b, dd_backend_request_t *r)
{
    r->released = 1;
}

static void fake_progress(dd_backend_t *b)
{
    (void)b;
}

static void fake_idle(dd_backend_t *b, double timeout_s)
{
    (void)b;
    (void)timeout_s;
}

static const dd_backend_ops_t ops = {.name = "fuzz",
                                     .send = fake_send,
                                     .recv = fake_recv,
                                     .test = fake_test,
                                     .check = fake_test,
                                     .cancel = fake_cancel,
                                     .progress = fake_progress,
                                     .idle = fake_idle};
static const int workers[2] = {0, 1};
static const dd_role_t roles[3] = {DD_ROLE_WORKER, DD_ROLE_WORKER,
                                   DD_ROLE_AGGREGATOR};
static const dd_job_t job = {.rank = 2,
                             .world_size = 3,
                             .role = DD_ROLE_AGGREGATOR,
                             .roles = roles,
                             .n_workers = 2,
                             .worker_ranks = workers,
                             .timeout_s = 1e6,
                             .token_hash = TOKEN};
static const dd_agg_env_t env = {
    .job = &job, .chunk_bytes = CHUNK, .ops = &ops};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    dd_log_configure(DD_LOG_ERROR, 0, "/dev/null", 2);
    return 0;
}

static int counting; /* data receives get 0, 1, 2, ... */

/* Fills the oldest open receive from peer on a tag of this kind. */
static int deliver(int peer, int kind, const void *msg, size_t len)
{
    for (int i = 0; i < n_reqs; i++) {
        struct dd_backend_request *r = &reqs[i];
        if (!r->is_send && !r->done && !r->released && r->peer == peer &&
            (int)(r->tag >> 40 & 0x3f) == kind) {
            if (msg != NULL) {
                memcpy(r->buf, msg, len < r->bytes ? len : r->bytes);
            } else if (counting) {
                for (size_t j = 0; j < r->bytes / 4; j++) {
                    ((uint32_t *)r->buf)[j] = (uint32_t)j;
                }
            } else {
                memset(r->buf, 0x3c, r->bytes); /* f16/bf16/f32: finite */
            }
            r->done = 1;
            return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dd_agg_transport_t t;
    dd_agg_server_t *s;
    int busy;

    n_reqs = 0;
    if (dd_agg_transport_init(&env, &t) != DD_OK ||
        dd_agg_server_create(&env, &t, -1, &s) != DD_OK) {
        abort();
    }
    dd_agg_server_progress(s, &busy);
    for (size_t off = 0; off + 1 + sizeof(dd_agg_hdr_t) <= size;
         off += 1 + sizeof(dd_agg_hdr_t)) {
        dd_agg_hdr_t h;
        int peer = data[off] & 1;
        memcpy(&h, data + off + 1, sizeof(h));
        /* Half the headers carry the right token and sender, so that the
         * checks after those are reached. */
        if (data[off] & 2) {
            h.magic = DD_AGG_MAGIC;
            h.version = DD_AGG_VERSION;
            h.token = TOKEN;
            h.sender = peer;
        }
        counting = (data[off] & 4) != 0;
        deliver(peer, DD_AGG_TAG_HDR, &h, sizeof(h));
        for (int k = 0; k < 3; k++) {
            dd_agg_server_progress(s, &busy);
            deliver(0, DD_AGG_TAG_DATA, NULL, 0);
            deliver(1, DD_AGG_TAG_DATA, NULL, 0);
        }
    }
    dd_agg_server_progress(s, &busy);
    dd_agg_server_destroy(s);
    return 0;
}
