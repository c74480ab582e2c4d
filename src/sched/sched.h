/*
 * The scheduler's state: the layer table, the strategy and its schedule,
 * the step in progress, the profiler's measurements and the engine. Shared
 * by the files of src/sched and by src/api, which owns the scheduler.
 */
#ifndef DD_SCHED_SCHED_H
#define DD_SCHED_SCHED_H

#include "agg/agg.h"
#include "backends/registry.h"
#include "boot/job.h"
#include "compress/codec.h"
#include "device/loader.h"
#include "sched/agree.h"
#include "sched/compression.h"
#include "sched/delay.h"
#include "sched/drift.h"
#include "sched/engine/engine.h"
#include "sched/plan/plan.h"
#include "sched/plan/strategy.h"
#include "sched/profile.h"
#include "sched/replan.h"
#include "sched/routes.h"
#include "sched/sched_config.h"
#include "sched/split.h"

#include <pthread.h>
#include <stdio.h>

struct dd_layer {
    struct dd_sched *sched;
    size_t index;
    char *name;
    dd_tensor_t *tensors;
    size_t n_tensors;
    size_t bytes; /* of the parameters (= of the gradients) */
    /* This step. */
    int ready;
    double ready_t;
    /* Measurements: EMAs of the backward time and of the sync time. */
    double bp_s, comm_s;
    int comm_measured;
    /* The syncs that dd_step_end (or dd_sync_all) drained, summed over the
     * jobs that carried a part of the layer: its bytes, its per-byte share
     * of their time, their time; seen: 1 once summed, 2 once counted. */
    size_t sync_bytes;
    double sync_share_s, sync_msg_s;
    int sync_seen;
    dd_layer_stats_t stats;
    /* adaptive */
    int period;
    uint64_t last_sync_step;
    double grad_ema, grad_ema_prev;
    dd_drift_layer_t drift; /* the divergence monitor's (drift.h) */
    uint64_t finite_window; /* finite.c: the window (+1) a non-finite
                               average of it was last said in */
    /* Device layers (devmem.c): recorded by dd_layer_ready_stream on the
     * caller's stream; device jobs wait for its last record. */
    struct dd_device_event *ready_event;
    int device;             /* ordinal of its device tensors; -1: host only */
    dd_comp_layer_t comp;   /* compression's (compression.h) */
    dd_delay_layer_t delay; /* delayed averaging's (delay.h) */
    /* Its forward mark (dd_layer_forward) in this step, the wait there,
     * and the EMA of its forward time (profile.c). */
    double fwd_t, fwd_wait_s, fp_s;
    dd_split_layer_t split; /* its parts, or its whole (split.h) */
    /* Each tensor's chain (routes.c), from commit. */
    dd_tensor_route_t *routes;
};

typedef struct dd_timeline dd_timeline_t;

/**
 * What the scheduler is handed by src/api: the job, its options, the
 * backends that run collectives among the workers, and aggregation's
 * environment when the job has aggregators (NULL otherwise). They outlive
 * the scheduler.
 */
typedef struct {
    const dd_job_t *job;
    const dd_sched_opts_t *opts;
    dd_backends_t *coll;
    const dd_agg_env_t *agg;          /* NULL: no aggregators in the job */
    const dd_device_module_t *device; /* NULL: no device module */
    const dd_device_opts_t *device_opts;
    /* DREAMDDP_ROUTE=hierarchical without aggregators: on a leader of
     * several hosts, the leaders' own instances; NULL elsewhere. */
    dd_backends_t *leaders;
    /* DREAMDDP_ELASTIC=yes (a worker count that may differ from a saved
     * plan's), and the job's generation. */
    int elastic, elastic_gen;
} dd_sched_env_t;

