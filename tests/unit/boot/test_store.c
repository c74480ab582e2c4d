/* The TCP store: operations among threads of one process, token refusal,
 * world-size and duplicate-rank refusal, timeouts, and a lost master. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "boot/sock.h"
#include "boot/store_outsiders.h"
#include "boot/store_proto.h"
#include "core/clock.h"
#include "core/log.h"
#include "store_cases.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define TOKEN 0x5eedull

static pthread_mutex_t server_lock = PTHREAD_MUTEX_INITIALIZER;
static dd_store_server_t *server;

/* The first rank to open starts this case's server. */
static int server_port(int world)
{
    pthread_mutex_lock(&server_lock);
    if (server == NULL) {
        dd_store_server_params_t params = {.addr = "127.0.0.1",
                                           .token_hash = TOKEN,
                                           .world_size = world,
                                           .login_s = 1.0};
        assert_int_equal(dd_store_server_start(&params, &server), DD_OK);
    }
    int port = dd_store_server_port(server);
    pthread_mutex_unlock(&server_lock);
    return port;
}

static dd_store_t *open_store(int rank, int world, double timeout_s)
{
    dd_store_t *s = NULL;
    int port = server_port(world);
    if (dd_store_tcp_connect("127.0.0.1", port, TOKEN, rank, world, timeout_s,
                             &s) != DD_OK) {
        return NULL;
    }
    return s;
}

static int store_setup(void **state)
{
    return 0;
}

static int store_teardown(void **state)
{
    if (server != NULL) {
        dd_store_server_stop(server, 1.0);
        server = NULL;
    }
    return 0;
}

static void test_wrong_token_refused(void **state)
{
    dd_store_t *s = NULL;
    int port = server_port(2);
    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, TOKEN + 1, 1, 2, 2.0, &s),
        DD_ERR_REFUSED);
    assert_null(s);
    assert_non_null(strstr(dd_last_error(), "refused rank 1"));
    assert_non_null(strstr(dd_last_error(), "job token differs"));
}

/* The values a token yields: the login is SHA-256 under its own label,
 * and the name value (the file store's directory) is another that the
 * store refuses as a login (under FNV-1a both were one value, and the
 * hierarchical route's /dev/shm names showed it). */
static void test_token_values(void **state)
{
    const char *token = "secret-of-this-job";
    uint64_t login = dd_store_token_hash(token);
    uint64_t name = dd_store_token_name(token);
    dd_store_server_params_t params = {.addr = "127.0.0.1",
                                       .token_hash = login,
                                       .world_size = 2,
                                       .login_s = 1.0};
    dd_store_server_t *srv = NULL;
    dd_store_t *s = NULL;

    /* hashlib.sha256(label + b"\0" + token).hexdigest()[:16] */
    assert_true(login == 0xaf903a8d67015235ull);
    assert_true(name == 0x9a1357ad4c5d1854ull);
    assert_int_equal(dd_store_server_start(&params, &srv), DD_OK);
    int port = dd_store_server_port(srv);
    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, name, 1, 2, 2.0, &s),
        DD_ERR_REFUSED);
    assert_null(s);
    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, login, 1, 2, 2.0, &s), DD_OK);
    dd_store_close(s);
    dd_store_server_stop(srv, 1.0);
}

/* The server answers with its wall clock plus the skew it was given; a
 * store without a server says it has none. */
static void test_server_clock(void **state)
{
    dd_store_server_params_t params = {.addr = "127.0.0.1",
                                       .token_hash = TOKEN,
                                       .world_size = 2,
                                       .login_s = 1.0,
                                       .clock_skew_us = -7e9};
    dd_store_server_t *srv = NULL;
    dd_store_t *s = NULL;
    double us = 0;

    (void)state;
    assert_int_equal(dd_store_server_start(&params, &srv), DD_OK);
    assert_int_equal(dd_store_tcp_connect("127.0.0.1",
                                          dd_store_server_port(srv), TOKEN, 1,
                                          2, 2.0, &s),
                     DD_OK);
    double before = dd_clock_realtime_us(0);
    assert_int_equal(dd_store_clock(s, &us), DD_OK);
    double after = dd_clock_realtime_us(0);
    assert_true(us >= before - 7e9 && us <= after - 7e9);
    dd_store_close(s);
    dd_store_server_stop(srv, 1.0);
}

