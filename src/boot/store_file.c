/*
 * The file store: one file per key in a job directory on a shared file
 * system (DREAMDDP_STORE=file:DIR). The job directory is named after the token
 * hash, so ranks of different jobs never see each other's keys. Values are
 * written to a temporary file and renamed, so a reader sees all or nothing;
 * add takes an flock. Waits poll with a growing interval.
 */
#include "boot/store.h"
#include "core/log.h"
#include "core/time.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    dd_store_t base;
    char dir[4096];
} dd_store_file_t;

/* Key to path: bytes other than [A-Za-z0-9._-] become %XX. */
static int dd_file_path(dd_store_file_t *f, const char *key, char *path,
                        size_t size)
{
    size_t o = (size_t)snprintf(path, size, "%s/", f->dir);
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (o + 4 >= size) {
            return -1;
        }
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-') {
            path[o++] = (char)*p;
        } else {
            o += (size_t)snprintf(path + o, size - o, "%%%02X", *p);
        }
    }
    path[o] = '\0';
    return 0;
}

static dd_status_t dd_file_write(const char *path, const void *value,
                                 size_t len, int rank)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%ld", path, rank, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return dd_error(DD_ERR_IO, DD_SUBSYS_BOOT,
                        "file store: cannot "
                        "create %s: %m",
                        tmp);
    }
    ssize_t w = len ? write(fd, value, len) : 0;
    if (w != (ssize_t)len || close(fd) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return dd_error(DD_ERR_IO, DD_SUBSYS_BOOT,
                        "file store: cannot write %s: %m", path);
    }
    return DD_OK;
}

/* Reads a whole file; DD_ERR_NOT_FOUND when it does not exist. */
static dd_status_t dd_file_read(const char *path, void **value_p, size_t *len_p)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;

    if (fd < 0) {
        return errno == ENOENT ? DD_ERR_NOT_FOUND : DD_ERR_IO;
    }
    if (fstat(fd, &st) != 0) {
        close(fd);
        return DD_ERR_IO;
    }
    size_t len = (size_t)st.st_size;
    char *buf = malloc(len + 1);
    if (buf == NULL) {
        close(fd);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "file store: no memory for the %zu bytes of %s", len,
                        path);
    }
    ssize_t r = len ? read(fd, buf, len) : 0;
    close(fd);
    if (r != (ssize_t)len) {
        free(buf);
        return DD_ERR_IO;
    }
    buf[len] = '\0';
    *value_p = buf;
    *len_p = len;
    return DD_OK;
}

static dd_status_t dd_file_set(dd_store_t *s, const char *key,
                               const void *value, size_t len)
{
    dd_store_file_t *f = (dd_store_file_t *)s;
    char path[4200];

    if (dd_file_path(f, key, path, sizeof(path)) != 0) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_BOOT,
                        "file store: key too long");
    }
    return dd_file_write(path, value, len, s->rank);
}

/* Sleeps a growing interval, never past the deadline. */
static void dd_file_nap(double *interval, double deadline)
{
    double left = deadline - dd_time_now();
    double nap = *interval < left ? *interval : left;
    if (nap > 0) {
        usleep((useconds_t)(nap * 1e6));
    }
    *interval = *interval * 2 < 0.05 ? *interval * 2 : 0.05;
}

static dd_status_t dd_file_get(dd_store_t *s, const char *key, double timeout_s,
                               void **value_p, size_t *len_p)
{
    dd_store_file_t *f = (dd_store_file_t *)s;
    double deadline = dd_time_now() + timeout_s;
    double interval = 0.001;
    char path[4200];

    if (dd_file_path(f, key, path, sizeof(path)) != 0) {
        return DD_ERR_INVALID_PARAM;
    }
    while (1) {
        dd_status_t status = dd_file_read(path, value_p, len_p);
        if (status == DD_OK || status == DD_ERR_NO_MEMORY) {
            return status; /* dd_file_read reported the latter */
        }
        if (status != DD_ERR_NOT_FOUND) {
            return dd_error(status, DD_SUBSYS_BOOT,
                            "file store: cannot read %s", path);
        }
        if (dd_time_now() >= deadline) {
            return DD_ERR_TIMED_OUT;
        }
        dd_file_nap(&interval, deadline);
    }
}

