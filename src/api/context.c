/*
 * dd_init and dd_finalize: parse the configuration once, find this rank's
 * place in the job, join the rendezvous store and agree on roles. Every
 * failure is reported where it is detected, with the facts a user needs.
 */
#include "api/context.h"
#include "api/elastic_file.h"
#include "api/net_agree.h"
#include "api/watch.h"
#include "boot/generation.h"
#include "boot/job_token.h"
#include "boot/pmix.h"
#include "boot/sock.h"
#include "core/log.h"
#include "core/status.h"
#include "sched/sched.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DD_DEFAULT_MASTER_PORT 29500

const dd_config_table_t *const dd_config_tables[] = {
    &dd_core_config_table,    &dd_boot_config_table,  &dd_topo_config_table,
    &dd_backend_config_table, &dd_sched_config_table, &dd_device_config_table};
const size_t dd_config_n_tables =
    sizeof(dd_config_tables) / sizeof(dd_config_tables[0]);

const char *dd_version_string(void)
{
    return PACKAGE_VERSION;
}

dd_status_t dd_config_print(FILE *stream, unsigned flags)
{
    return dd_config_print_tables(stream, dd_config_tables, dd_config_n_tables,
                                  flags, dd_config_getenv, NULL);
}

/* The options structs the context owns, one per component table (the
 * topology's are read by dd_topo_setup). */
static const struct {
    const dd_config_table_t *table;
    size_t offset;
} dd_context_opts[] = {
    {&dd_core_config_table, offsetof(struct dd_context, core)},
    {&dd_boot_config_table, offsetof(struct dd_context, boot)},
    {&dd_backend_config_table, offsetof(struct dd_context, backend)},
    {&dd_sched_config_table, offsetof(struct dd_context, sched_opts)},
    {&dd_device_config_table, offsetof(struct dd_context, device_opts)},
};
#define DD_CONTEXT_N_OPTS (sizeof(dd_context_opts) / sizeof(dd_context_opts[0]))

static void dd_context_release_opts(dd_context_h ctx, size_t n)
{
    while (n-- > 0) {
        dd_config_release(dd_context_opts[n].table,
                          (char *)ctx + dd_context_opts[n].offset);
    }
}

static dd_status_t dd_context_config(dd_context_h ctx)
{
    dd_status_t status = DD_OK;
    size_t i;

    dd_log_set_rank(dd_boot_env_guess_rank(dd_config_getenv, NULL));
    for (i = 0; i < DD_CONTEXT_N_OPTS && status == DD_OK; i++) {
        status = dd_config_load(dd_context_opts[i].table,
                                (char *)ctx + dd_context_opts[i].offset,
                                dd_config_getenv, NULL);
    }
    if (status != DD_OK) {
        dd_context_release_opts(ctx, i - 1);
        return status;
    }
    if (ctx->core.line_buffered) {
        /* On a pipe (ddrun's) stdout is fully buffered, and progress would
         * arrive at exit. With a NULL buffer glibc only changes the mode,
         * which is safe after output too; the flush keeps what is already
         * buffered in order. */
        fflush(stdout);
        setvbuf(stdout, NULL, _IOLBF, 0);
    }
    status = dd_boot_env_detect(&ctx->boot, dd_config_getenv, NULL, &ctx->env);
    if (status == DD_OK) {
        status = dd_log_configure(ctx->core.log_level, ctx->core.log_subsys,
                                  ctx->core.log_file, ctx->env.rank);
    }
    if (status != DD_OK) {
        dd_context_release_opts(ctx, DD_CONTEXT_N_OPTS);
    }
    return status;
}

/* The token: DREAMDDP_JOB_TOKEN or DREAMDDP_JOB_TOKEN_FILE, else the
 * launcher's per-job secret (mpirun's), else derived from the launcher's
 * job id, else from the store address and world size. A
 * derived one keeps different jobs apart but keeps no one out: anyone who
 * can reach the port can compute it, so rank 0 says so, once. From it:
 * *login_p, the store's login secret over TCP (the file store's directory
 * name else), and ctx->token_hash, the job's tag in messages. */
