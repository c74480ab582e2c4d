/*
 * The TCP store's server: one thread, epoll over the listening socket and
 * the clients. poll() went over every client's socket at every wakeup, so
 * a request cost rank 0 more CPU the more ranks there were: the watch's
 * beats at 128 ranks about 64 us each, against 39 with epoll, as at 16
 * ranks (bench/NOTES.md). Requests that must wait (get, wait) are parked on
 * their client and answered when a set or add makes them ready, or with a
 * timeout reply at their deadline. A client that fails the handshake is refused
 * and closed. Until it has logged in, a client is an outsider: it may send one
 * small frame, must do so by its login deadline, and only so many may wait at
 * once, from one address and in all; beyond that the oldest outsider makes
 * room for the newcomer (a rank speaks at once and logs in within
 * milliseconds, a stranger holding connections does not), and what outsiders
 * cause is logged at a bounded rate (store_outsiders.h). The server never
 * waits for an outsider when it stops.
 * Must not block on any one client: reads are non-blocking; replies are sent
 * with a short deadline since each client is waiting for its answer.
 */
#include "boot/sock.h"
#include "boot/store.h"
#include "boot/store_outsiders.h"
#include "boot/store_proto.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/time.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define DD_SERVER_BUCKETS 1024
#define DD_SERVER_SEND_S 10.0

typedef struct dd_server_entry {
    struct dd_server_entry *next;
    char *key;
    uint8_t *value;
    size_t len;
} dd_server_entry_t;

typedef struct {
    int fd;
    int rank;        /* -1 until the handshake */
    double login_by; /* dropped then if rank is still -1 */
    char peer[64]; /* its address, numeric: the outsiders' bound is per peer */
    /* The login's first half (HELLO): the rank and world claimed, and the
     * challenge sent, which the PROOF must answer. */
    int said_hello, hello_rank, hello_world;
    uint8_t nonce[DD_STORE_NONCE];
    uint8_t *in;
    size_t in_len, in_cap;
    /* A parked get or wait. */
    int parked_op;
    char **keys;
    int n_keys;
    double deadline;
} dd_server_client_t;

struct dd_store_server {
    int listen_fd;
    int wake[2];
    int epoll_fd;
    int port;
    uint64_t token;
    int world_size;
    pthread_t thread;
    dd_server_client_t *clients;
    int n_clients, cap_clients;
    double login_s;
    double clock_skew_us;
    dd_store_outsider_log_t outsiders;
    dd_server_entry_t *buckets[DD_SERVER_BUCKETS];
    volatile int stopping;
    double stop_deadline;
};

static size_t dd_server_hash(const char *key)
{
    size_t h = 5381;
    for (; *key; key++) {
        h = h * 33 + (unsigned char)*key;
    }
    return h % DD_SERVER_BUCKETS;
}

static dd_server_entry_t *dd_server_find(dd_store_server_t *srv,
                                         const char *key)
{
    dd_server_entry_t *e = srv->buckets[dd_server_hash(key)];
    while (e != NULL && strcmp(e->key, key) != 0) {
        e = e->next;
    }
    return e;
}

static int dd_server_put(dd_store_server_t *srv, const char *key,
                         const void *value, size_t len)
{
    dd_server_entry_t *e = dd_server_find(srv, key);
    uint8_t *copy = malloc(len ? len : 1);

    if (copy == NULL) {
        dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_NET,
                 "store: no memory for the %zu-byte value of key %s", len, key);
        return -1;
    }
    memcpy(copy, value, len);
    if (e == NULL) {
        e = calloc(1, sizeof(*e));
        if (e == NULL || (e->key = strdup(key)) == NULL) {
            dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_NET,
                     "store: no memory for key %s", key);
            free(e);
            free(copy);
            return -1;
        }
        size_t b = dd_server_hash(key);
        e->next = srv->buckets[b];
        srv->buckets[b] = e;
    }
    free(e->value);
    e->value = copy;
    e->len = len;
    return 0;
}

static int dd_server_remove(dd_store_server_t *srv, const char *key)
{
    dd_server_entry_t **pp = &srv->buckets[dd_server_hash(key)];
    for (; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->key, key) == 0) {
            dd_server_entry_t *e = *pp;
            *pp = e->next;
            free(e->key);
            free(e->value);
            free(e);
            return 1;
        }
    }
    return 0;
}

/* Sends a reply frame; a client that cannot take it is dropped later. */
static void dd_server_reply(dd_server_client_t *c, dd_store_buf_t *b)
{
    dd_store_buf_finish(b);
    if (b->failed ||
        dd_sock_send_all(c->fd, b->data, b->len,
                         dd_time_now() + DD_SERVER_SEND_S) != DD_OK) {
        dd_log_debug(DD_SUBSYS_NET, "store: cannot reply to rank %d", c->rank);
        shutdown(c->fd, SHUT_RDWR);
    }
}

