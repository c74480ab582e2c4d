/*
 * The progress engine: one thread that runs sync jobs in the order they are
 * submitted (backward order) over N channels, N the stream count, like the
 * channels of the planner's cost model (plan.h), while the application
 * keeps computing. Every route is a pipe (start, test); one that can
 * overlaps the tail of one job with the head of the next. Jobs start in
 * submission order, the same on every worker, so the backends pair their
 * operations alike; each job goes, at submission, to the channel that
 * the runtime's rule (dd_engine_set_assign) gives from its step and size, and
 * is handed back as soon as it and the earlier jobs of its channel are done: a
 * small job does not wait for a large one on another channel. One channel is
 * the single FIFO channel: jobs handed back in order, and the times recorded
 * keep its order (a job starts no earlier than the previous one ends). It knows
 * nothing of strategies: a job is a list of buffers to average, or a
 * collective the application asked for, and the pipe is given to it.
 */
#ifndef DD_SCHED_ENGINE_ENGINE_H
#define DD_SCHED_ENGINE_ENGINE_H

#include "core/abort.h"

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

struct dd_sync_job;
struct dd_sched_codec;
struct dd_codec_state;

/**
 * How jobs travel: every route (the backends' allreduce among workers, the
 * aggregators) is one non-blocking pipe. start takes a job's wire buffer
 * (the job's own buffer, or its items packed) and returns at once; test
 * moves every started job and returns DD_OK once the given one is done,
 * DD_INPROGRESS before, or its error; *busy_p says whether anything moved.
 * A pipe overlaps up to depth jobs in flight (1 to DD_ENGINE_DEPTH times
 * the channels, each its own handle); the engine hands them back in order
 * per channel. A pipe of depth 1 runs alone. test also sets DD_SYNC_POLL
 * in *busy_p while its job moves only when tested (a backend without
 * DD_BACKEND_CAP_ASYNC, such as UCX, progresses in test): the engine then
 * naps at most DD_POLL_NAP_S between tests instead of backing off to
 * DD_IDLE_NAP_S, which suits backends whose own threads move the data
 * (Gloo, NCCL) and leaves them the cores; one whose threads ring the
 * doorbell as its operations complete (Gloo: DD_SYNC_NOTIFY) is tested
 * when it rings. The aggregators' client and
 * servers keep their long naps: their window of chunks in flight hides a
 * nap, and on hosts that share cores, polling at DD_POLL_NAP_S took cores
 * from the others (bench/NOTES.md, "Measurements moved from code
 * comments").
 */
typedef struct {
    dd_status_t (*start)(void *arg, struct dd_sync_job *job, void *buf,
                         size_t count, void **handle_p);
    dd_status_t (*test)(void *arg, void *handle, int *busy_p);
    int depth;
    void *arg;
    /* DREAMDDP_CHECK_FINITE: the pipe sets a job's input_bad and result_bad
     * itself, in passes it makes anyway; otherwise the engine reads the
     * values before start and the average after. */
    int checks_finite;
} dd_sync_pipe_t;

#define DD_ENGINE_DEPTH 2

/* Delayed averaging's allreduce pipe overlaps three jobs on its one
 * channel: its syncs run back to back with none of backward's gaps to fill,
 * and a third in flight fills the ring's gaps at the end and start of each
 * message. Train simulator, gpt2-blocks at scale 0.25, forward 0.5,
 * dreamddp:4+next with forward marks, 4 hosts at 1 Gbit/s, three pairs
 * alternated: 0.411, 0.410 and 0.404 s per iteration against 0.419, 0.417
 * and 0.414 with two. */
#define DD_ENGINE_DEPTH_DELAYED 3

/* The bit of a test's *busy_p that says the operation moves only when
 * tested (UCX), so it should be tested again soon; the other bits say whether
 * anything moved. */
#define DD_SYNC_POLL (1 << 30)

/* The bit of a test's *busy_p that says the job's operation rings the
 * doorbell when it completes (its backend has DD_BACKEND_CAP_NOTIFY, and
 * nothing else of the job waits for a test: core/bell.h). A pipe that
 * tests several things for a job sets it only where each of them would
 * ring. */
