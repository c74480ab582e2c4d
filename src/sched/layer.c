/*
 * The layer table: registration, the strategy choice, and dd_model_commit,
 * which checks that every worker registered the same table, makes the
 * replicas equal and starts the engine.
 */
#include "core/dtype.h"
#include "core/log.h"
#include "sched/route/route.h"
#include "sched/sched.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The options the scheduler checks at creation, beyond their parsers. */
static dd_status_t dd_sched_check_opts(const dd_sched_opts_t *o)
{
    if (o->adaptive_kmin > o->adaptive_kmax) {
        return dd_error(
            DD_ERR_INVALID_CONFIG, DD_SUBSYS_SCHED,
            "DREAMDDP_ADAPTIVE_KMIN=%d and DREAMDDP_ADAPTIVE_KMAX=%d disagree: "
            "the minimum must not exceed the maximum",
            o->adaptive_kmin, o->adaptive_kmax);
    }
    if (o->chunk_bytes < 64 || o->chunk_bytes % 8 != 0) {
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_SCHED,
                        "invalid value DREAMDDP_CHUNK_BYTES=%zu: expected a "
                        "multiple of 8 bytes, at least 64",
                        o->chunk_bytes);
    }
    return DD_OK;
}

dd_status_t dd_sched_create(const dd_sched_env_t *env, dd_sched_t **sched_p)
{
    const dd_sched_codec_t *codec;
    dd_status_t status;
    dd_sched_t *sched = calloc(1, sizeof(*sched));

    if (sched == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the scheduler");
    }
    sched->env = *env;
    sched->opts = *env->opts;
    dd_sched_routes_init(sched);
    if (dd_strategy_parse(sched->opts.strategy, &sched->strategy) != DD_OK) {
        status = dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_SCHED,
                          "invalid value DREAMDDP_STRATEGY='%s': expected %s",
                          env->opts->strategy, DD_STRATEGY_ACCEPTED);
        goto err_free_sched;
    }
    if ((status = dd_sched_check_opts(&sched->opts)) != DD_OK) {
        goto err_free_sched;
    }
    if (dd_sched_split_parse(sched) != DD_OK) {
        status = DD_ERR_INVALID_CONFIG;
        goto err_free_sched;
    }
    if (dd_route_codec_open(&sched->comp.codecs,
                            "invalid value DREAMDDP_COMPRESSION=",
                            sched->opts.compression, &codec) != DD_OK) {
        status = DD_ERR_INVALID_CONFIG;
        goto err_free_codecs;
    }
    dd_strategy_format(&sched->strategy, sched->strategy_name,
                       sizeof(sched->strategy_name));
    pthread_mutex_init(&sched->ready_lock, NULL);
    *sched_p = sched;
    return DD_OK;

err_free_codecs:
    dd_sched_codecs_free(sched);
err_free_sched:
    free(sched);
    return status;
}

void dd_sched_quiesce(dd_sched_t *sched)
{
    if (sched == NULL) {
        return;
    }
    dd_sched_delay_quiesce(sched);
    dd_engine_stop(sched->engine);
    sched->engine = NULL;
    dd_sched_routes_quiesce(sched);
}

void dd_sched_destroy(dd_sched_t *sched)
{
    if (sched == NULL) {
        return;
    }
    dd_sched_quiesce(sched);
    dd_sync_job_free_list(sched->group);
    dd_sched_device_free(sched);
    dd_sched_routes_free(sched);
    dd_timeline_close(sched->timeline);
    dd_plan_free(sched->plan);
    dd_sched_plan_file_free(sched);
    dd_plan_free(sched->trial.extras);
    free(sched->hold);
    free(sched->agree.v);
    free(sched->agree.mine);
    free(sched->agree.all);
    dd_sched_codecs_free(sched);
    dd_sched_delay_free(sched);
    dd_sched_split_free(sched);
    for (size_t i = 0; i < sched->n_layers; i++) {
        free(sched->layers[i]->name);
        free(sched->layers[i]->tensors);
        free(sched->layers[i]);
    }
    free(sched->layers);
    free(sched->name_slot);
    pthread_mutex_destroy(&sched->ready_lock);
    free(sched);
}

