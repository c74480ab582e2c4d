/*
 * The TCP store's client. Requests are synchronous, one at a time under a
 * mutex, so any thread may use the store. The server enforces the timeout of
 * a get or wait; the client waits a little longer before it declares the
 * server lost, so a dead master is an error, never a hang. Joining, a rank
 * retries until its timeout when the store closes the connection before
 * the login ends: the store may close a waiting connection to make room
 * for a newer one while strangers crowd it (store_server.c).
 */
#include "boot/sock.h"
#include "boot/store.h"
#include "boot/store_proto.h"
#include "core/log.h"
#include "core/time.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How much longer than the server's own deadline the client waits:
 * DREAMDDP_TIMEOUT_S, at least this. The watch thread (src/api/watch.c)
 * sends a request every period, so a link cut shorter than the timeout
 * must cost time, not the job, and a frozen rank 0 is found within it. */
#define DD_TCP_GRACE_MIN_S 1.0

typedef struct {
    dd_store_t base;
    int fd;
    int broken;
    /* While joining: the deadline of every request, and a closed
     * connection is returned quietly, to be retried. */
    double login_deadline;
    pthread_mutex_t lock;
    dd_store_buf_t out;
} dd_store_tcp_t;

/* Sends the request in t->out and receives the reply body. */
/* wait_s: how long the server may hold the request (a get or wait); 0 for
 * those it answers at once (set, add, delete). */
static dd_status_t dd_tcp_roundtrip(dd_store_tcp_t *t, double wait_s,
                                    uint8_t **body_p, size_t *len_p)
{
    double grace = t->base.timeout_s > DD_TCP_GRACE_MIN_S ? t->base.timeout_s
                                                          : DD_TCP_GRACE_MIN_S;
    double start = dd_time_now();
    double deadline =
        t->login_deadline > 0 ? t->login_deadline : start + wait_s + grace;
    dd_status_t status;

    if (t->broken) {
        return dd_error(DD_ERR_PEER_LOST, DD_SUBSYS_NET,
                        "store %s: connection already failed", t->base.where);
    }
    dd_store_buf_finish(&t->out);
    if (t->out.failed) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_NET,
                        "store %s: request too large or out of memory",
                        t->base.where);
    }
    status = dd_sock_send_all(t->fd, t->out.data, t->out.len, deadline);
    if (status == DD_OK) {
        status = dd_sock_recv_frame(t->fd, deadline, DD_STORE_MAX_FRAME + 64,
                                    body_p, len_p);
    }
    if (t->login_deadline > 0 &&
        (status == DD_ERR_PEER_LOST || status == DD_ERR_TIMED_OUT)) {
        t->broken = 1;
        return status; /* dd_tcp_join retries or reports */
    }
    if (status == DD_ERR_PEER_LOST) {
        t->broken = 1;
        return dd_error(status, DD_SUBSYS_NET,
                        "store %s closed the connection (did rank 0 exit?)",
                        t->base.where);
    }
    if (status == DD_ERR_NO_MEMORY) { /* from dd_sock_recv_frame */
        t->broken = 1;                /* the reply is left unread */
        return dd_error(status, DD_SUBSYS_NET,
                        "store %s: no memory for a reply", t->base.where);
    }
    if (status != DD_OK) {
        t->broken = 1;
        return dd_error(status, DD_SUBSYS_NET,
                        "store %s did not answer within %.0f s", t->base.where,
                        deadline - start);
    }
    return DD_OK;
}

static void dd_tcp_begin(dd_store_tcp_t *t, int op)
{
    pthread_mutex_lock(&t->lock);
    dd_store_buf_begin(&t->out);
    dd_store_buf_u8(&t->out, (uint8_t)op);
}

static dd_status_t dd_tcp_end(dd_store_tcp_t *t, dd_status_t status)
{
    pthread_mutex_unlock(&t->lock);
    return status;
}

static dd_status_t dd_tcp_bad_reply(dd_store_tcp_t *t)
{
    t->broken = 1;
    return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_NET,
                    "store %s sent a malformed reply", t->base.where);
}

static dd_status_t dd_tcp_set(dd_store_t *s, const char *key, const void *value,
                              size_t len)
{
    dd_store_tcp_t *t = (dd_store_tcp_t *)s;
    uint8_t *body;
    size_t blen;

    dd_tcp_begin(t, DD_STORE_OP_SET);
    dd_store_buf_str(&t->out, key);
    dd_store_buf_bytes(&t->out, value, len);
    dd_status_t status = dd_tcp_roundtrip(t, 0.0, &body, &blen);
    if (status == DD_OK) {
        if (blen < 1 || body[0] != DD_STORE_REPLY_OK) {
            status = dd_tcp_bad_reply(t);
        }
        free(body);
    }
    return dd_tcp_end(t, status);
}

