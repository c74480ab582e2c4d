/*
 * The choice leaves the topology module here, into dd_init through
 * dd_topo_setup; backends learn it from their services struct, never from
 * a variable set here. The choice and its reason are logged once.
 */
#include "topo/export.h"
#include "api/net_agree.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
