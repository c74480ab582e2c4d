/* Aggregation's pure parts: the BytePS split, the modeled time, the choice
 * of homes, and the summation (order, conversions, averages). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agg/wire.h"
#include "core/half.h"

#include <math.h>
#include <string.h>

static void test_share(void **state)
{
    assert_true(dd_agg_share(4, 0) == 0.0);
    assert_true(dd_agg_share(4, 4) == 1.0);
    assert_true(dd_agg_share(4, 9) == 1.0);
    /* 2k(n-1) / (n^2 + kn - 2k) */
    assert_true(fabs(dd_agg_share(4, 2) - 12.0 / 20.0) < 1e-12);
    assert_true(fabs(dd_agg_share(4, 1) - 6.0 / 18.0) < 1e-12);
    assert_true(fabs(dd_agg_share(3, 1) - 4.0 / 10.0) < 1e-12);
}

static void test_model(void **state)
{
    double m = 100e6, b = 125e6;
    /* k = 0: the ring, 2(n-1)/n M/B; k = n: push/pull, M/B. */
    assert_true(fabs(dd_agg_model_s(4, 0, m, b) - 1.5 * m / b) < 1e-12);
    assert_true(fabs(dd_agg_model_s(4, 4, m, b) - m / b) < 1e-12);
    /* 4 + 2: 2*4*3/(16+8-4) = 1.2 M/B. */
    assert_true(fabs(dd_agg_model_s(4, 2, m, b) - 1.2 * m / b) < 1e-12);
    assert_true(dd_agg_model_s(1, 3, m, b) == 0.0);
}

static void test_pick_home_balances_by_share(void **state)
{
    double weight[3] = {0.5, 0.25, 0.25}, load[3] = {0, 0, 0};
    int count[3] = {0, 0, 0};
    for (int i = 0; i < 400; i++) {
        count[dd_agg_pick_home(weight, load, 3, 1000)]++;
    }
    assert_int_equal(count[0], 200);
    assert_int_equal(count[1], 100);
    assert_int_equal(count[2], 100);
    /* A home with no share gets nothing; the choice is deterministic. */
    double w2[2] = {0, 1}, l2[2] = {0, 0};
    assert_int_equal(dd_agg_pick_home(w2, l2, 2, 10), 1);
    double none[1] = {0}, l3[1] = {0};
    assert_int_equal(dd_agg_pick_home(none, l3, 1, 10), -1);
    /* dd_agg_next_home says the pick to come and leaves the loads. */
    double w4[2] = {0.5, 0.5}, l4[2] = {0, 0};
    for (int i = 0; i < 6; i++) {
        int next = dd_agg_next_home(w4, l4, 2, 100);
        assert_int_equal(next, i % 2);
        assert_true(l4[0] == 100.0 * ((i + 1) / 2) && l4[1] == 100.0 * (i / 2));
        assert_int_equal(dd_agg_pick_home(w4, l4, 2, 100), next);
    }
}

static void test_sum_f32_in_order(void **state)
{
    /* 1e8 + 1 - 1e8 depends on the order: the homes add worker 0 first. */
    float a[1] = {1e8f}, b[1] = {1.0f}, c[1] = {-1e8f}, acc[1], out[1];
    dd_agg_add(acc, a, 1, DD_DTYPE_F32, 1, dd_agg_sum_scale(3));
    dd_agg_add(acc, b, 1, DD_DTYPE_F32, 0, dd_agg_sum_scale(3));
    dd_agg_add(acc, c, 1, DD_DTYPE_F32, 0, dd_agg_sum_scale(3));
    dd_agg_out(out, acc, 1, DD_DTYPE_F32, 3, dd_agg_sum_scale(3));
    float want = ((1e8f + 1.0f) + -1e8f) / 3.0f;
    assert_memory_equal(out, &want, sizeof(float));
}

static void test_half_types(void **state)
{
    enum { N = 37 }; /* not a multiple of the vector width */
    uint16_t x[N], y[N], out[N];
    float acc[N];
    for (int i = 0; i < N; i++) {
        x[i] = dd_half_f32_to_f16(0.25f * i);
        y[i] = dd_half_f32_to_f16(-0.125f * i + 3);
    }
    dd_agg_add(acc, x, N, DD_DTYPE_F16, 1, dd_agg_sum_scale(2));
    dd_agg_add(acc, y, N, DD_DTYPE_F16, 0, dd_agg_sum_scale(2));
    dd_agg_out(out, acc, N, DD_DTYPE_F16, 2, dd_agg_sum_scale(2));
    for (int i = 0; i < N; i++) {
        float want = (0.25f * i + (-0.125f * i + 3)) / 2;
        assert_true(out[i] == dd_half_f32_to_f16(want));
    }
    for (int i = 0; i < N; i++) {
        x[i] = dd_half_f32_to_bf16(2.0f * i);
        y[i] = dd_half_f32_to_bf16(4.0f);
    }
    dd_agg_add(acc, x, N, DD_DTYPE_BF16, 1, dd_agg_sum_scale(2));
    dd_agg_add(acc, y, N, DD_DTYPE_BF16, 0, dd_agg_sum_scale(2));
    dd_agg_out(out, acc, N, DD_DTYPE_BF16, 2, dd_agg_sum_scale(2));
    for (int i = 0; i < N; i++) {
        assert_true(out[i] == dd_half_f32_to_bf16(i + 2.0f));
    }
}

