/* dd_init and dd_finalize in one process: a single rank, bad DREAMDDP_* values,
 * roles, the file store, the printed configuration, the backend
 * libraries' variables, which dd_init leaves alone, the field_mask of the
 * statistics structs on a single-rank step, and dd_layer_ready from several
 * threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dreamddp.h>
#include <dreamddp/introspect.h>

#include "api/watch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const touched[] = {"DREAMDDP_TIMEOUT_S",
                                      "DREAMDDP_STORE",
                                      "DREAMDDP_ROLE",
                                      "DREAMDDP_LOG_FILE",
                                      "DREAMDDP_RANK",
                                      "DREAMDDP_WORLD_SIZE",
                                      "DREAMDDP_LOG_LEVEL",
                                      "DREAMDDP_NUM_AGGREGATORS",
                                      "DREAMDDP_LAYER_SPLIT",
                                      "RANK",
                                      "WORLD_SIZE"};

static int clean_env(void **state)
{
    for (size_t i = 0; i < sizeof(touched) / sizeof(touched[0]); i++) {
        unsetenv(touched[i]);
    }
    setenv("DREAMDDP_LOG_FILE", "/dev/null", 1);
    return 0;
}

static void test_single_rank(void **state)
{
    dd_context_h ctx = NULL;
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_int_equal(dd_rank(ctx), 0);
    assert_int_equal(dd_world_size(ctx), 1);
    assert_int_equal(dd_local_rank(ctx), 0);
    assert_int_equal(dd_local_size(ctx), 1);
    assert_int_equal(dd_role(ctx), DD_ROLE_WORKER);
    assert_int_equal(dd_num_workers(ctx), 1);
    assert_int_equal(dd_barrier(ctx), DD_OK);
    assert_int_equal(dd_finalize(ctx), DD_OK);
}

static volatile sig_atomic_t app_sigpipes;

static void app_handler(int sig)
{
    (void)sig;
    app_sigpipes++;
}

/* A write to a peer that is gone, as a backend's library makes it. */
static ssize_t write_to_closed_peer(void)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    ssize_t n = write(sv[0], "x", 1);
    int err = errno;
    close(sv[0]);
    errno = err;
    return n;
}

/* After dd_init, a write to a lost peer is EPIPE, not death by SIGPIPE;
 * an application's own handler is left in place. */
static void test_sigpipe_never_kills(void **state)
{
    dd_context_h ctx = NULL;
    signal(SIGPIPE, SIG_DFL);
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_int_equal(write_to_closed_peer(), -1);
    assert_int_equal(errno, EPIPE);
    assert_int_equal(dd_finalize(ctx), DD_OK);

    signal(SIGPIPE, app_handler);
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_int_equal(write_to_closed_peer(), -1);
    assert_int_equal(app_sigpipes, 1);
    assert_int_equal(dd_finalize(ctx), DD_OK);
    signal(SIGPIPE, SIG_DFL);
}

static void test_bad_value_fails_init(void **state)
{
    dd_context_h ctx = NULL;
    setenv("DREAMDDP_TIMEOUT_S", "soon", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_ERR_INVALID_CONFIG);
    assert_null(ctx);
    assert_string_equal(dd_last_error(),
                        "invalid value DREAMDDP_TIMEOUT_S='soon': expected a "
                        "duration such as 30s, 500ms, 2m, up to 86400 s");
    unsetenv("DREAMDDP_TIMEOUT_S");

    setenv("DREAMDDP_LOG_LEVEL", "loud", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "DREAMDDP_LOG_LEVEL='loud'"));
    assert_non_null(strstr(dd_last_error(), "error, warn, info, debug, trace"));
    unsetenv("DREAMDDP_LOG_LEVEL");

    setenv("DREAMDDP_STORE", "redis://x", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "DREAMDDP_STORE='redis://x'"));
    unsetenv("DREAMDDP_STORE");
}

