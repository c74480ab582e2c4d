/*
 * Store behaviour shared by the TCP and file store tests: each test program
 * defines open_store(rank, world, timeout) and includes this file. Ranks are
 * threads of this process.
 */
#ifndef DD_TESTS_STORE_CASES_H
#define DD_TESTS_STORE_CASES_H

#include "boot/store.h"
#include "core/status.h"
#include "core/time.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dd_store_t *open_store(int rank, int world, double timeout_s);
static int store_setup(void **state);
static int store_teardown(void **state);

#define WORLD 4

static void case_set_get_add_delete(void **state)
{
    dd_store_t *s = open_store(0, 1, 5.0);
    void *v;
    size_t len;
    int64_t n;
    int deleted, exists;

    assert_int_equal(dd_store_set(s, "a/b c", "hello", 5), DD_OK);
    assert_int_equal(dd_store_get(s, "a/b c", &v, &len), DD_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(v, "hello", 5);
    free(v);
    assert_int_equal(dd_store_set(s, "a/b c", "", 0), DD_OK); /* overwrite */
    assert_int_equal(dd_store_get(s, "a/b c", &v, &len), DD_OK);
    assert_int_equal(len, 0);
    free(v);

    assert_int_equal(dd_store_add(s, "ctr", 5, &n), DD_OK);
    assert_int_equal(n, 5);
    assert_int_equal(dd_store_add(s, "ctr", -7, &n), DD_OK);
    assert_int_equal(n, -2);

    assert_int_equal(dd_store_check(s, "ctr", &exists), DD_OK);
    assert_true(exists);
    assert_int_equal(dd_store_delete(s, "ctr", &deleted), DD_OK);
    assert_true(deleted);
    assert_int_equal(dd_store_delete(s, "ctr", &deleted), DD_OK);
    assert_false(deleted);
    assert_int_equal(dd_store_check(s, "ctr", &exists), DD_OK);
    assert_false(exists);
    dd_store_close(s);
}

/* The atomic add stops at the int64 range: an error naming the key, the
 * counter unchanged, and the store still usable. */
static void case_add_overflow(void **state)
{
    dd_store_t *s = open_store(0, 1, 5.0);
    int64_t n = 0;
    void *v;
    size_t len;

    assert_int_equal(dd_store_add(s, "big", INT64_MAX, &n), DD_OK);
    assert_true(n == INT64_MAX);
    assert_int_equal(dd_store_add(s, "big", 1, &n), DD_ERR_INVALID_PARAM);
    assert_non_null(strstr(dd_last_error(), "key 'big'"));
    assert_non_null(strstr(dd_last_error(), "overflows"));
    assert_int_equal(dd_store_add(s, "small", INT64_MIN, &n), DD_OK);
    assert_int_equal(dd_store_add(s, "small", -1, &n), DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_store_get(s, "big", &v, &len), DD_OK);
    assert_string_equal(v, "9223372036854775807");
    free(v);
    /* A key that holds no counter is not read as 0. */
    assert_int_equal(dd_store_set(s, "text", "12abc", 5), DD_OK);
    assert_int_equal(dd_store_add(s, "text", 1, &n), DD_ERR_INVALID_PARAM);
    assert_non_null(strstr(dd_last_error(), "does not hold a counter"));
    assert_int_equal(dd_store_add(s, "big", -7, &n), DD_OK);
    assert_true(n == INT64_MAX - 7);
    dd_store_close(s);
}

static void case_get_times_out(void **state)
{
    dd_store_t *s = open_store(0, 1, 0.3);
    void *v;
    size_t len;
    double t0 = dd_time_now();

    assert_int_equal(dd_store_get(s, "never", &v, &len), DD_ERR_TIMED_OUT);
    double waited = dd_time_now() - t0;
    assert_true(waited >= 0.25 && waited < 3.0);
    /* The store is still usable after a timeout. */
    assert_int_equal(dd_store_set(s, "k", "v", 1), DD_OK);
    dd_store_close(s);
}

typedef struct {
    int rank;
    dd_status_t status;
    int32_t gathered[WORLD];
    int64_t adds;
} rank_result_t;

static void *rank_main(void *arg)
{
    rank_result_t *r = arg;
    dd_store_t *s = open_store(r->rank, WORLD, 10.0);
    int32_t mine = 100 + r->rank;

    r->status = s ? DD_OK : DD_ERR_UNREACHABLE;
    for (int i = 0; i < 3 && r->status == DD_OK; i++) {
        r->status = dd_store_barrier(s, "t");
    }
    if (r->status == DD_OK) {
        r->status =
            dd_store_allgather(s, "ids", &mine, sizeof(mine), r->gathered);
    }
    if (r->status == DD_OK) {
        r->status = dd_store_add(s, "sum", r->rank + 1, NULL);
    }
    if (r->status == DD_OK) {
        r->status = dd_store_barrier(s, "after-add");
    }
    if (r->status == DD_OK) {
        r->status = dd_store_add(s, "sum", 0, &r->adds);
    }
    dd_store_close(s);
    return NULL;
}

static void case_ranks_barrier_allgather_add(void **state)
{
    pthread_t threads[WORLD];
    rank_result_t results[WORLD];

    for (int r = 0; r < WORLD; r++) {
        results[r] = (rank_result_t){.rank = r};
        pthread_create(&threads[r], NULL, rank_main, &results[r]);
    }
    for (int r = 0; r < WORLD; r++) {
        pthread_join(threads[r], NULL);
    }
    for (int r = 0; r < WORLD; r++) {
        assert_int_equal(results[r].status, DD_OK);
        for (int i = 0; i < WORLD; i++) {
            assert_int_equal(results[r].gathered[i], 100 + i);
        }
        assert_int_equal(results[r].adds, 1 + 2 + 3 + 4);
    }
}

static void case_barrier_names_missing_ranks(void **state)
{
    /* Ranks 0 and 2 of 4 arrive; 1 and 3 never do. */
    dd_store_t *s0 = open_store(0, WORLD, 0.5);
    dd_store_t *s2 = open_store(2, WORLD, 0.5);

    assert_int_equal(dd_store_set(s2, "dd/barrier/lonely/0/2", "1", 1), DD_OK);
    assert_int_equal(dd_store_barrier(s0, "lonely"), DD_ERR_TIMED_OUT);
    assert_non_null(strstr(dd_last_error(), "barrier 'lonely' timed out"));
    assert_non_null(strstr(dd_last_error(), "ranks 1, 3 did not arrive"));
    dd_store_close(s2);
    dd_store_close(s0);
}

static void case_allgather_size_mismatch(void **state)
{
    dd_store_t *s0 = open_store(0, 2, 2.0);
    dd_store_t *s1 = open_store(1, 2, 2.0);
    char all[16];

    /* Rank 1 contributes 3 bytes where rank 0 expects 4 (its value: the
     * length, then the bytes). */
    const char abc[] = {3, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c'};
    assert_int_equal(dd_store_set(s1, "dd/allgather/x/0/1", abc, sizeof(abc)),
                     DD_OK);
    assert_int_equal(dd_store_allgather(s0, "x", "abcd", 4, all),
                     DD_ERR_MISMATCH);
    assert_non_null(strstr(dd_last_error(), "rank 1 contributed 3 bytes"));
    dd_store_close(s1);
    dd_store_close(s0);
}

/* Rank 1's allgather number gen of 4 bytes, rank 0's value and (when
 * list is not NULL) rank 0's gathered list set by hand: the status, and
 * the last error holding text. */
static void gathered_case(dd_store_t *s1, int gen, const char *value0,
                          const char *list, size_t list_len, dd_status_t expect,
                          const char *text)
{
    char key[64], all[8];

    snprintf(key, sizeof(key), "dd/allgather/x/%d/0", gen);
    assert_int_equal(dd_store_set(s1, key, value0, strlen(value0)), DD_OK);
    snprintf(key, sizeof(key), "dd/allgather/x/%d/all", gen);
    if (list != NULL) {
        assert_int_equal(dd_store_set(s1, key, list, list_len), DD_OK);
    }
    assert_int_equal(dd_store_allgather(s1, "x", "wxyz", 4, all), expect);
    assert_non_null(strstr(dd_last_error(), text));
}

/* Rank 1 reads rank 0's gathered values: one that ends early is refused, a
 * length that is not its own names the rank, and a list that never comes
 * is named. */
static void case_allgather_gathered_checked(void **state)
{
    dd_store_t *s1 = open_store(1, 2, 2.0);
    /* Each rank's value is the length it contributed, then its bytes
     * without the zeros that end them; rank 0's gathered list holds each
     * value after its own length. Rank 0's 4 bytes, then half of rank 1's
     * length: */
    const char cut[] = {12, 0, 0, 0, 0, 0, 0, 0,   4,   0,   0,   0,  0,
                        0,  0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd', 12, 0};
    /* Rank 0 contributed 3 bytes: */
    const char odd[] = {11, 0, 0, 0,   0,   0,   0,  0, 3, 0,   0,   0,   0,
                        0,  0, 0, 'a', 'b', 'c', 12, 0, 0, 0,   0,   0,   0,
                        0,  4, 0, 0,   0,   0,   0,  0, 0, 'w', 'x', 'y', 'z'};
    /* Rank 0's value holds 5 bytes of a 4-byte contribution: */
    const char over[] = {13, 0, 0, 0, 0,   0,   0,   0,   4,   0,   0,
                         0,  0, 0, 0, 0,   'a', 'b', 'c', 'd', 'e', 12,
                         0,  0, 0, 0, 0,   0,   0,   4,   0,   0,   0,
                         0,  0, 0, 0, 'w', 'x', 'y', 'z'};

    gathered_case(s1, 0, "abcd", cut, sizeof(cut), DD_ERR_MESSAGE,
                  "end before rank 1's");
    gathered_case(s1, 1, "abc", odd, sizeof(odd), DD_ERR_MISMATCH,
                  "rank 0 contributed 3 bytes");
    gathered_case(s1, 2, "abcd", over, sizeof(over), DD_ERR_MESSAGE,
                  "holds 5 bytes, more than the 4");
    gathered_case(s1, 3, "abcd", NULL, 0, DD_ERR_TIMED_OUT,
                  "rank 0 did not publish");
    dd_store_close(s1);
}

/* Each case gets a fresh store from the program's setup and teardown. */
#define STORE_CASE(f)                                                          \
    cmocka_unit_test_setup_teardown(f, store_setup, store_teardown)
#define STORE_CASES                                                            \
    STORE_CASE(case_set_get_add_delete), STORE_CASE(case_add_overflow),        \
        STORE_CASE(case_get_times_out),                                        \
        STORE_CASE(case_ranks_barrier_allgather_add),                          \
        STORE_CASE(case_barrier_names_missing_ranks),                          \
        STORE_CASE(case_allgather_size_mismatch),                              \
        STORE_CASE(case_allgather_gathered_checked)

#endif
