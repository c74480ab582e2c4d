/*
 * A streaming JSON writer over a FILE *: the one way the library and the
 * tools write JSON (the DREAMDDP_TIMELINE trace, ddtopo --json, ddbench's
 * --json lines). It escapes every string, puts the commas, and lays each
 * container out the way its caller asks. It holds no tree and never logs:
 * dd_json_writer_finish says whether the document came out whole.
 */
#ifndef DD_CORE_JSON_WRITE_H
#define DD_CORE_JSON_WRITE_H

#include <dreamddp.h>

#include <stdio.h>

/** Containers nested deeper than this are a misuse (finish reports it). */
#define DD_JSON_WRITE_MAX_DEPTH 32

/** How a container lays out its members or items. */
typedef enum {
    DD_JSON_COMPACT = 0, /**< {"a":1,"b":[2,3]}: no spaces at all */
    DD_JSON_INLINE,      /**< {"a": 1, "b": [2, 3]}: one line */
    DD_JSON_BLOCK        /**< one member or item a line, indented */
} dd_json_layout_t;

/** One open container. */
typedef struct {
    char close;              /**< '}' or ']' */
    dd_json_layout_t layout; /**< how its members are separated */
    unsigned count;          /**< members or items written so far */
} dd_json_level_t;

/** The writer's state; set it up with dd_json_writer_init. */
typedef struct {
    FILE *out;
    int indent;    /**< spaces per level of a DD_JSON_BLOCK container */
    int depth;     /**< open containers */
    int after_key; /**< a key was written and waits for its value */
    int misuse;    /**< a call out of order was seen */
    int done;      /**< the top-level value is complete */
    dd_json_level_t level[DD_JSON_WRITE_MAX_DEPTH];
} dd_json_writer_t;

/** Starts a document on out; indent is the width of one block level. */
void dd_json_writer_init(dd_json_writer_t *w, FILE *out, int indent);

/** Opens an object or array as the next value. */
void dd_json_object_begin(dd_json_writer_t *w, dd_json_layout_t layout);
void dd_json_array_begin(dd_json_writer_t *w, dd_json_layout_t layout);

/** Closes the innermost object or array (which must be of that kind). */
void dd_json_object_end(dd_json_writer_t *w);
void dd_json_array_end(dd_json_writer_t *w);

/** The key of the next member of the innermost object (escaped). */
void dd_json_key(dd_json_writer_t *w, const char *key);

/** A string value, escaped (quote, backslash, control characters as
 *  \\u00XX; other bytes, UTF-8 included, as they are). NULL writes null. */
void dd_json_string(dd_json_writer_t *w, const char *s);

/** Integer values. */
void dd_json_int(dd_json_writer_t *w, long long v);
void dd_json_uint(dd_json_writer_t *w, unsigned long long v);

/** A double in the fewest digits that read back to the same value; NaN and
 *  the infinities, which JSON cannot hold, are written as null. */
void dd_json_double(dd_json_writer_t *w, double v);

/** A double with a fixed number of decimals ("%.*f"); NaN and the
 *  infinities are written as null. */
void dd_json_fixed(dd_json_writer_t *w, double v, int decimals);

/** true or false; null. */
void dd_json_bool(dd_json_writer_t *w, int v);
void dd_json_null(dd_json_writer_t *w);

/**
 * Checks the document.
 *
 * @return DD_OK when exactly one complete value was written;
 *         DD_ERR_STATE when a call came out of order (a value without its
 *         key, a key in an array, an unbalanced end, too deep, a second
 *         top-level value) or a container is still open; DD_ERR_IO when
 *         the stream reports an error.
 */
dd_status_t dd_json_writer_finish(dd_json_writer_t *w);

#endif
