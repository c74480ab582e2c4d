/*
 * Rank 0's store address through the launcher's PMIx server: rank 0 puts
 * it in the job's key-value space, a fence spreads it, the others get it.
 * Only where the library is built with PMIx (configure --with-pmix);
 * whether a launcher runs a PMIx server is decided from its variables in
 * env.c.
 */
#ifndef DD_BOOT_PMIX_H
#define DD_BOOT_PMIX_H

#include <dreamddp.h>

#include <stddef.h>

/* The key rank 0 puts: "IPV4 HOST PORT". */
#define DD_BOOT_PMIX_KEY "dreamddp.store"

/** Whether the library is built with PMIx. */
int dd_boot_pmix_built(void);

/**
 * Rank 0 (rank == 0) publishes its store: its first IPv4 address other
 * than loopback (virtual bridges last), its host name and *port_p; every
 * rank waits in a fence of the whole namespace for at most timeout_s, and
 * the others read it back into addr (127.0.0.1 on rank 0's host, else its
 * address) and *port_p. The PMIx rank must be rank: an error says so
 * otherwise, as it does when the server cannot be reached, naming the
 * PMIx call and what to set instead (DREAMDDP_MASTER_ADDR).
 * DD_ERR_UNSUPPORTED where the library is built without PMIx.
 */
dd_status_t dd_boot_pmix_exchange(int rank, double timeout_s, char *addr,
                                  size_t addr_size, int *port_p);

#endif
