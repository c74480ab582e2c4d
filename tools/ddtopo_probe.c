/*
 * `ddtopo probe`: run as a job (ddrun, torchrun, Open MPI, Slurm or DREAMDDP_*
 * variables), it measures latency and bandwidth from rank 0 to every other
 * rank over each interface they have in common, prints the table, and says
 * which interface it would choose from the measurement (the best worst-case
 * bandwidth) next to what dd_init chose from the topology. Every rank
 * listens on the IPv4 address of each of its usable interfaces; only rank 0
 * connects. Every socket wait is bounded.
 */
#include "ddtopo.h"

#include "api/context.h"
#include "api/net_agree.h"
#include "core/log.h"
#include "core/time.h"
#include "topo/addrs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DDTOPO_MAX_IFS 8
#define DDTOPO_RECORD 2048
#define DDTOPO_IO_TIMEOUT_S 30.0
#define DDTOPO_CONNECT_TIMEOUT_S 3.0

/* One listening endpoint of a rank. */
typedef struct {
    char ifname[DD_TOPO_NAME_MAX];
    char addr[INET_ADDRSTRLEN];
    char subnet[64];
    int port;
} ddtopo_ep_t;

typedef struct {
    char host[320];
    int n;
    ddtopo_ep_t eps[DDTOPO_MAX_IFS];
} ddtopo_rank_eps_t;

typedef struct {
    int fds[DDTOPO_MAX_IFS];
    int n;
    volatile int stop;
} ddtopo_server_t;

