/*
 * Parsers for DREAMDDP_* values and the loader that applies a component's table
 * to its options struct. Parsers only parse; the loader reports errors, naming
 * the variable, the value and what is accepted.
 */
#include "core/config.h"
#include "core/log.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *dd_config_getenv(void *arg, const char *name)
{
    (void)arg;
    return getenv(name);
}

dd_status_t dd_config_parse_bool(const char *s, int *value_p)
{
    static const char *const yes[] = {"y", "yes", "on", "1", "true"};
    static const char *const no[] = {"n", "no", "off", "0", "false"};

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *value_p = 1;
            return DD_OK;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *value_p = 0;
            return DD_OK;
        }
    }
    return DD_ERR_INVALID_CONFIG;
}

/* Whether s starts a plain decimal number: a digit (or '.' where
 * fractions are allowed), after at most a minus sign. strtol and strtod
 * would take leading blanks, a plus sign, hexadecimal and "inf" too. */
static int dd_config_plain_number(const char *s, int fraction)
{
    if (s[0] == '-') {
        s++;
    }
    if (!(isdigit((unsigned char)s[0]) ||
          (fraction && s[0] == '.' && isdigit((unsigned char)s[1])))) {
        return 0;
    }
    return strpbrk(s, "xXpP") == NULL;
}

dd_status_t dd_config_parse_int(const char *s, long min, long max, int *value_p)
{
    char *end;

    if (!dd_config_plain_number(s, 0)) {
        return DD_ERR_INVALID_CONFIG;
    }
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        return DD_ERR_INVALID_CONFIG;
    }
    *value_p = (int)v;
    return DD_OK;
}

dd_status_t dd_config_parse_float(const char *s, double min, double max,
                                  double *value_p)
{
    char *end;

    if (!dd_config_plain_number(s, 1)) {
        return DD_ERR_INVALID_CONFIG;
    }
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < min ||
        v > max) {
        return DD_ERR_INVALID_CONFIG;
    }
    *value_p = v;
    return DD_OK;
}

/* Splits "12.5ms" into the number and its unit, skipping blanks between. */
static int dd_config_split_unit(const char *s, double *num_p,
                                const char **unit_p)
{
    char *end;

    if (s[0] == '-' || !dd_config_plain_number(s, 1)) {
        return -1; /* no sign, no "inf", no "nan", no hexadecimal */
    }
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || !isfinite(v)) {
        return -1;
    }
    while (*end == ' ') {
        end++;
    }
    *num_p = v;
    *unit_p = end;
    return 0;
}

dd_status_t dd_config_parse_size(const char *s, size_t *value_p)
{
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"", 1.0},
                 {"b", 1.0},
                 {"k", 1024.0},
                 {"kb", 1024.0},
                 {"kib", 1024.0},
                 {"m", 1048576.0},
                 {"mb", 1048576.0},
                 {"mib", 1048576.0},
                 {"g", 1073741824.0},
                 {"gb", 1073741824.0},
                 {"gib", 1073741824.0}};
    double v;
    const char *unit;

    if (dd_config_split_unit(s, &v, &unit) != 0) {
        return DD_ERR_INVALID_CONFIG;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(unit, units[i].unit) != 0) {
            continue;
        }
        double bytes = v * units[i].scale;
        /* Fractions of a byte, or SIZE_MAX / 2 or more: that bound is no
         * double, and > (double)(SIZE_MAX / 2) let 2^63 - 1 through as
         * 2^63, the double it rounds to. */
        if (bytes != floor(bytes) || bytes >= (double)(SIZE_MAX / 2 + 1)) {
            return DD_ERR_INVALID_CONFIG;
        }
        *value_p = (size_t)bytes;
        return DD_OK;
    }
    return DD_ERR_INVALID_CONFIG;
}

dd_status_t dd_config_parse_duration(const char *s, double *value_p)
{
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"", 1.0},    {"s", 1.0},  {"sec", 1.0},  {"ms", 1e-3},
                 {"us", 1e-6}, {"m", 60.0}, {"min", 60.0}, {"h", 3600.0}};
    double v;
    const char *unit;

    if (dd_config_split_unit(s, &v, &unit) != 0) {
        return DD_ERR_INVALID_CONFIG;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(unit, units[i].unit) == 0) {
            *value_p = v * units[i].scale;
            return DD_OK;
        }
    }
    return DD_ERR_INVALID_CONFIG;
}

