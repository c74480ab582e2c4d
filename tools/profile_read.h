/*
 * Reads a layer profile directory in the DreamDDP artifact's format (see
 * ../shared/profiles/README.md) into the arrays the planner takes, for
 * ddbench and the tests (libdd_tools, not installed; libdreamddp neither
 * holds it nor links json-c). It does file I/O and reports errors with
 * dd_error; it must not plan (plan.c does) and must not guess: files that
 * disagree are an error, not a merge.
 */
#ifndef DD_TOOLS_PROFILE_READ_H
#define DD_TOOLS_PROFILE_READ_H

#include "sched/plan/plan.h"

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

/**
 * A profile, layers in forward order. Its layers are the ones that sync:
 * the comm file's. Modules that the bp file lists and the comm file does
 * not are frozen (a LoRA fine-tune's base model): they take backward time
 * and never sync, and every modeled figure adds their backward time to
 * each iteration without letting it hide a sync, as schedsim.py does.
 */
typedef struct {
    size_t num_layers;    /**< n >= 1 */
    char **names;         /**< [n] layer names */
    double *bp_s;         /**< [n] backward time, seconds */
    double *comm_s;       /**< [n] sync time, seconds; NULL without comm */
    uint64_t *num_params; /**< [n] fp32 elements; NULL without sizes */
    size_t num_frozen;    /**< modules of the bp file without a comm time */
    double frozen_bp_s;   /**< their backward time in total, seconds */
    /** [n] backward time of the frozen modules whose backward runs just
     *  before layer i's: those between layer i and layer i + 1 in forward
     *  order, and for the last layer those after it. NULL when none. */
    double *frozen_before_s;
    /** The frozen modules before layer 0 in forward order: their backward
     *  runs after every layer's. */
    double frozen_after_s;
} dd_profile_t;

/**
 * Reads dir/bp_*.json (or dir/bp/bp_*.json), dir/comm_*.json (or
 * dir/comm/comm_*.json) and the optional dir/sizes_*.json (or
 * dir/sizes/sizes_*.json). Each is a JSON object from layer name to number
 * in forward order; NaN and Infinity (a layer the profiler could not time)
 * count as 0, as in schedsim.py. The files must list the same layers in the
 * same order, except that the comm file may leave modules of the bp file
 * out (frozen modules, see dd_profile_t); the sizes file then lists either
 * the bp file's modules or the comm file's layers. The comm file may be
 * missing when a sizes file is there: then comm_s is NULL until
 * dd_profile_comm_from_sizes fills it.
 *
 * @param profile_p  the profile, set only on success; dd_profile_free it.
 * @return DD_OK; DD_ERR_IO when a required file is missing or unreadable;
 *         DD_ERR_INVALID_PARAM when a pattern matches more than one file;
 *         DD_ERR_MESSAGE for bad JSON, a value that is not a non-negative
 *         number (an integer for sizes), no layers, or files whose layers
 *         differ (naming the first layer that does); DD_ERR_NO_MEMORY;
 *         DD_ERR_UNSUPPORTED when built without json-c. Every error is
 *         logged and left in dd_last_error().
 */
dd_status_t dd_profile_read(const char *dir, dd_profile_t **profile_p);

/** Frees a profile. NULL is allowed. */
void dd_profile_free(dd_profile_t *profile);

/**
 * Sets (or replaces) the sync times from the parameter counts with an
 * alpha-beta model: alpha_s + 4 * num_params / bytes_per_s for a layer with
 * parameters, 0 for one without. bytes_per_s is the effective rate of the
 * collective (for a ring allreduce of n workers on links of B bytes/s, that
 * is B * n / (2 (n - 1))).
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM when the profile has no sizes or
 *         alpha_s < 0 or bytes_per_s <= 0 (either not finite);
 *         DD_ERR_NO_MEMORY.
 */
dd_status_t dd_profile_comm_from_sizes(dd_profile_t *profile, double alpha_s,
                                       double bytes_per_s);

/**
 * The planner's view of a profile (pointers into it, valid while it lives).
 *
 * @return DD_OK, or DD_ERR_STATE when the profile has no sync times yet.
 */
dd_status_t dd_profile_plan_input(const dd_profile_t *profile,
                                  dd_plan_input_t *input_p);

#endif
