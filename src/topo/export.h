/*
 * Telling every backend the same interface: the environment variables that
 * UCX, Gloo and NCCL read, set only where the user has not set them.
 */
#ifndef DD_TOPO_EXPORT_H
#define DD_TOPO_EXPORT_H

#include "boot/store.h"
#include "topo/ifchoice.h"

#define DD_TOPO_ENV_MAX 4

typedef struct {
    const char *name;
    char value[DD_TOPO_NAME_MAX + 8];
} dd_topo_env_t;

/* The variables for a choice: UCX_NET_DEVICES (the RDMA device:port, else
 * the netdev), GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME (exact match) and,
 * for InfiniBand and RoCE, NCCL_IB_HCA. Returns how many it wrote. */
int dd_topo_backend_env(const dd_topo_choice_t *choice,
                        dd_topo_env_t env[DD_TOPO_ENV_MAX]);

/* Sets those the environment lacks; logs at debug which it set and which
 * the user had set. Returns DD_OK or DD_ERR_NO_MEMORY. */
dd_status_t dd_topo_export(const dd_topo_choice_t *choice);

/**
 * The dd_init step: reads the topology configuration, probes, chooses this
 * rank's interface, agrees with every rank through the store, exports the
 * choice for backends and logs it once at info level.
 * @return DD_OK; the errors of dd_config_load, dd_topo_probe,
 *         dd_topo_choose and dd_topo_agree, each reported where detected.
 */
dd_status_t dd_topo_setup(dd_store_t *store, int local_rank, int local_size,
                          dd_topo_choice_t *choice_p);

#endif