static int ddtopo_io(int fd, void *buf, size_t len, int send_it)
{
    char *p = buf;
    double deadline = dd_time_now() + DDTOPO_IO_TIMEOUT_S;

    while (len > 0) {
        struct pollfd pfd = {fd, send_it ? POLLOUT : POLLIN, 0};
        if (poll(&pfd, 1, dd_time_left_ms(deadline)) <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        ssize_t n =
            send_it ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n <= 0) {
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
                continue;
            }
            if (n == 0) {
                errno = ECONNRESET;
            }
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Serves one measuring connection: 'L' echoes 8 bytes, 'B' swallows a
 * 64-bit length of bytes and acknowledges, 'Q' ends. */
static void ddtopo_serve_conn(int fd)
{
    static char sink[1 << 16];
    char cmd, ping[8];
    uint64_t len;

    while (ddtopo_io(fd, &cmd, 1, 0) == 0) {
        if (cmd == 'L') {
            if (ddtopo_io(fd, ping, 8, 0) != 0 ||
                ddtopo_io(fd, ping, 8, 1) != 0) {
                break;
            }
        } else if (cmd == 'B' && ddtopo_io(fd, &len, 8, 0) == 0) {
            while (len > 0) {
                size_t n = len < sizeof(sink) ? (size_t)len : sizeof(sink);
                if (ddtopo_io(fd, sink, n, 0) != 0) {
                    return;
                }
                len -= n;
            }
            if (ddtopo_io(fd, "k", 1, 1) != 0) {
                break;
            }
        } else {
            break;
        }
    }
}

static void *ddtopo_server_run(void *arg)
{
    ddtopo_server_t *s = arg;
    struct pollfd pfds[DDTOPO_MAX_IFS];

    while (!s->stop) {
        for (int i = 0; i < s->n; i++) {
            pfds[i].fd = s->fds[i];
            pfds[i].events = POLLIN;
        }
        if (poll(pfds, (nfds_t)s->n, 100) <= 0) {
            continue;
        }
        for (int i = 0; i < s->n; i++) {
            if (pfds[i].revents & POLLIN) {
                int fd = accept(s->fds[i], NULL, NULL);
                if (fd >= 0) {
                    ddtopo_serve_conn(fd);
                    close(fd);
                }
            }
        }
    }
    return NULL;
}

/* Listens on each usable interface's first routable IPv4 address. */
static void ddtopo_listen(const dd_topo_t *topo, const dd_topo_cand_t *cands,
                          ddtopo_server_t *server, ddtopo_rank_eps_t *mine)
{
    for (int i = 0;
         i < topo->n_nics && cands[i].usable && mine->n < DDTOPO_MAX_IFS; i++) {
        const dd_topo_nic_t *nic = &topo->nics[cands[i].nic];
        for (int a = 0; a < nic->n_addrs; a++) {
            if (nic->addrs[a].family != AF_INET) {
                continue;
            }
            struct sockaddr_in sa = {.sin_family = AF_INET};
            socklen_t len = sizeof(sa);
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            inet_pton(AF_INET, nic->addrs[a].text, &sa.sin_addr);
            if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
                listen(fd, 16) != 0 ||
                getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
                dd_log_warn(DD_SUBSYS_TOOL, "cannot listen on %s %s: %m",
                            nic->name, nic->addrs[a].text);
                if (fd >= 0) {
                    close(fd);
                }
                continue;
            }
            ddtopo_ep_t *ep = &mine->eps[mine->n++];
            snprintf(ep->ifname, sizeof(ep->ifname), "%s", nic->name);
            snprintf(ep->addr, sizeof(ep->addr), "%s", nic->addrs[a].text);
            dd_topo_addr_subnet(&nic->addrs[a], ep->subnet, sizeof(ep->subnet));
            ep->port = ntohs(sa.sin_port);
            server->fds[server->n++] = fd;
            break;
        }
    }
}

static void ddtopo_encode(const ddtopo_rank_eps_t *eps, char *buf)
{
    size_t o;

    memset(buf, 0, DDTOPO_RECORD);
    o = (size_t)snprintf(buf, DDTOPO_RECORD, "%s\n", eps->host);
    for (int i = 0; i < eps->n && o < DDTOPO_RECORD; i++) {
        o += (size_t)snprintf(buf + o, DDTOPO_RECORD - o, "%s %s %s %d\n",
                              eps->eps[i].ifname, eps->eps[i].addr,
                              eps->eps[i].subnet, eps->eps[i].port);
    }
}

static void ddtopo_decode(const char *buf, ddtopo_rank_eps_t *eps)
{
    char *text = strndup(buf, DDTOPO_RECORD), *save;
    char *line = text ? strtok_r(text, "\n", &save) : NULL;

    memset(eps, 0, sizeof(*eps));
    if (line != NULL) {
        snprintf(eps->host, sizeof(eps->host), "%s", line);
    }
    while (line != NULL && eps->n < DDTOPO_MAX_IFS &&
           (line = strtok_r(NULL, "\n", &save)) != NULL) {
        ddtopo_ep_t *ep = &eps->eps[eps->n];
        if (sscanf(line, "%63s %15s %63s %d", ep->ifname, ep->addr, ep->subnet,
                   &ep->port) == 4) {
            eps->n++;
        }
    }
    free(text);
}

static int ddtopo_connect(const ddtopo_ep_t *from, const ddtopo_ep_t *to)
{
    struct sockaddr_in src = {.sin_family = AF_INET};
    struct sockaddr_in dst = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)to->port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, err = 0;
    socklen_t len = sizeof(err);

    if (fd < 0) {
        return -1;
    }
    inet_pton(AF_INET, from->addr, &src.sin_addr);
    inet_pton(AF_INET, to->addr, &dst.sin_addr);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, O_NONBLOCK);
    if (bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0 ||
        (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0 &&
         errno != EINPROGRESS)) {
        close(fd);
        return -1;
    }
    struct pollfd pfd = {fd, POLLOUT, 0};
    if (poll(&pfd, 1, (int)(DDTOPO_CONNECT_TIMEOUT_S * 1e3)) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        close(fd);
        errno = err ? err : ETIMEDOUT;
        return -1;
    }
    return fd;
}

static int ddtopo_dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median one-way latency (half the round trip) in microseconds and
 * bandwidth in MB/s; returns -1 when the link fails. */
static int ddtopo_measure(int fd, int pings, size_t bytes, double *lat_us,
                          double *mbps)
{
    static char block[1 << 16];
    double rtt[1000];
    char ping[8] = "ddtopo!", ack;
    uint64_t len = bytes;

    pings = pings > 1000 ? 1000 : pings;
    for (int i = 0; i < pings; i++) {
        double t0 = dd_time_now();
        if (ddtopo_io(fd, "L", 1, 1) != 0 || ddtopo_io(fd, ping, 8, 1) != 0 ||
            ddtopo_io(fd, ping, 8, 0) != 0) {
            return -1;
        }
        rtt[i] = dd_time_now() - t0;
    }
    qsort(rtt, (size_t)pings, sizeof(double), ddtopo_dbl_cmp);
    *lat_us = rtt[pings / 2] / 2 * 1e6;
    double t0 = dd_time_now();
    if (ddtopo_io(fd, "B", 1, 1) != 0 || ddtopo_io(fd, &len, 8, 1) != 0) {
        return -1;
    }
    for (size_t left = bytes; left > 0;) {
        size_t n = left < sizeof(block) ? left : sizeof(block);
        if (ddtopo_io(fd, block, n, 1) != 0) {
            return -1;
        }
        left -= n;
    }
    if (ddtopo_io(fd, &ack, 1, 0) != 0) {
        return -1;
    }
    *mbps = (double)bytes / (dd_time_now() - t0) / 1e6;
    ddtopo_io(fd, "Q", 1, 1);
    return 0;
}

