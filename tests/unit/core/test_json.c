/*
 * Tests of the JSON writer (src/core/json_write.c): escapes of quotes,
 * backslashes and control characters, UTF-8 passed through, commas and
 * nesting, the three layouts, numbers, misuse, and the DREAMDDP_TIMELINE
 * trace that writes through it (escaped names, the agreed clock offset).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/json_write.h"
#include "core/time.h"
#include "sched/sched.h"

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A writer over a memory stream; sink_text() closes it and returns what it
 * holds, which the caller frees. */
typedef struct {
    FILE *f;
    char *buf;
    size_t size;
    dd_json_writer_t w;
} sink_t;

static void sink_open(sink_t *s, int indent)
{
    s->buf = NULL;
    s->size = 0;
    s->f = open_memstream(&s->buf, &s->size);
    assert_non_null(s->f);
    dd_json_writer_init(&s->w, s->f, indent);
}

static char *sink_text(sink_t *s, dd_status_t expect)
{
    assert_int_equal(dd_json_writer_finish(&s->w), expect);
    fclose(s->f);
    return s->buf;
}

static void expect_text(sink_t *s, const char *want)
{
    char *got = sink_text(s, DD_OK);
    if (strcmp(got, want) != 0) {
        print_error("got  %s\nwant %s\n", got, want);
    }
    assert_string_equal(got, want);
    free(got);
}

static void test_write_escapes(void **state)
{
    (void)state;
    sink_t s;

    sink_open(&s, 0);
    dd_json_array_begin(&s.w, DD_JSON_COMPACT);
    dd_json_string(&s.w, "say \"hi\"");
    dd_json_string(&s.w, "C:\\dir\\");
    dd_json_string(&s.w, "two\nlines\r\tand\x01\x1f"
                         " end");
    dd_json_string(&s.w, "\x7f stays");
    dd_json_string(&s.w, "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80 /");
    dd_json_string(&s.w, "");
    dd_json_string(&s.w, NULL);
    dd_json_array_end(&s.w);
    expect_text(&s,
                "[\"say \\\"hi\\\"\",\"C:\\\\dir\\\\\","
                "\"two\\u000alines\\u000d\\u0009and\\u0001\\u001f end\","
                "\"\x7f stays\","
                "\"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80 /\",\"\",null]");

    /* Keys are escaped the same way. */
    sink_open(&s, 0);
    dd_json_object_begin(&s.w, DD_JSON_COMPACT);
    dd_json_key(&s.w, "a\"b\\c\nd");
    dd_json_int(&s.w, 1);
    dd_json_object_end(&s.w);
    expect_text(&s, "{\"a\\\"b\\\\c\\u000ad\":1}");
}

static void test_write_nesting_and_commas(void **state)
{
    (void)state;
    sink_t s;

    sink_open(&s, 0);
    dd_json_object_begin(&s.w, DD_JSON_COMPACT);
    dd_json_key(&s.w, "a");
    dd_json_array_begin(&s.w, DD_JSON_COMPACT);
    dd_json_int(&s.w, 1);
    dd_json_array_begin(&s.w, DD_JSON_COMPACT);
    dd_json_array_end(&s.w);
    dd_json_object_begin(&s.w, DD_JSON_COMPACT);
    dd_json_key(&s.w, "b");
    dd_json_null(&s.w);
    dd_json_key(&s.w, "c");
    dd_json_bool(&s.w, 1);
    dd_json_object_end(&s.w);
    dd_json_bool(&s.w, 0);
    dd_json_array_end(&s.w);
    dd_json_key(&s.w, "d");
    dd_json_object_begin(&s.w, DD_JSON_COMPACT);
    dd_json_object_end(&s.w);
    dd_json_key(&s.w, "e");
    dd_json_int(&s.w, -7);
    dd_json_object_end(&s.w);
    expect_text(&s, "{\"a\":[1,[],{\"b\":null,\"c\":true},false],\"d\":{},"
                    "\"e\":-7}");

    /* A scalar alone is a document too. */
    sink_open(&s, 0);
    dd_json_string(&s.w, "x");
    expect_text(&s, "\"x\"");
}