#define DD_TENSOR_FIELDS (DD_TENSOR_FIELD_DEVICE | DD_TENSOR_FIELD_SHAPE)

/* A tensor as the layer keeps it: the optional fields its field_mask does
 * not name are 0 (a mask of 0 names them all: programs that set none, or
 * were built before the mask). */
static dd_tensor_t dd_tensor_masked(const dd_tensor_t *x)
{
    dd_tensor_t t = *x;

    if (t.field_mask != 0 && !(t.field_mask & DD_TENSOR_FIELD_DEVICE)) {
        t.device = 0;
    }
    if (t.field_mask != 0 && !(t.field_mask & DD_TENSOR_FIELD_SHAPE)) {
        t.rows = t.cols = 0;
    }
    t.field_mask = DD_TENSOR_FIELDS;
    return t;
}

/* The slot of name in the name index: the one holding it, or the empty
 * one where it would go. */
static size_t dd_layer_name_slot(const dd_sched_t *sched, const char *name)
{
    size_t mask = sched->name_cap - 1;
    size_t i = (size_t)dd_route_fnv(0xcbf29ce484222325ull, name, strlen(name));

    for (i &= mask; sched->name_slot[i] != 0; i = (i + 1) & mask) {
        if (strcmp(sched->layers[sched->name_slot[i] - 1]->name, name) == 0) {
            break;
        }
    }
    return i;
}

/* Indexes layer n_layers - 1 by name, the index grown to keep it at most
 * half full; DD_ERR_NO_MEMORY. */
static dd_status_t dd_layer_name_add(dd_sched_t *sched)
{
    if (2 * sched->n_layers > sched->name_cap) {
        size_t cap = sched->name_cap ? 2 * sched->name_cap : 64;
        size_t *slot = calloc(cap, sizeof(*slot));
        if (slot == NULL) {
            return DD_ERR_NO_MEMORY;
        }
        free(sched->name_slot);
        sched->name_slot = slot;
        sched->name_cap = cap;
        for (size_t l = 0; l + 1 < sched->n_layers; l++) {
            sched
                ->name_slot[dd_layer_name_slot(sched, sched->layers[l]->name)] =
                l + 1;
        }
    }
    sched->name_slot[dd_layer_name_slot(
        sched, sched->layers[sched->n_layers - 1]->name)] = sched->n_layers;
    return DD_OK;
}

static dd_status_t dd_layer_check(dd_sched_t *sched, const char *name,
                                  const dd_tensor_t *tensors, size_t n)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > 200 ||
        strpbrk(name, " \n\t") != NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_register: a layer name must be 1 to 200 "
                        "characters without blanks");
    }
    if (sched->name_cap > 0 &&
        sched->name_slot[dd_layer_name_slot(sched, name)] != 0) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_register: layer '%s' is registered twice",
                        name);
    }
    if (tensors == NULL || n == 0) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_register: layer '%s' has no tensors", name);
    }
    size_t bytes = 0;
    for (size_t t = 0; t < n; t++) {
        if (tensors[t].field_mask & ~(uint64_t)DD_TENSOR_FIELDS) {
            return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                            "dd_layer_register: layer '%s' tensor %zu has "
                            "field_mask bits 0x%llx that this library does "
                            "not know (built against a newer dreamddp.h?)",
                            name, t,
                            (unsigned long long)(tensors[t].field_mask &
                                                 ~(uint64_t)DD_TENSOR_FIELDS));
        }
        dd_tensor_t x = dd_tensor_masked(&tensors[t]);
        if (dd_dtype_size(tensors[t].dtype) == 0 ||
            (tensors[t].mem_type != DD_MEM_HOST &&
             tensors[t].mem_type != DD_MEM_CUDA) ||
            (tensors[t].param == NULL && tensors[t].count > 0)) {
            return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                            "dd_layer_register: layer '%s' tensor %zu has "
                            "an invalid dtype, memory type or parameter "
                            "buffer",
                            name, t);
        }
        size_t es = dd_dtype_size(tensors[t].dtype);
        if (tensors[t].count > (size_t)PTRDIFF_MAX / es ||
            tensors[t].count * es > (size_t)PTRDIFF_MAX - bytes) {
            return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                            "dd_layer_register: layer '%s' tensor %zu: %zu "
                            "elements of %zu bytes make the layer larger "
                            "than any buffer can be (%zu bytes at most)",
                            name, t, tensors[t].count, es, (size_t)PTRDIFF_MAX);
        }
        bytes += tensors[t].count * es;
        size_t rows = x.rows, cols = x.cols;
        if ((rows == 0) != (cols == 0) ||
            (rows != 0 &&
             (cols > SIZE_MAX / rows || rows * cols != tensors[t].count))) {
            return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                            "dd_layer_register: layer '%s' tensor %zu of %zu "
                            "elements is shaped %zu x %zu: expected rows x "
                            "cols = count, or 0 x 0 for a vector",
                            name, t, tensors[t].count, rows, cols);
        }
    }
    return DD_OK;
}

