/*
 * The core's configuration table. Declares variables only; dd_config_load
 * parses them.
 */
#include "core/core_config.h"
#include "core/log.h"

#include <stddef.h>

static const dd_config_field_t dd_core_fields[] = {
    {"DREAMDDP_LOG_LEVEL", "warn",
     "Least severe messages printed; errors are always printed.",
     DD_CONFIG_ENUM, offsetof(dd_core_opts_t, log_level), 0, 0,
     dd_log_level_names},
    {"DREAMDDP_LOG_SUBSYS", "all",
     "Subsystems whose info, debug and trace messages are printed.",
     DD_CONFIG_FLAGS, offsetof(dd_core_opts_t, log_subsys), 0, 0,
     dd_log_subsys_names},
    {"DREAMDDP_LOG_FILE", NULL,
     "Log to this file instead of stderr; in the name %r becomes the rank, %h "
     "the host name and %p the process id.",
     DD_CONFIG_STRING, offsetof(dd_core_opts_t, log_file), 0, 0, NULL},
    {"DREAMDDP_LINE_BUFFERED", "no",
     "Make standard output line-buffered at dd_init, so that each line "
     "reaches a pipe when printed; ddrun sets it for its ranks.",
     DD_CONFIG_BOOL, offsetof(dd_core_opts_t, line_buffered), 0, 0, NULL},
    {"DREAMDDP_TIMEOUT_S", "300s",
     "Longest wait for the store or any peer before an error names who is "
     "missing; at most a day, which every backend can represent.",
     DD_CONFIG_DURATION, offsetof(dd_core_opts_t, timeout_s), 0, 86400, NULL},
};

const dd_config_table_t dd_core_config_table = {
    "core", dd_core_fields, DD_CONFIG_FIELDS_COUNT(dd_core_fields)};
