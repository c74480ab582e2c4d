/* Every configuration parser with good and bad values, the loader's error
 * message, and the printed table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../fake_env.h"
#include "backends/backend_config.h"
#include "boot/boot_config.h"
#include "core/config.h"
#include "core/core_config.h"
#include "core/log.h"
#include "sched/sched_config.h"
#include "topo/topo_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_bool(void **state)
{
    int v = -1;
    const char *yes[] = {"1", "y", "YES", "on", "True"};
    const char *no[] = {"0", "n", "no", "OFF", "false"};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(dd_config_parse_bool(yes[i], &v), DD_OK);
        assert_int_equal(v, 1);
        assert_int_equal(dd_config_parse_bool(no[i], &v), DD_OK);
        assert_int_equal(v, 0);
    }
    assert_int_equal(dd_config_parse_bool("2", &v), DD_ERR_INVALID_CONFIG);
    assert_int_equal(dd_config_parse_bool("yess", &v), DD_ERR_INVALID_CONFIG);
}

static void test_int(void **state)
{
    int v = 0;
    assert_int_equal(dd_config_parse_int("42", 0, 100, &v), DD_OK);
    assert_int_equal(v, 42);
    assert_int_equal(dd_config_parse_int("-3", -5, 5, &v), DD_OK);
    assert_int_equal(v, -3);
    assert_int_equal(dd_config_parse_int("101", 0, 100, &v),
                     DD_ERR_INVALID_CONFIG);
    assert_int_equal(dd_config_parse_int("-1", 0, 100, &v),
                     DD_ERR_INVALID_CONFIG);
    assert_int_equal(dd_config_parse_int("4x", 0, 100, &v),
                     DD_ERR_INVALID_CONFIG);
    assert_int_equal(dd_config_parse_int("", 0, 100, &v),
                     DD_ERR_INVALID_CONFIG);
    assert_int_equal(dd_config_parse_int("99999999999999999999", 0, 100, &v),
                     DD_ERR_INVALID_CONFIG);
    assert_int_equal(v, -3); /* untouched on error */
}

static void test_float(void **state)
{
    double v = 0;
    assert_int_equal(dd_config_parse_float("1.3", 0, 10, &v), DD_OK);
    assert_true(v == 1.3);
    assert_int_equal(dd_config_parse_float("10", 0, 10, &v), DD_OK);
    assert_true(v == 10.0);
    assert_int_equal(dd_config_parse_float("10.5", 0, 10, &v),
                     DD_ERR_INVALID_CONFIG);
    assert_int_equal(dd_config_parse_float("nan", 0, 10, &v),
                     DD_ERR_INVALID_CONFIG);
    assert_int_equal(dd_config_parse_float("1e", 0, 10, &v),
                     DD_ERR_INVALID_CONFIG);
    assert_true(v == 10.0);
}

/* Numbers are plain decimals taken whole: no blanks, no plus sign, no
 * hexadecimal, nothing infinite or out of range. */
static void test_strict_numbers(void **state)
{
    int i;
    double d;
    size_t z;
    const char *bad_int[] = {" 4", "+4", "4 ", "0x10", "4\n", "-", "1e3"};
    for (size_t k = 0; k < sizeof(bad_int) / sizeof(bad_int[0]); k++) {
        if (dd_config_parse_int(bad_int[k], -100, 100000, &i) !=
            DD_ERR_INVALID_CONFIG) {
            fail_msg("int '%s' accepted", bad_int[k]);
        }
    }
    const char *bad_float[] = {" 1",  "+1",   "0x1p0", "1e400", "-1e400",
                               "inf", "-nan", "1.5 ",  ".",     "1e"};
    for (size_t k = 0; k < sizeof(bad_float) / sizeof(bad_float[0]); k++) {
        if (dd_config_parse_float(bad_float[k], -1e300, 1e300, &d) !=
            DD_ERR_INVALID_CONFIG) {
            fail_msg("float '%s' accepted", bad_float[k]);
        }
    }
    assert_int_equal(dd_config_parse_float("-.5", -1, 1, &d), DD_OK);
    assert_true(d == -0.5);
    const char *bad_size[] = {"1e400", "0x100", " 4K", "+4K", "1e30"};
    for (size_t k = 0; k < sizeof(bad_size) / sizeof(bad_size[0]); k++) {
        if (dd_config_parse_size(bad_size[k], &z) != DD_ERR_INVALID_CONFIG) {
            fail_msg("size '%s' accepted", bad_size[k]);
        }
    }
    const char *bad_dur[] = {"1e400", "0x10s", " 5s", "+5s", "1e400ms"};
    for (size_t k = 0; k < sizeof(bad_dur) / sizeof(bad_dur[0]); k++) {
        if (dd_config_parse_duration(bad_dur[k], &d) != DD_ERR_INVALID_CONFIG) {
            fail_msg("duration '%s' accepted", bad_dur[k]);
        }
    }
}

