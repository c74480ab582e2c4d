/*
 * The backend registry's configuration table. Declares variables only; the
 * registry parses the DREAMDDP_BACKENDS grammar, since a bad name is only known
 * once the modules are listed.
 */
#include "backends/backend_config.h"

#include <stddef.h>

static const dd_config_field_t dd_backend_fields[] = {
    {"DREAMDDP_BACKENDS", NULL,
     "Backends to use, best first: a comma-separated list (gloo,ucx) keeps "
     "only those, ^list (^nccl) drops those; unset: every module that loads, "
     "chosen by score.",
     DD_CONFIG_STRING, offsetof(dd_backend_opts_t, backends), 0, 0, NULL},
    {"DREAMDDP_BACKEND_PATH", NULL,
     "Colon-separated directories searched for dd_backend_<name>.so before "
     "the install directory and the library's own directory.",
     DD_CONFIG_STRING, offsetof(dd_backend_opts_t, path), 0, 0, NULL},
};

const dd_config_table_t dd_backend_config_table = {
    "backends", dd_backend_fields, DD_CONFIG_FIELDS_COUNT(dd_backend_fields)};