dd_status_t dd_config_parse_enum(const char *s, const char *const *values,
                                 int *value_p)
{
    for (int i = 0; values[i] != NULL; i++) {
        if (strcasecmp(s, values[i]) == 0) {
            *value_p = i;
            return DD_OK;
        }
    }
    return DD_ERR_INVALID_CONFIG;
}

dd_status_t dd_config_parse_flags(const char *s, const char *const *values,
                                  unsigned *value_p)
{
    unsigned mask = 0;
    const char *p = s;

    if (*s == '\0') {
        return DD_ERR_INVALID_CONFIG;
    }
    while (1) {
        size_t len = strcspn(p, ",");
        int found = 0;
        if (len == 3 && strncasecmp(p, "all", 3) == 0) {
            mask = ~0u;
            found = 1;
        }
        for (int i = 0; !found && values[i] != NULL; i++) {
            if (strlen(values[i]) == len &&
                strncasecmp(p, values[i], len) == 0) {
                mask |= 1u << i;
                found = 1;
            }
        }
        if (!found) {
            return DD_ERR_INVALID_CONFIG;
        }
        if (p[len] == '\0') {
            break;
        }
        p += len + 1;
    }
    *value_p = mask;
    return DD_OK;
}

void dd_iflist_release(dd_iflist_t *list)
{
    for (int i = 0; i < list->n; i++) {
        free(list->names[i]);
    }
    free(list->names);
    memset(list, 0, sizeof(*list));
}

dd_status_t dd_config_parse_iflist(const char *s, dd_iflist_t *list_p)
{
    dd_iflist_t list = {0};
    const char *p = s;

    if (*p == '^') {
        list.exclude = 1;
        p++;
    }
    if (*p == '=') {
        list.exact = 1;
        p++;
    }
    while (1) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= 64 || memchr(p, ' ', len) != NULL) {
            goto err_release;
        }
        char **names = realloc(list.names, sizeof(char *) * (list.n + 1));
        if (names == NULL) {
            goto err_release;
        }
        list.names = names;
        list.names[list.n] = strndup(p, len);
        if (list.names[list.n] == NULL) {
            goto err_release;
        }
        list.n++;
        if (p[len] == '\0') {
            break;
        }
        p += len + 1;
    }
    *list_p = list;
    return DD_OK;

err_release:
    dd_iflist_release(&list);
    return DD_ERR_INVALID_CONFIG;
}

int dd_iflist_match(const dd_iflist_t *list, const char *ifname)
{
    int listed = 0;

    if (list->n == 0) {
        return 1;
    }
    for (int i = 0; i < list->n && !listed; i++) {
        listed = list->exact ? strcmp(ifname, list->names[i]) == 0
                             : strncmp(ifname, list->names[i],
                                       strlen(list->names[i])) == 0;
    }
    return list->exclude ? !listed : listed;
}

/* A duration's bound: its field's max, else a year, so that every
 * conversion (to milliseconds in 32 bits, to a backend's chrono) holds. */
static double dd_config_duration_max(const dd_config_field_t *field)
{
    return field->max > 0 ? (double)field->max : 365.0 * 86400;
}

static void dd_config_join(const char *const *values, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; values[i] != NULL && o < size; i++) {
        int n = snprintf(buf + o, size - o, "%s%s", i ? ", " : "", values[i]);
        o += n > 0 ? (size_t)n : 0;
    }
}

