/*
 * What every store offers on top of its operations: the token hash, an
 * existence check, and barrier and allgather helpers that name the missing
 * ranks on timeout.
 */
#include "boot/store.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/time.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint64_t dd_store_token_hash(const char *token)
{
    /* The token itself never goes on the wire. */
    return dd_sha256_derive("dreamddp store login", token);
}

uint64_t dd_store_token_tag(const char *token)
{
    return dd_sha256_derive("dreamddp message tag", token);
}

uint64_t dd_store_token_name(const char *token)
{
    return dd_sha256_derive("dreamddp local names", token);
}

dd_status_t dd_store_add_value(const char *key, const void *old, size_t len,
                               int64_t delta, int64_t *value_p, char *why,
                               size_t size)
{
    char text[32], *end;
    long long v = 0;

    if (old != NULL) {
        if (len == 0 || len >= sizeof(text)) {
            snprintf(why, size, "key '%s' does not hold a counter", key);
            return DD_ERR_INVALID_PARAM;
        }
        memcpy(text, old, len);
        text[len] = '\0';
        errno = 0;
        v = strtoll(text, &end, 10);
        if (errno != 0 || *end != '\0' ||
            !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9'))) {
            snprintf(why, size, "key '%s' does not hold a counter", key);
            return DD_ERR_INVALID_PARAM;
        }
    }
    int64_t sum;
    if (__builtin_add_overflow((int64_t)v, delta, &sum)) {
        snprintf(why, size,
                 "adding %lld to key '%s' (%lld) overflows a 64-bit counter",
                 (long long)delta, key, v);
        return DD_ERR_INVALID_PARAM;
    }
    *value_p = sum;
    return DD_OK;
}

dd_status_t dd_store_set(dd_store_t *s, const char *key, const void *value,
                         size_t len)
{
    dd_status_t status = s->ops->set(s, key, value, len);
    return status;
}

dd_status_t dd_store_add(dd_store_t *s, const char *key, int64_t delta,
                         int64_t *value_p)
{
    dd_status_t status = s->ops->add(s, key, delta, value_p);
    return status;
}

dd_status_t dd_store_delete(dd_store_t *s, const char *key, int *deleted_p)
{
    dd_status_t status = s->ops->del(s, key, deleted_p);
    return status;
}

dd_status_t dd_store_clock(dd_store_t *s, double *us_p)
{
    if (s->ops->clock == NULL) {
        return DD_ERR_UNSUPPORTED;
    }
    return s->ops->clock(s, us_p);
}

/*
 * The waits, in slices: the watcher's heartbeat gets the connection
 * between two, and a job aborted meanwhile ends the wait with its reason
 * rather than after the whole timeout.
 */
dd_status_t dd_store_get_within(dd_store_t *s, const char *key,
                                double timeout_s, void **value_p, size_t *len_p)
{
    double deadline = dd_time_now() + timeout_s;
    dd_status_t status;

    for (;;) {
        double left = deadline - dd_time_now();
        double slice = left < DD_STORE_SLICE_S ? left : DD_STORE_SLICE_S;
        status = s->ops->get(s, key, slice > 0 ? slice : 0, value_p, len_p);
        if (status != DD_ERR_TIMED_OUT || left <= DD_STORE_SLICE_S) {
            break;
        }
        if (dd_abort_raised(s->abort)) {
            return dd_abort_error(s->abort, DD_SUBSYS_BOOT);
        }
        /* A mutex is not fair: without a pause, this thread would take
         * the connection again before the watcher could. */
        usleep(1000);
    }
    return status; /* a timeout: callers name what they waited for */
}

dd_status_t dd_store_get(dd_store_t *s, const char *key, void **value_p,
                         size_t *len_p)
{
    return dd_store_get_within(s, key, s->timeout_s, value_p, len_p);
}

dd_status_t dd_store_wait(dd_store_t *s, const char *const *keys, int n,
                          int *present)
{
    double deadline = dd_time_now() + s->timeout_s;
    dd_status_t status;

    for (;;) {
        double left = deadline - dd_time_now();
        double slice = left < DD_STORE_SLICE_S ? left : DD_STORE_SLICE_S;
        status = s->ops->wait(s, keys, n, slice > 0 ? slice : 0, present);
        if (status != DD_ERR_TIMED_OUT || left <= DD_STORE_SLICE_S) {
            return status;
        }
        if (dd_abort_raised(s->abort)) {
            return dd_abort_error(s->abort, DD_SUBSYS_BOOT);
        }
        /* A mutex is not fair: without a pause, this thread would take
         * the connection again before the watcher could. */
        usleep(1000);
    }
}

