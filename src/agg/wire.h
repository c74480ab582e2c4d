/*
 * What the aggregation files share: the message header, the tags, and the
 * transport over the job's point-to-point backend (UCX by score). Private
 * to the files of src/agg.
 *
 * A push is two messages from a worker to a home: a header on the sender's
 * header stream (one tag, so headers arrive in the order sent), then the
 * data on a tag of its own. A result is a header and, when the header says
 * the sum succeeded, the data, both on tags of the chunk's sequence number.
 * Every worker numbers chunks the same way (it syncs the same messages in
 * the same order), so a sequence number names one chunk job-wide.
 */
#ifndef DD_AGG_WIRE_H
#define DD_AGG_WIRE_H

#include "agg/agg.h"

#include <dreamddp/backend.h>

#define DD_AGG_MAGIC 0x47414444u /* "DDAG" */
/* Bumped on any change to the header or to what a kind's data holds: a
 * rank of another build is refused by name, never misread. 2: sparse
 * pieces (kinds 4 and 5, format and nnz). 3: what (the message's digest).
 * 4: RESET (a lost aggregator's chunks redone under new numbers). 5: a
 * RESET names its recovery round in step. */
#define DD_AGG_VERSION 5u
#define DD_AGG_WHY 160
/* Pieces a worker has in flight at once (client.c); its own home takes
 * as many of them (server.c), so it never turns one away. */
#define DD_AGG_WINDOW 24

/*
 * A sparse message (topk's pieces) travels as PUSH_SPARSE and
 * RESULT_SPARSE: count is the chunk's dense f32 elements, and the data is
 * in the header's format: DENSE, count f32; PAIRS, nnz uint32 offsets in
 * the chunk (increasing) then their nnz f32 values. A home scatters every
 * worker's piece into a zeroed f32 chunk, in worker order, and answers in
 * whichever format is smaller. A result's data is received once its
 * header says how large it is.
 */
enum {
    DD_AGG_PUSH = 1,
    DD_AGG_RESULT = 2,
    DD_AGG_BYE = 3,
    DD_AGG_PUSH_SPARSE = 4,
    DD_AGG_RESULT_SPARSE = 5,
    /* After a lost aggregator, on the header stream: every chunk numbered
     * below seq is abandoned (the workers redo it under new numbers), so
     * a home drops its sums and any late push of one. step is the
     * recovery round, which the home checks against the store's record
     * of it (server.c) before it abandons anything. */
    DD_AGG_RESET = 6
};
enum { DD_AGG_FMT_DENSE = 0, DD_AGG_FMT_PAIRS = 1 };
enum {
    DD_AGG_TAG_HDR = 1,  /* push headers and goodbyes, in order */
    DD_AGG_TAG_DATA = 2, /* a push's data, by sequence number */
    DD_AGG_TAG_RHDR = 3, /* a result's header, by sequence number */
    DD_AGG_TAG_RDATA = 4 /* a result's data, by sequence number */
};

/* The wire header: 256 bytes, host byte order (clusters are homogeneous). */
typedef struct {
    uint32_t magic;
    uint32_t kind;
    uint64_t token; /* hash of the job token */
    uint64_t seq;   /* chunk sequence number */
    uint64_t step;
    uint32_t layer;  /* first layer of the synced message */
    uint32_t chunk;  /* index of the chunk in the message */
    uint64_t offset; /* of the chunk in the message, elements */
    uint64_t count;  /* elements in the chunk */
    uint32_t dtype;
    int32_t sender; /* job rank */
    int32_t status; /* results: DD_OK, or the error why names */
    uint32_t n_workers;
    uint32_t version; /* DD_AGG_VERSION */
    uint32_t format;  /* DD_AGG_FMT_*: sparse kinds only, else DENSE */
    uint64_t nnz;     /* pairs in a PAIRS piece, else 0 */
    uint64_t what;    /* dd_agg_id_t::what of the message */
    char why[DD_AGG_WHY];
} dd_agg_hdr_t;

struct dd_agg_transport {
    const dd_agg_env_t *env;
    const dd_backend_ops_t *ops;
    dd_backend_t *backend;
    uint64_t token;
};

typedef dd_backend_request_t dd_agg_req_t;

dd_status_t dd_agg_transport_init(const dd_agg_env_t *env,
                                  dd_agg_transport_t *t);
uint64_t dd_agg_tag(int kind, uint64_t seq);
dd_status_t dd_agg_send(dd_agg_transport_t *t, int peer, uint64_t tag,
                        const void *buf, size_t bytes, dd_agg_req_t **req_p);