/* One login step on a raw connection: sends b, returns the reply's code
 * and, after its reason, the challenge (when chal is not NULL). */
static int raw_step(int fd, dd_store_buf_t *b, uint8_t *chal)
{
    uint8_t *body = NULL;
    size_t len = 0, n = 0;
    char reason[256];
    double deadline = dd_time_now() + 5;

    dd_store_buf_finish(b);
    assert_int_equal(dd_sock_send_all(fd, b->data, b->len, deadline), DD_OK);
    assert_int_equal(dd_sock_recv_frame(fd, deadline, 4096, &body, &len),
                     DD_OK);
    dd_store_cursor_t cur = {body, len, 0};
    int code = dd_store_get_u8(&cur);
    dd_store_get_str(&cur, reason, sizeof(reason));
    if (chal != NULL && code == DD_STORE_REPLY_OK) {
        const uint8_t *c = dd_store_get_bytes(&cur, &n);
        assert_int_equal(n, DD_STORE_NONCE);
        memcpy(chal, c, n);
    }
    free(body);
    return code;
}

static int raw_hello(int port, int rank, uint8_t *chal)
{
    dd_store_buf_t b = {0};
    int fd = -1;
    char why[128];

    assert_int_equal(dd_sock_connect("127.0.0.1", port, dd_time_now() + 5, &fd,
                                     why, sizeof(why)),
                     DD_OK);
    dd_store_buf_begin(&b);
    dd_store_buf_u8(&b, DD_STORE_OP_HELLO);
    dd_store_buf_u32(&b, DD_STORE_MAGIC);
    dd_store_buf_u16(&b, DD_STORE_VERSION);
    dd_store_buf_u32(&b, (uint32_t)rank);
    dd_store_buf_u32(&b, 2);
    assert_int_equal(raw_step(fd, &b, chal), DD_STORE_REPLY_OK);
    dd_store_buf_free(&b);
    return fd;
}

static int raw_proof(int fd, const uint8_t *proof)
{
    dd_store_buf_t b = {0};
    dd_store_buf_begin(&b);
    dd_store_buf_u8(&b, DD_STORE_OP_PROOF);
    dd_store_buf_bytes(&b, proof, 32);
    int code = raw_step(fd, &b, NULL);
    dd_store_buf_free(&b);
    return code;
}

/* The login secret never travels: each connection gets its own challenge,
 * the proof answers it alone (a recorded proof is refused on the next
 * connection), and the job's tag, which the aggregators' headers carry in
 * clear, is not the secret. */
static void test_login_is_a_challenge(void **state)
{
    const char *token = "secret-of-this-job";
    uint64_t login = dd_store_token_hash(token);
    dd_store_server_params_t params = {.addr = "127.0.0.1",
                                       .token_hash = login,
                                       .world_size = 2,
                                       .login_s = 2.0};
    dd_store_server_t *srv = NULL;
    dd_store_t *s = NULL;
    uint8_t c1[DD_STORE_NONCE], c2[DD_STORE_NONCE], proof[32];

    (void)state;
    assert_true(dd_store_token_tag(token) != login);
    assert_int_equal(dd_store_server_start(&params, &srv), DD_OK);
    int port = dd_store_server_port(srv);
    assert_int_equal(dd_store_tcp_connect("127.0.0.1", port,
                                          dd_store_token_tag(token), 1, 2, 2.0,
                                          &s),
                     DD_ERR_REFUSED);
    int a = raw_hello(port, 1, c1);
    int b = raw_hello(port, 1, c2);
    assert_true(memcmp(c1, c2, sizeof(c1)) != 0);
    /* a's proof, replayed on b, answers the wrong challenge. */
    dd_store_proof(login, c1, 1, 2, proof);
    assert_int_equal(raw_proof(b, proof), DD_STORE_REPLY_REFUSED);
    /* For another rank it is refused too; for its own, accepted. */
    int c = raw_hello(port, 1, c2);
    dd_store_proof(login, c2, 0, 2, proof);
    assert_int_equal(raw_proof(c, proof), DD_STORE_REPLY_REFUSED);
    assert_int_equal(
        raw_proof(a, (dd_store_proof(login, c1, 1, 2, proof), proof)),
        DD_STORE_REPLY_OK);
    close(a);
    close(b);
    close(c);
    dd_store_server_stop(srv, 1.0);
}

