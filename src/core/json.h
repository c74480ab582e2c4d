/*
 * A small, strict JSON reader: text in, tree out. Objects keep their members
 * in document order (layer profiles depend on it). Beyond RFC 8259 it accepts
 * the bare tokens NaN, Infinity and -Infinity that Python's json module
 * writes. It never logs: the caller knows which file it was reading and
 * reports the error once, with the position this module gives it.
 */
#ifndef DD_CORE_JSON_H
#define DD_CORE_JSON_H

#include <dreamddp.h>

#include <stddef.h>

/** Nesting deeper than this is rejected, so that hostile input cannot
 *  exhaust the stack of the recursive parser. */
#define DD_JSON_MAX_DEPTH 512

typedef enum {
    DD_JSON_NULL = 0,
    DD_JSON_FALSE,
    DD_JSON_TRUE,
    DD_JSON_NUMBER,
    DD_JSON_STRING,
    DD_JSON_ARRAY,
    DD_JSON_OBJECT
} dd_json_type_t;

typedef struct dd_json_member dd_json_member_t;

/** One value of the tree. Only the fields of its type are meaningful. */
typedef struct dd_json {
    dd_json_type_t type;
    double number;             /**< DD_JSON_NUMBER (NaN, +-inf allowed) */
    char *string;              /**< DD_JSON_STRING: UTF-8, NUL-terminated */
    size_t length;             /**< DD_JSON_STRING: bytes, may hold NULs */
    size_t count;              /**< items of an array, members of object */
    struct dd_json *items;     /**< DD_JSON_ARRAY: count values */
    dd_json_member_t *members; /**< DD_JSON_OBJECT: count, document order */
} dd_json_t;

/** A member of an object. Keys are unique within their object. */
struct dd_json_member {
    char *key;         /**< UTF-8, NUL-terminated */
    size_t key_length; /**< bytes, may hold NULs */
    dd_json_t value;
};

/** Where and why parsing failed. line and column count from 1 (column in
 *  bytes); both are 0 when the failure has no position (a file that cannot
 *  be read, memory). */
typedef struct {
    unsigned line;
    unsigned column;
    char message[160];
} dd_json_error_t;

/**
 * Parses length bytes of text (which need not be NUL-terminated) as one
 * JSON value, surrounded by optional whitespace.
 *
 * @param root_p   the tree, set only on success; free with dd_json_free.
 * @param error_p  filled on failure; may be NULL.
 * @return DD_OK; DD_ERR_MESSAGE for text that is not JSON (error_p says
 *         where); DD_ERR_NO_MEMORY; DD_ERR_INVALID_PARAM for NULL text.
 */
dd_status_t dd_json_parse(const char *text, size_t length, dd_json_t **root_p,
                          dd_json_error_t *error_p);

/**
 * Reads and parses a whole file.
 *
 * @return as dd_json_parse, plus DD_ERR_IO when the file cannot be opened or
 *         read (error_p->message has the system's reason).
 */
dd_status_t dd_json_parse_file(const char *path, dd_json_t **root_p,
                               dd_json_error_t *error_p);

/** Frees a tree from dd_json_parse. NULL is allowed. */
void dd_json_free(dd_json_t *root);

/** The value of key in object, or NULL when object is not an object or has
 *  no such key. */
const dd_json_t *dd_json_get(const dd_json_t *object, const char *key);

/** "null", "false", "true", "number", "string", "array" or "object". */
const char *dd_json_type_name(dd_json_type_t type);

#endif
