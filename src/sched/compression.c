/*
 * Compression, the runtime's side: which codec each layer travels in (its
 * own spec, dd_compression_set's or DREAMDDP_COMPRESSION, dense under
 * DD_SCHED_DENSE_BELOW elements), each layer's codec states and, where
 * parameters travel, the references every replica holds equal. The pipe
 * that encodes is route/encode.c. It must not change what syncs when, nor
 * see device memory (device tensors stay dense).
 */
#include "core/log.h"
#include "sched/sched.h"

#include <stdlib.h>
#include <string.h>

dd_status_t dd_sched_compression_set(dd_sched_t *sched, const char *spec)
{
    const dd_sched_codec_t *codec;

    if (sched->committed) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "dd_compression_set: the model is already committed");
    }
    dd_status_t status = dd_route_codec_open(
        &sched->codecs, "dd_compression_set: invalid spec ", spec, &codec);
    if (status != DD_OK) {
        return status == DD_ERR_INVALID_CONFIG ? DD_ERR_INVALID_PARAM : status;
    }
    char *copy = strdup(spec);
    if (copy == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    free(sched->compression);
    sched->compression = copy;
    return DD_OK;
}

dd_status_t dd_sched_layer_set_compression(dd_sched_t *sched, dd_layer_h layer,
                                           const char *spec)
{
    const dd_sched_codec_t *codec;
    char what[256];

    if (layer == NULL || layer->sched != sched) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_set_compression: not a layer of this "
                        "context");
    }
    if (sched->committed) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "dd_layer_set_compression: layer '%s': the model is "
                        "already committed",
                        layer->name);
    }
    snprintf(what, sizeof(what),
             "dd_layer_set_compression: layer '%s': invalid spec ",
             layer->name);
    dd_status_t status =
        dd_route_codec_open(&sched->codecs, what, spec, &codec);
    if (status != DD_OK) {
        return status == DD_ERR_INVALID_CONFIG ? DD_ERR_INVALID_PARAM : status;
    }
    char *copy = strdup(spec);
    if (copy == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    free(layer->codec_spec);
    layer->codec_spec = copy;
    return DD_OK;
}

static int dd_sched_tensor_encodes(const dd_tensor_t *x)
{
    return x->dtype == DD_DTYPE_F32 && x->mem_type == DD_MEM_HOST &&
           x->count > 0;
}

const dd_sched_codec_t *dd_sched_tensor_codec(const dd_sched_t *sched,
                                              const struct dd_layer *layer,
                                              size_t tensor, int grads)
{
    if (layer->codec == NULL || layer->codec_states == NULL ||
        layer->codec_states[tensor] == NULL) {
        return NULL;
    }
    /* ddp's parameter syncs (dd_sync_all) keep no reference: dense. */
    if (!grads && layer->codec_refs[tensor] == NULL) {
        return NULL;
    }
    (void)sched;
    return layer->codec;
}

/* A layer's states, and its references when parameters travel. */
static dd_status_t dd_sched_layer_codec_init(dd_sched_t *sched,
                                             struct dd_layer *l)
{
    const dd_codec_ref_t *ref = &l->codec->ref;
    int params = !dd_strategy_syncs_grads(&sched->strategy);

    l->codec_states = calloc(l->n_tensors, sizeof(*l->codec_states));
    l->codec_refs = calloc(l->n_tensors, sizeof(*l->codec_refs));
    if (l->codec_states == NULL || l->codec_refs == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    for (size_t t = 0; t < l->n_tensors; t++) {
        const dd_tensor_t *x = &l->tensors[t];
        if (!dd_sched_tensor_encodes(x)) {
            continue;
        }
        dd_status_t status =
            ref->ops->state_create(ref->codec, x->count, x->dtype, x->rows,
                                   x->cols, &l->codec_states[t]);
        if (status != DD_OK) {
            return status;
        }
        if (params) {
            l->codec_refs[t] = malloc(x->count * sizeof(float));
            if (l->codec_refs[t] == NULL) {
                return DD_ERR_NO_MEMORY;
            }
            memcpy(l->codec_refs[t], x->param, x->count * sizeof(float));
        }
    }
    return DD_OK;
}

size_t dd_sched_layer_wire_bytes(const struct dd_layer *l)
{
    size_t bytes = 0;
    for (size_t t = 0; t < l->n_tensors; t++) {
        const dd_tensor_t *x = &l->tensors[t];
        int encoded = l->codec != NULL && l->codec_states != NULL &&
                      l->codec_states[t] != NULL;
        bytes += encoded ? dd_route_codec_wire_size(l->codec, x)
                         : x->count * dd_dtype_size(x->dtype);
    }
    return bytes;
}

static size_t dd_sched_layer_count(const struct dd_layer *l)
{
    size_t n = 0;
    for (size_t t = 0; t < l->n_tensors; t++) {
        n += l->tensors[t].count;
    }
    return n;
}

const char *dd_sched_layer_codec_spec(const dd_sched_t *sched,
                                      const struct dd_layer *layer)
{
    if (layer->codec_spec != NULL) {
        return layer->codec_spec;
    }
    if (dd_sched_layer_count(layer) < DD_SCHED_DENSE_BELOW) {
        return "none";
    }
    return sched->compression != NULL ? sched->compression
                                      : sched->opts.compression;
}

dd_status_t dd_sched_codecs_commit(dd_sched_t *sched)
{
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        const char *spec = dd_sched_layer_codec_spec(sched, l);
        const char *what = "dd_layer_set_compression: invalid spec ";
        if (l->codec_spec == NULL) {
            what = sched->compression != NULL
                       ? "dd_compression_set: invalid spec "
                       : "invalid value DREAMDDP_COMPRESSION=";
        }
        dd_status_t status =
            dd_route_codec_open(&sched->codecs, what, spec, &l->codec);
        if (status == DD_OK && l->codec != NULL) {
            status = dd_sched_layer_codec_init(sched, l);
        }
        if (status != DD_OK) {
            return status;
        }
    }
    return DD_OK;
}

void dd_sched_codecs_free(dd_sched_t *sched)
{
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        for (size_t t = 0; l->codec_states != NULL && t < l->n_tensors; t++) {
            l->codec->ref.ops->state_free(l->codec->ref.codec,
                                          l->codec_states[t]);
            free(l->codec_refs[t]);
        }
        free(l->codec_states);
        free(l->codec_refs);
        free(l->codec_spec);
    }
    dd_route_codecs_close(&sched->codecs);
    free(sched->compression);
    sched->compression = NULL;
}
