/*
 * The public calls of the layer table and the step: each checks its
 * context and hands the scheduler (src/sched) what it asked for. Nothing
 * here decides what syncs.
 */
#include "api/clock_agree.h"
#include "api/context.h"
#include "api/watch.h"
#include "core/log.h"
#include "sched/sched.h"

#include <dreamddp/introspect.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dd_status_t dd_api_check(dd_context_h ctx, const char *what)
{
    if (ctx == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "%s: ctx is NULL", what);
    }
    return DD_OK;
}

/* dd_api_check, and a setting that only counts before dd_model_commit. */
static dd_status_t dd_api_check_uncommitted(dd_context_h ctx, const char *what)
{
    dd_status_t status = dd_api_check(ctx, what);

    if (status == DD_OK && ctx->sched->committed) {
        status = dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                          "%s: the model is already committed", what);
    }
    return status;
}

/* The layout of dd_tensor_t before rows and cols, which the function
 * dd_layer_register reads (programs built before the shape). */
#define DD_TENSOR_SIZE_UNSHAPED offsetof(dd_tensor_t, rows)

dd_status_t dd_layer_register_sized(dd_context_h ctx, const char *name,
                                    const dd_tensor_t *tensors,
                                    size_t n_tensors, size_t tensor_size,
                                    dd_layer_h *layer_p)
{
    dd_status_t status = dd_api_check(ctx, "dd_layer_register");

    if (status != DD_OK) {
        return status;
    }
    if (tensor_size < DD_TENSOR_SIZE_UNSHAPED ||
        tensor_size > sizeof(dd_tensor_t)) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_register: layer '%s': tensors of %zu bytes, "
                        "expected %zu to %zu (built against another "
                        "dreamddp.h?)",
                        name ? name : "(null)", tensor_size,
                        (size_t)DD_TENSOR_SIZE_UNSHAPED, sizeof(dd_tensor_t));
    }
    if (tensor_size == sizeof(dd_tensor_t) || tensors == NULL) {
        return dd_sched_layer_register(ctx->sched, name, tensors, n_tensors,
                                       layer_p);
    }
    /* An older layout: copied into this one, the fields past it 0. */
    dd_tensor_t *copy = calloc(n_tensors ? n_tensors : 1, sizeof(*copy));
    if (copy == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for layer '%s''s tensors",
                        name ? name : "(null)");
    }
    for (size_t t = 0; t < n_tensors; t++) {
        memcpy(&copy[t], (const char *)tensors + t * tensor_size, tensor_size);
    }
    status =
        dd_sched_layer_register(ctx->sched, name, copy, n_tensors, layer_p);
    free(copy);
    return status;
}

/* The exported symbol of programs built before dd_tensor_t had a shape;
 * the header's macro of the same name calls dd_layer_register_sized. */
dd_status_t(dd_layer_register)(dd_context_h ctx, const char *name,
                               const dd_tensor_t *tensors, size_t n_tensors,
                               dd_layer_h *layer_p)
{
    return dd_layer_register_sized(ctx, name, tensors, n_tensors,
                                   DD_TENSOR_SIZE_UNSHAPED, layer_p);
}

dd_status_t dd_strategy_set(dd_context_h ctx, const char *strategy)
{
    dd_status_t status = dd_api_check(ctx, "dd_strategy_set");

    return status != DD_OK ? status
                           : dd_sched_strategy_set(ctx->sched, strategy);
}

dd_status_t dd_compression_set(dd_context_h ctx, const char *spec)
{
    dd_status_t status = dd_api_check(ctx, "dd_compression_set");

    return status != DD_OK ? status
                           : dd_sched_compression_set(ctx->sched, spec);
}

dd_status_t dd_deterministic_set(dd_context_h ctx, int deterministic)
{
    dd_status_t status = dd_api_check_uncommitted(ctx, "dd_deterministic_set");

    if (status == DD_OK) {
        ctx->sched->opts.deterministic = deterministic != 0;
    }
    return status;
}

