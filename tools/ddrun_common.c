/*
 * What both of ddrun's launchers use (ddrun.c, the plain job, and
 * ddrun_elastic.c, the elastic supervisor): the clock, a free port,
 * starting a rank and relaying its output, stopping ranks, their exit
 * codes. Neither launcher calls the other's helpers: both call these.
 */
#include "ddrun_common.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile sig_atomic_t ddrun_signal;

double ddrun_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Binds port (0: any) on every address; the socket, or -1. */
static int ddrun_bind_port(int port, int *bound_p)
{
    struct sockaddr_in6 sa;
    socklen_t len = sizeof(sa);
    int zero = 0;
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        return -1;
    }
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    memset(&sa, 0, sizeof(sa));
    sa.sin6_family = AF_INET6;
    sa.sin6_addr = in6addr_any;
    sa.sin6_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        close(fd);
        return -1;
    }
    *bound_p = ntohs(sa.sin6_port);
    return fd;
}

/* A port P nobody listens on now, with P+1 free too: as under torchrun,
 * torch.distributed's store binds MASTER_PORT=P in a script that calls
 * init_process_group, and the library's store on rank 0 binds P+1. */
int ddrun_free_port(void)
{
    for (int attempt = 0; attempt < 64; attempt++) {
        int port, next;
        int fd = ddrun_bind_port(0, &port);
        if (fd < 0) {
            return -1;
        }
        int fd_next = port < 65535 ? ddrun_bind_port(port + 1, &next) : -1;
        close(fd);
        if (fd_next >= 0) {
            close(fd_next);
            return port;
        }
    }
    errno = EADDRINUSE;
    return -1;
}

static void ddrun_setenv_int(const char *name, int value)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", value);
    setenv(name, buf, 1);
}

