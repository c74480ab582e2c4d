/*
 * Blocking-with-deadline TCP helpers: connect with retries, send all, receive
 * one length-prefixed frame. Every call is bounded by a deadline on the
 * monotonic clock; none logs, callers report with the facts they have.
 */
#ifndef DD_BOOT_SOCK_H
#define DD_BOOT_SOCK_H

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

/**
 * Connects to addr:port, retrying refused or unreachable attempts until the
 * deadline. On failure returns DD_ERR_UNREACHABLE and writes the last system
 * error into why.
 */
dd_status_t dd_sock_connect(const char *addr, int port, double deadline,
                            int *fd_p, char *why, size_t why_size);

/**
 * Whether addr names a host at all: 0 when it resolves (or the resolver
 * failed for now, which a retry may mend), -1 when the resolver says no
 * such host exists, with its words in why.
 */
int dd_sock_resolvable(const char *addr, char *why, size_t why_size);

/** Sends all of buf; DD_ERR_PEER_LOST or DD_ERR_TIMED_OUT on failure. */
dd_status_t dd_sock_send_all(int fd, const void *buf, size_t len,
                             double deadline);

/**
 * Receives one frame (u32 length, body); the body is malloc'ed. Returns
 * DD_ERR_PEER_LOST when the peer closed, DD_ERR_TIMED_OUT at the deadline,
 * DD_ERR_MESSAGE for a frame over max_len.
 */
dd_status_t dd_sock_recv_frame(int fd, double deadline, size_t max_len,
                               uint8_t **body_p, size_t *len_p);

/**
 * Whether an IPv4 address belongs to this host: 1 yes, 0 no, -1 when that
 * cannot be told (not an IPv4 address, no socket).
 */
int dd_sock_addr_is_local(const char *addr);

/** Sets O_NONBLOCK and TCP_NODELAY where applicable. */
int dd_sock_set_nonblocking(int fd);
void dd_sock_set_nodelay(int fd);

#endif