void dd_config_describe(const dd_config_field_t *field, char *buf, size_t size)
{
    char list[256];

    switch (field->type) {
    case DD_CONFIG_BOOL:
        snprintf(buf, size, "yes or no (also on/off, 1/0, true/false)");
        break;
    case DD_CONFIG_INT:
        snprintf(buf, size, "an integer from %ld to %ld", field->min,
                 field->max);
        break;
    case DD_CONFIG_SIZE:
        snprintf(buf, size, "a size in bytes such as 4096, 64K, 4M, 1G");
        break;
    case DD_CONFIG_DURATION:
        snprintf(buf, size, "a duration such as 30s, 500ms, 2m, up to %.0f s",
                 dd_config_duration_max(field));
        break;
    case DD_CONFIG_ENUM:
        dd_config_join(field->values, list, sizeof(list));
        snprintf(buf, size, "one of %s", list);
        break;
    case DD_CONFIG_FLAGS:
        dd_config_join(field->values, list, sizeof(list));
        snprintf(buf, size, "a comma-separated list of %s, or all", list);
        break;
    case DD_CONFIG_STRING:
        snprintf(buf, size, "a string");
        break;
    case DD_CONFIG_IFLIST:
        snprintf(buf, size,
                 "interface name prefixes, comma-separated; a leading ^ "
                 "excludes, = matches exactly");
        break;
    case DD_CONFIG_FLOAT:
        snprintf(buf, size, "a number from %ld to %ld", field->min, field->max);
        break;
    }
}

/* Parses s into the field's slot of opts. */
static dd_status_t dd_config_parse_field(const dd_config_field_t *field,
                                         const char *s, void *opts)
{
    void *dst = (char *)opts + field->offset;

    switch (field->type) {
    case DD_CONFIG_BOOL:
        return dd_config_parse_bool(s, dst);
    case DD_CONFIG_INT:
        return dd_config_parse_int(s, field->min, field->max, dst);
    case DD_CONFIG_SIZE:
        return dd_config_parse_size(s, dst);
    case DD_CONFIG_DURATION: {
        double v;
        if (dd_config_parse_duration(s, &v) != DD_OK ||
            v < (double)field->min || v > dd_config_duration_max(field)) {
            return DD_ERR_INVALID_CONFIG;
        }
        *(double *)dst = v;
        return DD_OK;
    }
    case DD_CONFIG_ENUM:
        return dd_config_parse_enum(s, field->values, dst);
    case DD_CONFIG_FLAGS:
        return dd_config_parse_flags(s, field->values, dst);
    case DD_CONFIG_STRING:
        *(char **)dst = strdup(s);
        /* dd_config_load reports it, naming the variable. */
        return *(char **)dst ? DD_OK : DD_ERR_NO_MEMORY;
    case DD_CONFIG_IFLIST:
        return dd_config_parse_iflist(s, dst);
    case DD_CONFIG_FLOAT:
        return dd_config_parse_float(s, (double)field->min, (double)field->max,
                                     dst);
    }
    return DD_ERR_INTERNAL;
}

/* The value of an unset variable that has no default. */
static void dd_config_set_unset(const dd_config_field_t *field, void *opts)
{
    void *dst = (char *)opts + field->offset;

    switch (field->type) {
    case DD_CONFIG_BOOL:
        *(int *)dst = 0;
        break;
    case DD_CONFIG_INT:
    case DD_CONFIG_ENUM:
        *(int *)dst = -1;
        break;
    case DD_CONFIG_SIZE:
        *(size_t *)dst = 0;
        break;
    case DD_CONFIG_DURATION:
    case DD_CONFIG_FLOAT:
        *(double *)dst = -1.0;
        break;
    case DD_CONFIG_FLAGS:
        *(unsigned *)dst = 0;
        break;
    case DD_CONFIG_STRING:
        *(char **)dst = NULL;
        break;
    case DD_CONFIG_IFLIST:
        memset(dst, 0, sizeof(dd_iflist_t));
        break;
    }
}

static const char *dd_config_value(const dd_config_field_t *field,
                                   dd_getenv_fn_t getenv_fn, void *arg)
{
    const char *s = getenv_fn(arg, field->name);
    return (s != NULL && s[0] != '\0') ? s : NULL;
}

dd_status_t dd_config_load(const dd_config_table_t *table, void *opts,
                           dd_getenv_fn_t getenv_fn, void *arg)
{
    char accepted[512];

    for (size_t i = 0; i < table->n_fields; i++) {
        dd_config_set_unset(&table->fields[i], opts);
    }
    for (size_t i = 0; i < table->n_fields; i++) {
        const dd_config_field_t *field = &table->fields[i];
        const char *s = dd_config_value(field, getenv_fn, arg);
        const char *from = "value";

        if (s == NULL) {
            s = field->default_value;
            from = "default";
        }
        if (s == NULL) {
            continue;
        }
        dd_status_t status = dd_config_parse_field(field, s, opts);
        if (status == DD_OK) {
            continue;
        }
        dd_config_release(table, opts);
        if (status != DD_ERR_INVALID_CONFIG) {
            return dd_error(status, DD_SUBSYS_CORE, "cannot parse %s: %s",
                            field->name, dd_status_string(status));
        }
        dd_config_describe(field, accepted, sizeof(accepted));
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_CORE,
                        "invalid %s %s='%s': expected %s", from, field->name, s,
                        accepted);
    }
    return DD_OK;
}

