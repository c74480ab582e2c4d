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
    /* The launcher's per-job secret ("NAME=value", Open MPI's transport
     * key), which only the job's processes see; empty when none. */
    char job_secret[160];
    /* What gave master_addr (a variable, or how it was found); empty when
     * none did. */
    char master_from[64];
    /* The address was found, not given: mpirun's host, which rank 0 must
     * be on; rank 0 checks the address is one of its own. */
    int master_check_local;
    /* When no address was found: what the launcher lacks and what to set. */
    char master_hint[384];
    /* No address yet: rank 0 publishes its store through the launcher's
     * PMIx server (boot/pmix.h), and the others read it there. */
    int master_pmix;
    /* Why a PMIx server in the environment is not used; empty otherwise. */
    char pmix_note[160];
} dd_boot_env_t;

/**
 * Detects this process's place in the job. With no launcher variables at
 * all, the job is a single rank. Partial or contradictory settings return
 * DD_ERR_INVALID_CONFIG with a message naming the variables.
 *
 * Rank 0's address is DREAMDDP_MASTER_ADDR, else MASTER_ADDR, else
 * published through the launcher's PMIx server (master_pmix: PMIX_NAMESPACE,
 * PMIX_RANK equal to the rank and a PMIX_SERVER_URI* are set, and the
 * library is built with PMIx), else found
 * from the launcher: 127.0.0.1 when it says every rank is on one host;
 * under Slurm the first host of SLURM_STEP_NODELIST (else
 * SLURM_JOB_NODELIST); under Open MPI on several hosts mpirun's host, from
 * OMPI_MCA_orte_hnp_uri. A found address comes with a port derived from the
 * job id (29500 to 30499) unless one is set, so that two jobs on one host
 * do not meet.
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
