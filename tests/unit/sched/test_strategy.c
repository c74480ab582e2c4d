/* Strategy names and the adaptive period rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sched/plan/strategy.h"

static void expect(const char *s, dd_strategy_kind_t kind, unsigned h,
                   const char *canonical)
{
    dd_strategy_t st;
    char buf[32];
    assert_int_equal(dd_strategy_parse(s, &st), DD_OK);
    assert_int_equal(st.kind, kind);
    assert_int_equal(st.window, h);
    dd_strategy_format(&st, buf, sizeof(buf));
    assert_string_equal(buf, canonical);
}

static void test_parse(void **state)
{
    expect("ddp", DD_STRATEGY_DDP, 1, "ddp");
    expect("localsgd:4", DD_STRATEGY_LOCALSGD, 4, "localsgd:4");
    expect("plsgd:10", DD_STRATEGY_PLSGD, 10, "plsgd:10");
    expect("dreamddp:1", DD_STRATEGY_DREAMDDP, 1, "dreamddp:1");
    expect("adaptive", DD_STRATEGY_ADAPTIVE, 1, "adaptive");
}

/* "+next": delayed averaging, on the windowed parameter strategies. */
static void test_parse_delay(void **state)
{
    dd_strategy_t st;
    expect("dreamddp:4+next", DD_STRATEGY_DREAMDDP, 4, "dreamddp:4+next");
    expect("plsgd:2+next", DD_STRATEGY_PLSGD, 2, "plsgd:2+next");
    expect("localsgd:1024+next", DD_STRATEGY_LOCALSGD, 1024,
           "localsgd:1024+next");
    assert_int_equal(dd_strategy_parse("dreamddp:4+next", &st), DD_OK);
    assert_int_equal(st.delay, 1);
    assert_int_equal(dd_strategy_parse("dreamddp:4", &st), DD_OK);
    assert_int_equal(st.delay, 0);
}

static void test_parse_bad(void **state)
{
    const char *bad[] = {"",
                         "dreamddp",
                         "dreamddp:",
                         "dreamddp:0",
                         "dreamddp:x",
                         "localsgd:4:4",
                         "ddp:2",
                         "adaptive:3",
                         "plsgd:1025",
                         "DDP",
                         "dreamddp:-1",
                         "sgd",
                         "dreamddp: 4",
                         "dreamddp:+4",
                         "dreamddp:4 ",
                         "dreamddp:0x4",
                         "localsgd:\t4",
                         "plsgd:99999999999999999999",
                         "ddp+next",
                         "adaptive+next",
                         "dreamddp+next",
                         "dreamddp:+next",
                         "dreamddp:4+",
                         "dreamddp:4+nex",
                         "dreamddp:4+next+next",
                         "dreamddp:4+NEXT",
                         "dreamddp:4 +next",
                         "dreamddp:1025+next"};
    dd_strategy_t st;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(dd_strategy_parse(bad[i], &st), DD_ERR_INVALID_PARAM);
    }
}

static void test_grads(void **state)
{
    dd_strategy_t ddp = {DD_STRATEGY_DDP, 1, DD_ADAPT_GRAD, 0},
                  dream = {DD_STRATEGY_DREAMDDP, 4, DD_ADAPT_GRAD, 0};
    assert_true(dd_strategy_syncs_grads(&ddp));
    assert_false(dd_strategy_syncs_grads(&dream));
}

static void test_adapt_period(void **state)
{
    /* Above the high threshold: one step shorter, never below kmin. */
    assert_int_equal(dd_strategy_adapt_period(4, 1.5, 1.3, 0.8, 1, 16), 3);
    assert_int_equal(dd_strategy_adapt_period(1, 9.0, 1.3, 0.8, 1, 16), 1);
    /* Below the low threshold: one step longer, never above kmax. */
    assert_int_equal(dd_strategy_adapt_period(4, 0.5, 1.3, 0.8, 1, 16), 5);
    assert_int_equal(dd_strategy_adapt_period(16, 0.1, 1.3, 0.8, 1, 16), 16);
    /* In between, and exactly at the thresholds: unchanged. */
    assert_int_equal(dd_strategy_adapt_period(4, 1.0, 1.3, 0.8, 1, 16), 4);
    assert_int_equal(dd_strategy_adapt_period(4, 1.3, 1.3, 0.8, 1, 16), 4);
    assert_int_equal(dd_strategy_adapt_period(4, 0.8, 1.3, 0.8, 1, 16), 4);
    /* Out-of-range periods are pulled into [kmin, kmax]. */
    assert_int_equal(dd_strategy_adapt_period(40, 1.0, 1.3, 0.8, 2, 8), 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_parse_delay),  cmocka_unit_test(test_grads),
        cmocka_unit_test(test_adapt_period),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
