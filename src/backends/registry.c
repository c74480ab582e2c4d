/*
 * The backend registry: lists dd_backend_<name>.so modules in
 * DREAMDDP_BACKEND_PATH, the install directory and the directory of this
 * library, applies DREAMDDP_BACKENDS, dlopens them, agrees with every rank on
 * the set that all can run, and initializes them with the services they need.
 * It must not link any backend's library, and modules must reach the core only
 * through dd_backend_services_t.
 */
#include "backends/registry.h"
#include "boot/store.h"
#include "core/bell.h"
#include "core/log.h"
#include "core/moddir.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DD_BACKENDS_MAX 16
#define DD_BACKEND_NAME_MAX 32
#define DD_BACKENDS_LIST_BYTES 512
#define DD_BACKEND_PREFIX "dd_backend_"

/* What a module's services point back to. */
typedef struct {
    const dd_backends_env_t *env;
    const char *name;
    char prefix[64]; /* of the module's store keys */
} dd_backend_svc_arg_t;

typedef struct {
    char name[DD_BACKEND_NAME_MAX];
    char path[PATH_MAX];
    int explicit_request; /* named in DREAMDDP_BACKENDS */
    void *dl;
    const dd_backend_ops_t *ops;
    dd_backend_t *instance;
    dd_backend_services_t services;
    dd_backend_svc_arg_t arg;
} dd_backend_slot_t;

struct dd_backends {
    dd_backends_env_t env; /* what the modules' services point to */
    int n;
    int owns_dl; /* a group's instances borrow the job's modules */
    int streams; /* agreed by every rank in dd_backends_agree */
    dd_backend_slot_t slot[DD_BACKENDS_MAX];
};

/* The parsed DREAMDDP_BACKENDS. */
typedef struct {
    int set;
    int exclude;
    int n;
    char names[DD_BACKENDS_MAX][DD_BACKEND_NAME_MAX];
} dd_backends_spec_t;

static dd_status_t dd_backends_spec_error(const char *spec)
{
    return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_BACKEND,
                    "invalid value DREAMDDP_BACKENDS='%s': expected a comma-"
                    "separated list of backend names such as gloo,ucx, or ^ "
                    "followed by such a list (^nccl)",
                    spec);
}

static dd_status_t dd_backends_spec_parse(const char *spec,
                                          dd_backends_spec_t *out)
{
    const char *p = spec;

    memset(out, 0, sizeof(*out));
    if (spec == NULL) {
        return DD_OK;
    }
    out->set = 1;
    if (*p == '^') {
        out->exclude = 1;
        p++;
    }
    for (;;) {
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
        if (len == 0 || len >= DD_BACKEND_NAME_MAX ||
            out->n == DD_BACKENDS_MAX || (p[len] != ',' && p[len] != '\0')) {
            return dd_backends_spec_error(spec);
        }
        memcpy(out->names[out->n], p, len);
        out->names[out->n++][len] = '\0';
        if (p[len] == '\0') {
            return DD_OK;
        }
        p += len + 1;
    }
}