static void test_multi_rank_needs_master(void **state)
{
    dd_context_h ctx = NULL;
    setenv("DREAMDDP_RANK", "1", 1);
    setenv("DREAMDDP_WORLD_SIZE", "2", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "set DREAMDDP_MASTER_ADDR"));
}

static void test_role_override(void **state)
{
    dd_context_h ctx = NULL;
    dd_init_params_t params = {.field_mask = DD_INIT_FIELD_ROLE,
                               .role = DD_ROLE_AGGREGATOR};
    /* A single rank that is an aggregator leaves no worker. */
    assert_int_equal(dd_init(&params, &ctx), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), "at least one worker"));
    params.role = (dd_role_t)7;
    assert_int_equal(dd_init(&params, &ctx), DD_ERR_INVALID_PARAM);
}

static void test_file_store(void **state)
{
    char dir[] = "/tmp/dd-test-init-XXXXXX", store[64], cmd[96];
    dd_context_h ctx = NULL;

    assert_non_null(mkdtemp(dir));
    snprintf(store, sizeof(store), "file:%s", dir);
    setenv("DREAMDDP_STORE", store, 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_int_equal(dd_barrier(ctx), DD_OK);
    assert_int_equal(dd_finalize(ctx), DD_OK);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* The backend libraries' own variables: dd_init leaves them as it found
 * them, since the modules hear of the interface through their services
 * struct. Only NCCL's module sets its two, having no other way in. */
static const char *const backend_vars[] = {"UCX_NET_DEVICES",
                                           "GLOO_SOCKET_IFNAME",
                                           "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"};
#define N_BACKEND_VARS (sizeof(backend_vars) / sizeof(backend_vars[0]))

static void unset_backend_vars(void)
{
    for (size_t i = 0; i < N_BACKEND_VARS; i++) {
        unsetenv(backend_vars[i]);
    }
}

/* Fails naming the first variable of backend_vars[from..] that is set. */
static void expect_unset_from(size_t from, const char *when)
{
    for (size_t i = from; i < N_BACKEND_VARS; i++) {
        const char *value = getenv(backend_vars[i]);
        if (value != NULL) {
            fail_msg("%s set %s=%s", when, backend_vars[i], value);
        }
    }
}

static void test_init_sets_no_backend_variable(void **state)
{
    dd_context_h ctx = NULL;

    unset_backend_vars();
    setenv("DREAMDDP_BACKENDS", "^nccl", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    expect_unset_from(0, "dd_init");
    assert_int_equal(dd_barrier(ctx), DD_OK);
    assert_int_equal(dd_finalize(ctx), DD_OK);
    expect_unset_from(0, "dd_finalize");

    /* what the user set stays as it was */
    setenv("UCX_NET_DEVICES", "all", 1);
    setenv("GLOO_SOCKET_IFNAME", "lo", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_string_equal(getenv("UCX_NET_DEVICES"), "all");
    assert_string_equal(getenv("GLOO_SOCKET_IFNAME"), "lo");
    expect_unset_from(2, "dd_init");
    assert_int_equal(dd_finalize(ctx), DD_OK);
    unset_backend_vars();
    unsetenv("DREAMDDP_BACKENDS");
}

/* Where a GPU is: the NCCL module sets NCCL_SOCKET_IFNAME (an exact match)
 * and, without RDMA, not NCCL_IB_HCA, and keeps a value the user set. */
static void test_nccl_sets_its_own(void **state)
{
    dd_context_h ctx = NULL;

    unset_backend_vars();
    setenv("DREAMDDP_BACKENDS", "nccl", 1);
    setenv("DREAMDDP_NET_IFNAME", "=lo", 1);
    dd_status_t status = dd_init(NULL, &ctx);
    if (status != DD_OK) {
        print_message("no NCCL here: %s\n", dd_last_error());
        unsetenv("DREAMDDP_BACKENDS");
        unsetenv("DREAMDDP_NET_IFNAME");
        skip();
    }
    assert_string_equal(getenv("NCCL_SOCKET_IFNAME"), "=lo");
    expect_unset_from(3, "the NCCL module");
    assert_null(getenv("UCX_NET_DEVICES"));
    assert_null(getenv("GLOO_SOCKET_IFNAME"));
    assert_int_equal(dd_finalize(ctx), DD_OK);

    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_string_equal(getenv("NCCL_SOCKET_IFNAME"), "lo");
    assert_int_equal(dd_finalize(ctx), DD_OK);
    unset_backend_vars();
    unsetenv("DREAMDDP_BACKENDS");
    unsetenv("DREAMDDP_NET_IFNAME");
}

static void test_config_print(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    setenv("DREAMDDP_TIMEOUT_S", "45s", 1);
    assert_int_equal(dd_config_print(f, 0), DD_OK);
    fclose(f);
    const char *vars[] = {"DREAMDDP_LOG_LEVEL",   "DREAMDDP_LOG_SUBSYS",
                          "DREAMDDP_LOG_FILE",    "DREAMDDP_RANK",
                          "DREAMDDP_WORLD_SIZE",  "DREAMDDP_LOCAL_RANK",
                          "DREAMDDP_ROLE",        "DREAMDDP_NUM_AGGREGATORS",
                          "DREAMDDP_MASTER_ADDR", "DREAMDDP_MASTER_PORT",
                          "DREAMDDP_JOB_TOKEN",   "DREAMDDP_STORE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        assert_non_null(strstr(buf, vars[i]));
    }
    assert_non_null(
        strstr(buf, "DREAMDDP_TIMEOUT_S = 45s (set; default 300s)"));
    free(buf);
}

/* A single-rank ddp step with one layer, for the statistics below. */

/* Commits under ddp, or skips the test in a build without a host backend
 * (UCX, Gloo), which cannot commit. */
static void commit_ddp_or_skip(dd_context_h ctx)
{
    assert_int_equal(dd_strategy_set(ctx, "ddp"), DD_OK);
    dd_status_t status = dd_model_commit(ctx);
    if (status == DD_ERR_UNSUPPORTED) {
        print_message("skipped: %s\n", dd_last_error());
        dd_finalize(ctx);
        skip();
    }
    assert_int_equal(status, DD_OK);
}

static dd_context_h one_step(float *w, float *g, dd_layer_h *layer_p)
{
    dd_context_h ctx = NULL;
    dd_tensor_t t = {.param = w,
                     .grad = g,
                     .count = 16,
                     .dtype = DD_DTYPE_F32,
                     .mem_type = DD_MEM_HOST};

    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_int_equal(dd_layer_register(ctx, "fc", &t, 1, layer_p), DD_OK);
    commit_ddp_or_skip(ctx);
    assert_int_equal(dd_step_begin(ctx), DD_OK);
    assert_int_equal(dd_layer_ready(ctx, *layer_p), DD_OK);
    return ctx;
}

/* The layout of dd_tensor_t before rows and cols, as programs built then
 * pass it to the function dd_layer_register. */
typedef struct {
    void *param, *grad;
    size_t count;
    dd_dtype_t dtype;
    dd_mem_type_t mem_type;
    int device;
} old_tensor_t;

/* A shape must match the count; the old layout and the sized call read
 * the tensors they are given, the shape 0 x 0 where the layout has none. */
static void test_layer_shape_and_layout(void **state)
{
    float w[2][12] = {{0}};
    dd_context_h ctx = NULL;
    dd_tensor_t bad = {.param = w[0], .count = 12, .rows = 3, .cols = 5};
    dd_tensor_t half = {.param = w[0], .count = 12, .rows = 3};
    dd_tensor_t good = {.param = w[0], .count = 12, .rows = 3, .cols = 4};
    old_tensor_t old[2] = {{w[0], NULL, 12, DD_DTYPE_F32, DD_MEM_HOST, 0},
                           {w[1], NULL, 12, DD_DTYPE_F32, DD_MEM_HOST, 0}};

    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_int_equal(dd_layer_register(ctx, "fc", &bad, 1, NULL),
                     DD_ERR_INVALID_PARAM);
    assert_string_equal(dd_last_error(),
                        "dd_layer_register: layer 'fc' tensor 0 of 12 "
                        "elements is shaped 3 x 5: expected rows x cols = "
                        "count, or 0 x 0 for a vector");
    assert_int_equal(dd_layer_register(ctx, "fc", &half, 1, NULL),
                     DD_ERR_INVALID_PARAM);
    assert_int_equal(dd_layer_register(ctx, "fc", &good, 1, NULL), DD_OK);
    /* Two old tensors, read at their own stride: the second one's count
     * would be garbage at the new one. */
    assert_int_equal(
        (dd_layer_register)(ctx, "old", (const void *)old, 2, NULL), DD_OK);
    assert_int_equal(dd_num_layers(ctx), 2);
    assert_int_equal(dd_layer_register_sized(ctx, "tiny", &good, 1, 8, NULL),
                     DD_ERR_INVALID_PARAM);
    assert_non_null(strstr(dd_last_error(), "tensors of 8 bytes, expected"));
    assert_int_equal(dd_layer_register_sized(ctx, "big", &good, 1,
                                             sizeof(dd_tensor_t) + 8, NULL),
                     DD_ERR_INVALID_PARAM);
    /* Element counts whose byte size wraps, or whose layer would be larger
     * than any buffer: named at registration, never a commit that fails. */
    size_t counts[] = {(size_t)1 << 62, SIZE_MAX, SIZE_MAX / 4 + 1};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        dd_tensor_t huge = {.param = w[0], .count = counts[i]};
        assert_int_equal(dd_layer_register(ctx, "huge1", &huge, 1, NULL),
                         DD_ERR_INVALID_PARAM);
        assert_non_null(strstr(dd_last_error(), "layer 'huge1' tensor 0: "));
        assert_non_null(
            strstr(dd_last_error(), "larger than any buffer can be"));
    }
    /* Two tensors that fit alone but not together. */
    dd_tensor_t pair[2] = {{.param = w[0], .count = PTRDIFF_MAX / 6},
                           {.param = w[1], .count = PTRDIFF_MAX / 6}};
    assert_int_equal(dd_layer_register(ctx, "huge2", pair, 2, NULL),
                     DD_ERR_INVALID_PARAM);
    assert_non_null(strstr(dd_last_error(), "layer 'huge2' tensor 1: "));
    assert_int_equal(dd_num_layers(ctx), 2);
    dd_finalize(ctx);
}

/* A name registered twice is refused, however many layers came between
 * (the name index grows as they come). */
static void test_layer_name_twice(void **state)
{
    float w[4] = {0};
    dd_context_h ctx = NULL;
    dd_tensor_t t = {.param = w, .count = 4};
    char name[32];

    (void)state;
    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    for (int l = 0; l < 300; l++) {
        snprintf(name, sizeof(name), "l%d", l);
        assert_int_equal(dd_layer_register(ctx, name, &t, 1, NULL), DD_OK);
    }
    for (int l = 0; l < 300; l += 37) {
        snprintf(name, sizeof(name), "l%d", l);
        assert_int_equal(dd_layer_register(ctx, name, &t, 1, NULL),
                         DD_ERR_INVALID_PARAM);
        assert_non_null(strstr(dd_last_error(), "is registered twice"));
    }
    assert_int_equal(dd_layer_register(ctx, "l300", &t, 1, NULL), DD_OK);
    assert_int_equal(dd_num_layers(ctx), 301);
    dd_finalize(ctx);
}

/* A context with the layer table of test_layer_split, committed under
 * strategy: "emb" (a 100 x 768 matrix and a vector of 1000, f32) and
 * "bias" (10 elements). */
static float split_m[100 * 768], split_v[1000], split_b[10];

static dd_context_h split_ctx(const char *strategy, dd_layer_h *emb,
                              dd_layer_h *bias)
{
    dd_tensor_t t[2] = {{.param = split_m,
                         .count = 100 * 768,
                         .dtype = DD_DTYPE_F32,
                         .mem_type = DD_MEM_HOST,
                         .rows = 100,
                         .cols = 768},
                        {.param = split_v,
                         .count = 1000,
                         .dtype = DD_DTYPE_F32,
                         .mem_type = DD_MEM_HOST}};
    dd_tensor_t b = {.param = split_b,
                     .count = 10,
                     .dtype = DD_DTYPE_F32,
                     .mem_type = DD_MEM_HOST};
    dd_context_h ctx = NULL;

    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    assert_int_equal(dd_layer_register(ctx, "emb", t, 2, emb), DD_OK);
    assert_int_equal(dd_layer_register(ctx, "bias", &b, 1, bias), DD_OK);
    assert_int_equal(dd_strategy_set(ctx, strategy), DD_OK);
    assert_int_equal(dd_layer_num_parts(ctx, *emb), 1);
    assert_int_equal(dd_model_commit(ctx), DD_OK);
    return ctx;
}

/* DREAMDDP_LAYER_SPLIT cuts a host layer larger than the limit into parts
 * that tile it, cut at whole rows of its matrix; the handle stays the one
 * registered, counted and marked, and its statistics sum the parts'. */
static void test_layer_split(void **state)
{
    dd_layer_h emb, bias, part, p1 = NULL;
    size_t off, cnt, next = 0;
    char name[16];

    setenv("DREAMDDP_LAYER_SPLIT", "100K", 1);
    dd_context_h ctx = split_ctx("plsgd:1", &emb, &bias);
    assert_int_equal(dd_num_layers(ctx), 2);
    assert_ptr_equal(dd_layer_at(ctx, 0), emb);
    assert_ptr_equal(dd_layer_at(ctx, 1), bias);
    /* 311200 bytes at most 102400 a part: 4 parts of 25 rows, the last
     * with the vector too. */
    assert_int_equal(dd_layer_num_parts(ctx, emb), 4);
    for (size_t j = 0; j < 4; j++) {
        assert_int_equal(dd_layer_part(ctx, emb, j, &part, &off, &cnt), DD_OK);
        assert_int_equal(off, next);
        assert_int_equal(cnt, j < 3 ? 25 * 768 : 25 * 768 + 1000);
        snprintf(name, sizeof(name), "emb#%zu", j);
        assert_string_equal(dd_layer_name(part), name);
        assert_int_equal(dd_layer_num_parts(ctx, part), 0);
        next += cnt;
        p1 = j == 1 ? part : p1;
    }
    assert_int_equal(dd_layer_part(ctx, emb, 4, &part, NULL, NULL),
                     DD_ERR_INVALID_PARAM);
    assert_string_equal(dd_last_error(),
                        "dd_layer_part: layer 'emb' has 4 parts, not 5");
    assert_int_equal(dd_layer_num_parts(ctx, bias), 1);
    assert_int_equal(dd_layer_part(ctx, bias, 0, &part, &off, &cnt), DD_OK);
    assert_ptr_equal(part, bias);
    assert_int_equal(off, 0);
    assert_int_equal(cnt, 10);

    /* Marks go to the layer, once a step; every part syncs in every step
     * (plsgd:1), and the layer's bytes are its parts'. */
    for (int s = 0; s < 2; s++) {
        assert_int_equal(dd_step_begin(ctx), DD_OK);
        assert_int_equal(dd_layer_ready(ctx, p1), DD_ERR_INVALID_PARAM);
        assert_string_equal(dd_last_error(),
                            "dd_layer_ready: 'emb#1' is a part of layer "
                            "'emb' (dd_layer_part); mark the layer");
        assert_int_equal(dd_layer_ready(ctx, bias), DD_OK);
        assert_int_equal(dd_layer_ready(ctx, emb), DD_OK);
        assert_int_equal(dd_layer_ready(ctx, emb), DD_ERR_STATE);
        assert_non_null(
            strstr(dd_last_error(), "layer 'emb' marked twice in step"));
        assert_int_equal(dd_step_end(ctx, NULL), DD_OK);
    }
    dd_layer_stats_t whole = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS |
                                            DD_LAYER_STATS_FIELD_BYTES};
    uint64_t bytes = 0;
    assert_int_equal(dd_layer_stats(ctx, emb, &whole), DD_OK);
    for (size_t j = 0; j < 4; j++) {
        dd_layer_stats_t st = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS |
                                             DD_LAYER_STATS_FIELD_BYTES};
        assert_int_equal(dd_layer_part(ctx, emb, j, &part, NULL, NULL), DD_OK);
        assert_int_equal(dd_layer_stats(ctx, part, &st), DD_OK);
        assert_int_equal(st.syncs, 2);
        bytes += st.bytes;
    }
    assert_int_equal(whole.syncs, 2);
    assert_int_equal(whole.bytes, bytes);
    assert_int_equal(whole.bytes, 2 * (100 * 768 + 1000) * sizeof(float));
    assert_int_equal(dd_finalize(ctx), DD_OK);

    /* ddp never cuts; auto cuts only under +next, and not this small. */
    ctx = split_ctx("ddp", &emb, &bias);
    assert_int_equal(dd_layer_num_parts(ctx, emb), 1);
    assert_int_equal(dd_finalize(ctx), DD_OK);
    setenv("DREAMDDP_LAYER_SPLIT", "auto", 1);
    ctx = split_ctx("dreamddp:2+next", &emb, &bias);
    assert_int_equal(dd_layer_num_parts(ctx, emb), 1);
    assert_int_equal(dd_finalize(ctx), DD_OK);

    setenv("DREAMDDP_LAYER_SPLIT", "1K", 1);
    ctx = NULL;
    assert_int_equal(dd_init(NULL, &ctx), DD_ERR_INVALID_CONFIG);
    assert_string_equal(dd_last_error(),
                        "invalid value DREAMDDP_LAYER_SPLIT='1K': expected "
                        "auto, no, or the largest part in bytes, at least 4K "
                        "(such as 16M)");
}

/* auto cuts under +next a layer larger than the model over 2H (and 4M). */
static void test_layer_split_auto(void **state)
{
    static float big[3 << 20]; /* 12 MiB */
    float small[64] = {0};
    dd_tensor_t t[2] = {{.param = big,
                         .count = sizeof(big) / sizeof(big[0]),
                         .dtype = DD_DTYPE_F32,
                         .mem_type = DD_MEM_HOST},
                        {.param = small,
                         .count = 64,
                         .dtype = DD_DTYPE_F32,
                         .mem_type = DD_MEM_HOST}};
    dd_layer_h h;

    for (int next = 0; next < 2; next++) {
        dd_context_h ctx = NULL;
        assert_int_equal(dd_init(NULL, &ctx), DD_OK);
        assert_int_equal(dd_layer_register(ctx, "big", t, 1, &h), DD_OK);
        assert_int_equal(dd_layer_register(ctx, "small", &t[1], 1, NULL),
                         DD_OK);
        assert_int_equal(
            dd_strategy_set(ctx, next ? "dreamddp:2+next" : "dreamddp:2"),
            DD_OK);
        assert_int_equal(dd_model_commit(ctx), DD_OK);
        /* 12 MiB + 256 B over 4: above 3 MiB, so the 4 MiB floor: 3 parts. */
        assert_int_equal(dd_layer_num_parts(ctx, h), next ? 3 : 1);
        assert_int_equal(dd_finalize(ctx), DD_OK);
    }
}

/* dd_step_end fills the fields its field_mask names and no other; an
 * unknown bit is refused, naming the struct, and leaves the step open. */
static void test_step_stats_mask(void **state)
{
    float w[16] = {0}, g[16] = {0};
    dd_layer_h layer;
    dd_context_h ctx = one_step(w, g, &layer);
    dd_step_stats_t st = {
        .field_mask = (uint64_t)1 << 40, .step = 999, .layers_synced = -7};

    assert_int_equal(dd_step_end(ctx, &st), DD_ERR_INVALID_PARAM);
    assert_non_null(strstr(dd_last_error(), "dd_step_stats_t"));
    assert_int_equal(st.step, 999);
    assert_int_equal(st.layers_synced, -7);

    st = (dd_step_stats_t){.field_mask = DD_STEP_STATS_FIELD_STEP |
                                         DD_STEP_STATS_FIELD_LAYERS_SYNCED |
                                         DD_STEP_STATS_FIELD_BYTES_SYNCED,
                           .step = 999,
                           .layers_synced = -7,
                           .bytes_synced = 12345,
                           .wire_s = -1.5,
                           .wait_s = -2.5,
                           .replanned = 77};
    assert_int_equal(dd_step_end(ctx, &st), DD_OK);
    assert_int_equal(st.step, 0);
    assert_int_equal(st.layers_synced, 1);
    assert_int_equal(st.bytes_synced, sizeof(w));
    assert_true(st.wire_s == -1.5);
    assert_true(st.wait_s == -2.5);
    assert_int_equal(st.replanned, 77);
    assert_int_equal(dd_finalize(ctx), DD_OK);
}

static void test_layer_stats_mask(void **state)
{
    float w[16] = {0}, g[16] = {0};
    dd_layer_h layer;
    dd_context_h ctx = one_step(w, g, &layer);
    dd_layer_stats_t st = {.field_mask = DD_LAYER_STATS_FIELD_PERIOD |
                                         ((uint64_t)1 << 63),
                           .period = -3};

    assert_int_equal(dd_step_end(ctx, NULL), DD_OK);
    assert_int_equal(dd_layer_stats(ctx, layer, &st), DD_ERR_INVALID_PARAM);
    assert_non_null(strstr(dd_last_error(), "dd_layer_stats_t"));
    assert_int_equal(st.period, -3);

    st = (dd_layer_stats_t){.field_mask = DD_LAYER_STATS_FIELD_SYNCS |
                                          DD_LAYER_STATS_FIELD_BYTES,
                            .syncs = 999,
                            .bytes = 999,
                            .wire_s = -1.5,
                            .bp_s = -2.5,
                            .period = -3};
    assert_int_equal(dd_layer_stats(ctx, layer, &st), DD_OK);
    assert_int_equal(st.syncs, 1);
    assert_int_equal(st.bytes, sizeof(w));
    assert_true(st.wire_s == -1.5);
    assert_true(st.bp_s == -2.5);
    assert_int_equal(st.period, -3);

    st.field_mask = 0;
    st.syncs = 999;
    assert_int_equal(dd_layer_stats(ctx, layer, &st), DD_OK);
    assert_int_equal(st.syncs, 999);
    assert_int_equal(dd_finalize(ctx), DD_OK);
}

#define TH_LAYERS 32
#define TH_THREADS 4
#define TH_STEPS 100

typedef struct {
    dd_context_h ctx;
    dd_layer_h *layers;
    int first; /* marks layers first, first + TH_THREADS, ... */
    int failed;
} marker_t;

static void *mark_layers(void *arg)
{
    marker_t *m = arg;
    for (int l = m->first; l < TH_LAYERS; l += TH_THREADS) {
        m->failed |= dd_layer_ready(m->ctx, m->layers[l]) != DD_OK;
    }
    return NULL;
}

/* Several threads mark the layers of each step at once, as autograd's
 * hooks do: every layer is synced once per step, fused or not. */
static void test_layer_ready_threads(void **state)
{
    static float w[TH_LAYERS][64], g[TH_LAYERS][64];
    dd_layer_h layers[TH_LAYERS];
    dd_context_h ctx = NULL;
    char name[16];

    assert_int_equal(dd_init(NULL, &ctx), DD_OK);
    for (int l = 0; l < TH_LAYERS; l++) {
        dd_tensor_t t = {.param = w[l],
                         .grad = g[l],
                         .count = 64,
                         .dtype = DD_DTYPE_F32,
                         .mem_type = DD_MEM_HOST};
        snprintf(name, sizeof(name), "l%d", l);
        assert_int_equal(dd_layer_register(ctx, name, &t, 1, &layers[l]),
                         DD_OK);
    }
    commit_ddp_or_skip(ctx);
    for (int s = 0; s < TH_STEPS; s++) {
        pthread_t th[TH_THREADS];
        marker_t m[TH_THREADS];
        dd_step_stats_t st = {.field_mask = DD_STEP_STATS_FIELD_LAYERS_SYNCED};

        assert_int_equal(dd_step_begin(ctx), DD_OK);
        for (int i = 0; i < TH_THREADS; i++) {
            m[i] = (marker_t){ctx, layers, i, 0};
            assert_int_equal(pthread_create(&th[i], NULL, mark_layers, &m[i]),
                             0);
        }
        for (int i = 0; i < TH_THREADS; i++) {
            assert_int_equal(pthread_join(th[i], NULL), 0);
            assert_false(m[i].failed);
        }
        assert_int_equal(dd_step_end(ctx, &st), DD_OK);
        assert_int_equal(st.layers_synced, TH_LAYERS);
    }
    for (int l = 0; l < TH_LAYERS; l++) {
        dd_layer_stats_t ls = {.field_mask = DD_LAYER_STATS_FIELD_SYNCS};
        assert_int_equal(dd_layer_stats(ctx, layers[l], &ls), DD_OK);
        assert_int_equal(ls.syncs, TH_STEPS);
    }
    assert_int_equal(dd_finalize(ctx), DD_OK);
}

/* The watch's period: a twelfth of the timeout within 20 ms and 0.5 s up
 * to 32 ranks; past them as long as keeps the store at 64 beats a second,
 * but never past a twelfth of the timeout or a quarter of the aggregators'
 * lost-after. */
static void test_watch_period(void **state)
{
    static const struct {
        double timeout_s;
        int world;
        double lost_after_s, period_s;
    } cases[] = {
        {300, 4, 0, 0.5},
        {300, 32, 0, 0.5},
        {300, 128, 0, 2.0},
        {300, 1024, 0, 16.0},
        {6, 128, 0, 0.5},
        {12, 128, 0, 1.0},
        {1.2, 2, 0, 0.1},
        {0.06, 1024, 0, 0.02},
        /* Under DREAMDDP_AGG_LOSS=survive: at most a quarter of
         * DREAMDDP_AGG_LOST_AFTER_S, but never below what 32 ranks get. */
        {300, 128, 5, 1.25},
        {300, 64, 5, 1.0},
        {300, 128, 1, 0.5},
        {300, 4, 5, 0.5},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_float_equal(dd_watch_period(cases[i].timeout_s, cases[i].world,
                                           cases[i].lost_after_s),
                           cases[i].period_s, 1e-12);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_single_rank, clean_env),
        cmocka_unit_test_setup(test_sigpipe_never_kills, clean_env),
        cmocka_unit_test_setup(test_bad_value_fails_init, clean_env),
        cmocka_unit_test_setup(test_multi_rank_needs_master, clean_env),
        cmocka_unit_test_setup(test_role_override, clean_env),
        cmocka_unit_test_setup(test_file_store, clean_env),
        cmocka_unit_test_setup(test_config_print, clean_env),
        cmocka_unit_test_setup(test_init_sets_no_backend_variable, clean_env),
        cmocka_unit_test_setup(test_nccl_sets_its_own, clean_env),
        cmocka_unit_test_setup(test_layer_shape_and_layout, clean_env),
        cmocka_unit_test_setup(test_layer_name_twice, clean_env),
        cmocka_unit_test_setup(test_layer_split, clean_env),
        cmocka_unit_test_setup(test_layer_split_auto, clean_env),
        cmocka_unit_test_setup(test_step_stats_mask, clean_env),
        cmocka_unit_test_setup(test_layer_stats_mask, clean_env),
        cmocka_unit_test_setup(test_layer_ready_threads, clean_env),
        cmocka_unit_test(test_watch_period),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
