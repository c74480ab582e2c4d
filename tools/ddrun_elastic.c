/*
 * ddrun --elastic: the job runs in generations. When a rank is lost
 * (killed, or frozen: still running, stopped, once the others have
 * stopped), the ranks that remain are started again as the next
 * generation, renumbered (workers first, then aggregators), with the lost
 * ones started again while --max-restarts allows; each resumes from its own
 * last commit in the job's directory, averaged with the others'
 * (dd_elastic_restore). As torchrun's elastic agent does, the survivors are
 * restarted too: a re-formed job gets new backends from new processes. A
 * rank that stops by itself while no rank was lost is a failure of the job,
 * which ends as without --elastic; so does a job whose workers finished
 * while one was lost, with the lost one's status. An aggregator's loss
 * alone is survived by the library within the generation.
 */
#include "ddrun_elastic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { DDRUN_RUNNING, DDRUN_EXITED, DDRUN_LOST };

/* What a generation came to once none of it runs. */
enum { DDRUN_DONE, DDRUN_STOP, DDRUN_REFORM };

typedef struct {
    ddrun_rank_t r;
    int slot;    /* the rank it was first started as */
    int rank;    /* in its generation */
    int gen;     /* its generation */
    int agg;     /* an aggregator */
    int outcome; /* DDRUN_* */
    int code;    /* its exit code, once exited */
    int waited;  /* ddrun said it waits for it, running past the grace */
} ddrun_proc_t;

typedef struct {
    ddrun_proc_t *p;
    size_t n, cap;
} ddrun_procs_t;

static ddrun_proc_t *ddrun_procs_add(ddrun_procs_t *t)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        ddrun_proc_t *p = realloc(t->p, cap * sizeof(*p));
        if (p == NULL) {
            return NULL;
        }
        t->p = p;
        t->cap = cap;
    }
    memset(&t->p[t->n], 0, sizeof(t->p[t->n]));
    return &t->p[t->n++];
}

static int ddrun_write_generation(const char *dir, int gen)
{
    char path[4096], tmp[4120];
    snprintf(path, sizeof(path), "%s/generation", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        return -1;
    }
    fprintf(f, "%d\n", gen);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        return -1;
    }
    return 0;
}

/* Relays the output of every process that still has a pipe open (those
 * of older generations too) and reaps those that exited. */
static void ddrun_elastic_poll(ddrun_procs_t *t, int gen)
{
    size_t n = t->n;
    struct pollfd *pfds = calloc(2 * n, sizeof(*pfds));

    if (pfds == NULL) {
        return;
    }
    for (size_t i = 0; i < 2 * n; i++) {
        pfds[i] = (struct pollfd){t->p[i / 2].r.fds[i % 2], POLLIN, 0};
    }
    poll(pfds, (nfds_t)(2 * n), 100);
    for (size_t i = 0; i < 2 * n; i++) {
        if (pfds[i].fd >= 0 && pfds[i].revents) {
            ddrun_pump(&t->p[i / 2].r, t->p[i / 2].rank, (int)(i % 2));
        }
    }
    free(pfds);
    for (size_t i = 0; i < n; i++) {
        ddrun_proc_t *p = &t->p[i];
        if (p->r.done || waitpid(p->r.pid, &p->r.status, WNOHANG) <= 0) {
            continue;
        }
        p->r.done = 1;
        p->code = ddrun_exit_code(p->r.status);
        if (p->gen != gen || p->outcome == DDRUN_LOST) {
            fprintf(stderr,
                    "ddrun: rank %d of generation %d, dropped, exited with "
                    "status %d\n",
                    p->rank, p->gen, p->code);
            continue;
        }
        if (WIFSIGNALED(p->r.status)) {
            p->outcome = DDRUN_LOST;
            fprintf(stderr,
                    "ddrun: rank %d (generation %d) was lost: killed by "
                    "signal %d\n",
                    p->rank, gen, WTERMSIG(p->r.status));
        } else {
            p->outcome = DDRUN_EXITED;
            if (p->agg && p->code != 0) {
                fprintf(stderr,
                        "ddrun: aggregator rank %d (generation %d) exited "
                        "with status %d\n",
                        p->rank, gen, p->code);
            }
        }
    }
}

