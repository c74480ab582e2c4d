/*
 * ddbench's subcommands, one entry point each.
 */
#ifndef DD_TOOLS_DDBENCH_H
#define DD_TOOLS_DDBENCH_H

#include "core/time.h"

#include <dreamddp.h>

/** ddbench plan PROFILE_DIR [--H N] [--json] */
int ddbench_plan_main(int argc, char **argv);

/** ddbench sync --bytes SIZE ... */
int ddbench_sync_main(int argc, char **argv);

/** ddbench train-sim --profile DIR --strategy S ... */
int ddbench_train_main(int argc, char **argv);

#endif