dd_status_t dd_bucket_bytes_set(dd_context_h ctx, size_t bytes)
{
    dd_status_t status = dd_api_check_uncommitted(ctx, "dd_bucket_bytes_set");

    if (status == DD_OK && bytes == 0) {
        status = dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                          "dd_bucket_bytes_set: 0 bytes: expected a bucket "
                          "size of at least 1 byte");
    }
    if (status == DD_OK) {
        ctx->sched->opts.bucket_bytes = bytes;
    }
    return status;
}

dd_status_t dd_layer_set_compression(dd_context_h ctx, dd_layer_h layer,
                                     const char *spec)
{
    dd_status_t status = dd_api_check(ctx, "dd_layer_set_compression");

    return status != DD_OK
               ? status
               : dd_sched_layer_set_compression(ctx->sched, layer, spec);
}

const char *dd_strategy_name(dd_context_h ctx)
{
    return ctx != NULL ? ctx->sched->strategy_name : NULL;
}

dd_status_t dd_model_commit(dd_context_h ctx)
{
    dd_status_t status = dd_api_check(ctx, "dd_model_commit");

    /* The clocks first, so that the timeline opened by the commit records
     * the offset; a commit the scheduler refuses (twice, on an
     * aggregator) skips it, since it would meet no peer. */
    if (status == DD_OK && ctx->role == DD_ROLE_WORKER &&
        !ctx->sched->committed && ctx->n_workers > 1) {
        status = dd_clock_agree(ctx, &ctx->sched->clock_offset_us,
                                &ctx->sched->clock_uncertainty_us);
    }
    return status != DD_OK ? status
                           : dd_watch_fault(ctx, dd_sched_commit(ctx->sched));
}

size_t dd_num_layers(dd_context_h ctx)
{
    return ctx != NULL ? dd_sched_num_handles(ctx->sched) : 0;
}

dd_layer_h dd_layer_at(dd_context_h ctx, size_t i)
{
    return ctx != NULL ? dd_sched_handle_at(ctx->sched, i) : NULL;
}

size_t dd_layer_num_parts(dd_context_h ctx, dd_layer_h layer)
{
    return ctx == NULL || layer == NULL || layer->sched != ctx->sched ||
                   layer->split.whole != NULL
               ? 0
           : layer->split.n > 0 ? layer->split.n
                                : 1;
}

dd_status_t dd_layer_part(dd_context_h ctx, dd_layer_h layer, size_t i,
                          dd_layer_h *part_p, size_t *offset_p, size_t *count_p)
{
    dd_status_t status = dd_api_check(ctx, "dd_layer_part");

    return status != DD_OK ? status
                           : dd_sched_layer_part(ctx->sched, layer, i, part_p,
                                                 offset_p, count_p);
}

dd_status_t dd_layer_stats(dd_context_h ctx, dd_layer_h layer,
                           dd_layer_stats_t *stats_p)
{
    dd_status_t status = dd_api_check(ctx, "dd_layer_stats");

    return status != DD_OK ? status
                           : dd_sched_layer_stats(ctx->sched, layer, stats_p);
}

dd_status_t dd_step_begin(dd_context_h ctx)
{
    dd_status_t status = dd_api_check(ctx, "dd_step_begin");

    return status != DD_OK
               ? status
               : dd_watch_fault(ctx, dd_sched_step_begin(ctx->sched));
}