dd_status_t dd_store_check(dd_store_t *s, const char *key, int *exists_p)
{
    int present = 0;
    dd_status_t status = s->ops->wait(s, &key, 1, 0.0, &present);

    if (status != DD_OK && status != DD_ERR_TIMED_OUT) {
        return status;
    }
    *exists_p = present;
    return DD_OK;
}

dd_status_t dd_store_rank_lost(dd_store_t *s, int rank, int *lost_p)
{
    char key[64];
    int gone = 0, down = 0;

    snprintf(key, sizeof(key), DD_STORE_GONE_KEY "%d", rank);
    dd_status_t status = dd_store_check(s, key, &gone);
    if (status == DD_OK && !gone) {
        snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d", rank);
        status = dd_store_check(s, key, &down);
    }
    if (status == DD_OK) {
        *lost_p = gone || down;
    }
    return status;
}

void dd_store_close(dd_store_t *s)
{
    if (s != NULL) {
        s->ops->close(s);
    }
}

/* Makes "dd/<kind>/<name>/<gen>/<rank>" keys for every rank. */
static char **dd_store_rank_keys(dd_store_t *s, const char *kind,
                                 const char *name, unsigned gen)
{
    char **keys = calloc((size_t)s->world_size, sizeof(char *));
    for (int r = 0; keys != NULL && r < s->world_size; r++) {
        size_t size = strlen(name) + 64;
        keys[r] = malloc(size);
        if (keys[r] == NULL) {
            for (int i = 0; i < r; i++) {
                free(keys[i]);
            }
            free(keys);
            keys = NULL;
            break;
        }
        snprintf(keys[r], size, "dd/%s/%s/%u/%d", kind, name, gen, r);
    }
    if (keys == NULL) {
        dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                 "store: no memory for the keys of %s %s (%d ranks)", kind,
                 name, s->world_size);
    }
    return keys;
}

static void dd_store_free_keys(dd_store_t *s, char **keys)
{
    for (int r = 0; keys != NULL && r < s->world_size; r++) {
        free(keys[r]);
    }
    free(keys);
}

/* Reports a timed-out collective wait, naming the ranks that are missing. */
static dd_status_t dd_store_missing(dd_store_t *s, const char *what,
                                    const char *name, const int *present)
{
    char ranks[512];
    size_t o = 0;
    int n_missing = 0;

    ranks[0] = '\0';
    for (int r = 0; r < s->world_size; r++) {
        if (present[r]) {
            continue;
        }
        n_missing++;
        if (o < sizeof(ranks) - 16) {
            int n = snprintf(ranks + o, sizeof(ranks) - o, "%s%d",
                             n_missing > 1 ? ", " : "", r);
            o += n > 0 ? (size_t)n : 0;
        } else if (o < sizeof(ranks) - 4) {
            o += (size_t)snprintf(ranks + o, sizeof(ranks) - o, "...");
        }
    }
    return dd_error(
        DD_ERR_TIMED_OUT, DD_SUBSYS_BOOT,
        "%s '%s' timed out after %.0f s (DREAMDDP_TIMEOUT_S): rank%s %s "
        "did not arrive (%d of %d missing)",
        what, name, s->timeout_s, n_missing > 1 ? "s" : "", ranks, n_missing,
        s->world_size);
}

/* Publishes this rank's key and waits for every rank's but those of
 * skip (NULL: none). */
static dd_status_t dd_store_gather_keys(dd_store_t *s, const char *what,
                                        const char *name, char **keys,
                                        const void *mine, size_t len,
                                        const int *skip)
{
    int *present = calloc((size_t)s->world_size, sizeof(int));
    dd_status_t status;

    if (present == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                        "store: no memory for %s %s (%d ranks)", what, name,
                        s->world_size);
    }
    status = dd_store_set(s, keys[s->rank], mine, len);
    const char **wait = calloc((size_t)s->world_size, sizeof(char *));
    int *got = calloc((size_t)s->world_size, sizeof(int)), n = 0;
    for (int r = 0; wait != NULL && got != NULL && r < s->world_size; r++) {
        if (skip != NULL && skip[r]) {
            present[r] = 1;
        } else {
            wait[n++] = keys[r];
        }
    }
    if (status == DD_OK && (wait == NULL || got == NULL)) {
        status = dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                          "store: no memory for %s %s", what, name);
    }
    if (status == DD_OK) {
        status = dd_store_wait(s, wait, n, got);
        for (int r = 0, i = 0; r < s->world_size; r++) {
            if (skip == NULL || !skip[r]) {
                present[r] = got[i++];
            }
        }
        if (status == DD_ERR_TIMED_OUT) {
            status = dd_store_missing(s, what, name, present);
        }
    }
    free(wait);
    free(got);
    free(present);
    return status;
}

