/*
 * The shared point-to-point collectives: ring and recursive doubling for
 * allreduce, reduce-scatter and allgather, a binomial tree for broadcast,
 * cut into chunks so that large messages pipeline. Written once against the
 * ops table's send, recv, check and cancel, and compiled into every module
 * that lacks native collectives. A plan is the pure part (steps and their
 * dependencies); a request executes a plan without blocking.
 */
#ifndef DD_BACKENDS_COLL_COLL_H
#define DD_BACKENDS_COLL_COLL_H

#include <dreamddp/backend.h>

#include <stddef.h>
#include <stdint.h>

/** Messages up to this size take recursive doubling, larger ones a ring. */
#define DD_COLL_SMALL_BYTES (64u * 1024u)

/** Default chunk of a pipelined message. */
#define DD_COLL_CHUNK_BYTES (1024u * 1024u)

/** Message ids of one collective fit in this many bits of the tag. */
#define DD_COLL_MSG_BITS 20

typedef enum {
    DD_COLL_STEP_SEND = 0,
    DD_COLL_STEP_RECV,
    DD_COLL_STEP_REDUCE, /* dst = dst op src */
    DD_COLL_STEP_COPY    /* dst = src */
} dd_coll_step_kind_t;

/* One step. Dependencies are earlier steps, as index + 1 (0: none). */
typedef struct {
    dd_coll_step_kind_t kind;
    int peer;        /* send, recv */
    uint32_t msg;    /* send, recv: the same id on both sides */
    void *dst;       /* recv, reduce, copy */
    const void *src; /* send, reduce, copy */
    size_t count;    /* elements */
    uint32_t dep[2];
} dd_coll_step_t;

typedef struct {
    dd_coll_step_t *steps;
    size_t n_steps;
    size_t cap;
    void *scratch;    /* owned by the plan */
    void *divide_buf; /* DD_REDUCE_AVG: divided once all steps are done */
    size_t divide_count;
    int divisor;
    dd_dtype_t dtype;
    dd_reduce_op_t op;
} dd_coll_plan_t;

/**
 * Plans coll (allreduce, broadcast, reduce_scatter or allgather) for rank
 * of world on host memory, cutting messages into chunks of about
 * chunk_bytes. Returns DD_OK, DD_ERR_NO_MEMORY, or DD_ERR_INVALID_PARAM.
 */
dd_status_t dd_coll_plan_build(dd_coll_plan_t *plan, dd_coll_t coll,
                               const dd_backend_args_t *args, int rank,
                               int world, size_t chunk_bytes);

void dd_coll_plan_release(dd_coll_plan_t *plan);

/** Signature of a collective, which ranks must agree on: 11 bits. */
uint32_t dd_coll_signature(dd_coll_t coll, const dd_backend_args_t *args);

/** The tag of message msg of the seq-th collective with signature sig. */
uint64_t dd_coll_tag(uint32_t sig, uint32_t seq, uint32_t msg);

/** What an executing collective needs from its module. */
typedef struct {
    /* send, recv, check, cancel, progress, idle: check for every message
     * in flight on every pass, which only looks; the executor progresses
     * once per pass (dd_coll_test) or waits in idle (dd_coll_wait). */
    const dd_backend_ops_t *ops;
    dd_backend_t *backend;
    const dd_backend_services_t *services;
    int rank;
    int world;
    size_t chunk_bytes;
} dd_coll_comm_t;

typedef struct dd_coll_req dd_coll_req_t;

/** Plans and starts a collective; seq numbers the instance's collectives. */
dd_status_t dd_coll_start(const dd_coll_comm_t *comm, dd_coll_t coll,
                          const dd_backend_args_t *args, uint32_t seq,
                          dd_coll_req_t **req_p);

/** As dd_backend_ops_t::test: DD_INPROGRESS, or final (released). */
dd_status_t dd_coll_test(dd_coll_req_t *req);

/** As dd_backend_ops_t::wait: DD_INPROGRESS (reported) at the timeout. */
dd_status_t dd_coll_wait(dd_coll_req_t *req, double timeout_s);

/** As dd_backend_ops_t::cancel. */
void dd_coll_cancel(dd_coll_req_t *req);

/* Names for messages; modules cannot call the core's public ones, since a
 * test program may hold the core without exporting it. */
const char *dd_coll_kind_name(dd_coll_t coll);
const char *dd_coll_dtype_name(dd_dtype_t dtype);

/* Reporting through the services, formatted like the core's messages. */
void dd_coll_log(const dd_backend_services_t *services, int level,
                 const char *fmt, ...) __attribute__((format(printf, 3, 4)));
dd_status_t dd_coll_error(const dd_backend_services_t *services,
                          dd_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