typedef struct dd_sched {
    dd_sched_env_t env;
    dd_sched_opts_t opts;
    dd_strategy_t strategy;
    char strategy_name[32];
    /* dd_layer_ready comes from any thread (autograd's hooks): this lock
     * serializes what it writes, the layer's marks, the fusion group
     * (group, buckets_done), the engine hand-off and the timeline. The
     * other calls of a step come from one thread, ordered with the marks
     * by the application. */
    pthread_mutex_t ready_lock;
    struct dd_layer **layers;
    size_t n_layers, cap_layers;
    /* The layers by name (layer.c): open addressing, index + 1 per slot
     * (0: empty), name_cap a power of two at least twice n_layers. */
    size_t *name_slot, name_cap;
    /* The layers as registered, once dd_model_commit cut some into parts
     * (split.c): sched->layers then holds the parts; NULL until then. */
    struct dd_layer **handles;
    size_t n_handles;
    size_t split_bytes; /* DREAMDDP_LAYER_SPLIT; 0: no */
    int split_auto;
    int committed;
    int in_step;
    uint64_t step; /* the step in progress, or the next one */
    /* The first step of this process's run: 0, or where dd_step_set
     * resumed a checkpoint's window; the profiler counts from it. */
    uint64_t step_base;
    dd_status_t failed;
    /* Window strategies: what syncs in each step of the window, and the
     * row of the step in progress (set at dd_step_begin). */
    dd_plan_t *plan;
    const unsigned char *row;
    /* dd_plan_fusion of a measured plan ([H * n]): which layers' messages
     * wait for the next layer; NULL: every layer's leaves at once. */
    unsigned char *hold;
    int planned; /* dreamddp: the plan comes from measurements */
    /* DREAMDDP_PLAN, read at commit (replan.h). */
    dd_plan_file_t plan_file;
    double plan_bp_total, plan_comm_total;
    /* Re-planning: the agreement on the times runs in the background every
     * DREAMDDP_REPLAN_WINDOWS windows (agree.h); a re-plan needs the drift
     * at DD_SCHED_REPLAN_PERSIST checks in a row. */
    dd_agree_t agree;
    int windows_unchecked, drift_checks;
    dd_trial_t trial; /* bubble filling's trial (replan.h) */
    /* Network model from commit: sync time = alpha + beta * bytes. */
    double alpha_s, beta_s;
    /* The window in progress: its steps' statistics so far, for the
     * [SYNC] summary at its end. */
    dd_step_stats_t window_stats;
    /* The step in progress. */
    double step_begin_t;
    int replanned;
    /* Plans and fusions put in force so far: every job carries it, so
     * that the route foresees nothing from steps of another plan. */
    uint64_t plan_serial;
    dd_sync_job_t *group; /* a fusion group still filling */
    size_t group_limit;
    int buckets_done; /* ddp: buckets launched this step */
    dd_engine_t *engine;
    dd_plan_assign_t assign; /* the engine's channel rule (plan.h) */
    dd_timeline_t *timeline;
    /* Rank 0's wall clock minus this rank's, agreed at dd_model_commit
     * (src/api), and its uncertainty; the timeline records both. */
    double clock_offset_us, clock_uncertainty_us;
    /* How syncs travel (routes.c): every route, and the host jobs' pipe. */
    dd_sched_routes_t routes;
    dd_comp_t comp;   /* compression's (compression.h) */
    dd_delay_t delay; /* delayed averaging's (delay.h) */
    int said_goodbye;
} dd_sched_t;

/* layer.c */
dd_status_t dd_sched_create(const dd_sched_env_t *env, dd_sched_t **sched_p);
dd_status_t dd_sched_layer_register(dd_sched_t *sched, const char *name,
                                    const dd_tensor_t *tensors, size_t n,
                                    dd_layer_h *layer_p);
dd_status_t dd_sched_strategy_set(dd_sched_t *sched, const char *strategy);
dd_status_t dd_sched_commit(dd_sched_t *sched);
/* runtime.c: DD_OK for a layer of this context that is not a part. */
dd_status_t dd_sched_check_handle(dd_sched_t *sched, dd_layer_h layer,
                                  const char *call);