static dd_status_t dd_context_token(dd_context_h ctx, int port, int tcp,
                                    uint64_t *login_p)
{
    char fallback[512], *token;
    dd_status_t status = dd_boot_job_token(&ctx->boot, &token);
    const char *secret = token;

    if (status != DD_OK) {
        return status;
    }
    if (secret == NULL && ctx->env.job_secret[0] != '\0') {
        secret = ctx->env.job_secret;
    }
    if (secret == NULL && tcp && ctx->env.rank == 0 &&
        ctx->env.world_size > 1) {
        dd_log_warn(DD_SUBSYS_BOOT,
                    "no DREAMDDP_JOB_TOKEN or DREAMDDP_JOB_TOKEN_FILE: the "
                    "job token is derived from %s, which anyone can compute, "
                    "so the store on port %d is open to anyone who can reach "
                    "the port; ddrun makes a secret token, or set "
                    "DREAMDDP_JOB_TOKEN_FILE to a file of mode 0600",
                    ctx->env.job_id[0] ? "the launcher's job id"
                                       : "the store's address",
                    port);
    }
    if (secret == NULL && ctx->env.job_id[0] != '\0') {
        secret = ctx->env.job_id;
    }
    if (secret == NULL) {
        snprintf(fallback, sizeof(fallback), "%s:%d:%d", ctx->env.master_addr,
                 port, ctx->env.world_size);
        secret = fallback;
    }
    *login_p = tcp ? dd_store_token_hash(secret) : dd_store_token_name(secret);
    ctx->token_hash = dd_store_token_tag(secret);
    free(token);
    return DD_OK;
}

/* Rank 0 hosts the store at an address Open MPI gave for mpirun's host; a
 * rank 0 elsewhere would leave every other rank waiting for nothing. */
static dd_status_t dd_context_check_master(const dd_boot_env_t *env)
{
    if (env->rank != 0 || !env->master_check_local ||
        dd_sock_addr_is_local(env->master_addr) != 0) {
        return DD_OK;
    }
    return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                    "rank 0 is not on mpirun's host %s "
                    "(OMPI_MCA_orte_hnp_uri), where the other ranks will look "
                    "for the store; run mpirun -x DREAMDDP_MASTER_ADDR=HOST "
                    "with rank 0's host, or start mpirun on the first node",
                    env->master_addr);
}

/* Under a PMIx launcher: rank 0's store listens on DREAMDDP_MASTER_PORT
 * or any free port, and the address and port travel through PMIx. */
static dd_status_t dd_context_store_pmix(dd_context_h ctx)
{
    dd_boot_env_t *env = &ctx->env;
    int port = env->master_port < 0 ? 0 : env->master_port;
    uint64_t token;
    dd_status_t status = dd_context_token(ctx, port, 1, &token);

    if (status != DD_OK) {
        return status;
    }
    if (env->rank == 0) {
        /* Every interface: the address rank 0 publishes is chosen after
         * the store starts. */
        double login_s = ctx->core.timeout_s < DD_STORE_LOGIN_S
                             ? ctx->core.timeout_s
                             : DD_STORE_LOGIN_S;
        dd_store_server_params_t params = {.addr = NULL,
                                           .port = port,
                                           .token_hash = token,
                                           .world_size = env->world_size,
                                           .login_s = login_s,
                                           .clock_skew_us =
                                               ctx->sched_opts.clock_skew_us};
        status = dd_store_server_start(&params, &ctx->server);
        if (status != DD_OK) {
            return status;
        }
        port = dd_store_server_port(ctx->server);
    }
    status =
        dd_boot_pmix_exchange(env->rank, ctx->core.timeout_s, env->master_addr,
                              sizeof(env->master_addr), &port);
    if (status != DD_OK) {
        return status;
    }
    env->master_port = port;
    dd_log_info(DD_SUBSYS_BOOT, "store at %s:%d, from %s", env->master_addr,
                port, env->master_from);
    return dd_store_tcp_connect(env->master_addr, port, token, env->rank,
                                env->world_size, ctx->core.timeout_s,
                                &ctx->store);
}