dd_status_t dd_sched_layer_register(dd_sched_t *sched, const char *name,
                                    const dd_tensor_t *tensors,
                                    size_t n_tensors, dd_layer_h *layer_p)
{
    dd_status_t status;

    if (sched->env.job->role != DD_ROLE_WORKER || sched->committed) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED, "dd_layer_register: %s",
                        sched->committed ? "the model is already committed"
                                         : "aggregators hold no layers");
    }
    status = dd_layer_check(sched, name, tensors, n_tensors);
    if (status == DD_OK) {
        status = dd_sched_device_check(sched, name, tensors, n_tensors);
    }
    if (status != DD_OK) {
        return status;
    }
    if (sched->n_layers == sched->cap_layers) {
        size_t cap = sched->cap_layers ? sched->cap_layers * 2 : 16;
        struct dd_layer **layers =
            realloc(sched->layers, cap * sizeof(*layers));
        if (layers == NULL) {
            return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                            "no memory for the layer table");
        }
        sched->layers = layers;
        sched->cap_layers = cap;
    }
    struct dd_layer *layer = calloc(1, sizeof(*layer));
    if (layer == NULL || (layer->name = strdup(name)) == NULL ||
        (layer->tensors = malloc(n_tensors * sizeof(dd_tensor_t))) == NULL) {
        if (layer != NULL) {
            free(layer->name);
        }
        free(layer);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for layer '%s'", name);
    }
    for (size_t t = 0; t < n_tensors; t++) {
        layer->tensors[t] = dd_tensor_masked(&tensors[t]);
    }
    layer->n_tensors = n_tensors;
    layer->sched = sched;
    layer->index = sched->n_layers;
    layer->device = -1;
    for (size_t t = 0; t < n_tensors; t++) {
        layer->bytes += tensors[t].count * dd_dtype_size(tensors[t].dtype);
        if (tensors[t].mem_type == DD_MEM_CUDA && layer->device < 0) {
            layer->device = layer->tensors[t].device;
        }
    }
    sched->layers[sched->n_layers++] = layer;
    if (dd_layer_name_add(sched) != DD_OK) {
        sched->n_layers--;
        free(layer->tensors);
        free(layer->name);
        free(layer);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                        "no memory for the layer table");
    }
    if (layer_p != NULL) {
        *layer_p = layer;
    }
    return DD_OK;
}

dd_status_t dd_sched_strategy_set(dd_sched_t *sched, const char *strategy)
{
    dd_strategy_t parsed;

    if (sched->committed) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "dd_strategy_set: the model is already committed");
    }
    if (strategy == NULL || dd_strategy_parse(strategy, &parsed) != DD_OK) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_strategy_set: invalid strategy '%s': expected %s",
                        strategy ? strategy : "(null)", DD_STRATEGY_ACCEPTED);
    }
    sched->strategy = parsed;
    dd_strategy_format(&parsed, sched->strategy_name,
                       sizeof(sched->strategy_name));
    return DD_OK;
}

/* One line per layer: "name count:dtype,count:dtype", a tensor without a
 * gradient marked ":nograd", since ddp treats it differently, and a shaped
 * one ":ROWSxCOLS". */
