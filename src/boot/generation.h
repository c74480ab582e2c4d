/*
 * The elastic job's generation (generation.c): the launcher (ddrun
 * --elastic) writes the number of the generation it formed last in
 * DIR/generation, so that a rank of an older one (frozen, then dropped)
 * learns, when it wakes, that the job went on without it.
 */
#ifndef DD_BOOT_GENERATION_H
#define DD_BOOT_GENERATION_H

#include "boot/boot_config.h"

#include <dreamddp.h>

/** DD_ERR_CANCELED, saying so, when the job (opts' DREAMDDP_ELASTIC_DIR)
 *  is at a later generation than opts' own: rank was dropped. DD_OK
 *  otherwise. */
dd_status_t dd_boot_generation_check(const dd_boot_opts_t *opts, int rank);

#endif
