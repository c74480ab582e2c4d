/*
 * Reads a layer profile directory (bp_*.json, comm_*.json, sizes_*.json, or
 * the same under bp/, comm/, sizes/) into a dd_profile_t. Every error is
 * reported once, here, naming the file and the layer or position at fault.
 * It must not plan and must not repair input: NaN and Infinity becoming 0
 * is the artifact's own convention, not a guess.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "sched/profile.h"

#include "core/json.h"
#include "core/log.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static dd_status_t dd_profile_parse(const char *path, dd_json_t **tree_p)
{
    dd_json_error_t err;
    dd_json_t *tree;

    dd_status_t status = dd_json_parse_file(path, &tree, &err);
    if (status == DD_ERR_MESSAGE) {
        return dd_error(status, DD_SUBSYS_SCHED, "%s:%u:%u: %s", path, err.line,
                        err.column, err.message);
    }
    if (status != DD_OK) {
        return dd_error(status, DD_SUBSYS_SCHED, "profile %s: %s", path,
                        err.message);
    }
    if (tree->type != DD_JSON_OBJECT) {
        status = dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                          "profile %s: expected an object from layer name "
                          "to number, found %s",
                          path, dd_json_type_name(tree->type));
    } else if (tree->count == 0) {
        status = dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                          "profile %s has no layers", path);
    }
    if (status != DD_OK) {
        dd_json_free(tree);
        return status;
    }
    *tree_p = tree;
    return DD_OK;
}

/* A layer's value: a number >= 0 (an integer when integer is set), with
 * NaN and +Infinity read as 0 the way the artifact's tools read them. */
static dd_status_t dd_profile_value(const char *path, const dd_json_member_t *m,
                                    int integer, double *value_p)
{
    if (strlen(m->key) != m->key_length) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile %s: layer name \"%s\" holds a NUL byte", path,
                        m->key);
    }
    if (m->value.type != DD_JSON_NUMBER) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile %s: layer %s: expected a number, found %s",
                        path, m->key, dd_json_type_name(m->value.type));
    }
    double v = m->value.number;
    if (isnan(v) || (isinf(v) && v > 0)) {
        v = 0.0;
    }
    if (v < 0) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile %s: layer %s has negative value %g", path,
                        m->key, v);
    }
    if (integer && (v != floor(v) || v > DD_PROFILE_MAX_PARAMS)) {
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile %s: layer %s: parameter count %g is not an "
                        "integer below 2^53",
                        path, m->key, v);
    }
    *value_p = v;
    return DD_OK;
}

/* Files of a profile must list the same layers in the same order, since
 * the order is the forward order; the first position where they part is
 * the layer the user has to look at. */
static dd_status_t dd_profile_same_layers(const char *path_a,
                                          const dd_json_t *a,
                                          const char *path_b,
                                          const dd_json_t *b)
{
    size_t n = a->count < b->count ? a->count : b->count;

    for (size_t k = 0; k < n; k++) {
        const dd_json_member_t *x = &a->members[k], *y = &b->members[k];
        if (x->key_length != y->key_length ||
            memcmp(x->key, y->key, x->key_length) != 0) {
            return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                            "profile layers differ at position %zu: layer "
                            "%s in %s, layer %s in %s",
                            k, x->key, path_a, y->key, path_b);
        }
    }
    if (a->count != b->count) {
        const char *longer = a->count > b->count ? path_a : path_b;
        const char *shorter = a->count > b->count ? path_b : path_a;
        const dd_json_t *t = a->count > b->count ? a : b;
        return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_SCHED,
                        "profile layer %s of %s is missing from %s",
                        t->members[n].key, longer, shorter);
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
    free(profile);
}

/* Allocates the profile's arrays for the layers of the bp file. */
static dd_status_t dd_profile_alloc(const dd_json_t *bp, int has_comm,
                                    int has_sizes, dd_profile_t **profile_p)
{
    size_t n = bp->count;
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
        p->names[i] = strdup(bp->members[i].key);
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

/* Fills the profile's arrays from the parsed files (comm and sizes may be
 * NULL). */
static dd_status_t dd_profile_fill(dd_profile_t *p, const char *const *paths,
                                   const dd_json_t *const *trees)
{
    dd_status_t status = DD_OK;
    double v = 0.0;

    for (size_t i = 0; i < p->num_layers && status == DD_OK; i++) {
        status =
            dd_profile_value(paths[0], &trees[0]->members[i], 0, &p->bp_s[i]);
        if (status == DD_OK && trees[1] != NULL) {
            status = dd_profile_value(paths[1], &trees[1]->members[i], 0,
                                      &p->comm_s[i]);
        }
        if (status == DD_OK && trees[2] != NULL) {
            status = dd_profile_value(paths[2], &trees[2]->members[i], 1, &v);
            p->num_params[i] = (uint64_t)v;
        }
    }
    return status;
}

/* Parses the files found and checks that their layers agree. */
static dd_status_t dd_profile_load(const char *const *paths, dd_json_t **trees,
                                   dd_profile_t **profile_p)
{
    dd_status_t status = DD_OK;

    for (int k = 0; k < 3 && status == DD_OK; k++) {
        if (paths[k] != NULL) {
            status = dd_profile_parse(paths[k], &trees[k]);
        }
    }
    for (int k = 1; k < 3 && status == DD_OK; k++) {
        if (trees[k] != NULL) {
            status =
                dd_profile_same_layers(paths[0], trees[0], paths[k], trees[k]);
        }
    }
    if (status != DD_OK) {
        return status;
    }
    dd_profile_t *p = NULL;
    status = dd_profile_alloc(trees[0], trees[1] != NULL, trees[2] != NULL, &p);
    if (status != DD_OK) {
        return status;
    }
    status = dd_profile_fill(p, paths, (const dd_json_t *const *)trees);
    if (status != DD_OK) {
        dd_profile_free(p);
        return status;
    }
    *profile_p = p;
    return DD_OK;
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

dd_status_t dd_profile_read(const char *dir, dd_profile_t **profile_p)
{
    char *paths[3] = {NULL, NULL, NULL};
    dd_json_t *trees[3] = {NULL, NULL, NULL};

    if (dir == NULL || profile_p == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "no profile directory given");
    }
    dd_status_t status = dd_profile_find_all(dir, paths);
    if (status == DD_OK) {
        status = dd_profile_load((const char *const *)paths, trees, profile_p);
    }
    for (int k = 0; k < 3; k++) {
        dd_json_free(trees[k]);
        free(paths[k]);
    }
    return status;
}

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
