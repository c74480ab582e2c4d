/*
 * ddtopo: shows what dreamddp sees of this machine (or of a fixture tree or
 * another machine's hwloc XML) and which network interface it would use,
 * with the reason for every choice; prints the DREAMDDP_* configuration; and,
 * as `ddtopo probe` inside a job, measures the interfaces between ranks. It
 * only reads: it never changes the machine's configuration.
 */
#include "ddtopo.h"

#include "backends/backend_config.h"
#include "core/core_config.h"
#include "core/log.h"
#include "topo/topo.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DDTOPO_OK = 0, DDTOPO_ERROR = 1, DDTOPO_USAGE = 2 };

static void ddtopo_usage(FILE *out)
{
    fprintf(
        out,
        "usage: ddtopo [--json] [--topo FILE] [--local-rank N] "
        "[--local-size N]\n"
        "       ddtopo --config [--markdown]\n"
        "       ddtopo probe [--bytes SIZE] [--pings N] [--all]   (inside "
        "a job)\n"
        "\n"
        "Shows the machine (packages, NUMA nodes, cores), its network "
        "interfaces\n"
        "in the order a rank would prefer them and why, the GPUs with "
        "their\n"
        "nearest interface, the stream count, the backends and the "
        "configuration.\n"
        "\n"
        "  --json            one JSON object instead of text\n"
        "  --topo FILE       read an hwloc XML file (as DREAMDDP_TOPO_FILE)\n"
        "  --local-rank N    choose as local rank N would (default 0)\n"
        "  --local-size N    ranks on this host, for the stream count "
        "(default 1)\n"
        "  --config          print every DREAMDDP_* variable, its doc and "
        "value\n"
        "  --markdown        with --config: a Markdown table\n"
        "  -V, --version     print the version and exit\n"
        "  -h, --help        this text\n"
        "\n"
        "Exit status: 0 success, 1 error (the message says why), 2 "
        "usage.\n");
}

typedef struct {
    int json, config, markdown;
    const char *topo_file;
    int local_rank, local_size;
} ddtopo_args_t;

static int ddtopo_parse_count(const char *s, int min, int *value_p)
{
    return dd_config_parse_int(s, min, 1 << 20, value_p) == DD_OK ? 0 : -1;
}

