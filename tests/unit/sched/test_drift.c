/* The divergence monitor's arithmetic and adaptive:drift's rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sched/drift.h"
#include "sched/plan/strategy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Replicas set to known values: x = avg + d with |d| and avg chosen so
 * that every sum is exact; every length, across the blocks of eight and
 * their tail. */
static void test_norms_exact(void **state)
{
    float xf[67], af[67];
    double xd[67], ad[67];

    (void)state;
    for (size_t n = 0; n <= 67; n++) {
        for (size_t i = 0; i < n; i++) {
            af[i] = 2.5f;
            xf[i] = i % 2 ? 4.0f : 1.0f; /* 2.5 +- 1.5 */
            ad[i] = -2.5;
            xd[i] = i % 3 ? -2.0 : -3.0; /* -2.5 +- 0.5 */
        }
        double d2 = 0, n2 = 0;
        assert_int_equal(dd_drift_norms(xf, af, n, DD_DTYPE_F32, &d2, &n2), 1);
        assert_true(d2 == 2.25 * (double)n);
        assert_true(n2 == 6.25 * (double)n);
        assert_int_equal(dd_drift_norms(xd, ad, n, DD_DTYPE_F64, &d2, &n2), 1);
        /* The sums add up over calls (a layer of several tensors). */
        assert_true(d2 == 2.5 * (double)n);
        assert_true(n2 == 12.5 * (double)n);
    }
    /* 16 elements at 2.5 +- 1.5: 1.5 / 2.5 exactly as a double divides. */
    double d2 = 0, n2 = 0;
    dd_drift_norms(xf, af, 16, DD_DTYPE_F32, &d2, &n2);
    assert_true(dd_drift_relative(d2, n2) == 1.5 / 2.5);
    /* Equal replicas: exactly 0; an average of 0: the distance itself. */
    d2 = n2 = 0;
    dd_drift_norms(af, af, 67, DD_DTYPE_F32, &d2, &n2);
    assert_true(d2 == 0 && dd_drift_relative(d2, n2) == 0);
    assert_true(dd_drift_relative(9, 0) == 3);
    /* Integer dtypes are not measured. */
    int32_t i32[4] = {1, 2, 3, 4};
    d2 = n2 = 0;
    assert_int_equal(dd_drift_norms(i32, i32, 4, DD_DTYPE_I32, &d2, &n2), 0);
    assert_true(d2 == 0 && n2 == 0);
}

/* A large layer of rounding values: the lanes' sums against one long
 * double sum, to the rounding of double. */
static void test_norms_large(void **state)
{
    enum { N = 100003 };
    static float x[N], a[N];
    long double d = 0, s = 0;

    (void)state;
    for (size_t i = 0; i < N; i++) {
        a[i] = (float)sin((double)i) * 0.1f;
        x[i] = a[i] + (float)cos((double)i * 0.7) * 0.01f;
        long double di = (long double)x[i] - a[i];
        d += di * di;
        s += (long double)a[i] * a[i];
    }
    double d2 = 0, n2 = 0;
    dd_drift_norms(x, a, N, DD_DTYPE_F32, &d2, &n2);
    assert_true(fabs(d2 - (double)d) <= 1e-12 * (double)d);
    assert_true(fabs(n2 - (double)s) <= 1e-12 * (double)s);
}

/* Layers up to DD_DRIFT_EXACT elements are measured whole; a larger one's
 * sample is its blocks at dd_drift_step() apart, gathered in order, and its
 * figure, from the compact sample or from the whole layer, estimates the
 * whole one's: here within 2 % for a layer whose divergence varies along
 * it, and to rounding for a uniform one. */
