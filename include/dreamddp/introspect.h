/**
 * @file dreamddp/introspect.h
 * What a context chose and how it cut the model, for tools and tests: the
 * backend behind each collective, the layers in order, and the parts
 * dd_model_commit cut them into. A training loop needs none of it.
 */
#ifndef DREAMDDP_INTROSPECT_H
#define DREAMDDP_INTROSPECT_H

#include <dreamddp.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The backend (its module's name, "ucx", "gloo", "nccl") that runs coll on
 * bytes bytes of mem_type memory in this context: the one with the highest
 * score among those DREAMDDP_BACKENDS allows and every rank could load.
 *
 * @return the name, or NULL when no backend can (dd_last_error() says why).
 * Any thread; the string lives as long as the context.
 */
DD_API const char *dd_backend_name(dd_context_h ctx, dd_coll_t coll,
                                   dd_mem_type_t mem_type, size_t bytes);

/** Number of registered layers. One thread at a time per context before
 *  dd_model_commit, any thread after. */
DD_API size_t dd_num_layers(dd_context_h ctx);

/** The i-th registered layer (forward order), or NULL. One thread at a
 *  time per context before dd_model_commit, any thread after. */
DD_API dd_layer_h dd_layer_at(dd_context_h ctx, size_t i);

/**
 * Part i of a layer. dd_model_commit cuts a host layer larger than
 * DREAMDDP_LAYER_SPLIT into parts that the plan schedules as layers of
 * their own (under delayed averaging, by default, a layer larger than the
 * model over 2H): one part may sync in one step of the window, the next in
 * another. The layer's handle stays the one to mark; dd_layer_stats of it
 * sums its parts (syncs: those that covered every part; divergence: the
 * largest part's). A part's handle, named "NAME#i", serves dd_layer_stats
 * and dd_layer_name only. A layer that was not cut, or before the commit,
 * has one part, itself; dd_layer_num_parts counts them.
 *
 * @param part_p    the part's handle.
 * @param offset_p  may be NULL: its first element, counting the layer's
 *                  tensors' elements one after the other.
 * @param count_p   may be NULL: its number of elements.
 * @return DD_OK; DD_ERR_INVALID_PARAM for a foreign layer or a part's
 *         handle, a NULL part_p, or i past the last part.
 * One thread at a time per context before dd_model_commit, any thread
 * after. ABI: added with libtool interface 4 (the soname unchanged).
 */
DD_API dd_status_t dd_layer_part(dd_context_h ctx, dd_layer_h layer, size_t i,
                                 dd_layer_h *part_p, size_t *offset_p,
                                 size_t *count_p);

/** The number of parts of a layer (dd_layer_part): 1 for a layer that was
 *  not cut, 0 for NULL, a foreign layer or a part's handle. Threads: as
 *  dd_layer_part. ABI: added with libtool interface 4. */
DD_API size_t dd_layer_num_parts(dd_context_h ctx, dd_layer_h layer);

#ifdef __cplusplus
}
#endif

#endif /* DREAMDDP_INTROSPECT_H */