/* The endpoint of rank r on the same network as mine: the same subnet, or
 * the same loopback address on the same host. */
static const ddtopo_ep_t *ddtopo_peer_ep(const ddtopo_rank_eps_t *me,
                                         const ddtopo_ep_t *mine,
                                         const ddtopo_rank_eps_t *peer)
{
    int loop = strncmp(mine->addr, "127.", 4) == 0;

    for (int i = 0; i < peer->n; i++) {
        const ddtopo_ep_t *ep = &peer->eps[i];
        if (loop ? strcmp(me->host, peer->host) == 0 &&
                       strncmp(ep->addr, "127.", 4) == 0
                 : strcmp(ep->subnet, mine->subnet) == 0) {
            return ep;
        }
    }
    return NULL;
}

/* Rank 0: measures each of its interfaces to each rank; prints the table
 * and the interface with the best worst-case bandwidth. */
static void ddtopo_measure_all(const ddtopo_rank_eps_t *all, int world,
                               int pings, size_t bytes,
                               const dd_topo_choice_t *chosen)
{
    const ddtopo_rank_eps_t *me = &all[0];
    int best = -1;
    double best_bw = -1;

    printf("%-12s %5s  %-15s  %12s  %16s\n", "interface", "peer",
           "peer address", "latency (us)", "bandwidth (MB/s)");
    for (int i = 0; i < me->n; i++) {
        double worst = -1;
        int reached = 0;
        for (int r = 1; r < world; r++) {
            const ddtopo_ep_t *to = ddtopo_peer_ep(me, &me->eps[i], &all[r]);
            double lat = 0, bw = 0;
            int fd = to ? ddtopo_connect(&me->eps[i], to) : -1;
            int ok =
                fd >= 0 && ddtopo_measure(fd, pings, bytes, &lat, &bw) == 0;
            if (fd >= 0) {
                close(fd);
            }
            printf("%-12s %5d  %-15s  ", me->eps[i].ifname, r,
                   to ? to->addr : "-");
            if (ok) {
                printf("%12.1f  %16.1f\n", lat, bw);
                worst = worst < 0 || bw < worst ? bw : worst;
                reached++;
            } else {
                printf("%12s  %16s\n", to ? "unreachable" : "no route",
                       to ? strerror(errno) : "-");
            }
        }
        if (reached == world - 1 && worst > best_bw) {
            best_bw = worst;
            best = i;
        }
    }
    printf("\nchosen from the topology: %s (%s)\n", chosen->name,
           chosen->reason);
    if (best >= 0) {
        printf("would choose from the measurement: %s (%.1f MB/s to the "
               "slowest peer)\n",
               me->eps[best].ifname, best_bw);
    } else {
        printf("would choose from the measurement: none (no interface "
               "reaches every rank)\n");
    }
}

static int ddtopo_probe_args(int argc, char **argv, size_t *bytes, int *pings,
                             int *all)
{
    static const struct option longopts[] = {
        {"all", no_argument, NULL, 'a'},
        {"bytes", required_argument, NULL, 'b'},
        {"pings", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;

    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'b' && dd_config_parse_size(optarg, bytes) == DD_OK &&
            *bytes > 0) {
            continue;
        }
        if (c == 'p' && dd_config_parse_int(optarg, 1, 1000, pings) == DD_OK) {
            continue;
        }
        if (c == 'a') {
            *all = 1;
            continue;
        }
        fprintf(c == 'h' ? stdout : stderr,
                "usage: ddtopo probe [--bytes SIZE] [--pings N] [--all]\n"
                "Run inside a job (ddrun -n 2 ddtopo probe): rank 0 measures "
                "latency\n(median of N pings, default 20) and bandwidth "
                "(SIZE bytes, default 8M)\nto every rank over each common "
                "interface that DREAMDDP_NET_IFNAME allows\n(--all: every "
                "interface).\n");
        return c == 'h' ? 1 : 2;
    }
    return optind < argc ? 2 : 0;
}

