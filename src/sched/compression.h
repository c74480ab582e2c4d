/*
 * Compression, the runtime's side (compression.c): which codec a layer
 * travels in, and its state.
 */
#ifndef DD_SCHED_COMPRESSION_H
#define DD_SCHED_COMPRESSION_H

#include "sched/route/encode.h"

struct dd_sched;
struct dd_layer;

/** A layer's: the spec dd_layer_set_compression chose (NULL: the default
 *  rule), the codec in force from commit (NULL: dense), and per tensor its
 *  state and, for parameter syncs, its values at the last sync (NULL where
 *  the tensor stays dense). */
typedef struct {
    char *spec;
    const dd_sched_codec_t *codec;
    struct dd_codec_state **states;
    float **refs;
} dd_comp_layer_t;

/** The scheduler's: the codecs opened, by spec, and dd_compression_set's
 *  spec (NULL: DREAMDDP_COMPRESSION). */
typedef struct {
    dd_route_codecs_t codecs;
    char *spec;
} dd_comp_t;

/* Layers of fewer elements stay dense unless dd_layer_set_compression says
 * otherwise. */
#define DD_SCHED_DENSE_BELOW 4096

dd_status_t dd_sched_compression_set(struct dd_sched *sched, const char *spec);
dd_status_t dd_sched_layer_set_compression(struct dd_sched *sched,
                                           dd_layer_h layer, const char *spec);
/* At commit, once the replicas are equal: each layer's codec, states and
 * references. */
dd_status_t dd_sched_codecs_commit(struct dd_sched *sched);
/* The codec a tensor of layer travels in, for gradients or parameters. */
const dd_sched_codec_t *dd_sched_tensor_codec(const struct dd_sched *sched,
                                              const struct dd_layer *layer,
                                              size_t tensor, int grads);
/* The bytes a layer's sync puts on the wire, in its codec. */
size_t dd_sched_layer_wire_bytes(const struct dd_layer *layer);
/* The spec a layer is to travel in: its own, or the default rule's. */
const char *dd_sched_layer_codec_spec(const struct dd_sched *sched,
                                      const struct dd_layer *layer);
void dd_sched_codecs_free(struct dd_sched *sched);

#endif
