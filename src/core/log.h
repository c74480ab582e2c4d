/*
 * Logging: levels, subsystems, a "[rank N]" prefix, an optional file.
 * The level is checked before any formatting. Errors and warnings are always
 * printed; DREAMDDP_LOG_SUBSYS filters info and below.
 */
#ifndef DD_CORE_LOG_H
#define DD_CORE_LOG_H

#include <dreamddp.h>

typedef enum {
    DD_LOG_ERROR = 0,
    DD_LOG_WARN,
    DD_LOG_INFO,
    DD_LOG_DEBUG,
    DD_LOG_TRACE
} dd_log_level_t;

/* Keep in step with dd_log_subsys_names in log.c. */
typedef enum {
    DD_SUBSYS_CORE = 0,
    DD_SUBSYS_BOOT,
    DD_SUBSYS_NET,
    DD_SUBSYS_TOPO,
    DD_SUBSYS_BACKEND,
    DD_SUBSYS_SCHED,
    DD_SUBSYS_AGG,
    DD_SUBSYS_COMPRESS,
    DD_SUBSYS_TOOL,
    DD_SUBSYS_LAST
} dd_subsys_t;

/** NULL-terminated names of levels and subsystems, for the config parser. */
extern const char *const dd_log_level_names[];
extern const char *const dd_log_subsys_names[];

extern int dd_log_level_g;
extern unsigned dd_log_subsys_mask_g;

#define dd_log_enabled(level, subsys)                                          \
    ((int)(level) <= dd_log_level_g &&                                         \
     ((level) <= DD_LOG_WARN || (dd_log_subsys_mask_g & (1u << (subsys)))))

#define dd_log(level, subsys, ...)                                             \
    do {                                                                       \
        if (dd_log_enabled(level, subsys)) {                                   \
            dd_log_write(level, subsys, __VA_ARGS__);                          \
        }                                                                      \
    } while (0)

#define dd_log_error(subsys, ...) dd_log(DD_LOG_ERROR, subsys, __VA_ARGS__)
#define dd_log_warn(subsys, ...) dd_log(DD_LOG_WARN, subsys, __VA_ARGS__)
#define dd_log_info(subsys, ...) dd_log(DD_LOG_INFO, subsys, __VA_ARGS__)
#define dd_log_debug(subsys, ...) dd_log(DD_LOG_DEBUG, subsys, __VA_ARGS__)
#define dd_log_trace(subsys, ...) dd_log(DD_LOG_TRACE, subsys, __VA_ARGS__)

void dd_log_write(dd_log_level_t level, dd_subsys_t subsys, const char *fmt,
                  ...) __attribute__((format(printf, 3, 4)));

/**
 * Reports an error where it is detected: logs it at error level and records
 * it as this thread's dd_last_error(). Returns status, so callers can write
 * `return dd_error(DD_ERR_IO, DD_SUBSYS_NET, "...")`.
 */
dd_status_t dd_error(dd_status_t status, dd_subsys_t subsys, const char *fmt,
                     ...) __attribute__((format(printf, 3, 4)));

/** Sets the rank printed in the prefix (-1 prints "?"). */
void dd_log_set_rank(int rank);

/**
 * Applies the logging configuration. file may be NULL (stderr); it is
 * expanded as dd_path_expand_rank does. Returns DD_ERR_IO, naming the file, if
 * it cannot be opened.
 */
dd_status_t dd_log_configure(int level, unsigned subsys_mask, const char *file,
                             int rank);

/**
 * Writes pattern into out with every "%r" replaced by the rank, "%h" by the
 * host name and "%p" by the process id, as NCCL_DEBUG_FILE does (the
 * convention of DREAMDDP_LOG_FILE and DREAMDDP_TIMELINE), truncated to size;
 * any other '%' is kept as it is.
 */
void dd_path_expand_rank(char *out, size_t size, const char *pattern, int rank);

/** Closes the log file, if any, and goes back to stderr. */
void dd_log_close(void);

#endif
