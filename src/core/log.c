/*
 * Logging. One formatted line is written with a single write so that lines
 * of different threads and ranks never interleave. Must not call into any
 * other subsystem.
 */
#include "core/log.h"
#include "core/status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *const dd_log_level_names[] = {"error", "warn",  "info",
                                          "debug", "trace", NULL};
const char *const dd_log_subsys_names[] = {
    "core",  "boot", "net",      "topo", "backend",
    "sched", "agg",  "compress", "tool", NULL};

int dd_log_level_g = DD_LOG_WARN;
unsigned dd_log_subsys_mask_g = ~0u;

static int dd_log_fd = STDERR_FILENO;
static int dd_log_rank = -1;

void dd_log_set_rank(int rank)
{
    dd_log_rank = rank;
}

static size_t dd_log_format(char *buf, size_t size, dd_log_level_t level,
                            dd_subsys_t subsys, const char *fmt, va_list ap)
{
    static const char *const tags[] = {"ERROR", "WARN", "INFO", "DEBUG",
                                       "TRACE"};
    int saved_errno = errno;
    int n;

    if (dd_log_rank >= 0) {
        n = snprintf(buf, size, "[rank %d] dreamddp %s %s: ", dd_log_rank,
                     tags[level], dd_log_subsys_names[subsys]);
    } else {
        n = snprintf(buf, size, "[rank ?] dreamddp %s %s: ", tags[level],
                     dd_log_subsys_names[subsys]);
    }
    if (n < 0 || (size_t)n >= size) {
        n = 0;
    }
    errno = saved_errno; /* so that %m in fmt sees the caller's errno */
    int m = vsnprintf(buf + n, size - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > size - 2) {
        len = size - 2;
    }
    buf[len++] = '\n';
    buf[len] = '\0';
    return len;
}

/* Lines the log could not write (a full disk, a closed pipe), and the
 * first such error; reported once, where they can still be read. */
static unsigned long dd_log_dropped;
static int dd_log_drop_errno;
static char dd_log_path[4096];

/* dd_log_format with its arguments in place. */
static size_t dd_log_line(char *buf, size_t size, dd_log_level_t level,
                          dd_subsys_t subsys, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static size_t dd_log_line(char *buf, size_t size, dd_log_level_t level,
                          dd_subsys_t subsys, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    size_t len = dd_log_format(buf, size, level, subsys, fmt, ap);
    va_end(ap);
    return len;
}

static void dd_log_emit(const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(dd_log_fd, buf, len);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            int err = w < 0 ? errno : EIO;
            if (__atomic_fetch_add(&dd_log_dropped, 1, __ATOMIC_RELAXED) == 0) {
                __atomic_store_n(&dd_log_drop_errno, err, __ATOMIC_RELAXED);
            }
            return;
        }
        buf += w;
        len -= (size_t)w;
    }
}

/* Says once how many lines were lost, on standard error when the log went
 * to a file (where it may still be read), else in the log itself. */
static void dd_log_report_dropped(void)
{
    unsigned long n = __atomic_exchange_n(&dd_log_dropped, 0, __ATOMIC_RELAXED);
    char buf[2048];

    if (n == 0) {
        return;
    }
    size_t len = dd_log_line(
        buf, sizeof(buf), DD_LOG_WARN, DD_SUBSYS_CORE,
        "%lu log line%s could not be written to %s (%s)", n, n == 1 ? "" : "s",
        dd_log_fd == STDERR_FILENO ? "standard error" : dd_log_path,
        strerror(__atomic_load_n(&dd_log_drop_errno, __ATOMIC_RELAXED)));
    if (write(STDERR_FILENO, buf, len) < 0) {
        /* nowhere left to say it */
    }
}

void dd_log_write(dd_log_level_t level, dd_subsys_t subsys, const char *fmt,
                  ...)
{
    char buf[2048];
    va_list ap;

    va_start(ap, fmt);
    size_t len = dd_log_format(buf, sizeof(buf), level, subsys, fmt, ap);
    va_end(ap);
    dd_log_emit(buf, len);
}

dd_status_t dd_error(dd_status_t status, dd_subsys_t subsys, const char *fmt,
                     ...)
{
    char buf[2048];
    va_list ap;

    va_start(ap, fmt);
    size_t len = dd_log_format(buf, sizeof(buf), DD_LOG_ERROR, subsys, fmt, ap);
    va_end(ap);
    dd_log_emit(buf, len);

    /* The last error holds the message without prefix and newline. */
    const char *msg = strstr(buf, ": ");
    msg = msg ? msg + 2 : buf;
    buf[len - 1] = '\0';
    dd_last_error_set(msg);
    return status;
}

void dd_path_expand_rank(char *out, size_t size, const char *pattern, int rank)
{
    char host[256] = "";
    size_t o = 0;

    if (gethostname(host, sizeof(host) - 1) != 0) {
        snprintf(host, sizeof(host), "unknown");
    }
    for (const char *p = pattern; *p && o + 1 < size; p++) {
        int n = -1;
        if (p[0] == '%' && p[1] == 'r') {
            n = snprintf(out + o, size - o, "%d", rank);
        } else if (p[0] == '%' && p[1] == 'h') {
            n = snprintf(out + o, size - o, "%s", host);
        } else if (p[0] == '%' && p[1] == 'p') {
            n = snprintf(out + o, size - o, "%ld", (long)getpid());
        }
        if (n < 0) {
            out[o++] = *p;
            continue;
        }
        o += (size_t)n < size - o ? (size_t)n : size - o - 1;
        p++;
    }
    out[o < size ? o : size - 1] = '\0';
}

dd_status_t dd_log_configure(int level, unsigned subsys_mask, const char *file,
                             int rank)
{
    dd_log_level_g = level;
    dd_log_subsys_mask_g = subsys_mask;
    dd_log_rank = rank;
    dd_log_close();
    if (file == NULL || file[0] == '\0') {
        return DD_OK;
    }

    char path[4096];
    dd_path_expand_rank(path, sizeof(path), file, rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_CORE,
                        "cannot open DREAMDDP_LOG_FILE %s: %m", path);
    }
    dd_log_fd = fd;
    snprintf(dd_log_path, sizeof(dd_log_path), "%s", path);
    return DD_OK;
}

void dd_log_close(void)
{
    dd_log_report_dropped();
    if (dd_log_fd != STDERR_FILENO) {
        close(dd_log_fd);
        dd_log_fd = STDERR_FILENO;
    }
}