static void test_world_mismatch_and_duplicate_rank(void **state)
{
    dd_store_t *a = NULL, *b = NULL;
    int port = server_port(2);

    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, TOKEN, 1, 3, 2.0, &b),
        DD_ERR_MISMATCH);
    assert_non_null(strstr(dd_last_error(),
                           "rank 1 says the world size is 3 but rank 0 "
                           "says 2"));
    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, TOKEN, 1, 2, 2.0, &a), DD_OK);
    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, TOKEN, 1, 2, 2.0, &b),
        DD_ERR_MISMATCH);
    assert_non_null(strstr(dd_last_error(), "rank 1 has already joined"));
    dd_store_close(a);
}

static void test_unreachable_master_names_address(void **state)
{
    dd_store_t *s = NULL;
    double t0 = dd_time_now();
    /* Port 9 (discard) has no listener here. */
    assert_int_equal(dd_store_tcp_connect("127.0.0.1", 9, TOKEN, 1, 2, 0.5, &s),
                     DD_ERR_UNREACHABLE);
    assert_true(dd_time_now() - t0 < 3.0);
    assert_non_null(strstr(dd_last_error(), "127.0.0.1:9"));
}

static void test_lost_master(void **state)
{
    dd_store_t *s = open_store(1, 2, 30.0);
    void *v;
    size_t len;

    assert_non_null(s);
    store_teardown(state); /* the master goes away while rank 1 waits */
    double t0 = dd_time_now();
    assert_int_equal(dd_store_get(s, "k", &v, &len), DD_ERR_PEER_LOST);
    assert_true(dd_time_now() - t0 < 10.0);
    assert_non_null(strstr(dd_last_error(), "closed the connection"));
    dd_store_close(s);
}

/* A raw TCP connection to the store, as an outsider makes it. */
static int outsider(const char *addr, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Seconds until the server closes fd (reading and dropping what it sends),
 * or -1 when it is still open after limit_s. */
static double time_to_close(int fd, double limit_s)
{
    double t0 = dd_time_now();
    char buf[256];
    while (dd_time_now() - t0 < limit_s) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) > 0) {
            ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                return dd_time_now() - t0;
            }
        }
    }
    return -1;
}

static size_t rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld %ld", &pages, &resident), 2);
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Eight outsiders announce 64 MiB frames and push 2 MiB each: the server
 * drops them at the length, and its memory does not grow by their data
 * (it took 64 MiB a client before login). */
static void test_prelogin_frames_capped(void **state)
{
    enum { N = 8, PUSH = 2 << 20 };
    int port = server_port(2), fds[N];
    char *junk = calloc(1, 1 << 16);
    assert_non_null(junk);
    size_t before = rss_bytes();
    for (int i = 0; i < N; i++) {
        fds[i] = outsider("127.0.0.1", port);
        assert_true(fds[i] >= 0);
        uint8_t len[4] = {0xff, 0xff, 0xff, 0x03}; /* 64 MiB - 1 */
        assert_int_equal(send(fds[i], len, 4, MSG_NOSIGNAL), 4);
        for (size_t sent = 0; sent < PUSH;) {
            ssize_t n =
                send(fds[i], junk, 1 << 16, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n <= 0) {
                break; /* closed, or the kernel's buffers are full */
            }
            sent += (size_t)n;
        }
    }
    double slowest = 0;
    for (int i = 0; i < N; i++) {
        double t = time_to_close(fds[i], 2.0);
        if (t < 0 || t > 1.0) {
            fail_msg("outsider %d still connected after %.2f s", i, t);
        }
        slowest = t > slowest ? t : slowest;
        close(fds[i]);
    }
    size_t after = rss_bytes();
    free(junk);
    printf("# 8 pre-login clients: rss %zu -> %zu bytes (+%zd), all dropped "
           "within %.3f s\n",
           before, after, (ssize_t)(after - before), slowest);
    assert_true(after < before + (1 << 20));
    /* The ranks still get in. */
    dd_store_t *s = open_store(1, 2, 5.0);
    assert_non_null(s);
    dd_store_close(s);
}