/* DREAMDDP_TIMEOUT_S is bounded to what every backend can represent: a day.
 * 1e10 made every wait time out at once, 1e300 failed inside Gloo. */
static void test_timeout_bounded(void **state)
{
    dd_core_opts_t o;
    const char *bad[] = {"DREAMDDP_TIMEOUT_S=1e10", "DREAMDDP_TIMEOUT_S=1e300",
                         "DREAMDDP_TIMEOUT_S=86401", "DREAMDDP_TIMEOUT_S=25h"};
    dd_log_configure(DD_LOG_ERROR, ~0u, "/dev/null", 0);
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        const char *env[] = {bad[k], NULL};
        assert_int_equal(
            dd_config_load(&dd_core_config_table, &o, fake_getenv, env),
            DD_ERR_INVALID_CONFIG);
        char want[160];
        snprintf(want, sizeof(want),
                 "invalid value DREAMDDP_TIMEOUT_S='%s': expected a duration "
                 "such as 30s, 500ms, 2m, up to 86400 s",
                 strchr(bad[k], '=') + 1);
        assert_string_equal(dd_last_error(), want);
    }
    const char *ok[] = {"DREAMDDP_TIMEOUT_S=24h", NULL};
    assert_int_equal(dd_config_load(&dd_core_config_table, &o, fake_getenv, ok),
                     DD_OK);
    assert_true(o.timeout_s == 86400);
    dd_config_release(&dd_core_config_table, &o);
    dd_log_close();
}

static void test_size(void **state)
{
    size_t v = 0;
    struct {
        const char *s;
        size_t bytes;
    } good[] = {{"4096", 4096},    {"64K", 65536},       {"64kb", 65536},
                {"4M", 4u << 20},  {"4MiB", 4u << 20},   {"1G", 1u << 30},
                {"1.5M", 1572864}, {"25 MB", 25u << 20}, {"0", 0},
                {"7b", 7}};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_int_equal(dd_config_parse_size(good[i].s, &v), DD_OK);
        assert_int_equal(v, good[i].bytes);
    }
    const char *bad[] = {"", "M", "-1", "4X", "1.5", "4 M B", "inf", "nan",
                         /* 2^63 - 1 reads as the double 2^63 (fuzzing) */
                         "9223372036854775807", "8589934592G"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(dd_config_parse_size(bad[i], &v),
                         DD_ERR_INVALID_CONFIG);
    }
    /* The largest double below 2^63 is taken, and fits. */
    assert_int_equal(dd_config_parse_size("9223372036854774784", &v), DD_OK);
    assert_true(v == 9223372036854774784u);
}

static void test_duration(void **state)
{
    double v = 0;
    struct {
        const char *s;
        double seconds;
    } good[] = {{"30", 30},   {"30s", 30},       {"500ms", 0.5}, {"2m", 120},
                {"1h", 3600}, {"250us", 250e-6}, {"1.5s", 1.5},  {"2min", 120}};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_int_equal(dd_config_parse_duration(good[i].s, &v), DD_OK);
        assert_true(v > good[i].seconds * 0.999999 &&
                    v < good[i].seconds * 1.000001);
    }
    const char *bad[] = {"", "abc", "-5s", "5 parsecs", "5d", "inf", "s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(dd_config_parse_duration(bad[i], &v),
                         DD_ERR_INVALID_CONFIG);
    }
}

static const char *const colours[] = {"red", "green", "blue", NULL};