dd_status_t dd_agg_recv(dd_agg_transport_t *t, int peer, uint64_t tag,
                        void *buf, size_t bytes, dd_agg_req_t **req_p);
/* DD_INPROGRESS, or the final status (which releases the request). */
dd_status_t dd_agg_test(dd_agg_transport_t *t, dd_agg_req_t *req);
/* The same without progressing the transport: a pass over many requests
 * progresses it once (dd_agg_progress) and then checks each. */
dd_status_t dd_agg_check(dd_agg_transport_t *t, dd_agg_req_t *req);
void dd_agg_progress(dd_agg_transport_t *t);
/* Until the transport may have something to progress, timeout_s at most. */
void dd_agg_idle(dd_agg_transport_t *t, double timeout_s);
void dd_agg_cancel(dd_agg_transport_t *t, dd_agg_req_t *req);

/* Checks magic, token, kind, sender, dtype, status and sequence number;
 * why says what is wrong. */
int dd_agg_hdr_valid(const dd_agg_transport_t *t, const dd_agg_hdr_t *h,
                     uint32_t kind, int sender, char *why, size_t size);

/* The bytes of a push's or a result's data, when its count, dtype,
 * offset, format and nnz make a chunk of at most cap bytes; else 0 with
 * why. Checks for wrap-around. */
int dd_agg_hdr_bytes(const dd_agg_hdr_t *h, size_t cap, size_t *bytes_p,
                     char *why, size_t size);

/* Whether a PAIRS piece's nnz offsets are increasing and below count; else
 * 0 with why naming the first bad one. */
int dd_agg_pairs_valid(const uint32_t *idx, uint64_t nnz, uint64_t count,
                       char *why, size_t size);

/* agg_sum.c */
int dd_agg_dtype_ok(dd_dtype_t dtype);
size_t dd_agg_acc_bytes(dd_dtype_t dtype, size_t count);
/* 1/p, p the least power of two >= n_terms: what every copy is scaled by
 * as it is added, so that no partial sum of n_terms copies overflows where
 * their average fits (as on the allreduce route); dd_agg_out and
 * dd_agg_out_sparse take it back out exactly. */
float dd_agg_sum_scale(int n_terms);
void dd_agg_add(void *acc, const void *src, size_t n, dd_dtype_t dtype,
                int first, float scale);
void dd_agg_out(void *dst, const void *acc, size_t n, dd_dtype_t dtype,
                int n_workers, float scale);
/* Adds a sparse piece (format, nnz, data as on the wire, checked), times
 * scale, into an f32 chunk of count elements. */
void dd_agg_add_sparse(float *acc, const void *data, uint32_t format,
                       size_t nnz, size_t count, float scale);
/* Writes the average acc / (n_workers * scale) of a sparse chunk into acc
 * and, in the smaller format, into out (at most count f32); returns its
 * bytes and sets *format_p and *nnz_p. */
size_t dd_agg_out_sparse(void *out, float *acc, size_t count, int n_workers,
                         float scale, uint32_t *format_p, uint64_t *nnz_p);
/* A checked sparse result into dst, count f32. */
void dd_agg_expand_sparse(float *dst, const void *data, uint32_t format,
                          size_t nnz, size_t count);

/* A recovery round's record in the store (client.c writes it, server.c
 * checks a RESET against it): under dd_agg_round_key(round, w), worker
 * w's row, a dd_agg_row_t followed by a lost flag per job rank; under
 * dd_agg_round_key(round, -1), the count of rows written. */
typedef struct {
    uint64_t started, ended, next_seq;
} dd_agg_row_t;

void dd_agg_round_key(int round, int w, char *key, size_t size);

/* A worker's own copy of a chunk homed at its own server. */
typedef struct {
    dd_agg_hdr_t hdr;
    const void *data;
    void *dest; /* where the average goes */
    int done;   /* set by the server */
    dd_status_t status;
    char why[DD_AGG_WHY];
} dd_agg_local_t;

/* Abandons every chunk numbered below floor, as a RESET does: its sums,
 * its answers still leaving, the worker's own copies (the client's flights
 * are reused), and any push of one that comes later. */
void dd_agg_server_reset(dd_agg_server_t *s, uint64_t floor);

/* Hands a local copy to the worker's own server (kept until done). */
dd_status_t dd_agg_server_local(dd_agg_server_t *s, dd_agg_local_t *local);

/* Names a layer for messages: its name when the table is known. */
void dd_agg_layer_name(const dd_agg_env_t *env, uint32_t layer, char *buf,
                       size_t size);

#endif