static int dd_backends_spec_index(const dd_backends_spec_t *spec,
                                  const char *name)
{
    for (int i = 0; i < spec->n; i++) {
        if (strcmp(spec->names[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

/* Adds the modules of dir that are not already listed. */
static void dd_backends_scan_dir(dd_backends_t *b, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t plen = strlen(DD_BACKEND_PREFIX);

    if (d == NULL) {
        dd_log_debug(DD_SUBSYS_BACKEND, "no backend directory %s: %m", dir);
        return;
    }
    while ((e = readdir(d)) != NULL && b->n < DD_BACKENDS_MAX) {
        size_t len = strlen(e->d_name);
        if (len <= plen + 3 || strncmp(e->d_name, DD_BACKEND_PREFIX, plen) ||
            strcmp(e->d_name + len - 3, ".so") != 0 ||
            len - plen - 3 >= DD_BACKEND_NAME_MAX) {
            continue;
        }
        dd_backend_slot_t *s = &b->slot[b->n];
        memset(s, 0, sizeof(*s));
        memcpy(s->name, e->d_name + plen, len - plen - 3);
        int dup = 0;
        for (int i = 0; i < b->n; i++) {
            dup |= strcmp(b->slot[i].name, s->name) == 0;
        }
        if (!dup) {
            snprintf(s->path, sizeof(s->path), "%s/%s", dir, e->d_name);
            b->n++;
        }
    }
    closedir(d);
}

/* DREAMDDP_BACKEND_PATH, the install directory, then beside this library's
 * code (in a build tree: its .libs, also for a tool linked statically). */
static void dd_backends_scan(dd_backends_t *b, const char *path)
{
    char dir[PATH_MAX];
    char beside[DD_MODDIR_MAX][PATH_MAX];

    for (const char *p = path; p != NULL && *p != '\0';) {
        size_t len = strcspn(p, ":");
        if (len > 0 && len < sizeof(dir)) {
            memcpy(dir, p, len);
            dir[len] = '\0';
            dd_backends_scan_dir(b, dir);
        }
        p += len + (p[len] == ':');
    }
    dd_backends_scan_dir(b, DD_PKGLIBDIR);
    int n = dd_moddir_beside(beside);
    for (int i = 0; i < n; i++) {
        dd_backends_scan_dir(b, beside[i]);
    }
}

/* Keeps the modules DREAMDDP_BACKENDS allows, in its order when it lists them.
 */
static dd_status_t dd_backends_filter(dd_backends_t *b,
                                      const dd_backends_spec_t *spec,
                                      const char *value, const char *path)
{
    dd_backends_t *kept = calloc(1, sizeof(*kept));

    if (kept == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BACKEND,
                        "no memory for the backends DREAMDDP_BACKENDS keeps");
    }
    if (!spec->set || spec->exclude) {
        for (int i = 0; i < b->n; i++) {
            if (dd_backends_spec_index(spec, b->slot[i].name) < 0) {
                kept->slot[kept->n++] = b->slot[i];
            }
        }
    } else {
        for (int j = 0; j < spec->n; j++) {
            int found = 0;
            for (int i = 0; i < b->n && !found; i++) {
                if (strcmp(b->slot[i].name, spec->names[j]) == 0) {
                    kept->slot[kept->n] = b->slot[i];
                    kept->slot[kept->n++].explicit_request = 1;
                    found = 1;
                }
            }
            if (!found) {
                free(kept);
                return dd_error(
                    DD_ERR_NOT_FOUND, DD_SUBSYS_BACKEND,
                    "DREAMDDP_BACKENDS='%s' names backend %s, but no "
                    "module %s%s.so is in DREAMDDP_BACKEND_PATH (%s), "
                    "%s or beside the library",
                    value, spec->names[j], DD_BACKEND_PREFIX, spec->names[j],
                    path ? path : "unset", DD_PKGLIBDIR);
            }
        }
    }
    kept->env = b->env;
    *b = *kept;
    free(kept);
    return DD_OK;
}

/*
 * What the registry knows of the modules this project ships before it opens
 * them, so that a job does not load what it cannot or will not use (128
 * ranks on 2 cores: 15 ms of loading a rank, 1 s of startup): NCCL's
 * module links NCCL and the CUDA runtime, which run only with NVIDIA's
 * driver (the device module looks for it the same way); UCX's collectives
 * are the shared algorithms over its send and recv (see
 * dd_backends_drop_unneeded). Opening still decides; a module named in
 * DREAMDDP_BACKENDS is opened whatever this says.
 */
enum { DD_BACKEND_NEEDS_NVIDIA = 1, DD_BACKEND_P2P_ONLY = 2 };

static unsigned dd_backend_traits(const char *name)
{
    return strcmp(name, "nccl") == 0  ? DD_BACKEND_NEEDS_NVIDIA
           : strcmp(name, "ucx") == 0 ? DD_BACKEND_P2P_ONLY
                                      : 0;
}

/* Opens one module and asks whether it can run here; why says why not. */
static int dd_backend_open(dd_backend_slot_t *s, char *why, size_t size)
{
    if ((dd_backend_traits(s->name) & DD_BACKEND_NEEDS_NVIDIA) &&
        !s->explicit_request && access("/dev/nvidiactl", F_OK) != 0 &&
        access("/proc/driver/nvidia/version", F_OK) != 0) {
        snprintf(why, size, "no NVIDIA driver (no /dev/nvidiactl)");
        return 0;
    }
    s->dl = dlopen(s->path, RTLD_NOW | RTLD_LOCAL);
    if (s->dl == NULL) {
        snprintf(why, size, "%s", dlerror());
        return 0;
    }
    dd_backend_entry_fn_t entry;
    *(void **)&entry = dlsym(s->dl, DD_BACKEND_ENTRY);
    s->ops = entry != NULL ? entry() : NULL;
    if (s->ops == NULL) {
        snprintf(why, size, "%s exports no %s()", s->path, DD_BACKEND_ENTRY);
    } else if (s->ops->abi_version != DD_BACKEND_ABI_VERSION) {
        snprintf(why, size, "%s has backend ABI version %u, this library %u",
                 s->path, s->ops->abi_version, DD_BACKEND_ABI_VERSION);
    } else if (strcmp(s->ops->name, s->name) != 0) {
        snprintf(why, size, "%s calls itself %s", s->path, s->ops->name);
    } else if (s->ops->query(why, size) == DD_OK) {
        return 1;
    }
    dlclose(s->dl);
    s->dl = NULL;
    s->ops = NULL;
    return 0;
}

/* The first module open (open NULL: every module) whose own collectives
 * run on host memory, or NULL. */
static const char *dd_backends_native(const dd_backends_t *b, const int *open)
{
    for (int i = 0; i < b->n; i++) {
        const dd_backend_ops_t *ops = b->slot[i].ops;
        if ((open == NULL || open[i]) &&
            (ops->caps & DD_BACKEND_CAP_NATIVE_COLL) &&
            (ops->mem_types & DD_BACKEND_MEM(DD_MEM_HOST))) {
            return b->slot[i].name;
        }
    }
    return NULL;
}

static void dd_backends_log_idle(const char *name, const char *native)
{
    dd_log_info(DD_SUBSYS_BACKEND,
                "backend %s is not started: this job has no aggregators "
                "and no device memory, and %s's collectives serve it "
                "(DREAMDDP_BACKENDS naming %s starts it)",
                name, native, name);
}

/*
 * Opens every module, those with collectives of their own first: a
 * module with only send and recv (dd_backend_traits) is not opened where
 * one of those serves a job with no aggregators and no device memory. One
 * explicitly requested that cannot run is an error, others are dropped.
 */
static dd_status_t dd_backends_open(dd_backends_t *b)
{
    char why[512];
    int open[DD_BACKENDS_MAX] = {0}, kept = 0;
    dd_status_t status = DD_OK;

    for (int pass = 0; pass < 2; pass++) {
        const char *native = pass == 1 ? dd_backends_native(b, open) : NULL;
        int idle = native != NULL && !b->env.needs_p2p && !b->env.device_memory;
        for (int i = 0; i < b->n; i++) {
            dd_backend_slot_t *s = &b->slot[i];
            int later = (dd_backend_traits(s->name) & DD_BACKEND_P2P_ONLY) &&
                        !s->explicit_request;
            if (later != pass) {
                continue;
            }
            if (later && idle) {
                dd_backends_log_idle(s->name, native);
                continue;
            }
            why[0] = '\0';
            if (dd_backend_open(s, why, sizeof(why))) {
                open[i] = 1;
            } else if (s->explicit_request && status == DD_OK) {
                status = dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_BACKEND,
                                  "backend %s (DREAMDDP_BACKENDS) is "
                                  "unavailable: %s",
                                  s->name, why);
            } else {
                dd_log_info(DD_SUBSYS_BACKEND, "backend %s is unavailable: %s",
                            s->name, why);
            }
        }
    }
    for (int i = 0; i < b->n; i++) {
        if (open[i]) {
            b->slot[kept++] = b->slot[i];
        }
    }
    b->n = kept;
    return status;
}

/*
 * Drops the backends this job would start for nothing: one whose
 * collectives are the shared algorithms over its send and recv (UCX)
 * serves a job with no aggregators and no device memory only where no
 * backend with collectives of its own (Gloo) opened, and starting it costs
 * an endpoint wired up to every peer (128 ranks on one host: 5 s of the
 * 11 it took to start). One named in DREAMDDP_BACKENDS is kept.
 */
static void dd_backends_drop_unneeded(dd_backends_t *b)
{
    const dd_backends_env_t *env = &b->env;
    const char *native = dd_backends_native(b, NULL);
    int kept = 0;

    if (native == NULL || env->needs_p2p || env->device_memory) {
        return;
    }
    for (int i = 0; i < b->n; i++) {
        dd_backend_slot_t *s = &b->slot[i];
        if (s->explicit_request ||
            (s->ops->caps & DD_BACKEND_CAP_NATIVE_COLL)) {
            b->slot[kept++] = *s;
            continue;
        }
        dd_backends_log_idle(s->name, native);
        dlclose(s->dl);
    }
    b->n = kept;
}

dd_status_t dd_backends_probe(const dd_backend_opts_t *opts,
                              dd_backend_probe_t *out, int max, int *n_p)
{
    dd_backends_spec_t spec;
    dd_backends_t *b = calloc(1, sizeof(*b));

    if (b == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BACKEND,
                        "no memory for the backend registry");
    }
    dd_status_t status = dd_backends_spec_parse(opts->backends, &spec);
    if (status == DD_OK) {
        dd_backends_scan(b, opts->path);
        status = dd_backends_filter(b, &spec, opts->backends, opts->path);
    }
    int n = 0;
    for (int i = 0; status == DD_OK && i < b->n && n < max; i++) {
        dd_backend_slot_t *s = &b->slot[i];
        dd_backend_probe_t *p = &out[n++];
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "%s", s->name);
        snprintf(p->path, sizeof(p->path), "%s", s->path);
        p->explicit_request = s->explicit_request;
        p->available = dd_backend_open(s, p->why, sizeof(p->why));
        if (p->available) {
            p->why[0] = '\0';
            dlclose(s->dl);
        }
    }
    free(b);
    if (status == DD_OK) {
        *n_p = n;
    }
    return status;
}

/* Every rank says which backends it can run (or that it failed) and how
 * many streams it asks for; only those every rank can run are used, with
 * the least count any rank asked for, so that every rank cuts its messages
 * across the same streams. A record reads "STREAMS,NAME,NAME," or "!". */
/* What this rank asks for, within 1..DD_BACKEND_MAX_STREAMS. */
static int dd_backends_streams_asked(const dd_backends_env_t *env)
{
    if (env->streams < 1) {
        return 1;
    }
    return env->streams < DD_BACKEND_MAX_STREAMS ? env->streams
                                                 : DD_BACKEND_MAX_STREAMS;
}

static dd_status_t dd_backends_agree(const dd_backends_env_t *env,
                                     dd_backends_t *b, dd_status_t local)
{
    int world = env->world_size, kept = 0;
    char mine[DD_BACKENDS_LIST_BYTES];
    char *all = calloc((size_t)world, sizeof(mine));
    dd_status_t status;

    if (all == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BACKEND,
                        "no memory for the backend lists of %d ranks", world);
    }
    snprintf(mine, sizeof(mine), "%d,", dd_backends_streams_asked(env));
    for (int i = 0; i < b->n && local == DD_OK; i++) {
        strncat(mine, b->slot[i].name, sizeof(mine) - strlen(mine) - 2);
        strcat(mine, ",");
    }
    if (local != DD_OK) {
        strcpy(mine, "!");
    }
    status =
        dd_store_allgather(env->store, "backends", mine, sizeof(mine), all);
    for (int r = 0; status == DD_OK && local == DD_OK && r < world; r++) {
        if (all[(size_t)r * sizeof(mine)] == '!') {
            status =
                dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_BACKEND,
                         "rank %d cannot use the backends DREAMDDP_BACKENDS "
                         "asks for (its log says why)",
                         r);
        }
    }
    b->streams = DD_BACKEND_MAX_STREAMS;
    for (int r = 0; status == DD_OK && local == DD_OK && r < world; r++) {
        int asked = atoi(all + (size_t)r * sizeof(mine));
        b->streams = asked > 0 && asked < b->streams ? asked : b->streams;
    }
    int missing[DD_BACKENDS_MAX];
    for (int i = 0; status == DD_OK && local == DD_OK && i < b->n; i++) {
        char key[DD_BACKEND_NAME_MAX + 2];
        snprintf(key, sizeof(key), ",%s,", b->slot[i].name);
        missing[i] = -1;
        for (int r = 0; r < world && missing[i] < 0; r++) {
            if (strstr(all + (size_t)r * sizeof(mine), key) == NULL) {
                missing[i] = r;
            }
        }
        if (missing[i] >= 0 && b->slot[i].explicit_request) {
            status =
                dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_BACKEND,
                         "backend %s (DREAMDDP_BACKENDS) is unavailable on "
                         "rank %d",
                         b->slot[i].name, missing[i]);
        }
    }
    for (int i = 0; status == DD_OK && local == DD_OK && i < b->n; i++) {
        if (missing[i] < 0) {
            b->slot[kept++] = b->slot[i];
            continue;
        }
        dd_log_info(DD_SUBSYS_BACKEND,
                    "backend %s is unavailable on rank %d: not used",
                    b->slot[i].name, missing[i]);
        dlclose(b->slot[i].dl);
    }
    if (status == DD_OK && local == DD_OK) {
        b->n = kept;
    }
    free(all);
    return local != DD_OK ? local : status;
}

