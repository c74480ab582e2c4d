/*
 * The scheduler's configuration table. Declares variables only; the
 * strategy string is checked by strategy.c when the context starts.
 */
#include "sched/sched_config.h"

#include <stddef.h>

const char *const dd_route_names[] = {"auto", "allreduce", "aggregate",
                                      "hierarchical", NULL};
const char *const dd_next_launch_names[] = {"early", "backward", NULL};
const char *const dd_agg_loss_names[] = {"survive", "stop", NULL};
const char *const dd_check_finite_names[] = {"warn", "error", "no", NULL};

static const dd_config_field_t dd_sched_fields[] = {
    {"DREAMDDP_STRATEGY", "ddp",
     "Synchronization strategy: ddp, localsgd:H, plsgd:H, dreamddp:H (the "
     "last three also with +next: delayed averaging), adaptive or "
     "adaptive:drift.",
     DD_CONFIG_STRING, offsetof(dd_sched_opts_t, strategy), 0, 0, NULL},
    {"DREAMDDP_BUCKET_BYTES", "25M",
     "ddp: gradient bucket size after the first bucket.", DD_CONFIG_SIZE,
     offsetof(dd_sched_opts_t, bucket_bytes), 0, 0, NULL},
    {"DREAMDDP_FIRST_BUCKET_BYTES", "1M",
     "ddp: size of the first gradient bucket, launched early in backward.",
     DD_CONFIG_SIZE, offsetof(dd_sched_opts_t, first_bucket_bytes), 0, 0, NULL},
    {"DREAMDDP_FUSION_BYTES", "1M",
     "Largest fused parameter message: a layer's tensors travel together "
     "up to this size, and a layer joins the message before it where the "
     "plan has that message waiting for the channel anyway.",
     DD_CONFIG_SIZE, offsetof(dd_sched_opts_t, fusion_bytes), 0, 0, NULL},
    {"DREAMDDP_PROFILE_STEPS", "5",
     "Steps measured before dreamddp plans (every layer is synced once "
     "meanwhile).",
     DD_CONFIG_INT, offsetof(dd_sched_opts_t, profile_steps), 1, 1000000, NULL},
    {"DREAMDDP_REPLAN_DRIFT", "0.2",
     "dreamddp re-plans when measured times drift this much from the "
     "plan's at two checks in a row (DREAMDDP_REPLAN_WINDOWS).",
     DD_CONFIG_FLOAT, offsetof(dd_sched_opts_t, replan_drift), 0, 100, NULL},
    {"DREAMDDP_REPLAN_WINDOWS", "4",
     "dreamddp: windows between checks of the measured times against the "
     "plan's (agreed in the background); a re-plan takes the drift at two "
     "checks in a row.",
     DD_CONFIG_INT, offsetof(dd_sched_opts_t, replan_windows), 1, 1000000,
     NULL},
    {"DREAMDDP_FILL_BUBBLES", "yes",
     "dreamddp: also sync layers in steps where the plan's model has their "
     "sync hidden behind backward (bubble filling) even were every sync 1.5 "
     "times slower, 3 times under delayed averaging (+next); the extra "
     "bytes are in the step statistics. A plan with extras then runs at "
     "least 8 steps with them and as many without (its times checked at "
     "every window meanwhile, whatever DREAMDDP_REPLAN_WINDOWS), and keeps "
     "them only if the "
     "measured time per iteration with them is within 10 %; dropped once, "
     "no later plan fills.",
     DD_CONFIG_BOOL, offsetof(dd_sched_opts_t, fill_bubbles), 0, 0, NULL},
    {"DREAMDDP_NEXT_LAUNCH", "early",
     "Under delayed averaging (+next), when a layer's sync leaves: early, "
     "once its parameters are the step's (at dd_step_begin when none of "
     "its syncs is in flight, else right after that one lands at its "
     "forward mark; host layers, and device layers whose stream the "
     "application named), or backward, after the layer's backward "
     "(dd_layer_ready). Either way the sync averages the parameters as "
     "they were when it left, and its landing keeps what changed since.",
     DD_CONFIG_ENUM, offsetof(dd_sched_opts_t, next_launch), 0, 0,
     dd_next_launch_names},
    {"DREAMDDP_TIMELINE", NULL,
     "Write a Chrome-trace JSON of backward marks and syncs (with when each "
     "was launched) to this file (%r: rank); `ddbench timeline merge` puts "
     "the ranks' files on one clock, a track per rank.",
     DD_CONFIG_STRING, offsetof(dd_sched_opts_t, timeline), 0, 0, NULL},
    {"DREAMDDP_TEST_CLOCK_SKEW_US", "0",
     "For tests: microseconds added to this rank's wall clock where the "
     "timeline and the clock agreement at dd_model_commit read it, to give "
     "ranks of one host different clocks.",
     DD_CONFIG_FLOAT, offsetof(dd_sched_opts_t, clock_skew_us), -1000000000,
     1000000000, NULL},
    {"DREAMDDP_ADAPTIVE_KMIN", "1", "adaptive: shortest sync period, in steps.",
     DD_CONFIG_INT, offsetof(dd_sched_opts_t, adaptive_kmin), 1, 1024, NULL},
    {"DREAMDDP_ADAPTIVE_KMAX", "16", "adaptive: longest sync period, in steps.",
     DD_CONFIG_INT, offsetof(dd_sched_opts_t, adaptive_kmax), 1, 1024, NULL},
    {"DREAMDDP_ADAPTIVE_KSTART", "4",
     "adaptive: every layer's period at the start, in steps (kept within "
     "KMIN..KMAX).",
     DD_CONFIG_INT, offsetof(dd_sched_opts_t, adaptive_kstart), 1, 1024, NULL},
    {"DREAMDDP_ADAPTIVE_HIGH", "1.3",
     "adaptive: a layer's period shortens when its gradient-norm EMA grew "
     "by more than this ratio.",
     DD_CONFIG_FLOAT, offsetof(dd_sched_opts_t, adaptive_high), 1, 100, NULL},
    {"DREAMDDP_ADAPTIVE_LOW", "0.8",
     "adaptive: a layer's period lengthens when its gradient-norm EMA fell "
     "below this ratio.",
     DD_CONFIG_FLOAT, offsetof(dd_sched_opts_t, adaptive_low), 0, 1, NULL},
    {"DREAMDDP_ADAPTIVE_INTERVAL", "8",
     "adaptive: steps between period updates (periods move by one step at "
     "most per update).",
     DD_CONFIG_INT, offsetof(dd_sched_opts_t, adaptive_interval), 1, 100000,
     NULL},
    {"DREAMDDP_ROUTE", "auto",
     "How syncs travel: auto (aggregate when the job has aggregators), "
     "allreduce among workers, aggregate through aggregators, or "
     "hierarchical: the workers of a host sum their device layers through "
     "CUDA IPC, the host's lowest worker rank moves that sum through the "
     "aggregators (without any: an allreduce among those ranks), and the "
     "average comes back through IPC; host layers then go by the workers' "
     "allreduce. auto never picks hierarchical: every rank, aggregators "
     "too, must know it at dd_init.",
     DD_CONFIG_ENUM, offsetof(dd_sched_opts_t, route), 0, 0, dd_route_names},
    {"DREAMDDP_CHUNK_BYTES", "1M",
     "Aggregation cuts messages into chunks of at most this size, each "
     "with one home (smaller messages into 16 per home, from 64K).",
     DD_CONFIG_SIZE, offsetof(dd_sched_opts_t, chunk_bytes), 0, 0, NULL},
    {"DREAMDDP_DETERMINISTIC", "no",
     "yes: what syncs when follows from the settings, the model and the "
     "seed, never from a clock: dreamddp plans from the layers' sizes and a "
     "fixed rate model (or DREAMDDP_PLAN) and never re-plans; two runs of "
     "the same seed give the same bits.",
     DD_CONFIG_BOOL, offsetof(dd_sched_opts_t, deterministic), 0, 0, NULL},
    {"DREAMDDP_PLAN", NULL,
     "A plan saved by DREAMDDP_PLAN_SAVE to put in force instead of "
     "planning (checked against the model and the job at the first plan); "
     "it is never re-made. A regular file of at most 16 MiB, read at "
     "commit; every worker must have the same plan (or none).",
     DD_CONFIG_STRING, offsetof(dd_sched_opts_t, plan), 0, 0, NULL},
    {"DREAMDDP_PLAN_SAVE", NULL,
     "Write every plan the run puts in force to this file (worker rank 0; "
     "%r becomes the rank), for DREAMDDP_PLAN.",
     DD_CONFIG_STRING, offsetof(dd_sched_opts_t, plan_save), 0, 0, NULL},
    {"DREAMDDP_CHECK_FINITE", "warn",
     "A sync whose average holds NaN or Inf (host float buffers): warn, "
     "said once per layer per window naming the step and the workers whose "
     "values were not finite; error, the call that drained it fails with "
     "DD_ERR_NUMERIC; no, not looked at. On the workers' allreduce it "
     "rides on the division each worker makes before the sum; through the "
     "aggregators or the hierarchical route it reads every value sent and "
     "every average.",
     DD_CONFIG_ENUM, offsetof(dd_sched_opts_t, check_finite), 0, 0,
     dd_check_finite_names},
    {"DREAMDDP_AGG_LOSS", "survive",
     "A lost aggregator (killed, cut off, frozen): survive, the workers "
     "agree on the ones left, move its chunks to them (to their own homes "
     "when none is left) and redo the syncs it interrupted; stop, the job "
     "stops naming it. Not under DREAMDDP_ROUTE=hierarchical, which stops.",
     DD_CONFIG_ENUM, offsetof(dd_sched_opts_t, agg_loss), 0, 0,
     dd_agg_loss_names},
    {"DREAMDDP_AGG_LOST_AFTER_S", "5s",
     "An aggregator whose heartbeat stands still this long is lost "
     "(DREAMDDP_AGG_LOSS=survive); a killed one is known at once.",
     DD_CONFIG_DURATION, offsetof(dd_sched_opts_t, agg_lost_after_s), 0, 86400,
     NULL},
    {"DREAMDDP_FIND_UNUSED", "no",
     "Layers not marked ready by dd_step_end count as unused in that step "
     "(as dd_layer_unused says; DDP's find_unused_parameters) instead of "
     "failing the step.",
     DD_CONFIG_BOOL, offsetof(dd_sched_opts_t, find_unused), 0, 0, NULL},
    {"DREAMDDP_COMPRESSION", "none",
     "Codec of the syncs: none, fp16, bf16, topk:RATIO or powersgd:RANK. It "
     "applies to f32 host layers of at least 4096 elements; smaller layers "
     "(biases, norms) stay dense, as do powersgd's tensors without a shape "
     "(dd_tensor_t rows and cols) or that its factors would not shrink, "
     "and dd_layer_set_compression overrides it per layer. ddp compresses "
     "gradients, the other strategies the parameters' change since the "
     "layer's last sync.",
     DD_CONFIG_STRING, offsetof(dd_sched_opts_t, compression), 0, 0, NULL},
    {"DREAMDDP_DRIFT", "yes",
     "Measure at every parameter sync each layer's relative divergence "
     "(the norm of x - avg over the norm of avg, in the progress engine, "
     "before the average is written back); the workers agree on its "
     "maximum and mean at every window's start (dd_layer_stats, the [SYNC] "
     "line, the timeline). A layer of more than 65536 elements is measured "
     "on a sample of about 65536 (blocks of 64 spread over it), which "
     "keeps its cost within 2 % of the train simulator's time per "
     "iteration; adaptive:drift measures however it is set.",
     DD_CONFIG_BOOL, offsetof(dd_sched_opts_t, drift), 0, 0, NULL},
    {"DREAMDDP_DRIFT_WINDOWS", "3",
     "Warn when a layer's agreed maximum divergence rose by more than 10 % "
     "at this many windows in a row; a warning silences the layer for as "
     "many windows.",
     DD_CONFIG_INT, offsetof(dd_sched_opts_t, drift_windows), 1, 1000000, NULL},
    {"DREAMDDP_DRIFT_WARN", "1.0",
     "Warn when a layer's agreed maximum divergence exceeds this (0: never); "
     "at 1 a replica lies as far from the average as the average from 0.",
     DD_CONFIG_FLOAT, offsetof(dd_sched_opts_t, drift_warn), 0, 1000000, NULL},
    {"DREAMDDP_DRIFT_TARGET", "0.06",
     "adaptive:drift: a layer's period shortens when its agreed maximum "
     "divergence exceeds this, and lengthens below half of it.",
     DD_CONFIG_FLOAT, offsetof(dd_sched_opts_t, drift_target), 0, 1000000,
     NULL},
    {"DREAMDDP_LAYER_SPLIT", "auto",
     "Host layers larger than this many bytes are planned and synced in "
     "parts of about equal size (cut at whole rows), so that a part can "
     "sync in each of several steps of the window: auto cuts under delayed "
     "averaging (+next) only, at the model's bytes over 2H and not below "
     "4M; no never cuts; ddp never does. dd_layer_part shows the parts.",
     DD_CONFIG_STRING, offsetof(dd_sched_opts_t, layer_split), 0, 0, NULL},
};

const dd_config_table_t dd_sched_config_table = {
    "sched", dd_sched_fields, DD_CONFIG_FIELDS_COUNT(dd_sched_fields)};