/* Whether a rank still running past the grace is to be dropped now: it is
 * stopped (frozen), the workers are all done, or it outlived the library's
 * own bound on any wait. A healthy rank that is slow to notice the loss
 * (the store's host waiting on a dead peer) is waited for, or the job
 * would lose a healthy worker. */
static int ddrun_elastic_frozen(ddrun_proc_t *p, const ddrun_job_t *job,
                                double grace_at, int workers_done,
                                const char **why_p)
{
    if (workers_done) {
        *why_p = "every worker finished";
        return 1;
    }
    if (ddrun_group_stopped(p->r.pid)) {
        *why_p = "it is stopped";
        return 1;
    }
    if (ddrun_now() > grace_at + job->rank_timeout_s) {
        *why_p = "running past DREAMDDP_TIMEOUT_S";
        return 1;
    }
    if (!p->waited) {
        p->waited = 1;
        fprintf(stderr,
                "ddrun: rank %d (generation %d) is still running, not "
                "stopped: waiting up to %.0f s (DREAMDDP_TIMEOUT_S) for it "
                "to stop\n",
                p->rank, p->gen, job->rank_timeout_s);
    }
    return 0;
}

/* Past the grace: drops the frozen ranks of the generation; returns how
 * many still run. */
static int ddrun_elastic_drop(ddrun_procs_t *t, size_t first,
                              const ddrun_job_t *job, double grace_at,
                              int workers_done)
{
    int running = 0;

    for (size_t i = first; i < t->n; i++) {
        ddrun_proc_t *p = &t->p[i];
        const char *why;
        if (p->outcome != DDRUN_RUNNING) {
            continue;
        }
        if (!ddrun_elastic_frozen(p, job, grace_at, workers_done, &why)) {
            running++;
            continue;
        }
        p->outcome = DDRUN_LOST;
        fprintf(stderr,
                "ddrun: rank %d (generation %d, pid %ld) did not stop with "
                "the others: dropped from the job (%s)\n",
                p->rank, p->gen, (long)p->r.pid, why);
    }
    return running;
}

/* Runs generation gen (the procs from first on) until every rank has
 * exited or was dropped; returns -1, or ddrun's exit code for a signal or
 * the timeout. The grace starts when a worker fails or every worker has
 * exited; an aggregator's exit starts nothing (its loss is survived). */
static int ddrun_elastic_run(ddrun_procs_t *t, size_t first,
                             const ddrun_job_t *job, double deadline)
{
    double grace_at = 0;

    for (;;) {
        ddrun_elastic_poll(t, job->generation);
        int running = 0, workers_running = 0, workers_failed = 0,
            stopped_itself = 0;
        for (size_t i = first; i < t->n; i++) {
            const ddrun_proc_t *p = &t->p[i];
            running += p->outcome == DDRUN_RUNNING;
            workers_running += !p->agg && p->outcome == DDRUN_RUNNING;
            workers_failed += !p->agg && p->outcome != DDRUN_RUNNING &&
                              (p->outcome == DDRUN_LOST || p->code != 0);
            /* A worker killed starts no grace: the survivors learn of it
             * within a second but may take long to exit (a Python rank
             * unwinds and tears torch down). */
            stopped_itself +=
                !p->agg && p->outcome == DDRUN_EXITED && p->code != 0;
        }
        if (running == 0) {
            return -1;
        }
        if (grace_at == 0 && (stopped_itself > 0 || workers_running == 0)) {
            grace_at = ddrun_now() + DDRUN_GRACE_S;
        }
        if (ddrun_signal || (deadline > 0 && ddrun_now() > deadline)) {
            int code = ddrun_signal ? 128 + ddrun_signal : 124;
            fprintf(stderr, "ddrun: %s; stopping every rank\n",
                    ddrun_signal ? "caught a signal" : "timed out (--timeout)");
            return code;
        }
        if (grace_at > 0 && ddrun_now() > grace_at &&
            ddrun_elastic_drop(t, first, job, grace_at,
                               workers_running == 0 && workers_failed == 0) ==
                0) {
            return -1;
        }
    }
}