static dd_status_t dd_backend_svc_set(void *arg, const char *key,
                                      const void *value, size_t len)
{
    dd_backend_svc_arg_t *a = arg;
    char full[512];

    snprintf(full, sizeof(full), "%s/%s", a->prefix, key);
    return dd_store_set(a->env->store, full, value, len);
}

static dd_status_t dd_backend_svc_get(void *arg, const char *key,
                                      void **value_p, size_t *len_p)
{
    dd_backend_svc_arg_t *a = arg;
    char full[512];

    snprintf(full, sizeof(full), "%s/%s", a->prefix, key);
    return dd_store_get(a->env->store, full, value_p, len_p);
}

static dd_status_t dd_backend_svc_wait(void *arg, const char *const *keys,
                                       int n, double timeout_s)
{
    dd_backend_svc_arg_t *a = arg;
    char **full = calloc((size_t)n + 1, sizeof(char *));
    dd_status_t status = DD_ERR_NO_MEMORY;
    int i;

    for (i = 0; full != NULL && i < n; i++) {
        size_t size = strlen(keys[i]) + strlen(a->prefix) + 2;
        if ((full[i] = malloc(size)) == NULL) {
            break;
        }
        snprintf(full[i], size, "%s/%s", a->prefix, keys[i]);
    }
    if (full != NULL && i == n) {
        status = a->env->store->ops->wait(
            a->env->store, (const char *const *)full, n, timeout_s, NULL);
    } else {
        dd_error(status, DD_SUBSYS_BACKEND,
                 "%s: no memory for the %d store keys it waits for", a->name,
                 n);
    }
    for (int j = 0; full != NULL && j < n; j++) {
        free(full[j]);
    }
    free(full);
    return status;
}

