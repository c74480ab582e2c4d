/*
 * bench/tcpfloor.c: what the kernel's TCP alone takes to move the bytes of
 * one aggregated sync, with no library, no summation and no waiting for
 * the other workers: the floor that bench/sync.sh sets our figures beside.
 *
 *   tcpfloor RANK WORKERS AGGREGATORS BYTES ADDR...
 *
 * Ranks 0 .. WORKERS-1 are workers, the rest aggregators; ADDR is every
 * rank's address, in rank order. With n workers, k aggregators and the
 * BytePS share x = 2k(n-1)/(n^2+kn-2k) (1 when k >= n), each worker sends
 * and receives xM/k bytes to and from each aggregator and 2(1-x)M/n to and
 * from each other worker (a push and an average back), all at once, one
 * full-duplex connection per pair, one thread moving them all. Without
 * aggregators, the bytes go as a ring allreduce moves them: each worker
 * sends 2(n-1)/n M to the next and receives as much from the one before,
 * over one connection each, the ring's two a host whatever n (all at once
 * to every other worker, 2(n-1) flows a host, took 1.62x the line's limit
 * at 16 hosts where the library's ring took 1.05x). Prints the seconds
 * this rank took, from a start every rank shares to its last byte in
 * (the largest of them is the floor).
 *
 *   tcpfloor --paced RANK WORKERS AGGREGATORS BYTES ADDR...
 *
 * The same bytes with aggregators, moved as the library's flow control
 * moves them (src/agg/client.c) rather than all at once: a worker cuts
 * its pushes into pieces of 512 KiB / n bytes (4 to 64 KiB), keeps at
 * most 24 pieces unanswered, and at each home at most 1 MiB / n bytes
 * (one piece always) plus every byte answered so far; a home (an
 * aggregator, or a worker for its share) answers every worker's piece j,
 * with as many bytes, once each worker's piece j is in (as a sum needs;
 * its own, a worker's, counts as in), with no summation. Pushing
 * everything at once, n workers meet at an aggregator with more than a
 * switch port holds, and the time depends on which segments are lost:
 * at 16 + 8 and 100 Mbit/s, 3.2 to 4.6 s between runs against 3.14 to
 * 3.19 s paced (those paced times are the aggregators' alone, taken
 * before the workers' were printed too: at 8 + 4 the workers' last
 * answers came 3 % later at 24.9 MB and a third later at 1.66 MB).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PORT 31998
#define MAX_RANKS 64
#define BUF (1 << 20)

typedef struct {
    int fd;
    size_t send_left, recv_left;
} flow_t;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* Moves every flow's bytes, both ways, from one thread waiting on all
 * the connections at once (a thread per direction, 2(n-1) a host, cost
 * the 2 cores a context switch per 1 MB or less and more than the links). */
static void pump_all(flow_t *f, int n_flows)
{
    struct pollfd pfd[2 * MAX_RANKS];
    char *buf = malloc(BUF);
    int busy = n_flows;

    if (buf == NULL) {
        die("malloc");
    }
    memset(buf, 1, BUF);
    for (int i = 0; i < n_flows; i++) {
        fcntl(f[i].fd, F_SETFL, fcntl(f[i].fd, F_GETFL) | O_NONBLOCK);
    }
    while (busy > 0) {
        busy = 0;
        for (int i = 0; i < n_flows; i++) {
            pfd[i] = (struct pollfd){
                .fd = f[i].fd,
                .events = (short)((f[i].send_left ? POLLOUT : 0) |
                                  (f[i].recv_left ? POLLIN : 0))};
            busy += pfd[i].events != 0;
        }
        if (busy == 0) {
            break;
        }
        if (poll(pfd, (nfds_t)n_flows, -1) < 0) {
            die("poll");
        }
        for (int i = 0; i < n_flows; i++) {
            if ((pfd[i].revents & (POLLERR | POLLHUP)) &&
                !(pfd[i].revents & POLLIN)) {
                die("connection");
            }
            if ((pfd[i].revents & POLLOUT) && f[i].send_left) {
                size_t want = f[i].send_left < BUF ? f[i].send_left : BUF;
                ssize_t k = send(f[i].fd, buf, want, MSG_NOSIGNAL);
                if (k < 0 && errno != EAGAIN) {
                    die("send");
                }
                f[i].send_left -= k > 0 ? (size_t)k : 0;
            }
            if ((pfd[i].revents & POLLIN) && f[i].recv_left) {
                size_t want = f[i].recv_left < BUF ? f[i].recv_left : BUF;
                ssize_t k = recv(f[i].fd, buf, want, 0);
                if (k == 0 || (k < 0 && errno != EAGAIN)) {
                    die("recv");
                }
                f[i].recv_left -= k > 0 ? (size_t)k : 0;
            }
        }
    }
    free(buf);
}