static void dd_server_reply_text(dd_server_client_t *c, uint8_t code,
                                 const char *text)
{
    dd_store_buf_t b = {0};
    dd_store_buf_begin(&b);
    dd_store_buf_u8(&b, code);
    dd_store_buf_str(&b, text);
    dd_server_reply(c, &b);
    dd_store_buf_free(&b);
}

static void dd_server_unpark(dd_server_client_t *c)
{
    for (int i = 0; i < c->n_keys; i++) {
        free(c->keys[i]);
    }
    free(c->keys);
    c->keys = NULL;
    c->n_keys = 0;
    c->parked_op = 0;
}

/* Answers a parked request if it is ready or past its deadline. */
static void dd_server_try_parked(dd_store_server_t *srv, dd_server_client_t *c,
                                 double now)
{
    int ready = 1;
    dd_store_buf_t b = {0};

    for (int i = 0; i < c->n_keys && ready; i++) {
        ready = dd_server_find(srv, c->keys[i]) != NULL;
    }
    if (!ready && now < c->deadline) {
        return;
    }
    dd_store_buf_begin(&b);
    dd_store_buf_u8(&b, ready ? DD_STORE_REPLY_OK : DD_STORE_REPLY_TIMEOUT);
    if (c->parked_op == DD_STORE_OP_GET && ready) {
        dd_server_entry_t *e = dd_server_find(srv, c->keys[0]);
        dd_store_buf_bytes(&b, e->value, e->len);
    } else {
        for (int i = 0; i < c->n_keys; i++) {
            dd_store_buf_u8(&b, dd_server_find(srv, c->keys[i]) != NULL);
        }
    }
    dd_server_reply(c, &b);
    dd_store_buf_free(&b);
    dd_server_unpark(c);
}

static void dd_server_wake_parked(dd_store_server_t *srv)
{
    double now = dd_time_now();
    for (int i = 0; i < srv->n_clients; i++) {
        if (srv->clients[i].parked_op) {
            dd_server_try_parked(srv, &srv->clients[i], now);
        }
    }
}

/* A challenge no one can predict: /dev/urandom. -1 when it cannot be
 * read (the login then fails rather than use a weak one). */
