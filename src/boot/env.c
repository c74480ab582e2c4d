/*
 * Launcher conventions. The first convention that has any of its variables
 * set is the one used; within it, a missing or inconsistent variable is an
 * error naming the variables. DREAMDDP_* variables and torchrun's generic names
 * (RANK, WORLD_SIZE) must agree when both are set. Outer allocation layers
 * (Slurm, MPI) are ignored below a higher convention, since torchrun run by
 * srun legitimately disagrees with them. Rank 0's address, when no variable
 * gives it, comes through the launcher's PMIx server where it runs one, or
 * is found from what the launcher says of its hosts; this file only reads
 * variables and never resolves a name, opens a socket or calls PMIx.
 */
#include "boot/env.h"
#include "boot/nodelist.h"
#include "boot/pmix.h"
#include "core/log.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *rank, *size, *local_rank, *local_size;
    const char *job_id[3];
} dd_boot_convention_t;

static const dd_boot_convention_t dd_boot_conventions[] = {
    {"torchrun",
     "RANK",
     "WORLD_SIZE",
     "LOCAL_RANK",
     "LOCAL_WORLD_SIZE",
     {"TORCHELASTIC_RUN_ID", NULL, NULL}},
    {"Open MPI",
     "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE",
     {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"}},
    {"Slurm",
     "SLURM_PROCID",
     "SLURM_NTASKS",
     "SLURM_LOCALID",
     NULL,
     {"SLURM_JOB_ID", NULL, NULL}},
    {"PMI",
     "PMI_RANK",
     "PMI_SIZE",
     "MPI_LOCALRANKID",
     "MPI_LOCALNRANKS",
     {"PMI_KVSNAME", NULL, NULL}},
};

static const char *dd_boot_get(dd_getenv_fn_t getenv_fn, void *arg,
                               const char *name)
{
    if (name == NULL) {
        return NULL;
    }
    const char *s = getenv_fn(arg, name);
    return (s != NULL && s[0] != '\0') ? s : NULL;
}

/* Parses a launcher variable; an unparsable one is an error naming it. */
static dd_status_t dd_boot_parse(dd_getenv_fn_t getenv_fn, void *arg,
                                 const char *name, int min, int *value_p)
{
    const char *s = dd_boot_get(getenv_fn, arg, name);
    char *end;

    *value_p = -1;
    if (s == NULL) {
        return DD_OK;
    }
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!(isdigit((unsigned char)s[0]) || s[0] == '-') || errno != 0 ||
        end == s || *end != '\0' || v < min || v > INT_MAX) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "invalid value %s='%s': expected an integer from %d",
                        name, s, min);
    }
    *value_p = (int)v;
    return DD_OK;
}

/* Checks that a (rank, size) pair is complete and consistent. */
static dd_status_t dd_boot_check_pair(const char *rank_name, int rank,
                                      const char *size_name, int size)
{
    if (rank >= 0 && size < 0) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "%s=%d is set but %s is not: set both or neither",
                        rank_name, rank, size_name);
    }
    if (rank < 0 && size >= 0) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "%s=%d is set but %s is not: set both or neither",
                        size_name, size, rank_name);
    }
    if (rank >= 0 && rank >= size) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "%s=%d and %s=%d disagree: the rank must be below "
                        "the size",
                        rank_name, rank, size_name, size);
    }
    return DD_OK;
}

static dd_status_t dd_boot_from_dd(const dd_boot_opts_t *opts,
                                   dd_boot_env_t *env)
{
    dd_status_t status;

    status = dd_boot_check_pair("DREAMDDP_RANK", opts->rank,
                                "DREAMDDP_WORLD_SIZE", opts->world_size);
    if (status != DD_OK) {
        return status;
    }
    if (opts->local_rank >= 0 && opts->local_size >= 0) {
        status = dd_boot_check_pair("DREAMDDP_LOCAL_RANK", opts->local_rank,
                                    "DREAMDDP_LOCAL_SIZE", opts->local_size);
        if (status != DD_OK) {
            return status;
        }
    }
    env->rank = opts->rank;
    env->world_size = opts->world_size;
    env->local_rank = opts->local_rank;
    env->local_size = opts->local_size;
    snprintf(env->source, sizeof(env->source), "DD");
    return DD_OK;
}

