/*
 * ddtopo's parts: the report (text and JSON) of one probe and choice, and
 * the probe subcommand that measures interfaces between the ranks of a job.
 */
#ifndef DD_TOOLS_DDTOPO_H
#define DD_TOOLS_DDTOPO_H

#include "backends/registry.h"
#include "device/loader.h"
#include "topo/ifchoice.h"

#include <stdio.h>

#define DDTOPO_MAX_DEVICES 16

/* The devices the device module sees, loaded as dd_init loads it. */
typedef struct {
    int probed;      /* 0: the topology is another machine's */
    int kind;        /* DREAMDDP_DEVICE */
    char module[16]; /* "" when none loaded */
    char why[512];   /* which module file, or why none */
    int n;
    dd_device_info_t info[DDTOPO_MAX_DEVICES];
} ddtopo_devices_t;

#define DDTOPO_MAX_BACKENDS 16

/* The backend modules, found and queried as dd_init does, never started. */
typedef struct {
    int probed;     /* 0: the topology is another machine's, or an error */
    char why[512];  /* when not probed: why */
    char spec[128]; /* DREAMDDP_BACKENDS, or "" */
    int n;
    dd_backend_probe_t b[DDTOPO_MAX_BACKENDS]; /* by name */
} ddtopo_backends_t;

#define DDTOPO_MAX_TRANSPORTS 32

/* What UCX will use on the chosen interface (ddtopo_ucx.c). */
typedef struct {
    int probed;           /* 0: not built with UCX, another machine's, failed */
    char why[256];        /* when not probed: why */
    char version[32];     /* UCX's, or "" */
    char net_devices[64]; /* UCX_NET_DEVICES as the module sets it, or "" */
    int n;
    char list[DDTOPO_MAX_TRANSPORTS][64]; /* "tcp/eth0", "sysv/memory" */
} ddtopo_transports_t;

/* Fills t for choice c: UCX started as the UCX module starts it. */
void ddtopo_transports(int foreign, const dd_topo_choice_t *c,
                       ddtopo_transports_t *t);

/* Everything one report shows. */
typedef struct {
    const dd_topo_t *topo;
    const dd_topo_opts_t *opts;
    int local_rank, local_size;
    int gpu;
    const dd_topo_cand_t *cands; /* topo->n_nics, in the rank's order */
    const dd_topo_choice_t *choice;
    int *gpu_nic; /* per GPU: the NIC its local rank would choose, or -1 */
    const ddtopo_devices_t *devices;
    const ddtopo_backends_t *backends;
    const ddtopo_transports_t *transports;
} ddtopo_report_t;

void ddtopo_print_text(FILE *out, const ddtopo_report_t *r);
void ddtopo_print_json(FILE *out, const ddtopo_report_t *r);

/* `ddtopo probe [--bytes SIZE] [--pings N]`: returns the exit status. */
int ddtopo_probe_main(int argc, char **argv);

#endif