static int dd_server_nonce(uint8_t *out, size_t len)
{
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f != NULL ? fread(out, 1, len, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    return got == len ? 0 : -1;
}

/* The login's first half: the rank and world claimed, answered with a
 * challenge. */
static int dd_server_hello(dd_store_server_t *srv, dd_server_client_t *c,
                           dd_store_cursor_t *cur)
{
    char reason[256];
    uint32_t magic = dd_store_get_u32(cur);
    uint16_t version = dd_store_get_u16(cur);
    int rank = (int32_t)dd_store_get_u32(cur);
    int world = (int32_t)dd_store_get_u32(cur);

    if (cur->failed || magic != DD_STORE_MAGIC || version != DD_STORE_VERSION ||
        c->said_hello) {
        dd_server_reply_text(c, DD_STORE_REPLY_BAD,
                             "not a dreamddp store client of this version");
        return -1;
    }
    if (world != srv->world_size || rank < 0 || rank >= world) {
        snprintf(reason, sizeof(reason),
                 "rank %d says the world size is %d but rank 0 says %d", rank,
                 world, srv->world_size);
        dd_store_outsider_note(&srv->outsiders, dd_time_now(), DD_LOG_ERROR,
                               "refused a client at %s: %s", c->peer, reason);
        dd_server_reply_text(c, DD_STORE_REPLY_MISMATCH, reason);
        return -1;
    }
    if (dd_server_nonce(c->nonce, sizeof(c->nonce)) != 0) {
        dd_log_error(DD_SUBSYS_NET, "store: cannot read /dev/urandom for a "
                                    "login challenge");
        dd_server_reply_text(c, DD_STORE_REPLY_BAD,
                             "the store cannot make a login challenge");
        return -1;
    }
    c->said_hello = 1;
    c->hello_rank = rank;
    c->hello_world = world;
    dd_store_buf_t b = {0};
    dd_store_buf_begin(&b);
    dd_store_buf_u8(&b, DD_STORE_REPLY_OK);
    dd_store_buf_str(&b, "");
    dd_store_buf_bytes(&b, c->nonce, sizeof(c->nonce));
    dd_server_reply(c, &b);
    dd_store_buf_free(&b);
    return 0;
}

/* The login's second half: the HMAC of the challenge under the login
 * secret, compared in constant time. */
static int dd_server_proof(dd_store_server_t *srv, dd_server_client_t *c,
                           dd_store_cursor_t *cur)
{
    char reason[256];
    uint8_t want[32], diff = 0;
    size_t n = 0;
    const uint8_t *proof = dd_store_get_bytes(cur, &n);
    int rank = c->hello_rank;

    if (cur->failed || !c->said_hello || n != sizeof(want)) {
        dd_server_reply_text(c, DD_STORE_REPLY_BAD,
                             "not a dreamddp store client of this version");
        return -1;
    }
    dd_store_proof(srv->token, c->nonce, rank, c->hello_world, want);
    for (size_t i = 0; i < sizeof(want); i++) {
        diff |= (uint8_t)(want[i] ^ proof[i]);
    }
    memset(c->nonce, 0, sizeof(c->nonce)); /* one answer per challenge */
    if (diff != 0) {
        dd_store_outsider_note(&srv->outsiders, dd_time_now(), DD_LOG_WARN,
                               "refused a client at %s claiming rank %d: "
                               "wrong job token",
                               c->peer, rank);
        dd_server_reply_text(
            c, DD_STORE_REPLY_REFUSED,
            "the job token differs from rank 0's (is "
            "another job using this port, or DREAMDDP_JOB_TOKEN "
            "set differently?)");
        return -1;
    }
    for (int i = 0; i < srv->n_clients; i++) {
        if (srv->clients[i].rank == rank) {
            snprintf(reason, sizeof(reason),
                     "rank %d has already joined: two processes claim it",
                     rank);
            dd_log_error(DD_SUBSYS_NET, "store: refused a client: %s", reason);
            dd_server_reply_text(c, DD_STORE_REPLY_MISMATCH, reason);
            return -1;
        }
    }
    c->rank = rank;
    dd_server_reply_text(c, DD_STORE_REPLY_OK, "");
    return 0;
}

/* Parks a get or wait with the keys read from cur. */
static int dd_server_park(dd_server_client_t *c, int op, dd_store_cursor_t *cur)
{
    uint32_t timeout_ms = dd_store_get_u32(cur);
    int n = op == DD_STORE_OP_GET ? 1 : dd_store_get_u16(cur);
    char key[DD_STORE_MAX_KEY];

    c->keys = calloc((size_t)(n ? n : 1), sizeof(char *));
    if (c->keys == NULL) {
        dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_NET,
                 "store: no memory for the %d keys rank %d waits for", n,
                 c->rank);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        dd_store_get_str(cur, key, sizeof(key));
        if (!cur->failed && (c->keys[i] = strdup(key)) == NULL) {
            dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_NET,
                     "store: no memory for key %s rank %d waits for", key,
                     c->rank);
        }
        if (cur->failed || c->keys[i] == NULL) {
            c->n_keys = i;
            dd_server_unpark(c);
            return -1;
        }
    }
    c->n_keys = n;
    c->parked_op = op;
    c->deadline = dd_time_now() + timeout_ms / 1e3;
    return 0;
}

static void dd_server_reply_u8(dd_server_client_t *c, uint8_t v)
{
    dd_store_buf_t b = {0};
    dd_store_buf_begin(&b);
    dd_store_buf_u8(&b, DD_STORE_REPLY_OK);
    dd_store_buf_u8(&b, v);
    dd_server_reply(c, &b);
    dd_store_buf_free(&b);
}

static int dd_server_add(dd_store_server_t *srv, dd_server_client_t *c,
                         const char *key, int64_t delta)
{
    dd_server_entry_t *e = dd_server_find(srv, key);
    char text[32], why[DD_STORE_MAX_KEY + 128];
    int64_t v = 0;

    if (dd_store_add_value(key, e ? e->value : NULL, e ? e->len : 0, delta, &v,
                           why, sizeof(why)) != DD_OK) {
        dd_log_warn(DD_SUBSYS_NET, "store: rank %d: %s", c->rank, why);
        dd_server_reply_text(c, DD_STORE_REPLY_BAD, why);
        return 0; /* the request failed, not the client */
    }
    snprintf(text, sizeof(text), "%lld", (long long)v);
    if (dd_server_put(srv, key, text, strlen(text)) != 0) {
        return -1;
    }
    dd_store_buf_t b = {0};
    dd_store_buf_begin(&b);
    dd_store_buf_u8(&b, DD_STORE_REPLY_OK);
    dd_store_buf_u64(&b, (uint64_t)v);
    dd_server_reply(c, &b);
    dd_store_buf_free(&b);
    return 0;
}