#define DD_SYNC_NOTIFY (1 << 29)

/* The longest nap between tests with nothing moving: while some operation
 * asks for DD_SYNC_POLL, and otherwise. Naps start at 20 us and double,
 * and end at a ring of the doorbell. While every job in flight says
 * DD_SYNC_NOTIFY, the engine waits for a ring, DD_NOTIFY_NAP_S at most
 * (what a ring should have said but did not is seen that late). */
#define DD_POLL_NAP_S 50e-6
#define DD_IDLE_NAP_S 1e-3
#define DD_NOTIFY_NAP_S 20e-3

typedef struct {
    void *buf;
    size_t count;
    /* Compressed jobs (codec_pipe.c): the tensor's codec state, and its
     * values at the last sync when what travels is the change since then
     * (NULL: the buffer itself travels). */
    struct dd_codec_state *state;
    float *ref;
    /* The divergence monitor (drift.c): the layer the buffer belongs to,
     * and, once the engine measured it, ||local - average||^2 and
     * ||average||^2. */
    size_t layer;
    int measured;
    double diff2, norm2;
} dd_sync_item_t;

/* What a job averages: part of the digest that precedes its collective
 * (route.c), so that two kinds of sync never meet in one sum. */
typedef enum {
    DD_JOB_PARAMS = 0, /* a step's parameters (the averaging strategies) */
    DD_JOB_GRADS,      /* a step's gradients (ddp, adaptive) */
    DD_JOB_SYNC_ALL    /* dd_sync_all's parameters */
} dd_job_kind_t;

typedef struct dd_sync_job {
    struct dd_sync_job *next;
    uint64_t step;
    uint64_t plan_serial; /* the runtime's plans so far: route/coll.c
                             foresees from steps of the same plan only */
    dd_job_kind_t kind;
    dd_dtype_t dtype;
    dd_mem_type_t mem_type;
    size_t bytes;
    size_t n_items;
    dd_sync_item_t *items;
    size_t n_layers;
    size_t *layers;      /* indices of the layers the job syncs */
    size_t *layer_bytes; /* [n_layers] bytes of each of them in this job: a
                            layer can be split over two jobs */
    /* The pipe it travels through; NULL: the engine's route. */
    const dd_sync_pipe_t *pipe;
    const void *op; /* what the pipe does; NULL: average in place */
    /* The codec the buffers travel in (NULL: as they are), and the bytes
     * that travel (bytes without a codec). */
    const struct dd_sched_codec *codec;
    size_t wire_bytes;
    int waited;   /* dd_engine_call waits for it: not drained */
    int deferred; /* delayed averaging (delay.c) waits for it alone, at
                     its layers' deadlines: not drained, and dd_engine_drain
                     does not wait for it; its host f32 or f64 buffers,
                     copies of the parameters, come back holding
                     average - copy (they travel through staging) */
    int measure;  /* parameters: measure each item's divergence before the
                     average is written back (it then travels through
                     staging even alone) */
    int control;  /* a small collective of the runtime's own (the workers'
                     agreement on the times), one at a time, in its place
                     in the queue: beside jobs of its own pipe it starts
                     whatever their depth (beside another pipe's it counts
                     as any job); it has no channel of the plan's, so it
                     neither counts in a channel's times nor waits for the
                     jobs ahead of it to be handed back */
    /* t_launch: when the engine handed it to its pipe; t_start: when it
     * had its channel to itself (t_launch, or the previous job's end on
     * the channel when the two overlapped), as the planner's FIFO channel
     * counts it. wire_s: its time on the wire, as the planner counts it:
     * t_end - t_start with one channel; with several, the share of the
     * wire it had (1/k of the time k channels were on it), what it would
     * have taken alone. */
    double t_submit, t_launch, t_start, t_end, wire_s;
    uint64_t seq;   /* submission order */
    int channel;    /* 0 .. channels - 1, from the runtime's rule
                       (dd_engine_set_assign) */
    int share_head; /* the engine's: on the wire for its channel */
    void *handle;   /* the pipe's, while started */
    int finished;   /* the pipe is done with it */
    dd_status_t status;
    char why[512]; /* the engine thread's error message, when it failed */
    /* Device jobs (staging.c): the event the buffers are final after (NULL:
     * they are), the device, and the seconds spent copying that no network
     * overlapped. */
    struct dd_device_event *ready_event;
    int device;
    double staging_s;
    /* DREAMDDP_CHECK_FINITE (finite.c): whether this worker's values were
     * all finite as they left (input_bad) and the average as it landed
     * (result_bad), set by the pipe or the engine (checks_finite). Host
     * float buffers only. */
    int check_finite, input_bad, result_bad;
} dd_sync_job_t;

