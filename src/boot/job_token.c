/*
 * Reading the job token from DREAMDDP_JOB_TOKEN or DREAMDDP_JOB_TOKEN_FILE.
 * A file anyone else can read is refused rather than trusted: the token is
 * all that keeps an outsider out of the store.
 */
#include "boot/job_token.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads at most DD_JOB_TOKEN_MAX bytes of fd; -1 when there are more. */
static ssize_t dd_token_read(int fd, char *buf)
{
    size_t len = 0;
    while (len <= DD_JOB_TOKEN_MAX) {
        ssize_t n = read(fd, buf + len, DD_JOB_TOKEN_MAX + 1 - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        if (n == 0) {
            break;
        }
        len += (size_t)n;
    }
    return len > DD_JOB_TOKEN_MAX ? -2 : (ssize_t)len;
}

static dd_status_t dd_token_file(const char *path, char **token_p)
{
    const char *var = "DREAMDDP_JOB_TOKEN_FILE";
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

    if (fd < 0) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "%s='%s': cannot open it: %m", var, path);
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "%s='%s' is not a regular file", var, path);
    }
    if ((st.st_mode & 077) != 0) {
        close(fd);
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "%s='%s' has mode %04o: others could read the job "
                        "token; make it readable by its owner only (chmod "
                        "600)",
                        var, path, (unsigned)(st.st_mode & 07777));
    }
    char *buf = malloc(DD_JOB_TOKEN_MAX + 2);
    if (buf == NULL) {
        close(fd);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "no memory for the job token of %s", var);
    }
    ssize_t len = dd_token_read(fd, buf);
    close(fd);
    if (len == -1) {
        free(buf);
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "%s='%s': cannot read it: %m", var, path);
    }
    /* One line: a trailing newline (from echo) is not part of it. */
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) {
        len--;
    }
    buf[len > 0 ? len : 0] = '\0';
    if (len <= 0 || strlen(buf) != (size_t)len || strchr(buf, '\n') != NULL) {
        free(buf);
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "%s='%s' must hold one line of 1 to %d bytes (the "
                        "token)",
                        var, path, DD_JOB_TOKEN_MAX);
    }
    *token_p = buf;
    return DD_OK;
}

dd_status_t dd_boot_job_token(const dd_boot_opts_t *opts, char **token_p)
{
    if (opts->job_token != NULL && opts->job_token_file != NULL) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "both DREAMDDP_JOB_TOKEN and DREAMDDP_JOB_TOKEN_FILE "
                        "are set: set one");
    }
    if (opts->job_token_file != NULL) {
        return dd_token_file(opts->job_token_file, token_p);
    }
    *token_p = NULL;
    if (opts->job_token != NULL &&
        (*token_p = strdup(opts->job_token)) == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "no memory for the job token of DREAMDDP_JOB_TOKEN");
    }
    return DD_OK;
}