/* Handles one request; -1 drops the client. */
static int dd_server_request(dd_store_server_t *srv, dd_server_client_t *c,
                             const uint8_t *body, size_t len)
{
    dd_store_cursor_t cur = {body, len, 0};
    char key[DD_STORE_MAX_KEY];
    int op = dd_store_get_u8(&cur);

    if (c->rank < 0) {
        return op == DD_STORE_OP_HELLO   ? dd_server_hello(srv, c, &cur)
               : op == DD_STORE_OP_PROOF ? dd_server_proof(srv, c, &cur)
                                         : -1;
    }
    if (c->parked_op) {
        return -1; /* one request at a time per client */
    }
    switch (op) {
    case DD_STORE_OP_SET: {
        dd_store_get_str(&cur, key, sizeof(key));
        size_t vlen;
        const void *v = dd_store_get_bytes(&cur, &vlen);
        if (cur.failed || dd_server_put(srv, key, v, vlen) != 0) {
            return -1;
        }
        dd_server_reply_u8(c, 1);
        dd_server_wake_parked(srv);
        return 0;
    }
    case DD_STORE_OP_GET:
    case DD_STORE_OP_WAIT:
        if (dd_server_park(c, op, &cur) != 0) {
            return -1;
        }
        dd_server_try_parked(srv, c, dd_time_now());
        return 0;
    case DD_STORE_OP_ADD: {
        dd_store_get_str(&cur, key, sizeof(key));
        int64_t delta = (int64_t)dd_store_get_u64(&cur);
        if (cur.failed || dd_server_add(srv, c, key, delta) != 0) {
            return -1;
        }
        dd_server_wake_parked(srv);
        return 0;
    }
    case DD_STORE_OP_DEL:
        dd_store_get_str(&cur, key, sizeof(key));
        if (cur.failed) {
            return -1;
        }
        dd_server_reply_u8(c, (uint8_t)dd_server_remove(srv, key));
        return 0;
    case DD_STORE_OP_TIME: {
        double now = dd_clock_realtime_us(srv->clock_skew_us);
        uint64_t bits;
        dd_store_buf_t b = {0};
        memcpy(&bits, &now, sizeof(bits));
        dd_store_buf_begin(&b);
        dd_store_buf_u8(&b, DD_STORE_REPLY_OK);
        dd_store_buf_u64(&b, bits);
        dd_server_reply(c, &b);
        dd_store_buf_free(&b);
        return 0;
    }
    }
    return -1;
}

/* The longest frame the client may send now. */
static size_t dd_server_frame_max(const dd_server_client_t *c)
{
    return c->rank < 0 ? DD_STORE_MAX_LOGIN_FRAME : DD_STORE_MAX_FRAME;
}

/* Reads what the client sent and serves every complete frame. Before login
 * the buffer holds one login frame at most, so an outsider costs a few KiB
 * however much it sends. */
static int dd_server_read(dd_store_server_t *srv, dd_server_client_t *c)
{
    while (1) {
        size_t limit = 4 + dd_server_frame_max(c);
        if (c->in_len == c->in_cap && c->in_cap >= limit) {
            break; /* serve what is here first; epoll says the rest */
        }
        if (c->in_cap - c->in_len < 4096 && c->in_cap < limit) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
            cap = cap < limit ? cap : limit;
            uint8_t *in = realloc(c->in, cap);
            if (in == NULL) {
                dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_NET,
                         "store: no memory for a %zu-byte frame from rank %d",
                         cap, c->rank);
                return -1;
            }
            c->in = in;
            c->in_cap = cap;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n == 0) {
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                break;
            }
            return -1;
        }
        c->in_len += (size_t)n;
        if (c->rank < 0 && c->in_len >= 4) {
            break; /* a login frame, or too long to be one: look first */
        }
    }
    size_t off = 0;
    while (c->in_len - off >= 4) {
        const uint8_t *h = c->in + off;
        size_t len = (size_t)h[0] | ((size_t)h[1] << 8) | ((size_t)h[2] << 16) |
                     ((size_t)h[3] << 24);
        if (len > dd_server_frame_max(c)) {
            if (c->rank < 0) {
                dd_store_outsider_note(&srv->outsiders, dd_time_now(),
                                       DD_LOG_WARN,
                                       "dropped a client at %s that sent a "
                                       "%zu-byte frame before logging in (at "
                                       "most %d)",
                                       c->peer, len, DD_STORE_MAX_LOGIN_FRAME);
            }
            return -1;
        }
        if (c->in_len - off - 4 < len) {
            break;
        }
        if (dd_server_request(srv, c, h + 4, len) != 0) {
            return -1;
        }
        off += 4 + len;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return 0;
}

/*
 * An expendable rank (an aggregator under DREAMDDP_AGG_LOSS=survive, which
 * set DD_STORE_EXPENDABLE_KEY "RANK") is declared lost instead (store.h's
 * DD_STORE_LOST_KEY "RANK", its "/why", the count DD_STORE_LOSTS_KEY); the
 * workers move its chunks elsewhere. 1 when rank is expendable.
 */