/* In the child: the rank's environment, then exec. */
static void ddrun_exec_rank(pid_t parent, int rank, const ddrun_job_t *job,
                            int out, int err)
{
    int n = job->n;
    /* An outer launcher's variables that ddrun does not set again. */
    static const char *const stale[] = {"TORCHELASTIC_RUN_ID",
                                        "TORCHELASTIC_RESTART_COUNT",
                                        "TORCHELASTIC_MAX_RESTARTS"};

    /* A rank dies with ddrun, even by SIGKILL, which ddrun cannot forward.
     * The signal is armed for the parent that is alive now: if ddrun died
     * before prctl, the parent is already another process, so check. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
        _exit(127);
    }
    setpgid(0, 0);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    for (size_t i = 0; i < sizeof(stale) / sizeof(stale[0]); i++) {
        unsetenv(stale[i]);
    }
    ddrun_setenv_int("DREAMDDP_RANK", rank);
    ddrun_setenv_int("DREAMDDP_WORLD_SIZE", n);
    ddrun_setenv_int("DREAMDDP_LOCAL_RANK", rank);
    ddrun_setenv_int("DREAMDDP_LOCAL_SIZE", n);
    setenv("DREAMDDP_MASTER_ADDR", "127.0.0.1", 1);
    ddrun_setenv_int("DREAMDDP_MASTER_PORT", job->port + 1);
    /* What torchrun --standalone sets, for a script that reads them or
     * calls torch.distributed.init_process_group: every process of the job,
     * aggregators included, is in the world, as under torchrun, mpirun and
     * srun. torch's store gets MASTER_PORT, the library's the next port. */
    ddrun_setenv_int("RANK", rank);
    ddrun_setenv_int("WORLD_SIZE", n);
    ddrun_setenv_int("LOCAL_RANK", rank);
    ddrun_setenv_int("LOCAL_WORLD_SIZE", n);
    ddrun_setenv_int("ROLE_RANK", rank);
    ddrun_setenv_int("ROLE_WORLD_SIZE", n);
    setenv("GROUP_RANK", "0", 1);
    setenv("GROUP_WORLD_SIZE", "1", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    ddrun_setenv_int("MASTER_PORT", job->port);
    const char *token_file = getenv("DREAMDDP_JOB_TOKEN_FILE");
    if (token_file == NULL || token_file[0] == '\0') {
        /* a token the user set wins */
        setenv("DREAMDDP_JOB_TOKEN", job->token, 0);
    }
    /* The rank's stdout is our pipe: its progress should come line by line
     * (the library's setvbuf at dd_init), unless the user said otherwise. */
    setenv("DREAMDDP_LINE_BUFFERED", "yes", 0);
    if (job->aggregators > 0) {
        ddrun_setenv_int("DREAMDDP_NUM_AGGREGATORS", job->aggregators);
    }
    if (job->generation >= 0) {
        setenv("DREAMDDP_ELASTIC", "yes", 1);
        setenv("DREAMDDP_ELASTIC_DIR", job->elastic_dir, 1);
        ddrun_setenv_int("DREAMDDP_ELASTIC_GENERATION", job->generation);
        ddrun_setenv_int("DREAMDDP_ELASTIC_MIN", job->elastic_min);
        ddrun_setenv_int("DREAMDDP_ELASTIC_ID", job->elastic_id);
    }
    execvp(job->argv[0], job->argv);
    fprintf(stderr, "ddrun: cannot run %s: %s\n", job->argv[0],
            strerror(errno));
    _exit(127);
}

int ddrun_spawn(ddrun_rank_t *r, int rank, const ddrun_job_t *job)
{
    int out[2], err[2];

    if (pipe2(out, O_CLOEXEC) != 0) {
        return -1;
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
        close(out[0]);
        close(out[1]);
        return -1;
    }
    fflush(NULL);
    pid_t parent = getpid();
    r->pid = fork();
    if (r->pid == 0) {
        ddrun_exec_rank(parent, rank, job, out[1], err[1]);
    }
    close(out[1]);
    close(err[1]);
    if (r->pid < 0) {
        close(out[0]);
        close(err[0]);
        return -1;
    }
    r->fds[0] = out[0];
    r->fds[1] = err[0];
    return 0;
}

static void ddrun_emit(FILE *stream, int rank, const char *line, size_t len)
{
    fprintf(stream, "%d: %.*s\n", rank, (int)len, line);
    fflush(stream);
}

void ddrun_pump(ddrun_rank_t *r, int rank, int which)
{
    char buf[65536];
    FILE *stream = which ? stderr : stdout;
    ssize_t n = read(r->fds[which], buf, sizeof(buf));

    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
        return;
    }
    if (n <= 0) {
        if (r->part_len[which] > 0) {
            ddrun_emit(stream, rank, r->part[which], r->part_len[which]);
        }
        free(r->part[which]);
        r->part[which] = NULL;
        r->part_len[which] = 0;
        close(r->fds[which]);
        r->fds[which] = -1;
        return;
    }
    char *joined = realloc(r->part[which], r->part_len[which] + (size_t)n);
    if (joined == NULL) {
        return;
    }
    memcpy(joined + r->part_len[which], buf, (size_t)n);
    size_t len = r->part_len[which] + (size_t)n, start = 0;
    for (size_t i = 0; i < len; i++) {
        if (joined[i] == '\n') {
            ddrun_emit(stream, rank, joined + start, i - start);
            start = i + 1;
        }
    }
    memmove(joined, joined + start, len - start);
    r->part[which] = joined;
    r->part_len[which] = len - start;
}

/* Closes the pipes a grandchild still holds open when ddrun stops waiting
 * for them, emitting each one's unfinished line. */
void ddrun_close_pipes(ddrun_rank_t *ranks, int n)
{
    for (int i = 0; i < n; i++) {
        for (int which = 0; which < 2; which++) {
            ddrun_rank_t *r = &ranks[i];
            if (r->part_len[which] > 0) {
                ddrun_emit(which ? stderr : stdout, i, r->part[which],
                           r->part_len[which]);
            }
            free(r->part[which]);
            r->part[which] = NULL;
            r->part_len[which] = 0;
            if (r->fds[which] >= 0) {
                close(r->fds[which]);
                r->fds[which] = -1;
            }
        }
    }
}

void ddrun_kill_all(ddrun_rank_t *ranks, int n, int sig)
{
    for (int i = 0; i < n; i++) {
        if (!ranks[i].done && ranks[i].pid > 0) {
            kill(-ranks[i].pid, sig);
            kill(ranks[i].pid, sig);
        }
    }
}

int ddrun_exit_code(int status)
{
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}