/* The layouts ddtopo --json and the timeline use. */
static void test_write_layouts(void **state)
{
    (void)state;
    sink_t s;

    sink_open(&s, 2);
    dd_json_object_begin(&s.w, DD_JSON_BLOCK);
    dd_json_key(&s.w, "m");
    dd_json_object_begin(&s.w, DD_JSON_INLINE);
    dd_json_key(&s.w, "a");
    dd_json_int(&s.w, 1);
    dd_json_key(&s.w, "b");
    dd_json_array_begin(&s.w, DD_JSON_INLINE);
    dd_json_string(&s.w, "x");
    dd_json_string(&s.w, "y");
    dd_json_array_end(&s.w);
    dd_json_object_end(&s.w);
    dd_json_key(&s.w, "list");
    dd_json_array_begin(&s.w, DD_JSON_BLOCK);
    dd_json_int(&s.w, 1);
    dd_json_int(&s.w, 2);
    dd_json_array_end(&s.w);
    dd_json_key(&s.w, "none");
    dd_json_array_begin(&s.w, DD_JSON_BLOCK);
    dd_json_array_end(&s.w);
    dd_json_object_end(&s.w);
    expect_text(&s, "{\n  \"m\": {\"a\": 1, \"b\": [\"x\", \"y\"]},\n"
                    "  \"list\": [\n    1,\n    2\n  ],\n  \"none\": []\n}");

    sink_open(&s, 0);
    dd_json_array_begin(&s.w, DD_JSON_BLOCK);
    dd_json_object_begin(&s.w, DD_JSON_COMPACT);
    dd_json_key(&s.w, "a");
    dd_json_int(&s.w, 1);
    dd_json_object_end(&s.w);
    dd_json_object_begin(&s.w, DD_JSON_COMPACT);
    dd_json_object_end(&s.w);
    dd_json_array_end(&s.w);
    expect_text(&s, "[\n{\"a\":1},\n{}\n]");
}

static void test_write_numbers(void **state)
{
    (void)state;
    sink_t s;

    sink_open(&s, 0);
    dd_json_array_begin(&s.w, DD_JSON_COMPACT);
    dd_json_double(&s.w, 0.1);
    dd_json_double(&s.w, 1.0 / 3);
    dd_json_double(&s.w, 2.0);
    dd_json_double(&s.w, 1e300);
    dd_json_double(&s.w, -2.5e-8);
    dd_json_double(&s.w, NAN);
    dd_json_double(&s.w, INFINITY);
    dd_json_double(&s.w, -INFINITY);
    dd_json_fixed(&s.w, 1.23456789, 3);
    dd_json_fixed(&s.w, 3000001.0, 0);
    dd_json_fixed(&s.w, NAN, 6);
    dd_json_fixed(&s.w, -INFINITY, 1);
    dd_json_int(&s.w, INT64_MIN);
    dd_json_uint(&s.w, UINT64_MAX);
    dd_json_array_end(&s.w);
    expect_text(&s, "[0.1,0.3333333333333333,2,1e+300,-2.5e-08,null,null,"
                    "null,1.235,3000001,null,null,-9223372036854775808,"
                    "18446744073709551615]");
}

/* Calls out of order are reported by finish, not written silently. */
static void test_write_misuse(void **state)
{
    (void)state;
    sink_t s;

    sink_open(&s, 0); /* a value without its key */
    dd_json_object_begin(&s.w, DD_JSON_COMPACT);
    dd_json_int(&s.w, 1);
    dd_json_object_end(&s.w);
    free(sink_text(&s, DD_ERR_STATE));

    sink_open(&s, 0); /* a key in an array */
    dd_json_array_begin(&s.w, DD_JSON_COMPACT);
    dd_json_key(&s.w, "a");
    dd_json_array_end(&s.w);
    free(sink_text(&s, DD_ERR_STATE));

    sink_open(&s, 0); /* a key without its value */
    dd_json_object_begin(&s.w, DD_JSON_COMPACT);
    dd_json_key(&s.w, "a");
    dd_json_object_end(&s.w);
    free(sink_text(&s, DD_ERR_STATE));

    sink_open(&s, 0); /* the wrong end, and one left open */
    dd_json_object_begin(&s.w, DD_JSON_COMPACT);
    dd_json_array_end(&s.w);
    free(sink_text(&s, DD_ERR_STATE));

    sink_open(&s, 0); /* two documents */
    dd_json_int(&s.w, 1);
    dd_json_int(&s.w, 2);
    free(sink_text(&s, DD_ERR_STATE));

    sink_open(&s, 0); /* nothing at all */
    free(sink_text(&s, DD_ERR_STATE));

    sink_open(&s, 0); /* too deep */
    for (int i = 0; i <= DD_JSON_WRITE_MAX_DEPTH; i++) {
        dd_json_array_begin(&s.w, DD_JSON_COMPACT);
    }
    for (int i = 0; i <= DD_JSON_WRITE_MAX_DEPTH; i++) {
        dd_json_array_end(&s.w);
    }
    free(sink_text(&s, DD_ERR_STATE));
}

