/*
 * The files of the elastic commits: what keeps them from being damaged
 * unnoticed, shared with another job or planted by another user. The
 * directory must be this user's and closed to others' writes; a slot is
 * made as a new file (O_EXCL, O_NOFOLLOW) and renamed into place, so a
 * link or a file someone else left at its name is never written through;
 * a slot is read only when it is a plain file of this user's whose body
 * matches its checksum. It must not know what a commit holds.
 */
#include "api/elastic_file.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define DD_ELASTIC_FNV_PRIME 0x100000001b3ull

/* FNV-1a over 8-byte words: a commit is taken every window, so its
 * checksum must cost about what the copy does (a few GB/s, one multiply
 * per word), which SHA-256 (a few hundred MB/s without SHA extensions)
 * would not. Each word's step is a bijection of the running value, so a
 * change confined to one word (a flipped byte, a torn page's first word)
 * always changes the sum. It guards against damage, not a forger: the
 * directory's owner and mode keep others from writing. Fed in pieces,
 * every piece but the last must be a multiple of 8 bytes. */
uint64_t dd_elastic_sum(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    size_t k = 0;

    for (; k + 8 <= n; k += 8) {
        uint64_t w;
        memcpy(&w, p + k, 8);
        h = (h ^ w) * DD_ELASTIC_FNV_PRIME;
    }
    for (; k < n; k++) {
        h = (h ^ p[k]) * DD_ELASTIC_FNV_PRIME;
    }
    return h;
}

dd_status_t dd_elastic_dir_check(const char *dir)
{
    struct stat st;

    /* Several ranks may make it at once: EEXIST is one of them winning. */
    if (stat(dir, &st) != 0 && errno == ENOENT && mkdir(dir, 0700) != 0 &&
        errno != EEXIST) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "DREAMDDP_ELASTIC_DIR=%s: cannot make it: %m", dir);
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "DREAMDDP_ELASTIC_DIR=%s is not a directory%s", dir,
                        errno == ENOENT ? " (it does not exist)" : "");
    }
    if (st.st_uid != geteuid()) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "DREAMDDP_ELASTIC_DIR=%s is owned by uid %u, not by "
                        "this job's user (uid %u): its owner could read the "
                        "commits or plant one; use a directory of your own",
                        dir, (unsigned)st.st_uid, (unsigned)geteuid());
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "DREAMDDP_ELASTIC_DIR=%s has mode %03o: other users "
                        "can write in it, and so plant or replace a commit; "
                        "chmod go-w it (0700 is best)",
                        dir, (unsigned)(st.st_mode & 0777));
    }
    return DD_OK;
}

void dd_elastic_job_name(uint64_t token_tag, char out[17])
{
    /* A digest of the tag, not the tag that every message carries. */
    uint64_t h = dd_elastic_sum(DD_ELASTIC_SUM_INIT, &token_tag, 8);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* Why what is at path must not be replaced (a link, not a file, another
 * user's), or NULL when nothing is there or it is a file of ours. */
static const char *dd_elastic_file_foreign(const struct stat *st, char *buf,
                                           size_t size)
{
    if (S_ISLNK(st->st_mode)) {
        return "it is a symbolic link";
    }
    if (!S_ISREG(st->st_mode)) {
        return "it is not a regular file";
    }
    if (st->st_uid != geteuid()) {
        snprintf(buf, size,
                 "it is owned by uid %u, not by this job's user "
                 "(uid %u)",
                 (unsigned)st->st_uid, (unsigned)geteuid());
        return buf;
    }
    return NULL;
}

dd_status_t dd_elastic_file_make(const char *path, size_t size, void **map_p)
{
    char tmp[PATH_MAX], buf[128];
    struct stat st;
    const char *why;
    void *map = MAP_FAILED;

    if (lstat(path, &st) == 0 &&
        (why = dd_elastic_file_foreign(&st, buf, sizeof(buf))) != NULL) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BOOT,
                        "elastic commit: refusing %s: %s; something other "
                        "than this job put it in DREAMDDP_ELASTIC_DIR",
                        path, why);
    }
    snprintf(tmp, sizeof(tmp), "%s.new-%ld", path, (long)getpid());
    int fd =
        open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int err = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)size);
    if (err == 0) {
        map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        err = map == MAP_FAILED ? errno : 0;
    }
    if (err == 0 && rename(tmp, path) != 0) {
        err = errno;
    }
    if (fd >= 0) {
        close(fd);
    }
    if (err != 0) {
        if (map != MAP_FAILED) {
            munmap(map, size);
        }
        if (fd >= 0) {
            unlink(tmp);
        }
        return dd_error(DD_ERR_IO, DD_SUBSYS_BOOT,
                        "elastic commit: cannot make %s (%zu bytes): %s; "
                        "set DREAMDDP_ELASTIC_DIR to a directory with room "
                        "for two commits per worker",
                        fd < 0 ? tmp : path, size, strerror(err));
    }
    *map_p = map;
    return DD_OK;
}

