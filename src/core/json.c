/*
 * A small, strict JSON reader (RFC 8259 plus NaN, Infinity and -Infinity).
 * It rejects what a lenient reader would guess at: trailing commas, comments,
 * leading zeros, unescaped control characters, invalid UTF-8, lone
 * surrogates and duplicate keys. It must not log and must not depend on the
 * process locale: it reports errors through dd_json_error_t only.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "core/json.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *text;
    size_t length;
    size_t pos;
    unsigned depth;
    dd_json_error_t *error;
    locale_t c_locale; /* made at the first number, freed at the end */
} dd_json_parser_t;

/* A growable byte buffer for the text of a string being decoded. */
typedef struct {
    char *data;
    size_t length;
    size_t capacity;
} dd_json_buf_t;

static dd_status_t dd_json_parse_value(dd_json_parser_t *p, dd_json_t *out);

const char *dd_json_type_name(dd_json_type_t type)
{
    static const char *const names[] = {"null",   "false", "true",  "number",
                                        "string", "array", "object"};
    if ((unsigned)type >= sizeof(names) / sizeof(names[0])) {
        return "unknown";
    }
    return names[type];
}

/* Line and column are computed only when an error happens, so that the
 * parser does not pay for them on every byte. */
static void dd_json_locate(const dd_json_parser_t *p, size_t pos,
                           dd_json_error_t *error)
{
    unsigned line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < pos && i < p->length; i++) {
        if (p->text[i] == '\n') {
            line++;
            line_start = i + 1;
        }
    }
    error->line = line;
    error->column = (unsigned)(pos - line_start + 1);
}

static dd_status_t dd_json_fail(dd_json_parser_t *p, size_t pos,
                                const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static dd_status_t dd_json_fail(dd_json_parser_t *p, size_t pos,
                                const char *fmt, ...)
{
    va_list ap;

    dd_json_locate(p, pos, p->error);
    va_start(ap, fmt);
    vsnprintf(p->error->message, sizeof(p->error->message), fmt, ap);
    va_end(ap);
    return DD_ERR_MESSAGE;
}

static dd_status_t dd_json_no_memory(dd_json_parser_t *p)
{
    p->error->line = 0;
    p->error->column = 0;
    snprintf(p->error->message, sizeof(p->error->message), "out of memory");
    return DD_ERR_NO_MEMORY;
}

/* Names the byte at pos the way a reader of the error wants to see it. */
static const char *dd_json_describe(const dd_json_parser_t *p, size_t pos,
                                    char *buf, size_t size)
{
    if (pos >= p->length) {
        return "end of input";
    }
    unsigned char c = (unsigned char)p->text[pos];
    if (c > 0x20 && c < 0x7f) {
        snprintf(buf, size, "'%c'", c);
    } else {
        snprintf(buf, size, "byte 0x%02x", c);
    }
    return buf;
}

static dd_status_t dd_json_unexpected(dd_json_parser_t *p, const char *what)
{
    char buf[16];
    return dd_json_fail(p, p->pos, "expected %s, found %s", what,
                        dd_json_describe(p, p->pos, buf, sizeof(buf)));
}

static void dd_json_skip_space(dd_json_parser_t *p)
{
    while (p->pos < p->length) {
        char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            return;
        }
        p->pos++;
    }
}

static int dd_json_peek(const dd_json_parser_t *p)
{
    return p->pos < p->length ? (unsigned char)p->text[p->pos] : -1;
}

static int dd_json_match(dd_json_parser_t *p, const char *word)
{
    size_t n = strlen(word);
    if (p->length - p->pos < n || memcmp(p->text + p->pos, word, n) != 0) {
        return 0;
    }
    p->pos += n;
    return 1;
}

/* Frees what a value owns, not the value itself, and leaves it a null. */
static void dd_json_clear(dd_json_t *v)
{
    size_t i;

    switch (v->type) {
    case DD_JSON_STRING:
        free(v->string);
        break;
    case DD_JSON_ARRAY:
        for (i = 0; i < v->count; i++) {
            dd_json_clear(&v->items[i]);
        }
        free(v->items);
        break;
    case DD_JSON_OBJECT:
        for (i = 0; i < v->count; i++) {
            free(v->members[i].key);
            dd_json_clear(&v->members[i].value);
        }
        free(v->members);
        break;
    default:
        break;
    }
    memset(v, 0, sizeof(*v));
}