static int dd_server_note_expendable(dd_store_server_t *srv, int rank,
                                     const char *why)
{
    char key[64], text[32], err[160], text2[300];
    int64_t n = 0;

    snprintf(key, sizeof(key), DD_STORE_EXPENDABLE_KEY "%d", rank);
    if (dd_server_find(srv, key) == NULL) {
        return 0;
    }
    snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d", rank);
    if (dd_server_find(srv, key) != NULL) {
        return 1; /* a worker declared it first */
    }
    dd_server_entry_t *e = dd_server_find(srv, DD_STORE_LOSTS_KEY);
    if (dd_store_add_value(DD_STORE_LOSTS_KEY, e ? e->value : NULL,
                           e ? e->len : 0, 1, &n, err, sizeof(err)) != DD_OK) {
        return 0;
    }
    snprintf(text, sizeof(text), "%lld", (long long)n);
    dd_server_put(srv, key, "1", 1);
    snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d/why", rank);
    snprintf(text2, sizeof(text2), "aggregator %s", why);
    dd_server_put(srv, key, text2, strlen(text2));
    dd_server_put(srv, DD_STORE_LOSTS_KEY, text, strlen(text));
    dd_log_warn(DD_SUBSYS_NET, "store: aggregator %s", why);
    dd_server_wake_parked(srv);
    return 1;
}

/*
 * A rank's connection closed. One that said goodbye (DD_STORE_BYE_KEY, set
 * in dd_finalize) left; any other died or was killed, and the store is the
 * first to know, at once, even of a rank no collective is waiting on: it
 * marks the rank gone (DD_STORE_GONE_KEY), whatever came before, so that
 * no rank waits for it; publishes the job's abort (DD_STORE_ABORT_KEY)
 * naming it, unless an earlier reason is there; and wakes the requests
 * parked on it.
 */
static void dd_server_note_lost(dd_store_server_t *srv, dd_server_client_t *c)
{
    char key[64], why[256];

    if (c->rank < 0 || srv->stopping) {
        return;
    }
    snprintf(key, sizeof(key), DD_STORE_BYE_KEY "%d", c->rank);
    if (dd_server_find(srv, key) != NULL) {
        return;
    }
    snprintf(key, sizeof(key), DD_STORE_GONE_KEY "%d", c->rank);
    dd_server_put(srv, key, "1", 1);
    if (dd_server_find(srv, DD_STORE_ABORT_KEY) != NULL) {
        dd_log_info(DD_SUBSYS_NET,
                    "store: rank %d was lost too (its connection closed "
                    "before its dd_finalize)",
                    c->rank);
        dd_server_wake_parked(srv);
        return;
    }
    snprintf(why, sizeof(why),
             "rank %d was lost: its connection to the store on rank 0 closed "
             "before its dd_finalize (the process died or was killed)",
             c->rank);
    if (dd_server_note_expendable(srv, c->rank, why)) {
        return;
    }
    dd_log_error(DD_SUBSYS_NET, "store: %s", why);
    if (dd_server_put(srv, DD_STORE_ABORT_KEY, why, strlen(why)) == 0) {
        dd_server_wake_parked(srv);
    }
}

static void dd_server_drop(dd_store_server_t *srv, int i)
{
    dd_server_client_t *c = &srv->clients[i];

    dd_log_debug(DD_SUBSYS_NET, "store: rank %d left", c->rank);
    dd_server_unpark(c);
    epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->in);
    srv->clients[i] = srv->clients[--srv->n_clients];
}

static int dd_server_count(const dd_store_server_t *srv, int logged_in)
{
    int n = 0;
    for (int i = 0; i < srv->n_clients; i++) {
        n += (srv->clients[i].rank >= 0) == logged_in;
    }
    return n;
}

/* The outsider to close for a newcomer: among the clients not logged in
 * (from peer only, when given), the oldest that has not said HELLO, else
 * the oldest. A rank says HELLO as soon as it connects, so an idle
 * stranger's connection goes first. -1 when there is none. */
static int dd_server_oldest_outsider(const dd_store_server_t *srv,
                                     const char *peer)
{
    int best = -1, best_quiet = 0;
    for (int i = 0; i < srv->n_clients; i++) {
        const dd_server_client_t *c = &srv->clients[i];
        if (c->rank >= 0 || (peer != NULL && strcmp(c->peer, peer) != 0)) {
            continue;
        }
        int quiet = !c->said_hello;
        if (best < 0 || quiet > best_quiet ||
            (quiet == best_quiet &&
             c->login_by < srv->clients[best].login_by)) {
            best = i;
            best_quiet = quiet;
        }
    }
    return best;
}

