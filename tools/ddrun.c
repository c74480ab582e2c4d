/*
 * ddrun: starts N ranks of a command on this machine, like
 * `torchrun --standalone`. Gives each rank the DREAMDDP_* variables and a free
 * port for the rendezvous store, prefixes every output line with the rank
 * (and asks the library for line-buffered output, DREAMDDP_LINE_BUFFERED),
 * stops every rank when a worker fails, and exits with the first failing
 * worker's status; an aggregator's loss is survived, as the library
 * survives it. It links nothing of the library: it only starts processes.
 */
#include "argnum.h"
#include "ddrun_common.h"
#include "ddrun_elastic.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DDRUN_KILL_GRACE_S 3.0

static void ddrun_usage(FILE *out)
{
    fprintf(
        out,
        "usage: ddrun -n N [--aggregators K] [--timeout S]\n"
        "             [--elastic [--min N] [--max-restarts K]] [--] CMD "
        "[ARGS...]\n"
        "\n"
        "Starts N ranks of CMD on this machine with DREAMDDP_RANK, "
        "DREAMDDP_WORLD_SIZE,\n"
        "DREAMDDP_LOCAL_RANK, DREAMDDP_LOCAL_SIZE, DREAMDDP_MASTER_ADDR, "
        "DREAMDDP_MASTER_PORT "
        "and\n"
        "DREAMDDP_JOB_TOKEN set, and DREAMDDP_LINE_BUFFERED=yes unless set, "
        "and what\n"
        "torchrun sets: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, "
        "MASTER_ADDR and\n"
        "MASTER_PORT (torch's store; the library's takes the next port). "
        "Output lines\n"
        "are prefixed with the rank. When a worker fails, the others are "
        "stopped and\n"
        "ddrun exits with its status; the workers go on without a lost "
        "aggregator\n"
        "(unless DREAMDDP_AGG_LOSS=stop).\n"
        "\n"
        "  -n, --nproc N        number of ranks (at least 1)\n"
        "  -a, --aggregators K  the last K ranks are aggregators "
        "(DREAMDDP_NUM_AGGREGATORS)\n"
        "  -t, --timeout S      stop every rank after S seconds (exit "
        "124)\n"
        "  -e, --elastic        elastic workers: when a rank is lost (killed, "
        "or frozen\n"
        "                       while the others stop), start the ranks that "
        "remain again\n"
        "                       as a new generation that resumes from the "
        "last commit\n"
        "                       (DREAMDDP_ELASTIC=yes, "
        "DREAMDDP_ELASTIC_DIR)\n"
        "      --min N          elastic: stop when fewer than N workers "
        "remain (default 1)\n"
        "      --max-restarts K elastic: start a lost rank again, up to K "
        "times in all, so\n"
        "                       that the job keeps its size (default 3; 0: "
        "go on without)\n"
        "  -V, --version        print the version and exit\n"
        "  -h, --help           this text\n");
}

static int ddrun_parse_count(const char *s, int min, int *value_p)
{
    long v;
    if (dd_arg_parse_long(s, min, 100000, &v) != 0) {
        return -1;
    }
    *value_p = (int)v;
    return 0;
}

static void ddrun_token(char *out, size_t size)
{
    unsigned char raw[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, raw, sizeof(raw)) : -1;

    if (fd >= 0) {
        close(fd);
    }
    if (n != (ssize_t)sizeof(raw)) {
        /* No urandom: pid and time still keep concurrent jobs apart. */
        snprintf(out, size, "ddrun-%ld-%ld", (long)getpid(), (long)time(NULL));
        return;
    }
    for (size_t i = 0; i < sizeof(raw) && 2 * i + 2 < size; i++) {
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    }
}

static void ddrun_on_signal(int sig)
{
    ddrun_signal = sig;
}

/* What ddrun_supervise keeps between polls. Ranks from `workers` on are
 * aggregators: with DREAMDDP_AGG_LOSS=survive the library re-homes a lost
 * one's share, so its exit stops nothing. */
typedef struct {
    ddrun_rank_t *ranks;
    int n, workers, agg_expendable;
    int running, workers_running;
    int stopping; /* every rank is being stopped: later exits do not count */
    int code;
    double kill_at;   /* SIGKILL what still runs then; 0: not armed */
    double linger_at; /* stop the aggregators left then; 0: not armed */
} ddrun_sup_t;

