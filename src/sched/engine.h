/*
 * The progress engine: one thread that runs sync jobs in the order they are
 * submitted (backward order), one at a time, like the single FIFO channel of
 * the planner's cost model, while the application keeps computing. It knows
 * nothing of strategies: a job is a list of buffers to average, and the
 * route (backend allreduce or aggregators) is a function it is given.
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
    dd_status_t status;
    char why[512]; /* the engine thread's error message, when it failed */
} dd_sync_job_t;

typedef struct dd_engine dd_engine_t;

dd_status_t dd_engine_start(dd_sync_route_fn_t route, void *route_arg,
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
