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
#include "sched/drift.h"
#include "sched/engine/engine.h"
#include "sched/plan/plan.h"
#include "sched/plan/strategy.h"
#include "sched/routes.h"
#include "sched/sched_config.h"

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
    /* Divergence monitor (drift.c): this step's sums over the items the
     * engine measured, whether a figure came since the last agreement, and
     * the warning state; the figures are in stats. */
    double drift_diff2, drift_norm2;
    int drift_seen, drift_fresh;
    dd_drift_watch_t drift_watch;
    /* Device layers (devmem.c): recorded by dd_layer_ready_stream on the
     * caller's stream; device jobs wait for its last record. */
    struct dd_device_event *ready_event;
    int device; /* ordinal of its device tensors; -1: host only */
    /* Compression (codec_pipe.c): the spec dd_layer_set_compression chose
     * (NULL: the default rule), the codec in force from commit (NULL:
     * dense), and per tensor its state and, for parameter syncs, its values
     * at the last sync (NULL where the tensor stays dense). */
    char *codec_spec;
    const dd_sched_codec_t *codec;
    struct dd_codec_state **codec_states;
    float **codec_refs;
    /* Delayed averaging (delay.c): per tensor, the copy of the parameters
     * at the launch that travels (average - copy once it landed); whether
     * a sync is in flight and the step that launched it; the seconds this
     * step's backward mark waited for it. */
    void **delay_wire;
    int delay_pending;
    uint64_t delay_step;
    double delay_wait_s;
    /* A device layer's: the stream the application last named
     * (dd_layer_ready_stream, dd_layer_forward_stream), where its launches
     * and landings queue their device work, and the event after a launch's
     * copy there, which its job waits for. */
    void *delay_stream;
    int delay_stream_known;
    struct dd_device_event *delay_event;
    /* Its sync of this step left before its backward
     * (DREAMDDP_NEXT_LAUNCH=early, runtime.c). */
    int delay_early;
    /* Its forward mark (dd_layer_forward) in this step, the wait there,
     * and the EMA of its forward time (measure.c). */
    double fwd_t, fwd_wait_s, fp_s;
    /* The replica's own cost of its delayed averages since commit: the
     * copies at their launches and the corrections where they landed. */
    double delay_copy_s, delay_correct_s;
    uint64_t delay_landings;
    /* Parts (split.c). A layer dd_model_commit cut is the application's
     * handle, outside sched->layers, with its n_parts parts there in
     * forward order; each part points at it (whole) and covers part_count
     * elements from part_offset of its tensors taken in order. */
    struct dd_layer **parts;
    size_t n_parts;
    struct dd_layer *whole;
    size_t part_offset, part_count;
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
    /* Window strategies: what syncs in each step of the window. */
    dd_plan_t *plan;
    /* dd_plan_fusion of a measured plan ([H * n]): which layers' messages
     * wait for the next layer; NULL: every layer's leaves at once. */
    unsigned char *hold;
    int planned; /* dreamddp: the plan comes from measurements */
    double plan_bp_total, plan_comm_total;
    /* Re-planning: the agreement on the times runs in the background every
     * DREAMDDP_REPLAN_WINDOWS windows; a re-plan needs the drift at
     * DD_SCHED_REPLAN_PERSIST checks in a row. */
    enum {
        DD_SCHED_AGREE_IDLE,
        DD_SCHED_AGREE_RUNNING, /* on the engine's queue */
        DD_SCHED_AGREE_READY    /* agree_v holds the agreed times */
    } agree_state;
    double *agree_v; /* [2n] bp, then comm */
    /* The window-start agreement is one allgather of every worker's row:
     * the profile when a check is due ([2n]), then the layers' divergence
     * when the monitor is on ([n]); agree_all holds the rows in worker
     * order, every worker reduces them alike. */
    double *agree_mine, *agree_all;
    size_t agree_stride;
    int agree_profile, agree_drift;
    dd_sched_coll_t agree_coll;
    int windows_unchecked, drift_checks;
    /* Bubble filling's trial: a plan with extra syncs runs one check
     * period with them and one without, on the agreed mean time per
     * iteration (the profile's last value), and keeps them only when they
     * cost at most DD_SCHED_TRIAL_TOLERANCE; dropped once, no later plan
     * fills. iter_sum_s and iter_n: this worker's step-to-step times since
     * the last profile row or plan change. */
    enum {
        DD_SCHED_TRIAL_NONE,
        DD_SCHED_TRIAL_WITH,   /* measuring the plan with its extras */
        DD_SCHED_TRIAL_WITHOUT /* measuring it without; extras kept aside */
    } fill_trial;
    dd_plan_t *trial_extras; /* the plan with its extras, while without */
    double trial_with_s;
    int fill_refused;
    double iter_sum_s;
    uint64_t iter_n;
    /* Network model from commit: sync time = alpha + beta * bytes. */
    double alpha_s, beta_s;
    /* The window in progress: its steps' statistics so far, for the
     * [SYNC] summary at its end. */
    dd_step_stats_t window_stats;
    /* The step in progress. */
    double step_begin_t;
    int replanned;
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
    /* Compression (compression.c): the codecs opened, by spec. */
    char *compression; /* dd_compression_set's; NULL: DREAMDDP_COMPRESSION */
    dd_route_codecs_t codecs;
    /* Delayed averaging (delay.c): the deferred jobs in flight, those
     * whose layers all landed (for dd_step_end's accounting), and the
     * seconds the deadlines waited: since the last dd_step_end, and in
     * this step's forward marks. */
    struct dd_delay_entry *delay;
    size_t n_delay, cap_delay;
    dd_sync_job_t *delay_landed;
    double delay_wait_s, delay_fwd_wait_s;
    /* Whether the application makes forward marks, and the deadline model
     * the plan is made under (measure.c), with its forward times. */
    int delay_marked;
    dd_plan_delay_t delay_model;
    double *delay_fp;
    /* The library's own stream and event for device layers whose stream
     * the application never named (delay.c). */
    void *delay_dev_stream;
    struct dd_device_event *delay_dev_event;
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
/* split.c */
dd_status_t dd_sched_split_parse(dd_sched_t *sched);
size_t dd_sched_split_limit(const dd_sched_t *sched);
dd_status_t dd_sched_split_commit(dd_sched_t *sched);
void dd_sched_split_free(dd_sched_t *sched);
size_t dd_sched_num_handles(const dd_sched_t *sched);
struct dd_layer *dd_sched_handle_at(const dd_sched_t *sched, size_t i);
dd_status_t dd_sched_layer_part(dd_sched_t *sched, dd_layer_h layer, size_t i,
                                dd_layer_h *part_p, size_t *offset_p,
                                size_t *count_p);
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