static void test_write_io_error(void **state)
{
    (void)state;
    dd_json_writer_t w;
    FILE *f = fopen("/dev/null", "r"); /* every write fails */

    assert_non_null(f);
    dd_json_writer_init(&w, f, 0);
    dd_json_string(&w, "lost");
    assert_int_equal(dd_json_writer_finish(&w), DD_ERR_IO);
    fclose(f);
}

/* A process locale with a decimal comma must not change what is written. */
static void test_write_locale_independent(void **state)
{
    (void)state;
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8",
                                        "fr_FR.UTF-8", "ru_RU.UTF-8"};
    const char *set = NULL;
    sink_t s;

    for (size_t i = 0; i < 4 && set == NULL; i++) {
        set = setlocale(LC_NUMERIC, names[i]);
    }
    if (set == NULL) {
        print_message("no locale with a decimal comma is installed\n");
        skip();
    }
    sink_open(&s, 0);
    dd_json_array_begin(&s.w, DD_JSON_COMPACT);
    dd_json_double(&s.w, 1.5);
    dd_json_fixed(&s.w, 0.25, 2);
    dd_json_array_end(&s.w);
    setlocale(LC_NUMERIC, "C");
    expect_text(&s, "[1.5,0.25]");
}

/* The DREAMDDP_TIMELINE trace escapes layer names (it once wrote them
 * raw, and a quote in a name broke the file). */
static void test_timeline_escapes_names(void **state)
{
    (void)state;
    char path[] = "/tmp/dd_test_timeline_XXXXXX";
    char text[4096];
    dd_timeline_t *t;
    dd_job_t job = {.rank = 3};
    static dd_sched_t sched; /* large: zeroed, off the stack */

    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    sched.env.job = &job;
    sched.opts.timeline = path;
    sched.clock_offset_us = -1234.5;
    sched.clock_uncertainty_us = 12.5;
    assert_int_equal(dd_timeline_open(&sched, &t), DD_OK);
    /* A step's marks go in at its end, from the layers' times. */
    static struct dd_layer layer;
    struct dd_layer *layers[1] = {&layer};
    layer.name = "fc\"1\\w";
    layer.ready = 1;
    layer.ready_t = dd_time_now();
    sched.layers = layers;
    sched.n_layers = 1;
    dd_timeline_marks(t, &sched);
    dd_timeline_close(t);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    unlink(path);
    text[n] = '\0';
    static const char want[] =
        "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":3,"
        "\"args\":{\"name\":\"rank 3\",\"t0_realtime_us\":";
    static const char mark[] =
        "\n{\"name\":"
        "\"backward fc\\\"1\\\\w\",\"cat\":\"backward\",";
    if (strncmp(text, want, strlen(want)) != 0) {
        print_error("trace starts\n%s\n", text);
    }
    assert_true(strncmp(text, want, strlen(want)) == 0);
    assert_non_null(strstr(text, mark)); /* the name escaped */
    /* The clock agreed at commit, with the 0.1 us the trace keeps. */
    assert_non_null(strstr(text, "\"clock_offset_us\":-1234.5,"
                                 "\"clock_uncertainty_us\":12.5"));
    assert_non_null(strstr(text, "\"tid\":0,\"ts\":"));
    assert_true(n >= 4 && strcmp(text + n - 4, "}\n]\n") == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_escapes),
        cmocka_unit_test(test_write_nesting_and_commas),
        cmocka_unit_test(test_write_layouts),
        cmocka_unit_test(test_write_numbers),
        cmocka_unit_test(test_write_misuse),
        cmocka_unit_test(test_write_io_error),
        cmocka_unit_test(test_write_locale_independent),
        cmocka_unit_test(test_timeline_escapes_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