static dd_status_t dd_context_store_tcp(dd_context_h ctx)
{
    const dd_boot_env_t *env = &ctx->env;
    const char *addr = env->master_addr;
    int port = env->master_port;
    dd_status_t status;

    if (env->master_pmix) {
        return dd_context_store_pmix(ctx);
    }
    if (addr[0] == '\0' && env->world_size > 1) {
        return dd_error(
            DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
            "rank %d of %d: no store address%s%s; set DREAMDDP_MASTER_ADDR "
            "(or MASTER_ADDR) to rank 0's host, or DREAMDDP_STORE=file:"
            "DIR",
            env->rank, env->world_size, env->master_hint[0] ? ": " : "",
            env->master_hint);
    }
    if ((status = dd_context_check_master(env)) != DD_OK) {
        return status;
    }
    char why[128];
    if (addr[0] != '\0' && dd_sock_resolvable(addr, why, sizeof(why)) != 0) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "the store's address '%s' (from %s) names no host "
                        "(%s); set DREAMDDP_MASTER_ADDR (or MASTER_ADDR) to "
                        "rank 0's host name or address",
                        addr,
                        env->master_from[0] ? env->master_from
                                            : "DREAMDDP_MASTER_ADDR",
                        why);
    }
    if (addr[0] == '\0') {
        addr = "127.0.0.1"; /* a single rank: a private store, any port */
        port = port < 0 ? 0 : port;
    } else if (port < 0) {
        port = DD_DEFAULT_MASTER_PORT;
    }
    if (env->world_size > 1) {
        dd_log_info(DD_SUBSYS_BOOT, "store at %s:%d, from %s", addr, port,
                    env->master_from);
    }
    uint64_t token;
    if ((status = dd_context_token(ctx, port, 1, &token)) != DD_OK) {
        return status;
    }
    if (env->rank == 0) {
        /* Only where the other ranks look: rank 0's address, which is a
         * loopback address for a job on one host. */
        double login_s = ctx->core.timeout_s < DD_STORE_LOGIN_S
                             ? ctx->core.timeout_s
                             : DD_STORE_LOGIN_S;
        dd_store_server_params_t params = {
            .addr = addr,
            .one_host =
                env->local_size >= 0 && env->local_size == env->world_size,
            .port = port,
            .token_hash = token,
            .world_size = env->world_size,
            .login_s = login_s,
            .clock_skew_us = ctx->sched_opts.clock_skew_us};
        status = dd_store_server_start(&params, &ctx->server);
        if (status != DD_OK) {
            return status;
        }
        port = dd_store_server_port(ctx->server);
    }
    return dd_store_tcp_connect(addr, port, token, env->rank, env->world_size,
                                ctx->core.timeout_s, &ctx->store);
}

static dd_status_t dd_context_store(dd_context_h ctx)
{
    const char *store = ctx->boot.store;

    if (strcmp(store, "tcp") == 0) {
        return dd_context_store_tcp(ctx);
    }
    if (strncmp(store, "file:", 5) == 0 && store[5] != '\0') {
        uint64_t name;
        dd_status_t status = dd_context_token(ctx, 0, 0, &name);
        if (status != DD_OK) {
            return status;
        }
        return dd_store_file_open(store + 5, name, ctx->env.rank,
                                  ctx->env.world_size, ctx->core.timeout_s,
                                  &ctx->store);
    }
    return dd_error(
        DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
        "invalid value DREAMDDP_STORE='%s': expected tcp or file:DIR", store);
}

/* What identifies a host: its name and network namespace, since emulated
 * hosts share a name but not a network. */