static void ddrun_stop_all(ddrun_sup_t *s, int code, int sig)
{
    s->stopping = 1;
    s->code = code;
    ddrun_kill_all(s->ranks, s->n, sig);
    s->kill_at = ddrun_now() + DDRUN_KILL_GRACE_S;
}

/* Rank i exited with status rc. */
static void ddrun_on_exit(ddrun_sup_t *s, int i, int rc)
{
    s->running--;
    s->workers_running -= i < s->workers;
    if (rc == 0 || s->stopping) {
        return;
    }
    if (i >= s->workers && s->agg_expendable) {
        fprintf(stderr,
                "ddrun: aggregator rank %d was lost (status %d): the "
                "workers go on without it\n",
                i, rc);
        return;
    }
    fprintf(stderr,
            "ddrun: rank %d exited with status %d; stopping the others\n", i,
            rc);
    ddrun_stop_all(s, rc, SIGTERM);
}

/* Every worker has exited: an aggregator has nothing left to serve, and
 * one that is frozen would hold the job for ever. */
static void ddrun_stop_lingering(ddrun_sup_t *s)
{
    double now = ddrun_now();

    if (s->stopping || s->workers_running > 0 || s->running == 0) {
        return;
    }
    if (s->linger_at == 0) {
        s->linger_at = now + DDRUN_GRACE_S;
        return;
    }
    if (now < s->linger_at) {
        return;
    }
    for (int i = s->workers; i < s->n; i++) {
        if (!s->ranks[i].done) {
            fprintf(stderr,
                    "ddrun: aggregator rank %d still runs %.0f s after every "
                    "worker exited: stopping it\n",
                    i, DDRUN_GRACE_S);
        }
    }
    ddrun_stop_all(s, s->code, SIGTERM);
}

/* A signal to ddrun or the --timeout: every rank stops. */
static void ddrun_check_stop(ddrun_sup_t *s, double start, double timeout_s)
{
    if (s->stopping) {
        return;
    }
    if (ddrun_signal) {
        fprintf(stderr, "ddrun: caught signal %d; stopping every rank\n",
                (int)ddrun_signal);
        ddrun_stop_all(s, 128 + ddrun_signal, ddrun_signal);
    } else if (timeout_s > 0 && ddrun_now() - start > timeout_s) {
        fprintf(stderr,
                "ddrun: timed out after %.0f s (--timeout); stopping "
                "every rank\n",
                timeout_s);
        ddrun_stop_all(s, 124, SIGTERM);
    }
}

/* Relays what the ranks wrote; returns how many pipes are still open. */
static int ddrun_relay(ddrun_rank_t *ranks, int n, struct pollfd *pfds)
{
    int open_fds = 0;

    for (int i = 0; i < 2 * n; i++) {
        pfds[i] = (struct pollfd){ranks[i / 2].fds[i % 2], POLLIN, 0};
    }
    poll(pfds, (nfds_t)(2 * n), 100);
    for (int i = 0; i < 2 * n; i++) {
        if (pfds[i].fd >= 0 && pfds[i].revents) {
            ddrun_pump(&ranks[i / 2], i / 2, i % 2);
        }
        open_fds += ranks[i / 2].fds[i % 2] >= 0;
    }
    return open_fds;
}