/* The library's flow control (src/agg/client.c): pieces in flight, a
 * home's budget and the least piece. */
#define WINDOW 24
#define HOME_BUDGET (1024 * 1024)
#define INCAST (512 * 1024)
#define QUEUE 4096

enum { PUSH = 1, ANSWER = 2 };

typedef struct {
    int fd;
    size_t push_total;   /* this rank's bytes to push to the peer */
    size_t push_left;    /* of them, still to push */
    size_t unanswered;   /* pushed to the peer, not yet answered */
    size_t expect_total; /* the peer's pushes to this rank */
    size_t expect_left;  /* of them, still to come */
    size_t got;          /* the peer's pieces come in */
    /* Units queued to send, each a header (kind, length) and that many
     * bytes; out_off is how far the first one has gone. */
    uint32_t out_kind[QUEUE], out_len[QUEUE];
    int out_head, out_n;
    size_t out_off;
    uint32_t in_hdr[2]; /* the unit coming in */
    size_t in_off;
    int closed; /* the peer ended, with nothing left between the two */
} pflow_t;

static void queue_unit(pflow_t *f, uint32_t kind, uint32_t len)
{
    if (f->out_n == QUEUE) {
        fprintf(stderr, "tcpfloor: queue full\n");
        exit(1);
    }
    int i = (f->out_head + f->out_n++) % QUEUE;
    f->out_kind[i] = kind;
    f->out_len[i] = len;
}

/* Sends queued units until the socket is full. */
static void send_units(pflow_t *f, char *buf)
{
    while (f->out_n > 0) {
        int i = f->out_head;
        uint32_t hdr[2] = {f->out_kind[i], f->out_len[i]};
        size_t total = sizeof(hdr) + f->out_len[i];
        struct iovec iov[2];
        int n_iov = 0;
        if (f->out_off < sizeof(hdr)) {
            iov[n_iov++] = (struct iovec){(char *)hdr + f->out_off,
                                          sizeof(hdr) - f->out_off};
        }
        size_t body = f->out_off < sizeof(hdr) ? 0 : f->out_off - sizeof(hdr);
        size_t body_left = f->out_len[i] - body;
        iov[n_iov++] = (struct iovec){buf, body_left < BUF ? body_left : BUF};
        ssize_t k = writev(f->fd, iov, n_iov);
        if (k < 0) {
            if (errno == EAGAIN) {
                return;
            }
            die("send");
        }
        f->out_off += (size_t)k;
        if (f->out_off < total) {
            continue;
        }
        f->out_off = 0;
        f->out_head = (f->out_head + 1) % QUEUE;
        f->out_n--;
    }
}

/* Reads what has come in: a push is counted, an answer frees its bytes
 * (and grows the budget: *grown, *in_flight). */
static void recv_units(pflow_t *f, char *buf, size_t *grown, int *in_flight)
{
    for (;;) {
        ssize_t k;
        if (f->in_off < sizeof(f->in_hdr)) {
            k = recv(f->fd, (char *)f->in_hdr + f->in_off,
                     sizeof(f->in_hdr) - f->in_off, 0);
        } else {
            size_t left = sizeof(f->in_hdr) + f->in_hdr[1] - f->in_off;
            k = recv(f->fd, buf, left < BUF ? left : BUF, 0);
        }
        if (k == 0 && f->in_off == 0 && f->expect_left == 0 &&
            f->unanswered == 0 && f->push_left == 0) {
            /* The peer is done and gone, and so is this flow: a rank
             * that ends closes its connections, and the last bytes it
             * sent come before the end of the stream. */
            f->closed = 1;
            return;
        }
        if (k == 0) {
            fprintf(stderr, "tcpfloor: a peer closed its connection with "
                            "bytes still to come\n");
            exit(1);
        }
        if (k < 0 && errno != EAGAIN) {
            die("recv");
        }
        if (k < 0) {
            return;
        }
        f->in_off += (size_t)k;
        if (f->in_off < sizeof(f->in_hdr) ||
            f->in_off < sizeof(f->in_hdr) + f->in_hdr[1]) {
            continue;
        }
        f->in_off = 0;
        if (f->in_hdr[0] == PUSH) {
            f->expect_left -= f->in_hdr[1];
            f->got++;
        } else {
            f->unanswered -= f->in_hdr[1];
            *grown += f->in_hdr[1];
            (*in_flight)--;
        }
    }
}

/* Pushes the flows' bytes in pieces within the window and the homes'
 * budgets, and answers the pieces pushed here, piece j once every worker's
 * piece j is in, until every piece is back. */