static void dd_context_host_id(dd_context_h ctx, char *id, size_t size)
{
    char host[256] = "", ns[64] = "";

    memset(id, 0, size);
    if (ctx->boot.host_id != NULL) {
        snprintf(id, size, "%s", ctx->boot.host_id);
        return;
    }
    gethostname(host, sizeof(host) - 1);
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    ns[n > 0 ? n : 0] = '\0';
    snprintf(id, size, "%s|%s", host, ns);
}

/* Fills in the local rank and size the launcher did not give. */
static dd_status_t dd_context_locality(dd_context_h ctx)
{
    enum { ID = 320 };
    dd_boot_env_t *env = &ctx->env;
    char mine[ID];

    if (env->local_rank >= 0 && env->local_size >= 0) {
        return DD_OK;
    }
    char *all = malloc((size_t)env->world_size * ID);
    if (all == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "no memory for the ranks' host identities");
    }
    dd_context_host_id(ctx, mine, sizeof(mine));
    dd_status_t status =
        dd_store_allgather(ctx->store, "host", mine, sizeof(mine), all);
    if (status == DD_OK) {
        int below = 0, same = 0;
        for (int r = 0; r < env->world_size; r++) {
            if (memcmp(all + (size_t)r * ID, mine, ID) == 0) {
                same++;
                below += r < env->rank;
            }
        }
        env->local_rank = env->local_rank >= 0 ? env->local_rank : below;
        env->local_size = env->local_size >= 0 ? env->local_size : same;
    }
    free(all);
    return status;
}

/* Every rank learns every rank's role; all must count the same
 * aggregators. */
static dd_status_t dd_context_roles(dd_context_h ctx, int role_override)
{
    int world = ctx->env.world_size;
    int32_t mine[3], *all;
    dd_status_t status;

    status = dd_boot_role_resolve(&ctx->boot, role_override, ctx->env.rank,
                                  world, &ctx->role);
    if (status != DD_OK) {
        return status;
    }
    all = malloc(sizeof(mine) * (size_t)world);
    ctx->roles = malloc(sizeof(dd_role_t) * (size_t)world);
    if (all == NULL || ctx->roles == NULL) {
        free(all);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "no memory for the ranks' roles");
    }
    mine[0] = (int32_t)ctx->role;
    mine[1] = ctx->boot.num_aggregators;
    /* The aggregators must know whether the hierarchical route is on, which
     * changes who pushes to them: every rank's DREAMDDP_ROUTE says. */
    mine[2] = ctx->sched_opts.route == DD_ROUTE_HIERARCHICAL;
    status = dd_store_allgather(ctx->store, "role", mine, sizeof(mine), all);
    ctx->n_workers = 0;
    for (int r = 0; status == DD_OK && r < world; r++) {
        if (all[3 * r + 1] != mine[1]) {
            status =
                dd_error(DD_ERR_MISMATCH, DD_SUBSYS_BOOT,
                         "ranks disagree on DREAMDDP_NUM_AGGREGATORS: rank %d "
                         "has %d, rank %d has %d",
                         r, all[3 * r + 1], ctx->env.rank, mine[1]);
        } else if (all[3 * r + 2] != mine[2]) {
            status = dd_error(DD_ERR_MISMATCH, DD_SUBSYS_BOOT,
                              "ranks disagree on DREAMDDP_ROUTE=hierarchical: "
                              "rank %d has %s, rank %d has %s",
                              r, all[3 * r + 2] ? "it" : "another route",
                              ctx->env.rank, mine[2] ? "it" : "another route");
        }
        ctx->roles[r] = (dd_role_t)all[3 * r];
        ctx->n_workers += ctx->roles[r] == DD_ROLE_WORKER;
    }
    if (status == DD_OK && ctx->n_workers == 0) {
        status =
            dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                     "every rank is an aggregator (DREAMDDP_ROLE): a job needs "
                     "at least one worker");
    }
    free(all);
    return status;
}

