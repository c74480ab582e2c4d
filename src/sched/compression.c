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
        &sched->comp.codecs, "dd_compression_set: invalid spec ", spec, &codec);
    if (status != DD_OK) {
        return status == DD_ERR_INVALID_CONFIG ? DD_ERR_INVALID_PARAM : status;
    }
    char *copy = strdup(spec);
    if (copy == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the compression spec");
    }
    free(sched->comp.spec);
    sched->comp.spec = copy;
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
        dd_route_codec_open(&sched->comp.codecs, what, spec, &codec);
    if (status != DD_OK) {
        return status == DD_ERR_INVALID_CONFIG ? DD_ERR_INVALID_PARAM : status;
    }
    char *copy = strdup(spec);
    if (copy == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the layer's compression spec");
    }
    free(layer->comp.spec);
    layer->comp.spec = copy;
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
    if (layer->comp.codec == NULL || layer->comp.states == NULL ||
        layer->comp.states[tensor] == NULL) {
        return NULL;
    }
    /* ddp's parameter syncs (dd_sync_all) keep no reference: dense. */
    if (!grads && layer->comp.refs[tensor] == NULL) {
        return NULL;
    }
    (void)sched;
    return layer->comp.codec;
}

/* A layer's states, and its references when parameters travel. */
static dd_status_t dd_sched_layer_codec_init(dd_sched_t *sched,
                                             struct dd_layer *l)
{
    const dd_codec_ref_t *ref = &l->comp.codec->ref;
    int params = !dd_strategy_syncs_grads(&sched->strategy);

    l->comp.states = calloc(l->n_tensors, sizeof(*l->comp.states));
    l->comp.refs = calloc(l->n_tensors, sizeof(*l->comp.refs));
    if (l->comp.states == NULL || l->comp.refs == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for layer '%s''s codec states", l->name);
    }
    for (size_t t = 0; t < l->n_tensors; t++) {
        const dd_tensor_t *x = &l->tensors[t];
        if (!dd_sched_tensor_encodes(x)) {
            continue;
        }
        dd_status_t status =
            ref->ops->state_create(ref->codec, x->count, x->dtype, x->rows,
                                   x->cols, &l->comp.states[t]);
        if (status != DD_OK) {
            return status;
        }
        if (params) {
            l->comp.refs[t] = malloc(x->count * sizeof(float));
            if (l->comp.refs[t] == NULL) {
                return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                                "no memory for layer '%s''s codec reference",
                                l->name);
            }
            memcpy(l->comp.refs[t], x->param, x->count * sizeof(float));
        }
    }
    return DD_OK;
}

size_t dd_sched_layer_wire_bytes(const struct dd_layer *l)
{
    size_t bytes = 0;
    for (size_t t = 0; t < l->n_tensors; t++) {
        const dd_tensor_t *x = &l->tensors[t];
        int encoded = l->comp.codec != NULL && l->comp.states != NULL &&
                      l->comp.states[t] != NULL;
        bytes += encoded ? dd_route_codec_wire_size(l->comp.codec, x)
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
    if (layer->comp.spec != NULL) {
        return layer->comp.spec;
    }
    if (dd_sched_layer_count(layer) < DD_SCHED_DENSE_BELOW) {
        return "none";
    }
    return sched->comp.spec != NULL ? sched->comp.spec
                                    : sched->opts.compression;
}

dd_status_t dd_sched_codecs_commit(dd_sched_t *sched)
{
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        const char *spec = dd_sched_layer_codec_spec(sched, l);
        const char *what = "dd_layer_set_compression: invalid spec ";
        if (l->comp.spec == NULL) {
            what = sched->comp.spec != NULL
                       ? "dd_compression_set: invalid spec "
                       : "invalid value DREAMDDP_COMPRESSION=";
        }
        dd_status_t status = dd_route_codec_open(&sched->comp.codecs, what,
                                                 spec, &l->comp.codec);
        if (status == DD_OK && l->comp.codec != NULL) {
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
        for (size_t t = 0; l->comp.states != NULL && t < l->n_tensors; t++) {
            l->comp.codec->ref.ops->state_free(l->comp.codec->ref.codec,
                                               l->comp.states[t]);
            free(l->comp.refs[t]);
        }
        free(l->comp.states);
        free(l->comp.refs);
        free(l->comp.spec);
    }
    dd_route_codecs_close(&sched->comp.codecs);
    free(sched->comp.spec);
    sched->comp.spec = NULL;
}