static char *dd_sched_table_text(dd_sched_t *sched)
{
    size_t size = 64;
    for (size_t i = 0; i < sched->n_layers; i++) {
        size += strlen(sched->layers[i]->name) + 40 +
                strlen(dd_sched_layer_codec_spec(sched, sched->layers[i])) +
                80 * sched->layers[i]->n_tensors;
    }
    char *text = malloc(size);
    size_t o = 0;
    for (size_t i = 0; text != NULL && i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        o += (size_t)snprintf(text + o, size - o, "%s", l->name);
        for (size_t t = 0; t < l->n_tensors; t++) {
            const dd_tensor_t *x = &l->tensors[t];
            o += (size_t)snprintf(
                text + o, size - o, "%c%zu:%s%s", t ? ',' : ' ', x->count,
                dd_dtype_name(x->dtype), x->grad ? "" : ":nograd");
            /* powersgd factors by the shape: every worker the same. */
            if (x->rows != 0) {
                o += (size_t)snprintf(text + o, size - o, ":%zux%zu", x->rows,
                                      x->cols);
            }
        }
        /* Every worker must send a layer in the same codec. */
        o += (size_t)snprintf(text + o, size - o, " as %s\n",
                              dd_sched_layer_codec_spec(sched, l));
    }
    if (text != NULL && sched->n_layers == 0) {
        text[0] = '\0';
    }
    return text;
}

/* Index of the first line where a and b differ; the lines go to la, lb. */
static size_t dd_sched_first_diff(const char *a, const char *b, char *la,
                                  char *lb, size_t size)
{
    for (size_t line = 0;; line++) {
        size_t na = strcspn(a, "\n"), nb = strcspn(b, "\n");
        if (na != nb || strncmp(a, b, na) != 0 || !*a || !*b) {
            snprintf(la, size, "%.*s", (int)na, *a ? a : "(no layer)");
            snprintf(lb, size, "%.*s", (int)nb, *b ? b : "(no layer)");
            if (!*a) {
                snprintf(la, size, "(no layer)");
            }
            if (!*b) {
                snprintf(lb, size, "(no layer)");
            }
            return line;
        }
        a += na + (a[na] == '\n');
        b += nb + (b[nb] == '\n');
    }
}

/* Waits for the table of every worker; tables[r] is NULL for aggregators. */
static dd_status_t dd_sched_gather_tables(dd_sched_t *sched, char **tables)
{
    const dd_job_t *job = sched->env.job;
    int world = job->world_size;
    char key[64];

    for (int r = 0; r < world; r++) {
        if (job->roles[r] != DD_ROLE_WORKER) {
            continue;
        }
        snprintf(key, sizeof(key), "dd/layers/%d", r);
        size_t len;
        dd_status_t status =
            dd_store_get(job->store, key, (void **)&tables[r], &len);
        if (status == DD_ERR_TIMED_OUT) {
            return dd_error(
                DD_ERR_TIMED_OUT, DD_SUBSYS_SCHED,
                "dd_model_commit: worker rank %d did not commit "
                "its layer table within %.0f s (DREAMDDP_TIMEOUT_S)",
                r, job->timeout_s);
        }
        if (status != DD_OK) {
            return status;
        }
    }
    return DD_OK;
}

/* Compares every worker's table to the first worker's; names the first
 * differing layer and every rank that differs. */
static dd_status_t dd_sched_compare_tables(dd_sched_t *sched, char **tables)
{
    int world = sched->env.job->world_size, ref = -1, worst = -1;
    size_t first = (size_t)-1;
    char ranks[256] = "", la[256], lb[256], wa[256] = "", wb[256] = "";

    for (int r = 0; r < world; r++) {
        if (tables[r] == NULL) {
            continue;
        }
        if (ref < 0) {
            ref = r;
            continue;
        }
        if (strcmp(tables[r], tables[ref]) == 0) {
            continue;
        }
        size_t line =
            dd_sched_first_diff(tables[ref], tables[r], la, lb, sizeof(la));
        size_t o = strlen(ranks);
        snprintf(ranks + o, sizeof(ranks) - o, "%s%d", o ? ", " : "", r);
        if (line < first) {
            first = line;
            worst = r;
            snprintf(wa, sizeof(wa), "%s", la);
            snprintf(wb, sizeof(wb), "%s", lb);
        }
    }
    if (worst < 0) {
        return DD_OK;
    }
    return dd_error(DD_ERR_MISMATCH, DD_SUBSYS_SCHED,
                    "layer tables differ from rank %d's on rank(s) %s; the "
                    "first difference is layer %zu: rank %d has '%s', rank "
                    "%d has '%s'",
                    ref, ranks, first, ref, wa, worst, wb);
}