void dd_json_free(dd_json_t *root)
{
    if (root != NULL) {
        dd_json_clear(root);
        free(root);
    }
}

static int dd_json_buf_reserve(dd_json_buf_t *buf, size_t extra)
{
    if (buf->length + extra + 1 <= buf->capacity) {
        return 1;
    }
    size_t capacity = buf->capacity ? buf->capacity : 32;
    while (capacity < buf->length + extra + 1) {
        capacity *= 2;
    }
    char *data = realloc(buf->data, capacity);
    if (data == NULL) {
        return 0;
    }
    buf->data = data;
    buf->capacity = capacity;
    return 1;
}

static void dd_json_buf_put_utf8(dd_json_buf_t *buf, uint32_t cp)
{
    char *o = buf->data + buf->length;
    if (cp < 0x80) {
        o[0] = (char)cp;
        buf->length += 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        buf->length += 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        buf->length += 3;
    } else {
        o[0] = (char)(0xf0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[3] = (char)(0x80 | (cp & 0x3f));
        buf->length += 4;
    }
}

/* Reads the four hex digits after "\u"; p->pos is on the first digit. */
static dd_status_t dd_json_hex4(dd_json_parser_t *p, uint32_t *cp_p)
{
    uint32_t cp = 0;
    for (int i = 0; i < 4; i++) {
        int c = dd_json_peek(p);
        unsigned digit;
        if (c >= '0' && c <= '9') {
            digit = (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            digit = (unsigned)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            digit = (unsigned)(c - 'A' + 10);
        } else {
            return dd_json_unexpected(p, "a hex digit of a \\u escape");
        }
        cp = (cp << 4) | digit;
        p->pos++;
    }
    *cp_p = cp;
    return DD_OK;
}

/* A \u escape, with the second half of a surrogate pair when the first
 * half asks for one; p->pos is just after the "\u". */
static dd_status_t dd_json_unicode_escape(dd_json_parser_t *p, size_t start,
                                          uint32_t *cp_p)
{
    uint32_t hi = 0, lo = 0;
    dd_status_t status = dd_json_hex4(p, &hi);
    if (status != DD_OK) {
        return status;
    }
    if (hi >= 0xdc00 && hi <= 0xdfff) {
        return dd_json_fail(p, start, "lone low surrogate \\u%04x", hi);
    }
    if (hi < 0xd800 || hi > 0xdbff) {
        *cp_p = hi;
        return DD_OK;
    }
    if (!dd_json_match(p, "\\u")) {
        return dd_json_fail(p, start,
                            "high surrogate \\u%04x without a low one", hi);
    }
    status = dd_json_hex4(p, &lo);
    if (status != DD_OK) {
        return status;
    }
    if (lo < 0xdc00 || lo > 0xdfff) {
        return dd_json_fail(p, start,
                            "high surrogate \\u%04x without a low one", hi);
    }
    *cp_p = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
    return DD_OK;
}

/* One escape sequence; p->pos is on the backslash. */
static dd_status_t dd_json_escape(dd_json_parser_t *p, dd_json_buf_t *buf)
{
    size_t start = p->pos;
    static const char from[] = "\"\\/bfnrt";
    static const char to[] = "\"\\/\b\f\n\r\t";
    uint32_t cp = 0;

    p->pos++;
    int c = dd_json_peek(p);
    const char *hit = c > 0 ? strchr(from, c) : NULL;
    if (hit != NULL) {
        buf->data[buf->length++] = to[hit - from];
        p->pos++;
        return DD_OK;
    }
    if (c != 'u') {
        char d[16];
        return dd_json_fail(p, start,
                            "invalid escape in string: backslash followed "
                            "by %s",
                            dd_json_describe(p, p->pos, d, sizeof(d)));
    }
    p->pos++;
    dd_status_t status = dd_json_unicode_escape(p, start, &cp);
    if (status == DD_OK) {
        dd_json_buf_put_utf8(buf, cp);
    }
    return status;
}

/* Length of the well-formed UTF-8 sequence at pos (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t dd_json_utf8_length(const dd_json_parser_t *p, size_t pos)
{
    const unsigned char *s = (const unsigned char *)p->text + pos;
    size_t left = p->length - pos;
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;

    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        n = 2;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        n = 3;
        lo = s[0] == 0xe0 ? 0xa0 : 0x80;
        hi = s[0] == 0xed ? 0x9f : 0xbf;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        n = 4;
        lo = s[0] == 0xf0 ? 0x90 : 0x80;
        hi = s[0] == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (left < n || s[1] < lo || s[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < n; i++) {
        if (s[i] < 0x80 || s[i] > 0xbf) {
            return 0;
        }
    }
    return n;
}

/* Decodes the string whose opening quote is at p->pos. */
static dd_status_t dd_json_parse_string_raw(dd_json_parser_t *p,
                                            dd_json_buf_t *buf)
{
    size_t start = p->pos++;

    for (;;) {
        /* Six bytes covers the largest thing one step appends. */
        if (!dd_json_buf_reserve(buf, 6)) {
            return dd_json_no_memory(p);
        }
        int c = dd_json_peek(p);
        dd_status_t status = DD_OK;
        if (c < 0) {
            return dd_json_fail(p, start, "unterminated string");
        } else if (c == '"') {
            p->pos++;
            buf->data[buf->length] = '\0';
            return DD_OK;
        } else if (c == '\\') {
            status = dd_json_escape(p, buf);
        } else if (c < 0x20) {
            status = dd_json_fail(p, p->pos,
                                  "control character 0x%02x in string "
                                  "(must be escaped)",
                                  (unsigned)c);
        } else if (c < 0x80) {
            buf->data[buf->length++] = (char)c;
            p->pos++;
        } else {
            size_t n = dd_json_utf8_length(p, p->pos);
            if (n == 0) {
                return dd_json_fail(p, p->pos, "invalid UTF-8 in string");
            }
            memcpy(buf->data + buf->length, p->text + p->pos, n);
            buf->length += n;
            p->pos += n;
        }
        if (status != DD_OK) {
            return status;
        }
    }
}

static dd_status_t dd_json_parse_string(dd_json_parser_t *p, char **string_p,
                                        size_t *length_p)
{
    dd_json_buf_t buf = {NULL, 0, 0};
    dd_status_t status = dd_json_parse_string_raw(p, &buf);
    if (status != DD_OK) {
        free(buf.data);
        return status;
    }
    *string_p = buf.data;
    *length_p = buf.length;
    return DD_OK;
}

static size_t dd_json_skip_digits(dd_json_parser_t *p)
{
    size_t start = p->pos;
    while (p->pos < p->length && p->text[p->pos] >= '0' &&
           p->text[p->pos] <= '9') {
        p->pos++;
    }
    return p->pos - start;
}

/* Checks the number grammar of RFC 8259 from p->pos and moves past it. */
static dd_status_t dd_json_scan_number(dd_json_parser_t *p)
{
    size_t start = p->pos;

    if (dd_json_peek(p) == '-') {
        p->pos++;
    }
    if (dd_json_peek(p) == '0') {
        p->pos++;
        if (dd_json_skip_digits(p) > 0) {
            return dd_json_fail(p, start, "leading zero in number");
        }
    } else if (dd_json_skip_digits(p) == 0) {
        return dd_json_unexpected(p, "a digit");
    }
    if (dd_json_peek(p) == '.') {
        p->pos++;
        if (dd_json_skip_digits(p) == 0) {
            return dd_json_unexpected(p, "a digit after '.'");
        }
    }
    if (dd_json_peek(p) == 'e' || dd_json_peek(p) == 'E') {
        p->pos++;
        if (dd_json_peek(p) == '+' || dd_json_peek(p) == '-') {
            p->pos++;
        }
        if (dd_json_skip_digits(p) == 0) {
            return dd_json_unexpected(p, "a digit in the exponent");
        }
    }
    return DD_OK;
}

/* strtod reads the decimal point of the current locale; the token is
 * converted in the "C" locale so that an application that set LC_NUMERIC
 * to, say, de_DE does not change what a profile means. */
static int dd_json_strtod(dd_json_parser_t *p, const char *token,
                          double *value_p)
{
    if (p->c_locale == (locale_t)0) {
        p->c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        if (p->c_locale == (locale_t)0) {
            return 0;
        }
    }
    locale_t old = uselocale(p->c_locale);
    errno = 0;
    *value_p = strtod(token, NULL);
    int overflow = errno == ERANGE && isinf(*value_p);
    uselocale(old);
    return overflow ? -1 : 1;
}

static dd_status_t dd_json_parse_number(dd_json_parser_t *p, dd_json_t *out)
{
    size_t start = p->pos;
    char small[64];

    if (dd_json_match(p, "-Infinity")) {
        out->type = DD_JSON_NUMBER;
        out->number = -INFINITY;
        return DD_OK;
    }
    dd_status_t status = dd_json_scan_number(p);
    if (status != DD_OK) {
        return status;
    }
    size_t n = p->pos - start;
    char *token = n < sizeof(small) ? small : malloc(n + 1);
    if (token == NULL) {
        return dd_json_no_memory(p);
    }
    memcpy(token, p->text + start, n);
    token[n] = '\0';
    int ok = dd_json_strtod(p, token, &out->number);
    if (token != small) {
        free(token);
    }
    if (ok == 0) {
        return dd_json_no_memory(p);
    }
    if (ok < 0) {
        return dd_json_fail(p, start, "number out of range");
    }
    out->type = DD_JSON_NUMBER;
    return DD_OK;
}

/* Orders members by key bytes, for the duplicate check. */
static int dd_json_member_cmp(const void *a, const void *b)
{
    const dd_json_member_t *x = *(const dd_json_member_t *const *)a;
    const dd_json_member_t *y = *(const dd_json_member_t *const *)b;
    size_t n = x->key_length < y->key_length ? x->key_length : y->key_length;
    int c = memcmp(x->key, y->key, n);
    if (c != 0) {
        return c;
    }
    return (x->key_length > y->key_length) - (x->key_length < y->key_length);
}

/* Sorting pointers keeps the check O(k log k) for big objects, where a
 * pairwise scan would make the reader quadratic. */
static dd_status_t dd_json_check_duplicates(dd_json_parser_t *p,
                                            const dd_json_t *object,
                                            size_t start)
{
    if (object->count < 2) {
        return DD_OK;
    }
    const dd_json_member_t **sorted = malloc(object->count * sizeof(*sorted));
    if (sorted == NULL) {
        return dd_json_no_memory(p);
    }
    for (size_t i = 0; i < object->count; i++) {
        sorted[i] = &object->members[i];
    }
    qsort(sorted, object->count, sizeof(*sorted), dd_json_member_cmp);
    dd_status_t status = DD_OK;
    for (size_t i = 1; i < object->count && status == DD_OK; i++) {
        if (dd_json_member_cmp(&sorted[i - 1], &sorted[i]) == 0) {
            status = dd_json_fail(p, start,
                                  "duplicate key \"%.60s\" in the object "
                                  "that starts here",
                                  sorted[i]->key);
        }
    }
    free(sorted);
    return status;
}

static dd_status_t dd_json_object_member(dd_json_parser_t *p, dd_json_t *out,
                                         size_t *capacity)
{
    dd_json_member_t m;
    memset(&m, 0, sizeof(m));

    if (dd_json_peek(p) != '"') {
        return dd_json_unexpected(p, "a string key");
    }
    dd_status_t status = dd_json_parse_string(p, &m.key, &m.key_length);
    if (status != DD_OK) {
        return status;
    }
    dd_json_skip_space(p);
    if (dd_json_peek(p) != ':') {
        status = dd_json_unexpected(p, "':' after the key");
        goto err_free_key;
    }
    p->pos++;
    status = dd_json_parse_value(p, &m.value);
    if (status != DD_OK) {
        goto err_free_key;
    }
    if (out->count == *capacity) {
        size_t grown = *capacity ? 2 * *capacity : 8;
        dd_json_member_t *members =
            realloc(out->members, grown * sizeof(*members));
        if (members == NULL) {
            status = dd_json_no_memory(p);
            goto err_clear_value;
        }
        out->members = members;
        *capacity = grown;
    }
    out->members[out->count++] = m;
    return DD_OK;

err_clear_value:
    dd_json_clear(&m.value);
err_free_key:
    free(m.key);
    return status;
}

static dd_status_t dd_json_parse_object(dd_json_parser_t *p, dd_json_t *out)
{
    size_t start = p->pos++;
    size_t capacity = 0;
    dd_status_t status = DD_OK;

    out->type = DD_JSON_OBJECT;
    dd_json_skip_space(p);
    if (dd_json_peek(p) == '}') {
        p->pos++;
        return DD_OK;
    }
    for (;;) {
        dd_json_skip_space(p);
        status = dd_json_object_member(p, out, &capacity);
        if (status != DD_OK) {
            break;
        }
        dd_json_skip_space(p);
        if (dd_json_peek(p) == '}') {
            p->pos++;
            status = dd_json_check_duplicates(p, out, start);
            break;
        }
        if (dd_json_peek(p) != ',') {
            status = dd_json_unexpected(p, "',' or '}' in object");
            break;
        }
        p->pos++;
    }
    if (status != DD_OK) {
        dd_json_clear(out);
    }
    return status;
}

static dd_status_t dd_json_array_item(dd_json_parser_t *p, dd_json_t *out,
                                      size_t *capacity)
{
    dd_json_t item;
    memset(&item, 0, sizeof(item));

    dd_status_t status = dd_json_parse_value(p, &item);
    if (status != DD_OK) {
        return status;
    }
    if (out->count == *capacity) {
        size_t grown = *capacity ? 2 * *capacity : 8;
        dd_json_t *items = realloc(out->items, grown * sizeof(*items));
        if (items == NULL) {
            dd_json_clear(&item);
            return dd_json_no_memory(p);
        }
        out->items = items;
        *capacity = grown;
    }
    out->items[out->count++] = item;
    return DD_OK;
}

static dd_status_t dd_json_parse_array(dd_json_parser_t *p, dd_json_t *out)
{
    size_t capacity = 0;
    dd_status_t status = DD_OK;

    p->pos++;
    out->type = DD_JSON_ARRAY;
    dd_json_skip_space(p);
    if (dd_json_peek(p) == ']') {
        p->pos++;
        return DD_OK;
    }
    for (;;) {
        status = dd_json_array_item(p, out, &capacity);
        if (status != DD_OK) {
            break;
        }
        dd_json_skip_space(p);
        if (dd_json_peek(p) == ']') {
            p->pos++;
            break;
        }
        if (dd_json_peek(p) != ',') {
            status = dd_json_unexpected(p, "',' or ']' in array");
            break;
        }
        p->pos++;
    }
    if (status != DD_OK) {
        dd_json_clear(out);
    }
    return status;
}

/* true, false, null and the NaN/Infinity extension. */
static dd_status_t dd_json_parse_word(dd_json_parser_t *p, dd_json_t *out)
{
    if (dd_json_match(p, "true")) {
        out->type = DD_JSON_TRUE;
    } else if (dd_json_match(p, "false")) {
        out->type = DD_JSON_FALSE;
    } else if (dd_json_match(p, "null")) {
        out->type = DD_JSON_NULL;
    } else if (dd_json_match(p, "NaN")) {
        out->type = DD_JSON_NUMBER;
        out->number = NAN;
    } else if (dd_json_match(p, "Infinity")) {
        out->type = DD_JSON_NUMBER;
        out->number = INFINITY;
    } else {
        return dd_json_unexpected(p, "a value");
    }
    return DD_OK;
}

static dd_status_t dd_json_parse_value(dd_json_parser_t *p, dd_json_t *out)
{
    dd_status_t status;

    memset(out, 0, sizeof(*out));
    dd_json_skip_space(p);
    if (p->depth >= DD_JSON_MAX_DEPTH) {
        return dd_json_fail(p, p->pos, "nesting deeper than %d levels",
                            DD_JSON_MAX_DEPTH);
    }
    p->depth++;
    int c = dd_json_peek(p);
    if (c == '{') {
        status = dd_json_parse_object(p, out);
    } else if (c == '[') {
        status = dd_json_parse_array(p, out);
    } else if (c == '"') {
        out->type = DD_JSON_STRING;
        status = dd_json_parse_string(p, &out->string, &out->length);
        if (status != DD_OK) {
            out->type = DD_JSON_NULL;
        }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        status = dd_json_parse_number(p, out);
    } else {
        status = dd_json_parse_word(p, out);
    }
    p->depth--;
    return status;
}

dd_status_t dd_json_parse(const char *text, size_t length, dd_json_t **root_p,
                          dd_json_error_t *error_p)
{
    dd_json_error_t scratch;
    dd_json_parser_t p = {
        text, length, 0, 0, error_p ? error_p : &scratch, (locale_t)0};

    if (text == NULL || root_p == NULL) {
        snprintf(p.error->message, sizeof(p.error->message), "no input");
        p.error->line = p.error->column = 0;
        return DD_ERR_INVALID_PARAM;
    }
    dd_json_t *root = calloc(1, sizeof(*root));
    if (root == NULL) {
        return dd_json_no_memory(&p);
    }
    dd_status_t status = dd_json_parse_value(&p, root);
    if (status == DD_OK) {
        dd_json_skip_space(&p);
        if (p.pos < p.length) {
            status = dd_json_unexpected(&p, "end of input after the value");
        }
    }
    if (p.c_locale != (locale_t)0) {
        freelocale(p.c_locale);
    }
    if (status != DD_OK) {
        dd_json_free(root);
        return status;
    }
    *root_p = root;
    return DD_OK;
}

/* The whole file in memory; JSON files here are profiles and schedules,
 * small enough that streaming would only add code. */
static dd_status_t dd_json_read_file(FILE *f, char **text_p, size_t *length_p)
{
    size_t capacity = 4096, length = 0;
    char *text = malloc(capacity);

    while (text != NULL) {
        length += fread(text + length, 1, capacity - length, f);
        if (length < capacity) {
            break;
        }
        char *grown = realloc(text, capacity * 2);
        if (grown == NULL) {
            free(text);
            text = NULL;
            break;
        }
        text = grown;
        capacity *= 2;
    }
    if (text == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    if (ferror(f)) {
        free(text);
        return DD_ERR_IO;
    }
    *text_p = text;
    *length_p = length;
    return DD_OK;
}

dd_status_t dd_json_parse_file(const char *path, dd_json_t **root_p,
                               dd_json_error_t *error_p)
{
    dd_json_error_t scratch;
    dd_json_error_t *error = error_p ? error_p : &scratch;
    char *text;
    size_t length;

    error->line = error->column = 0;
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (path == NULL) {
        snprintf(error->message, sizeof(error->message), "no path");
        return DD_ERR_INVALID_PARAM;
    }
    if (f == NULL) {
        /* %m rather than strerror(), which need not be thread-safe. */
        snprintf(error->message, sizeof(error->message), "cannot open: %m");
        return DD_ERR_IO;
    }
    dd_status_t status = dd_json_read_file(f, &text, &length);
    int saved_errno = errno;
    fclose(f);
    if (status == DD_ERR_IO) {
        errno = saved_errno;
        snprintf(error->message, sizeof(error->message), "cannot read: %m");
        return status;
    }
    if (status != DD_OK) {
        snprintf(error->message, sizeof(error->message), "out of memory");
        return status;
    }
    status = dd_json_parse(text, length, root_p, error);
    free(text);
    return status;
}

const dd_json_t *dd_json_get(const dd_json_t *object, const char *key)
{
    if (object == NULL || object->type != DD_JSON_OBJECT || key == NULL) {
        return NULL;
    }
    size_t n = strlen(key);
    for (size_t i = 0; i < object->count; i++) {
        const dd_json_member_t *m = &object->members[i];
        if (m->key_length == n && memcmp(m->key, key, n) == 0) {
            return &m->value;
        }
    }
    return NULL;
}
