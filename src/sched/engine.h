/*
 * The progress engine: one thread that runs sync jobs in the order they are
 * submitted (backward order), one at a time, like the single FIFO channel of
 * the planner's cost model, while the application keeps computing. A route
 * that can (the aggregators') overlaps the tail of one job with the head of
 * the next; the times recorded keep the channel's order (a job starts no
 * earlier than the previous one ends). It knows nothing of strategies: a job
 * is a list of buffers to average, and the route (backend allreduce or
 * aggregators) is given to it.
 */
#ifndef DD_SCHED_ENGINE_H
#define DD_SCHED_ENGINE_H

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

struct dd_sync_job;

/** Averages count elements in buf across the workers, in place; job says
 *  which step and layers buf belongs to (for headers and messages). */
typedef dd_status_t (*dd_sync_route_fn_t)(void *arg,
                                          const struct dd_sync_job *job,
                                          void *buf, size_t count,
                                          dd_dtype_t dtype,
                                          dd_mem_type_t mem_type);

/**
 * A route that overlaps consecutive jobs (the aggregators'): start takes a
 * job's buffer and returns at once; test moves every started job and
 * returns DD_OK once the given one is done, DD_INPROGRESS before, or its
 * error; *busy_p says whether anything moved. The engine keeps at most
 * DD_ENGINE_DEPTH jobs started and finishes them in order.
 */
typedef struct {
    dd_status_t (*start)(void *arg, const struct dd_sync_job *job, void *buf,
                         size_t count, dd_dtype_t dtype, dd_mem_type_t mem_type,
                         void **handle_p);
    dd_status_t (*test)(void *arg, void *handle, int *busy_p);
} dd_sync_pipe_t;

#define DD_ENGINE_DEPTH 2

typedef struct {
    void *buf;
    size_t count;
} dd_sync_item_t;

typedef struct dd_sync_job {
    struct dd_sync_job *next;
    uint64_t step;
    dd_dtype_t dtype;
    dd_mem_type_t mem_type;
    size_t bytes;
    size_t n_items;
    dd_sync_item_t *items;
    size_t n_layers;
    size_t *layers; /* indices of the layers the job syncs */
    double t_submit, t_start, t_end;
    void *handle; /* the pipe's, while started */
    int finished; /* the pipe is done with it */
    dd_status_t status;
    char why[512]; /* the engine thread's error message, when it failed */
} dd_sync_job_t;

typedef struct dd_engine dd_engine_t;

/** Starts the thread; pipe, when not NULL, is used instead of route. */
dd_status_t dd_engine_start(dd_sync_route_fn_t route,
                            const dd_sync_pipe_t *pipe, void *route_arg,
                            dd_engine_t **engine_p);

/** Hands job to the engine; it comes back from dd_engine_drain. */
void dd_engine_submit(dd_engine_t *engine, dd_sync_job_t *job);

/**
 * Waits until every submitted job has run and returns them in submission
 * order (the caller frees them). DD_ERR_TIMED_OUT when the engine did not
 * finish within timeout_s; the jobs then stay with the engine.
 */
dd_status_t dd_engine_drain(dd_engine_t *engine, double timeout_s,
                            dd_sync_job_t **done_p);

/** Frees a job list. */
void dd_sync_job_free_list(dd_sync_job_t *job);

/** Stops the thread after the jobs in flight. */
void dd_engine_stop(dd_engine_t *engine);

#endif