static void test_norms_sampled(void **state)
{
    enum { N = 1000003 };
    float *x = malloc(N * sizeof(float)), *a = malloc(N * sizeof(float));
    float *kept = malloc(N * sizeof(float));
    double d2 = 0, n2 = 0, e2 = 0, m2 = 0, s2 = 0, t2 = 0;

    (void)state;
    assert_non_null(x);
    assert_non_null(a);
    assert_non_null(kept);
    assert_int_equal(dd_drift_step(DD_DRIFT_EXACT), DD_DRIFT_EXACT);
    assert_int_equal(dd_drift_sample_count(DD_DRIFT_EXACT), DD_DRIFT_EXACT);
    size_t step = dd_drift_step(N), n = dd_drift_sample_count(N);
    assert_int_equal(step % DD_DRIFT_BLOCK, 1);
    assert_true(n >= DD_DRIFT_EXACT / 2 && n <= 2 * DD_DRIFT_EXACT);
    for (size_t i = 0; i < N; i++) {
        a[i] = (float)sin((double)i) * 0.1f;
        x[i] = a[i] + (float)(cos((double)i * 0.7) * 0.01 * (1 + i % 3));
    }
    dd_drift_sample(kept, x, N, sizeof(float));
    /* The blocks, in order: the second starts at step. */
    assert_memory_equal(kept, x, DD_DRIFT_BLOCK * sizeof(float));
    assert_memory_equal(kept + DD_DRIFT_BLOCK, x + step,
                        DD_DRIFT_BLOCK * sizeof(float));
    dd_drift_norms(x, a, N, DD_DTYPE_F32, &d2, &n2);
    assert_int_equal(
        dd_drift_norms_sampled(kept, 0, a, N, DD_DTYPE_F32, &e2, &m2), 1);
    assert_int_equal(dd_drift_norms_sampled(x, 1, a, N, DD_DTYPE_F32, &s2, &t2),
                     1);
    assert_true(e2 == s2 && m2 == t2); /* the same elements either way */
    double whole = dd_drift_relative(d2, n2), est = dd_drift_relative(e2, m2);
    assert_true(fabs(est - whole) <= 0.02 * whole);
    assert_true(fabs(e2 - d2) <= 0.05 * d2); /* scaled to the whole layer */
    /* Uniform replicas: the figure to rounding. */
    for (size_t i = 0; i < N; i++) {
        a[i] = 2.5f;
        x[i] = 4.0f;
    }
    e2 = m2 = 0;
    dd_drift_norms_sampled(x, 1, a, N, DD_DTYPE_F32, &e2, &m2);
    assert_true(fabs(dd_drift_relative(e2, m2) - 0.6) <= 1e-12);
    /* At most DD_DRIFT_EXACT elements: dd_drift_norms itself. */
    d2 = n2 = e2 = m2 = 0;
    dd_drift_norms(x, a, 1000, DD_DTYPE_F32, &d2, &n2);
    dd_drift_norms_sampled(x, 0, a, 1000, DD_DTYPE_F32, &e2, &m2);
    assert_true(d2 == e2 && n2 == m2);
    free(x);
    free(a);
    free(kept);
}

/* The cross-worker maximum is the largest figure, the mean over those who
 * measured; a layer none measured stays DD_DRIFT_NONE. */
static void test_reduce(void **state)
{
    /* 3 workers, rows of 1 + 3 (an unrelated value, then 3 layers). */
    const double all[3][4] = {{7, 0.25, DD_DRIFT_NONE, DD_DRIFT_NONE},
                              {7, 0.5, 0.125, DD_DRIFT_NONE},
                              {7, 0.125, 0.375, DD_DRIFT_NONE}};
    double max[3], mean[3];

    (void)state;
    dd_drift_reduce(&all[0][0], 3, 4, 1, 3, max, mean);
    assert_true(max[0] == 0.5);
    assert_true(mean[0] == (0.25 + 0.5 + 0.125) / 3);
    assert_true(max[1] == 0.375);
    assert_true(mean[1] == 0.25); /* of the two that measured */
    assert_true(max[2] == DD_DRIFT_NONE && mean[2] == DD_DRIFT_NONE);
}

/* Rises in a row warn once they reach windows; the layer then stays quiet
 * for windows agreements; the threshold warns on its own. */
