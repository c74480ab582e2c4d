/*
 * The bootstrap's configuration table. Declares variables only; the launcher
 * conventions that are not DREAMDDP_* (torchrun, Open MPI, Slurm, PMI) are read
 * by env.c.
 */
#include "boot/boot_config.h"

#include <limits.h>
#include <stddef.h>

const char *const dd_role_names[] = {"worker", "aggregator", NULL};

static const dd_config_field_t dd_boot_fields[] = {
    {"DREAMDDP_RANK", NULL,
     "This process's rank; Open MPI, Slurm and PMI variables are then "
     "ignored, and torchrun's RANK, when set, must agree.",
     DD_CONFIG_INT, offsetof(dd_boot_opts_t, rank), 0, INT_MAX, NULL},
    {"DREAMDDP_WORLD_SIZE", NULL,
     "Number of ranks in the job; set with DREAMDDP_RANK.", DD_CONFIG_INT,
     offsetof(dd_boot_opts_t, world_size), 1, INT_MAX, NULL},
    {"DREAMDDP_LOCAL_RANK", NULL,
     "This process's rank on its host; derived from host names when unset.",
     DD_CONFIG_INT, offsetof(dd_boot_opts_t, local_rank), 0, INT_MAX, NULL},
    {"DREAMDDP_LOCAL_SIZE", NULL,
     "Number of ranks on this host; derived from host names when unset.",
     DD_CONFIG_INT, offsetof(dd_boot_opts_t, local_size), 1, INT_MAX, NULL},
    {"DREAMDDP_HOST_ID", NULL,
     "Name of this rank's host: ranks with the same name share a host (for "
     "the local ranks when the launcher gives none, and the hierarchical "
     "route's groups); default the host name and network namespace. Tests "
     "set it to emulate hosts on one machine.",
     DD_CONFIG_STRING, offsetof(dd_boot_opts_t, host_id), 0, 0, NULL},
    {"DREAMDDP_ROLE", NULL,
     "This process's role; default worker, or as DREAMDDP_NUM_AGGREGATORS "
     "says.",
     DD_CONFIG_ENUM, offsetof(dd_boot_opts_t, role), 0, 0, dd_role_names},
    {"DREAMDDP_NUM_AGGREGATORS", "0",
     "The last K ranks are CPU aggregators; the others are workers.",
     DD_CONFIG_INT, offsetof(dd_boot_opts_t, num_aggregators), 0, INT_MAX,
     NULL},
    {"DREAMDDP_MASTER_ADDR", NULL,
     "Address of rank 0, which hosts the rendezvous store (else MASTER_ADDR, "
     "else found from the launcher: published through PMIx, one host, "
     "Slurm's node list, mpirun's host).",
     DD_CONFIG_STRING, offsetof(dd_boot_opts_t, master_addr), 0, 0, NULL},
    {"DREAMDDP_MASTER_PORT", NULL,
     "TCP port of the rendezvous store (else MASTER_PORT + 1, next to "
     "torch.distributed's; else 29500, or 29500 to 30499 from the job id "
     "when the address was found from the launcher).",
     DD_CONFIG_INT, offsetof(dd_boot_opts_t, master_port), 1, 65535, NULL},
    {"DREAMDDP_JOB_TOKEN", NULL,
     "Secret every rank presents to the store (ddrun makes one); when "
     "neither it nor DREAMDDP_JOB_TOKEN_FILE is set, mpirun's per-job key, "
     "else derived from the launcher's job id or the store's address, which "
     "anyone can compute.",
     DD_CONFIG_STRING, offsetof(dd_boot_opts_t, job_token), 0, 0, NULL},
    {"DREAMDDP_JOB_TOKEN_FILE", NULL,
     "File holding the job token on one line, on a directory every rank "
     "shares; it must be readable by its owner only (mode 0600).",
     DD_CONFIG_STRING, offsetof(dd_boot_opts_t, job_token_file), 0, 0, NULL},
    {"DREAMDDP_STORE", "tcp",
     "Rendezvous store: tcp (hosted by rank 0) or file:DIR on a shared "
     "directory.",
     DD_CONFIG_STRING, offsetof(dd_boot_opts_t, store), 0, 0, NULL},
    {"DREAMDDP_ELASTIC", "no",
     "Elastic workers: dd_elastic_commit saves the layers and the "
     "application's state to DREAMDDP_ELASTIC_DIR, and dd_elastic_restore "
     "resumes a re-formed job from the newest commit (ddrun --elastic sets "
     "it, and re-forms the job when a rank is lost).",
     DD_CONFIG_BOOL, offsetof(dd_boot_opts_t, elastic), 0, 0, NULL},
    {"DREAMDDP_ELASTIC_DIR", NULL,
     "Directory of the elastic commits, two files per worker; ddrun --elastic "
     "makes a private one. It must be the user's and not writable by others "
     "(made 0700 when absent), and one job's at a time. Required with "
     "DREAMDDP_ELASTIC=yes.",
     DD_CONFIG_STRING, offsetof(dd_boot_opts_t, elastic_dir), 0, 0, NULL},
    {"DREAMDDP_ELASTIC_MIN", "1",
     "With DREAMDDP_ELASTIC=yes, the fewest workers the job may go on with: "
     "below it dd_init fails saying so (ddrun --elastic --min N).",
     DD_CONFIG_INT, offsetof(dd_boot_opts_t, elastic_min), 1, INT_MAX, NULL},
    {"DREAMDDP_ELASTIC_GENERATION", "0",
     "The job's generation, counted up by ddrun --elastic each time it "
     "re-forms the job; a rank of an older generation than the commit "
     "directory's was dropped and is refused.",
     DD_CONFIG_INT, offsetof(dd_boot_opts_t, elastic_gen), 0, INT_MAX, NULL},
    {"DREAMDDP_ELASTIC_ID", NULL,
     "This worker's name in the elastic commits, the same across "
     "generations (ddrun --elastic: the rank it was first started as); "
     "default its rank. Each worker resumes from its own commit, averaged "
     "with the others'.",
     DD_CONFIG_INT, offsetof(dd_boot_opts_t, elastic_id), 0, INT_MAX, NULL},
};

const dd_config_table_t dd_boot_config_table = {
    "boot", dd_boot_fields, DD_CONFIG_FIELDS_COUNT(dd_boot_fields)};