static int dd_server_outsiders_from(const dd_store_server_t *srv,
                                    const char *peer)
{
    int n = 0;
    for (int i = 0; i < srv->n_clients; i++) {
        n +=
            srv->clients[i].rank < 0 && strcmp(srv->clients[i].peer, peer) == 0;
    }
    return n;
}

/* The ranks still connected that stopping waits for: not one declared
 * lost (a frozen aggregator the job dropped keeps its connection open,
 * and would hold rank 0 back for the whole stop timeout). */
static int dd_server_awaited(dd_store_server_t *srv)
{
    char key[64];
    int n = 0;

    for (int i = 0; i < srv->n_clients; i++) {
        if (srv->clients[i].rank < 0) {
            continue;
        }
        snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d",
                 srv->clients[i].rank);
        n += dd_server_find(srv, key) == NULL;
    }
    return n;
}

/*
 * Makes room for a newcomer from peer: beyond DD_STORE_MAX_PENDING outsiders
 * from one address, or world_size + DD_STORE_MAX_PENDING in all, the oldest
 * outsider (from that address first) is closed. Refusing the newcomer
 * instead let a stranger holding idle connections keep every later rank
 * out (issue 58). One address alone can then hold no more than the slack
 * above world_size, so ranks from other hosts always find room; ranks on
 * the stranger's own host (loopback) win because they log in at once, and
 * one closed anyway retries (store_tcp.c).
 */
static void dd_server_make_room(dd_store_server_t *srv, const char *peer)
{
    const char *from = NULL;
    int victim = -1;

    if (dd_server_outsiders_from(srv, peer) >= DD_STORE_MAX_PENDING) {
        from = peer;
        victim = dd_server_oldest_outsider(srv, peer);
    } else if (dd_server_count(srv, 0) >=
               srv->world_size + DD_STORE_MAX_PENDING) {
        victim = dd_server_oldest_outsider(srv, NULL);
    }
    if (victim < 0) {
        return;
    }
    dd_store_outsider_note(
        &srv->outsiders, dd_time_now(), DD_LOG_WARN,
        "closed a connection from %s that had not logged in, to make room for "
        "a newer one from %s (at most %d may wait to log in %s)",
        srv->clients[victim].peer, peer,
        from ? DD_STORE_MAX_PENDING : srv->world_size + DD_STORE_MAX_PENDING,
        from ? "from one address" : "in all");
    dd_server_drop(srv, victim);
}

/* The numeric address of a peer, for the per-address bound and messages. */
static void dd_server_peer_name(const struct sockaddr_storage *sa,
                                socklen_t len, char *out, size_t size)
{
    if (getnameinfo((const struct sockaddr *)sa, len, out, (socklen_t)size,
                    NULL, 0, NI_NUMERICHOST) != 0) {
        snprintf(out, size, "an unknown address");
        return;
    }
    /* An IPv4 client of the dual-stack socket is the same peer as one of
     * an IPv4 socket: "::ffff:10.0.0.1" is 10.0.0.1. */
    if (strncmp(out, "::ffff:", 7) == 0 && strchr(out + 7, '.') != NULL) {
        memmove(out, out + 7, strlen(out + 7) + 1);
    }
}

static int dd_server_grow(dd_store_server_t *srv)
{
    if (srv->n_clients < srv->cap_clients) {
        return 0;
    }
    int cap = srv->cap_clients ? srv->cap_clients * 2 : 16;
    dd_server_client_t *clients =
        realloc(srv->clients, sizeof(*clients) * (size_t)cap);
    if (clients == NULL) {
        dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_NET,
                 "store: no memory for client %d; refused it",
                 srv->n_clients + 1);
        return -1;
    }
    srv->clients = clients;
    srv->cap_clients = cap;
    return 0;
}

static void dd_server_accept(dd_store_server_t *srv)
{
    struct sockaddr_storage sa;
    socklen_t slen = sizeof(sa);
    char peer[64];
    int fd = accept4(srv->listen_fd, (struct sockaddr *)&sa, &slen,
                     SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
        return;
    }
    dd_server_peer_name(&sa, slen, peer, sizeof(peer));
    dd_server_make_room(srv, peer);
    if (dd_server_grow(srv) != 0) {
        close(fd);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        dd_error(DD_ERR_IO, DD_SUBSYS_NET,
                 "store: cannot watch client %d: epoll_ctl: %m; refused it",
                 srv->n_clients + 1);
        close(fd);
        return;
    }
    dd_sock_set_nodelay(fd);
    dd_server_client_t *c = &srv->clients[srv->n_clients++];
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->rank = -1;
    c->login_by = dd_time_now() + srv->login_s;
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
}