int dd_context_worker_index(dd_context_h ctx, int rank)
{
    return dd_job_worker_index(&ctx->job, rank);
}

dd_backends_t *dd_context_coll_backends(dd_context_h ctx)
{
    return ctx->worker_backends != NULL ? ctx->worker_backends : ctx->backends;
}

/* With aggregators in the job, the workers start their own instance of each
 * module, so that collectives among workers never wait for aggregators. */
static dd_status_t dd_context_worker_group(dd_context_h ctx)
{
    ctx->worker_ranks = malloc(sizeof(int) * (size_t)ctx->n_workers);
    if (ctx->worker_ranks == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "no memory for the workers' ranks");
    }
    int n = 0;
    for (int r = 0; r < ctx->env.world_size; r++) {
        if (ctx->roles[r] == DD_ROLE_WORKER) {
            ctx->worker_ranks[n++] = r;
        }
    }
    ctx->job.worker_ranks = ctx->worker_ranks;
    if (n == ctx->env.world_size || ctx->role != DD_ROLE_WORKER) {
        return DD_OK;
    }
    return dd_backends_load_group(ctx->backends, "workers",
                                  dd_context_worker_index(ctx, ctx->env.rank),
                                  n, &ctx->worker_backends);
}

/* The job as the layers below see it, once the roles are agreed. */
static void dd_context_job(dd_context_h ctx)
{
    ctx->job = (dd_job_t){.rank = ctx->env.rank,
                          .world_size = ctx->env.world_size,
                          .local_rank = ctx->env.local_rank,
                          .local_size = ctx->env.local_size,
                          .role = ctx->role,
                          .roles = ctx->roles,
                          .n_workers = ctx->n_workers,
                          .worker_ranks = ctx->worker_ranks,
                          .timeout_s = ctx->core.timeout_s,
                          .token_hash = ctx->token_hash,
                          .store = ctx->store,
                          .abort = &ctx->abort};
}

static dd_status_t dd_context_backends(dd_context_h ctx)
{
    dd_context_job(ctx);
    ctx->backends_env = (dd_backends_env_t){
        .opts = &ctx->backend,
        .store = ctx->store,
        .rank = ctx->env.rank,
        .world_size = ctx->env.world_size,
        .local_rank = ctx->env.local_rank,
        .local_size = ctx->env.local_size,
        .timeout_s = ctx->core.timeout_s,
        .ifname = ctx->net.name[0] != '\0' ? ctx->net.name : NULL,
        .rdma = dd_topo_choice_rdma(&ctx->net),
        .rdma_port = ctx->net.rdma_port,
        .streams = ctx->net.streams,
        .needs_p2p = ctx->n_workers < ctx->env.world_size,
        .device_memory = ctx->device != NULL};
    return dd_backends_load(&ctx->backends_env, &ctx->backends);
}

/* The device module DREAMDDP_DEVICE names, found where the backends are. */
static dd_status_t dd_context_device(dd_context_h ctx)
{
    char why[512];

    if (ctx->device_opts.staging_bytes < 64 ||
        ctx->device_opts.staging_bytes % 8 != 0) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_SCHED,
                        "invalid value DREAMDDP_STAGING_BYTES=%zu: expected a "
                        "multiple of 8 bytes, at least 64",
                        ctx->device_opts.staging_bytes);
    }
    return dd_device_load(&ctx->device_opts, ctx->backend.path,
                          ctx->core.log_level, &ctx->device, why, sizeof(why));
}

/*
 * DREAMDDP_ROUTE=hierarchical: which workers share a host (DREAMDDP_HOST_ID,
 * else the host name and network namespace), and the job the aggregators
 * serve, whose workers are each host's lowest worker rank, the leader that
 * pushes the host's sum. Every rank takes part: the aggregators too must
 * know whom they hear from.
 */