static void dd_backend_svc_log(void *arg, int level, const char *message)
{
    dd_backend_svc_arg_t *a = arg;

    if (level < DD_LOG_ERROR || level > DD_LOG_TRACE) {
        level = DD_LOG_ERROR;
    }
    dd_log((dd_log_level_t)level, DD_SUBSYS_BACKEND, "%s: %s", a->name,
           message);
}

static dd_status_t dd_backend_svc_error(void *arg, dd_status_t status,
                                        const char *message)
{
    dd_backend_svc_arg_t *a = arg;

    return dd_error(status, DD_SUBSYS_BACKEND, "%s: %s", a->name, message);
}

static void dd_backend_svc_completed(void *arg)
{
    (void)arg;
    dd_bell_ring();
}

/* A module instance's view: the job (group NULL), or a group of ranks in
 * which this process is rank `rank` of `size`. */
static void dd_backend_services_fill(const dd_backends_env_t *env,
                                     dd_backend_slot_t *s, const char *group,
                                     int rank, int size, int streams)
{
    dd_backend_services_t *svc = &s->services;

    char prefix[sizeof(s->arg.prefix)]; /* group may lie inside *s */

    s->arg.env = env;
    s->arg.name = s->name;
    snprintf(prefix, sizeof(prefix), "backend/%s%s%s", group ? group : "",
             group ? "/" : "", s->name);
    memcpy(s->arg.prefix, prefix, sizeof(prefix));
    memset(svc, 0, sizeof(*svc));
    svc->abi_version = DD_BACKEND_ABI_VERSION;
    svc->rank = rank;
    svc->world_size = size;
    svc->local_rank = env->local_rank;
    svc->local_size = env->local_size;
    svc->timeout_s = env->timeout_s;
    svc->ifname = env->ifname;
    svc->rdma = svc->ifname != NULL ? env->rdma : NULL;
    svc->rdma_port = svc->rdma != NULL ? env->rdma_port : 0;
    svc->streams = streams;
    /* Modules log their info and debug lines only where DREAMDDP_LOG_SUBSYS
     * lets the backend subsystem speak. */
    svc->log_level = dd_log_enabled(DD_LOG_INFO, DD_SUBSYS_BACKEND)
                         ? dd_log_level_g
                         : DD_LOG_WARN;
    svc->arg = &s->arg;
    svc->store_set = dd_backend_svc_set;
    svc->store_get = dd_backend_svc_get;
    svc->store_wait = dd_backend_svc_wait;
    svc->log = dd_backend_svc_log;
    svc->error = dd_backend_svc_error;
    svc->completed = dd_backend_svc_completed;
}