/* The ranks declared lost, which a barrier does not wait for: expendable
 * aggregators (DREAMDDP_AGG_LOSS=survive; src/agg/agg.h's keys). NULL when
 * there is none. */
static int *dd_store_lost_ranks(dd_store_t *s)
{
    int64_t downs = 0;
    int exists = 0;
    char key[64];

    if (dd_store_check(s, DD_STORE_LOSTS_KEY, &exists) != DD_OK || !exists ||
        dd_store_add(s, DD_STORE_LOSTS_KEY, 0, &downs) != DD_OK || downs == 0) {
        return NULL;
    }
    int *lost = calloc((size_t)s->world_size, sizeof(int));
    for (int r = 0; lost != NULL && r < s->world_size; r++) {
        snprintf(key, sizeof(key), DD_STORE_LOST_KEY "%d", r);
        if (r != s->rank && dd_store_check(s, key, &exists) == DD_OK) {
            lost[r] = exists;
        }
    }
    return lost;
}

/* Deletes this rank's key of the previous barrier or allgather: every rank
 * has finished that one, since every rank has entered this one. */
static void dd_store_forget(dd_store_t *s, const char *current_key)
{
    if (s->last_key[0] != '\0') {
        dd_store_delete(s, s->last_key, NULL);
    }
    snprintf(s->last_key, sizeof(s->last_key), "%s", current_key);
}

dd_status_t dd_store_barrier(dd_store_t *s, const char *name)
{
    char **keys = dd_store_rank_keys(s, "barrier", name, s->barrier_gen++);
    dd_status_t status;

    if (keys == NULL) {
        return DD_ERR_NO_MEMORY; /* dd_store_rank_keys reported it */
    }
    int *lost = dd_store_lost_ranks(s);
    status = dd_store_gather_keys(s, "barrier", name, keys, "1", 1, lost);
    free(lost);
    if (status == DD_OK) {
        dd_store_forget(s, keys[s->rank]);
    }
    dd_store_free_keys(s, keys);
    return status;
}

/*
 * Rank 0's part of an allgather: every rank's value, which the gather has
 * seen set, read and laid end to end as its length (8 bytes,
 * little-endian) and its bytes under all_key, so that each other rank
 * makes one request instead of one per rank (128 ranks: 16,384 requests
 * on rank 0's store an allgather, four or five in dd_init). The last
 * one's is deleted: every rank has read it, since every rank has entered
 * this one.
 */
static dd_status_t dd_store_allgather_publish(dd_store_t *s, char **keys,
                                              const char *all_key)
{
    uint8_t *blob = NULL;
    size_t used = 0;
    dd_status_t status = DD_OK;

    for (int r = 0; status == DD_OK && r < s->world_size; r++) {
        void *value;
        size_t vlen;
        status = dd_store_get(s, keys[r], &value, &vlen);
        if (status != DD_OK) {
            break;
        }
        uint8_t *grown = realloc(blob, used + 8 + vlen);
        if (grown == NULL) {
            status = dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                              "store: no memory to gather %s", all_key);
        } else {
            blob = grown;
            for (int i = 0; i < 8; i++) {
                blob[used + (size_t)i] = (uint8_t)((uint64_t)vlen >> (8 * i));
            }
            memcpy(blob + used + 8, value, vlen);
            used += 8 + vlen;
        }
        free(value);
    }
    if (status == DD_OK) {
        status = dd_store_set(s, all_key, blob, used);
    }
    free(blob);
    if (status == DD_OK) {
        if (s->last_all[0] != '\0') {
            dd_store_delete(s, s->last_all, NULL);
        }
        snprintf(s->last_all, sizeof(s->last_all), "%s", all_key);
    }
    return status;
}

