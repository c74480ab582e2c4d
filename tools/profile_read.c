/*
 * Reads a layer profile directory (bp_*.json, comm_*.json, sizes_*.json, or
 * the same under bp/, comm/, sizes/) into a dd_profile_t, with json-c, which
 * keeps members in document order and reads the NaN and Infinity that
 * Python's json module writes. Every error is reported once, here, naming
 * the file and the layer or position at fault. It must not plan and must
 * not repair input: NaN and Infinity becoming 0 is the artifact's own
 * convention, not a guess.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "profile_read.h"

#include "core/log.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef HAVE_JSONC
#include <json.h>
#endif

/* Integers above this are no longer exact in a double. */
#define DD_PROFILE_MAX_PARAMS 9007199254740992.0

static char *dd_profile_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *path = malloc(a + b + 2);
    if (path != NULL) {
        memcpy(path, dir, a);
        path[a] = '/';
        memcpy(path + a + 1, name, b + 1);
    }
    return path;
}

/* Whether name matches the shell pattern "<kind>_*.json". */
static int dd_profile_matches(const char *name, const char *kind)
{
    size_t k = strlen(kind), n = strlen(name);
    return n >= k + 1 + 5 && strncmp(name, kind, k) == 0 && name[k] == '_' &&
           strcmp(name + n - 5, ".json") == 0;
}

/* The one entry of where that matches, or NULL for none. Two matches are
 * an error: which one schedsim.py would take depends on directory order. */
static dd_status_t dd_profile_scan(const char *where, const char *kind,
                                   char **path_p)
{
    char *found = NULL;
    dd_status_t status = DD_OK;

    DIR *d = opendir(where);
    if (d == NULL) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_SCHED,
                        "cannot open profile directory %s: %m", where);
    }
    for (struct dirent *e = readdir(d); e != NULL && status == DD_OK;
         e = readdir(d)) {
        if (!dd_profile_matches(e->d_name, kind)) {
            continue;
        }
        if (found != NULL) {
            status = dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                              "profile directory %s has more than one "
                              "%s_*.json (%s and %s); keep one",
                              where, kind, strrchr(found, '/') + 1, e->d_name);
        } else if ((found = dd_profile_join(where, e->d_name)) == NULL) {
            status = dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                              "out of memory reading profile %s", where);
        }
    }
    closedir(d);
    if (status != DD_OK) {
        free(found);
        return status;
    }
    *path_p = found;
    return DD_OK;
}

/* Finds <kind>_*.json in dir/<kind>/ when that is a directory (as the
 * artifact lays some profiles out), else in dir. *path_p is NULL when
 * there is none. */
static dd_status_t dd_profile_find(const char *dir, const char *kind,
                                   char **path_p)
{
    struct stat st;

    char *sub = dd_profile_join(dir, kind);
    if (sub == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "out of memory reading profile %s", dir);
    }
    int in_sub = stat(sub, &st) == 0 && S_ISDIR(st.st_mode);
    dd_status_t status = dd_profile_scan(in_sub ? sub : dir, kind, path_p);
    free(sub);
    return status;
}

/* Looks up the three files; bp is required, and so is comm unless sizes
 * can stand in for it. */
static dd_status_t dd_profile_find_all(const char *dir, char **paths)
{
    static const char *const kinds[] = {"bp", "comm", "sizes"};
    dd_status_t status = DD_OK;

    for (int k = 0; k < 3 && status == DD_OK; k++) {
        status = dd_profile_find(dir, kinds[k], &paths[k]);
    }
    if (status != DD_OK) {
        return status;
    }
    if (paths[0] == NULL) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_SCHED,
                        "profile directory %s has no bp_*.json (nor "
                        "bp/bp_*.json)",
                        dir);
    }
    if (paths[1] == NULL && paths[2] == NULL) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_SCHED,
                        "profile directory %s has no comm_*.json (nor "
                        "comm/comm_*.json) and no sizes_*.json to derive it "
                        "from",
                        dir);
    }
    return DD_OK;
}