/* Polls the ranks' output and reaps them; returns the exit code. */
static int ddrun_supervise(ddrun_rank_t *ranks, const ddrun_job_t *job,
                           double timeout_s)
{
    int n = job->n;
    struct pollfd *pfds = calloc((size_t)n * 2, sizeof(*pfds));
    double start = ddrun_now();
    int open_fds = 2 * n;
    ddrun_sup_t s = {.ranks = ranks,
                     .n = n,
                     .workers = n - job->aggregators,
                     .agg_expendable = job->agg_expendable,
                     .running = n,
                     .workers_running = n - job->aggregators};

    while ((s.running > 0 || open_fds > 0) && pfds != NULL) {
        open_fds = ddrun_relay(ranks, n, pfds);
        for (int i = 0; i < n; i++) {
            if (ranks[i].done ||
                waitpid(ranks[i].pid, &ranks[i].status, WNOHANG) <= 0) {
                continue;
            }
            ranks[i].done = 1;
            ddrun_on_exit(&s, i, ddrun_exit_code(ranks[i].status));
        }
        ddrun_check_stop(&s, start, timeout_s);
        ddrun_stop_lingering(&s);
        if (s.kill_at > 0 && ddrun_now() > s.kill_at) {
            ddrun_kill_all(ranks, n, SIGKILL);
            s.kill_at = 0;
        }
        if (s.running == 0 && open_fds > 0 && s.kill_at == 0) {
            /* Every rank exited; a grandchild may hold a pipe open. */
            s.kill_at = ddrun_now() + DDRUN_KILL_GRACE_S;
        }
        if (s.running == 0 && s.kill_at > 0 && ddrun_now() > s.kill_at - 1.0) {
            break;
        }
    }
    ddrun_close_pipes(ranks, n);
    free(pfds);
    return s.code;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"nproc", required_argument, NULL, 'n'},
        {"aggregators", required_argument, NULL, 'a'},
        {"timeout", required_argument, NULL, 't'},
        {"elastic", no_argument, NULL, 'e'},
        {"min", required_argument, NULL, 'm'},
        {"max-restarts", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    int n = -1, aggregators = 0, timeout = 0, opt, elastic = 0, min = 1,
        restarts = 3;
    char token[64];

    while ((opt = getopt_long(argc, argv, "+n:a:t:ehV", longopts, NULL)) !=
           -1) {
        switch (opt) {
        case 'n':
            if (ddrun_parse_count(optarg, 1, &n) != 0) {
                fprintf(stderr,
                        "ddrun: -n needs a number of ranks from 1, "
                        "not '%s'\n",
                        optarg);
                ddrun_usage(stderr);
                return 2;
            }
            break;
        case 'a':
            if (ddrun_parse_count(optarg, 0, &aggregators) != 0) {
                fprintf(stderr,
                        "ddrun: --aggregators needs a count, not "
                        "'%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 't':
            if (ddrun_parse_count(optarg, 1, &timeout) != 0) {
                fprintf(stderr,
                        "ddrun: --timeout needs seconds from 1, not "
                        "'%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'e':
            elastic = 1;
            break;
        case 'm':
        case 'r':
            if (ddrun_parse_count(optarg, opt == 'm',
                                  opt == 'm' ? &min : &restarts)) {
                fprintf(stderr, "ddrun: %s needs a count%s, not '%s'\n",
                        opt == 'm' ? "--min" : "--max-restarts",
                        opt == 'm' ? " from 1" : "", optarg);
                return 2;
            }
            break;
        case 'h':
            ddrun_usage(stdout);
            return 0;
        case 'V':
            /* ddrun links nothing of the library: the package's version. */
            printf("ddrun (dreamddp) %s\n", PACKAGE_VERSION);
            return 0;
        default:
            ddrun_usage(stderr);
            return 2;
        }
    }
    if (n < 0 || optind >= argc) {
        fprintf(stderr, "ddrun: %s\n",
                n < 0 ? "-n N is required" : "no command to run");
        ddrun_usage(stderr);
        return 2;
    }
    if (aggregators >= n) {
        fprintf(stderr,
                "ddrun: --aggregators %d leaves no worker among %d "
                "ranks\n",
                aggregators, n);
        return 2;
    }
    if (elastic && min > n - aggregators) {
        fprintf(stderr,
                "ddrun: --min %d is more workers than the %d the job "
                "starts with\n",
                min, n - aggregators);
        return 2;
    }
    int port = ddrun_free_port();
    if (port < 0) {
        fprintf(stderr, "ddrun: cannot find a free port: %s\n",
                strerror(errno));
        return 1;
    }
    ddrun_token(token, sizeof(token));
    signal(SIGINT, ddrun_on_signal);
    signal(SIGTERM, ddrun_on_signal);
    signal(SIGPIPE, SIG_IGN);

    ddrun_job_t job = {.n = n,
                       .aggregators = aggregators,
                       .port = port,
                       .token = token,
                       .argv = argv + optind,
                       .generation = -1,
                       .elastic_min = min};
    ddrun_read_lib_settings(&job);
    if (elastic) {
        return ddrun_elastic(&job, min, restarts, timeout);
    }
    ddrun_rank_t *ranks = calloc((size_t)n, sizeof(*ranks));
    if (ranks == NULL) {
        fprintf(stderr, "ddrun: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        if (ddrun_spawn(&ranks[i], i, &job) != 0) {
            fprintf(stderr, "ddrun: cannot start rank %d: %s\n", i,
                    strerror(errno));
            ddrun_kill_all(ranks, i, SIGKILL);
            return 1;
        }
    }
    int code = ddrun_supervise(ranks, &job, timeout);
    free(ranks);
    return code;
}
