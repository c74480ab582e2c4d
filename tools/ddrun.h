/*
 * ddrun's parts: starting a rank and relaying its output (ddrun.c), and
 * the elastic supervisor that re-forms the job when a rank is lost
 * (ddrun_elastic.c).
 */
#ifndef DD_TOOLS_DDRUN_H
#define DD_TOOLS_DDRUN_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

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
} ddrun_job_t;

extern volatile sig_atomic_t ddrun_signal;

double ddrun_now(void);
int ddrun_free_port(void);
int ddrun_spawn(ddrun_rank_t *r, int rank, const ddrun_job_t *job);
/* Reads what a rank wrote on one stream and prints the complete lines. */
void ddrun_pump(ddrun_rank_t *r, int rank, int which);
void ddrun_kill_all(ddrun_rank_t *ranks, int n, int sig);
int ddrun_exit_code(int status);

/* ddrun --elastic: runs generations of the job until one ends; returns
 * ddrun's exit code. */
int ddrun_elastic(ddrun_job_t *job, int min_workers, int max_restarts,
                  double timeout_s);

#endif