/* The body's checksum, read from fd after the header. */
static int dd_elastic_file_sum(int fd, uint64_t body, uint64_t *sum_p)
{
    static const size_t chunk = 1u << 20; /* a multiple of 8 */
    unsigned char *buf = malloc(chunk);
    uint64_t h = DD_ELASTIC_SUM_INIT, left = body;

    while (buf != NULL && left > 0) {
        size_t want = left < chunk ? (size_t)left : chunk, got = 0;
        while (got < want) {
            ssize_t r = read(fd, buf + got, want - got);
            if (r <= 0) {
                free(buf);
                return -1;
            }
            got += (size_t)r;
        }
        h = dd_elastic_sum(h, buf, want);
        left -= want;
    }
    free(buf);
    *sum_p = h;
    return buf == NULL ? -1 : 0;
}

/* The header's verdict: VALID when it is a commit of this job and model. */
static dd_elastic_file_t dd_elastic_header_check(const dd_elastic_header_t *h,
                                                 uint64_t token_tag,
                                                 uint64_t layout, uint64_t body,
                                                 char *why, size_t why_size)
{
    static const char zero[8];

    if (memcmp(h->magic, zero, 8) == 0) {
        return DD_ELASTIC_FILE_OTHER; /* never written, or a copy cut short */
    }
    if (memcmp(h->magic, DD_ELASTIC_MAGIC, 8) != 0 ||
        h->version != DD_ELASTIC_VERSION || h->token_tag != token_tag) {
        snprintf(why, why_size,
                 "its header is not a commit of this job "
                 "(magic, version or job tag)");
        return DD_ELASTIC_FILE_DAMAGED;
    }
    if (h->layout != layout || h->body != body) {
        return DD_ELASTIC_FILE_OTHER; /* of another model */
    }
    return DD_ELASTIC_FILE_VALID;
}

dd_elastic_file_t dd_elastic_file_check(const char *path, uint64_t token_tag,
                                        uint64_t layout, uint64_t body,
                                        dd_elastic_header_t *h, char *why,
                                        size_t why_size)
{
    struct stat st;
    const char *foreign;
    char buf[128];
    uint64_t sum = 0;
    dd_elastic_file_t verdict = DD_ELASTIC_FILE_DAMAGED;
    /* O_NONBLOCK: a FIFO planted at the name must not hold the open. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0 || fstat(fd, &st) != 0) {
        int err = errno;
        snprintf(why, why_size, "%s",
                 err == ELOOP ? "it is a symbolic link" : strerror(err));
        verdict = err == ELOOP ? DD_ELASTIC_FILE_REFUSED : verdict;
        goto out;
    }
    if ((foreign = dd_elastic_file_foreign(&st, buf, sizeof(buf))) != NULL) {
        snprintf(why, why_size, "%s", foreign);
        verdict = DD_ELASTIC_FILE_REFUSED;
        goto out;
    }
    if (read(fd, h, sizeof(*h)) != (ssize_t)sizeof(*h)) {
        snprintf(why, why_size, "it is shorter than a commit header");
        goto out;
    }
    verdict =
        dd_elastic_header_check(h, token_tag, layout, body, why, why_size);
    if (verdict != DD_ELASTIC_FILE_VALID) {
        goto out;
    }
    verdict = DD_ELASTIC_FILE_DAMAGED;
    if ((uint64_t)st.st_size != sizeof(*h) + body) {
        snprintf(why, why_size,
                 "it has %lld bytes, a commit of this model %llu (cut short?)",
                 (long long)st.st_size,
                 (unsigned long long)(sizeof(*h) + body));
    } else if (dd_elastic_file_sum(fd, body, &sum) != 0) {
        snprintf(why, why_size, "reading it failed: %s", strerror(errno));
    } else if (sum != h->sum) {
        snprintf(why, why_size,
                 "its body does not match its checksum (%016llx, written "
                 "%016llx): it was changed after it was written",
                 (unsigned long long)sum, (unsigned long long)h->sum);
    } else {
        verdict = DD_ELASTIC_FILE_VALID;
    }
out:
    if (fd >= 0) {
        close(fd);
    }
    return verdict;
}

void dd_elastic_state_free(struct dd_elastic *e)
{
    if (e == NULL) {
        return;
    }
    for (int k = 0; k < 2; k++) {
        if (e->slot[k] != NULL) {
            munmap(e->slot[k], e->size);
        }
    }
    for (size_t i = 0; i < e->n_states; i++) {
        free(e->states[i].name);
    }
    free(e->states);
    free(e);
}