static dd_status_t dd_file_wait(dd_store_t *s, const char *const *keys, int n,
                                double timeout_s, int *present)
{
    dd_store_file_t *f = (dd_store_file_t *)s;
    double deadline = dd_time_now() + timeout_s;
    double interval = 0.001;
    char path[4200];

    while (1) {
        int all = 1;
        for (int i = 0; i < n; i++) {
            int here = dd_file_path(f, keys[i], path, sizeof(path)) == 0 &&
                       access(path, F_OK) == 0;
            if (present != NULL) {
                present[i] = here;
            }
            all = all && here;
        }
        if (all) {
            return DD_OK;
        }
        if (dd_time_now() >= deadline) {
            return DD_ERR_TIMED_OUT;
        }
        dd_file_nap(&interval, deadline);
    }
}

static dd_status_t dd_file_add(dd_store_t *s, const char *key, int64_t delta,
                               int64_t *value_p)
{
    dd_store_file_t *f = (dd_store_file_t *)s;
    char path[4200], lock[4300], text[32];

    if (dd_file_path(f, key, path, sizeof(path)) != 0) {
        return DD_ERR_INVALID_PARAM;
    }
    snprintf(lock, sizeof(lock), "%s.lock", path);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    /* flock, not fcntl: fcntl locks do not exclude threads of one process. */
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        dd_status_t status = dd_error(DD_ERR_IO, DD_SUBSYS_BOOT,
                                      "file store: cannot lock %s: %m", lock);
        if (fd >= 0) {
            close(fd);
        }
        return status;
    }
    void *old = NULL;
    size_t len = 0;
    int64_t v = 0;
    char why[1200];
    dd_status_t status = dd_file_read(path, &old, &len);
    int have = status == DD_OK;
    /* Absent is zero; without memory for the old value, adding would
     * restart the counter. */
    if (status != DD_ERR_NO_MEMORY) {
        status = dd_store_add_value(key, have ? old : NULL, len, delta, &v, why,
                                    sizeof(why));
    }
    free(old);
    if (status == DD_OK) {
        snprintf(text, sizeof(text), "%lld", (long long)v);
        status = dd_file_write(path, text, strlen(text), s->rank);
    } else if (status != DD_ERR_NO_MEMORY) {
        status = dd_error(status, DD_SUBSYS_BOOT, "file store: %s", why);
    }
    close(fd); /* releases the lock */
    if (status == DD_OK && value_p != NULL) {
        *value_p = v;
    }
    return status;
}

static dd_status_t dd_file_del(dd_store_t *s, const char *key, int *deleted_p)
{
    dd_store_file_t *f = (dd_store_file_t *)s;
    char path[4200];

    if (dd_file_path(f, key, path, sizeof(path)) != 0) {
        return DD_ERR_INVALID_PARAM;
    }
    int deleted = unlink(path) == 0;
    if (deleted_p != NULL) {
        *deleted_p = deleted;
    }
    return DD_OK;
}

static void dd_file_close(dd_store_t *s)
{
    free(s);
}

static const dd_store_ops_t dd_store_file_ops = {
    dd_file_set, dd_file_get,   dd_file_wait, dd_file_add,
    dd_file_del, dd_file_close, NULL};

dd_status_t dd_store_file_open(const char *dir, uint64_t token_name, int rank,
                               int world_size, double timeout_s,
                               dd_store_t **store_p)
{
    dd_store_file_t *f = calloc(1, sizeof(*f));

    if (f == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "file store: no memory for the store in %s", dir);
    }
    if (strlen(dir) > 3000) {
        free(f);
        return dd_error(
            DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
            "DREAMDDP_STORE=file:%.40s...: the directory name is too "
            "long",
            dir);
    }
    snprintf(f->dir, sizeof(f->dir), "%s/dd-%016llx", dir,
             (unsigned long long)token_name);
    if (mkdir(f->dir, 0700) != 0 && errno != EEXIST) {
        dd_status_t status = dd_error(
            DD_ERR_IO, DD_SUBSYS_BOOT,
            "DREAMDDP_STORE=file:%s: cannot create %s: %m", dir, f->dir);
        free(f);
        return status;
    }
    f->base.ops = &dd_store_file_ops;
    f->base.rank = rank;
    f->base.world_size = world_size;
    f->base.timeout_s = timeout_s;
    snprintf(f->base.where, sizeof(f->base.where), "file:%s", dir);
    *store_p = &f->base;
    return DD_OK;
}
