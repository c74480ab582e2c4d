/*
 * The device layer's DREAMDDP_* variables: which device module to load and
 * how device buffers are staged through pinned host memory.
 */
#ifndef DD_DEVICE_DEVICE_CONFIG_H
#define DD_DEVICE_DEVICE_CONFIG_H

#include "core/config.h"

typedef enum {
    DD_DEVICE_AUTO = 0, /* cuda when its query succeeds, else none */
    DD_DEVICE_CUDA,
    DD_DEVICE_FAKE, /* host memory posing as a device: tests only */
    DD_DEVICE_NONE
} dd_device_kind_t;

typedef struct {
    int kind;             /* dd_device_kind_t */
    size_t staging_bytes; /* bytes of one pinned staging chunk */
    int staging_slots;    /* chunks in flight between copies and network */
} dd_device_opts_t;

extern const char *const dd_device_kind_names[];

extern const dd_config_table_t dd_device_config_table;

#endif