void dd_profile_free(dd_profile_t *profile)
{
    if (profile == NULL) {
        return;
    }
    for (size_t i = 0; profile->names != NULL && i < profile->num_layers; i++) {
        free(profile->names[i]);
    }
    free(profile->names);
    free(profile->bp_s);
    free(profile->comm_s);
    free(profile->num_params);
    free(profile->frozen_before_s);
    free(profile);
}

#ifdef HAVE_JSONC

/* Nesting deeper than this is refused; a profile is one flat object. */
#define DD_PROFILE_MAX_DEPTH 64

/* One parsed file: its members in document order (pointers into root). */
typedef struct {
    json_object *root;
    size_t count;
    const char **keys;
    json_object **values;
} dd_profile_file_t;

static void dd_profile_file_free(dd_profile_file_t *f)
{
    if (f != NULL) {
        json_object_put(f->root);
        free(f->keys);
        free(f->values);
        free(f);
    }
}

/* The JSON type of v as the messages name it. */
static const char *dd_profile_type_name(json_object *v)
{
    if (json_object_is_type(v, json_type_boolean)) {
        return json_object_get_boolean(v) ? "true" : "false";
    }
    if (json_object_is_type(v, json_type_int) ||
        json_object_is_type(v, json_type_double)) {
        return "number";
    }
    return json_type_to_name(json_object_get_type(v));
}

/* Reads the whole file, NUL-terminated. */
static dd_status_t dd_profile_slurp(const char *path, char **text_p,
                                    size_t *length_p)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    size_t length = 0, size = 0;

    if (f == NULL) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_SCHED,
                        "cannot open profile %s: %m", path);
    }
    for (;;) {
        if (length + 1 >= size) {
            size = size ? 2 * size : 65536;
            char *grown = realloc(text, size);
            if (grown == NULL) {
                free(text);
                fclose(f);
                return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                                "out of memory reading profile %s", path);
            }
            text = grown;
        }
        size_t n = fread(text + length, 1, size - length - 1, f);
        length += n;
        if (n == 0) {
            break;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(text);
        return dd_error(DD_ERR_IO, DD_SUBSYS_SCHED, "cannot read profile %s",
                        path);
    }
    text[length] = '\0';
    *text_p = text;
    *length_p = length;
    return DD_OK;
}

/* What the text before offset end leaves open: the innermost container
 * ('{', '[' or 0 at the top), the last character that is not blank, and
 * whether that character closed an object's key. */
typedef struct {
    char container;
    char last;
    int after_key;
} dd_profile_where_t;

static dd_profile_where_t dd_profile_where(const char *text, size_t end)
{
    char stack[DD_PROFILE_MAX_DEPTH];
    dd_profile_where_t w = {0, 0, 0};
    int depth = 0, key = 0;

    for (size_t i = 0; i < end; i++) {
        char c = text[i];
        if (strchr(" \t\r\n", c) != NULL) {
            continue;
        }
        if (c == '"') {
            /* A string is a key where an object expects one. */
            key = w.container == '{' && (w.last == '{' || w.last == ',');
            for (i++; i < end && text[i] != '"'; i++) {
                i += text[i] == '\\';
            }
        } else if (c == '{' || c == '[') {
            if (depth < DD_PROFILE_MAX_DEPTH) {
                stack[depth] = c;
            }
            depth++;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        }
        w.container =
            depth > 0 && depth <= DD_PROFILE_MAX_DEPTH ? stack[depth - 1] : 0;
        w.after_key = c == '"' && key;
        w.last = c;
    }
    return w;
}

/* What the parser wanted where it stopped on an unexpected character. */
static const char *dd_profile_expected(const char *text, size_t end)
{
    dd_profile_where_t w = dd_profile_where(text, end);

    switch (w.last) {
    case ':':
        return "expected a value";
    case ',':
        return w.container == '{' ? "expected a key" : "expected a value";
    case '[':
        return "expected a value or ']'";
    case '{':
        return "expected a key or '}'";
    case 0:
        return "expected a value";
    }
    if (w.after_key) {
        return "expected ':'";
    }
    if (w.container == '{') {
        return "expected ',' or '}'";
    }
    return w.container == '[' ? "expected ',' or ']'"
                              : "expected the end of the text";
}

