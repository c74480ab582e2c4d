/*
 * ddtopo's parts: the report (text and JSON) of one probe and choice, and
 * the probe subcommand that measures interfaces between the ranks of a job.
 */
#ifndef DD_TOOLS_DDTOPO_H
#define DD_TOOLS_DDTOPO_H

#include "topo/ifchoice.h"

#include <stdio.h>

/* Everything one report shows. */
typedef struct {
    const dd_topo_t *topo;
    const dd_topo_opts_t *opts;
    int local_rank, local_size;
    int gpu;
    const dd_topo_cand_t *cands; /* topo->n_nics, in the rank's order */
    const dd_topo_choice_t *choice;
    int *gpu_nic; /* per GPU: the NIC its local rank would choose, or -1 */
} ddtopo_report_t;

void ddtopo_print_text(FILE *out, const ddtopo_report_t *r);
void ddtopo_print_json(FILE *out, const ddtopo_report_t *r);

/* `ddtopo probe [--bytes SIZE] [--pings N]`: returns the exit status. */
int ddtopo_probe_main(int argc, char **argv);

#endif
