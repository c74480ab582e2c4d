/*
 * Tests of the profile reader (tools/profile_read.c) on the DreamDDP
 * artifact's published profiles and on small profiles written here, and of
 * the planner's figures on those profiles against schedsim.py's.
 *
 * The published profiles are found in $DDTEST_PROFILES, else in
 * DD_TOP_SRCDIR/tests/fixtures/profiles, where the repository carries them:
 * a case whose profile is absent fails, naming the path. Built without
 * json-c, the reader cannot read profiles and the whole program is skipped.
 */
#if !defined(_GNU_SOURCE) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "profile_read.h"
#include "sched/plan/plan.h"

#ifdef HAVE_JSONC
#include <json.h>
#endif

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef DD_TOP_SRCDIR
#define DD_TOP_SRCDIR "."
#endif

#ifdef HAVE_JSONC

/*
 * What `python3 tests/fixtures/schedsim.py PROFILE_DIR` prints for the
 * artifact's profiles (seconds per iteration, H = 10).
 */
typedef struct {
    const char *name;
    double flsgd;
    double artifact_dreamddp;
    double plsgd_uniform;
} anchor_t;

static const anchor_t anchors[] = {
    {"gpt2-16-1gbit", 0.6530675281786207, 0.5989935616368567,
     0.6216777922615779},
    {"gpt2-16-5gbit", 0.18507246020897544, 0.1457292914027296,
     0.1572200321214335},
    {"gpt2-8-10gbit", 0.09445955616304244, 0.07712036669939414,
     0.07810367877455962},
};

static int same(double a, double b)
{
    return fabs(a - b) <= 1e-12 * fabs(b);
}

/* The path of a published profile; without it the case fails, naming the
 * path. */
static const char *published(const char *name, char *buf, size_t size)
{
    const char *base = getenv("DDTEST_PROFILES");
    struct stat st;

    snprintf(buf, size, "%s/%s",
             base ? base : DD_TOP_SRCDIR "/tests/fixtures/profiles", name);
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fail_msg("profile %s not found (the repository carries them in "
                 "tests/fixtures/profiles; DDTEST_PROFILES names another "
                 "folder)",
                 buf);
    }
    return buf;
}

static void test_read_paper_profile(void **state)
{
    (void)state;
    char buf[4096];
    dd_profile_t *p;
    dd_plan_input_t input;

    published("gpt2-16-1gbit", buf, sizeof(buf));
    assert_int_equal(dd_profile_read(buf, &p), DD_OK);
    assert_int_equal(p->num_layers, 125);
    assert_string_equal(p->names[0], "transformer.wte");
    assert_string_equal(p->names[3], "transformer.h.0.ln_1");
    assert_string_equal(p->names[124], "lm_head");
    assert_true(p->bp_s[0] == 7.645343912058863e-05);
    assert_true(p->bp_s[3] == 7.7163762059705e-05);
    assert_true(p->comm_s[0] == 1.2559008542881456);
    assert_null(p->num_params);
    assert_int_equal(dd_profile_plan_input(p, &input), DD_OK);
    assert_int_equal(input.num_layers, 125);
    assert_ptr_equal(input.comm_s, p->comm_s);
    dd_profile_free(p);
}

static void test_read_blocks_profile(void **state)
{
    (void)state;
    char buf[4096];
    dd_profile_t *p;
    dd_plan_input_t input;

    published("gpt2-blocks", buf, sizeof(buf));
    assert_int_equal(dd_profile_read(buf, &p), DD_OK);
    assert_int_equal(p->num_layers, 15);
    assert_string_equal(p->names[0], "wte");
    assert_string_equal(p->names[14], "ln_f");
    assert_true(p->bp_s[2] == 0.012);
    assert_null(p->comm_s);
    assert_true(p->num_params[0] == 38597376);
    assert_true(p->num_params[14] == 1536);
    /* No sync times until the alpha-beta model gives them. */
    assert_int_equal(dd_profile_plan_input(p, &input), DD_ERR_STATE);
    assert_non_null(strstr(dd_last_error(), "no sync times"));
    assert_int_equal(dd_profile_comm_from_sizes(p, 1e-3, 0.0),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_profile_comm_from_sizes(p, 1e-3, 1e8), DD_OK);
    assert_true(p->comm_s[0] == 1e-3 + 4.0 * 38597376 / 1e8);
    assert_int_equal(dd_profile_plan_input(p, &input), DD_OK);
    dd_profile_free(p);
}

