/* A home's server against crafted messages: headers with each field at its
 * extremes are rejected naming the sender, before any data receive is posted
 * or any sum runs, and the server lives on; goodbyes count once per worker.
 * Sparse pieces (topk's pairs) are scattered in worker order and answered
 * as pairs or dense, whichever is smaller; a piece whose offsets leave the
 * chunk or repeat is rejected naming the worker and the layer. A receive
 * canceled by a RESET that lands late reaches no later sum. A RESET is
 * taken only when the store (a file store here) records its recovery
 * round complete with its numbering and the round is newer than the
 * sender's last: else it is refused naming the sender, and every push is
 * summed as before. 3e38 from every worker averages to 3e38.
 * The transport is an in-memory fake backend that records what the server
 * posts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agg/wire.h"
#include "core/half.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOKEN 0x5eed5eedull
#define CHUNK_BYTES 4096
#define MAX_REQS 512

struct dd_backend_request {
    int used, is_send, done, released;
    int peer;
    uint64_t tag;
    void *buf;
    const void *src; /* a send's data */
    size_t bytes;
};

static struct dd_backend_request reqs[MAX_REQS];
static int n_reqs;

static dd_status_t fake_op(dd_backend_t *b, const dd_backend_args_t *args,
                           dd_backend_request_t **req_p, int is_send)
{
    (void)b;
    assert_true(n_reqs < MAX_REQS);
    struct dd_backend_request *r = &reqs[n_reqs++];
    *r = (struct dd_backend_request){.used = 1,
                                     .is_send = is_send,
                                     .peer = args->peer,
                                     .tag = args->tag,
                                     .buf = args->recvbuf,
                                     .src = args->sendbuf,
                                     .bytes = args->count};
    /* Sends complete at once: the fake has no flow control. */
    r->done = is_send;
    *req_p = r;
    return DD_OK;
}

static dd_status_t fake_send(dd_backend_t *b, const dd_backend_args_t *args,
                             dd_backend_request_t **req_p)
{
    return fake_op(b, args, req_p, 1);
}

static dd_status_t fake_recv(dd_backend_t *b, const dd_backend_args_t *args,
                             dd_backend_request_t **req_p)
{
    return fake_op(b, args, req_p, 0);
}

static dd_status_t fake_test(dd_backend_t *b, dd_backend_request_t *r)
{
    (void)b;
    assert_false(r->released);
    if (!r->done) {
        return DD_INPROGRESS;
    }
    r->released = 1;
    return DD_OK;
}