/* Fills env from one launcher convention whose variables are present. */
static dd_status_t dd_boot_from(const dd_boot_convention_t *conv,
                                dd_getenv_fn_t getenv_fn, void *arg,
                                dd_boot_env_t *env)
{
    int rank, size, local_rank, local_size;
    dd_status_t status;

    if ((status = dd_boot_parse(getenv_fn, arg, conv->rank, 0, &rank)) ||
        (status = dd_boot_parse(getenv_fn, arg, conv->size, 1, &size)) ||
        (status =
             dd_boot_parse(getenv_fn, arg, conv->local_rank, 0, &local_rank)) ||
        (status =
             dd_boot_parse(getenv_fn, arg, conv->local_size, 1, &local_size))) {
        return status;
    }
    status = dd_boot_check_pair(conv->rank, rank, conv->size, size);
    if (status != DD_OK) {
        return status;
    }
    if (local_rank >= 0 && local_size >= 0) {
        status = dd_boot_check_pair(conv->local_rank, local_rank,
                                    conv->local_size, local_size);
        if (status != DD_OK) {
            return status;
        }
    } else {
        local_rank = local_size = -1; /* derived later from host names */
    }
    env->rank = rank;
    env->world_size = size;
    env->local_rank = local_rank;
    env->local_size = local_size;
    snprintf(env->source, sizeof(env->source), "%s", conv->name);
    for (int i = 0; i < 3 && conv->job_id[i]; i++) {
        const char *id = dd_boot_get(getenv_fn, arg, conv->job_id[i]);
        if (id != NULL) {
            snprintf(env->job_id, sizeof(env->job_id), "%s=%s", conv->job_id[i],
                     id);
            break;
        }
    }
    return DD_OK;
}

/* DREAMDDP_* and torchrun's generic variables must not contradict each other.
 */
static dd_status_t dd_boot_check_torchrun(const dd_boot_env_t *env,
                                          dd_getenv_fn_t getenv_fn, void *arg)
{
    int rank, size;

    if (dd_boot_parse(getenv_fn, arg, "RANK", 0, &rank) != DD_OK ||
        dd_boot_parse(getenv_fn, arg, "WORLD_SIZE", 1, &size) != DD_OK) {
        return DD_ERR_INVALID_CONFIG;
    }
    if (rank >= 0 && rank != env->rank) {
        return dd_error(
            DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
            "DREAMDDP_RANK=%d and RANK=%d disagree: unset one of them",
            env->rank, rank);
    }
    if (size >= 0 && size != env->world_size) {
        return dd_error(
            DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
            "DREAMDDP_WORLD_SIZE=%d and WORLD_SIZE=%d disagree: unset "
            "one of them",
            env->world_size, size);
    }
    return DD_OK;
}

static int dd_boot_convention_present(const dd_boot_convention_t *conv,
                                      dd_getenv_fn_t getenv_fn, void *arg)
{
    return dd_boot_get(getenv_fn, arg, conv->rank) != NULL ||
           dd_boot_get(getenv_fn, arg, conv->size) != NULL;
}

#define DD_BOOT_FOUND_PORT_BASE 29500
#define DD_BOOT_FOUND_PORT_SPAN 1000

/* The first IPv4 address, other than loopback, of an Open MPI contact URI
 * ("JOBID.VPID;tcp://198.18.0.1,10.0.0.2:PORT;tcp6://[...]:PORT"). */
static int dd_boot_uri_ipv4(const char *uri, char *addr, size_t size)
{
    const char *p = strstr(uri, ";tcp://");

    if (p == NULL) {
        return -1;
    }
    for (p += 7; *p != '\0' && *p != ';';) {
        size_t len = strcspn(p, ",:;");
        char cand[INET_ADDRSTRLEN];
        struct in_addr in;
        if (len < sizeof(cand)) {
            memcpy(cand, p, len);
            cand[len] = '\0';
            if (inet_pton(AF_INET, cand, &in) == 1 &&
                (ntohl(in.s_addr) >> 24) != 127 && len < size) {
                memcpy(addr, cand, len + 1);
                return 0;
            }
        }
        p += len;
        if (*p != ',') {
            break; /* the port, or the next URI */
        }
        p++;
    }
    return -1;
}

/* Slurm: rank 0 runs on the first host of the step (block distribution,
 * Slurm's default). */
