/*
 * The core's DREAMDDP_* variables: logging, standard output's buffering
 * and the global timeout.
 */
#ifndef DD_CORE_CORE_CONFIG_H
#define DD_CORE_CORE_CONFIG_H

#include "core/config.h"

typedef struct {
    int log_level;       /* dd_log_level_t */
    unsigned log_subsys; /* bit per dd_subsys_t */
    char *log_file;      /* NULL: stderr */
    int line_buffered;   /* setvbuf(stdout, _IOLBF) at dd_init */
    double timeout_s;    /* every wait's bound */
} dd_core_opts_t;

extern const dd_config_table_t dd_core_config_table;

#endif