/* One info line per memory type: which backend each operation takes for a
 * small and a large message. */
static void dd_backends_log_choice(dd_backends_t *b)
{
    static const size_t sizes[2] = {4096, 64u << 20};
    char line[1024];

    for (int m = 0;
         m < DD_MEM_LAST && dd_log_enabled(DD_LOG_INFO, DD_SUBSYS_BACKEND);
         m++) {
        size_t len = 0;
        line[0] = '\0';
        for (int c = 0; c < DD_BACKEND_OP_LAST; c++) {
            for (int i = 0; i < 2; i++) {
                const char *best = "none";
                int top = 0;
                for (int k = 0; k < b->n; k++) {
                    int sc = b->slot[k].ops->score(b->slot[k].instance,
                                                   (dd_backend_op_t)c,
                                                   (dd_mem_type_t)m, sizes[i]);
                    if (sc > top) {
                        top = sc;
                        best = b->slot[k].name;
                    }
                }
                len += (size_t)snprintf(line + len, sizeof(line) - len,
                                        "%s%s %s %s", len ? ", " : "",
                                        dd_backend_op_name((dd_backend_op_t)c),
                                        i ? "64M" : "4K", best);
                if (len >= sizeof(line)) {
                    len = sizeof(line) - 1;
                }
            }
        }
        dd_log_info(DD_SUBSYS_BACKEND, "%s memory: %s",
                    dd_mem_type_name((dd_mem_type_t)m), line);
    }
}