static dd_status_t dd_boot_master_slurm(dd_getenv_fn_t getenv_fn, void *arg,
                                        dd_boot_env_t *env)
{
    const char *name = "SLURM_STEP_NODELIST";
    const char *list = dd_boot_get(getenv_fn, arg, name);

    if (list == NULL) {
        name = "SLURM_JOB_NODELIST";
        list = dd_boot_get(getenv_fn, arg, name);
    }
    if (list == NULL) {
        snprintf(env->master_hint, sizeof(env->master_hint),
                 "Slurm gives no node list (SLURM_STEP_NODELIST, "
                 "SLURM_JOB_NODELIST)");
        return DD_OK;
    }
    if (dd_boot_nodelist_host(list, 0, env->master_addr,
                              sizeof(env->master_addr)) != DD_OK) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "invalid value %s='%.200s': expected a Slurm host "
                        "list such as node[01-04],gpu7",
                        name, list);
    }
    snprintf(env->master_from, sizeof(env->master_from), "the first host of %s",
             name);
    return DD_OK;
}

/* Open MPI on several hosts: mpirun's host, where rank 0 runs when mpirun
 * is started on the allocation's first node (as batch jobs do). */
static void dd_boot_master_ompi(dd_getenv_fn_t getenv_fn, void *arg,
                                dd_boot_env_t *env)
{
    const char *uri = dd_boot_get(getenv_fn, arg, "OMPI_MCA_orte_hnp_uri");

    if (uri != NULL && dd_boot_uri_ipv4(uri, env->master_addr,
                                        sizeof(env->master_addr)) == 0) {
        snprintf(env->master_from, sizeof(env->master_from),
                 "mpirun's host (OMPI_MCA_orte_hnp_uri)");
        env->master_check_local = 1;
        return;
    }
    snprintf(env->master_hint, sizeof(env->master_hint),
             "Open MPI puts the ranks on several hosts and "
             "OMPI_MCA_orte_hnp_uri gives no IPv4 address of mpirun's host "
             "(pass one with mpirun -x DREAMDDP_MASTER_ADDR=HOST)");
}

/* Every rank on one host, as the launcher says: its local size is the
 * world, or Open MPI counts one node. */
static int dd_boot_one_host(const dd_boot_env_t *env, dd_getenv_fn_t getenv_fn,
                            void *arg)
{
    int nodes;

    if (env->local_size > 0 && env->local_size == env->world_size) {
        return 1;
    }
    return strcmp(env->source, "Open MPI") == 0 &&
           dd_boot_parse(getenv_fn, arg, "OMPI_MCA_orte_num_nodes", 1,
                         &nodes) == DD_OK &&
           nodes == 1;
}

/* A port from the job id (and Slurm's step), the same on every rank. */
static int dd_boot_found_port(const dd_boot_env_t *env,
                              dd_getenv_fn_t getenv_fn, void *arg)
{
    const char *step = dd_boot_get(getenv_fn, arg, "SLURM_STEP_ID");
    uint32_t h = 2166136261u; /* FNV-1a */

    if (env->job_id[0] == '\0') {
        return -1;
    }
    for (const char *p = env->job_id; *p; p++) {
        h = (h ^ (unsigned char)*p) * 16777619u;
    }
    for (const char *p = step ? step : ""; *p; p++) {
        h = (h ^ (unsigned char)*p) * 16777619u;
    }
    return DD_BOOT_FOUND_PORT_BASE + (int)(h % DD_BOOT_FOUND_PORT_SPAN);
}

static const char *const dd_boot_pmix_uris[] = {
    "PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
    "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"};

/* A PMIx server gives the address when the launcher runs one (a
 * namespace, a rank and a server URI in the environment), its rank is
 * this rank, and the library is built with PMIx. Anything short of that
 * is said in the hint, for when nothing else finds the address. */
