/*
 * The bootstrap's DREAMDDP_* variables: rank and world, role, the rendezvous
 * store.
 */
#ifndef DD_BOOT_BOOT_CONFIG_H
#define DD_BOOT_BOOT_CONFIG_H

#include "core/config.h"

typedef struct {
    int rank;             /* -1: unset */
    int world_size;       /* -1: unset */
    int local_rank;       /* -1: unset */
    int local_size;       /* -1: unset */
    char *host_id;        /* NULL: the host name and network namespace */
    int role;             /* -1: unset, else dd_role_t */
    int num_aggregators;  /* 0: none */
    char *master_addr;    /* NULL: unset */
    int master_port;      /* -1: unset */
    char *job_token;      /* NULL: DREAMDDP_JOB_TOKEN_FILE, else derive */
    char *job_token_file; /* NULL: unset */
    char *store;          /* "tcp" or "file:DIR" */
    int elastic;          /* DREAMDDP_ELASTIC */
    char *elastic_dir;    /* NULL: unset */
    int elastic_min;      /* workers below which the job stops */
    int elastic_gen;      /* the job's generation (ddrun --elastic) */
    int elastic_id;       /* -1: the rank */
} dd_boot_opts_t;

extern const dd_config_table_t dd_boot_config_table;

/** NULL-terminated role names, indexed by dd_role_t. */
extern const char *const dd_role_names[];

#endif