dd_status_t dd_sched_layer_stats(dd_sched_t *sched, dd_layer_h layer,
                                 dd_layer_stats_t *stats_p);
void dd_sched_destroy(dd_sched_t *sched);
/* Stops the engine and says goodbye to the aggregators; dd_finalize calls
 * it before the last barrier, which the aggregators join once every worker
 * has said goodbye. */
void dd_sched_quiesce(dd_sched_t *sched);
dd_status_t dd_sched_check_tables(dd_sched_t *sched);
/* settings.c: the settings that shape the wire, the same on every worker;
 * a difference fails every worker alike, naming the variables and ranks. */
dd_status_t dd_sched_check_settings(dd_sched_t *sched);
/* settings.c: check run on the first worker alone, after every worker has
 * published what it checks under its own key; its verdict (DD_OK, or the
 * status and message of its error) is what every other worker returns,
 * under the store's key "dd/verdict/NAME"; what names the values checked
 * in the message of a verdict that does not come. A check that reads every
 * worker's key on every worker costs the store world^2 requests (128 ranks:
 * 16,384 a check). */
dd_status_t dd_sched_first_verdict(dd_sched_t *sched, const char *name,
                                   const char *what,
                                   dd_status_t (*check)(dd_sched_t *sched));

/* Every field of the output structs that this library fills. */
#define DD_SCHED_STEP_STATS_FIELDS                                             \
    (DD_STEP_STATS_FIELD_STEP | DD_STEP_STATS_FIELD_LAYERS_SYNCED |            \
     DD_STEP_STATS_FIELD_BYTES_SYNCED | DD_STEP_STATS_FIELD_WIRE_S |           \
     DD_STEP_STATS_FIELD_WAIT_S | DD_STEP_STATS_FIELD_REPLANNED |              \
     DD_STEP_STATS_FIELD_EXTRA_BYTES | DD_STEP_STATS_FIELD_STAGING_S |         \
     DD_STEP_STATS_FIELD_WIRE_BYTES)
#define DD_SCHED_LAYER_STATS_FIELDS                                            \
    (DD_LAYER_STATS_FIELD_SYNCS | DD_LAYER_STATS_FIELD_BYTES |                 \
     DD_LAYER_STATS_FIELD_WIRE_S | DD_LAYER_STATS_FIELD_BP_S |                 \
     DD_LAYER_STATS_FIELD_PERIOD | DD_LAYER_STATS_FIELD_EXTRA_SYNCS |          \
     DD_LAYER_STATS_FIELD_DIVERGENCE | DD_LAYER_STATS_FIELD_DIVERGENCE_MAX |   \
     DD_LAYER_STATS_FIELD_DIVERGENCE_MEAN |                                    \
     DD_LAYER_STATS_FIELD_DIVERGENCE_AGREED)

/* runtime.c */
dd_status_t dd_sched_step_begin(dd_sched_t *sched);
dd_status_t dd_sched_layer_ready(dd_sched_t *sched, dd_layer_h layer);
dd_status_t dd_sched_layer_unused(dd_sched_t *sched, dd_layer_h layer);
dd_status_t dd_sched_layer_ready_stream(dd_sched_t *sched, dd_layer_h layer,
                                        void *stream);
dd_status_t dd_sched_layer_forward(dd_sched_t *sched, dd_layer_h layer,
                                   int with_stream, void *stream);
dd_status_t dd_sched_step_end(dd_sched_t *sched, dd_step_stats_t *stats_p);
dd_status_t dd_sched_sync_all(dd_sched_t *sched);
/* dd_step_set: the number of the next step, before this run's first. */
dd_status_t dd_sched_step_set(dd_sched_t *sched, uint64_t step);
/* The steps this run made since commit (since dd_step_set's step). */
static inline uint64_t dd_sched_steps_run(const dd_sched_t *sched)
{
    return sched->step - sched->step_base;
}
/* DD_ERR_INVALID_PARAM, naming call and type, when field_mask has a bit
 * outside known. */