/* Drops the clients that did not log in in time. */
static void dd_server_expire(dd_store_server_t *srv, double now)
{
    for (int i = srv->n_clients - 1; i >= 0; i--) {
        if (srv->clients[i].rank < 0 && now >= srv->clients[i].login_by) {
            dd_store_outsider_note(&srv->outsiders, now, DD_LOG_WARN,
                                   "dropped a client at %s that did not log "
                                   "in within %.0f s",
                                   srv->clients[i].peer, srv->login_s);
            dd_server_drop(srv, i);
        }
    }
}

/* The poll timeout: until the nearest parked or login deadline, or the
 * stop's. */
static int dd_server_poll_ms(dd_store_server_t *srv)
{
    double next = dd_time_now() + 1.0;
    for (int i = 0; i < srv->n_clients; i++) {
        const dd_server_client_t *c = &srv->clients[i];
        if (c->parked_op && c->deadline < next) {
            next = c->deadline;
        }
        if (c->rank < 0 && c->login_by < next) {
            next = c->login_by;
        }
    }
    if (srv->stopping && srv->stop_deadline < next) {
        next = srv->stop_deadline;
    }
    return dd_time_left_ms(next);
}

/* The client on fd, or -1 (dropped since the event). */
static int dd_server_client_of(const dd_store_server_t *srv, int fd)
{
    for (int i = 0; i < srv->n_clients; i++) {
        if (srv->clients[i].fd == fd) {
            return i;
        }
    }
    return -1;
}

static void *dd_server_main(void *arg)
{
    dd_store_server_t *srv = arg;
    struct epoll_event events[64];

    /* Stopping waits for the ranks only: an outsider that never logged in
     * cannot hold rank 0 back, nor a rank the job dropped. */
    while (!(srv->stopping && (dd_server_awaited(srv) == 0 ||
                               dd_time_now() >= srv->stop_deadline))) {
        int n = epoll_wait(srv->epoll_fd, events, 64, dd_server_poll_ms(srv));
        if (n < 0 && errno != EINTR) {
            dd_error(DD_ERR_IO, DD_SUBSYS_NET, "store: epoll_wait: %m");
            break;
        }
        int accept = 0;
        for (int k = 0; k < n; k++) {
            int fd = events[k].data.fd;
            if (fd == srv->listen_fd) {
                accept = 1;
            } else if (fd == srv->wake[0]) {
                char drain[64];
                (void)!read(srv->wake[0], drain, sizeof(drain));
            } else {
                int i = dd_server_client_of(srv, fd);
                if (i >= 0 && dd_server_read(srv, &srv->clients[i])) {
                    dd_server_note_lost(srv, &srv->clients[i]);
                    dd_server_drop(srv, i);
                }
            }
        }
        if (accept) {
            dd_server_accept(srv);
        }
        double now = dd_time_now();
        dd_server_expire(srv, now);
        dd_store_outsider_flush(&srv->outsiders, now, 0);
        for (int i = 0; i < srv->n_clients; i++) {
            if (srv->clients[i].parked_op) {
                dd_server_try_parked(srv, &srv->clients[i], now);
            }
        }
    }
    return NULL;
}