/* Reports a parse error at its line and column (from 1, in bytes). */
static dd_status_t dd_profile_syntax(const char *path, const char *text,
                                     size_t length, json_tokener *tok)
{
    enum json_tokener_error e = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    unsigned line = 1, column = 1;
    char found[32];

    end = end > length ? length : end;
    for (size_t i = 0; i < end; i++) {
        column = text[i] == '\n' ? 1 : column + 1;
        line += text[i] == '\n';
    }
    unsigned char c = (unsigned char)text[end];
    if (c >= 0x20 && c < 0x7f) {
        snprintf(found, sizeof(found), "'%c'", c);
    } else {
        snprintf(found, sizeof(found), "byte 0x%02x", c);
    }
    if (e == json_tokener_error_parse_eof || e == json_tokener_continue) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "%s:%u:%u: unexpected end of the text", path, line,
                        column);
    }
    const char *why = e == json_tokener_error_parse_unexpected
                          ? dd_profile_expected(text, end)
                          : json_tokener_error_desc(e);
    return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED, "%s:%u:%u: %s, found %s",
                    path, line, column, why, found);
}

/* Parses text as exactly one JSON value (NaN and Infinity allowed). */
static dd_status_t dd_profile_tokenize(const char *path, const char *text,
                                       size_t length, json_object **root_p)
{
    const char *nul = memchr(text, '\0', length);
    if (nul != NULL) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile %s holds a NUL byte at offset %zu", path,
                        (size_t)(nul - text));
    }
    if (length >= INT_MAX) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile %s is too large (%zu bytes)", path, length);
    }
    json_tokener *tok = json_tokener_new_ex(DD_PROFILE_MAX_DEPTH);
    if (tok == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "out of memory reading profile %s", path);
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    /* The terminating NUL tells json-c the text ends there, so that a
     * number at the very end is complete. */
    json_object *root = json_tokener_parse_ex(tok, text, (int)length + 1);
    dd_status_t status = DD_OK;
    if (json_tokener_get_error(tok) != json_tokener_success) {
        status = dd_profile_syntax(path, text, length, tok);
        json_object_put(root);
    } else {
        *root_p = root;
    }
    json_tokener_free(tok);
    return status;
}

/* Lists the members of an object in document order. */
static dd_status_t dd_profile_members(const char *path, json_object *root,
                                      dd_profile_file_t **file_p)
{
    dd_profile_file_t *f = calloc(1, sizeof(*f));
    size_t n = (size_t)json_object_object_length(root);

    if (f != NULL) {
        f->keys = malloc((n ? n : 1) * sizeof(*f->keys));
        f->values = malloc((n ? n : 1) * sizeof(*f->values));
    }
    if (f == NULL || f->keys == NULL || f->values == NULL) {
        dd_profile_file_free(f);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "out of memory reading profile %s", path);
    }
    json_object_object_foreach(root, key, value)
    {
        f->keys[f->count] = key;
        f->values[f->count] = value;
        f->count++;
    }
    f->root = root;
    *file_p = f;
    return DD_OK;
}

static dd_status_t dd_profile_parse(const char *path,
                                    dd_profile_file_t **file_p)
{
    char *text = NULL;
    size_t length = 0;
    json_object *root = NULL;

    dd_status_t status = dd_profile_slurp(path, &text, &length);
    if (status != DD_OK) {
        return status;
    }
    status = dd_profile_tokenize(path, text, length, &root);
    free(text);
    if (status != DD_OK) {
        return status;
    }
    if (!json_object_is_type(root, json_type_object)) {
        status = dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                          "profile %s: expected an object from layer name "
                          "to number, found %s",
                          path, dd_profile_type_name(root));
    } else if (json_object_object_length(root) == 0) {
        status = dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                          "profile %s has no layers", path);
    }
    if (status == DD_OK) {
        status = dd_profile_members(path, root, file_p);
    }
    if (status != DD_OK) {
        json_object_put(root);
    }
    return status;
}

/* A layer's value: a number >= 0 (an integer when integer is set), with
 * NaN and +Infinity read as 0 the way the artifact's tools read them. */
