/*
 * The backend registry's DREAMDDP_* variables: which modules to use and where
 * to look for them.
 */
#ifndef DD_BACKENDS_BACKEND_CONFIG_H
#define DD_BACKENDS_BACKEND_CONFIG_H

#include "core/config.h"

typedef struct {
    char *backends; /* DREAMDDP_BACKENDS; NULL: every module that loads */
    char *path;     /* DREAMDDP_BACKEND_PATH; NULL: only the built-in places */
} dd_backend_opts_t;

extern const dd_config_table_t dd_backend_config_table;

#endif