static void fake_cancel(dd_backend_t *b, dd_backend_request_t *r)
{
    (void)b;
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

static const dd_backend_ops_t fake_ops = {.name = "fake",
                                          .recv = fake_recv,
                                          .send = fake_send,
                                          .test = fake_test,
                                          .check = fake_test,
                                          .cancel = fake_cancel,
                                          .progress = fake_progress,
                                          .idle = fake_idle};

static const int worker_ranks[2] = {0, 1};
static const dd_role_t roles[3] = {DD_ROLE_WORKER, DD_ROLE_WORKER,
                                   DD_ROLE_AGGREGATOR};
static dd_job_t job = {.rank = 2,
                       .world_size = 3,
                       .role = DD_ROLE_AGGREGATOR,
                       .roles = roles,
                       .n_workers = 2,
                       .worker_ranks = worker_ranks,
                       .timeout_s = 30,
                       .token_hash = TOKEN};
static dd_agg_env_t env = {
    .job = &job, .chunk_bytes = CHUNK_BYTES, .ops = &fake_ops};

typedef struct {
    dd_agg_transport_t t;
    dd_agg_server_t *s;
} fixture_t;

static dd_status_t progress(fixture_t *f, int times);
static fixture_t *fixture_now; /* for push_pairs' progress */

static char store_dir[64];
static char log_path[96];

static int setup(void **state)
{
    static fixture_t f;
    memset(reqs, 0, sizeof(reqs));
    n_reqs = 0;
    snprintf(store_dir, sizeof(store_dir), "/tmp/dd-test-aggsrv-XXXXXX");
    assert_non_null(mkdtemp(store_dir));
    assert_int_equal(
        dd_store_file_open(store_dir, 42, job.rank, 3, 5.0, &job.store), DD_OK);
    assert_int_equal(dd_agg_transport_init(&env, &f.t), DD_OK);
    assert_int_equal(dd_agg_server_create(&env, &f.t, -1, &f.s), DD_OK);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    char cmd[128];
    dd_agg_server_destroy(f->s);
    dd_store_close(job.store);
    job.store = NULL;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", store_dir);
    return system(cmd);
}

/* Writes recovery round `round` as the workers do (client.c): worker w's
 * row numbering on from next_seq[w], for `rows` of the 2 workers. */
static void record_round(int round, int rows, const uint64_t *next_seq)
{
    unsigned char row[sizeof(dd_agg_row_t) + 3] = {0};
    char key[64];
    for (int w = 0; w < rows; w++) {
        dd_agg_row_t head = {.next_seq = next_seq[w]};
        memcpy(row, &head, sizeof(head));
        dd_agg_round_key(round, w, key, sizeof(key));
        assert_int_equal(dd_store_set(job.store, key, row, sizeof(row)), DD_OK);
        dd_agg_round_key(round, -1, key, sizeof(key));
        assert_int_equal(dd_store_add(job.store, key, 1, NULL), DD_OK);
    }
}

/* Whether the log holds text. */
static int logged(const char *text)
{
    char buf[16384];
    FILE *f = fopen(log_path, "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

static dd_status_t progress(fixture_t *f, int times)
{
    dd_status_t st = DD_OK;
    int busy;
    for (int i = 0; i < times; i++) {
        st = dd_agg_server_progress(f->s, &busy);
    }
    return st;
}

/* Delivers bytes from peer on tag to the oldest matching receive. */
static void deliver(int peer, uint64_t tag, const void *msg, size_t bytes)
{
    for (int i = 0; i < n_reqs; i++) {
        struct dd_backend_request *r = &reqs[i];
        if (!r->is_send && !r->done && !r->released && r->peer == peer &&
            r->tag == tag) {
            assert_true(bytes <= r->bytes);
            memcpy(r->buf, msg, bytes);
            r->done = 1;
            return;
        }
    }
    fail_msg("no receive posted from rank %d on tag %llx", peer,
             (unsigned long long)tag);
}

static dd_agg_hdr_t push_hdr(int sender, uint64_t seq, uint64_t count)
{
    dd_agg_hdr_t h;
    memset(&h, 0, sizeof(h));
    h.magic = DD_AGG_MAGIC;
    h.version = DD_AGG_VERSION;
    h.kind = DD_AGG_PUSH;
    h.token = TOKEN;
    h.seq = seq;
    h.count = count;
    h.dtype = DD_DTYPE_F32;
    h.sender = sender;
    return h;
}

static void send_hdr(int sender, const dd_agg_hdr_t *h)
{
    deliver(sender, dd_agg_tag(DD_AGG_TAG_HDR, 0), h, sizeof(*h));
}

/* Receives posted for data, and result sends, since the start. */
static int count_reqs(int tag_kind)
{
    int n = 0;
    for (int i = 0; i < n_reqs; i++) {
        if (((reqs[i].tag >> 40) & 0x3f) == (uint64_t)tag_kind) {
            n++;
        }
    }
    return n;
}

static void test_valid_push_posts_exact_receive(void **state)
{
    fixture_t *f = *state;
    progress(f, 1);
    dd_agg_hdr_t h = push_hdr(1, 0, 100);
    send_hdr(1, &h);
    assert_int_equal(progress(f, 2), DD_OK);
    assert_int_equal(count_reqs(DD_AGG_TAG_DATA), 1);
    for (int i = 0; i < n_reqs; i++) {
        if (((reqs[i].tag >> 40) & 0x3f) == DD_AGG_TAG_DATA) {
            assert_int_equal(reqs[i].bytes, 100 * sizeof(float));
            assert_int_equal(reqs[i].peer, 1);
        }
    }
}

/* One crafted header from rank 1: refused, rank named, nothing received
 * into a buffer, nothing summed or sent, and the server keeps going. */
static void expect_rejected(fixture_t *f, const dd_agg_hdr_t *h,
                            const char *reason)
{
    progress(f, 1);
    send_hdr(1, h);
    assert_int_equal(progress(f, 3), DD_ERR_MESSAGE);
    const char *why = dd_agg_server_why(f->s);
    if (strstr(why, "from rank 1") == NULL || strstr(why, reason) == NULL) {
        fail_msg("why '%s' does not name rank 1 and '%s'", why, reason);
    }
    assert_int_equal(count_reqs(DD_AGG_TAG_DATA), 0);
    assert_int_equal(count_reqs(DD_AGG_TAG_RDATA), 0);
    /* Alive: it still takes headers and answers with the failure. */
    dd_agg_hdr_t ok = push_hdr(0, 0, 8);
    send_hdr(0, &ok);
    assert_int_equal(progress(f, 3), DD_ERR_MESSAGE);
    assert_int_equal(count_reqs(DD_AGG_TAG_RDATA), 0);
}

#define CRAFTED(name, field_expr, reason)                                      \
    static void test_##name(void **state)                                      \
    {                                                                          \
        dd_agg_hdr_t h = push_hdr(1, 0, 16);                                   \
        field_expr;                                                            \
        expect_rejected(*state, &h, reason);                                   \
    }

/* count * 4 wraps to 0 and count * 2 to 0: the sums used to run past the
 * buffer (heap-buffer-overflow) since the wrapped product passed. */
CRAFTED(count_wraps_f32, h.count = 1ull << 62, "do not fit")
CRAFTED(count_wraps_f16, (h.count = 1ull << 63, h.dtype = DD_DTYPE_F16),
        "do not fit")
CRAFTED(count_wraps_f64, h.count = (UINT64_MAX / 8) + 2, "do not fit")
CRAFTED(count_max, h.count = UINT64_MAX, "do not fit")
CRAFTED(count_zero, h.count = 0, "empty chunk")
CRAFTED(count_one_too_many, h.count = CHUNK_BYTES / 4 + 1, "do not fit")
CRAFTED(offset_wraps, h.offset = UINT64_MAX, "run past")
CRAFTED(dtype_max, h.dtype = UINT32_MAX, "unsupported dtype")
CRAFTED(dtype_int, h.dtype = DD_DTYPE_I64, "unsupported dtype")
CRAFTED(magic_zero, h.magic = 0, "not an aggregation header")
CRAFTED(token_wrong, h.token = ~(uint64_t)TOKEN, "token differs")
CRAFTED(sender_min, h.sender = INT32_MIN, "claims to come from rank")
CRAFTED(sender_max, h.sender = INT32_MAX, "claims to come from rank")
CRAFTED(kind_max, h.kind = UINT32_MAX, "unexpected message kind")
CRAFTED(kind_result, h.kind = DD_AGG_RESULT, "unexpected message kind")
CRAFTED(seq_max, h.seq = UINT64_MAX, "sequence number")
CRAFTED(status_positive, h.status = INT32_MAX, "neither success")
CRAFTED(version_old, h.version = 1, "wire version 1")
CRAFTED(format_unknown, (h.kind = DD_AGG_PUSH_SPARSE, h.format = 2),
        "unknown format")
CRAFTED(format_dense_push, h.format = DD_AGG_FMT_PAIRS, "unknown format")
CRAFTED(sparse_f16, (h.kind = DD_AGG_PUSH_SPARSE, h.dtype = DD_DTYPE_F16),
        "not f32")
CRAFTED(pairs_in_dense, (h.kind = DD_AGG_PUSH_SPARSE, h.nnz = 1),
        "pairs in a dense piece")
CRAFTED(pairs_over_count,
        (h.kind = DD_AGG_PUSH_SPARSE, h.format = DD_AGG_FMT_PAIRS, h.nnz = 17),
        "17 pairs in a chunk of 16")
CRAFTED(pairs_wrap,
        (h.kind = DD_AGG_PUSH_SPARSE, h.format = DD_AGG_FMT_PAIRS,
         h.count = CHUNK_BYTES / 4, h.nnz = (1ull << 61) + 1),
        "pairs in a chunk")

/* A sparse piece of worker `sender`: n pairs (offsets, then values). */
static void push_pairs(int sender, uint64_t seq, uint64_t count, size_t n,
                       const uint32_t *idx, const float *val)
{
    dd_agg_hdr_t h = push_hdr(sender, seq, count);
    uint32_t data[64];
    h.kind = DD_AGG_PUSH_SPARSE;
    h.format = DD_AGG_FMT_PAIRS;
    h.nnz = n;
    h.layer = 7;
    memcpy(data, idx, n * sizeof(uint32_t));
    memcpy(data + n, val, n * sizeof(float));
    send_hdr(sender, &h);
    if (n > 0) {
        progress(fixture_now, 2);
        deliver(sender, dd_agg_tag(DD_AGG_TAG_DATA, seq), data, 8 * n);
    }
}

/* The result header and data sent to worker rank peer, or fails. */
static const dd_agg_hdr_t *result_to(int peer, const void **data_p)
{
    const dd_agg_hdr_t *h = NULL;
    *data_p = NULL;
    for (int i = 0; i < n_reqs; i++) {
        int kind = (int)((reqs[i].tag >> 40) & 0x3f);
        if (reqs[i].is_send && reqs[i].peer == peer) {
            if (kind == DD_AGG_TAG_RHDR) {
                h = reqs[i].src;
            } else if (kind == DD_AGG_TAG_RDATA) {
                *data_p = reqs[i].src;
            }
        }
    }
    if (h == NULL) {
        fail_msg("no result sent to rank %d", peer);
    }
    return h;
}

/* Worker 0 and 1 share offset 5: the sum is scattered in worker order and
 * averaged, and three nonzeros of 16 go back as pairs (24 bytes, not 64),
 * the same bytes to both. */
static void test_sparse_pieces_scattered(void **state)
{
    fixture_t *f = *state;
    const uint32_t i0[2] = {1, 5}, i1[2] = {5, 9};
    const float v0[2] = {2.0f, 4.0f}, v1[2] = {2.0f, 6.0f};
    fixture_now = f;
    progress(f, 1);
    push_pairs(0, 0, 16, 2, i0, v0);
    push_pairs(1, 0, 16, 2, i1, v1);
    assert_int_equal(progress(f, 4), DD_OK);
    for (int peer = 0; peer < 2; peer++) {
        const void *data;
        const dd_agg_hdr_t *r = result_to(peer, &data);
        assert_int_equal(r->kind, DD_AGG_RESULT_SPARSE);
        assert_int_equal(r->status, DD_OK);
        assert_int_equal(r->format, DD_AGG_FMT_PAIRS);
        assert_int_equal(r->nnz, 3);
        assert_int_equal(r->count, 16);
        const uint32_t *idx = data;
        const float *val = (const float *)(idx + 3);
        assert_int_equal(idx[0], 1);
        assert_int_equal(idx[1], 5);
        assert_int_equal(idx[2], 9);
        assert_true(val[0] == 1.0f && val[1] == 3.0f && val[2] == 3.0f);
    }
}

/* Five nonzeros of 8 take 40 bytes as pairs and 32 dense: dense. */
static void test_sparse_dense_answer(void **state)
{
    fixture_t *f = *state;
    const uint32_t i0[3] = {0, 2, 4}, i1[2] = {6, 7};
    const float v0[3] = {2, 4, 6}, v1[2] = {8, 10};
    const float want[8] = {1, 0, 2, 0, 3, 0, 4, 5};
    fixture_now = f;
    progress(f, 1);
    push_pairs(0, 0, 8, 3, i0, v0);
    push_pairs(1, 0, 8, 2, i1, v1);
    assert_int_equal(progress(f, 4), DD_OK);
    const void *data;
    const dd_agg_hdr_t *r = result_to(1, &data);
    assert_int_equal(r->format, DD_AGG_FMT_DENSE);
    assert_int_equal(r->nnz, 0);
    assert_memory_equal(data, want, sizeof(want));
}

/* A piece with an offset past its chunk, or one out of order, is never
 * summed: the home fails naming the worker and the layer, and answers
 * with the failure only. */
static void expect_bad_piece(fixture_t *f, const uint32_t *idx, size_t n,
                             const char *reason)
{
    const uint32_t ok_i[1] = {3};
    const float ok_v[1] = {1.0f}, val[3] = {1, 2, 3};
    fixture_now = f;
    progress(f, 1);
    push_pairs(0, 0, 16, 1, ok_i, ok_v);
    push_pairs(1, 0, 16, n, idx, val);
    assert_int_equal(progress(f, 4), DD_ERR_MESSAGE);
    const char *why = dd_agg_server_why(f->s);
    if (strstr(why, "worker rank 1") == NULL ||
        strstr(why, "layer 7") == NULL || strstr(why, reason) == NULL) {
        fail_msg("why '%s' does not name worker rank 1, layer 7 and '%s'", why,
                 reason);
    }
    const void *data;
    const dd_agg_hdr_t *r = result_to(0, &data);
    assert_int_equal(r->status, DD_ERR_MESSAGE);
    assert_null(data);
}

static void test_sparse_offset_out_of_chunk(void **state)
{
    const uint32_t idx[2] = {2, 16};
    expect_bad_piece(*state, idx, 2, "offset 16 of pair 1 of 2 is out of");
}

static void test_sparse_offset_repeated(void **state)
{
    const uint32_t idx[3] = {2, 9, 9};
    expect_bad_piece(*state, idx, 3, "out of order");
}

/* The layer, chunk, step and worker count take no part in any size: at
 * their extremes a push is still taken, and sized by its count alone. */
static void test_unsized_fields_at_extremes(void **state)
{
    fixture_t *f = *state;
    progress(f, 1);
    dd_agg_hdr_t h = push_hdr(1, 0, 3);
    h.layer = UINT32_MAX;
    h.chunk = UINT32_MAX;
    h.step = UINT64_MAX;
    h.n_workers = UINT32_MAX;
    memset(h.why, 'x', sizeof(h.why)); /* not NUL-terminated */
    send_hdr(1, &h);
    assert_int_equal(progress(f, 2), DD_OK);
    assert_int_equal(count_reqs(DD_AGG_TAG_DATA), 1);
}

/* A RESET abandons worker 1's chunk 0 while its data is being received.
 * A canceled receive whose data began to arrive still lands (UCP cannot
 * cancel a matched one; Gloo's pair keeps a posted one): here its bytes
 * land after each later chunk's data came, through every inbox buffer
 * twice, and no average sees them. */
static void test_reset_late_landing_not_summed(void **state)
{
    fixture_t *f = *state;
    struct dd_backend_request *late = NULL;
    float junk[100], v0[100], v1[100];

    progress(f, 1);
    dd_agg_hdr_t h = push_hdr(1, 0, 100);
    send_hdr(1, &h);
    assert_int_equal(progress(f, 2), DD_OK);
    for (int i = 0; i < n_reqs; i++) {
        if (!reqs[i].is_send && reqs[i].tag == dd_agg_tag(DD_AGG_TAG_DATA, 0)) {
            late = &reqs[i];
        }
    }
    assert_non_null(late);
    record_round(1, 2, (const uint64_t[]){1, 1});
    dd_agg_hdr_t reset = push_hdr(1, 1, 0);
    reset.kind = DD_AGG_RESET;
    reset.step = 1;
    send_hdr(1, &reset);
    assert_int_equal(progress(f, 2), DD_OK);
    assert_true(late->released);
    for (int j = 0; j < 100; j++) {
        junk[j] = 1e30f;
    }
    for (uint64_t seq = 1; seq <= 8; seq++) {
        for (int j = 0; j < 100; j++) {
            v0[j] = (float)seq;
            v1[j] = (float)j;
        }
        for (int w = 0; w < 2; w++) {
            h = push_hdr(w, seq, 100);
            send_hdr(w, &h);
            assert_int_equal(progress(f, 2), DD_OK);
            deliver(w, dd_agg_tag(DD_AGG_TAG_DATA, seq), w ? v1 : v0,
                    sizeof(v0));
        }
        memcpy(late->buf, junk, sizeof(junk)); /* the late landing */
        assert_int_equal(progress(f, 4), DD_OK);
        for (int peer = 0; peer < 2; peer++) {
            const void *data;
            const dd_agg_hdr_t *r = result_to(peer, &data);
            assert_int_equal(r->seq, seq);
            assert_int_equal(r->status, DD_OK);
            const float *avg = data;
            for (int j = 0; j < 100; j++) {
                assert_true(avg[j] == ((float)seq + (float)j) / 2);
            }
        }
    }
}

static dd_agg_hdr_t bye_hdr(int sender, int32_t status)
{
    dd_agg_hdr_t h = push_hdr(sender, 0, 0);
    h.kind = DD_AGG_BYE;
    h.status = status;
    return h;
}

static void test_repeated_goodbye_counts_once(void **state)
{
    fixture_t *f = *state;
    dd_agg_hdr_t bye = bye_hdr(0, DD_OK);
    progress(f, 1);
    for (int i = 0; i < 3; i++) {
        send_hdr(0, &bye);
        assert_int_equal(progress(f, 2), DD_OK);
    }
    /* Three goodbyes of worker 0 are one worker gone, not the whole job. */
    assert_int_equal(dd_agg_server_byes(f->s), 1);
    assert_false(dd_agg_server_streams_closed(f->s));
    dd_agg_hdr_t bye1 = bye_hdr(1, DD_OK);
    send_hdr(1, &bye1);
    assert_int_equal(progress(f, 2), DD_OK);
    assert_int_equal(dd_agg_server_byes(f->s), 2);
}

static void test_push_after_goodbye_rejected(void **state)
{
    fixture_t *f = *state;
    dd_agg_hdr_t bye = bye_hdr(1, DD_OK);
    progress(f, 1);
    send_hdr(1, &bye);
    assert_int_equal(progress(f, 2), DD_OK);
    dd_agg_hdr_t h = push_hdr(1, 0, 16);
    expect_rejected(f, &h, "after its goodbye");
}

static void test_goodbye_with_error_names_worker(void **state)
{
    fixture_t *f = *state;
    dd_agg_hdr_t bye = bye_hdr(1, DD_ERR_TIMED_OUT);
    memset(bye.why, 'z', sizeof(bye.why)); /* not NUL-terminated */
    progress(f, 1);
    send_hdr(1, &bye);
    assert_int_equal(progress(f, 2), DD_ERR_TIMED_OUT);
    assert_non_null(strstr(dd_agg_server_why(f->s), "worker rank 1 gave up"));
}

/* Both workers push seq (values 2 seq and 2 j): the average is answered to
 * both, so the home still sums every push. */
static void expect_summed(fixture_t *f, uint64_t seq)
{
    float v0[100], v1[100];
    for (int j = 0; j < 100; j++) {
        v0[j] = 2.0f * (float)seq;
        v1[j] = 2.0f * (float)j;
    }
    for (int w = 0; w < 2; w++) {
        dd_agg_hdr_t h = push_hdr(w, seq, 100);
        send_hdr(w, &h);
        assert_int_equal(progress(f, 2), DD_OK);
        deliver(w, dd_agg_tag(DD_AGG_TAG_DATA, seq), w ? v1 : v0, sizeof(v0));
    }
    assert_int_equal(progress(f, 4), DD_OK);
    for (int peer = 0; peer < 2; peer++) {
        const void *data;
        const dd_agg_hdr_t *r = result_to(peer, &data);
        assert_int_equal(r->seq, seq);
        assert_int_equal(r->status, DD_OK);
        for (int j = 0; j < 100; j++) {
            assert_true(((const float *)data)[j] == (float)seq + (float)j);
        }
    }
}

/* Worker 1's RESET of round `round` numbering from seq. */
static void send_reset(fixture_t *f, uint64_t round, uint64_t seq)
{
    dd_agg_hdr_t reset = push_hdr(1, seq, 0);
    reset.kind = DD_AGG_RESET;
    reset.step = round;
    send_hdr(1, &reset);
    assert_int_equal(progress(f, 2), DD_OK);
}

static void expect_refused(const char *why)
{
    if (!logged("home rank 2: refused a RESET from worker rank 1") ||
        !logged(why)) {
        fail_msg("no refusal naming worker rank 1 and '%s' in %s", why,
                 log_path);
    }
}

/* No recovery round at all (what a broken worker sends): it used to make
 * the home drop every push numbered below 2^30, silently. */
static void test_reset_outside_round_refused(void **state)
{
    fixture_t *f = *state;
    progress(f, 1);
    send_reset(f, 1, 1ull << 30);
    expect_summed(f, 0);
    expect_summed(f, 1);
    expect_refused("the store records 0 of 2 workers' rows of recovery "
                   "round 1");
}

/* A round with one of the two rows: not yet agreed by every worker. */
static void test_reset_round_incomplete_refused(void **state)
{
    fixture_t *f = *state;
    record_round(1, 1, (const uint64_t[]){7});
    progress(f, 1);
    send_reset(f, 1, 7);
    expect_summed(f, 0);
    expect_refused("the store records 1 of 2 workers' rows of recovery "
                   "round 1");
}

/* The round is on record, but numbers on from 3, not from 2^20. */
static void test_reset_other_numbering_refused(void **state)
{
    fixture_t *f = *state;
    record_round(1, 2, (const uint64_t[]){2, 3});
    progress(f, 1);
    send_reset(f, 1, 1ull << 20);
    expect_summed(f, 0);
    expect_refused("recovery round 1 numbers from 3, not 1048576");
}

/* The round's own RESET is taken (pushes below 1 are then dropped), and
 * its replay is refused as stale: pushes from 1 on are summed. */
static void test_reset_replay_refused(void **state)
{
    fixture_t *f = *state;
    record_round(1, 2, (const uint64_t[]){1, 1});
    progress(f, 1);
    send_reset(f, 1, 1);
    dd_agg_hdr_t h = push_hdr(0, 0, 100);
    send_hdr(0, &h);
    assert_int_equal(progress(f, 2), DD_OK);
    assert_int_equal(count_reqs(DD_AGG_TAG_DATA), 0); /* abandoned */
    send_reset(f, 1, 1);
    expect_refused("round 1 is not newer than its last RESET's (round 1)");
    expect_summed(f, 1);
    expect_summed(f, 2);
}

/* 3e38 from every worker: the average is 3e38, as on the allreduce route
 * (coll.c scales each worker's values by 1/pow2 before the sum), not the
 * inf of a sum that overflows f32 before it is divided. Both workers push
 * the same values, in f32 and bf16 (whose range is f32's). */
static void push_dense(int sender, uint64_t seq, uint32_t dtype,
                       const void *data, size_t count)
{
    dd_agg_hdr_t h = push_hdr(sender, seq, count);
    h.dtype = dtype;
    send_hdr(sender, &h);
    progress(fixture_now, 2);
    deliver(sender, dd_agg_tag(DD_AGG_TAG_DATA, seq), data,
            count * dd_dtype_size((dd_dtype_t)dtype));
}

static void test_huge_values_average_finite(void **state)
{
    fixture_t *f = *state;
    float big[64];
    uint16_t big16[64];

    fixture_now = f;
    for (int j = 0; j < 64; j++) {
        big[j] = j % 2 ? 3e38f : -3.3e38f;
        big16[j] = dd_half_f32_to_bf16(big[j]);
    }
    progress(f, 1);
    for (int w = 0; w < 2; w++) {
        push_dense(w, 0, DD_DTYPE_F32, big, 64);
    }
    assert_int_equal(progress(f, 4), DD_OK);
    const void *data;
    const dd_agg_hdr_t *r = result_to(0, &data);
    assert_int_equal(r->seq, 0);
    for (int j = 0; j < 64; j++) {
        if (((const float *)data)[j] != big[j]) {
            fail_msg("f32 element %d: %g averaged to %g", j, big[j],
                     ((const float *)data)[j]);
        }
    }
    for (int w = 0; w < 2; w++) {
        push_dense(w, 1, DD_DTYPE_BF16, big16, 64);
    }
    assert_int_equal(progress(f, 4), DD_OK);
    r = result_to(1, &data);
    assert_int_equal(r->seq, 1);
    for (int j = 0; j < 64; j++) {
        float got = dd_half_bf16_to_f32(((const uint16_t *)data)[j]);
        if (got != dd_half_bf16_to_f32(big16[j])) {
            fail_msg("bf16 element %d: %g averaged to %g", j,
                     dd_half_bf16_to_f32(big16[j]), got);
        }
    }
}

#define T(name) cmocka_unit_test_setup_teardown(test_##name, setup, teardown)

int main(void)
{
    int fd;
    snprintf(log_path, sizeof(log_path), "/tmp/dd-test-aggsrv-log-XXXXXX");
    if ((fd = mkstemp(log_path)) < 0) {
        return 1;
    }
    close(fd);
    dd_log_configure(DD_LOG_ERROR, ~0u, log_path, 2);
    const struct CMUnitTest tests[] = {
        T(valid_push_posts_exact_receive),
        T(count_wraps_f32),
        T(count_wraps_f16),
        T(count_wraps_f64),
        T(count_max),
        T(count_zero),
        T(count_one_too_many),
        T(offset_wraps),
        T(dtype_max),
        T(dtype_int),
        T(magic_zero),
        T(token_wrong),
        T(sender_min),
        T(sender_max),
        T(kind_max),
        T(kind_result),
        T(seq_max),
        T(status_positive),
        T(unsized_fields_at_extremes),
        T(repeated_goodbye_counts_once),
        T(push_after_goodbye_rejected),
        T(goodbye_with_error_names_worker),
        T(version_old),
        T(format_unknown),
        T(format_dense_push),
        T(sparse_f16),
        T(pairs_in_dense),
        T(pairs_over_count),
        T(pairs_wrap),
        T(sparse_pieces_scattered),
        T(sparse_dense_answer),
        T(sparse_offset_out_of_chunk),
        T(sparse_offset_repeated),
        T(reset_late_landing_not_summed),
        T(huge_values_average_finite),
        T(reset_outside_round_refused),
        T(reset_round_incomplete_refused),
        T(reset_other_numbering_refused),
        T(reset_replay_refused),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(log_path);
    return failed;
}
