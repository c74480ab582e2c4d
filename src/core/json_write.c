/*
 * The streaming JSON writer (json_write.h). It writes as it is called and
 * keeps only the stack of open containers. It must not reorder or buffer
 * the document, and must not depend on the process's locale: a number is
 * written with '.' whatever LC_NUMERIC says.
 */
#include "core/json_write.h"

#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void dd_json_writer_init(dd_json_writer_t *w, FILE *out, int indent)
{
    memset(w, 0, sizeof(*w));
    w->out = out;
    w->indent = indent < 0 ? 0 : indent;
}

static void dd_json_newline(dd_json_writer_t *w, int depth)
{
    fputc('\n', w->out);
    for (int i = 0; i < depth * w->indent; i++) {
        fputc(' ', w->out);
    }
}

/* What goes before a value or a key: the separator from the previous
 * member of the innermost container, and the line break of a block. */
static void dd_json_separate(dd_json_writer_t *w)
{
    dd_json_level_t *l = &w->level[w->depth - 1];

    if (l->count > 0) {
        fputc(',', w->out);
        if (l->layout == DD_JSON_INLINE) {
            fputc(' ', w->out);
        }
    }
    if (l->layout == DD_JSON_BLOCK) {
        dd_json_newline(w, w->depth);
    }
    l->count++;
}

/* Every value goes through here: at the top, once; in an array, after the
 * separator; in an object, right after its key. */
static void dd_json_value(dd_json_writer_t *w)
{
    if (w->depth == 0) {
        w->misuse |= w->done;
        w->done = 1;
    } else if (w->level[w->depth - 1].close == '}') {
        w->misuse |= !w->after_key;
    } else {
        dd_json_separate(w);
    }
    w->after_key = 0;
}

static void dd_json_escaped(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            fputc('\\', out);
            fputc(ch, out);
        } else if (ch < 0x20) {
            fprintf(out, "\\u%04x", ch);
        } else {
            fputc(ch, out);
        }
    }
    fputc('"', out);
}

static void dd_json_begin(dd_json_writer_t *w, char open, char close,
                          dd_json_layout_t layout)
{
    dd_json_value(w);
    if (w->depth == DD_JSON_WRITE_MAX_DEPTH) {
        w->misuse = 1;
        return;
    }
    w->level[w->depth].close = close;
    w->level[w->depth].layout = layout;
    w->level[w->depth].count = 0;
    w->depth++;
    fputc(open, w->out);
}

static void dd_json_end(dd_json_writer_t *w, char close)
{
    if (w->depth == 0 || w->level[w->depth - 1].close != close ||
        w->after_key) {
        w->misuse = 1;
        return;
    }
    const dd_json_level_t *l = &w->level[--w->depth];
    if (l->layout == DD_JSON_BLOCK && l->count > 0) {
        dd_json_newline(w, w->depth);
    }
    fputc(close, w->out);
}

void dd_json_object_begin(dd_json_writer_t *w, dd_json_layout_t layout)
{
    dd_json_begin(w, '{', '}', layout);
}

void dd_json_array_begin(dd_json_writer_t *w, dd_json_layout_t layout)
{
    dd_json_begin(w, '[', ']', layout);
}

void dd_json_object_end(dd_json_writer_t *w)
{
    dd_json_end(w, '}');
}

void dd_json_array_end(dd_json_writer_t *w)
{
    dd_json_end(w, ']');
}

void dd_json_key(dd_json_writer_t *w, const char *key)
{
    if (w->depth == 0 || w->level[w->depth - 1].close != '}' || w->after_key ||
        key == NULL) {
        w->misuse = 1;
        return;
    }
    dd_json_separate(w);
    dd_json_escaped(w->out, key);
    fputs(w->level[w->depth - 1].layout == DD_JSON_COMPACT ? ":" : ": ",
          w->out);
    w->after_key = 1;
}

void dd_json_string(dd_json_writer_t *w, const char *s)
{
    dd_json_value(w);
    if (s == NULL) {
        fputs("null", w->out);
    } else {
        dd_json_escaped(w->out, s);
    }
}

void dd_json_int(dd_json_writer_t *w, long long v)
{
    dd_json_value(w);
    fprintf(w->out, "%lld", v);
}

void dd_json_uint(dd_json_writer_t *w, unsigned long long v)
{
    dd_json_value(w);
    fprintf(w->out, "%llu", v);
}

/* printf writes the locale's decimal point; JSON has only '.'. */
static void dd_json_put_number(FILE *out, char *buf)
{
    const char *point = localeconv()->decimal_point;
    size_t n = strlen(point);
    char *at;

    if (n > 0 && strcmp(point, ".") != 0 && (at = strstr(buf, point)) != NULL) {
        *at = '.';
        memmove(at + 1, at + n, strlen(at + n) + 1);
    }
    fputs(buf, out);
}

void dd_json_double(dd_json_writer_t *w, double v)
{
    char buf[64];

    dd_json_value(w);
    if (!isfinite(v)) {
        fputs("null", w->out);
        return;
    }
    /* The shortest of 15, 16 and 17 digits that strtod reads back (in the
     * same locale as snprintf wrote it) as v. */
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof(buf), "%.*g", digits, v);
        if (strtod(buf, NULL) == v) {
            break;
        }
    }
    dd_json_put_number(w->out, buf);
}

void dd_json_fixed(dd_json_writer_t *w, double v, int decimals)
{
    char buf[512];

    dd_json_value(w);
    if (!isfinite(v)) {
        fputs("null", w->out);
        return;
    }
    /* 20 decimals are past any double's precision; the limit keeps the
     * widest value (1e308) within buf. */
    decimals = decimals < 0 ? 0 : decimals > 20 ? 20 : decimals;
    snprintf(buf, sizeof(buf), "%.*f", decimals, v);
    dd_json_put_number(w->out, buf);
}

void dd_json_bool(dd_json_writer_t *w, int v)
{
    dd_json_value(w);
    fputs(v ? "true" : "false", w->out);
}

void dd_json_null(dd_json_writer_t *w)
{
    dd_json_value(w);
    fputs("null", w->out);
}

dd_status_t dd_json_writer_finish(dd_json_writer_t *w)
{
    if (w->misuse || w->depth != 0 || !w->done) {
        return DD_ERR_STATE;
    }
    return ferror(w->out) ? DD_ERR_IO : DD_OK;
}