/* The artifact's schedule file as a plan: layer name -> slot (or list). */
static dd_plan_t *artifact_plan(const char *dir, const dd_profile_t *p)
{
    char path[4096 + 64];
    json_object *H, *schedule, *slot;
    dd_plan_t *plan;

    snprintf(path, sizeof(path), "%s/dreamddp_scheduling.json", dir);
    json_object *root = json_object_from_file(path);
    assert_non_null(root);
    assert_true(json_object_object_get_ex(root, "H", &H));
    assert_true(json_object_object_get_ex(root, "schedule", &schedule));
    assert_int_equal(json_object_object_length(schedule), p->num_layers);
    assert_int_equal(
        dd_plan_alloc(p->num_layers, (unsigned)json_object_get_int(H), &plan),
        DD_OK);
    for (size_t i = 0; i < p->num_layers; i++) {
        assert_true(json_object_object_get_ex(schedule, p->names[i], &slot));
        assert_true(json_object_is_type(slot, json_type_int));
        assert_int_equal(
            dd_plan_set_slot(plan, i, (unsigned)json_object_get_int(slot)),
            DD_OK);
    }
    json_object_put(root);
    return plan;
}

/* Our cost model gives schedsim.py's figures for the artifact's schedule
 * and the baselines, and the planner does at least as well as the
 * artifact. */
static void check_anchor(const anchor_t *a)
{
    char dir[4096];
    dd_profile_t *p;
    dd_plan_input_t input;
    dd_plan_t *art, *plsgd, *mine, *dp;
    dd_plan_cost_t cost, mine_cost, dp_cost;

    published(a->name, dir, sizeof(dir));
    assert_int_equal(dd_profile_read(dir, &p), DD_OK);
    assert_int_equal(dd_profile_plan_input(p, &input), DD_OK);
    art = artifact_plan(dir, p);
    assert_int_equal(art->window, 10);
    assert_int_equal(dd_plan_cost(&input, art, &cost), DD_OK);
    assert_true(same(cost.iter_s, a->artifact_dreamddp));
    assert_int_equal(dd_plan_flsgd_cost(&input, 10, &cost), DD_OK);
    assert_true(same(cost.iter_s, a->flsgd));
    assert_int_equal(dd_plan_plsgd(p->num_layers, 10, &plsgd), DD_OK);
    assert_int_equal(dd_plan_cost(&input, plsgd, &cost), DD_OK);
    assert_true(same(cost.iter_s, a->plsgd_uniform));

    assert_int_equal(dd_plan_contiguous(&input, 10, &dp), DD_OK);
    assert_int_equal(dd_plan_dreamddp(&input, 10, NULL, &mine), DD_OK);
    assert_int_equal(dd_plan_cost(&input, dp, &dp_cost), DD_OK);
    assert_int_equal(dd_plan_cost(&input, mine, &mine_cost), DD_OK);
    print_message("%s: artifact %.9f, contiguous DP %.9f, planner %.9f "
                  "s/iter (%zu extra syncs)\n",
                  a->name, a->artifact_dreamddp, dp_cost.iter_s,
                  mine_cost.iter_s, dd_plan_num_extra(mine));
    /* The artifact's schedule is contiguous, so the DP cannot lose to it. */
    assert_true(dp_cost.iter_s <= a->artifact_dreamddp * (1 + 1e-12));
    assert_true(mine_cost.iter_s <= dp_cost.iter_s * (1 + 1e-12));
    dd_plan_free(dp);
    dd_plan_free(mine);
    dd_plan_free(plsgd);
    dd_plan_free(art);
    dd_profile_free(p);
}

static void test_anchor_1gbit(void **state)
{
    (void)state;
    check_anchor(&anchors[0]);
}

static void test_anchor_5gbit(void **state)
{
    (void)state;
    check_anchor(&anchors[1]);
}

static void test_anchor_10gbit(void **state)
{
    (void)state;
    check_anchor(&anchors[2]);
}