void dd_config_release(const dd_config_table_t *table, void *opts)
{
    for (size_t i = 0; i < table->n_fields; i++) {
        const dd_config_field_t *field = &table->fields[i];
        void *dst = (char *)opts + field->offset;

        if (field->type == DD_CONFIG_STRING) {
            free(*(char **)dst);
            *(char **)dst = NULL;
        } else if (field->type == DD_CONFIG_IFLIST) {
            dd_iflist_release(dst);
        }
    }
}

/* Checks one variable of the environment without keeping the result. */
static const char *dd_config_check(const dd_config_field_t *field,
                                   const char *s)
{
    union {
        int i;
        unsigned u;
        size_t z;
        double d;
        char *str;
        dd_iflist_t list;
    } scratch;
    dd_config_field_t probe = *field;

    probe.offset = 0;
    memset(&scratch, 0, sizeof(scratch));
    if (dd_config_parse_field(&probe, s, &scratch) != DD_OK) {
        return "invalid";
    }
    if (field->type == DD_CONFIG_STRING) {
        free(scratch.str);
    } else if (field->type == DD_CONFIG_IFLIST) {
        dd_iflist_release(&scratch.list);
    }
    return NULL;
}

static int dd_config_print_text(FILE *stream, const dd_config_field_t *field,
                                dd_getenv_fn_t getenv_fn, void *arg)
{
    char accepted[512];
    const char *s = dd_config_value(field, getenv_fn, arg);
    const char *def = field->default_value ? field->default_value : "unset";

    dd_config_describe(field, accepted, sizeof(accepted));
    if (s == NULL) {
        fprintf(stream, "%s = %s (default)\n", field->name, def);
    } else if (dd_config_check(field, s) != NULL) {
        fprintf(stream, "%s = %s (INVALID; default %s)\n", field->name, s, def);
    } else {
        fprintf(stream, "%s = %s (set; default %s)\n", field->name, s, def);
    }
    return fprintf(stream, "    %s\n    Accepts %s.\n", field->doc, accepted);
}

static int dd_config_print_markdown(FILE *stream,
                                    const dd_config_field_t *field)
{
    char accepted[512];

    dd_config_describe(field, accepted, sizeof(accepted));
    return fprintf(stream, "| `%s` | %s | %s | %s |\n", field->name,
                   field->default_value ? field->default_value : "unset",
                   accepted, field->doc);
}

dd_status_t dd_config_print_tables(FILE *stream,
                                   const dd_config_table_t *const *tables,
                                   size_t n_tables, unsigned flags,
                                   dd_getenv_fn_t getenv_fn, void *arg)
{
    int markdown = (flags & DD_CONFIG_PRINT_MARKDOWN) != 0;
    int rc = 0;

    if (markdown) {
        fprintf(stream, "| Variable | Default | Accepts | Description |\n"
                        "|---|---|---|---|\n");
    }
    for (size_t t = 0; t < n_tables; t++) {
        const dd_config_table_t *table = tables[t];
        if (!markdown) {
            fprintf(stream, "%s[%s]\n", t ? "\n" : "", table->component);
        }
        for (size_t i = 0; i < table->n_fields && rc >= 0; i++) {
            rc = markdown ? dd_config_print_markdown(stream, &table->fields[i])
                          : dd_config_print_text(stream, &table->fields[i],
                                                 getenv_fn, arg);
        }
    }
    if (rc < 0 || fflush(stream) != 0 || ferror(stream)) {
        return DD_ERR_IO;
    }
    return DD_OK;
}

#define DD_CONFIG_PREFIX "DREAMDDP_"
#define DD_CONFIG_NAME_MAX 64 /* longer names are compared on this much */