static dd_status_t dd_context_hosts(dd_context_h ctx)
{
    enum { ID = 320 };
    int world = ctx->env.world_size;
    char mine[ID];

    if (ctx->sched_opts.route != DD_ROUTE_HIERARCHICAL) {
        return DD_OK;
    }
    char *all = malloc((size_t)world * ID);
    ctx->host_of = malloc(sizeof(int) * (size_t)world);
    ctx->leader_ranks = malloc(sizeof(int) * (size_t)ctx->n_workers);
    if (all == NULL || ctx->host_of == NULL || ctx->leader_ranks == NULL) {
        free(all);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "no memory for the ranks' hosts");
    }
    dd_context_host_id(ctx, mine, sizeof(mine));
    dd_status_t status =
        dd_store_allgather(ctx->store, "hier_host", mine, sizeof(mine), all);
    int n_leaders = 0;
    for (int r = 0; status == DD_OK && r < world; r++) {
        ctx->host_of[r] = -1;
        for (int q = 0; q < world && ctx->host_of[r] < 0; q++) {
            if (ctx->roles[q] == DD_ROLE_WORKER &&
                memcmp(all + (size_t)q * ID, all + (size_t)r * ID, ID) == 0) {
                ctx->host_of[r] = q;
            }
        }
        if (ctx->host_of[r] == r) {
            ctx->leader_ranks[n_leaders++] = r;
        }
    }
    free(all);
    ctx->job.host_of = ctx->host_of;
    ctx->leader_job = ctx->job;
    ctx->leader_job.n_workers = n_leaders;
    ctx->leader_job.worker_ranks = ctx->leader_ranks;
    int me = dd_job_worker_index(&ctx->leader_job, ctx->env.rank);
    if (status != DD_OK || ctx->n_workers < world || me < 0 || n_leaders < 2) {
        return status;
    }
    /* No aggregators: the leaders' sums meet in an allreduce of their own,
     * which only they join. */
    return dd_backends_load_group(ctx->backends, "leaders", me, n_leaders,
                                  &ctx->leader_backends);
}

/* The scheduler, and aggregation's environment when the job has
 * aggregators: over the point-to-point backend that scores best. */
static dd_status_t dd_context_sched(dd_context_h ctx)
{
    dd_sched_env_t env = {.job = &ctx->job,
                          .opts = &ctx->sched_opts,
                          .coll = dd_context_coll_backends(ctx),
                          .device = ctx->device,
                          .device_opts = &ctx->device_opts,
                          .elastic = ctx->boot.elastic,
                          .elastic_gen = ctx->boot.elastic_gen};

    dd_status_t status = dd_context_hosts(ctx);
    if (status != DD_OK) {
        return status;
    }
    env.leaders = ctx->leader_backends;
    ctx->agg_env = (dd_agg_env_t){
        .job = ctx->host_of != NULL ? &ctx->leader_job : &ctx->job,
        .chunk_bytes = ctx->sched_opts.chunk_bytes,
        .avg_over = ctx->n_workers,
        .survive = ctx->sched_opts.agg_loss == DD_AGG_LOSS_SURVIVE &&
                   ctx->host_of == NULL,
        .lost_after_s = ctx->sched_opts.agg_lost_after_s};
    if (ctx->n_workers < ctx->env.world_size) {
        dd_backend_ref_t ref;
        if (dd_backends_find(ctx->backends, DD_BACKEND_OP_SEND, DD_MEM_HOST,
                             4u << 20, &ref)) {
            ctx->agg_env.ops = ref.ops;
            ctx->agg_env.backend = ref.instance;
        }
        env.agg = &ctx->agg_env;
        __atomic_store_n(&ctx->agg_env_ready, 1, __ATOMIC_RELEASE);
    }
    return dd_sched_create(&env, &ctx->sched);
}

/* With DREAMDDP_ELASTIC=yes, checks the settings and the worker count
 * against DREAMDDP_ELASTIC_MIN, makes the elastic state and refuses a
 * dropped rank; nothing otherwise. After the roles are agreed. */