static dd_status_t dd_profile_value(const char *path, const char *key,
                                    json_object *value, int integer,
                                    double *value_p)
{
    if (!json_object_is_type(value, json_type_double) &&
        !json_object_is_type(value, json_type_int)) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile %s: layer %s: expected a number, found %s",
                        path, key, dd_profile_type_name(value));
    }
    double v = json_object_get_double(value);
    if (isnan(v) || (isinf(v) && v > 0)) {
        v = 0.0;
    }
    if (v < 0) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile %s: layer %s has negative value %g", path, key,
                        v);
    }
    if (integer && (v != floor(v) || v > DD_PROFILE_MAX_PARAMS)) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile %s: layer %s: parameter count %g is not an "
                        "integer below 2^53",
                        path, key, v);
    }
    *value_p = v;
    return DD_OK;
}

/* Files of a profile must list the same layers in the same order, since
 * the order is the forward order; the first position where they part is
 * the layer the user has to look at. */
static dd_status_t dd_profile_same_layers(const char *path_a,
                                          const dd_profile_file_t *a,
                                          const char *path_b,
                                          const dd_profile_file_t *b)
{
    size_t n = a->count < b->count ? a->count : b->count;

    for (size_t k = 0; k < n; k++) {
        if (strcmp(a->keys[k], b->keys[k]) != 0) {
            return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                            "profile layers differ at position %zu: layer "
                            "%s in %s, layer %s in %s",
                            k, a->keys[k], path_a, b->keys[k], path_b);
        }
    }
    if (a->count != b->count) {
        const char *longer = a->count > b->count ? path_a : path_b;
        const char *shorter = a->count > b->count ? path_b : path_a;
        const dd_profile_file_t *t = a->count > b->count ? a : b;
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile layer %s of %s is missing from %s", t->keys[n],
                        longer, shorter);
    }
    return DD_OK;
}

/* Allocates the profile's arrays for the layers of layers (the comm file
 * when it leaves frozen modules out, else the bp file). */
static dd_status_t dd_profile_alloc(const dd_profile_file_t *layers,
                                    int has_comm, int has_sizes,
                                    dd_profile_t **profile_p)
{
    size_t n = layers->count;
    dd_profile_t *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        goto err_no_memory;
    }
    p->num_layers = n;
    p->names = calloc(n, sizeof(*p->names));
    p->bp_s = malloc(n * sizeof(*p->bp_s));
    p->comm_s = has_comm ? malloc(n * sizeof(*p->comm_s)) : NULL;
    p->num_params = has_sizes ? malloc(n * sizeof(*p->num_params)) : NULL;
    if (p->names == NULL || p->bp_s == NULL || (has_comm && !p->comm_s) ||
        (has_sizes && !p->num_params)) {
        goto err_free_profile;
    }
    for (size_t i = 0; i < n; i++) {
        p->names[i] = strdup(layers->keys[i]);
        if (p->names[i] == NULL) {
            goto err_free_profile;
        }
    }
    *profile_p = p;
    return DD_OK;

err_free_profile:
    dd_profile_free(p);
err_no_memory:
    return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                    "out of memory for a profile of %zu layers", n);
}

/*
 * Where each layer of the comm file sits in the bp file, when the comm file
 * leaves frozen modules out (the artifact's LoRA profiles time every
 * module's backward but sync only the adapters): its layers must be the bp
 * file's, in the same order. at[k] is layer k's position in bp.
 */
static dd_status_t dd_profile_subsequence(const char *path_bp,
                                          const dd_profile_file_t *bp,
                                          const char *path_comm,
                                          const dd_profile_file_t *comm,
                                          size_t *at)
{
    size_t j = 0;

    for (size_t k = 0; k < comm->count; k++, j++) {
        while (j < bp->count && strcmp(bp->keys[j], comm->keys[k]) != 0) {
            j++;
        }
        if (j == bp->count) {
            return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                            "profile layer %s of %s is not in %s%s%s: the "
                            "comm file may leave frozen modules out, but "
                            "its layers must be the bp file's, in the same "
                            "order",
                            comm->keys[k], path_comm, path_bp,
                            k ? " after layer " : "",
                            k ? comm->keys[k - 1] : "");
        }
        at[k] = j;
    }
    return DD_OK;
}

