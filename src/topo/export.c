/*
 * The choice leaves the topology module here: into the environment that
 * backends read (never overriding what the user set), and into dd_init
 * through dd_topo_setup. The choice and its reason are logged once.
 */
#include "topo/export.h"
#include "core/log.h"
#include "topo/agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dd_topo_backend_env(const dd_topo_choice_t *choice,
                        dd_topo_env_t env[DD_TOPO_ENV_MAX])
{
    int rdma =
        choice->rdma[0] != '\0' && (choice->kind == DD_TOPO_KIND_INFINIBAND ||
                                    choice->kind == DD_TOPO_KIND_ROCE);
    int n = 0;

    env[n].name = "UCX_NET_DEVICES";
    if (rdma) {
        snprintf(env[n++].value, sizeof(env[0].value), "%s:%d", choice->rdma,
                 choice->rdma_port);
    } else {
        snprintf(env[n++].value, sizeof(env[0].value), "%s", choice->name);
    }
    env[n].name = "GLOO_SOCKET_IFNAME";
    snprintf(env[n++].value, sizeof(env[0].value), "%s", choice->name);
    env[n].name = "NCCL_SOCKET_IFNAME";
    snprintf(env[n++].value, sizeof(env[0].value), "=%s", choice->name);
    if (rdma) {
        env[n].name = "NCCL_IB_HCA";
        snprintf(env[n++].value, sizeof(env[0].value), "=%s:%d", choice->rdma,
                 choice->rdma_port);
    }
    return n;
}

dd_status_t dd_topo_export(const dd_topo_choice_t *choice)
{
    dd_topo_env_t env[DD_TOPO_ENV_MAX];
    int n = dd_topo_backend_env(choice, env);

    for (int i = 0; i < n; i++) {
        const char *user = getenv(env[i].name);
        if (user != NULL && user[0] != '\0') {
            dd_log_debug(DD_SUBSYS_TOPO, "%s=%s kept as the user set it",
                         env[i].name, user);
            continue;
        }
        if (setenv(env[i].name, env[i].value, 1) != 0) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_TOPO,
                            "cannot set %s: %m", env[i].name);
        }
        dd_log_debug(DD_SUBSYS_TOPO, "set %s=%s", env[i].name, env[i].value);
    }
    return DD_OK;
}

static dd_status_t dd_topo_setup_local(const dd_topo_opts_t *opts,
                                       int local_rank, int local_size,
                                       dd_topo_t **topo_p,
                                       dd_topo_cand_t **cands_p,
                                       dd_topo_choice_t *choice)
{
    dd_status_t status = dd_topo_probe(opts, topo_p);

    if (status != DD_OK) {
        return status;
    }
    dd_log_info(DD_SUBSYS_TOPO, "topology from %s", (*topo_p)->source);
    *cands_p = calloc((size_t)(*topo_p)->n_nics + 1, sizeof(**cands_p));
    if (*cands_p == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    int gpu =
        dd_topo_rank_gpu(*topo_p, local_rank, getenv("CUDA_VISIBLE_DEVICES"));
    return dd_topo_choose(*topo_p, opts, gpu, local_rank, local_size, *cands_p,
                          choice);
}

dd_status_t dd_topo_setup(dd_store_t *store, int local_rank, int local_size,
                          dd_topo_choice_t *choice_p)
{
    dd_topo_opts_t opts;
    dd_topo_t *topo = NULL;
    dd_topo_cand_t *cands = NULL;
    dd_topo_choice_t choice;
    dd_status_t status =
        dd_config_load(&dd_topo_config_table, &opts, dd_config_getenv, NULL);

    if (status != DD_OK) {
        return status;
    }
    memset(&choice, 0, sizeof(choice));
    dd_status_t local = dd_topo_setup_local(&opts, local_rank, local_size,
                                            &topo, &cands, &choice);
    status =
        dd_topo_agree(store, topo, &opts, cands, local, local_size, &choice);
    if (status == DD_OK) {
        status = dd_topo_export(&choice);
    }
    if (status == DD_OK) {
        dd_log_info(DD_SUBSYS_TOPO,
                    "network interface %s (%s), %d stream%s: %s", choice.name,
                    dd_topo_kind_name(choice.kind), choice.streams,
                    choice.streams == 1 ? "" : "s", choice.reason);
        *choice_p = choice;
    }
    free(cands);
    dd_topo_free(topo);
    dd_config_release(&dd_topo_config_table, &opts);
    return status;
}