static uint32_t dd_tcp_ms(double timeout_s)
{
    double ms = timeout_s * 1e3;
    return ms > 4e9 ? 4000000000u : (uint32_t)ms;
}

static dd_status_t dd_tcp_get(dd_store_t *s, const char *key, double timeout_s,
                              void **value_p, size_t *len_p)
{
    dd_store_tcp_t *t = (dd_store_tcp_t *)s;
    uint8_t *body;
    size_t blen;

    dd_tcp_begin(t, DD_STORE_OP_GET);
    dd_store_buf_u32(&t->out, dd_tcp_ms(timeout_s));
    dd_store_buf_str(&t->out, key);
    dd_status_t status = dd_tcp_roundtrip(t, timeout_s, &body, &blen);
    if (status != DD_OK) {
        return dd_tcp_end(t, status);
    }
    dd_store_cursor_t cur = {body, blen, 0};
    uint8_t code = dd_store_get_u8(&cur);
    if (code == DD_STORE_REPLY_TIMEOUT) {
        status = DD_ERR_TIMED_OUT; /* callers name what they waited for */
    } else {
        size_t vlen;
        const void *v = dd_store_get_bytes(&cur, &vlen);
        void *copy = malloc(vlen + 1);
        if (code != DD_STORE_REPLY_OK || cur.failed) {
            status = dd_tcp_bad_reply(t);
        } else if (copy == NULL) {
            status = dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_NET,
                              "store %s: no memory for a %zu-byte value of "
                              "key %s",
                              t->base.where, vlen, key);
        } else {
            memcpy(copy, v, vlen);
            ((char *)copy)[vlen] = '\0'; /* convenient for text values */
            *value_p = copy;
            *len_p = vlen;
            copy = NULL;
        }
        free(copy);
    }
    free(body);
    return dd_tcp_end(t, status);
}

static dd_status_t dd_tcp_wait(dd_store_t *s, const char *const *keys, int n,
                               double timeout_s, int *present)
{
    dd_store_tcp_t *t = (dd_store_tcp_t *)s;
    uint8_t *body;
    size_t blen;

    if (n > UINT16_MAX) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_NET,
                        "store: cannot wait for %d keys at once", n);
    }
    dd_tcp_begin(t, DD_STORE_OP_WAIT);
    dd_store_buf_u32(&t->out, dd_tcp_ms(timeout_s));
    dd_store_buf_u16(&t->out, (uint16_t)n);
    for (int i = 0; i < n; i++) {
        dd_store_buf_str(&t->out, keys[i]);
    }
    dd_status_t status = dd_tcp_roundtrip(t, timeout_s, &body, &blen);
    if (status != DD_OK) {
        return dd_tcp_end(t, status);
    }
    dd_store_cursor_t cur = {body, blen, 0};
    uint8_t code = dd_store_get_u8(&cur);
    for (int i = 0; i < n; i++) {
        uint8_t p = dd_store_get_u8(&cur);
        if (present != NULL) {
            present[i] = p;
        }
    }
    if (cur.failed ||
        (code != DD_STORE_REPLY_OK && code != DD_STORE_REPLY_TIMEOUT)) {
        status = dd_tcp_bad_reply(t);
    } else if (code == DD_STORE_REPLY_TIMEOUT) {
        status = DD_ERR_TIMED_OUT;
    }
    free(body);
    return dd_tcp_end(t, status);
}

/* A request whose reply is OK and one fixed-size field. */
static dd_status_t dd_tcp_simple(dd_store_tcp_t *t, int op, const char *key,
                                 int64_t delta, uint64_t *result_p)
{
    uint8_t *body;
    size_t blen;

    dd_tcp_begin(t, op);
    dd_store_buf_str(&t->out, key);
    if (op == DD_STORE_OP_ADD) {
        dd_store_buf_u64(&t->out, (uint64_t)delta);
    }
    dd_status_t status = dd_tcp_roundtrip(t, 0.0, &body, &blen);
    if (status != DD_OK) {
        return dd_tcp_end(t, status);
    }
    dd_store_cursor_t cur = {body, blen, 0};
    uint8_t code = dd_store_get_u8(&cur);
    if (code == DD_STORE_REPLY_BAD && op == DD_STORE_OP_ADD) {
        char why[DD_STORE_MAX_KEY + 128];
        dd_store_get_str(&cur, why, sizeof(why));
        free(body);
        return dd_tcp_end(
            t, cur.failed ? dd_tcp_bad_reply(t)
                          : dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_NET,
                                     "store %s: %s", t->base.where, why));
    }
    uint64_t v =
        op == DD_STORE_OP_ADD ? dd_store_get_u64(&cur) : dd_store_get_u8(&cur);
    if (cur.failed || code != DD_STORE_REPLY_OK) {
        status = dd_tcp_bad_reply(t);
    } else {
        *result_p = v;
    }
    free(body);
    return dd_tcp_end(t, status);
}