static int dd_boot_pmix_usable(dd_getenv_fn_t getenv_fn, void *arg,
                               dd_boot_env_t *env)
{
    const char *nspace = dd_boot_get(getenv_fn, arg, "PMIX_NAMESPACE");
    const char *uri = NULL;
    int rank;

    for (size_t i = 0; i < 5 && uri == NULL; i++) {
        uri = dd_boot_get(getenv_fn, arg, dd_boot_pmix_uris[i]);
    }
    if (nspace == NULL || uri == NULL ||
        dd_boot_parse(getenv_fn, arg, "PMIX_RANK", 0, &rank) != DD_OK ||
        rank < 0) {
        return 0;
    }
    if (rank != env->rank) {
        snprintf(env->pmix_note, sizeof(env->pmix_note),
                 "PMIx is not used: PMIX_RANK=%d is not rank %d (%s)", rank,
                 env->rank, env->source);
        return 0;
    }
    if (!dd_boot_pmix_built()) {
        snprintf(env->pmix_note, sizeof(env->pmix_note),
                 "the launcher runs a PMIx server, but this dreamddp is "
                 "built without PMIx (configure --with-pmix, Debian's "
                 "libpmix-dev)");
        return 0;
    }
    if (env->job_id[0] == '\0') {
        snprintf(env->job_id, sizeof(env->job_id), "PMIX_NAMESPACE=%s", nspace);
    }
    return 1;
}

/* Finds rank 0's address from the launcher when no variable gives it. */
static dd_status_t dd_boot_master_found(dd_getenv_fn_t getenv_fn, void *arg,
                                        dd_boot_env_t *env)
{
    dd_status_t status = DD_OK;

    if (env->world_size <= 1 || strcmp(env->source, "none") == 0) {
        return DD_OK;
    }
    /* PMIx first: it knows where rank 0 is, and rank 0 publishes the port
     * its store got, so two jobs on one host never meet. */
    if (dd_boot_pmix_usable(getenv_fn, arg, env)) {
        env->master_pmix = 1;
        snprintf(env->master_from, sizeof(env->master_from),
                 "rank 0 through PMIx");
        return DD_OK;
    }
    if (dd_boot_one_host(env, getenv_fn, arg)) {
        snprintf(env->master_addr, sizeof(env->master_addr), "127.0.0.1");
        snprintf(env->master_from, sizeof(env->master_from),
                 "every rank on one host (%s)", env->source);
    } else if (strcmp(env->source, "Slurm") == 0) {
        status = dd_boot_master_slurm(getenv_fn, arg, env);
    } else if (strcmp(env->source, "Open MPI") == 0) {
        dd_boot_master_ompi(getenv_fn, arg, env);
    }
    if (status == DD_OK && env->master_addr[0] != '\0' &&
        env->master_port < 0) {
        env->master_port = dd_boot_found_port(env, getenv_fn, arg);
    }
    if (status == DD_OK && env->master_addr[0] == '\0' &&
        env->pmix_note[0] != '\0') {
        size_t n = strlen(env->master_hint);
        snprintf(env->master_hint + n, sizeof(env->master_hint) - n, "%s%s",
                 n ? "; " : "", env->pmix_note);
    }
    return status;
}

static dd_status_t dd_boot_master(const dd_boot_opts_t *opts,
                                  dd_getenv_fn_t getenv_fn, void *arg,
                                  dd_boot_env_t *env)
{
    const char *addr = opts->master_addr;
    const char *from = "DREAMDDP_MASTER_ADDR";
    int port = opts->master_port;

    if (addr == NULL) {
        addr = dd_boot_get(getenv_fn, arg, "MASTER_ADDR");
        from = "MASTER_ADDR";
    }
    if (port < 0) {
        int p;
        if (dd_boot_parse(getenv_fn, arg, "MASTER_PORT", 1, &p) != DD_OK) {
            return DD_ERR_INVALID_CONFIG;
        }
        if (p > 65534) {
            return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                            "invalid value MASTER_PORT=%d: expected a port "
                            "from 1 to 65534 (dreamddp's store takes the "
                            "next one)",
                            p);
        }
        /* torch.distributed's store holds MASTER_PORT itself: ours takes
         * the next port, so that both run in one job. */
        port = p < 0 ? p : p + 1;
    }
    if (addr != NULL && strlen(addr) >= sizeof(env->master_addr)) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "master address '%.40s...' is too long", addr);
    }
    env->master_port = port;
    if (addr == NULL) {
        return dd_boot_master_found(getenv_fn, arg, env);
    }
    snprintf(env->master_addr, sizeof(env->master_addr), "%s", addr);
    snprintf(env->master_from, sizeof(env->master_from), "%s", from);
    return DD_OK;
}

/* A launcher's per-job secret, when it has one: Open MPI's mpirun draws a
 * random key for every job (for its transports) and hands it only to the
 * job's processes, unlike a job id, which anyone can learn or guess. */
