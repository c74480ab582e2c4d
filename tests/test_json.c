/*
 * Tests of the JSON reader (src/core/json.c): values, order and escapes of
 * good documents; position and wording of the error for bad ones; files.
 * And of the writer (src/core/json_write.c): escapes, commas, layouts,
 * numbers, misuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/json.h"
#include "core/json_write.h"
#include "core/time.h"
#include "sched/sched.h"

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static dd_json_t *parse_ok(const char *text)
{
    dd_json_t *root = NULL;
    dd_json_error_t err;
    dd_status_t status = dd_json_parse(text, strlen(text), &root, &err);
    if (status != DD_OK) {
        print_error("unexpected error at %u:%u: %s\n", err.line, err.column,
                    err.message);
    }
    assert_int_equal(status, DD_OK);
    assert_non_null(root);
    return root;
}

/* Parses text that must fail, and checks where and why. */
static void parse_bad(const char *text, size_t length, unsigned line,
                      unsigned column, const char *why)
{
    dd_json_t *root = (dd_json_t *)&root; /* must stay untouched */
    dd_json_error_t err;

    assert_int_equal(dd_json_parse(text, length, &root, &err), DD_ERR_MESSAGE);
    assert_ptr_equal(root, (dd_json_t *)&root);
    if (strstr(err.message, why) == NULL || err.line != line ||
        err.column != column) {
        print_error("for %s: got %u:%u: %s\n", text, err.line, err.column,
                    err.message);
    }
    assert_int_equal(err.line, line);
    assert_int_equal(err.column, column);
    assert_non_null(strstr(err.message, why));
}

static void bad(const char *text, unsigned line, unsigned column,
                const char *why)
{
    parse_bad(text, strlen(text), line, column, why);
}

static void test_object_keeps_order(void **state)
{
    (void)state;
    dd_json_t *root = parse_ok("{\"zeta\": 1, \"alpha\": 2.5, \"mid\": -3}");

    assert_int_equal(root->type, DD_JSON_OBJECT);
    assert_int_equal(root->count, 3);
    assert_string_equal(root->members[0].key, "zeta");
    assert_string_equal(root->members[1].key, "alpha");
    assert_string_equal(root->members[2].key, "mid");
    assert_true(root->members[0].value.number == 1.0);
    assert_true(root->members[1].value.number == 2.5);
    assert_true(root->members[2].value.number == -3.0);
    assert_true(dd_json_get(root, "alpha")->number == 2.5);
    assert_null(dd_json_get(root, "beta"));
    assert_null(dd_json_get(&root->members[0].value, "zeta"));
    dd_json_free(root);
}

static void test_nested_and_literals(void **state)
{
    (void)state;
    dd_json_t *root = parse_ok(" \t\r\n{\"a\": [true, false, null, [], {}],"
                               "\n \"b\": {\"c\": [1, [2, [3]]]}} \n");
    const dd_json_t *a = dd_json_get(root, "a");

    assert_int_equal(a->type, DD_JSON_ARRAY);
    assert_int_equal(a->count, 5);
    assert_int_equal(a->items[0].type, DD_JSON_TRUE);
    assert_int_equal(a->items[1].type, DD_JSON_FALSE);
    assert_int_equal(a->items[2].type, DD_JSON_NULL);
    assert_int_equal(a->items[3].type, DD_JSON_ARRAY);
    assert_int_equal(a->items[3].count, 0);
    assert_int_equal(a->items[4].type, DD_JSON_OBJECT);
    assert_int_equal(a->items[4].count, 0);
    const dd_json_t *c = dd_json_get(dd_json_get(root, "b"), "c");
    assert_true(c->items[1].items[1].items[0].number == 3.0);
    assert_string_equal(dd_json_type_name(c->type), "array");
    dd_json_free(root);
}

static void test_numbers(void **state)
{
    (void)state;
    dd_json_t *root = parse_ok("[0, -0, 7.645343912058863e-05, 1E3, -2e-2,"
                               " 1.2559008542881456, 1e-400, 123456789012]");
    const double want[] = {0,    -0.0,          7.645343912058863e-05,
                           1000, -0.02,         1.2559008542881456,
                           0,    123456789012.0};

    assert_int_equal(root->count, 8);
    for (size_t i = 0; i < 8; i++) {
        assert_int_equal(root->items[i].type, DD_JSON_NUMBER);
        assert_true(root->items[i].number == want[i]);
    }
    assert_true(signbit(root->items[1].number));
    dd_json_free(root);
}

static void test_nan_and_infinity(void **state)
{
    (void)state;
    dd_json_t *root = parse_ok("{\"a\": NaN, \"b\": Infinity, "
                               "\"c\": -Infinity}");

    assert_true(isnan(dd_json_get(root, "a")->number));
    assert_true(isinf(dd_json_get(root, "b")->number));
    assert_true(dd_json_get(root, "b")->number > 0);
    assert_true(isinf(dd_json_get(root, "c")->number));
    assert_true(dd_json_get(root, "c")->number < 0);
    dd_json_free(root);
}