/* How the files map onto the profile's layers: bp_at[k] and sizes_at[k]
 * are layer k's positions in the bp and sizes files. */
typedef struct {
    size_t *bp_at, *sizes_at;
} dd_profile_map_t;

/* Sums the backward time of the bp file's modules that are no layer into
 * the frozen fields: each module's goes to the layer whose backward runs
 * right after it (the nearest layer before it in forward order). */
static dd_status_t dd_profile_fill_frozen(dd_profile_t *p, const char *path,
                                          const dd_profile_file_t *bp,
                                          const size_t *bp_at)
{
    size_t k = 0;
    double v = 0.0;

    p->frozen_before_s = calloc(p->num_layers, sizeof(double));
    if (p->frozen_before_s == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "out of memory for a profile of %zu layers",
                        p->num_layers);
    }
    for (size_t j = 0; j < bp->count; j++) {
        while (k < p->num_layers && bp_at[k] < j) {
            k++;
        }
        if (k < p->num_layers && bp_at[k] == j) {
            continue;
        }
        dd_status_t status =
            dd_profile_value(path, bp->keys[j], bp->values[j], 0, &v);
        if (status != DD_OK) {
            return status;
        }
        p->num_frozen++;
        p->frozen_bp_s += v;
        if (k == 0) {
            p->frozen_after_s += v;
        } else {
            p->frozen_before_s[k - 1] += v;
        }
    }
    return DD_OK;
}

/* Fills the profile's arrays from the parsed files (comm and sizes may be
 * NULL). */
static dd_status_t dd_profile_fill(dd_profile_t *p, const char *const *paths,
                                   dd_profile_file_t *const *files,
                                   const dd_profile_map_t *map)
{
    dd_status_t status = DD_OK;
    double v = 0.0;

    for (size_t i = 0; i < p->num_layers && status == DD_OK; i++) {
        size_t b = map->bp_at[i], z = map->sizes_at[i];
        status = dd_profile_value(paths[0], files[0]->keys[b],
                                  files[0]->values[b], 0, &p->bp_s[i]);
        if (status == DD_OK && files[1] != NULL) {
            status = dd_profile_value(paths[1], files[1]->keys[i],
                                      files[1]->values[i], 0, &p->comm_s[i]);
        }
        if (status == DD_OK && files[2] != NULL) {
            status = dd_profile_value(paths[2], files[2]->keys[z],
                                      files[2]->values[z], 1, &v);
            p->num_params[i] = (uint64_t)v;
        }
    }
    if (status == DD_OK && files[1] != NULL &&
        files[1]->count < files[0]->count) {
        status = dd_profile_fill_frozen(p, paths[0], files[0], map->bp_at);
    }
    return status;
}

/* Checks that the files' layers agree and maps them onto the profile's:
 * the comm file's when it leaves frozen modules out, else the bp file's.
 * The sizes file lists the bp file's modules or the comm file's layers. */
static dd_status_t dd_profile_match(const char *const *paths,
                                    dd_profile_file_t *const *files,
                                    dd_profile_map_t *map)
{
    const dd_profile_file_t *bp = files[0], *comm = files[1], *sizes = files[2];
    int frozen = comm != NULL && comm->count < bp->count;
    size_t n = frozen ? comm->count : bp->count;
    dd_status_t status = DD_OK;

    map->bp_at = malloc(n * sizeof(size_t));
    map->sizes_at = malloc(n * sizeof(size_t));
    if (map->bp_at == NULL || map->sizes_at == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "out of memory for a profile of %zu layers", n);
    }
    for (size_t k = 0; k < n; k++) {
        map->bp_at[k] = k;
    }
    if (frozen) {
        status =
            dd_profile_subsequence(paths[0], bp, paths[1], comm, map->bp_at);
    } else if (comm != NULL) {
        status = dd_profile_same_layers(paths[0], bp, paths[1], comm);
    }
    if (status != DD_OK || sizes == NULL) {
        return status;
    }
    if (frozen && sizes->count == comm->count) {
        for (size_t k = 0; k < n; k++) {
            map->sizes_at[k] = k;
        }
        return dd_profile_same_layers(paths[1], comm, paths[2], sizes);
    }
    memcpy(map->sizes_at, map->bp_at, n * sizeof(size_t));
    return dd_profile_same_layers(paths[0], bp, paths[2], sizes);
}