/* The first worker's check: every worker's table read and compared. */
static dd_status_t dd_sched_gather_compare_tables(dd_sched_t *sched)
{
    int world = sched->env.job->world_size;
    char **tables = calloc((size_t)world, sizeof(char *));
    dd_status_t status = tables != NULL
                             ? dd_sched_gather_tables(sched, tables)
                             : dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                                        "no memory for %d layer tables", world);

    if (status == DD_OK) {
        status = dd_sched_compare_tables(sched, tables);
    }
    for (int r = 0; tables != NULL && r < world; r++) {
        free(tables[r]);
    }
    free(tables);
    return status;
}

dd_status_t dd_sched_check_tables(dd_sched_t *sched)
{
    const dd_job_t *job = sched->env.job;
    char key[64];
    char *mine = dd_sched_table_text(sched);
    dd_status_t status = mine != NULL
                             ? DD_OK
                             : dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                                        "no memory for the layer table");

    if (status == DD_OK) {
        snprintf(key, sizeof(key), "dd/layers/%d", job->rank);
        status = dd_store_set(job->store, key, mine, strlen(mine));
    }
    free(mine);
    return status != DD_OK
               ? status
               : dd_sched_first_verdict(sched, "layers", "layer tables",
                                        dd_sched_gather_compare_tables);
}

/*
 * What the strategy in force needs of each tensor (dd_strategy_set may
 * change it until now). ddp averages gradients: a tensor without one is a
 * buffer, taken from the first worker, but one whose gradient is its
 * parameter buffer would overwrite the parameters. adaptive sets a layer's
 * period from its gradient norm: a layer with no gradient at all has none.
 * The tables agree, so every worker fails alike.
 */
static dd_status_t dd_sched_check_buffers(dd_sched_t *sched)
{
    dd_strategy_kind_t kind = sched->strategy.kind;

    for (size_t i = 0; i < sched->n_layers; i++) {
        const struct dd_layer *l = sched->layers[i];
        size_t with_grad = 0, first = (size_t)-1;
        for (size_t t = 0; t < l->n_tensors; t++) {
            const dd_tensor_t *x = &l->tensors[t];
            if (x->count == 0) {
                continue;
            }
            first = first == (size_t)-1 ? t : first;
            with_grad += x->grad != NULL;
            if (kind == DD_STRATEGY_DDP && x->grad == x->param) {
                return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                                "dd_model_commit: layer '%s' tensor %zu: "
                                "its gradient buffer is its parameter "
                                "buffer; ddp would average the parameters "
                                "as gradients",
                                l->name, t);
            }
        }
        if (kind == DD_STRATEGY_ADAPTIVE && with_grad == 0 &&
            first != (size_t)-1) {
            return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                            "dd_model_commit: layer '%s' tensor %zu has no "
                            "gradient (grad is NULL), nor has any other "
                            "tensor of the layer, and adaptive sets a "
                            "layer's period from its gradient norm; give it "
                            "a gradient buffer, register its tensors with a "
                            "layer that has one, or choose another strategy",
                            l->name, first);
        }
    }
    return DD_OK;
}

/* Host tensors smaller than this are broadcast together, packed in order
 * into one message of at most this many bytes: a collective per tensor
 * took 3.42 s to commit 10,000 tiny layers on 4 ranks of one host. */
#define DD_SCHED_BCAST_BYTES ((size_t)4 << 20)

