/*
 * ddbench's subcommands, one entry point each, and what they share
 * (ddbench_common.c).
 */
#ifndef DD_TOOLS_DDBENCH_H
#define DD_TOOLS_DDBENCH_H

#include "argnum.h"
#include "core/time.h"
#include "sched/plan/plan.h"

#include <dreamddp.h>

/** "100000000", "64K", "16M" (KiB-based), "100MB" (decimal), "1GiB" into
 *  *bytes_p; 0, or -1 when s is none of these. */
int ddbench_parse_bytes(const char *s, size_t *bytes_p);

/** --streams N of coll and sync: N (1 to DD_BACKEND_MAX_STREAMS) becomes
 *  DREAMDDP_NUM_STREAMS for this run, before dd_init; 0, or -1 with a
 *  message naming prog and the range. */
int ddbench_streams_set(const char *prog, const char *arg);

/** The stream count the ranks agreed on and the backends were told. */
int ddbench_streams(dd_context_h ctx);

/** ddbench codec --codec SPEC --bytes SIZE ... */
int ddbench_codec_main(int argc, char **argv);

/** ddbench plan PROFILE_DIR [--H N] [--json] */
int ddbench_plan_main(int argc, char **argv);

/** The seconds per iteration of the plan make(num_layers, h) under the
 *  planner's cost model (ssgd, plsgd, flsgd: the baselines), its syncs
 *  landing land_s after they leave the wire (dd_plan_cost_landing). */
dd_status_t ddbench_plan_cost(const dd_plan_input_t *in,
                              dd_status_t (*make)(size_t, unsigned,
                                                  dd_plan_t **),
                              unsigned h, double land_s, double *iter_s);

/** BytePS's optimum as a share of M/B: the bytes each of n workers moves
 *  each way with k aggregators, 2n(n-1) / (n^2 + kn - 2k), per byte of
 *  the model (1 once k >= n; k = 0: the ring's 2(n-1)/n). */
double ddbench_byteps_share(double n, double k);

/** ddbench scale PROFILE_DIR [--gpus LIST] ... */
int ddbench_scale_main(int argc, char **argv);

/** ddbench sync --bytes SIZE ... */
int ddbench_sync_main(int argc, char **argv);

/** ddbench timeline merge FILE... */
int ddbench_timeline_main(int argc, char **argv);

/** ddbench train-sim --profile DIR --strategy S ... */
int ddbench_train_main(int argc, char **argv);

#endif