dd_status_t dd_layer_mark(dd_context_h ctx, dd_layer_h layer,
                          const dd_mark_params_t *params)
{
    dd_status_t status = dd_api_check(ctx, "dd_layer_mark");

    if (status == DD_OK && params == NULL) {
        status = dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                          "dd_layer_mark: params is NULL");
    }
    if (status == DD_OK &&
        (params->field_mask & ~(uint64_t)DD_MARK_FIELD_STREAM)) {
        status =
            dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                     "dd_layer_mark: field_mask bits 0x%llx that this "
                     "library does not know (built against a newer "
                     "dreamddp.h?)",
                     (unsigned long long)(params->field_mask &
                                          ~(uint64_t)DD_MARK_FIELD_STREAM));
    }
    if (status != DD_OK) {
        return status;
    }
    int stream = (params->field_mask & DD_MARK_FIELD_STREAM) != 0;
    switch (params->what) {
    case DD_MARK_READY:
        return stream ? dd_sched_layer_ready_stream(ctx->sched, layer,
                                                    params->stream)
                      : dd_sched_layer_ready(ctx->sched, layer);
    case DD_MARK_FORWARD:
        /* A landing waits for a sync: its failure may be a lost peer. */
        status =
            dd_sched_layer_forward(ctx->sched, layer, stream, params->stream);
        return dd_watch_fault(ctx, status);
    case DD_MARK_UNUSED:
        if (stream) {
            return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                            "dd_layer_mark: DD_MARK_UNUSED takes no stream");
        }
        return dd_sched_layer_unused(ctx->sched, layer);
    }
    return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                    "dd_layer_mark: unknown mark %d: expected a dd_mark_t "
                    "(ready, forward or unused)",
                    (int)params->what);
}

/* The calls before dd_layer_mark, kept for one release. */
static dd_status_t dd_layer_mark_as(dd_context_h ctx, dd_layer_h layer,
                                    dd_mark_t what, int with_stream,
                                    void *stream)
{
    dd_mark_params_t p = {.field_mask = with_stream ? DD_MARK_FIELD_STREAM : 0,
                          .what = what,
                          .stream = stream};

    return dd_layer_mark(ctx, layer, &p);
}

dd_status_t dd_layer_ready(dd_context_h ctx, dd_layer_h layer)
{
    return dd_layer_mark_as(ctx, layer, DD_MARK_READY, 0, NULL);
}

dd_status_t dd_layer_forward(dd_context_h ctx, dd_layer_h layer)
{
    return dd_layer_mark_as(ctx, layer, DD_MARK_FORWARD, 0, NULL);
}

dd_status_t dd_layer_forward_stream(dd_context_h ctx, dd_layer_h layer,
                                    void *stream)
{
    return dd_layer_mark_as(ctx, layer, DD_MARK_FORWARD, 1, stream);
}

dd_status_t dd_layer_unused(dd_context_h ctx, dd_layer_h layer)
{
    return dd_layer_mark_as(ctx, layer, DD_MARK_UNUSED, 0, NULL);
}

dd_status_t dd_layer_ready_stream(dd_context_h ctx, dd_layer_h layer,
                                  void *stream)
{
    return dd_layer_mark_as(ctx, layer, DD_MARK_READY, 1, stream);
}

dd_status_t dd_step_end(dd_context_h ctx, dd_step_stats_t *stats_p)
{
    dd_status_t status = dd_api_check(ctx, "dd_step_end");
    char what[64];

    if (status != DD_OK) {
        return status;
    }
    snprintf(what, sizeof(what), "dd_step_end of step %llu",
             (unsigned long long)ctx->sched->step);
    dd_watch_call_begin(ctx, what);
    return dd_watch_call_end(ctx, dd_sched_step_end(ctx->sched, stats_p));
}

dd_status_t dd_sync_all(dd_context_h ctx)
{
    dd_status_t status = dd_api_check(ctx, "dd_sync_all");
    char what[64];

    if (status != DD_OK) {
        return status;
    }
    snprintf(what, sizeof(what), "dd_sync_all after step %llu",
             (unsigned long long)ctx->sched->step);
    dd_watch_call_begin(ctx, what);
    return dd_watch_call_end(ctx, dd_sched_sync_all(ctx->sched));
}

dd_status_t dd_step_set(dd_context_h ctx, uint64_t step)
{
    dd_status_t status = dd_api_check(ctx, "dd_step_set");

    return status != DD_OK ? status : dd_sched_step_set(ctx->sched, step);
}
