/*
 * Layer parts (DREAMDDP_LAYER_SPLIT): dd_model_commit cuts a host layer
 * larger than the limit into parts of about equal size, which the planner
 * and the engine then treat as layers of their own, so that a layer too
 * large for one step of the window (GPT-2's embedding is a third of the
 * model) can sync a part in each of several steps. Under delayed
 * averaging each part still launches after the layer's backward and lands
 * by the layer's next deadline; the arithmetic of every element is that
 * of the whole layer's.
 *
 * The application keeps the handle it registered: dd_layer_ready,
 * dd_layer_forward and dd_layer_unused on it mark every part (backward
 * marks the last part first, as backward order goes; forward the first),
 * dd_layer_stats sums the parts, and dd_layer_part gives each part's own
 * handle, name (NAME#i), span and statistics. The handle then stands
 * outside sched->layers, which holds the parts in forward order.
 *
 * The parts are views: each tensor is cut at whole rows (a shaped one) or
 * at multiples of 64 elements, and a part may span several tensors. It
 * must not decide what syncs when: the plan does, from the parts' times.
 */
#include "core/config.h"
#include "core/log.h"
#include "sched/sched.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* auto: the limit is the model's bytes over twice the window, not below
 * this, so that no ordinary layer is cut. */
#define DD_SPLIT_AUTO_FLOOR ((size_t)4 << 20)
/* The smallest limit DREAMDDP_LAYER_SPLIT takes. */
#define DD_SPLIT_MIN ((size_t)4096)
/* A vector is cut at a multiple of this many elements. */
#define DD_SPLIT_ALIGN 64

dd_status_t dd_sched_split_parse(dd_sched_t *sched)
{
    const char *s = sched->opts.layer_split;

    sched->split_auto = 0;
    sched->split_bytes = 0;
    if (s == NULL || strcmp(s, "auto") == 0) {
        sched->split_auto = 1;
        return DD_OK;
    }
    /* no (or off, 0, false) never cuts; yes is refused: it names no
     * limit. */
    int flag = 0;
    size_t bytes = 0;
    if (dd_config_parse_bool(s, &flag) == DD_OK) {
        if (!flag) {
            return DD_OK;
        }
    } else if (dd_config_parse_size(s, &bytes) == DD_OK &&
               bytes >= DD_SPLIT_MIN) {
        sched->split_bytes = bytes;
        return DD_OK;
    }
    return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_SCHED,
                    "invalid value DREAMDDP_LAYER_SPLIT='%s': expected auto, "
                    "no, or the largest part in bytes, at least 4K (such as "
                    "16M)",
                    s);
}

/* The limit in force: 0 when no layer is cut. ddp's buckets group layers
 * by their gradients' readiness, so it never cuts; auto cuts only under
 * delayed averaging, where a part can land in the next step. */
size_t dd_sched_split_limit(const dd_sched_t *sched)
{
    if (sched->strategy.kind == DD_STRATEGY_DDP) {
        return 0;
    }
    if (!sched->split_auto) {
        return sched->split_bytes;
    }
    if (!sched->strategy.delay) {
        return 0;
    }
    size_t model = 0;
    for (size_t i = 0; i < sched->n_layers; i++) {
        model += sched->layers[i]->bytes;
    }
    size_t limit = model / (2 * (size_t)sched->strategy.window);
    return limit > DD_SPLIT_AUTO_FLOOR ? limit : DD_SPLIT_AUTO_FLOOR;
}

static int dd_split_host(const struct dd_layer *l)
{
    for (size_t t = 0; t < l->n_tensors; t++) {
        if (l->tensors[t].count > 0 && l->tensors[t].mem_type != DD_MEM_HOST) {
            return 0;
        }
    }
    return 1;
}

/* Elements of tensor x that fit in room bytes, cut where a part may end;
 * at least one unit when the part is still empty. */
static size_t dd_split_fit(const dd_tensor_t *x, size_t left, size_t room,
                           int empty)
{
    size_t es = dd_dtype_size(x->dtype);
    size_t unit = x->rows != 0 ? x->cols : DD_SPLIT_ALIGN;
    size_t n = room / es / unit * unit;

    if (n == 0 && empty) {
        n = unit;
    }
    return n < left ? n : left;
}

static dd_status_t dd_split_add_view(struct dd_layer *part,
                                     const dd_tensor_t *x, size_t first,
                                     size_t n)
{
    dd_tensor_t *v = realloc(part->tensors, (part->n_tensors + 1) * sizeof(*v));

    if (v == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for a part of layer '%s'", part->name);
    }
    part->tensors = v;
    size_t es = dd_dtype_size(x->dtype);
    dd_tensor_t *y = &v[part->n_tensors++];
    *y = *x;
    y->param = (char *)x->param + first * es;
    y->grad = x->grad != NULL ? (char *)x->grad + first * es : NULL;
    y->count = n;
    y->rows = x->rows != 0 ? n / x->cols : 0;
    y->cols = x->rows != 0 ? x->cols : 0;
    part->bytes += n * es;
    part->split.count += n;
    return DD_OK;
}

static struct dd_layer *dd_split_new_part(struct dd_layer *whole, size_t i,
                                          size_t offset)
{
    struct dd_layer *p = calloc(1, sizeof(*p));
    size_t len = strlen(whole->name) + 24;

    if (p == NULL || (p->name = malloc(len)) == NULL ||
        (whole->comp.spec != NULL &&
         (p->comp.spec = strdup(whole->comp.spec)) == NULL)) {
        if (p != NULL) {
            free(p->name);
        }
        free(p);
        return NULL;
    }
    snprintf(p->name, len, "%s#%zu", whole->name, i);
    p->sched = whole->sched;
    p->split.whole = whole;
    p->split.offset = offset;
    p->device = -1;
    return p;
}

