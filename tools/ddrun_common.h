/*
 * What ddrun's two launchers share, and both include: the plain job
 * (ddrun.c) and the elastic supervisor that re-forms the job when a rank
 * is lost (ddrun_elastic.c, ddrun_elastic.h). Starting a rank and relaying
 * its output (ddrun_common.c), what it knows of a running rank and of the
 * library's settings that bound it (ddrun_ranks.c).
 */
#ifndef DD_TOOLS_DDRUN_COMMON_H
#define DD_TOOLS_DDRUN_COMMON_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

/* How long the other ranks may take to stop once one has (the library
 * tells every rank of a lost peer within a second), and the aggregators to
 * leave once every worker has: past it, a rank that is stopped is frozen. */
#define DDRUN_GRACE_S 5.0

typedef struct {
    pid_t pid;
    int fds[2];    /* stdout, stderr pipes; -1 when closed */
    char *part[2]; /* an unfinished line of each */
    size_t part_len[2];
    int done;
    int status;
} ddrun_rank_t;

/* What every rank of a generation is started with. */
typedef struct {
    int n, aggregators, port;
    const char *token;
    char **argv;
    int generation; /* -1: not elastic */
    const char *elastic_dir;
    int elastic_min;
    int elastic_id; /* of the rank spawned next: the rank first started as */
    /* The library's settings, as the ranks read them (ddrun_ranks.c). */
    double rank_timeout_s; /* DREAMDDP_TIMEOUT_S: its bound on any wait */
    int agg_expendable;    /* DREAMDDP_AGG_LOSS=survive: an aggregator's
                            * loss is survived by the workers */
} ddrun_job_t;

extern volatile sig_atomic_t ddrun_signal;

double ddrun_now(void);
int ddrun_free_port(void);
int ddrun_spawn(ddrun_rank_t *r, int rank, const ddrun_job_t *job);
/* Reads what a rank wrote on one stream and prints the complete lines. */
void ddrun_pump(ddrun_rank_t *r, int rank, int which);
/* Closes the pipes still open (a grandchild holds them), emitting each
 * one's unfinished line and freeing its buffer. */
void ddrun_close_pipes(ddrun_rank_t *ranks, int n);
void ddrun_kill_all(ddrun_rank_t *ranks, int n, int sig);
int ddrun_exit_code(int status);

/* Whether a process of the group (a rank and its children) is stopped
 * (SIGSTOP, a debugger): frozen, it cannot notice that a peer was lost. */
int ddrun_group_stopped(pid_t pgid);
/* Fills the job's copy of the library's settings from the environment
 * that the ranks inherit. */
void ddrun_read_lib_settings(ddrun_job_t *job);

#endif