static dd_status_t dd_tcp_add(dd_store_t *s, const char *key, int64_t delta,
                              int64_t *value_p)
{
    uint64_t v;
    dd_status_t status =
        dd_tcp_simple((dd_store_tcp_t *)s, DD_STORE_OP_ADD, key, delta, &v);
    if (status == DD_OK && value_p != NULL) {
        *value_p = (int64_t)v;
    }
    return status;
}

static dd_status_t dd_tcp_del(dd_store_t *s, const char *key, int *deleted_p)
{
    uint64_t v;
    dd_status_t status =
        dd_tcp_simple((dd_store_tcp_t *)s, DD_STORE_OP_DEL, key, 0, &v);
    if (status == DD_OK && deleted_p != NULL) {
        *deleted_p = (int)v;
    }
    return status;
}

static dd_status_t dd_tcp_clock(dd_store_t *s, double *us_p)
{
    dd_store_tcp_t *t = (dd_store_tcp_t *)s;
    uint8_t *body;
    size_t blen;

    dd_tcp_begin(t, DD_STORE_OP_TIME);
    dd_status_t status = dd_tcp_roundtrip(t, 0.0, &body, &blen);
    if (status != DD_OK) {
        return dd_tcp_end(t, status);
    }
    dd_store_cursor_t cur = {body, blen, 0};
    uint8_t code = dd_store_get_u8(&cur);
    uint64_t bits = dd_store_get_u64(&cur);
    if (cur.failed || code != DD_STORE_REPLY_OK) {
        status = dd_tcp_bad_reply(t);
    } else {
        memcpy(us_p, &bits, sizeof(*us_p));
    }
    free(body);
    return dd_tcp_end(t, status);
}

