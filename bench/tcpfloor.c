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
 * this rank took.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
    if (argc < 6) {
        fprintf(stderr,
                "usage: tcpfloor RANK WORKERS AGGREGATORS BYTES ADDR...\n");
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
    double x = k == 0   ? 0
               : k >= n ? 1
                        : 2.0 * k * (n - 1) / (n * n + k * n - 2.0 * k);
    size_t to_agg = k ? (size_t)(x * m / k) : 0;
    size_t to_worker = (size_t)(2 * (1 - x) * m / n);
    int fd[MAX_RANKS], n_flows = 0;
    flow_t flow[2 * MAX_RANKS];
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
        sleep(1); /* every rank connected: start together */
        t0 = now();
        for (int r = 0; r < world; r++) {
            int both_workers = r < n && me < n,
                one_worker = (r < n) != (me < n);
            size_t bytes = both_workers ? to_worker : one_worker ? to_agg : 0;
            if (r != me && bytes > 0) {
                flow[n_flows++] = (flow_t){fd[r], bytes, bytes};
            }
        }
    }
    pump_all(flow, n_flows);
    printf("tcpfloor rank %d time_s %.6f\n", me, now() - t0);
    return 0;
}