static void test_string_escapes(void **state)
{
    (void)state;
    dd_json_t *root = parse_ok("[\"q\\\"b\\\\s\\/\\b\\f\\n\\r\\t\", "
                               "\"\\u00e9\\u20AC\\ud83d\\ude00\", "
                               "\"a\\u0000b\", \"\xc3\xa9\xe2\x82\xac\"]");

    assert_string_equal(root->items[0].string, "q\"b\\s/\b\f\n\r\t");
    assert_int_equal(root->items[0].length, 11);
    assert_string_equal(root->items[1].string,
                        "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    assert_int_equal(root->items[2].length, 3);
    assert_memory_equal(root->items[2].string, "a\0b", 4);
    assert_string_equal(root->items[3].string, "\xc3\xa9\xe2\x82\xac");
    dd_json_free(root);
}

static void test_top_level_scalars(void **state)
{
    (void)state;
    dd_json_t *root = parse_ok("  42  ");
    assert_true(root->type == DD_JSON_NUMBER && root->number == 42.0);
    dd_json_free(root);
    root = parse_ok("\"x\"");
    assert_string_equal(root->string, "x");
    dd_json_free(root);
    root = parse_ok("null");
    assert_int_equal(root->type, DD_JSON_NULL);
    dd_json_free(root);
}

/* Only the given length is read: the text need not end in a NUL. */
static void test_length_bounds_input(void **state)
{
    (void)state;
    dd_json_t *root = NULL;
    assert_int_equal(dd_json_parse("[1]garbage", 3, &root, NULL), DD_OK);
    assert_int_equal(root->count, 1);
    dd_json_free(root);
    parse_bad("[1, 2]", 4, 1, 5, "expected a value, found end of input");
}

static void test_bad_structure(void **state)
{
    (void)state;
    bad("", 1, 1, "expected a value, found end of input");
    bad("[1,]", 1, 4, "expected a value, found ']'");
    bad("{\"a\": 1,}", 1, 9, "expected a string key, found '}'");
    bad("{\"a\" 1}", 1, 6, "expected ':' after the key, found '1'");
    bad("{'a': 1}", 1, 2, "expected a string key, found '''");
    bad("[1 2]", 1, 4, "expected ',' or ']' in array, found '2'");
    bad("{\"a\": 1 \"b\": 2}", 1, 9, "expected ',' or '}' in object");
    bad("{} x", 1, 4, "expected end of input after the value, found 'x'");
    bad("[1] // comment", 1, 5, "expected end of input after the value");
    bad("[tru]", 1, 2, "expected a value, found 't'");
    bad("nan", 1, 1, "expected a value, found 'n'");
    bad("[", 1, 2, "expected a value, found end of input");
    bad("{\"a\": 1,\n \"b\": 2,\n \"a\": 3}", 1, 1,
        "duplicate key \"a\" in the object that starts here");
}

static void test_bad_numbers(void **state)
{
    (void)state;
    bad("01", 1, 1, "leading zero in number");
    bad("[-01]", 1, 2, "leading zero in number");
    bad("1.", 1, 3, "expected a digit after '.', found end of input");
    bad(".5", 1, 1, "expected a value, found '.'");
    bad("+1", 1, 1, "expected a value, found '+'");
    bad("-", 1, 2, "expected a digit, found end of input");
    bad("1e", 1, 3, "expected a digit in the exponent");
    bad("[1e+]", 1, 5, "expected a digit in the exponent, found ']'");
    bad("1e999", 1, 1, "number out of range");
    bad("-Inf", 1, 2, "expected a digit, found 'I'");
}

static void test_bad_strings(void **state)
{
    (void)state;
    bad("\"abc", 1, 1, "unterminated string");
    bad("[\"a\nb\"]", 1, 4, "control character 0x0a in string");
    bad("\"\\x\"", 1, 2, "invalid escape in string: backslash followed by 'x'");
    bad("\"\\u12G4\"", 1, 6, "expected a hex digit of a \\u escape, found 'G'");
    bad("\"\\udc00\"", 1, 2, "lone low surrogate \\udc00");
    bad("\"\\ud83d\"", 1, 2, "high surrogate \\ud83d without a low one");
    bad("\"\\ud83d\\u0041\"", 1, 2, "high surrogate \\ud83d without a low one");
    bad("\"a\xff\"", 1, 3, "invalid UTF-8 in string");
    bad("\"\xc0\x80\"", 1, 2, "invalid UTF-8 in string");     /* overlong */
    bad("\"\xed\xa0\x80\"", 1, 2, "invalid UTF-8 in string"); /* surrogate */
    bad("\"\xf4\x90\x80\x80\"", 1, 2, "invalid UTF-8 in string"); /* > max */
    bad("\"\xe2\x82\"", 1, 2, "invalid UTF-8 in string");         /* short */
    parse_bad("\"a\0b\"", 5, 1, 3, "control character 0x00 in string");
}

static void test_error_position_multiline(void **state)
{
    (void)state;
    bad("{\n  \"a\": 1,\n  \"b\": [1, 2,, 3]\n}", 3, 14,
        "expected a value, found ','");
    bad("{\"x\": 1}\n\n   ]", 3, 4, "expected end of input after the value");
}

static void test_depth_limit(void **state)
{
    (void)state;
    char text[2 * DD_JSON_MAX_DEPTH + 4];
    dd_json_t *root;
    dd_json_error_t err;

    for (size_t depth = DD_JSON_MAX_DEPTH; depth <= DD_JSON_MAX_DEPTH + 1;
         depth++) {
        memset(text, '[', depth);
        memset(text + depth, ']', depth);
        dd_status_t status = dd_json_parse(text, 2 * depth, &root, &err);
        if (depth == DD_JSON_MAX_DEPTH) {
            assert_int_equal(status, DD_OK);
            dd_json_free(root);
        } else {
            assert_int_equal(status, DD_ERR_MESSAGE);
            assert_int_equal(err.column, DD_JSON_MAX_DEPTH + 1);
            assert_non_null(strstr(err.message, "nesting deeper than 512"));
        }
    }
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    dd_json_t *root;
    dd_json_error_t err;

    assert_int_equal(dd_json_parse(NULL, 0, &root, &err), DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_json_parse("1", 1, NULL, NULL), DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_json_parse_file(NULL, &root, &err),
                     DD_ERR_INVALID_PARAM);
    dd_json_free(NULL);
    assert_string_equal(dd_json_type_name(DD_JSON_OBJECT), "object");
    assert_string_equal(dd_json_type_name((dd_json_type_t)99), "unknown");
}

static void test_file(void **state)
{
    (void)state;
    char path[] = "/tmp/dd_test_json_XXXXXX";
    dd_json_t *root;
    dd_json_error_t err;

    int fd = mkstemp(path);
    assert_true(fd >= 0);
    /* Bigger than the reader's first buffer, so it has to grow. */
    FILE *f = fdopen(fd, "w");
    fputs("{", f);
    for (int i = 0; i < 1000; i++) {
        fprintf(f, "%s\"layer.%d\": %d.5", i ? ",\n" : "", i, i);
    }
    fputs("}", f);
    fclose(f);
    assert_int_equal(dd_json_parse_file(path, &root, &err), DD_OK);
    assert_int_equal(root->count, 1000);
    assert_string_equal(root->members[999].key, "layer.999");
    assert_true(root->members[999].value.number == 999.5);
    dd_json_free(root);
    unlink(path);

    assert_int_equal(dd_json_parse_file(path, &root, &err), DD_ERR_IO);
    assert_non_null(strstr(err.message, "No such file or directory"));
    assert_int_equal(err.line, 0);
}

/* A process locale with a decimal comma must not change what "1.5" is. */
static void test_locale_independent(void **state)
{
    (void)state;
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8",
                                        "fr_FR.UTF-8", "ru_RU.UTF-8"};
    const char *set = NULL;

    for (size_t i = 0; i < 4 && set == NULL; i++) {
        set = setlocale(LC_NUMERIC, names[i]);
    }
    if (set == NULL) {
        print_message("no locale with a decimal comma is installed\n");
        skip();
    }
    dd_json_t *root = parse_ok("[1.5, 2e-1]");
    setlocale(LC_NUMERIC, "C");
    assert_true(root->items[0].number == 1.5);
    assert_true(root->items[1].number == 0.2);
    dd_json_free(root);
}