#define DD_SCHED_REPLAN_PERSIST 2
/* The rows of the profile the workers agree on: bp, comm, forward; a
 * worker without forward marks sends DD_SCHED_NO_MARKS as its forward. */
#define DD_SCHED_PROFILE_ROWS 3
#define DD_SCHED_NO_MARKS (-1e9)
/* The profile's length: its rows, then the mean time per iteration. */
#define DD_SCHED_PROFILE_LEN(n) (DD_SCHED_PROFILE_ROWS * (n) + 1)

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

/* measure.c: the steps each of bubble filling's trial's two measurements
 * spans at least, whatever the window: a window of 2 steps lets one slow
 * step decide (a parallel make check kept extras that cost 40 ms a step). */
#define DD_SCHED_TRIAL_STEPS 8

/* delay.c: delayed averaging ("+next"). */
int dd_sched_delay_on(const dd_sched_t *sched);
/* At commit: checks the layers (f32/f64, host or device) and allocates
 * the copies. */
dd_status_t dd_sched_delay_commit(dd_sched_t *sched);
/* Copies a tensor's parameters at the launch of its layer's sync; *buf_p:
 * the buffer the sync averages. */
dd_status_t dd_sched_delay_launch(dd_sched_t *sched, struct dd_layer *layer,
                                  size_t tensor, void **buf_p);
/* A deferred job just submitted. */
dd_status_t dd_sched_delay_track(dd_sched_t *sched, dd_sync_job_t *job);
/* The layer's deadline: waits for its sync in flight (if any) and applies
 * it with the correction; the seconds waited are added to *waited_p. */
dd_status_t dd_sched_delay_land(dd_sched_t *sched, struct dd_layer *layer,
                                double *waited_p);
dd_status_t dd_sched_delay_land_all(dd_sched_t *sched);
/* The jobs whose layers all landed since the last call, for accounting. */
dd_sync_job_t *dd_sched_delay_take_landed(dd_sched_t *sched);
dd_status_t dd_sched_layer_forward(dd_sched_t *sched, dd_layer_h layer,
                                   int with_stream, void *stream);