/* The optimal-string-alignment distance (Levenshtein plus transpositions of
 * neighbours), ignoring case, on at most DD_CONFIG_NAME_MAX characters. */
static int dd_config_distance(const char *a, size_t la, const char *b,
                              size_t lb)
{
    int rows[3][DD_CONFIG_NAME_MAX + 1];
    int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

    la = la < DD_CONFIG_NAME_MAX ? la : DD_CONFIG_NAME_MAX;
    lb = lb < DD_CONFIG_NAME_MAX ? lb : DD_CONFIG_NAME_MAX;
    for (size_t j = 0; j <= lb; j++) {
        prev[j] = (int)j;
    }
    for (size_t i = 1; i <= la; i++) {
        int ca = toupper((unsigned char)a[i - 1]);
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cb = toupper((unsigned char)b[j - 1]);
            int d = prev[j - 1] + (ca != cb);
            d = prev[j] + 1 < d ? prev[j] + 1 : d;
            d = cur[j - 1] + 1 < d ? cur[j - 1] + 1 : d;
            if (i > 1 && j > 1 && ca == toupper((unsigned char)b[j - 2]) &&
                cb == toupper((unsigned char)a[i - 2]) &&
                prev2[j - 2] + 1 < d) {
                d = prev2[j - 2] + 1;
            }
            cur[j] = d;
        }
        int *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

/* Whether the len characters at name are a declared name. */
static int dd_config_declared(const dd_config_table_t *const *tables,
                              size_t n_tables, const char *name, size_t len)
{
    for (size_t t = 0; t < n_tables; t++) {
        for (size_t i = 0; i < tables[t]->n_fields; i++) {
            const char *known = tables[t]->fields[i].name;
            if (strncmp(known, name, len) == 0 && known[len] == '\0') {
                return 1;
            }
        }
    }
    return 0;
}

/* The declared DREAMDDP_ name nearest to the len characters at name, both
 * compared after the prefix, or NULL when none is close. Ties go to the first
 * declared. */
static const char *dd_config_nearest(const dd_config_table_t *const *tables,
                                     size_t n_tables, const char *name,
                                     size_t len)
{
    const size_t skip = sizeof(DD_CONFIG_PREFIX) - 1;
    size_t rest = len - skip;
    size_t cap = rest < DD_CONFIG_NAME_MAX ? rest : DD_CONFIG_NAME_MAX;
    /* Two edits, or one in three characters for longer names. */
    int best_dist = cap / 3 > 2 ? (int)(cap / 3) : 2;
    const char *best = NULL;

    for (size_t t = 0; t < n_tables; t++) {
        for (size_t i = 0; i < tables[t]->n_fields; i++) {
            const char *known = tables[t]->fields[i].name;
            if (strncmp(known, DD_CONFIG_PREFIX, skip) != 0) {
                continue;
            }
            int d = dd_config_distance(name + skip, rest, known + skip,
                                       strlen(known) - skip);
            if (d < best_dist || (best == NULL && d == best_dist)) {
                best = known;
                best_dist = d;
            }
        }
    }
    return best;
}

int dd_config_unknown_message(const dd_config_table_t *const *tables,
                              size_t n_tables, const char *entry, char *msg,
                              size_t size)
{
    size_t len = strcspn(entry, "=");

    if (strncmp(entry, DD_CONFIG_PREFIX, sizeof(DD_CONFIG_PREFIX) - 1) != 0 ||
        dd_config_declared(tables, n_tables, entry, len)) {
        return 0;
    }
    const char *near = dd_config_nearest(tables, n_tables, entry, len);
    if (near != NULL) {
        snprintf(msg, size, "%.*s is not a dreamddp variable; did you mean %s?",
                 (int)len, entry, near);
    } else {
        snprintf(msg, size,
                 "%.*s is not a dreamddp variable (ddtopo --config lists them)",
                 (int)len, entry);
    }
    return 1;
}

int dd_config_warn_unknown(const dd_config_table_t *const *tables,
                           size_t n_tables, char *const *env)
{
    char msg[256];
    int n = 0;

    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        if (dd_config_unknown_message(tables, n_tables, env[i], msg,
                                      sizeof(msg))) {
            dd_log_warn(DD_SUBSYS_CORE, "%s", msg);
            n++;
        }
    }
    return n;
}