/* Binds and listens on one address; -1 with errno. */
static int dd_server_bind(const struct sockaddr *sa, socklen_t len, int family)
{
    int one = 1, zero = 0;
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    if (fd < 0) {
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (bind(fd, sa, len) != 0 || listen(fd, 1024) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

static int dd_server_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
}

/* Listens on addr (every interface when NULL, empty, or a host name that
 * means loopback only here while other hosts may take part), reporting the
 * address and port it took. */
static int dd_server_listen(const char *addr, int one_host, int port,
                            int *port_p, char *bound, size_t size)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char service[16];
    int fd = -1;

    snprintf(service, sizeof(service), "%d", port);
    snprintf(bound, size, "every interface");
    if (addr != NULL && addr[0] != '\0') {
        hints.ai_flags = AI_NUMERICHOST;
        int numeric = getaddrinfo(addr, service, &hints, &res) == 0;
        if (!numeric) {
            hints.ai_flags = 0;
            res = NULL;
            if (getaddrinfo(addr, service, &hints, &res) != 0) {
                res = NULL;
            }
        }
        for (struct addrinfo *ai = res; ai != NULL && fd < 0;
             ai = ai->ai_next) {
            if (!numeric && !one_host && dd_server_is_loopback(ai->ai_addr)) {
                continue;
            }
            fd = dd_server_bind(ai->ai_addr, ai->ai_addrlen, ai->ai_family);
            if (fd < 0 && errno != EADDRNOTAVAIL) {
                freeaddrinfo(res);
                return -1; /* the port is taken: no other address helps */
            }
            if (fd >= 0) {
                snprintf(bound, size, "%s", addr);
            }
        }
        if (res != NULL) {
            freeaddrinfo(res);
        }
        if (fd < 0 && numeric) {
            dd_log_warn(DD_SUBSYS_NET,
                        "store: %s is not an address of this host; listening "
                        "on every interface",
                        addr);
        }
    }
    if (fd < 0) {
        struct sockaddr_in6 any = {.sin6_family = AF_INET6,
                                   .sin6_addr = in6addr_any,
                                   .sin6_port = htons((uint16_t)port)};
        fd = dd_server_bind((struct sockaddr *)&any, sizeof(any), AF_INET6);
        if (fd < 0) {
            return -1;
        }
    }
    struct sockaddr_storage sa;
    socklen_t slen = sizeof(sa);
    if (getsockname(fd, (struct sockaddr *)&sa, &slen) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    *port_p = ntohs(sa.ss_family == AF_INET
                        ? ((struct sockaddr_in *)&sa)->sin_port
                        : ((struct sockaddr_in6 *)&sa)->sin6_port);
    return fd;
}

dd_status_t dd_store_server_start(const dd_store_server_params_t *params,
                                  dd_store_server_t **server_p)
{
    dd_store_server_t *srv = calloc(1, sizeof(*srv));
    char bound[256];

    if (srv == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_NET,
                        "store: no memory for the server");
    }
    srv->token = params->token_hash;
    srv->world_size = params->world_size;
    srv->login_s = params->login_s > 0 ? params->login_s : DD_STORE_LOGIN_S;
    srv->clock_skew_us = params->clock_skew_us;
    srv->listen_fd =
        dd_server_listen(params->addr, params->one_host, params->port,
                         &srv->port, bound, sizeof(bound));
    if (srv->listen_fd < 0) {
        dd_status_t status =
            dd_error(DD_ERR_IO, DD_SUBSYS_NET,
                     "store: rank 0 cannot listen on port %d: %m (is another "
                     "job using DREAMDDP_MASTER_PORT?)",
                     params->port);
        free(srv);
        return status;
    }
    dd_status_t status;
    if (pipe2(srv->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        status = dd_error(DD_ERR_IO, DD_SUBSYS_NET,
                          "store: cannot start: pipe2: %m");
        goto err_close_listen;
    }
    struct epoll_event listen_ev = {.events = EPOLLIN,
                                    .data.fd = srv->listen_fd};
    struct epoll_event wake_ev = {.events = EPOLLIN, .data.fd = srv->wake[0]};
    srv->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (srv->epoll_fd < 0 ||
        epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->listen_fd, &listen_ev) !=
            0 ||
        epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->wake[0], &wake_ev) != 0) {
        status = dd_error(DD_ERR_IO, DD_SUBSYS_NET,
                          "store: cannot start: epoll: %m");
        goto err_close_epoll;
    }
    /* pthread_create returns its error; errno is not it. */
    int rc = pthread_create(&srv->thread, NULL, dd_server_main, srv);
    if (rc != 0) {
        status = dd_error(DD_ERR_IO, DD_SUBSYS_NET,
                          "store: cannot start its thread: %s", strerror(rc));
        goto err_close_epoll;
    }
    dd_log_debug(DD_SUBSYS_NET, "store: serving on %s, port %d", bound,
                 srv->port);
    *server_p = srv;
    return DD_OK;

err_close_epoll:
    if (srv->epoll_fd >= 0) {
        close(srv->epoll_fd);
    }
    close(srv->wake[0]);
    close(srv->wake[1]);
err_close_listen:
    close(srv->listen_fd);
    free(srv);
    return status;
}

int dd_store_server_port(const dd_store_server_t *server)
{
    return server->port;
}

void dd_store_server_stop(dd_store_server_t *srv, double timeout_s)
{
    srv->stop_deadline = dd_time_now() + timeout_s;
    __atomic_store_n(&srv->stopping, 1, __ATOMIC_SEQ_CST);
    (void)!write(srv->wake[1], "x", 1);
    pthread_join(srv->thread, NULL);
    dd_store_outsider_flush(&srv->outsiders, dd_time_now(), 1);
    int ranks = dd_server_awaited(srv);
    if (ranks > 0) {
        dd_log_warn(DD_SUBSYS_NET,
                    "store: stopping with %d rank(s) still connected", ranks);
    }
    while (srv->n_clients > 0) {
        dd_server_drop(srv, srv->n_clients - 1);
    }
    for (int b = 0; b < DD_SERVER_BUCKETS; b++) {
        while (srv->buckets[b] != NULL) {
            dd_server_remove(srv, srv->buckets[b]->key);
        }
    }
    free(srv->clients);
    close(srv->epoll_fd);
    close(srv->wake[0]);
    close(srv->wake[1]);
    close(srv->listen_fd);
    free(srv);
}