static void dd_boot_secret(dd_getenv_fn_t getenv_fn, void *arg,
                           dd_boot_env_t *env)
{
    static const char *const names[] = {
        "OMPI_MCA_orte_precondition_transports",
        "OMPI_MCA_opal_precondition_transports"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *s = dd_boot_get(getenv_fn, arg, names[i]);
        if (s != NULL && strlen(s) >= 16) {
            snprintf(env->job_secret, sizeof(env->job_secret), "%s=%s",
                     names[i], s);
            return;
        }
    }
}

dd_status_t dd_boot_env_detect(const dd_boot_opts_t *opts,
                               dd_getenv_fn_t getenv_fn, void *arg,
                               dd_boot_env_t *env_p)
{
    dd_boot_env_t env;
    dd_status_t status = DD_OK;
    size_t n_conv =
        sizeof(dd_boot_conventions) / sizeof(dd_boot_conventions[0]);
    size_t i;

    memset(&env, 0, sizeof(env));
    if (opts->rank >= 0 || opts->world_size >= 0) {
        status = dd_boot_from_dd(opts, &env);
        if (status == DD_OK) {
            status = dd_boot_check_torchrun(&env, getenv_fn, arg);
        }
    } else {
        for (i = 0; i < n_conv; i++) {
            if (dd_boot_convention_present(&dd_boot_conventions[i], getenv_fn,
                                           arg)) {
                status =
                    dd_boot_from(&dd_boot_conventions[i], getenv_fn, arg, &env);
                break;
            }
        }
        if (i == n_conv) {
            env.rank = 0;
            env.world_size = 1;
            env.local_rank = 0;
            env.local_size = 1;
            snprintf(env.source, sizeof(env.source), "none");
        }
    }
    if (status == DD_OK && opts->local_rank >= 0) {
        env.local_rank = opts->local_rank; /* DD_LOCAL_* refine any launcher */
    }
    if (status == DD_OK && opts->local_size >= 0) {
        env.local_size = opts->local_size;
    }
    if (status == DD_OK && env.local_rank >= 0 && env.local_size >= 0 &&
        env.local_rank >= env.local_size) {
        status = dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                          "local rank %d and local size %d disagree (from %s "
                          "and DREAMDDP_LOCAL_RANK/DREAMDDP_LOCAL_SIZE)",
                          env.local_rank, env.local_size, env.source);
    }
    if (status == DD_OK) {
        status = dd_boot_master(opts, getenv_fn, arg, &env);
    }
    if (status != DD_OK) {
        return status;
    }
    dd_boot_secret(getenv_fn, arg, &env);
    *env_p = env;
    return DD_OK;
}

int dd_boot_env_guess_rank(dd_getenv_fn_t getenv_fn, void *arg)
{
    static const char *const names[] = {"DREAMDDP_RANK", "RANK",
                                        "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
                                        "PMI_RANK"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *s = dd_boot_get(getenv_fn, arg, names[i]);
        char *end;
        if (s == NULL) {
            continue;
        }
        long v = strtol(s, &end, 10);
        if (end != s && *end == '\0' && v >= 0 && v <= INT_MAX) {
            return (int)v;
        }
    }
    return -1;
}

dd_status_t dd_boot_role_resolve(const dd_boot_opts_t *opts, int role_override,
                                 int rank, int world_size, dd_role_t *role_p)
{
    int k = opts->num_aggregators;
    int asked = role_override >= 0 ? role_override : opts->role;
    const char *who = role_override >= 0 ? "dd_init's role" : "DREAMDDP_ROLE";

    if (k >= world_size) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "DREAMDDP_NUM_AGGREGATORS=%d leaves no worker among %d "
                        "ranks: expected 0 to %d",
                        k, world_size, world_size - 1);
    }
    if (k == 0) {
        *role_p = asked >= 0 ? (dd_role_t)asked : DD_ROLE_WORKER;
        return DD_OK;
    }
    dd_role_t by_count =
        rank >= world_size - k ? DD_ROLE_AGGREGATOR : DD_ROLE_WORKER;
    if (asked >= 0 && (dd_role_t)asked != by_count) {
        return dd_error(
            DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
            "%s=%s and DREAMDDP_NUM_AGGREGATORS=%d disagree: rank %d of "
            "%d is %s by the count",
            who, dd_role_names[asked], k, rank, world_size,
            by_count == DD_ROLE_AGGREGATOR ? "an aggregator" : "a worker");
    }
    *role_p = by_count;
    return DD_OK;
}
