/*
 * Compression on the route (encode.c): the codecs a job opens, what each
 * puts on the wire, and the pipe that encodes a job around the host route.
 */
#ifndef DD_SCHED_ROUTE_ENCODE_H
#define DD_SCHED_ROUTE_ENCODE_H

#include "agg/agg.h"
#include "compress/codec.h"
#include "sched/route/route.h"

/** A codec in use, opened once per spec. */
typedef struct dd_sched_codec {
    char *spec;
    dd_codec_ref_t ref;
    dd_dtype_t wire_dtype; /* of f32 layers */
    /* Not summable (topk): every worker's encoding is allgathered among
     * the workers, on either route, and each decodes and averages them. */
    int gather;
    /* A multi-round protocol (powersgd): each round's f32 output averaged
     * through the route (rounds.c). */
    int rounds;
} dd_sched_codec_t;

#define DD_SCHED_MAX_CODECS 8

/** The codecs a job opened, by spec. */
typedef struct {
    dd_sched_codec_t codec[DD_SCHED_MAX_CODECS];
    size_t n;
} dd_route_codecs_t;

/** Checks spec (what: the message's words before the quoted spec) and
 *  opens its codec once in set; *codec_p is NULL for the identity. */
dd_status_t dd_route_codec_open(dd_route_codecs_t *set, const char *what,
                                const char *spec,
                                const dd_sched_codec_t **codec_p);

/** Closes every codec of set. */
void dd_route_codecs_close(dd_route_codecs_t *set);

/** The codec's spec, "none" for NULL. */
const char *dd_route_codec_name(const dd_sched_codec_t *codec);

/** The bytes an f32 tensor (its count and shape) takes in codec (NULL:
 *  dense). */
size_t dd_route_codec_wire_size(const dd_sched_codec_t *codec,
                                const dd_tensor_t *x);

/** The route's state. */
typedef struct {
    const dd_route_env_t *env;
    const dd_sync_pipe_t *inner; /* a summable codec's wire: the host route */
    const dd_sync_pipe_t *coll;  /* a gathered codec's: the workers' */
    dd_agg_t *agg;         /* the aggregators, when the host route is theirs: a
                              gathered codec's pairs go to the homes */
    dd_sync_pipe_t pipe;   /* summable codecs, around inner */
    dd_sync_pipe_t gather; /* gathered codecs (topk) */
} dd_route_encode_t;

void dd_route_encode_init(dd_route_encode_t *r, const dd_route_env_t *env,
                          const dd_sync_pipe_t *inner,
                          const dd_sync_pipe_t *coll, dd_agg_t *agg);

#endif