static dd_status_t dd_backends_init(dd_backends_t *b, const char *group,
                                    int rank, int size)
{
    char names[DD_BACKENDS_LIST_BYTES] = "";

    for (int i = 0; i < b->n; i++) {
        dd_backend_slot_t *s = &b->slot[i];
        dd_backend_services_fill(&b->env, s, group, rank, size, b->streams);
        dd_status_t status = s->ops->init(&s->services, &s->instance);
        if (status != DD_OK) {
            dd_error(status, DD_SUBSYS_BACKEND,
                     "backend %s failed to start (%s); DREAMDDP_BACKENDS=^%s "
                     "leaves it out",
                     s->name, dd_status_string(status), s->name);
            b->n = i;
            return status;
        }
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
                 i ? ", " : "", s->name);
    }
    dd_log_info(DD_SUBSYS_BACKEND, "backends%s%s: %s", group ? " of the " : "",
                group ? group : "", b->n ? names : "none");
    dd_log_info(DD_SUBSYS_BACKEND,
                "%d stream%s per peer (the least any rank asked for)",
                b->streams, b->streams == 1 ? "" : "s");
    if (group == NULL) {
        dd_backends_log_choice(b);
    }
    return DD_OK;
}

dd_status_t dd_backends_load(const dd_backends_env_t *env,
                             dd_backends_t **backends_p)
{
    const dd_backend_opts_t *opts = env->opts;
    dd_backends_spec_t spec;
    dd_status_t status;

    dd_backends_t *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BACKEND,
                        "no memory for the backend registry");
    }
    b->owns_dl = 1;
    b->env = *env;
    status = dd_backends_spec_parse(opts->backends, &spec);
    if (status == DD_OK) {
        dd_backends_scan(b, opts->path);
        status = dd_backends_filter(b, &spec, opts->backends, opts->path);
        if (status != DD_OK) {
            b->n = 0;
        }
    }
    if (status == DD_OK) {
        status = dd_backends_open(b);
    }
    if (status == DD_OK) {
        dd_backends_drop_unneeded(b);
    }
    status = dd_backends_agree(env, b, status);
    if (status == DD_OK) {
        status = dd_backends_init(b, NULL, env->rank, env->world_size);
    }
    if (status != DD_OK) {
        dd_backends_unload(b);
        return status;
    }
    *backends_p = b;
    return DD_OK;
}