dd_status_t dd_sched_check_fields(const char *call, const char *type,
                                  uint64_t field_mask, uint64_t known);
int dd_sched_layer_syncs(dd_sched_t *sched, const struct dd_layer *layer);
/* DD_ERR_STATE before commit, the earlier failure after one; names what. */
dd_status_t dd_sched_check_open(dd_sched_t *sched, const char *what);

/* runtime.c: at a forward mark, once the layer's sync in flight landed,
 * its sync of this step leaves (DREAMDDP_NEXT_LAUNCH=early). */
dd_status_t dd_sched_launch_landed(dd_sched_t *sched, struct dd_layer *layer);
/* routes.c: the routes, composed once at commit. */
void dd_sched_routes_init(dd_sched_t *sched);
/** At dd_model_commit, once the strategy is known: the allreduce pipe's
 * depth (the stream count, at least DD_ENGINE_DEPTH; under delayed
 * averaging DD_ENGINE_DEPTH_DELAYED, engine.h). */
void dd_sched_routes_depth(dd_sched_t *sched);
/* At commit, once the replicas are equal and the codecs opened: the route
 * (aggregators, hierarchical or allreduce) and every tensor's chain. */
dd_status_t dd_sched_routes_commit(dd_sched_t *sched);
/* Says goodbye to the aggregators (before the last barrier). */
void dd_sched_routes_quiesce(dd_sched_t *sched);
void dd_sched_routes_free(dd_sched_t *sched);
/* Runs a collective among the workers, through the engine once it runs. */
dd_status_t dd_sched_collective(dd_sched_t *sched, const dd_sched_coll_t *c);
/* How long the application waits for the engine. */
double dd_sched_engine_timeout(const dd_sched_t *sched);
/* The stream count the backends run (1 without backends): the engine's
 * channels and the planner's. */
int dd_sched_streams(const dd_sched_t *sched);
/* The progress engine's channels: the stream count, or 1 under delayed
 * averaging. */
int dd_sched_channels(const dd_sched_t *sched);

/* devmem.c: device layers. */
dd_status_t dd_sched_device_check(dd_sched_t *sched, const char *name,
                                  const dd_tensor_t *tensors, size_t n);
/* dd_layer_ready_stream's device part: the readiness event recorded on
 * stream, which delayed averaging takes as the layer's stream. */
dd_status_t dd_sched_device_ready(dd_sched_t *sched, dd_layer_h layer,
                                  void *stream);
/* Tags a job of layer's device tensor with its device and readiness. */
void dd_sched_device_job(dd_sched_t *sched, const struct dd_layer *layer,
                         const dd_tensor_t *tensor, dd_sync_job_t *job);
void dd_sched_device_free(dd_sched_t *sched);

/* timeline.c */
dd_status_t dd_timeline_open(const dd_sched_t *sched,
                             dd_timeline_t **timeline_p);
/* The step's backward marks, at dd_step_end, in the order they came. */
void dd_timeline_marks(dd_timeline_t *t, const dd_sched_t *sched);
void dd_timeline_sync(dd_timeline_t *t, const dd_sched_t *sched,
                      const dd_sync_job_t *job);
/* A layer's divergence counter track ("C" events). */
void dd_timeline_counter(dd_timeline_t *t, const char *layer, double at,
                         double local, double max, double mean);
/* finite.c: the averages that held NaN or Inf among done, said once per
 * layer per window; DD_ERR_NUMERIC under DREAMDDP_CHECK_FINITE=error. */
dd_status_t dd_sched_finite_report(dd_sched_t *sched,
                                   const dd_sync_job_t *done);
void dd_timeline_instant(dd_timeline_t *t, const char *name, const char *cat,
                         double at);
void dd_timeline_close(dd_timeline_t *t);

#endif