/* A scratch profile directory per test. */
static int make_dir(void **state)
{
    char *dir = strdup("/tmp/dd_test_profile_XXXXXX");
    if (dir == NULL || mkdtemp(dir) == NULL) {
        free(dir);
        return -1;
    }
    *state = dir;
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int remove_dir(void **state)
{
    int rc = nftw(*state, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(*state);
    return rc;
}

static void put(const char *dir, const char *name, const char *text)
{
    char path[4096 + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void put_dir(const char *dir, const char *name)
{
    char path[4096 + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_int_equal(mkdir(path, 0700), 0);
}

/* Reads dir, which must fail with status and a message holding why. */
static void read_bad(const char *dir, dd_status_t status, const char *why)
{
    dd_profile_t *p = (dd_profile_t *)&p; /* must stay untouched */

    assert_int_equal(dd_profile_read(dir, &p), status);
    assert_ptr_equal(p, (dd_profile_t *)&p);
    if (strstr(dd_last_error(), why) == NULL) {
        print_error("message \"%s\" lacks \"%s\"\n", dd_last_error(), why);
    }
    assert_non_null(strstr(dd_last_error(), why));
}

/* The artifact's other layout, NaN and Infinity as 0, and sizes. */
static void test_subdirs_nan_and_sizes(void **state)
{
    const char *dir = *state;
    dd_profile_t *p;

    put_dir(dir, "bp");
    put_dir(dir, "comm");
    put(dir, "bp/bp_x.json", "{\"a\": 1.5, \"b\": NaN}");
    put(dir, "comm/comm_x.json", "{\"a\": Infinity, \"b\": 0.25}");
    put(dir, "sizes_x.json", "{\"a\": 10, \"b\": 0}");
    put(dir, "bp_decoy.json", "this is not read: bp/ takes precedence");
    assert_int_equal(dd_profile_read(dir, &p), DD_OK);
    assert_int_equal(p->num_layers, 2);
    assert_string_equal(p->names[1], "b");
    assert_true(p->bp_s[0] == 1.5 && p->bp_s[1] == 0.0);
    assert_true(p->comm_s[0] == 0.0 && p->comm_s[1] == 0.25);
    assert_true(p->num_params[0] == 10 && p->num_params[1] == 0);
    dd_profile_free(p);
}

static void test_missing_files(void **state)
{
    const char *dir = *state;
    char missing[4096];

    read_bad(dir, DD_ERR_IO, "has no bp_*.json");
    put(dir, "bp_x.json", "{\"a\": 1}");
    read_bad(dir, DD_ERR_IO, "has no comm_*.json");
    snprintf(missing, sizeof(missing), "%s/nowhere", dir);
    read_bad(missing, DD_ERR_IO, "cannot open profile directory");
    /* Sizes can stand in for comm. */
    put(dir, "sizes_x.json", "{\"a\": 7}");
    dd_profile_t *p;
    assert_int_equal(dd_profile_read(dir, &p), DD_OK);
    assert_null(p->comm_s);
    dd_profile_free(p);
}

static void test_bad_json_position(void **state)
{
    const char *dir = *state;

    put(dir, "bp_x.json", "{\n \"a\": 1,\n \"b\": }");
    put(dir, "comm_x.json", "{\"a\": 1, \"b\": 2}");
    read_bad(dir, DD_ERR_MESSAGE, "bp_x.json:3:7: expected a value, found '}'");
    put(dir, "bp_x.json", "{\"a\": 1,\n \"b\": 2} x");
    read_bad(dir, DD_ERR_MESSAGE,
             "bp_x.json:2:10: expected the end of the text, found 'x'");
    put(dir, "bp_x.json", "{\"a\": 1, }");
    read_bad(dir, DD_ERR_MESSAGE, "bp_x.json:1:10: expected a key, found '}'");
    put(dir, "bp_x.json", "{\"a\": 1,");
    read_bad(dir, DD_ERR_MESSAGE, "bp_x.json:1:9: unexpected end of the text");
    /* Python writes NaN, never nan: the lowercase word is not JSON. */
    put(dir, "bp_x.json", "{\"a\": nan, \"b\": 2}");
    read_bad(dir, DD_ERR_MESSAGE, "bp_x.json:1:8: ");
}

static void test_layers_differ(void **state)
{
    const char *dir = *state;

    put(dir, "bp_x.json", "{\"a\": 1, \"b\": 2, \"c\": 3}");
    put(dir, "comm_x.json", "{\"a\": 1, \"x\": 2, \"c\": 3}");
    read_bad(dir, DD_ERR_MESSAGE, "differ at position 1: layer b in");
    read_bad(dir, DD_ERR_MESSAGE, "layer x in");
    put(dir, "comm_x.json", "{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4}");
    read_bad(dir, DD_ERR_MESSAGE, "layer d of");
    read_bad(dir, DD_ERR_MESSAGE, "is missing from");
    /* Fewer layers than the bp file: frozen modules left out, but only
     * from the bp file's own layers, in its order. */
    put(dir, "comm_x.json", "{\"a\": 1, \"x\": 2}");
    read_bad(dir, DD_ERR_MESSAGE, "layer x of");
    read_bad(dir, DD_ERR_MESSAGE, "after layer a: the comm file may leave");
    put(dir, "comm_x.json", "{\"c\": 1, \"a\": 2}");
    read_bad(dir, DD_ERR_MESSAGE, "layer a of");
    /* Same names, another order: forward order would be ambiguous. */
    put(dir, "comm_x.json", "{\"a\": 1, \"c\": 3, \"b\": 2}");
    read_bad(dir, DD_ERR_MESSAGE, "differ at position 1: layer b in");
    put(dir, "comm_x.json", "{\"a\": 1, \"b\": 2, \"c\": 3}");
    put(dir, "sizes_x.json", "{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4}");
    read_bad(dir, DD_ERR_MESSAGE, "layer d of");
}

/* Modules with a backward time and no comm time are frozen: they are no
 * layer, and their backward time goes to the layer whose backward follows
 * theirs; sizes may list either set. */
static void test_frozen_modules(void **state)
{
    const char *dir = *state;
    dd_profile_t *p;

    put(dir, "bp_x.json",
        "{\"emb\": 8, \"q.0\": 1, \"f.0\": 2, \"q.1\": 3, \"f.1\": 4, "
        "\"head\": 16}");
    put(dir, "comm_x.json", "{\"q.0\": 0.5, \"q.1\": NaN}");
    assert_int_equal(dd_profile_read(dir, &p), DD_OK);
    assert_int_equal(p->num_layers, 2);
    assert_string_equal(p->names[0], "q.0");
    assert_string_equal(p->names[1], "q.1");
    assert_true(p->bp_s[0] == 1 && p->bp_s[1] == 3);
    assert_true(p->comm_s[0] == 0.5 && p->comm_s[1] == 0);
    assert_int_equal(p->num_frozen, 4);
    assert_true(p->frozen_bp_s == 8 + 2 + 4 + 16);
    assert_true(p->frozen_before_s[0] == 2);      /* f.0 */
    assert_true(p->frozen_before_s[1] == 4 + 16); /* f.1 and head */
    assert_true(p->frozen_after_s == 8);          /* emb */
    assert_null(p->num_params);
    dd_profile_free(p);

    put(dir, "sizes_x.json", "{\"q.0\": 10, \"q.1\": 30}");
    assert_int_equal(dd_profile_read(dir, &p), DD_OK);
    assert_true(p->num_params[0] == 10 && p->num_params[1] == 30);
    dd_profile_free(p);
    put(dir, "sizes_x.json",
        "{\"emb\": 1, \"q.0\": 10, \"f.0\": 2, \"q.1\": 30, \"f.1\": 4, "
        "\"head\": 5}");
    assert_int_equal(dd_profile_read(dir, &p), DD_OK);
    assert_true(p->num_params[0] == 10 && p->num_params[1] == 30);
    dd_profile_free(p);
    put(dir, "sizes_x.json", "{\"q.0\": 10, \"f.0\": 30}");
    read_bad(dir, DD_ERR_MESSAGE, "layer q.1 in");
    put(dir, "sizes_x.json", "{\"q.0\": 10, \"q.1\": 30}");
    put(dir, "bp_x.json", "{\"q.0\": 1, \"f.0\": -2, \"q.1\": 3}");
    read_bad(dir, DD_ERR_MESSAGE, "layer f.0 has negative value");
}

static void test_bad_values(void **state)
{
    const char *dir = *state;

    put(dir, "bp_x.json", "{\"a\": 1, \"b\": 2}");
    put(dir, "comm_x.json", "{\"a\": 1, \"b\": -0.5}");
    read_bad(dir, DD_ERR_MESSAGE, "layer b has negative value -0.5");
    put(dir, "comm_x.json", "{\"a\": 1, \"b\": -Infinity}");
    read_bad(dir, DD_ERR_MESSAGE, "layer b has negative value -inf");
    put(dir, "comm_x.json", "{\"a\": \"1\", \"b\": 2}");
    read_bad(dir, DD_ERR_MESSAGE, "layer a: expected a number, found string");
    put(dir, "comm_x.json", "{\"a\": 1, \"b\": 2}");
    put(dir, "sizes_x.json", "{\"a\": 1.5, \"b\": 2}");
    read_bad(dir, DD_ERR_MESSAGE, "parameter count 1.5 is not an integer");
    put(dir, "sizes_x.json", "[1, 2]");
    read_bad(dir, DD_ERR_MESSAGE,
             "expected an object from layer name to "
             "number, found array");
    put(dir, "sizes_x.json", "{}");
    read_bad(dir, DD_ERR_MESSAGE, "has no layers");
}

static void test_ambiguous(void **state)
{
    const char *dir = *state;

    put(dir, "bp_x.json", "{\"a\": 1}");
    put(dir, "bp_y.json", "{\"a\": 1}");
    put(dir, "comm_x.json", "{\"a\": 1}");
    read_bad(dir, DD_ERR_INVALID_PARAM, "more than one bp_*.json");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_paper_profile),
        cmocka_unit_test(test_read_blocks_profile),
        cmocka_unit_test(test_anchor_1gbit),
        cmocka_unit_test(test_anchor_5gbit),
        cmocka_unit_test(test_anchor_10gbit),
        cmocka_unit_test_setup_teardown(test_subdirs_nan_and_sizes, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(test_missing_files, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(test_bad_json_position, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(test_layers_differ, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(test_frozen_modules, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(test_bad_values, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_ambiguous, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* !HAVE_JSONC */

int main(void)
{
    printf("SKIP: built without json-c, the profile reader cannot read "
           "profiles (install libjson-c-dev, then run configure again)\n");
    return 77;
}

#endif /* HAVE_JSONC */