dd_status_t dd_backends_load_group(const dd_backends_t *job, const char *group,
                                   int rank, int size,
                                   dd_backends_t **backends_p)
{
    dd_backends_t *b = calloc(1, sizeof(*b));

    if (b == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BACKEND,
                        "no memory for the %s backends", group);
    }
    b->n = job->n;
    b->env = job->env;
    b->streams = job->streams;
    for (int i = 0; i < job->n; i++) {
        b->slot[i] = job->slot[i];
        b->slot[i].instance = NULL;
    }
    dd_status_t status = dd_backends_init(b, group, rank, size);
    if (status != DD_OK) {
        dd_backends_unload(b);
        return status;
    }
    *backends_p = b;
    return DD_OK;
}

void dd_backends_unload(dd_backends_t *backends)
{
    if (backends == NULL) {
        return;
    }
    for (int i = backends->n - 1; i >= 0; i--) {
        dd_backend_slot_t *s = &backends->slot[i];
        if (s->instance != NULL) {
            s->ops->finalize(s->instance);
        }
        if (s->dl != NULL && backends->owns_dl) {
            dlclose(s->dl);
        }
    }
    free(backends);
}

int dd_backends_streams(const dd_backends_t *backends)
{
    return backends != NULL ? backends->streams : 1;
}

const char *dd_backend_op_name(dd_backend_op_t op)
{
    static const char *const names[DD_BACKEND_OP_LAST] = {
        "allreduce", "broadcast", "reduce_scatter",
        "allgather", "send",      "recv"};
    return (unsigned)op < DD_BACKEND_OP_LAST ? names[op] : "?";
}

int dd_backends_find(dd_backends_t *backends, dd_backend_op_t op,
                     dd_mem_type_t mem_type, size_t bytes,
                     dd_backend_ref_t *ref_p)
{
    int top = 0, best = -1;

    for (int i = 0; backends != NULL && i < backends->n; i++) {
        dd_backend_slot_t *s = &backends->slot[i];
        int sc = s->ops->score(s->instance, op, mem_type, bytes);
        if (sc > top) {
            top = sc;
            best = i;
        }
    }
    if (best < 0) {
        return 0;
    }
    ref_p->ops = backends->slot[best].ops;
    ref_p->instance = backends->slot[best].instance;
    return 1;
}

dd_status_t dd_backends_pick_op(dd_backends_t *backends, dd_backend_op_t op,
                                dd_mem_type_t mem_type, size_t bytes,
                                dd_backend_ref_t *ref_p)
{
    if (!dd_backends_find(backends, op, mem_type, bytes, ref_p)) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_BACKEND,
                        "no backend runs %s on %s memory (%d loaded; "
                        "DREAMDDP_BACKENDS and the info log say which)",
                        dd_backend_op_name(op), dd_mem_type_name(mem_type),
                        backends ? backends->n : 0);
    }
    return DD_OK;
}

dd_status_t dd_backends_pick(dd_backends_t *backends, dd_coll_t coll,
                             dd_mem_type_t mem_type, size_t bytes,
                             dd_backend_ref_t *ref_p)
{
    return dd_backends_pick_op(backends, (dd_backend_op_t)coll, mem_type, bytes,
                               ref_p);
}