/* Returns -1 to exit with usage, 1 after --help or --version, 0 to go on. */
static int ddtopo_parse_args(int argc, char **argv, ddtopo_args_t *args)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"topo", required_argument, NULL, 't'},
        {"local-rank", required_argument, NULL, 'r'},
        {"local-size", required_argument, NULL, 's'},
        {"config", no_argument, NULL, 'c'},
        {"markdown", no_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    int c;

    memset(args, 0, sizeof(*args));
    args->local_size = 1;
    while ((c = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            args->json = 1;
            break;
        case 't':
            args->topo_file = optarg;
            break;
        case 'r':
        case 's':
            if (ddtopo_parse_count(optarg, c == 'r' ? 0 : 1,
                                   c == 'r' ? &args->local_rank
                                            : &args->local_size) != 0) {
                fprintf(stderr, "ddtopo: invalid %s '%s'\n",
                        c == 'r' ? "--local-rank" : "--local-size", optarg);
                return -1;
            }
            break;
        case 'c':
            args->config = 1;
            break;
        case 'm':
            args->markdown = 1;
            break;
        case 'h':
            ddtopo_usage(stdout);
            return 1;
        case 'V':
            printf("ddtopo (dreamddp) %s\n", dd_version_string());
            return 1;
        default:
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ddtopo: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (args->markdown && !args->config) {
        fprintf(stderr, "ddtopo: --markdown goes with --config\n");
        return -1;
    }
    if (args->local_rank >= args->local_size) {
        fprintf(stderr,
                "ddtopo: --local-rank %d with --local-size %d: the local rank "
                "must be below the number of ranks on the host\n",
                args->local_rank, args->local_size);
        return -1;
    }
    return 0;
}

/* What local rank g would choose, for the GPU list. */
static void ddtopo_gpu_nics(const dd_topo_t *topo, const dd_topo_opts_t *opts,
                            int local_size, int *gpu_nic)
{
    dd_topo_cand_t *cands = calloc((size_t)topo->n_nics + 1, sizeof(*cands));
    dd_topo_choice_t choice;
    /* Errors cannot happen here: the main choice, made first, succeeded
     * with the same interfaces. */
    for (int g = 0; g < topo->n_gpus; g++) {
        gpu_nic[g] =
            cands != NULL && dd_topo_choose(topo, opts, g, g, local_size, cands,
                                            &choice) == DD_OK
                ? cands[0].nic
                : -1;
    }
    free(cands);
}

/* The device module, through the loader dd_init uses, with the same
 * variables; only for this machine's own topology. */
static void ddtopo_devices(int foreign, ddtopo_devices_t *d)
{
    dd_device_opts_t dopts;
    dd_backend_opts_t bopts;
    dd_device_module_t *m = NULL;

    memset(d, 0, sizeof(*d));
    if (foreign) {
        snprintf(d->why, sizeof(d->why),
                 "not probed: the topology is another machine's (--topo or "
                 "DREAMDDP_SYSFS_ROOT)");
        return;
    }
    d->probed = 1;
    if (dd_config_load(&dd_device_config_table, &dopts, dd_config_getenv,
                       NULL) != DD_OK ||
        dd_config_load(&dd_backend_config_table, &bopts, dd_config_getenv,
                       NULL) != DD_OK) {
        snprintf(d->why, sizeof(d->why), "%s", dd_last_error());
        return;
    }
    d->kind = dopts.kind;
    if (dd_device_load(&dopts, bopts.path, DD_LOG_WARN, &m, d->why,
                       sizeof(d->why)) != DD_OK) {
        snprintf(d->why, sizeof(d->why), "%s", dd_last_error());
    } else if (m != NULL) {
        snprintf(d->module, sizeof(d->module), "%s", m->name);
        if (m->ops->device_count(m->instance, &d->n) != DD_OK) {
            snprintf(d->why, sizeof(d->why), "%s", dd_last_error());
            d->n = 0;
        }
        d->n = d->n < DDTOPO_MAX_DEVICES ? d->n : DDTOPO_MAX_DEVICES;
        for (int g = 0; g < d->n; g++) {
            if (m->ops->device_info(m->instance, g, &d->info[g]) != DD_OK) {
                snprintf(d->info[g].name, sizeof(d->info[g].name), "? (%s)",
                         dd_last_error());
            }
        }
        dd_device_unload(m);
    }
    dd_config_release(&dd_backend_config_table, &bopts);
    dd_config_release(&dd_device_config_table, &dopts);
}

static int ddtopo_backend_cmp(const void *a, const void *b)
{
    return strcmp(((const dd_backend_probe_t *)a)->name,
                  ((const dd_backend_probe_t *)b)->name);
}

/* The backend modules, found, loaded and queried by the registry's own
 * code, with the same variables; only for this machine's own topology. */
static void ddtopo_backends(int foreign, ddtopo_backends_t *b)
{
    dd_backend_opts_t bopts;

    memset(b, 0, sizeof(*b));
    if (foreign) {
        snprintf(b->why, sizeof(b->why),
                 "not probed: the topology is another machine's (--topo or "
                 "DREAMDDP_SYSFS_ROOT)");
        return;
    }
    if (dd_config_load(&dd_backend_config_table, &bopts, dd_config_getenv,
                       NULL) != DD_OK) {
        snprintf(b->why, sizeof(b->why), "%s", dd_last_error());
        return;
    }
    snprintf(b->spec, sizeof(b->spec), "%s",
             bopts.backends != NULL ? bopts.backends : "");
    if (dd_backends_probe(&bopts, b->b, DDTOPO_MAX_BACKENDS, &b->n) != DD_OK) {
        snprintf(b->why, sizeof(b->why), "%s (dd_init fails the same way)",
                 dd_last_error());
    } else if (b->n == 0) {
        snprintf(b->why, sizeof(b->why),
                 "none found: no dd_backend_*.so in DREAMDDP_BACKEND_PATH "
                 "(%s), %s or beside ddtopo",
                 bopts.path != NULL ? bopts.path : "unset", DD_PKGLIBDIR);
    } else {
        b->probed = 1;
        qsort(b->b, (size_t)b->n, sizeof(*b->b), ddtopo_backend_cmp);
    }
    dd_config_release(&dd_backend_config_table, &bopts);
}

static int ddtopo_report(const ddtopo_args_t *args, dd_topo_opts_t *opts)
{
    ddtopo_devices_t devices;
    ddtopo_backends_t backends;
    ddtopo_transports_t transports;

    dd_topo_t *topo = NULL;
    dd_topo_cand_t *cands = NULL;
    int *gpu_nic = NULL;
    dd_topo_choice_t choice;
    int rc = DDTOPO_ERROR;

    if (args->topo_file != NULL) {
        free(opts->topo_file);
        opts->topo_file = strdup(args->topo_file);
    }
    if (dd_topo_probe(opts, &topo) != DD_OK) {
        return DDTOPO_ERROR;
    }
    cands = calloc((size_t)topo->n_nics + 1, sizeof(*cands));
    gpu_nic = calloc((size_t)topo->n_gpus + 1, sizeof(*gpu_nic));
    if (cands == NULL || gpu_nic == NULL) {
        goto out_free;
    }
    int gpu = dd_topo_rank_gpu(topo, args->local_rank,
                               getenv("CUDA_VISIBLE_DEVICES"));
    if (dd_topo_choose(topo, opts, gpu, args->local_rank, args->local_size,
                       cands, &choice) != DD_OK) {
        goto out_free;
    }
    ddtopo_gpu_nics(topo, opts, args->local_size, gpu_nic);
    ddtopo_devices(opts->topo_file != NULL || opts->sysfs_root != NULL,
                   &devices);
    ddtopo_backends(opts->topo_file != NULL || opts->sysfs_root != NULL,
                    &backends);
    ddtopo_transports(opts->topo_file != NULL || opts->sysfs_root != NULL,
                      &choice, &transports);
    ddtopo_report_t r = {
        topo,    opts,    args->local_rank, args->local_size, gpu,        cands,
        &choice, gpu_nic, &devices,         &backends,        &transports};
    if (args->json) {
        ddtopo_print_json(stdout, &r);
    } else {
        ddtopo_print_text(stdout, &r);
    }
    rc = fflush(stdout) == 0 ? DDTOPO_OK : DDTOPO_ERROR;
out_free:
    free(gpu_nic);
    free(cands);
    dd_topo_free(topo);
    return rc;
}

/* Applies DD_LOG_* so that ddtopo logs like the library does. */
static int ddtopo_logging(void)
{
    dd_core_opts_t core;

    if (dd_config_load(&dd_core_config_table, &core, dd_config_getenv, NULL) !=
        DD_OK) {
        return -1;
    }
    dd_status_t status =
        dd_log_configure(core.log_level, core.log_subsys, core.log_file, -1);
    dd_config_release(&dd_core_config_table, &core);
    return status == DD_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    ddtopo_args_t args;
    dd_topo_opts_t opts;

    if (argc > 1 && strcmp(argv[1], "probe") == 0) {
        return ddtopo_probe_main(argc - 1, argv + 1);
    }
    int parsed = ddtopo_parse_args(argc, argv, &args);
    if (parsed != 0) {
        if (parsed < 0) {
            ddtopo_usage(stderr);
        }
        return parsed < 0 ? DDTOPO_USAGE : DDTOPO_OK;
    }
    if (args.config) {
        return dd_config_print(stdout, args.markdown ? DD_CONFIG_PRINT_MARKDOWN
                                                     : 0) == DD_OK
                   ? DDTOPO_OK
                   : DDTOPO_ERROR;
    }
    if (ddtopo_logging() != 0 ||
        dd_config_load(&dd_topo_config_table, &opts, dd_config_getenv, NULL) !=
            DD_OK) {
        return DDTOPO_ERROR;
    }
    int rc = ddtopo_report(&args, &opts);
    dd_config_release(&dd_topo_config_table, &opts);
    dd_log_close();
    return rc;
}