static void test_enum_and_flags(void **state)
{
    int e = -1;
    unsigned f = 0;
    assert_int_equal(dd_config_parse_enum("GREEN", colours, &e), DD_OK);
    assert_int_equal(e, 1);
    assert_int_equal(dd_config_parse_enum("purple", colours, &e),
                     DD_ERR_INVALID_CONFIG);
    assert_int_equal(dd_config_parse_flags("red,blue", colours, &f), DD_OK);
    assert_int_equal(f, 5u);
    assert_int_equal(dd_config_parse_flags("all", colours, &f), DD_OK);
    assert_int_equal(f, ~0u);
    assert_int_equal(dd_config_parse_flags("red,,blue", colours, &f),
                     DD_ERR_INVALID_CONFIG);
    assert_int_equal(dd_config_parse_flags("red,pink", colours, &f),
                     DD_ERR_INVALID_CONFIG);
    assert_int_equal(dd_config_parse_flags("", colours, &f),
                     DD_ERR_INVALID_CONFIG);
}

static void test_iflist(void **state)
{
    dd_iflist_t l;

    assert_int_equal(dd_config_parse_iflist("eth,ib", &l), DD_OK);
    assert_int_equal(l.n, 2);
    assert_false(l.exclude);
    assert_true(dd_iflist_match(&l, "eth0"));
    assert_true(dd_iflist_match(&l, "ib1"));
    assert_false(dd_iflist_match(&l, "lo"));
    dd_iflist_release(&l);

    assert_int_equal(dd_config_parse_iflist("^docker,lo", &l), DD_OK);
    assert_true(l.exclude);
    assert_false(dd_iflist_match(&l, "docker0"));
    assert_false(dd_iflist_match(&l, "lo"));
    assert_true(dd_iflist_match(&l, "eth0"));
    dd_iflist_release(&l);

    assert_int_equal(dd_config_parse_iflist("=eth0", &l), DD_OK);
    assert_true(l.exact);
    assert_true(dd_iflist_match(&l, "eth0"));
    assert_false(dd_iflist_match(&l, "eth01"));
    dd_iflist_release(&l);

    assert_int_equal(dd_config_parse_iflist("^=lo", &l), DD_OK);
    assert_false(dd_iflist_match(&l, "lo"));
    assert_true(dd_iflist_match(&l, "lo1"));
    dd_iflist_release(&l);

    const char *bad[] = {"", "eth0,", ",eth0", "^", "=", "eth 0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(dd_config_parse_iflist(bad[i], &l),
                         DD_ERR_INVALID_CONFIG);
    }
    dd_iflist_t unset = {0};
    assert_true(dd_iflist_match(&unset, "anything"));
}

typedef struct {
    int count;
    size_t bytes;
    double wait;
    int colour;
    char *name;
    dd_iflist_t ifs;
} opts_t;

static const dd_config_field_t fields[] = {
    {"DD_T_COUNT", "3", "How many.", DD_CONFIG_INT, offsetof(opts_t, count), 1,
     10, NULL},
    {"DD_T_BYTES", "4M", "How big.", DD_CONFIG_SIZE, offsetof(opts_t, bytes), 0,
     0, NULL},
    {"DD_T_WAIT", "30s", "How long.", DD_CONFIG_DURATION,
     offsetof(opts_t, wait), 0, 0, NULL},
    {"DD_T_COLOUR", "red", "Which.", DD_CONFIG_ENUM, offsetof(opts_t, colour),
     0, 0, colours},
    {"DD_T_NAME", NULL, "Who.", DD_CONFIG_STRING, offsetof(opts_t, name), 0, 0,
     NULL},
    {"DD_T_IFS", NULL, "Where.", DD_CONFIG_IFLIST, offsetof(opts_t, ifs), 0, 0,
     NULL},
};
static const dd_config_table_t table = {"test", fields, 6};

static void test_load_defaults_and_values(void **state)
{
    opts_t o;
    const char *env[] = {"DD_T_BYTES=64K", "DD_T_NAME=bob", "DD_T_IFS=^lo",
                         "DD_T_COUNT=", NULL};

    assert_int_equal(dd_config_load(&table, &o, fake_getenv, env), DD_OK);
    assert_int_equal(o.count, 3); /* empty means unset */
    assert_int_equal(o.bytes, 65536);
    assert_true(o.wait == 30.0);
    assert_int_equal(o.colour, 0);
    assert_string_equal(o.name, "bob");
    assert_true(o.ifs.exclude);
    assert_string_equal(o.ifs.names[0], "lo");
    dd_config_release(&table, &o);
    assert_null(o.name);
}