static void dd_split_free_parts(struct dd_layer *l)
{
    for (size_t j = 0; j < l->split.n; j++) {
        free(l->split.parts[j]->name);
        free(l->split.parts[j]->comp.spec);
        free(l->split.parts[j]->tensors);
        free(l->split.parts[j]);
    }
    free(l->split.parts);
    l->split.parts = NULL;
    l->split.n = 0;
}

/* The parts of l, about bytes / k each, the last taking what is left. */
static dd_status_t dd_split_layer(struct dd_layer *l, size_t k)
{
    size_t target = (l->bytes + k - 1) / k, offset = 0;
    struct dd_layer *part = NULL;

    l->split.parts = calloc(k, sizeof(*l->split.parts));
    if (l->split.parts == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for layer '%s''s parts", l->name);
    }
    for (size_t t = 0; t < l->n_tensors; t++) {
        const dd_tensor_t *x = &l->tensors[t];
        size_t first = 0;
        while (first < x->count) {
            if (part == NULL) {
                part = dd_split_new_part(l, l->split.n, offset);
                if (part == NULL) {
                    return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                                    "no memory for a part of layer '%s'",
                                    l->name);
                }
                l->split.parts[l->split.n++] = part;
            }
            int last = l->split.n == k;
            size_t room = last                   ? SIZE_MAX
                          : part->bytes < target ? target - part->bytes
                                                 : 0;
            size_t n =
                dd_split_fit(x, x->count - first, room, part->n_tensors == 0);
            if (n > 0) {
                dd_status_t status = dd_split_add_view(part, x, first, n);
                if (status != DD_OK) {
                    return status;
                }
                first += n;
                offset += n;
            }
            if (!last && (n == 0 || part->bytes >= target)) {
                part = NULL;
            }
        }
    }
    return DD_OK;
}

dd_status_t dd_sched_split_commit(dd_sched_t *sched)
{
    size_t limit = dd_sched_split_limit(sched), n = 0;

    for (size_t i = 0; limit > 0 && i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        if (l->bytes > limit && dd_split_host(l)) {
            dd_status_t status =
                dd_split_layer(l, (l->bytes + limit - 1) / limit);
            if (status != DD_OK) {
                return status;
            }
            if (l->split.n == 1) { /* rows too wide to cut: stays whole */
                dd_split_free_parts(l);
            }
        }
        n += l->split.n > 0 ? l->split.n : 1;
    }
    if (n <= sched->n_layers) {
        return DD_OK;
    }
    struct dd_layer **layers = calloc(n, sizeof(*layers));
    if (layers == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the table of parts");
    }
    size_t o = 0;
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        for (size_t j = 0; j < (l->split.n > 0 ? l->split.n : 1); j++) {
            struct dd_layer *y = l->split.n > 0 ? l->split.parts[j] : l;
            y->index = o;
            layers[o++] = y;
        }
        if (l->split.n > 0) {
            dd_log_info(DD_SUBSYS_SCHED,
                        "layer '%s' (%zu bytes) syncs in %zu parts "
                        "(DREAMDDP_LAYER_SPLIT %zu bytes)",
                        l->name, l->bytes, l->split.n, limit);
        }
    }
    sched->handles = sched->layers;
    sched->n_handles = sched->n_layers;
    sched->layers = layers;
    sched->n_layers = sched->cap_layers = n;
    return DD_OK;
}

size_t dd_sched_num_handles(const dd_sched_t *sched)
{
    return sched->handles != NULL ? sched->n_handles : sched->n_layers;
}

struct dd_layer *dd_sched_handle_at(const dd_sched_t *sched, size_t i)
{
    return i < dd_sched_num_handles(sched)
               ? (sched->handles != NULL ? sched->handles : sched->layers)[i]
               : NULL;
}

void dd_sched_split_free(dd_sched_t *sched)
{
    for (size_t i = 0; sched->handles != NULL && i < sched->n_handles; i++) {
        struct dd_layer *l = sched->handles[i];
        if (l->split.n > 0) { /* its parts are in sched->layers */
            free(l->split.parts);
            free(l->comp.spec);
            free(l->name);
            free(l->tensors);
            free(l);
        }
    }
    free(sched->handles);
    sched->handles = NULL;
}

dd_status_t dd_sched_layer_part(dd_sched_t *sched, dd_layer_h layer, size_t i,
                                dd_layer_h *part_p, size_t *offset_p,
                                size_t *count_p)
{
    if (layer == NULL || layer->sched != sched || layer->split.whole != NULL ||
        part_p == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_part: %s",
                        part_p == NULL ? "part_p is NULL"
                        : layer != NULL && layer->sched == sched
                            ? "a part has no parts"
                            : "not a layer of this context");
    }
    size_t n = layer->split.n > 0 ? layer->split.n : 1;
    if (i >= n) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_part: layer '%s' has %zu part%s, not %zu",
                        layer->name, n, n == 1 ? "" : "s", i + 1);
    }
    struct dd_layer *p = layer->split.n > 0 ? layer->split.parts[i] : layer;
    size_t count = 0;
    for (size_t t = 0; p == layer && t < layer->n_tensors; t++) {
        count += layer->tensors[t].count;
    }
    *part_p = p;
    if (offset_p != NULL) {
        *offset_p = p == layer ? 0 : p->split.offset;
    }
    if (count_p != NULL) {
        *count_p = p == layer ? count : p->split.count;
    }
    return DD_OK;
}