/* runtime.c: at a forward mark, once the layer's sync in flight landed,
 * its sync of this step leaves (DREAMDDP_NEXT_LAUNCH=early). */
dd_status_t dd_sched_launch_landed(dd_sched_t *sched, struct dd_layer *layer);
/* Before the engine stops: lands what is in flight. */
void dd_sched_delay_quiesce(dd_sched_t *sched);
void dd_sched_delay_free(dd_sched_t *sched);

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

/* compression.c: compression. Layers of fewer elements stay dense unless
 * dd_layer_set_compression says otherwise. */
#define DD_SCHED_DENSE_BELOW 4096
dd_status_t dd_sched_compression_set(dd_sched_t *sched, const char *spec);
dd_status_t dd_sched_layer_set_compression(dd_sched_t *sched, dd_layer_h layer,
                                           const char *spec);
/* At commit, once the replicas are equal: each layer's codec, states and
 * references. */
dd_status_t dd_sched_codecs_commit(dd_sched_t *sched);
/* The codec a tensor of layer travels in, for gradients or parameters. */
const dd_sched_codec_t *dd_sched_tensor_codec(const dd_sched_t *sched,
                                              const struct dd_layer *layer,
                                              size_t tensor, int grads);
/* The bytes a layer's sync puts on the wire, in its codec. */
size_t dd_sched_layer_wire_bytes(const struct dd_layer *layer);
/* The spec a layer is to travel in: its own, or the default rule's. */
const char *dd_sched_layer_codec_spec(const dd_sched_t *sched,
                                      const struct dd_layer *layer);
void dd_sched_codecs_free(dd_sched_t *sched);

/* devmem.c: device layers. */
dd_status_t dd_sched_device_check(dd_sched_t *sched, const char *name,
                                  const dd_tensor_t *tensors, size_t n);
dd_status_t dd_sched_layer_ready_stream(dd_sched_t *sched, dd_layer_h layer,
                                        void *stream);
/* Tags a job of layer's device tensor with its device and readiness. */
void dd_sched_device_job(dd_sched_t *sched, const struct dd_layer *layer,
                         const dd_tensor_t *tensor, dd_sync_job_t *job);
void dd_sched_device_free(dd_sched_t *sched);

/* measure.c */
dd_status_t dd_sched_fit_network(dd_sched_t *sched);
void dd_sched_record_backward(dd_sched_t *sched);
void dd_sched_record_syncs(dd_sched_t *sched, const dd_sync_job_t *done);
dd_status_t dd_sched_schedule_window(dd_sched_t *sched);
/* dd_step_end drained the step's jobs: a background agreement is done. */
void dd_sched_agree_done(dd_sched_t *sched);
dd_status_t dd_sched_adapt(dd_sched_t *sched);

/* drift.c: the divergence monitor. */
/* dd_sched_gather's part: adds what the engine measured to its layers. */
void dd_sched_drift_gather(dd_sched_t *sched, const dd_sync_job_t *job);
/* After a step's (or dd_sync_all's) jobs: each layer measured gets its
 * figure. */
void dd_sched_drift_step(dd_sched_t *sched);
/* This worker's row for the agreement ([n]: DD_DRIFT_NONE where no figure
 * came since the last one). */
void dd_sched_drift_mine(dd_sched_t *sched, double *v);
/* Takes the agreed rows ([n_workers][stride], the figures at offset):
 * stats, warnings, counters. */
dd_status_t dd_sched_drift_agreed(dd_sched_t *sched, const double *all,
                                  size_t stride, size_t offset);
/* ", divergence max X (layer L) mean Y" for the [SYNC] line, or "". */
void dd_sched_drift_summary(const dd_sched_t *sched, char *buf, size_t size);
/* Whether parameter syncs measure the divergence. */
int dd_sched_drift_on(const dd_sched_t *sched);

/* timeline.c */
dd_status_t dd_timeline_open(const dd_sched_t *sched,
                             dd_timeline_t **timeline_p);
void dd_timeline_mark(dd_timeline_t *t, const char *layer, uint64_t step,
                      double at);
void dd_timeline_sync(dd_timeline_t *t, const dd_sched_t *sched,
                      const dd_sync_job_t *job);
/* A layer's divergence counter track ("C" events). */
void dd_timeline_counter(dd_timeline_t *t, const char *layer, double at,
                         double local, double max, double mean);
void dd_timeline_close(dd_timeline_t *t);

#endif