/* A broadcast from worker rank 0 of count elements of dtype at buf. */
static dd_status_t dd_sched_bcast(dd_sched_t *sched, void *buf, size_t count,
                                  dd_dtype_t dtype, dd_mem_type_t mem_type,
                                  int device)
{
    dd_sched_coll_t bcast = {.coll = DD_COLL_BROADCAST,
                             .args = {.sendbuf = buf,
                                      .recvbuf = buf,
                                      .count = count,
                                      .dtype = dtype,
                                      .root = 0,
                                      .mem_type = mem_type},
                             .device = device};
    return dd_sched_collective(sched, &bcast);
}

/* The batch of host tensors [from, to) of the flat list, packed, sent
 * and unpacked. */
typedef struct {
    const dd_tensor_t **x;
    const char **layer; /* each tensor's layer's name */
    size_t n;
} dd_sched_bcast_list_t;

static dd_status_t dd_sched_bcast_batch(dd_sched_t *sched,
                                        const dd_sched_bcast_list_t *list,
                                        size_t from, size_t to,
                                        unsigned char *buf)
{
    size_t off = 0;
    dd_status_t status;

    if (from == to) {
        return DD_OK;
    }
    for (size_t i = from; i < to; i++) {
        size_t b = list->x[i]->count * dd_coll_dtype_size(list->x[i]->dtype);
        memcpy(buf + off, list->x[i]->param, b);
        off += b;
    }
    status = dd_sched_bcast(sched, buf, off, DD_DTYPE_U8, DD_MEM_HOST, -1);
    if (status != DD_OK) {
        return dd_error(status, DD_SUBSYS_SCHED,
                        "dd_model_commit: broadcasting layers '%s' to '%s' "
                        "failed: %s",
                        list->layer[from], list->layer[to - 1],
                        dd_status_string(status));
    }
    off = 0;
    for (size_t i = from; i < to; i++) {
        size_t b = list->x[i]->count * dd_coll_dtype_size(list->x[i]->dtype);
        memcpy(list->x[i]->param, buf + off, b);
        off += b;
    }
    return DD_OK;
}

/* Every replica starts from the first worker's parameters: worker rank
 * 0's to every worker, in the agreed layer order; every rank cuts the same
 * batches, since the layer table is agreed. */
static dd_status_t dd_sched_broadcast_params(dd_sched_t *sched)
{
    size_t total = 0;
    for (size_t i = 0; i < sched->n_layers; i++) {
        total += sched->layers[i]->n_tensors;
    }
    dd_sched_bcast_list_t list = {
        .x = malloc((total ? total : 1) * sizeof(*list.x)),
        .layer = malloc((total ? total : 1) * sizeof(*list.layer))};
    unsigned char *buf = malloc(DD_SCHED_BCAST_BYTES);
    dd_status_t status = DD_OK;

    if (list.x == NULL || list.layer == NULL || buf == NULL) {
        status = dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_SCHED,
                          "dd_model_commit: no memory for the parameters' "
                          "broadcast");
    }
    for (size_t i = 0; status == DD_OK && i < sched->n_layers; i++) {
        for (size_t t = 0; t < sched->layers[i]->n_tensors; t++) {
            list.x[list.n] = &sched->layers[i]->tensors[t];
            list.layer[list.n++] = sched->layers[i]->name;
        }
    }
    size_t from = 0, bytes = 0;
    for (size_t i = 0; status == DD_OK && i < list.n; i++) {
        const dd_tensor_t *x = list.x[i];
        size_t b = x->count * dd_coll_dtype_size(x->dtype);
        if (x->mem_type == DD_MEM_HOST && b < DD_SCHED_BCAST_BYTES) {
            if (bytes + b > DD_SCHED_BCAST_BYTES) {
                status = dd_sched_bcast_batch(sched, &list, from, i, buf);
                from = i;
                bytes = 0;
            }
            bytes += b;
            continue;
        }
        /* Large or device memory: alone, after the batch before it. */
        status = dd_sched_bcast_batch(sched, &list, from, i, buf);
        if (status == DD_OK &&
            (status = dd_sched_bcast(sched, x->param, x->count, x->dtype,
                                     x->mem_type, x->device)) != DD_OK) {
            status = dd_error(status, DD_SUBSYS_SCHED,
                              "dd_model_commit: broadcasting layer '%s' "
                              "failed: %s",
                              list.layer[i], dd_status_string(status));
        }
        from = i + 1;
        bytes = 0;
    }
    if (status == DD_OK) {
        status = dd_sched_bcast_batch(sched, &list, from, list.n, buf);
    }
    free(buf);
    free(list.x);
    free(list.layer);
    return status;
}

