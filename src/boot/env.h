/*
 * Rank and world detection from the launcher's environment: DREAMDDP_* first,
 * then torchrun, Open MPI, Slurm and PMI. Reads the environment only through a
 * dd_getenv_fn_t, so tests can feed it any set of variables.
 */
#ifndef DD_BOOT_ENV_H
#define DD_BOOT_ENV_H

#include "boot/boot_config.h"

typedef struct {
    int rank;
    int world_size;
    int local_rank;  /* -1: derive from host names */
    int local_size;  /* -1: derive from host names */
    char source[16]; /* "DD", "torchrun", "Open MPI", "Slurm", "PMI", "none" */
    char master_addr[256]; /* empty: unset */
    int master_port;       /* -1: unset */
    char job_id[128];      /* the launcher's job id; empty when none */
} dd_boot_env_t;

/**
 * Detects this process's place in the job. With no launcher variables at
 * all, the job is a single rank. Partial or contradictory settings return
 * DD_ERR_INVALID_CONFIG with a message naming the variables.
 */
dd_status_t dd_boot_env_detect(const dd_boot_opts_t *opts,
                               dd_getenv_fn_t getenv_fn, void *arg,
                               dd_boot_env_t *env_p);

/**
 * The rank a launcher variable gives, without any checking, for the log
 * prefix of errors found before detection; -1 when none parses.
 */
int dd_boot_env_guess_rank(dd_getenv_fn_t getenv_fn, void *arg);

/**
 * Resolves this rank's role from DREAMDDP_ROLE (or the caller's override,
 * role_override >= 0) and DREAMDDP_NUM_AGGREGATORS.
 */
dd_status_t dd_boot_role_resolve(const dd_boot_opts_t *opts, int role_override,
                                 int rank, int world_size, dd_role_t *role_p);

#endif