/* Publishes this rank's endpoints and gathers everyone's. */
static dd_status_t ddtopo_exchange(dd_context_h ctx,
                                   const ddtopo_rank_eps_t *mine,
                                   ddtopo_rank_eps_t *all)
{
    int world = dd_world_size(ctx);
    char rec[DDTOPO_RECORD];
    char *buf = malloc((size_t)world * DDTOPO_RECORD);

    if (buf == NULL) {
        fprintf(stderr, "ddtopo: no memory for %d ranks' endpoints\n", world);
        return DD_ERR_NO_MEMORY;
    }
    ddtopo_encode(mine, rec);
    dd_status_t status =
        dd_store_allgather(ctx->store, "ddtopo-probe", rec, sizeof(rec), buf);
    for (int r = 0; status == DD_OK && r < world; r++) {
        ddtopo_decode(buf + (size_t)r * DDTOPO_RECORD, &all[r]);
    }
    free(buf);
    return status;
}

/* Probes this host and listens on each usable interface. */
static dd_status_t ddtopo_probe_local(dd_context_h ctx, int all,
                                      ddtopo_server_t *server,
                                      ddtopo_rank_eps_t *mine)
{
    dd_topo_opts_t opts;
    dd_topo_t *topo = NULL;
    dd_topo_cand_t *cands = NULL;
    dd_topo_choice_t choice;
    dd_status_t status =
        dd_config_load(&dd_topo_config_table, &opts, dd_config_getenv, NULL);

    if (status != DD_OK) {
        return status;
    }
    if (all) {
        dd_iflist_release(&opts.ifname); /* --all: every interface */
    } else if (opts.ifname.n > 0 && dd_rank(ctx) == 0) {
        printf("only the interfaces DREAMDDP_NET_IFNAME allows (--all "
               "measures every one)\n\n");
    }
    status = dd_topo_probe(&opts, &topo);
    if (status == DD_OK) {
        cands = calloc((size_t)topo->n_nics + 1, sizeof(*cands));
        status = cands ? dd_topo_choose(topo, &opts, -1, dd_local_rank(ctx),
                                        dd_local_size(ctx), cands, &choice)
                       : DD_ERR_NO_MEMORY;
    }
    if (status == DD_OK) {
        dd_net_host_id(mine->host, sizeof(mine->host));
        ddtopo_listen(topo, cands, server, mine);
    }
    free(cands);
    dd_topo_free(topo);
    dd_config_release(&dd_topo_config_table, &opts);
    return status;
}

int ddtopo_probe_main(int argc, char **argv)
{
    size_t bytes = 8 << 20;
    int pings = 20;
    dd_context_h ctx;
    ddtopo_server_t server = {.n = 0};
    ddtopo_rank_eps_t mine = {.n = 0}, *all = NULL;
    pthread_t thread;

    int all_ifs = 0;
    int parsed = ddtopo_probe_args(argc, argv, &bytes, &pings, &all_ifs);
    if (parsed != 0) {
        return parsed == 1 ? 0 : 2;
    }
    if (dd_init(NULL, &ctx) != DD_OK) {
        return 1;
    }
    dd_status_t status = ddtopo_probe_local(ctx, all_ifs, &server, &mine);
    all = calloc((size_t)dd_world_size(ctx), sizeof(*all));
    if (status == DD_OK && all == NULL) {
        status = DD_ERR_NO_MEMORY;
    }
    int serving =
        status == DD_OK &&
        pthread_create(&thread, NULL, ddtopo_server_run, &server) == 0;
    if (status == DD_OK) {
        status = ddtopo_exchange(ctx, &mine, all);
    }
    if (status == DD_OK && dd_rank(ctx) == 0) {
        ddtopo_measure_all(all, dd_world_size(ctx), pings, bytes, &ctx->net);
    }
    dd_status_t done = dd_barrier(ctx);
    server.stop = 1;
    if (serving) {
        pthread_join(thread, NULL);
    }
    for (int i = 0; i < server.n; i++) {
        close(server.fds[i]);
    }
    free(all);
    dd_status_t fin = dd_finalize(ctx);
    return status == DD_OK && done == DD_OK && fin == DD_OK ? 0 : 1;
}
