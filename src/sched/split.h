/*
 * Layers in parts (split.c, DREAMDDP_LAYER_SPLIT): a layer's place in the
 * cut, and the calls the runtime makes of it.
 */
#ifndef DD_SCHED_SPLIT_H
#define DD_SCHED_SPLIT_H

#include <dreamddp.h>

#include <stddef.h>

struct dd_sched;
struct dd_layer;

/**
 * A layer dd_model_commit cut is the application's handle, outside
 * sched->layers, with its n parts there in forward order; each part points
 * at it (whole) and covers count elements from offset of its tensors taken
 * in order.
 */
typedef struct {
    struct dd_layer **parts;
    size_t n;
    struct dd_layer *whole;
    size_t offset, count;
} dd_split_layer_t;

dd_status_t dd_sched_split_parse(struct dd_sched *sched);
size_t dd_sched_split_limit(const struct dd_sched *sched);
dd_status_t dd_sched_split_commit(struct dd_sched *sched);
void dd_sched_split_free(struct dd_sched *sched);
size_t dd_sched_num_handles(const struct dd_sched *sched);
struct dd_layer *dd_sched_handle_at(const struct dd_sched *sched, size_t i);
dd_status_t dd_sched_layer_part(struct dd_sched *sched, dd_layer_h layer,
                                size_t i, dd_layer_h *part_p, size_t *offset_p,
                                size_t *count_p);

#endif