/* Each rank's value of len bytes out of rank 0's gathered blob into all. */
static uint64_t dd_store_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++) {
        v |= (uint64_t)p[i] << (8 * i);
    }
    return v;
}

static void dd_store_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/*
 * A rank's value in an allgather: the length it contributed (8 bytes,
 * little-endian), then its bytes without the zeros that end them, which
 * the reader puts back (the records dd_init gathers are fixed-size
 * buffers, mostly zeros: an interface list is 4 KB, 128 of them were
 * 512 KB for each of 128 ranks to read).
 */
static uint8_t *dd_store_allgather_value(const void *mine, size_t len,
                                         size_t *vlen_p)
{
    size_t used = len;

    while (used > 0 && ((const uint8_t *)mine)[used - 1] == 0) {
        used--;
    }
    uint8_t *v = malloc(8 + used);
    if (v == NULL) {
        dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BOOT,
                 "store: no memory for an allgather's value (%zu bytes)", len);
        return NULL;
    }
    dd_store_put_le64(v, len);
    memcpy(v + 8, mine, used);
    *vlen_p = 8 + used;
    return v;
}

/* Rank 0's gathered values, checked, into all (len bytes a rank). */
static dd_status_t dd_store_allgather_unpack(const dd_store_t *s,
                                             const char *name,
                                             const uint8_t *blob, size_t blen,
                                             size_t len, void *all)
{
    size_t o = 0;

    for (int r = 0; r < s->world_size; r++) {
        if (blen - o < 8) {
            return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_BOOT,
                            "allgather '%s': rank 0's gathered values end "
                            "before rank %d's",
                            name, r);
        }
        uint64_t vlen = dd_store_le64(blob + o);
        o += 8;
        if (vlen > blen - o || vlen < 8) {
            return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_BOOT,
                            "allgather '%s': rank 0's gathered values end "
                            "inside rank %d's",
                            name, r);
        }
        uint64_t declared = dd_store_le64(blob + o);
        if (declared != len) {
            return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_BOOT,
                            "allgather '%s': rank %d contributed %llu bytes "
                            "but rank %d expects %zu",
                            name, r, (unsigned long long)declared, s->rank,
                            len);
        }
        if (vlen - 8 > len) {
            return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_BOOT,
                            "allgather '%s': rank %d's value holds %llu "
                            "bytes, more than the %zu it contributed",
                            name, r, (unsigned long long)(vlen - 8), len);
        }
        char *dst = (char *)all + (size_t)r * len;
        memcpy(dst, blob + o + 8, (size_t)vlen - 8);
        memset(dst + (vlen - 8), 0, len - (size_t)(vlen - 8));
        o += (size_t)vlen;
    }
    return DD_OK;
}

dd_status_t dd_store_allgather(dd_store_t *s, const char *name,
                               const void *mine, size_t len, void *all)
{
    unsigned gen = s->barrier_gen++;
    char **keys = dd_store_rank_keys(s, "allgather", name, gen);
    char all_key[512];
    dd_status_t status;

    if (keys == NULL) {
        return DD_ERR_NO_MEMORY; /* dd_store_rank_keys reported it */
    }
    snprintf(all_key, sizeof(all_key), "dd/allgather/%s/%u/all", name, gen);
    size_t vlen = 0;
    uint8_t *value = dd_store_allgather_value(mine, len, &vlen);
    status = value == NULL ? DD_ERR_NO_MEMORY
                           : dd_store_gather_keys(s, "allgather", name, keys,
                                                  value, vlen, NULL);
    free(value);
    if (status == DD_OK && s->rank == 0) {
        status = dd_store_allgather_publish(s, keys, all_key);
    }
    if (status == DD_OK) {
        void *blob;
        size_t blen;
        status = dd_store_get(s, all_key, &blob, &blen);
        if (status == DD_ERR_TIMED_OUT) {
            status = dd_error(DD_ERR_TIMED_OUT, DD_SUBSYS_BOOT,
                              "allgather '%s': rank 0 did not publish every "
                              "rank's values within %.0f s",
                              name, s->timeout_s);
        } else if (status == DD_OK) {
            status = dd_store_allgather_unpack(s, name, blob, blen, len, all);
            free(blob);
        }
    }
    if (status == DD_OK) {
        dd_store_forget(s, keys[s->rank]);
    }
    dd_store_free_keys(s, keys);
    return status;
}