static void dd_tcp_close(dd_store_t *s)
{
    dd_store_tcp_t *t = (dd_store_tcp_t *)s;

    if (t->fd >= 0) {
        close(t->fd);
    }
    dd_store_buf_free(&t->out);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static const dd_store_ops_t dd_store_tcp_ops = {
    dd_tcp_set, dd_tcp_get,   dd_tcp_wait, dd_tcp_add,
    dd_tcp_del, dd_tcp_close, dd_tcp_clock};

/* One step of the login: the request in t->out, the reply's code and
 * reason checked (a refusal becomes the server's reason); the rest of the
 * reply in *body_p, *cur_p. */
static dd_status_t dd_tcp_login_step(dd_store_tcp_t *t, uint8_t **body_p,
                                     dd_store_cursor_t *cur_p)
{
    char reason[256];
    size_t blen;
    dd_status_t status = dd_tcp_roundtrip(t, t->base.timeout_s, body_p, &blen);
    if (status != DD_OK) {
        return status;
    }
    *cur_p = (dd_store_cursor_t){*body_p, blen, 0};
    uint8_t code = dd_store_get_u8(cur_p);
    dd_store_get_str(cur_p, reason, sizeof(reason));
    if (cur_p->failed) {
        status = dd_tcp_bad_reply(t);
    } else if (code == DD_STORE_REPLY_REFUSED) {
        status = dd_error(DD_ERR_REFUSED, DD_SUBSYS_NET,
                          "store %s refused rank %d: %s", t->base.where,
                          t->base.rank, reason);
    } else if (code != DD_STORE_REPLY_OK) {
        status = dd_error(DD_ERR_MISMATCH, DD_SUBSYS_NET,
                          "store %s refused rank %d: %s", t->base.where,
                          t->base.rank, reason);
    }
    if (status != DD_OK) {
        free(*body_p);
        *body_p = NULL;
    }
    return status;
}

/* The login: the store sends a challenge, and the rank answers with an
 * HMAC of it under the login secret, which never travels; a recorded
 * answer is worth nothing against the next challenge. */
static dd_status_t dd_tcp_hello(dd_store_tcp_t *t, uint64_t secret)
{
    uint8_t *body = NULL, nonce[DD_STORE_NONCE], proof[32];
    dd_store_cursor_t cur;

    dd_tcp_begin(t, DD_STORE_OP_HELLO);
    dd_store_buf_u32(&t->out, DD_STORE_MAGIC);
    dd_store_buf_u16(&t->out, DD_STORE_VERSION);
    dd_store_buf_u32(&t->out, (uint32_t)t->base.rank);
    dd_store_buf_u32(&t->out, (uint32_t)t->base.world_size);
    dd_status_t status = dd_tcp_login_step(t, &body, &cur);
    if (status != DD_OK) {
        return dd_tcp_end(t, status);
    }
    size_t n = 0;
    const uint8_t *challenge = dd_store_get_bytes(&cur, &n);
    if (cur.failed || n != DD_STORE_NONCE) {
        free(body);
        return dd_tcp_end(t, dd_tcp_bad_reply(t));
    }
    memcpy(nonce, challenge, DD_STORE_NONCE);
    free(body);
    dd_tcp_end(t, DD_OK);
    dd_store_proof(secret, nonce, t->base.rank, t->base.world_size, proof);
    dd_tcp_begin(t, DD_STORE_OP_PROOF);
    dd_store_buf_bytes(&t->out, proof, sizeof(proof));
    status = dd_tcp_login_step(t, &body, &cur);
    free(body);
    return dd_tcp_end(t, status);
}

/* Pauses before the next try to join, never past deadline: 10 ms, twice
 * as long each time, at most 0.5 s. */
static void dd_tcp_backoff(int tries, double deadline)
{
    double pause = 0.01 * (double)(1u << (tries < 6 ? tries : 6));
    double left = deadline - dd_time_now();
    pause = pause < 0.5 ? pause : 0.5;
    pause = pause < left ? pause : left;
    if (pause > 0) {
        struct timespec ts = {(time_t)pause,
                              (long)((pause - (double)(time_t)pause) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

/* The end of a join that ran out of time during a login. */
static dd_status_t dd_tcp_join_failed(dd_store_tcp_t *t, int closed)
{
    if (closed == 0) {
        return dd_error(DD_ERR_TIMED_OUT, DD_SUBSYS_NET,
                        "store %s did not answer rank %d's login within "
                        "%.0f s (DREAMDDP_TIMEOUT_S)",
                        t->base.where, t->base.rank, t->base.timeout_s);
    }
    return dd_error(DD_ERR_PEER_LOST, DD_SUBSYS_NET,
                    "rank %d could not log in to rank 0's store %s within "
                    "%.0f s (DREAMDDP_TIMEOUT_S): it closed the connection "
                    "%d times before the login ended (did rank 0 exit, or "
                    "do many connections that never log in reach its port?)",
                    t->base.rank, t->base.where, t->base.timeout_s, closed);
}

/* Connects and logs in, again while the store closes the connection before
 * the login ends, until deadline; *closed_p counts those closings. */
static dd_status_t dd_tcp_join(dd_store_tcp_t *t, const char *addr, int port,
                               uint64_t token_hash, double deadline,
                               int *closed_p)
{
    char why[256];

    for (int tries = 0;; tries++) {
        dd_status_t status =
            dd_sock_connect(addr, port, deadline, &t->fd, why, sizeof(why));
        if (status != DD_OK) {
            return dd_error(status, DD_SUBSYS_NET,
                            "cannot reach the store master %s:%d within %.0f s "
                            "(DREAMDDP_TIMEOUT_S): %s%s",
                            addr, port, t->base.timeout_s, why,
                            *closed_p > 0
                                ? "; before that it closed the connection "
                                  "during the login"
                                : "");
        }
        t->broken = 0;
        t->login_deadline = deadline;
        status = dd_tcp_hello(t, token_hash);
        t->login_deadline = 0;
        if (status != DD_ERR_PEER_LOST && status != DD_ERR_TIMED_OUT) {
            return status; /* in, or refused with a reason */
        }
        close(t->fd);
        t->fd = -1;
        *closed_p += status == DD_ERR_PEER_LOST;
        if (dd_time_now() >= deadline) {
            return dd_tcp_join_failed(t, *closed_p);
        }
        dd_log_debug(DD_SUBSYS_NET,
                     "store %s closed the connection during rank %d's login "
                     "(%d times); trying again",
                     t->base.where, t->base.rank, *closed_p);
        dd_tcp_backoff(tries, deadline);
    }
}

dd_status_t dd_store_tcp_connect(const char *addr, int port,
                                 uint64_t token_hash, int rank, int world_size,
                                 double timeout_s, dd_store_t **store_p)
{
    dd_store_tcp_t *t = calloc(1, sizeof(*t));
    int closed = 0;

    if (t == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_NET, "store: no memory");
    }
    t->base.ops = &dd_store_tcp_ops;
    t->base.rank = rank;
    t->base.world_size = world_size;
    t->base.timeout_s = timeout_s;
    t->fd = -1;
    snprintf(t->base.where, sizeof(t->base.where), "tcp://%s:%d", addr, port);
    pthread_mutex_init(&t->lock, NULL);
    dd_status_t status = dd_tcp_join(t, addr, port, token_hash,
                                     dd_time_now() + timeout_s, &closed);
    if (status != DD_OK) {
        dd_tcp_close(&t->base);
        return status;
    }
    if (closed > 0) {
        dd_log_info(DD_SUBSYS_NET,
                    "store %s: rank %d logged in after the store closed %d "
                    "earlier tries",
                    t->base.where, rank, closed);
    }
    *store_p = &t->base;
    return DD_OK;
}