static void pump_paced(pflow_t *f, int n_flows, int n_workers)
{
    struct pollfd pfd[2 * MAX_RANKS];
    char *buf = malloc(BUF);
    size_t piece = INCAST / (size_t)n_workers, grown = 0;
    size_t base = HOME_BUDGET / (size_t)n_workers;
    int in_flight = 0;
    size_t answered = 0; /* pieces answered, of every pushing peer's */

    piece = piece < 4096 ? 4096 : piece > 65536 ? 65536 : piece;
    if (buf == NULL) {
        die("malloc");
    }
    memset(buf, 1, BUF);
    for (int i = 0; i < n_flows; i++) {
        fcntl(f[i].fd, F_SETFL, fcntl(f[i].fd, F_GETFL) | O_NONBLOCK);
    }
    for (;;) {
        /* New pieces: to the home least far through its bytes, of those
         * within their budget. */
        while (in_flight < WINDOW) {
            int best = -1;
            for (int i = 0; i < n_flows; i++) {
                size_t p = f[i].push_left < piece ? f[i].push_left : piece;
                if (p == 0 || (f[i].unanswered > 0 &&
                               f[i].unanswered + p > base + grown)) {
                    continue;
                }
                if (best < 0 ||
                    (double)f[i].push_left / f[i].push_total >
                        (double)f[best].push_left / f[best].push_total) {
                    best = i;
                }
            }
            if (best < 0) {
                break;
            }
            if (in_flight == 0) {
                grown = 0; /* a burst */
            }
            size_t p = f[best].push_left < piece ? f[best].push_left : piece;
            queue_unit(&f[best], PUSH, (uint32_t)p);
            f[best].push_left -= p;
            f[best].unanswered += p;
            in_flight++;
        }
        int busy = 0;
        for (int i = 0; i < n_flows; i++) {
            int left = !f[i].closed && (f[i].push_left || f[i].unanswered ||
                                        f[i].expect_left || f[i].out_n);
            /* A flow done is left out: its peer may have gone. */
            pfd[i] =
                (struct pollfd){.fd = left ? f[i].fd : -1,
                                .events = (short)((f[i].out_n ? POLLOUT : 0) |
                                                  (left ? POLLIN : 0))};
            busy += left;
        }
        if (busy == 0) {
            break;
        }
        /* Workers pick their homes each by its own budget, not in one
         * order as the library does, so in principle every window could
         * fill with pieces waiting on each other's: that ends the run
         * (never seen), rather than hanging it. */
        int ready = poll(pfd, (nfds_t)n_flows, 10000);
        if (ready < 0) {
            die("poll");
        }
        if (ready == 0) {
            fprintf(stderr, "tcpfloor: nothing moved for 10 s\n");
            exit(1);
        }
        for (int i = 0; i < n_flows; i++) {
            if ((pfd[i].revents & (POLLERR | POLLHUP)) &&
                !(pfd[i].revents & POLLIN)) {
                die("connection");
            }
            if (pfd[i].revents & POLLIN) {
                recv_units(&f[i], buf, &grown, &in_flight);
            }
            if (pfd[i].revents & POLLOUT) {
                send_units(&f[i], buf);
            }
        }
        /* The pieces every pushing peer's has come in for, answered. */
        size_t all_in = SIZE_MAX, total = 0;
        for (int i = 0; i < n_flows; i++) {
            if (f[i].expect_total > 0) {
                all_in = f[i].got < all_in ? f[i].got : all_in;
                total = f[i].expect_total;
            }
        }
        for (; total > 0 && answered < all_in; answered++) {
            size_t left = total - answered * piece;
            for (int i = 0; i < n_flows; i++) {
                if (f[i].expect_total > 0) {
                    queue_unit(&f[i], ANSWER,
                               (uint32_t)(left < piece ? left : piece));
                }
            }
        }
    }
    free(buf);
}

/* A socket listening on PORT. */
static int listen_on(int backlog)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(PORT)};
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(l, backlog)) {
        die("listen");
    }
    return l;
}

/* A connection to addr's PORT, retried for 10 s while its rank starts. */
static int dial(const char *addr)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(PORT)};

    inet_pton(AF_INET, addr, &to.sin_addr);
    for (int tries = 0;; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0) {
            return fd;
        }
        close(fd);
        if (tries == 500) {
            die("connect");
        }
        usleep(20000);
    }
}

/* Connects to every higher rank and accepts every lower one. */
static void connect_all(int me, int world, char **addr, int *fd)
{
    int l = listen_on(64);

    for (int r = me + 1; r < world; r++) {
        fd[r] = dial(addr[r]);
        if (send(fd[r], &me, sizeof(me), 0) != sizeof(me)) {
            die("send");
        }
    }
    for (int i = 0; i < me; i++) {
        int who, c = accept(l, NULL, NULL);
        if (c < 0 || recv(c, &who, sizeof(who), MSG_WAITALL) != sizeof(who) ||
            who < 0 || who >= me) {
            die("accept");
        }
        fd[who] = c;
    }
    close(l);
}

