/*
 * The offset estimator of core/clock.h: no clock is read here.
 */
#include "core/clock.h"

int dd_clock_offset_estimate(const dd_clock_sample_t *samples, int n,
                             double *offset_us_p, double *uncertainty_us_p)
{
    int best = -1;
    double best_rtt = 0;

    for (int i = 0; i < n; i++) {
        double rtt = samples[i].recv_us - samples[i].send_us;
        if (rtt >= 0 && (best < 0 || rtt < best_rtt)) {
            best = i;
            best_rtt = rtt;
        }
    }
    if (best < 0) {
        return -1;
    }
    const dd_clock_sample_t *s = &samples[best];
    *offset_us_p = s->peer_us - 0.5 * (s->send_us + s->recv_us);
    *uncertainty_us_p = 0.5 * best_rtt;
    return 0;
}
