/*
 * The job's secret: what every rank presents to the store. It comes from
 * DREAMDDP_JOB_TOKEN or a file named by DREAMDDP_JOB_TOKEN_FILE; without
 * either, the caller derives one from public facts and says so.
 */
#ifndef DD_BOOT_JOB_TOKEN_H
#define DD_BOOT_JOB_TOKEN_H

#include "boot/boot_config.h"

#include <dreamddp.h>

/* Longest token a file may hold. */
#define DD_JOB_TOKEN_MAX 4096

/**
 * Reads the job token into a malloc'ed *token_p, or sets *token_p to NULL
 * when neither variable is set. A token file must be a regular file that
 * only its owner can read or write (mode 0600 or stricter), and hold one
 * line; else DD_ERR_INVALID_CONFIG naming the variable. Setting both
 * variables is an error too.
 */
dd_status_t dd_boot_job_token(const dd_boot_opts_t *opts, char **token_p);

#endif