static void test_load_bad_value_names_everything(void **state)
{
    opts_t o;
    const char *env[] = {"DD_T_NAME=bob", "DD_T_COUNT=11", NULL};

    dd_log_configure(DD_LOG_ERROR, ~0u, "/dev/null", 0);
    assert_int_equal(dd_config_load(&table, &o, fake_getenv, env),
                     DD_ERR_INVALID_CONFIG);
    assert_string_equal(dd_last_error(),
                        "invalid value DD_T_COUNT='11': expected an integer "
                        "from 1 to 10");
    assert_null(o.name); /* released on error */

    const char *env2[] = {"DD_T_COLOUR=pink", NULL};
    assert_int_equal(dd_config_load(&table, &o, fake_getenv, env2),
                     DD_ERR_INVALID_CONFIG);
    assert_string_equal(dd_last_error(),
                        "invalid value DD_T_COLOUR='pink': expected one of "
                        "red, green, blue");
    dd_log_close();
}

static void test_print(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    const dd_config_table_t *tables[] = {&table};
    const char *env[] = {"DD_T_WAIT=5m", "DD_T_COUNT=99", NULL};

    assert_int_equal(dd_config_print_tables(f, tables, 1, 0, fake_getenv, env),
                     DD_OK);
    fclose(f);
    assert_non_null(strstr(buf, "[test]\n"));
    assert_non_null(strstr(buf, "DD_T_WAIT = 5m (set; default 30s)\n"
                                "    How long.\n"
                                "    Accepts a duration such as 30s, 500ms, "
                                "2m, up to 31536000 s.\n"));
    assert_non_null(strstr(buf, "DD_T_COUNT = 99 (INVALID; default 3)"));
    assert_non_null(strstr(buf, "DD_T_NAME = unset (default)"));
    free(buf);

    f = open_memstream(&buf, &len);
    assert_int_equal(dd_config_print_tables(f, tables, 1,
                                            DD_CONFIG_PRINT_MARKDOWN,
                                            fake_getenv, env),
                     DD_OK);
    fclose(f);
    assert_non_null(strstr(buf, "| Variable | Default | Accepts | "
                                "Description |\n|---|---|---|---|\n"));
    assert_non_null(strstr(buf, "| `DD_T_COLOUR` | red | one of red, green, "
                                "blue | Which. |\n"));
    assert_null(strstr(buf, "5m")); /* Markdown shows defaults only */
    free(buf);
}

/* The library's own tables, so that suggestions are the ones users see. */
static const dd_config_table_t *const real_tables[] = {
    &dd_core_config_table, &dd_boot_config_table, &dd_topo_config_table,
    &dd_backend_config_table, &dd_sched_config_table};
#define N_REAL (sizeof(real_tables) / sizeof(real_tables[0]))

static void assert_unknown(const char *entry, const char *expected)
{
    char msg[256] = "";
    int unknown =
        dd_config_unknown_message(real_tables, N_REAL, entry, msg, sizeof(msg));
    if (expected == NULL) {
        assert_int_equal(unknown, 0);
        assert_string_equal(msg, "");
    } else {
        assert_int_equal(unknown, 1);
        assert_string_equal(msg, expected);
    }
}

static void test_unknown_suggests_nearest(void **state)
{
    assert_unknown("DREAMDDP_STRATGY=ddp", "DREAMDDP_STRATGY is not a dreamddp "
                                           "variable; did you mean "
                                           "DREAMDDP_STRATEGY?");
    assert_unknown("DREAMDDP_TIMEOUT=30", "DREAMDDP_TIMEOUT is not a dreamddp "
                                          "variable; did you mean "
                                          "DREAMDDP_TIMEOUT_S?");
    assert_unknown("DREAMDDP_ROEL=worker", "DREAMDDP_ROEL is not a dreamddp "
                                           "variable; did you mean "
                                           "DREAMDDP_ROLE?");
    assert_unknown("DREAMDDP_log_level=info", "DREAMDDP_log_level is not a "
                                              "dreamddp variable; did you "
                                              "mean DREAMDDP_LOG_LEVEL?");
    assert_unknown("DREAMDDP_STRATGY", "DREAMDDP_STRATGY is not a dreamddp "
                                       "variable; did you mean "
                                       "DREAMDDP_STRATEGY?");
}