typedef struct dd_engine dd_engine_t;

/** The most channels an engine runs (the planner's DD_PLAN_MAX_CHANNELS:
 *  the runtime checks that the two agree). */
#define DD_ENGINE_MAX_CHANNELS 8

/** The channel rule: the channel (0 .. channels - 1) of the next job of
 *  a step and a size, called in submission order under the engine's lock
 *  (so that every worker assigns alike). */
typedef unsigned (*dd_engine_assign_fn_t)(void *arg, uint64_t step,
                                          double work);

/** Starts the thread with one channel; route is the pipe of jobs that
 *  name none. */
dd_status_t dd_engine_start(const dd_sync_pipe_t *route,
                            dd_engine_t **engine_p);

/** Starts the thread with channels channels (1 to DD_ENGINE_MAX_CHANNELS,
 *  else DD_ERR_INVALID_PARAM naming the count); every job runs on channel
 *  0 until dd_engine_set_assign gives the rule. */
dd_status_t dd_engine_start_channels(const dd_sync_pipe_t *route, int channels,
                                     dd_engine_t **engine_p);

/**
 * Watches the job's fate: once abort is raised, the jobs in flight and
 * those still to start fail with its reason (their pipes' handles are
 * abandoned, and the staging buffers leaked, since a backend may still
 * complete them). A job in flight for more than timeout_s (0: no bound)
 * fails too.
 */
void dd_engine_set_abort(dd_engine_t *engine, dd_abort_t *abort,
                         double timeout_s);

/** What a delayed average changes, f32 or f64 (delay.c): dst = avg - copy
 *  element by element (dst may be either). A deferred job's host buffers
 *  come back holding it; the device pipe takes it between its staging
 *  copies. */
void dd_engine_delta(void *dst, const void *avg, const void *copy, size_t count,
                     dd_dtype_t dtype);

/** The rule that puts each job (but a control job, on channel 0) on a
 *  channel; before the first submission. */
void dd_engine_set_assign(dd_engine_t *engine, dd_engine_assign_fn_t assign,
                          void *arg);

/** Hands job to the engine; it comes back from dd_engine_drain. */
void dd_engine_submit(dd_engine_t *engine, dd_sync_job_t *job);

/**
 * Waits until every submitted job has run and returns them in submission
 * order, whatever order they finished in (the caller frees them).
 * DD_ERR_TIMED_OUT when the engine did not finish within timeout_s; the jobs
 * then stay with the engine.
 */
dd_status_t dd_engine_drain(dd_engine_t *engine, double timeout_s,
                            dd_sync_job_t **done_p);

/**
 * Runs job in its turn and waits for it alone (a collective the
 * application asked for, ordered with the layers' syncs): returns its
 * status, or DD_ERR_TIMED_OUT after timeout_s, when the job stays with the
 * engine. The caller keeps and frees job.
 */
dd_status_t dd_engine_call(dd_engine_t *engine, dd_sync_job_t *job,
                           double timeout_s);

/**
 * Waits for a job submitted with deferred set, whose fate is the caller's:
 * returns its status once the engine is done with it, or DD_ERR_TIMED_OUT
 * after timeout_s, when the job stays with the engine. The caller frees it
 * once it is done.
 */
dd_status_t dd_engine_wait(dd_engine_t *engine, dd_sync_job_t *job,
                           double timeout_s);

/** Frees a job list. */
void dd_sync_job_free_list(dd_sync_job_t *job);

/** Stops the thread after the jobs in flight. */
void dd_engine_stop(dd_engine_t *engine);

#endif