static void test_watch(void **state)
{
    dd_drift_watch_t w;
    const double rising[] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8};
    int fired[8];

    (void)state;
    memset(&w, 0, sizeof(w));
    for (int i = 0; i < 8; i++) {
        fired[i] = dd_drift_watch(&w, rising[i], 3, 0);
    }
    /* The 4th figure is the 3rd rise; quiet for 3 agreements after. */
    const int want[8] = {
        0, 0, 0, DD_DRIFT_WARN_RISING, 0, 0, DD_DRIFT_WARN_RISING, 0};
    assert_memory_equal(fired, want, sizeof(want));
    /* Rises of 10 % or less are noise, not a rise. */
    memset(&w, 0, sizeof(w));
    for (int i = 0; i < 8; i++) {
        assert_int_equal(dd_drift_watch(&w, 0.1 * pow(1.05, i), 3, 0), 0);
    }
    assert_int_equal(w.rises, 0);
    assert_int_equal(dd_drift_watch(&w, 0.3, 3, 0), 0);
    assert_int_equal(w.rises, 1);
    /* A fall starts the count again. */
    assert_int_equal(dd_drift_watch(&w, 0.1, 3, 0), 0);
    assert_int_equal(w.rises, 0);
    /* An unmeasured figure changes nothing. */
    assert_int_equal(dd_drift_watch(&w, DD_DRIFT_NONE, 3, 0), 0);
    assert_true(w.last == 0.1);
    /* Above the threshold, flat: warns, then quiet for 3 agreements. */
    memset(&w, 0, sizeof(w));
    assert_int_equal(dd_drift_watch(&w, 0.9, 3, 0.5), DD_DRIFT_WARN_ABOVE);
    assert_int_equal(dd_drift_watch(&w, 0.9, 3, 0.5), 0);
    assert_int_equal(dd_drift_watch(&w, 0.9, 3, 0.5), 0);
    assert_int_equal(dd_drift_watch(&w, 0.9, 3, 0.5), DD_DRIFT_WARN_ABOVE);
    /* At the threshold, or with none: no warning. */
    memset(&w, 0, sizeof(w));
    assert_int_equal(dd_drift_watch(&w, 0.5, 3, 0.5), 0);
    assert_int_equal(dd_drift_watch(&w, 0.5, 3, 0), 0);
}

static void test_strategy(void **state)
{
    dd_strategy_t st;
    char buf[32];

    (void)state;
    assert_int_equal(dd_strategy_parse("adaptive:drift", &st), DD_OK);
    assert_int_equal(st.kind, DD_STRATEGY_ADAPTIVE);
    assert_int_equal(st.signal, DD_ADAPT_DRIFT);
    dd_strategy_format(&st, buf, sizeof(buf));
    assert_string_equal(buf, "adaptive:drift");
    assert_int_equal(dd_strategy_parse("adaptive", &st), DD_OK);
    assert_int_equal(st.signal, DD_ADAPT_GRAD);
    assert_int_equal(dd_strategy_parse("adaptive:drif", &st),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_strategy_parse("adaptive:drift2", &st),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_strategy_parse("localsgd:drift", &st),
                     DD_ERR_INVALID_PARAM);
}

static void test_drift_period(void **state)
{
    (void)state;
    /* Above the target: shorter, never below kmin. */
    assert_int_equal(dd_strategy_drift_period(4, 0.03, 0.02, 1, 16), 3);
    assert_int_equal(dd_strategy_drift_period(1, 9.0, 0.02, 1, 16), 1);
    /* Below half of it: longer, never above kmax. */
    assert_int_equal(dd_strategy_drift_period(4, 0.009, 0.02, 1, 16), 5);
    assert_int_equal(dd_strategy_drift_period(16, 0, 0.02, 1, 16), 16);
    /* Between, and at either bound: unchanged. */
    assert_int_equal(dd_strategy_drift_period(4, 0.015, 0.02, 1, 16), 4);
    assert_int_equal(dd_strategy_drift_period(4, 0.02, 0.02, 1, 16), 4);
    assert_int_equal(dd_strategy_drift_period(4, 0.01, 0.02, 1, 16), 4);
    assert_int_equal(dd_strategy_drift_period(40, 0.015, 0.02, 2, 8), 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norms_exact),
        cmocka_unit_test(test_norms_large),
        cmocka_unit_test(test_norms_sampled),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_strategy),
        cmocka_unit_test(test_drift_period),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
