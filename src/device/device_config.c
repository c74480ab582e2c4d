/*
 * The device layer's configuration table. Declares variables only; the
 * loader acts on them.
 */
#include "device/device_config.h"

#include <stddef.h>

const char *const dd_device_kind_names[] = {"auto", "cuda", "fake", "none",
                                            NULL};

static const dd_config_field_t dd_device_fields[] = {
    {"DREAMDDP_DEVICE", "auto",
     "Device-memory module: auto (cuda when a CUDA runtime sees a GPU, else "
     "none), cuda, fake (host memory posing as a GPU, for tests) or none; "
     "modules are found like the backends (DREAMDDP_BACKEND_PATH).",
     DD_CONFIG_ENUM, offsetof(dd_device_opts_t, kind), 0, 0,
     dd_device_kind_names},
    {"DREAMDDP_STAGING_BYTES", "4M",
     "Device buffers that a backend cannot read travel through pinned host "
     "chunks of this size (a multiple of 8 bytes).",
     DD_CONFIG_SIZE, offsetof(dd_device_opts_t, staging_bytes), 0, 0, NULL},
    {"DREAMDDP_STAGING_SLOTS", "4",
     "Staging chunks in flight at once: the copy of one overlaps the network "
     "of another.",
     DD_CONFIG_INT, offsetof(dd_device_opts_t, staging_slots), 2, 64, NULL},
};

const dd_config_table_t dd_device_config_table = {
    "device", dd_device_fields, DD_CONFIG_FIELDS_COUNT(dd_device_fields)};