/* ---- the writer (src/core/json_write.c) --------------------------------- */

/* A writer over a memory stream; text() closes it and returns what it
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

    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(dd_timeline_open(path, 3, &t), DD_OK);
    dd_timeline_mark(t, "fc\"1\\w", dd_time_now());
    dd_timeline_close(t);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    unlink(path);
    text[n] = '\0';
    static const char want[] =
        "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":3,"
        "\"args\":{\"name\":\"rank 3\"}},\n{\"name\":"
        "\"backward fc\\\"1\\\\w\",\"cat\":\"backward\",";
    if (strncmp(text, want, strlen(want)) != 0) {
        print_error("trace starts\n%s\n", text);
    }
    assert_true(strncmp(text, want, strlen(want)) == 0);
    assert_non_null(strstr(text, "\"tid\":0,\"ts\":"));
    assert_true(n >= 4 && strcmp(text + n - 4, "}\n]\n") == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_object_keeps_order),
        cmocka_unit_test(test_nested_and_literals),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_nan_and_infinity),
        cmocka_unit_test(test_string_escapes),
        cmocka_unit_test(test_top_level_scalars),
        cmocka_unit_test(test_length_bounds_input),
        cmocka_unit_test(test_bad_structure),
        cmocka_unit_test(test_bad_numbers),
        cmocka_unit_test(test_bad_strings),
        cmocka_unit_test(test_error_position_multiline),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_locale_independent),
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
