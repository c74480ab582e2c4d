/*
 * Messages that name ranks by what each holds (ranks.c).
 */
#ifndef DD_CORE_RANKS_H
#define DD_CORE_RANKS_H

#include <stddef.h>

/** Appends " rank 0..2 'a', rank 3 'b'" to msg: the ranks holding each
 *  value (NULL or "": none), in the order of the lowest rank of each. */
void dd_ranks_by_value(const char *const *values, int world, char *msg,
                       size_t size);

#endif