/* What generation [first, n) came to: done (the workers finished; a lost
 * aggregator alone was survived), stopped (a rank failed and none was
 * lost; or the workers finished while one was lost, which without
 * --elastic is that worker's status too), or to re-form. *code_p: the exit
 * code, for a re-formation the status ddrun ends with if the job cannot go
 * on (the first worker lost to a signal, else the first failure). */
static int ddrun_elastic_verdict(const ddrun_procs_t *t, size_t first,
                                 int *code_p)
{
    int finished = 0, lost = 0, failed = 0, lost_code = 0;
    const ddrun_proc_t *lost_worker = NULL;

    for (size_t i = first; i < t->n; i++) {
        const ddrun_proc_t *p = &t->p[i];
        if (p->outcome == DDRUN_LOST) {
            lost++;
            if (!p->agg && lost_worker == NULL) {
                lost_worker = p;
            }
            if (!p->agg && lost_code == 0 && p->r.done) {
                lost_code = p->code; /* 128 + the signal */
            }
        } else if (!p->agg && p->code != 0 && failed == 0) {
            failed = p->code;
        } else if (!p->agg && p->code == 0) {
            finished++;
        }
    }
    *code_p = lost_code ? lost_code : failed ? failed : 1;
    if (lost_worker == NULL && failed == 0) {
        *code_p = 0;
        return DDRUN_DONE;
    }
    if (failed == 0 && finished > 0) {
        fprintf(stderr,
                "ddrun: rank %d (generation %d) was lost and the other "
                "workers finished: the job ends with its status %d\n",
                lost_worker->rank, lost_worker->gen, *code_p);
        return DDRUN_STOP;
    }
    if (lost == 0) {
        fprintf(stderr, "ddrun: a rank failed and none was lost: the job "
                        "stops\n");
        *code_p = failed;
        return DDRUN_STOP;
    }
    return DDRUN_REFORM;
}

/* Starts the next generation's ranks: the survivors and the lost ones
 * started again while restarts are left, in the order they were first
 * started, workers first. Returns the number of workers; -1 when fewer
 * than --min are left, -2 when ddrun cannot start them. */
static int ddrun_elastic_reform(ddrun_procs_t *t, size_t first, size_t last,
                                ddrun_job_t *job, int *restarts_left)
{
    int slots[2][4096], roles[2] = {0, 0}, n = 0, gen = job->generation;

    for (int agg = 0; agg < 2; agg++) {
        for (int pass = 0; pass < 2; pass++) {
            for (size_t i = first; i < last; i++) {
                const ddrun_proc_t *p = &t->p[i];
                int keep =
                    p->agg == agg && (pass == 0 ? p->outcome == DDRUN_EXITED
                                                : p->outcome == DDRUN_LOST &&
                                                      *restarts_left > 0);
                if (!keep || n >= 4096) {
                    continue;
                }
                if (pass == 1) {
                    (*restarts_left)--;
                    fprintf(stderr,
                            "ddrun: rank %d (first started as rank %d) is "
                            "started again\n",
                            p->rank, p->slot);
                }
                slots[agg][roles[agg]++] = p->slot;
                n++;
            }
        }
    }
    /* In the order first started: a job that gets its lost rank back has
     * the ranks it began with. */
    for (int agg = 0; agg < 2; agg++) {
        for (int i = 1; i < roles[agg]; i++) {
            for (int k = i; k > 0 && slots[agg][k - 1] > slots[agg][k]; k--) {
                int tmp = slots[agg][k];
                slots[agg][k] = slots[agg][k - 1];
                slots[agg][k - 1] = tmp;
            }
        }
    }
    job->n = roles[0] + roles[1];
    job->aggregators = roles[1];
    job->port = ddrun_free_port();
    if (roles[0] < job->elastic_min) {
        fprintf(stderr,
                "ddrun: %d worker%s left, fewer than --min %d: the job "
                "stops\n",
                roles[0], roles[0] == 1 ? "" : "s", job->elastic_min);
        return -1;
    }
    if (ddrun_write_generation(job->elastic_dir, gen) != 0 || job->port < 0) {
        fprintf(stderr, "ddrun: cannot start generation %d: %s\n", gen,
                strerror(errno));
        return -2;
    }
    fprintf(stderr,
            "ddrun: generation %d: %d ranks (%d workers, %d aggregators) "
            "resume from the last commit\n",
            gen, job->n, roles[0], roles[1]);
    for (int rank = 0; rank < job->n; rank++) {
        int agg = rank >= roles[0];
        ddrun_proc_t *p = ddrun_procs_add(t);
        if (p == NULL) {
            return -2;
        }
        *p = (ddrun_proc_t){.slot = slots[agg][agg ? rank - roles[0] : rank],
                            .rank = rank,
                            .gen = gen,
                            .agg = agg,
                            .r = {.fds = {-1, -1}}};
        job->elastic_id = p->slot;
        if (ddrun_spawn(&p->r, rank, job) != 0) {
            fprintf(stderr, "ddrun: cannot start rank %d: %s\n", rank,
                    strerror(errno));
            return -2;
        }
    }
    return roles[0];
}

