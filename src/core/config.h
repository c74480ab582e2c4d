/*
 * The configuration table: every DREAMDDP_* variable is declared once, in its
 * component's table (name, default, doc, parser, where it lands in the
 * component's options struct). Tables are parsed once at dd_init; nothing
 * else reads DREAMDDP_* variables. The same tables print the docs.
 */
#ifndef DD_CORE_CONFIG_H
#define DD_CORE_CONFIG_H

#include <dreamddp.h>

#include <stddef.h>
#include <stdio.h>

typedef enum {
    DD_CONFIG_BOOL,     /* int: y/yes/on/1/true, n/no/off/0/false */
    DD_CONFIG_INT,      /* int in [min, max] */
    DD_CONFIG_SIZE,     /* size_t bytes: 4096, 64K, 4M, 1G (KiB based) */
    DD_CONFIG_DURATION, /* double seconds: 30, 30s, 500ms, 2m, 1h */
    DD_CONFIG_ENUM,     /* int: index into values */
    DD_CONFIG_FLAGS,    /* unsigned: bit i for values[i]; "all" sets all */
    DD_CONFIG_STRING,   /* char *, owned by the options struct */
    DD_CONFIG_IFLIST,   /* dd_iflist_t: NCCL_SOCKET_IFNAME grammar */
    DD_CONFIG_FLOAT     /* double in [min, max] */
} dd_config_type_t;

/**
 * An interface list: comma-separated name prefixes; a leading '^' excludes
 * the listed interfaces, a leading '=' (after any '^') matches exact names.
 * An unset list (n == 0, exclude == 0) matches every interface.
 */
typedef struct {
    int exclude;
    int exact;
    int n;
    char **names;
} dd_iflist_t;

typedef struct {
    const char *name;          /* "DREAMDDP_TIMEOUT_S" */
    const char *default_value; /* NULL: unset (ints -1, strings NULL) */
    const char *doc;           /* one sentence, for --config and README */
    dd_config_type_t type;
    size_t offset;             /* of the value in the options struct */
    long min, max;             /* DD_CONFIG_INT and DD_CONFIG_FLOAT */
    const char *const *values; /* DD_CONFIG_ENUM / FLAGS, NULL-terminated */
} dd_config_field_t;

typedef struct {
    const char *component;
    const dd_config_field_t *fields;
    size_t n_fields;
} dd_config_table_t;

/** Looks up one environment variable; NULL when unset. */
typedef const char *(*dd_getenv_fn_t)(void *arg, const char *name);

/** dd_getenv_fn_t over the process environment. */
const char *dd_config_getenv(void *arg, const char *name);

/* Parsers. Each returns DD_OK or DD_ERR_INVALID_CONFIG without logging. */
dd_status_t dd_config_parse_bool(const char *s, int *value_p);
dd_status_t dd_config_parse_int(const char *s, long min, long max,
                                int *value_p);
dd_status_t dd_config_parse_float(const char *s, double min, double max,
                                  double *value_p);
dd_status_t dd_config_parse_size(const char *s, size_t *value_p);
dd_status_t dd_config_parse_duration(const char *s, double *value_p);
dd_status_t dd_config_parse_enum(const char *s, const char *const *values,
                                 int *value_p);
dd_status_t dd_config_parse_flags(const char *s, const char *const *values,
                                  unsigned *value_p);
dd_status_t dd_config_parse_iflist(const char *s, dd_iflist_t *list_p);

/** Frees the names of an interface list and zeroes it. */
void dd_iflist_release(dd_iflist_t *list);

/** Whether ifname is selected by list. */
int dd_iflist_match(const dd_iflist_t *list, const char *ifname);

/** Writes what a field accepts ("a duration such as 30s, 500ms, 2m"). */
void dd_config_describe(const dd_config_field_t *field, char *buf, size_t size);

/**
 * Fills opts (the component's options struct) from the environment, with
 * defaults for unset variables. On a bad value, logs and records an error
 * naming the variable, the value and what is accepted, releases what was
 * filled, and returns DD_ERR_INVALID_CONFIG.
 */
dd_status_t dd_config_load(const dd_config_table_t *table, void *opts,
                           dd_getenv_fn_t getenv_fn, void *arg);

/** Frees what dd_config_load allocated in opts. */
void dd_config_release(const dd_config_table_t *table, void *opts);

/** Prints tables as text or Markdown (DD_CONFIG_PRINT_MARKDOWN). */
dd_status_t dd_config_print_tables(FILE *stream,
                                   const dd_config_table_t *const *tables,
                                   size_t n_tables, unsigned flags,
                                   dd_getenv_fn_t getenv_fn, void *arg);

/**
 * Writes into msg the warning for one environment entry ("NAME=value") whose
 * name starts with DREAMDDP_ but is declared in none of tables, naming the
 * nearest declared name when one is close. Returns 1 when it wrote a warning,
 * 0 when the name is declared or not a DREAMDDP_ name (msg is then untouched).
 */
int dd_config_unknown_message(const dd_config_table_t *const *tables,
                              size_t n_tables, const char *entry, char *msg,
                              size_t size);

/**
 * Logs that warning (core subsystem, warn level) for every entry of env, a
 * NULL-terminated array like environ. Returns how many it logged.
 */
int dd_config_warn_unknown(const dd_config_table_t *const *tables,
                           size_t n_tables, char *const *env);

#define DD_CONFIG_FIELDS_COUNT(a) (sizeof(a) / sizeof((a)[0]))

#endif