static dd_status_t dd_context_elastic(dd_context_h ctx)
{
    if (!ctx->boot.elastic) {
        return DD_OK;
    }
    if (ctx->boot.elastic_dir == NULL || ctx->boot.elastic_dir[0] == '\0') {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "DREAMDDP_ELASTIC=yes needs DREAMDDP_ELASTIC_DIR, a "
                        "directory for the commits (ddrun --elastic makes "
                        "one)");
    }
    dd_status_t status = dd_elastic_dir_check(ctx->boot.elastic_dir);
    if (status != DD_OK) {
        return status;
    }
    if (ctx->role == DD_ROLE_WORKER && ctx->n_workers < ctx->boot.elastic_min) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "the job has %d worker%s, fewer than "
                        "DREAMDDP_ELASTIC_MIN=%d: it stops",
                        ctx->n_workers, ctx->n_workers == 1 ? "" : "s",
                        ctx->boot.elastic_min);
    }
    ctx->elastic = calloc(1, sizeof(*ctx->elastic));
    if (ctx->elastic == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "no memory for the elastic state");
    }
    return dd_boot_generation_check(&ctx->boot, ctx->env.rank);
}

static void dd_context_free(dd_context_h ctx)
{
    int aborted = dd_abort_raised(&ctx->abort);

    dd_elastic_state_free(ctx->elastic);
    ctx->elastic = NULL;
    dd_sched_destroy(ctx->sched);
    if (!aborted) {
        /* After a lost peer, the backends may still run an operation that
         * waits for it (until their own timeout, in their threads): they
         * are left to the process's exit rather than waited for. */
        dd_device_unload(ctx->device);
        dd_backends_unload(ctx->leader_backends);
        dd_backends_unload(ctx->worker_backends);
        dd_backends_unload(ctx->backends);
    }
    dd_watch_leave(ctx);
    if (aborted && ctx->server != NULL) {
        dd_watch_linger(ctx);
    }
    dd_watch_stop(ctx);
    dd_store_close(ctx->store);
    if (ctx->server != NULL) {
        /* After an abort the others have read why (dd_watch_linger); a
         * frozen rank would never leave. */
        dd_store_server_stop(ctx->server, aborted
                                              ? 0.25 * dd_watch_ctx_period(ctx)
                                              : ctx->core.timeout_s);
    }
    dd_abort_destroy(&ctx->abort);
    free(ctx->roles);
    free(ctx->worker_ranks);
    free(ctx->host_of);
    free(ctx->leader_ranks);
    dd_context_release_opts(ctx, DD_CONTEXT_N_OPTS);
    free(ctx);
}

/* A peer that dies while this rank writes to it must be an error naming
 * it, never a silent death by SIGPIPE: our own sockets send with
 * MSG_NOSIGNAL, but the backends' libraries (Gloo's and UCX's TCP
 * transports) write without it. So SIGPIPE is ignored, unless the
 * application has its own handler, which is left alone. */
