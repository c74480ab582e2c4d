/*
 * The dd_init step of the topology: probe, choose, agree across ranks.
 */
#ifndef DD_TOPO_EXPORT_H
#define DD_TOPO_EXPORT_H

#include "boot/store.h"
#include "topo/ifchoice.h"

/**
 * The dd_init step: reads the topology configuration, probes, chooses this
 * rank's interface, agrees with every rank through the store and logs the
 * choice once at info level.
 * @return DD_OK; the errors of dd_config_load, dd_topo_probe,
 *         dd_topo_choose and dd_topo_agree, each reported where detected.
 */
dd_status_t dd_topo_setup(dd_store_t *store, int local_rank, int local_size,
                          dd_topo_choice_t *choice_p);

#endif