static void test_unknown_far_off(void **state)
{
    assert_unknown("DREAMDDP_FOO=1", "DREAMDDP_FOO is not a dreamddp variable "
                                     "(ddtopo --config lists them)");
    assert_unknown("DREAMDDP_NOTHING_LIKE_THIS=1",
                   "DREAMDDP_NOTHING_LIKE_THIS is not a dreamddp variable "
                   "(ddtopo --config lists them)");
    assert_unknown("DREAMDDP_TEST_FOO=1", "DREAMDDP_TEST_FOO is not a "
                                          "dreamddp variable (ddtopo "
                                          "--config lists them)");
    assert_unknown("DREAMDDP_=1", "DREAMDDP_ is not a dreamddp variable "
                                  "(ddtopo --config lists them)");

    /* Past the length the distance looks at: no suggestion, no overrun. */
    char entry[200];
    memset(entry, 'X', sizeof(entry));
    memcpy(entry, "DREAMDDP_STRATEGY", 17);
    entry[sizeof(entry) - 1] = '\0';
    char msg[64];
    assert_int_equal(
        dd_config_unknown_message(real_tables, N_REAL, entry, msg, sizeof(msg)),
        1);
    assert_int_equal(strncmp(msg, "DREAMDDP_STRATEGYXXX", 20), 0);
    assert_null(strstr(msg, "did you mean"));
}

static void test_unknown_ignores_others(void **state)
{
    assert_unknown("DREAMDDP_STRATEGY=ddp", NULL);
    assert_unknown("DREAMDDP_TIMEOUT_S=", NULL);
    assert_unknown("DD_LOG_LEVEL=warning", NULL);
    assert_unknown("DD_STRATEGY=bogus", NULL);
    assert_unknown("PATH=/usr/bin:/bin", NULL);
    assert_unknown("DDTEST_PROFILES=/tmp", NULL);
    assert_unknown("dreamddp_strategy=ddp", NULL); /* not our prefix */
}

/* dd_config_warn_unknown logs one warning per unknown name, and only those. */
static void test_warn_unknown_logs(void **state)
{
    char path[] = "/tmp/dd-test-config.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);

    char *env[] = {"PATH=/bin",       "DD_LOG_LEVEL=warning",
                   "DREAMDDP_RANK=0", "DREAMDDP_STRATGY=ddp",
                   "DREAMDDP_FOO=1",  NULL};
    assert_int_equal(dd_log_configure(DD_LOG_WARN, ~0u, path, 0), DD_OK);
    assert_int_equal(dd_config_warn_unknown(real_tables, N_REAL, env), 2);
    char *quiet[] = {"PATH=/bin", "DD_LOG_LEVEL=warning", "DREAMDDP_RANK=0",
                     NULL};
    assert_int_equal(dd_config_warn_unknown(real_tables, N_REAL, quiet), 0);
    assert_int_equal(dd_config_warn_unknown(real_tables, N_REAL, NULL), 0);
    dd_log_close();

    char buf[1024] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    assert_non_null(strstr(buf, "WARN core: DREAMDDP_STRATGY is not a dreamddp "
                                "variable; did you mean DREAMDDP_STRATEGY?\n"));
    assert_non_null(strstr(buf, "WARN core: DREAMDDP_FOO is not a dreamddp "
                                "variable (ddtopo --config lists them)\n"));
    assert_null(strstr(buf, "DD_LOG_LEVEL"));
    assert_null(strstr(buf, "PATH"));
    assert_null(strstr(buf, "DREAMDDP_RANK"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bool),
        cmocka_unit_test(test_int),
        cmocka_unit_test(test_float),
        cmocka_unit_test(test_strict_numbers),
        cmocka_unit_test(test_timeout_bounded),
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_enum_and_flags),
        cmocka_unit_test(test_iflist),
        cmocka_unit_test(test_load_defaults_and_values),
        cmocka_unit_test(test_load_bad_value_names_everything),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_unknown_suggests_nearest),
        cmocka_unit_test(test_unknown_far_off),
        cmocka_unit_test(test_unknown_ignores_others),
        cmocka_unit_test(test_warn_unknown_logs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