/* Every rank starts once every rank is connected: each tells rank 0,
 * which answers them all, so that their clocks start within a round trip
 * of each other (a second's sleep after connecting left them as far apart
 * as their connections took, and the ranks that started last reported
 * the least). */
static void start_together(int me, int world, const int *fd)
{
    char c = 0;

    if (me != 0) {
        if (send(fd[0], &c, 1, 0) != 1 ||
            recv(fd[0], &c, 1, MSG_WAITALL) != 1) {
            die("start");
        }
        return;
    }
    for (int r = 1; r < world; r++) {
        if (recv(fd[r], &c, 1, MSG_WAITALL) != 1) {
            die("start");
        }
    }
    for (int r = 1; r < world; r++) {
        if (send(fd[r], &c, 1, 0) != 1) {
            die("start");
        }
    }
}

/* The ring: connects to the next worker and accepts the one before, then
 * passes a token twice around, so that every rank starts once every
 * connection is up, within a lap's latency of the others. */
static void connect_ring(int me, int n, char **addr, int *next, int *prev)
{
    int l = listen_on(4);
    char token = 0;

    *next = dial(addr[(me + 1) % n]);
    if ((*prev = accept(l, NULL, NULL)) < 0) {
        die("accept");
    }
    close(l);
    for (int lap = 0; lap < 2; lap++) {
        if (me != 0 && recv(*prev, &token, 1, MSG_WAITALL) != 1) {
            die("recv");
        }
        if (send(*next, &token, 1, 0) != 1) {
            die("send");
        }
        if (me == 0 && recv(*prev, &token, 1, MSG_WAITALL) != 1) {
            die("recv");
        }
    }
}

int main(int argc, char **argv)
{
    int paced = argc > 1 && strcmp(argv[1], "--paced") == 0;
    argc -= paced;
    argv += paced;
    if (argc < 6) {
        fprintf(stderr, "usage: tcpfloor [--paced] RANK WORKERS AGGREGATORS "
                        "BYTES ADDR...\n");
        return 2;
    }
    int me = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]);
    double m = atof(argv[4]);
    int world = n + k;
    if (n < 1 || k < 0 || world > MAX_RANKS || me < 0 || me >= world ||
        argc != 5 + world) {
        fprintf(stderr, "tcpfloor: give one address per rank\n");
        return 2;
    }
    if (paced && k == 0) {
        fprintf(stderr, "tcpfloor: --paced needs aggregators\n");
        return 2;
    }
    double x = k == 0   ? 0
               : k >= n ? 1
                        : 2.0 * k * (n - 1) / (n * n + k * n - 2.0 * k);
    size_t to_agg = k ? (size_t)(x * m / k) : 0;
    size_t to_worker = (size_t)(2 * (1 - x) * m / n);
    int fd[MAX_RANKS], n_flows = 0;
    static flow_t flow[2 * MAX_RANKS];
    static pflow_t pflow[MAX_RANKS];
    double t0;

    if (k == 0 && n > 1) {
        int next, prev;
        size_t bytes = (size_t)(2.0 * (n - 1) / n * m);
        connect_ring(me, n, argv + 5, &next, &prev);
        t0 = now();
        flow[n_flows++] = (flow_t){next, bytes, 0};
        flow[n_flows++] = (flow_t){prev, 0, bytes};
    } else {
        connect_all(me, world, argv + 5, fd);
        start_together(me, world, fd);
        t0 = now();
        for (int r = 0; r < world; r++) {
            int both_workers = r < n && me < n,
                one_worker = (r < n) != (me < n);
            size_t bytes = both_workers ? to_worker : one_worker ? to_agg : 0;
            if (r == me || bytes == 0) {
                continue;
            }
            if (!paced) {
                flow[n_flows++] = (flow_t){fd[r], bytes, bytes};
                continue;
            }
            /* Half a pair of workers' bytes each way is a push, half an
             * answer; an aggregator only answers. */
            size_t push = both_workers ? bytes / 2 : me < n ? bytes : 0;
            size_t expect = both_workers ? bytes / 2 : me < n ? 0 : bytes;
            pflow[n_flows++] = (pflow_t){.fd = fd[r],
                                         .push_total = push,
                                         .push_left = push,
                                         .expect_total = expect,
                                         .expect_left = expect};
        }
    }
    if (paced) {
        pump_paced(pflow, n_flows, n);
    } else {
        pump_all(flow, n_flows);
    }
    printf("tcpfloor rank %d time_s %.6f\n", me, now() - t0);
    return 0;
}
