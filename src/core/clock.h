/*
 * Wall-clock offsets between ranks, NTP-style: a rank sends at t_send on its
 * own clock, the peer answers with its clock t_peer, the answer arrives at
 * t_recv. With symmetric paths the peer read its clock at the midpoint, so
 * offset = t_peer - (t_send + t_recv) / 2, wrong by at most half the round
 * trip; of several rounds the one with the shortest round trip is kept.
 * Pure arithmetic: the exchange itself lives where the store is (src/api).
 */
#ifndef DD_CORE_CLOCK_H
#define DD_CORE_CLOCK_H

#include <time.h>

/** One ping-pong, in microseconds: send and recv on this rank's clock,
 * peer on the peer's. */
typedef struct {
    double send_us;
    double peer_us;
    double recv_us;
} dd_clock_sample_t;

/**
 * The peer's clock minus this rank's (add it to a time read here to get
 * the peer's), from the round of n with the shortest round trip, and its
 * uncertainty (half that round trip). Returns 0, or -1 when no round is
 * usable (n == 0, or every round trip negative: a clock that stepped).
 */
int dd_clock_offset_estimate(const dd_clock_sample_t *samples, int n,
                             double *offset_us_p, double *uncertainty_us_p);

/** CLOCK_REALTIME in microseconds, plus skew_us (DREAMDDP_TEST_CLOCK_SKEW_US,
 * which tests use to give ranks of one host different clocks). */
static inline double dd_clock_realtime_us(double skew_us)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e6 + 1e-3 * (double)ts.tv_nsec + skew_us;
}

#endif
