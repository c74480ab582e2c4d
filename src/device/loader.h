/*
 * The device loader: finds dd_device_<name>.so where the backends are
 * found (DREAMDDP_BACKEND_PATH, the install directory, the library's own
 * directory), dlopens the one DREAMDDP_DEVICE names (auto: cuda when its
 * query succeeds), and initializes it with the services it needs. The core
 * links no device library. dd_init and ddtopo both use it, so they agree on
 * what the machine has.
 */
#ifndef DD_DEVICE_LOADER_H
#define DD_DEVICE_LOADER_H

#include <dreamddp/device.h>

#include "device/device_config.h"

/** A loaded, initialized device module. */
typedef struct {
    const dd_device_ops_t *ops;
    dd_device_t *instance;
    void *dl;
    char name[16];
    char path[512];
    dd_device_services_t services;
} dd_device_module_t;

/**
 * Loads the module opts->kind names. *module_p is NULL, with DD_OK and the
 * reason in why, when none is wanted (none) or none can run (auto). An
 * explicit cuda or fake that cannot be loaded or run is an error naming
 * DREAMDDP_DEVICE, the module and why.
 */
dd_status_t dd_device_load(const dd_device_opts_t *opts, const char *path,
                           int log_level, dd_device_module_t **module_p,
                           char *why, size_t size);

/** Finalizes and unloads. NULL is allowed. */
void dd_device_unload(dd_device_module_t *module);

#endif