/* Stops what still runs (dropped ranks too), relays its last output. */
static void ddrun_elastic_end(ddrun_procs_t *t)
{
    for (size_t i = 0; i < t->n; i++) {
        if (!t->p[i].r.done) {
            ddrun_kill_all(&t->p[i].r, 1, SIGKILL);
        }
    }
    double until = ddrun_now() + 2.0;
    int open = 1;
    while (open && ddrun_now() < until) {
        ddrun_elastic_poll(t, -1);
        open = 0;
        for (size_t i = 0; i < t->n; i++) {
            open |= !t->p[i].r.done || t->p[i].r.fds[0] >= 0 ||
                    t->p[i].r.fds[1] >= 0;
        }
    }
}

/* Removes the directory ddrun made and the files in it. */
static void ddrun_remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *ent;
    char path[4400];

    while (d != NULL && (ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") != 0 && strcmp(ent->d_name, "..") != 0) {
            snprintf(path, sizeof(path), "%s/%s", dir, ent->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    if (rmdir(dir) != 0) {
        fprintf(stderr, "ddrun: could not remove %s: %s\n", dir,
                strerror(errno));
    }
}

/* Runs generation after generation until one ends the job; returns
 * ddrun's exit code, the one it has without --elastic for the same end. */
static int ddrun_elastic_generations(ddrun_procs_t *t, ddrun_job_t *job,
                                     int restarts_left, double deadline)
{
    size_t first = 0;

    for (;;) {
        int code = ddrun_elastic_run(t, first, job, deadline);
        if (code >= 0) {
            return code;
        }
        if (ddrun_elastic_verdict(t, first, &code) != DDRUN_REFORM) {
            return code;
        }
        size_t last = t->n;
        job->generation++;
        int workers = ddrun_elastic_reform(t, first, last, job, &restarts_left);
        if (workers < 0) {
            /* Below --min: the loss's status, as without --elastic. */
            return workers == -1 ? code : 1;
        }
        first = last;
    }
}

/* The user's commit directory: made (0700) when absent, refused when it
 * is another user's or others may write in it, since whoever can write
 * there can plant a commit that the job restores. */
static int ddrun_elastic_dir_check(const char *dir)
{
    struct stat st;

    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "ddrun: DREAMDDP_ELASTIC_DIR=%s: cannot make it: %s\n",
                dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "ddrun: DREAMDDP_ELASTIC_DIR=%s is not a directory\n",
                dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        fprintf(stderr,
                "ddrun: DREAMDDP_ELASTIC_DIR=%s is owned by uid %u, not by "
                "this job's user (uid %u): its owner could read the commits "
                "or plant one; use a directory of your own\n",
                dir, (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        fprintf(stderr,
                "ddrun: DREAMDDP_ELASTIC_DIR=%s has mode %03o: other users "
                "can write in it, and so plant or replace a commit; chmod "
                "go-w it (0700 is best)\n",
                dir, (unsigned)(st.st_mode & 0777));
        return -1;
    }
    return 0;
}

/* Holds DIR/lock for the job's life (the descriptor, closed on exec, is
 * ddrun's alone): a second job given the same directory would replace the
 * first's generation file and commits under its running workers, so it is
 * refused, naming the first. Returns the descriptor, or -1. */
static int ddrun_elastic_lock(const char *dir)
{
    char path[4200], pid[32] = "";
    struct stat st;

    snprintf(path, sizeof(path), "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != geteuid() ||
        !S_ISREG(st.st_mode)) {
        fprintf(stderr, "ddrun: cannot take %s: %s\n", path,
                fd < 0 ? strerror(errno) : "it is another user's");
        goto err_close;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ssize_t n = errno == EWOULDBLOCK ? read(fd, pid, sizeof(pid) - 1) : -1;
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        fprintf(stderr,
                "ddrun: DREAMDDP_ELASTIC_DIR=%s is in use by another job "
                "(ddrun pid %s): two jobs in one directory would overwrite "
                "each other's commits; give this one a directory of its "
                "own\n",
                dir, pid[0] ? pid : "unknown");
        goto err_close;
    }
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        fprintf(stderr, "ddrun: cannot write %s: %s\n", path, strerror(errno));
        goto err_close;
    }
    return fd;
err_close:
    if (fd >= 0) {
        close(fd);
    }
    return -1;
}

int ddrun_elastic(ddrun_job_t *job, int min_workers, int max_restarts,
                  double timeout_s)
{
    char dir[4096] = "";
    const char *user_dir = getenv("DREAMDDP_ELASTIC_DIR");
    ddrun_procs_t t = {0};
    int code = 1, lock = -1;
    double deadline = timeout_s > 0 ? ddrun_now() + timeout_s : 0;

    if (user_dir != NULL && user_dir[0] != '\0') {
        snprintf(dir, sizeof(dir), "%s", user_dir);
        if (ddrun_elastic_dir_check(dir) != 0) {
            return 1;
        }
    } else {
        /* Memory (a tmpfs) where there is one: a commit is then a copy. */
        const char *tmpdir = getenv("TMPDIR");
        const char *base = access("/dev/shm", W_OK | X_OK) == 0  ? "/dev/shm"
                           : tmpdir != NULL && tmpdir[0] != '\0' ? tmpdir
                                                                 : "/tmp";
        snprintf(dir, sizeof(dir), "%s/ddrun-elastic-XXXXXX", base);
        if (mkdtemp(dir) == NULL) {
            fprintf(stderr, "ddrun: cannot make a commit directory %s: %s\n",
                    dir, strerror(errno));
            return 1;
        }
    }
    if ((lock = ddrun_elastic_lock(dir)) < 0) {
        if (user_dir == NULL || user_dir[0] == '\0') {
            ddrun_remove_dir(dir);
        }
        return 1;
    }
    job->elastic_dir = dir;
    job->elastic_min = min_workers;
    job->generation = 0;
    /* Generation 0: every rank of -n, as first started. */
    for (int rank = 0; rank < job->n; rank++) {
        ddrun_proc_t *p = ddrun_procs_add(&t);
        if (p == NULL) {
            goto out;
        }
        *p = (ddrun_proc_t){.slot = rank,
                            .rank = rank,
                            .agg = rank >= job->n - job->aggregators,
                            .r = {.fds = {-1, -1}}};
    }
    if (ddrun_write_generation(dir, 0) != 0) {
        fprintf(stderr, "ddrun: cannot write %s/generation: %s\n", dir,
                strerror(errno));
        goto out;
    }
    for (int rank = 0; rank < job->n; rank++) {
        job->elastic_id = rank;
        if (ddrun_spawn(&t.p[rank].r, rank, job) != 0) {
            fprintf(stderr, "ddrun: cannot start rank %d: %s\n", rank,
                    strerror(errno));
            goto out;
        }
    }
    code = ddrun_elastic_generations(&t, job, max_restarts, deadline);
out:
    ddrun_elastic_end(&t);
    free(t.p);
    if (user_dir == NULL || user_dir[0] == '\0') {
        ddrun_remove_dir(dir); /* ours: the commits and the generation */
    }
    close(lock); /* after the removal: the directory is ours till then */
    return code;
}