static void dd_context_ignore_sigpipe(void)
{
    struct sigaction old;

    if (sigaction(SIGPIPE, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
        old.sa_handler == SIG_DFL) {
        signal(SIGPIPE, SIG_IGN);
    }
}

dd_status_t dd_init(const dd_init_params_t *params, dd_context_h *ctx_p)
{
    int role_override = -1;
    dd_status_t status;

    dd_last_error_clear();
    if (ctx_p == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_CORE,
                        "dd_init: ctx_p is NULL");
    }
    if (params != NULL && (params->field_mask & DD_INIT_FIELD_ROLE)) {
        if (params->role != DD_ROLE_WORKER &&
            params->role != DD_ROLE_AGGREGATOR) {
            return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_CORE,
                            "dd_init: invalid role %d", (int)params->role);
        }
        role_override = (int)params->role;
    }
    dd_context_h ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_CORE, "dd_init: no memory");
    }
    dd_context_ignore_sigpipe();
    status = dd_context_config(ctx);
    if (status != DD_OK) {
        free(ctx);
        return status;
    }
    dd_abort_init(&ctx->abort);
    if (ctx->env.rank == 0) {
        dd_config_warn_unknown(dd_config_tables, dd_config_n_tables, environ);
    }
    if ((status = dd_context_store(ctx)) != DD_OK ||
        (status = dd_watch_start(ctx)) != DD_OK ||
        (status = dd_context_locality(ctx)) != DD_OK ||
        (status = dd_context_roles(ctx, role_override)) != DD_OK ||
        (status = dd_context_elastic(ctx)) != DD_OK ||
        (status = dd_net_setup(ctx->store, ctx->env.local_rank,
                               ctx->env.local_size, &ctx->net)) != DD_OK ||
        (status = dd_context_device(ctx)) != DD_OK ||
        (status = dd_context_backends(ctx)) != DD_OK ||
        (status = dd_context_worker_group(ctx)) != DD_OK ||
        (status = dd_context_sched(ctx)) != DD_OK ||
        (status = dd_store_barrier(ctx->store, "init")) != DD_OK) {
        status = dd_watch_fault(ctx, status);
        dd_context_free(ctx);
        return status;
    }
    dd_log_info(DD_SUBSYS_BOOT,
                "rank %d of %d (local %d of %d, from %s), %s, store %s",
                ctx->env.rank, ctx->env.world_size, ctx->env.local_rank,
                ctx->env.local_size, ctx->env.source, dd_role_names[ctx->role],
                ctx->store->where);
    *ctx_p = ctx;
    return DD_OK;
}

dd_status_t dd_finalize(dd_context_h ctx)
{
    if (ctx == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_CORE,
                        "dd_finalize: ctx is NULL");
    }
    /* First, so that a worker still waiting in a call this one never
     * makes learns it within a watch period (watch.c). */
    dd_watch_left(ctx, ctx->sched != NULL ? ctx->sched->step : 0);
    dd_sched_quiesce(ctx->sched);
    /* After a lost peer the barrier would wait for it: the reason is
     * the answer. A dropped aggregator leaves as it is: the others do not
     * wait for it, and it would wait for workers still training, then
     * take their silence for a fault and stop them. */
    dd_status_t status = DD_OK;
    if (dd_abort_raised(&ctx->abort)) {
        status = dd_abort_error(&ctx->abort, DD_SUBSYS_CORE);
    } else if (!dd_context_agg_dropped(ctx)) {
        status = dd_store_barrier(ctx->store, "finalize");
    }
    status = dd_watch_dropped(ctx, dd_watch_fault(ctx, status));
    /* Leaving may fail too once the store's host is gone (it exits as
     * soon as the others read the job's reason): the reason stays the
     * message. */
    char why[1024];
    snprintf(why, sizeof(why), "%s", status != DD_OK ? dd_last_error() : "");
    dd_context_free(ctx);
    dd_log_close();
    if (status != DD_OK) {
        dd_last_error_set(why);
    }
    return status;
}

int dd_rank(dd_context_h ctx)
{
    return ctx->env.rank;
}

int dd_world_size(dd_context_h ctx)
{
    return ctx->env.world_size;
}

int dd_local_rank(dd_context_h ctx)
{
    return ctx->env.local_rank;
}

int dd_local_size(dd_context_h ctx)
{
    return ctx->env.local_size;
}

dd_role_t dd_role(dd_context_h ctx)
{
    return ctx->role;
}

dd_role_t dd_rank_role(dd_context_h ctx, int rank)
{
    if (rank < 0 || rank >= ctx->env.world_size) {
        return DD_ROLE_WORKER;
    }
    return ctx->roles[rank];
}

int dd_num_workers(dd_context_h ctx)
{
    return ctx->n_workers;
}

dd_status_t dd_barrier(dd_context_h ctx)
{
    dd_watch_call_begin(ctx, "dd_barrier");
    return dd_watch_call_end(ctx, dd_store_barrier(ctx->store, "user"));
}
