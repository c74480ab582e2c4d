/*
 * ddrun's elastic supervisor (ddrun_elastic.c), which ddrun.c calls; it
 * uses only what ddrun_common.h shares.
 */
#ifndef DD_TOOLS_DDRUN_ELASTIC_H
#define DD_TOOLS_DDRUN_ELASTIC_H

#include "ddrun_common.h"

/* ddrun --elastic: runs generations of the job until one ends; returns
 * ddrun's exit code. */
int ddrun_elastic(ddrun_job_t *job, int min_workers, int max_restarts,
                  double timeout_s);

#endif