/* Scaled as they are added (sum.c), the copies average to the bits of
 * their plain sum divided by n, for 1 to 7 workers and values across f32's
 * range (what the allreduce route gives, and every exactness figure
 * relies on); and where the plain sum overflows, to the finite average. */
static void test_scaled_sum_bits(void **state)
{
    enum { N = 4096 };
    static float x[7][N], acc[N], out[N];
    uint32_t seed = 12345;
    for (int w = 0; w < 7; w++) {
        for (int i = 0; i < N; i++) {
            seed = seed * 1664525u + 1013904223u;
            float m = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
            x[w][i] = ldexpf(m, (int)(seed % 160) - 80);
        }
    }
    for (int n = 1; n <= 7; n++) {
        float scale = dd_agg_sum_scale(n);
        for (int w = 0; w < n; w++) {
            dd_agg_add(acc, x[w], N, DD_DTYPE_F32, w == 0, scale);
        }
        dd_agg_out(out, acc, N, DD_DTYPE_F32, n, scale);
        for (int i = 0; i < N; i++) {
            float sum = x[0][i];
            for (int w = 1; w < n; w++) {
                sum += x[w][i];
            }
            float want = sum / (float)n;
            if (memcmp(&out[i], &want, sizeof(float)) != 0) {
                fail_msg("%d workers, element %d: %a, plainly %a", n, i, out[i],
                         want);
            }
        }
    }
    float big[3] = {3e38f, 3.2e38f, 3.4e38f}, avg;
    for (int w = 0; w < 3; w++) {
        dd_agg_add(acc, &big[w], 1, DD_DTYPE_F32, w == 0, dd_agg_sum_scale(3));
    }
    dd_agg_out(&avg, acc, 1, DD_DTYPE_F32, 3, dd_agg_sum_scale(3));
    assert_true(avg == (3e38f / 4 + 3.2e38f / 4 + 3.4e38f / 4) / 0.75f);
    assert_true(isfinite(avg));
}

static void test_f64_and_dtypes(void **state)
{
    double a[2] = {1.5, 1e300}, b[2] = {2.5, 1e300}, acc[2], out[2];
    dd_agg_add(acc, a, 2, DD_DTYPE_F64, 1, dd_agg_sum_scale(2));
    dd_agg_add(acc, b, 2, DD_DTYPE_F64, 0, dd_agg_sum_scale(2));
    dd_agg_out(out, acc, 2, DD_DTYPE_F64, 2, dd_agg_sum_scale(2));
    assert_true(out[0] == 2.0 && out[1] == 1e300);
    assert_true(dd_agg_dtype_ok(DD_DTYPE_BF16));
    assert_false(dd_agg_dtype_ok(DD_DTYPE_I32));
    assert_int_equal(dd_agg_acc_bytes(DD_DTYPE_F16, 10), 40);
    assert_int_equal(dd_agg_acc_bytes(DD_DTYPE_F64, 10), 80);
}

static void test_tags_stay_apart(void **state)
{
    /* Bit 46 set, bit 47 clear: never a collective's tag. */
    uint64_t t = dd_agg_tag(DD_AGG_TAG_RDATA, (1ull << 40) + 5);
    assert_true(t >> 46 == 1);
    assert_true((t & ((1ull << 40) - 1)) / 840 == 5);
    assert_true(dd_agg_tag(DD_AGG_TAG_HDR, 0) !=
                dd_agg_tag(DD_AGG_TAG_DATA, 0));
    /* Every tag is 0 mod every stream count, so the whole route takes the
     * first connection to each peer, and the pieces in flight at once
     * have tags of their own. */
    for (uint64_t seq = 0; seq < 5000; seq++) {
        for (int kind = DD_AGG_TAG_HDR; kind <= DD_AGG_TAG_RDATA; kind++) {
            uint64_t tag = dd_agg_tag(kind, seq);
            for (uint64_t n = 1; n <= 8; n++) {
                assert_true(tag % n == 0);
            }
            if (seq > 0) {
                assert_true(tag != dd_agg_tag(kind, seq - 1));
            }
        }
    }
    assert_int_equal(sizeof(dd_agg_hdr_t), 256);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_pick_home_balances_by_share),
        cmocka_unit_test(test_sum_f32_in_order),
        cmocka_unit_test(test_half_types),
        cmocka_unit_test(test_f64_and_dtypes),
        cmocka_unit_test(test_scaled_sum_bits),
        cmocka_unit_test(test_tags_stay_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