static void test_login_deadline(void **state)
{
    int fd = outsider("127.0.0.1", server_port(2)); /* login_s is 1 s */
    assert_true(fd >= 0);
    double t = time_to_close(fd, 5.0);
    printf("# an idle outsider was dropped after %.2f s\n", t);
    assert_true(t >= 0.8 && t < 3.0);
    close(fd);
}

/* A raw TCP connection to addr:port from the local address src. */
static int outsider_from(const char *src, const char *addr, int port)
{
    struct sockaddr_in from = {.sin_family = AF_INET};
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(inet_pton(AF_INET, src, &from.sin_addr), 1);
    assert_int_equal(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
    if (bind(fd, (struct sockaddr *)&from, sizeof(from)) != 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* At DD_STORE_MAX_PENDING outsiders from one address, the next from it
 * takes the place of the oldest from it: an older outsider from another
 * address stays, the newcomer stays, and a rank still logs in while they
 * are all held. (The newcomer was closed before, and so was every rank
 * that came after a stranger filled the table: issue 58.) */
static void test_connection_limit(void **state)
{
    enum { LIMIT = DD_STORE_MAX_PENDING };
    dd_store_server_t *srv;
    dd_store_server_params_t params = {.addr = "127.0.0.1",
                                       .token_hash = TOKEN,
                                       .world_size = 2,
                                       .login_s = 60};
    assert_int_equal(dd_store_server_start(&params, &srv), DD_OK);
    int port = dd_store_server_port(srv), fds[LIMIT];
    int other = outsider_from("127.0.0.3", "127.0.0.1", port);
    assert_true(other >= 0);
    for (int n = 0; n < LIMIT; n++) {
        fds[n] = outsider_from("127.0.0.1", "127.0.0.1", port);
        assert_true(fds[n] >= 0);
    }
    int extra = outsider_from("127.0.0.1", "127.0.0.1", port);
    assert_true(extra >= 0);
    double t = time_to_close(fds[0], 5.0);
    printf("# the oldest of %d outsiders from 127.0.0.1 was closed %.3f s "
           "after a newer one came\n",
           LIMIT, t);
    assert_true(t >= 0);
    for (int i = 1; i < LIMIT; i++) {
        if (time_to_close(fds[i], 0.01) >= 0) {
            fail_msg("outsider %d (not the oldest) was closed", i);
        }
    }
    assert_true(time_to_close(extra, 0.01) < 0);
    assert_true(time_to_close(other, 0.01) < 0); /* older, another address */
    dd_store_t *s = NULL;
    assert_int_equal(
        dd_store_tcp_connect("127.0.0.1", port, TOKEN, 1, 2, 5.0, &s), DD_OK);
    dd_store_close(s);
    for (int i = 0; i < LIMIT; i++) {
        close(fds[i]);
    }
    close(extra);
    close(other);
    dd_store_server_stop(srv, 5.0);
}

/* A listener that closes the first `closes` connections it accepts, then
 * (when serve) gives its port to a real store: what a rank sees of a store
 * that closes its connection to make room for a newer one. */
typedef struct {
    int listen_fd, port, closes, serve;
    dd_store_server_t *srv;
} closer_t;

static void *closer_main(void *arg)
{
    closer_t *c = arg;
    for (int i = 0; i < c->closes; i++) {
        int fd = accept(c->listen_fd, NULL, NULL);
        if (fd < 0) {
            break; /* the test shut the listener down */
        }
        close(fd);
    }
    if (c->serve) {
        close(c->listen_fd);
        dd_store_server_params_t params = {.addr = "127.0.0.1",
                                           .port = c->port,
                                           .token_hash = TOKEN,
                                           .world_size = 2};
        if (dd_store_server_start(&params, &c->srv) != DD_OK) {
            c->srv = NULL;
        }
    }
    return NULL;
}

static void closer_start(closer_t *c, pthread_t *thread)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int one = 1;
    c->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c->listen_fd >= 0);
    setsockopt(c->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* accept gives up after 15 s, so that a rank that gave up early
     * cannot leave the closer waiting for ever. */
    struct timeval limit = {15, 0};
    setsockopt(c->listen_fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr), 1);
    assert_int_equal(bind(c->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(c->listen_fd, 16), 0);
    assert_int_equal(getsockname(c->listen_fd, (struct sockaddr *)&sa, &len),
                     0);
    c->port = ntohs(sa.sin_port);
    assert_int_equal(pthread_create(thread, NULL, closer_main, c), 0);
}

/* A rank whose connection the store closes before the login ends tries
 * again, and gets in (it failed at once before: issue 58). */
static void test_join_retries_closed(void **state)
{
    closer_t c = {.closes = 3, .serve = 1};
    pthread_t thread;
    dd_store_t *s = NULL;
    closer_start(&c, &thread);
    double t0 = dd_time_now();
    dd_status_t status =
        dd_store_tcp_connect("127.0.0.1", c.port, TOKEN, 1, 2, 10.0, &s);
    double t = dd_time_now() - t0;
    pthread_join(thread, NULL);
    printf("# joined after 3 closed connections in %.3f s: %s\n", t,
           status == DD_OK ? "ok" : dd_last_error());
    if (status != DD_OK && c.srv != NULL) {
        dd_store_server_stop(c.srv, 1.0);
    }
    assert_int_equal(status, DD_OK);
    assert_non_null(c.srv);
    assert_int_equal(dd_store_set(s, "k", "v", 1), DD_OK);
    dd_store_close(s);
    dd_store_server_stop(c.srv, 5.0);
}

/* A store that closes every connection: the rank tries until its timeout
 * (1 s here; < 5 s asserted for a loaded machine), then says what it saw. */
static void test_join_gives_up_naming_closes(void **state)
{
    closer_t c = {.closes = 1000000, .serve = 0};
    pthread_t thread;
    dd_store_t *s = NULL;
    closer_start(&c, &thread);
    double t0 = dd_time_now();
    dd_status_t status =
        dd_store_tcp_connect("127.0.0.1", c.port, TOKEN, 1, 2, 1.0, &s);
    double t = dd_time_now() - t0;
    printf("# gave up after %.3f s: %s\n", t, dd_last_error());
    assert_int_equal(status, DD_ERR_PEER_LOST);
    assert_true(t >= 0.9 && t < 5.0);
    assert_non_null(strstr(dd_last_error(), "closed the connection"));
    assert_non_null(strstr(dd_last_error(), "times before the login ended"));
    assert_non_null(strstr(dd_last_error(), "DREAMDDP_TIMEOUT_S"));
    shutdown(c.listen_fd, SHUT_RDWR); /* ends the closer's accept */
    pthread_join(thread, NULL);
    close(c.listen_fd);
}

/* The outsiders' log: the first DD_STORE_OUTSIDER_BURST events of a window
 * are printed, the rest counted for one summary line when the window ends;
 * then a new window prints again. */
static void test_outsider_log_bounded(void **state)
{
    dd_store_outsider_log_t log = {0};
    for (int i = 0; i < 500; i++) {
        dd_store_outsider_note(&log, 100.0 + i * 0.001, DD_LOG_WARN,
                               "refused a client at 127.0.0.1 claiming rank "
                               "%d: wrong job token",
                               i);
    }
    assert_int_equal(log.printed, DD_STORE_OUTSIDER_BURST);
    assert_int_equal(log.suppressed, 500 - DD_STORE_OUTSIDER_BURST);
    assert_int_equal(log.total, 500);
    assert_string_equal(log.last, "refused a client at 127.0.0.1 claiming "
                                  "rank 499: wrong job token");
    dd_store_outsider_flush(&log, 100.5, 0); /* the window goes on */
    assert_int_equal(log.suppressed, 500 - DD_STORE_OUTSIDER_BURST);
    dd_store_outsider_flush(&log, 100.0 + DD_STORE_OUTSIDER_WINDOW_S, 0);
    assert_int_equal(log.suppressed, 0);
    assert_int_equal(log.printed, 0);
    dd_store_outsider_note(&log, 200.0, DD_LOG_WARN, "dropped a client");
    assert_int_equal(log.printed, 1);
    assert_int_equal(log.total, 501);
}

/* Rank 0 stops as soon as the ranks have left, although an outsider is
 * still connected (it waited the whole timeout before). */
static void test_stop_ignores_outsiders(void **state)
{
    dd_store_t *s = open_store(1, 2, 5.0);
    assert_non_null(s);
    int fd = outsider("127.0.0.1", dd_store_server_port(server));
    assert_true(fd >= 0);
    dd_store_close(s);
    double t0 = dd_time_now();
    dd_store_server_stop(server, 30.0);
    server = NULL;
    double t = dd_time_now() - t0;
    printf("# stop with an idle outsider connected took %.3f s\n", t);
    assert_true(t < 1.0);
    close(fd);
}

/* The server listens on the address it is given: 127.0.0.1 is not
 * 127.0.0.2, though both are this host's. */
static void test_listens_on_given_address(void **state)
{
    int port = server_port(2);
    int fd = outsider("127.0.0.2", port);
    if (fd >= 0) {
        close(fd);
        fail_msg("the store bound to 127.0.0.1 took a connection on "
                 "127.0.0.2");
    }
    assert_int_equal(errno, ECONNREFUSED);
}

/* A host name that means loopback here: the store takes loopback only when
 * every rank is on this host, and every interface otherwise (other hosts
 * resolve the name to another address). */
static void test_loopback_name(void **state)
{
    for (int one_host = 0; one_host <= 1; one_host++) {
        dd_store_server_t *srv;
        dd_store_server_params_t params = {.addr = "localhost",
                                           .one_host = one_host,
                                           .token_hash = TOKEN,
                                           .world_size = 2};
        assert_int_equal(dd_store_server_start(&params, &srv), DD_OK);
        int port = dd_store_server_port(srv);
        dd_store_t *s = NULL;
        assert_int_equal(
            dd_store_tcp_connect("localhost", port, TOKEN, 1, 2, 5.0, &s),
            DD_OK);
        int fd = outsider("127.0.0.2", port);
        assert_int_equal(fd >= 0, !one_host);
        if (fd >= 0) {
            close(fd);
        }
        dd_store_close(s);
        dd_store_server_stop(srv, 5.0);
    }
}

static int group_setup(void **state)
{
    return dd_log_configure(DD_LOG_ERROR, ~0u, "/dev/null", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        STORE_CASES,
        STORE_CASE(test_wrong_token_refused),
        STORE_CASE(test_token_values),
        STORE_CASE(test_server_clock),
        STORE_CASE(test_login_is_a_challenge),
        STORE_CASE(test_world_mismatch_and_duplicate_rank),
        STORE_CASE(test_unreachable_master_names_address),
        STORE_CASE(test_lost_master),
        STORE_CASE(test_prelogin_frames_capped),
        STORE_CASE(test_login_deadline),
        STORE_CASE(test_connection_limit),
        STORE_CASE(test_join_retries_closed),
        STORE_CASE(test_join_gives_up_naming_closes),
        STORE_CASE(test_outsider_log_bounded),
        STORE_CASE(test_stop_ignores_outsiders),
        STORE_CASE(test_listens_on_given_address),
        STORE_CASE(test_loopback_name),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