/* Parses the files found and checks that their layers agree. */
static dd_status_t dd_profile_load(const char *const *paths,
                                   dd_profile_file_t **files,
                                   dd_profile_t **profile_p)
{
    dd_profile_map_t map = {NULL, NULL};
    dd_profile_t *p = NULL;
    dd_status_t status = DD_OK;

    for (int k = 0; k < 3 && status == DD_OK; k++) {
        if (paths[k] != NULL) {
            status = dd_profile_parse(paths[k], &files[k]);
        }
    }
    if (status == DD_OK) {
        status = dd_profile_match(paths, files, &map);
    }
    if (status == DD_OK) {
        int frozen = files[1] != NULL && files[1]->count < files[0]->count;
        status = dd_profile_alloc(frozen ? files[1] : files[0],
                                  files[1] != NULL, files[2] != NULL, &p);
    }
    if (status == DD_OK) {
        status = dd_profile_fill(p, paths, files, &map);
    }
    free(map.bp_at);
    free(map.sizes_at);
    if (status != DD_OK) {
        dd_profile_free(p);
        return status;
    }
    *profile_p = p;
    return DD_OK;
}

dd_status_t dd_profile_read(const char *dir, dd_profile_t **profile_p)
{
    char *paths[3] = {NULL, NULL, NULL};
    dd_profile_file_t *files[3] = {NULL, NULL, NULL};

    if (dir == NULL || profile_p == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "no profile directory given");
    }
    dd_status_t status = dd_profile_find_all(dir, paths);
    if (status == DD_OK) {
        status = dd_profile_load((const char *const *)paths, files, profile_p);
    }
    for (int k = 0; k < 3; k++) {
        dd_profile_file_free(files[k]);
        free(paths[k]);
    }
    return status;
}

#else /* !HAVE_JSONC */

/* The files are still looked up, so that a wrong directory is reported as
 * such before the missing reader is. */
dd_status_t dd_profile_read(const char *dir, dd_profile_t **profile_p)
{
    char *paths[3] = {NULL, NULL, NULL};

    if (dir == NULL || profile_p == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "no profile directory given");
    }
    dd_status_t status = dd_profile_find_all(dir, paths);
    for (int k = 0; k < 3; k++) {
        free(paths[k]);
    }
    if (status != DD_OK) {
        return status;
    }
    return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_SCHED,
                    "cannot read profile directory %s: built without json-c "
                    "(install libjson-c-dev, then run configure again)",
                    dir);
}

#endif /* HAVE_JSONC */

dd_status_t dd_profile_comm_from_sizes(dd_profile_t *profile, double alpha_s,
                                       double bytes_per_s)
{
    if (profile == NULL || profile->num_params == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "profile has no sizes to derive sync times from");
    }
    if (!isfinite(alpha_s) || alpha_s < 0 || !isfinite(bytes_per_s) ||
        bytes_per_s <= 0) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "invalid alpha-beta model: alpha %g s, %g bytes/s",
                        alpha_s, bytes_per_s);
    }
    if (profile->comm_s == NULL) {
        profile->comm_s = malloc(profile->num_layers * sizeof(double));
        if (profile->comm_s == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                            "out of memory for a profile of %zu layers",
                            profile->num_layers);
        }
    }
    for (size_t i = 0; i < profile->num_layers; i++) {
        double bytes = 4.0 * (double)profile->num_params[i];
        profile->comm_s[i] =
            profile->num_params[i] ? alpha_s + bytes / bytes_per_s : 0.0;
    }
    return DD_OK;
}

dd_status_t dd_profile_plan_input(const dd_profile_t *profile,
                                  dd_plan_input_t *input_p)
{
    if (profile == NULL || input_p == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "no profile given");
    }
    if (profile->comm_s == NULL) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "profile has no sync times: it has no comm file and "
                        "dd_profile_comm_from_sizes was not called");
    }
    input_p->num_layers = profile->num_layers;
    input_p->bp_s = profile->bp_s;
    input_p->comm_s = profile->comm_s;
    return DD_OK;
}
