/*
 * Tests of the clock-offset estimator (src/core/clock.c) on a faked clock:
 * a peer whose clock runs a known offset ahead, reached over paths with
 * known delays, so the estimate and its bound can be checked exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/clock.h"

#include <math.h>

/* One round from local time t: there takes out_us, back takes back_us, and
 * the peer's clock reads offset_us ahead of ours. */
static dd_clock_sample_t fake_round(double t, double out_us, double back_us,
                                    double offset_us)
{
    return (dd_clock_sample_t){.send_us = t,
                               .peer_us = t + out_us + offset_us,
                               .recv_us = t + out_us + back_us};
}

/* The round with the shortest round trip decides, even when the others
 * are far off (queued behind other ranks, as rank 0's answers are). */
static void test_offset_min_rtt_round(void **state)
{
    (void)state;
    const double offset = -250000.0; /* the peer is 250 ms behind */
    dd_clock_sample_t s[5] = {
        fake_round(1e9, 4000, 30, offset),        /* queued on the way there */
        fake_round(1e9 + 5000, 20, 3000, offset), /* and on the way back */
        fake_round(1e9 + 9000, 40, 40, offset),   /* the shortest: symmetric */
        fake_round(1e9 + 9500, 900, 100, offset),
        fake_round(1e9 + 9800, 60, 70, offset),
    };
    double est, unc;

    assert_int_equal(dd_clock_offset_estimate(s, 5, &est, &unc), 0);
    assert_true(fabs(est - offset) < 1e-6);
    assert_true(fabs(unc - 40.0) < 1e-6);
}

/* With asymmetric paths the estimate is off by half the asymmetry, never
 * by more than the uncertainty it reports. */
static void test_offset_within_uncertainty(void **state)
{
    (void)state;
    const double offset = 123456.7;
    double est, unc;

    for (double out = 0; out <= 1000; out += 125) {
        dd_clock_sample_t s = fake_round(5e8, out, 1000 - out, offset);
        assert_int_equal(dd_clock_offset_estimate(&s, 1, &est, &unc), 0);
        assert_true(fabs(est - (offset + 0.5 * (out - (1000 - out)))) < 1e-6);
        assert_true(fabs(est - offset) <= unc + 1e-6);
        assert_true(fabs(unc - 500.0) < 1e-6);
    }
}

/* No rounds, or only rounds whose clock stepped back, give no estimate. */
static void test_offset_unusable(void **state)
{
    (void)state;
    dd_clock_sample_t back = {.send_us = 100, .peer_us = 50, .recv_us = 90};
    double est = 7, unc = 7;

    assert_int_equal(dd_clock_offset_estimate(&back, 0, &est, &unc), -1);
    assert_int_equal(dd_clock_offset_estimate(&back, 1, &est, &unc), -1);
    assert_true(est == 7 && unc == 7); /* outputs untouched on failure */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offset_min_rtt_round),
        cmocka_unit_test(test_offset_within_uncertainty),
        cmocka_unit_test(test_offset_unusable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