_Static_assert(DD_ENGINE_MAX_CHANNELS == DD_PLAN_MAX_CHANNELS,
               "the engine runs the channels the planner models");

static unsigned dd_sched_assign(void *arg, uint64_t step, double work)
{
    return dd_plan_assign_next(arg, step, work);
}

/* The engine puts each job on the channel the planner's rule gives. */
static void dd_sched_assign_init(dd_sched_t *sched)
{
    dd_plan_assign_init(&sched->assign, (unsigned)dd_sched_channels(sched));
    dd_engine_set_assign(sched->engine, dd_sched_assign, &sched->assign);
}

dd_status_t dd_sched_commit(dd_sched_t *sched)
{
    dd_status_t status;

    if (sched->env.job->role != DD_ROLE_WORKER || sched->committed) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED, "dd_model_commit: %s",
                        sched->committed ? "called twice"
                                         : "aggregators hold no model");
    }
    if (sched->n_layers == 0) {
        return dd_error(DD_ERR_STATE, DD_SUBSYS_SCHED,
                        "dd_model_commit: no layer is registered");
    }
    dd_sched_plan_read(sched);
    if ((status = dd_sched_check_settings(sched)) != DD_OK ||
        (status = dd_sched_plan_readable(sched)) != DD_OK ||
        (status = dd_sched_check_tables(sched)) != DD_OK ||
        (status = dd_sched_check_buffers(sched)) != DD_OK ||
        (status = dd_sched_split_commit(sched)) != DD_OK ||
        (status = dd_sched_delay_commit(sched)) != DD_OK ||
        (dd_sched_routes_depth(sched), 0) ||
        (status = dd_sched_broadcast_params(sched)) != DD_OK ||
        (status = dd_sched_codecs_commit(sched)) != DD_OK ||
        (status = dd_sched_routes_commit(sched)) != DD_OK ||
        (status = dd_engine_start_channels(sched->routes.host,
                                           dd_sched_channels(sched),
                                           &sched->engine)) != DD_OK ||
        (dd_engine_set_abort(sched->engine, sched->env.job->abort,
                             sched->env.job->timeout_s),
         dd_sched_assign_init(sched), 0) ||
        (status = dd_sched_fit_network(sched)) != DD_OK) {
        return status;
    }
    dd_log_info(DD_SUBSYS_SCHED, "progress engine: %d channel%s",
                dd_sched_channels(sched),
                dd_sched_channels(sched) == 1 ? "" : "s");
    if (sched->opts.timeline != NULL) {
        status = dd_timeline_open(sched, &sched->timeline);
        if (status != DD_OK) {
            return status;
        }
    }
    /* adaptive starts every layer at DREAMDDP_ADAPTIVE_KSTART: from K_MIN, a
     * steady gradient norm (no ratio past either threshold) would keep it
     * syncing every step for good. */
    const dd_sched_opts_t *o = &sched->opts;
    int kstart = o->adaptive_kstart < o->adaptive_kmin   ? o->adaptive_kmin
                 : o->adaptive_kstart > o->adaptive_kmax ? o->adaptive_kmax
                                                         : o->adaptive_kstart;
    for (size_t i = 0; i < sched->n_layers; i++) {
        struct dd_layer *l = sched->layers[i];
        l->period = sched->strategy.kind == DD_STRATEGY_ADAPTIVE
                        ? kstart
                        : (int)sched->strategy.window;
        l->stats.period = l->period;
    }
    sched->committed = 1;
    char network[96] = "";
    if (sched->alpha_s > 0) {
        snprintf(network, sizeof(network), ", network %.1f us + %.3f ns/byte",
                 sched->alpha_s * 1e6, sched->beta_s * 1e9);
    }
    dd_log_info(DD_SUBSYS_SCHED,
                "committed %zu layers, strategy %s, route %s, compression "
                "%s%s",
                sched->n_layers, sched->strategy_name, sched->routes.name,
                sched->comp.spec != NULL ? sched->comp.spec
                                         : sched->opts.compression,
                network);
    return DD_OK;
}

const char *dd_layer_name(dd_layer_h layer)
{
    return layer->name;
}

/* A cut layer's totals from its parts' (split.c): the syncs that covered
 * every part (the fewest of any part), bytes, wire and backward time
 * summed, the divergence the largest of the parts'. */
static void dd_sched_whole_stats(const struct dd_layer *layer,
                                 dd_layer_stats_t *st, double *bp_p)
{
    memset(st, 0, sizeof(*st));
    *bp_p = 0;
    for (size_t j = 0; j < layer->split.n; j++) {
        const struct dd_layer *p = layer->split.parts[j];
        const dd_layer_stats_t *q = &p->stats;
        if (j == 0 || q->syncs < st->syncs) {
            st->syncs = q->syncs;
        }
        if (j == 0 || q->extra_syncs < st->extra_syncs) {
            st->extra_syncs = q->extra_syncs;
        }
        if (j == 0 || q->divergence_agreed < st->divergence_agreed) {
            st->divergence_agreed = q->divergence_agreed;
        }
        st->bytes += q->bytes;
        st->wire_s += q->wire_s;
        *bp_p += p->bp_s;
        st->period = q->period;
        st->divergence =
            q->divergence > st->divergence ? q->divergence : st->divergence;
        st->divergence_max = q->divergence_max > st->divergence_max
                                 ? q->divergence_max
                                 : st->divergence_max;
        st->divergence_mean = q->divergence_mean > st->divergence_mean
                                  ? q->divergence_mean
                                  : st->divergence_mean;
    }
}

dd_status_t dd_sched_layer_stats(dd_sched_t *sched, dd_layer_h layer,
                                 dd_layer_stats_t *stats_p)
{
    if (layer == NULL || layer->sched != sched || stats_p == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_SCHED,
                        "dd_layer_stats: %s",
                        stats_p == NULL ? "stats_p is NULL"
                                        : "not a layer of this context");
    }
    uint64_t m = stats_p->field_mask;
    dd_status_t status = dd_sched_check_fields(
        "dd_layer_stats", "dd_layer_stats_t", m, DD_SCHED_LAYER_STATS_FIELDS);
    if (status != DD_OK) {
        return status;
    }
    dd_layer_stats_t whole;
    const dd_layer_stats_t *st = &layer->stats;
    double bp_s = layer->bp_s;
    if (layer->split.n > 0) {
        dd_sched_whole_stats(layer, &whole, &bp_s);
        st = &whole;
    }
    /* Only the fields the caller asked for: the others stay the caller's. */
    if (m & DD_LAYER_STATS_FIELD_SYNCS) {
        stats_p->syncs = st->syncs;
    }
    if (m & DD_LAYER_STATS_FIELD_BYTES) {
        stats_p->bytes = st->bytes;
    }
    if (m & DD_LAYER_STATS_FIELD_WIRE_S) {
        stats_p->wire_s = st->wire_s;
    }
    if (m & DD_LAYER_STATS_FIELD_BP_S) {
        stats_p->bp_s = bp_s;
    }
    if (m & DD_LAYER_STATS_FIELD_PERIOD) {
        stats_p->period = st->period;
    }
    if (m & DD_LAYER_STATS_FIELD_EXTRA_SYNCS) {
        stats_p->extra_syncs = st->extra_syncs;
    }
    if (m & DD_LAYER_STATS_FIELD_DIVERGENCE) {
        stats_p->divergence = st->divergence;
    }
    if (m & DD_LAYER_STATS_FIELD_DIVERGENCE_MAX) {
        stats_p->divergence_max = st->divergence_max;
    }
    if (m & DD_LAYER_STATS_FIELD_DIVERGENCE_MEAN) {
        stats_p->divergence_mean = st->divergence_mean;
    }
    if (m & DD_LAYER_STATS_FIELD_DIVERGENCE_AGREED) {
        stats_p->divergence_agreed = st->divergence_agreed;
    }
    return DD_OK;
}
