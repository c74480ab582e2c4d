/*
 * train_mlp: trains a multi-layer perceptron from scratch with dreamddp.
 *
 * The data: a deterministic synthetic classification set. Inputs are
 * Gaussian; labels come from a fixed random "teacher" network with some
 * label noise, so the task is learnable but not trivial. Every rank draws
 * its own shard of training data; the held-out set is the same everywhere.
 * With --data noniid each worker's shard is skewed by label, as in the
 * federated-learning benchmarks: for every label, the workers' shares of
 * it come from a Dirichlet distribution with alpha 0.5, fixed by --seed,
 * and a worker keeps a drawn example with probability proportional to its
 * share of the example's label. The held-out set stays balanced, so
 * replicas that drift apart between syncs show it.
 *
 * The model: 32 -> 384 -> 384 -> 256 -> 128 -> 10, ReLU, softmax
 * cross-entropy, about 293 thousand parameters, trained with SGD and
 * momentum. Forward and backward are written out per layer, and each
 * layer tells dreamddp when its backward is done (dd_layer_ready), which
 * is where its synchronization starts, and when its forward is about to
 * read its weights (dd_layer_forward), where a delayed average ("+next",
 * --strategy dreamddp:4+next) lands.
 *
 *   ddrun -n 4 -- examples/train_mlp --strategy dreamddp:4 --steps 300
 *
 * Aggregator ranks (ddrun --aggregators K) hold no model and serve.
 */
#include <dreamddp.h>

#include "argnum.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_IN 32
#define N_OUT 10
#define N_LAYERS 5
#define TEACHER_HIDDEN 48
#define LABEL_NOISE 0.02
#define TEST_SIZE 2000
#define NONIID_ALPHA 0.5

static const int widths[N_LAYERS + 1] = {N_IN, 384, 384, 256, 128, N_OUT};

typedef struct {
    int in, out;
    float *w, *b;   /* parameters: w is out x in, row-major */
    float *gw, *gb; /* gradients */
    float *vw, *vb; /* momentum */
    dd_layer_h handle;
} layer_t;

typedef struct {
    const char *strategy;
    const char *compression; /* NULL: DREAMDDP_COMPRESSION */
    int steps, batch, json, log_every;
    double lr, momentum;
    unsigned seed;
    int noniid;       /* --data noniid */
    int global;       /* --data global */
    int no_marks;     /* --no-forward-marks */
    int commit_every; /* --commit-every */
} options_t;

/* ---- a small deterministic random number generator ---------------------- */

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64: good enough for data and initialization, and the same
     * on every machine. */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

static double rng_normal(uint64_t *s)
{
    double u = rng_uniform(s) + 1e-12, v = rng_uniform(s);
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* A Gamma(shape, 1) variate (Marsaglia and Tsang; shape < 1 boosted). */
static double rng_gamma(uint64_t *s, double shape)
{
    if (shape < 1) {
        double u = rng_uniform(s) + 1e-300;
        return rng_gamma(s, shape + 1) * pow(u, 1 / shape);
    }
    double d = shape - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double x = rng_normal(s), v = 1 + c * x;
        if (v <= 0) {
            continue;
        }
        v = v * v * v;
        double u = rng_uniform(s) + 1e-300;
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) {
            return d * v;
        }
    }
}

/* ---- the data ------------------------------------------------------------ */

/* --data noniid: keep[c] is the chance that this worker keeps a drawn
 * example of label c. Every worker draws the same Dirichlet(alpha) shares
 * of each label over the workers (from the seed alone) and takes its own,
 * scaled so that its most frequent label is always kept. */
static void noniid_init(double *keep, unsigned seed, int worker, int workers)
{
    uint64_t s = seed * 15485863ull + 11;
    double best = 0;
    for (int c = 0; c < N_OUT; c++) {
        double sum = 0, mine = 0;
        for (int w = 0; w < workers; w++) {
            double g = rng_gamma(&s, NONIID_ALPHA);
            sum += g;
            mine = w == worker ? g : mine;
        }
        keep[c] = sum > 0 ? mine / sum : 0;
        best = keep[c] > best ? keep[c] : best;
    }
    for (int c = 0; c < N_OUT; c++) {
        keep[c] = best > 0 ? keep[c] / best : 1;
    }
}

typedef struct {
    float w1[TEACHER_HIDDEN][N_IN], w2[N_OUT][TEACHER_HIDDEN];
} teacher_t;

static void teacher_init(teacher_t *t, unsigned seed)
{
    uint64_t s = seed * 7919ull + 1;
    for (int i = 0; i < TEACHER_HIDDEN; i++) {
        for (int j = 0; j < N_IN; j++) {
            t->w1[i][j] = (float)(rng_normal(&s) * 0.3 / sqrt(N_IN));
        }
    }
    for (int i = 0; i < N_OUT; i++) {
        for (int j = 0; j < TEACHER_HIDDEN; j++) {
            t->w2[i][j] = (float)(rng_normal(&s) * 3 / sqrt(TEACHER_HIDDEN));
        }
    }
}

/* Draws n examples from stream s: inputs x (n x N_IN) and labels y; with
 * keep, an example of label c is kept with probability keep[c]. */
static void draw(const teacher_t *t, uint64_t *s, int n, float *x, int *y,
                 const double *keep)
{
    for (int k = 0; k < n; k++) {
        float *xk = x + (size_t)k * N_IN, h[TEACHER_HIDDEN];
        for (int j = 0; j < N_IN; j++) {
            xk[j] = (float)rng_normal(s);
        }
        for (int i = 0; i < TEACHER_HIDDEN; i++) {
            float a = 0;
            for (int j = 0; j < N_IN; j++) {
                a += t->w1[i][j] * xk[j];
            }
            h[i] = tanhf(a);
        }
        int best = 0;
        float best_v = -INFINITY;
        for (int i = 0; i < N_OUT; i++) {
            float a = 0;
            for (int j = 0; j < TEACHER_HIDDEN; j++) {
                a += t->w2[i][j] * h[j];
            }
            if (a > best_v) {
                best_v = a;
                best = i;
            }
        }
        y[k] = rng_uniform(s) < LABEL_NOISE ? (int)(rng_next(s) % N_OUT) : best;
        if (keep != NULL && rng_uniform(s) >= keep[y[k]]) {
            k--; /* not this worker's: draw again */
        }
    }
}

/* --data global: worker w of n takes examples [first, first + size) of a
 * global batch of g; returns the size. */
static int64_t global_slice(int64_t g, int w, int n, int64_t *first_p)
{
    int64_t first = g * w / n;
    if (first_p != NULL) {
        *first_p = first;
    }
    return g * (w + 1) / n - first;
}

/* --data global: this worker's slice of step's global batch of g; example
 * i of a step comes from its own stream, whoever draws it. */
static void draw_global(const teacher_t *t, unsigned seed, uint64_t step,
                        int64_t g, int w, int n, float *x, int *y)
{
    int64_t first, size = global_slice(g, w, n, &first);
    for (int64_t k = 0; k < size; k++) {
        uint64_t s = seed * 1000003ull +
                     ((uint64_t)(step * (uint64_t)g) + (uint64_t)(first + k)) *
                         0x632be59bd9b4e019ull;
        draw(t, &s, 1, x + k * N_IN, y + k, NULL);
    }
}

/* ---- the model ------------------------------------------------------------
 */

static float *zeros(size_t n)
{
    float *p = calloc(n, sizeof(float));
    if (p == NULL) {
        fprintf(stderr, "train_mlp: out of memory\n");
        exit(1);
    }
    return p;
}

static void model_init(layer_t *L, unsigned seed)
{
    uint64_t s = seed * 104729ull + 3;
    for (int l = 0; l < N_LAYERS; l++) {
        L[l].in = widths[l];
        L[l].out = widths[l + 1];
        size_t n = (size_t)L[l].in * L[l].out;
        L[l].w = zeros(n);
        L[l].gw = zeros(n);
        L[l].vw = zeros(n);
        L[l].b = zeros(L[l].out);
        L[l].gb = zeros(L[l].out);
        L[l].vb = zeros(L[l].out);
        double scale = sqrt(2.0 / L[l].in); /* He initialization */
        for (size_t i = 0; i < n; i++) {
            L[l].w[i] = (float)(rng_normal(&s) * scale);
        }
    }
}

/* Frees what model_init allocated (after dd_finalize: the library reads
 * the buffers until then). */
static void model_free(layer_t *L)
{
    for (int l = 0; l < N_LAYERS; l++) {
        free(L[l].w);
        free(L[l].gw);
        free(L[l].vw);
        free(L[l].b);
        free(L[l].gb);
        free(L[l].vb);
    }
}

/* act[l] is the input of layer l; act[N_LAYERS] holds the logits. In a
 * training step (ctx set) each layer is marked before it reads its
 * weights: the deadline of its delayed average, a no-op otherwise
 * (--no-forward-marks passes no ctx: the deadline is then the layer's
 * next backward). */
static int forward(dd_context_h ctx, layer_t *L, float **act, int n)
{
    for (int l = 0; l < N_LAYERS; l++) {
        const layer_t *y = &L[l];
        if (ctx != NULL && dd_layer_forward(ctx, y->handle) != DD_OK) {
            return -1;
        }
        for (int k = 0; k < n; k++) {
            const float *in = act[l] + (size_t)k * y->in;
            float *out = act[l + 1] + (size_t)k * y->out;
            for (int i = 0; i < y->out; i++) {
                const float *w = y->w + (size_t)i * y->in;
                float a = y->b[i];
                for (int j = 0; j < y->in; j++) {
                    a += w[j] * in[j];
                }
                out[i] = (l < N_LAYERS - 1 && a < 0) ? 0 : a; /* ReLU */
            }
        }
    }
    return 0;
}

/* Softmax cross-entropy: returns the mean loss and leaves dL/dlogits in
 * delta; counts correct predictions. */
static double loss_and_delta(const float *logits, const int *y, int n,
                             float *delta, int *correct_p)
{
    double loss = 0;
    int correct = 0;
    for (int k = 0; k < n; k++) {
        const float *z = logits + (size_t)k * N_OUT;
        float *d = delta + (size_t)k * N_OUT, m = z[0];
        int arg = 0;
        for (int i = 1; i < N_OUT; i++) {
            if (z[i] > m) {
                m = z[i];
                arg = i;
            }
        }
        double sum = 0;
        for (int i = 0; i < N_OUT; i++) {
            sum += exp(z[i] - m);
        }
        for (int i = 0; i < N_OUT; i++) {
            d[i] = (float)(exp(z[i] - m) / sum / n);
        }
        d[y[k]] -= 1.0f / n;
        loss -= z[y[k]] - m - log(sum);
        correct += arg == y[k];
    }
    *correct_p = correct;
    return loss / n;
}

/*
 * Backward of layer l: from delta (dL/d output, n x out) computes the
 * layer's gradients and, for the layer below, dL/d input into delta_in
 * (masked by that layer's ReLU). The latter reads w, so it is done before
 * the layer is handed to dreamddp, which may average w from then on.
 */
static void backward_layer(layer_t *y, const float *in, const float *delta,
                           float *delta_in, int n)
{
    memset(y->gw, 0, sizeof(float) * (size_t)y->in * y->out);
    memset(y->gb, 0, sizeof(float) * (size_t)y->out);
    for (int k = 0; k < n; k++) {
        const float *x = in + (size_t)k * y->in;
        const float *d = delta + (size_t)k * y->out;
        for (int i = 0; i < y->out; i++) {
            float *g = y->gw + (size_t)i * y->in;
            for (int j = 0; j < y->in; j++) {
                g[j] += d[i] * x[j];
            }
            y->gb[i] += d[i];
        }
    }
    if (delta_in == NULL) {
        return;
    }
    for (int k = 0; k < n; k++) {
        const float *x = in + (size_t)k * y->in;
        const float *d = delta + (size_t)k * y->out;
        float *din = delta_in + (size_t)k * y->in;
        memset(din, 0, sizeof(float) * (size_t)y->in);
        for (int i = 0; i < y->out; i++) {
            const float *w = y->w + (size_t)i * y->in;
            for (int j = 0; j < y->in; j++) {
                din[j] += w[j] * d[i];
            }
        }
        for (int j = 0; j < y->in; j++) {
            din[j] = x[j] > 0 ? din[j] : 0; /* ReLU of the layer below */
        }
    }
}

static void sgd_step(layer_t *L, double lr, double momentum)
{
    for (int l = 0; l < N_LAYERS; l++) {
        size_t n = (size_t)L[l].in * L[l].out;
        for (size_t i = 0; i < n; i++) {
            L[l].vw[i] = (float)(momentum * L[l].vw[i] + L[l].gw[i]);
            L[l].w[i] -= (float)(lr * L[l].vw[i]);
        }
        for (int i = 0; i < L[l].out; i++) {
            L[l].vb[i] = (float)(momentum * L[l].vb[i] + L[l].gb[i]);
            L[l].b[i] -= (float)(lr * L[l].vb[i]);
        }
    }
}

/* Accuracy and loss on the held-out set. */
static double evaluate(layer_t *L, float **act, const float *x, const int *y,
                       int n, int chunk, double *loss_p)
{
    float *delta = zeros((size_t)chunk * N_OUT);
    double loss = 0;
    int correct = 0;
    for (int k = 0; k < n; k += chunk) {
        int m = n - k < chunk ? n - k : chunk, c;
        memcpy(act[0], x + (size_t)k * N_IN, sizeof(float) * m * N_IN);
        forward(NULL, L, act, m);
        loss += loss_and_delta(act[N_LAYERS], y + k, m, delta, &c) * m;
        correct += c;
    }
    free(delta);
    *loss_p = loss / n;
    return (double)correct / n;
}

/* Each layer is one dreamddp layer of two tensors, weights and bias, with
 * their gradient buffers (used by gradient strategies such as ddp). The
 * weights are shaped out x in, as nn.Linear's (powersgd factors them); the
 * bias is a vector. */
static int register_model(dd_context_h ctx, layer_t *L)
{
    char name[32];
    for (int l = 0; l < N_LAYERS; l++) {
        dd_tensor_t t[2] = {{.param = L[l].w,
                             .grad = L[l].gw,
                             .count = (size_t)L[l].in * L[l].out,
                             .dtype = DD_DTYPE_F32,
                             .mem_type = DD_MEM_HOST,
                             .rows = (size_t)L[l].out,
                             .cols = (size_t)L[l].in},
                            {.param = L[l].b,
                             .grad = L[l].gb,
                             .count = (size_t)L[l].out,
                             .dtype = DD_DTYPE_F32,
                             .mem_type = DD_MEM_HOST}};
        snprintf(name, sizeof(name), "fc%d", l + 1);
        if (dd_layer_register(ctx, name, t, 2, &L[l].handle) != DD_OK) {
            return -1;
        }
    }
    return 0;
}

/* The optimizer's state, committed with the model under
 * DREAMDDP_ELASTIC=yes. */
static int register_state(dd_context_h ctx, layer_t *L)
{
    char name[32];
    for (int l = 0; l < N_LAYERS; l++) {
        snprintf(name, sizeof(name), "fc%d.momentum_w", l + 1);
        if (dd_elastic_state_add(ctx, name, L[l].vw,
                                 sizeof(float) * L[l].in * L[l].out)) {
            return -1;
        }
        snprintf(name, sizeof(name), "fc%d.momentum_b", l + 1);
        if (dd_elastic_state_add(ctx, name, L[l].vb,
                                 sizeof(float) * L[l].out)) {
            return -1;
        }
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

typedef struct {
    float *act[N_LAYERS + 1], *delta[N_LAYERS + 1];
    float *x;
    int *y;
} buffers_t;

/* One training step: forward, backward with dd_layer_ready after each
 * layer, dd_step_end (the averages land), then the optimizer. */
static int train_step(dd_context_h ctx, layer_t *L, buffers_t *B,
                      const options_t *o, double *loss_p,
                      dd_step_stats_t *stats)
{
    int correct;
    if (dd_step_begin(ctx) != DD_OK) {
        return -1;
    }
    memcpy(B->act[0], B->x, sizeof(float) * o->batch * N_IN);
    if (forward(o->no_marks ? NULL : ctx, L, B->act, o->batch) != 0) {
        return -1;
    }
    *loss_p = loss_and_delta(B->act[N_LAYERS], B->y, o->batch,
                             B->delta[N_LAYERS], &correct);
    for (int l = N_LAYERS - 1; l >= 0; l--) {
        backward_layer(&L[l], B->act[l], B->delta[l + 1],
                       l > 0 ? B->delta[l] : NULL, o->batch);
        /* This layer's gradients are final and backward no longer reads
         * its weights: dreamddp may start syncing it now. */
        if (dd_layer_ready(ctx, L[l].handle) != DD_OK) {
            return -1;
        }
    }
    if (dd_step_end(ctx, stats) != DD_OK) {
        return -1;
    }
    sgd_step(L, o->lr, o->momentum);
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: train_mlp [--strategy S] [--steps N] [--lr X] "
            "[--batch N] [--seed N]\n"
            "                 [--data iid|noniid|global] [--compression C] "
            "[--json]\n"
            "                 [--no-forward-marks] [--commit-every K]\n"
            "  S: ddp, localsgd:H, plsgd:H, dreamddp:H (each of the last "
            "three also with\n"
            "     +next: delayed averaging), adaptive\n"
            "  C: none, fp16, bf16, topk:RATIO (dd_compression_set: layers of "
            "at least "
            "4096\n"
            "     elements; the last, smaller layer stays dense)\n"
            "  --data iid     every worker draws from the same distribution "
            "(default)\n"
            "  --data global  each step's global batch (--batch times the "
            "first number of\n"
            "                 workers) is fixed by --seed and the step, and "
            "each worker\n"
            "                 takes its slice: a job re-formed with fewer "
            "workers trains on\n"
            "                 the same examples\n"
            "  --data noniid  each worker's shard is skewed by label: the "
            "workers'\n"
            "                 shares of every label follow a Dirichlet split "
            "with\n"
            "                 alpha 0.5, fixed by --seed; the held-out set "
            "stays\n"
            "                 balanced\n"
            "  --no-forward-marks  no dd_layer_forward before a layer's "
            "forward: a delayed\n"
            "                 average then lands by the layer's next "
            "backward\n"
            "  --commit-every K  under DREAMDDP_ELASTIC=yes (ddrun --elastic), "
            "commit the\n"
            "                 model, the momentum and the step every K steps "
            "(default 20);\n"
            "                 a re-formed job resumes from the last commit\n");
}

static int parse(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        {"strategy", required_argument, 0, 's'},
        {"steps", required_argument, 0, 'n'},
        {"lr", required_argument, 0, 'l'},
        {"batch", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 'r'},
        {"data", required_argument, 0, 'd'},
        {"json", no_argument, 0, 'j'},
        {"no-forward-marks", no_argument, 0, 'm'},
        {"compression", required_argument, 0, 'c'},
        {"commit-every", required_argument, 0, 'k'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    static const char *const P = "train_mlp";
    int opt;
    long seed;
    *o = (options_t){"ddp", NULL, 300, 32, 0, 50, 0.1, 0.9, 1, 0, 0, 0, 20};
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            o->strategy = optarg;
            break;
        case 'n':
            if (dd_arg_int(P, "--steps", optarg, 1, INT_MAX, &o->steps)) {
                return -1;
            }
            break;
        case 'l':
            if (dd_arg_double(P, "--lr", optarg, 1e-12, 1e3, &o->lr)) {
                return -1;
            }
            break;
        case 'b':
            if (dd_arg_int(P, "--batch", optarg, 1, 1 << 20, &o->batch)) {
                return -1;
            }
            break;
        case 'r':
            if (dd_arg_long(P, "--seed", optarg, 0, UINT_MAX, &seed)) {
                return -1;
            }
            o->seed = (unsigned)seed;
            break;
        case 'd':
            if (strcmp(optarg, "iid") != 0 && strcmp(optarg, "noniid") != 0 &&
                strcmp(optarg, "global") != 0) {
                fprintf(stderr,
                        "train_mlp: --data takes iid, noniid or global, not "
                        "'%s'\n",
                        optarg);
                return -1;
            }
            o->noniid = strcmp(optarg, "noniid") == 0;
            o->global = strcmp(optarg, "global") == 0;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'm':
            o->no_marks = 1;
            break;
        case 'c':
            o->compression = optarg;
            break;
        case 'k':
            if (dd_arg_int(P, "--commit-every", optarg, 1, INT_MAX,
                           &o->commit_every)) {
                return -1;
            }
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (o->steps < 1 || o->batch < 1 || o->lr <= 0 || optind != argc) {
        usage(stderr);
        return -1;
    }
    return 0;
}

static void buffers_free(buffers_t *B)
{
    for (int l = 0; l <= N_LAYERS; l++) {
        free(B->act[l]);
        free(B->delta[l]);
    }
    free(B->x);
    free(B->y);
}

/* Each layer's divergence across the workers over the run: the largest
 * agreed maximum, and the agreed means summed over the agreements. */
typedef struct {
    double peak[N_LAYERS], mean_sum[N_LAYERS];
    uint64_t agreed[N_LAYERS];
} drift_t;

/* Takes the agreements that came since the last call. */
static void drift_sample(dd_context_h ctx, const layer_t *L, drift_t *d)
{
    for (int l = 0; l < N_LAYERS; l++) {
        dd_layer_stats_t ls = {.field_mask =
                                   DD_LAYER_STATS_FIELD_DIVERGENCE_MAX |
                                   DD_LAYER_STATS_FIELD_DIVERGENCE_MEAN |
                                   DD_LAYER_STATS_FIELD_DIVERGENCE_AGREED};
        if (dd_layer_stats(ctx, L[l].handle, &ls) != DD_OK ||
            ls.divergence_agreed == d->agreed[l]) {
            continue;
        }
        d->agreed[l] = ls.divergence_agreed;
        d->peak[l] =
            ls.divergence_max > d->peak[l] ? ls.divergence_max : d->peak[l];
        d->mean_sum[l] += ls.divergence_mean;
    }
}

/* ,"divergence_max":[...],"divergence_mean":[...],"mean_divergence":X:
 * per layer the largest agreed maximum and the mean of the agreed means,
 * then the mean of those over the layers. */
static void drift_print(const drift_t *d)
{
    double over = 0;
    printf(",\"divergence_max\":[");
    for (int l = 0; l < N_LAYERS; l++) {
        printf("%s%.6g", l ? "," : "", d->peak[l]);
    }
    printf("],\"divergence_mean\":[");
    for (int l = 0; l < N_LAYERS; l++) {
        double m = d->agreed[l] > 0 ? d->mean_sum[l] / (double)d->agreed[l] : 0;
        over += m / N_LAYERS;
        printf("%s%.6g", l ? "," : "", m);
    }
    printf("],\"mean_divergence\":%.6g", over);
}

/* FNV-1a over the bits of every parameter: two runs that end with the same
 * bits print the same value (DREAMDDP_DETERMINISTIC=yes). */
static unsigned long long params_checksum(const layer_t *L)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int l = 0; l < N_LAYERS; l++) {
        const unsigned char *w = (const unsigned char *)L[l].w;
        const unsigned char *b = (const unsigned char *)L[l].b;
        size_t nw = (size_t)L[l].in * (size_t)L[l].out * sizeof(float);
        for (size_t i = 0; i < nw; i++) {
            h = (h ^ w[i]) * 0x100000001b3ull;
        }
        for (size_t i = 0; i < (size_t)L[l].out * sizeof(float); i++) {
            h = (h ^ b[i]) * 0x100000001b3ull;
        }
    }
    return (unsigned long long)h;
}

/* The rows of a batch of n, and of the evaluation's chunks. */
static void buffers_alloc(buffers_t *B, int n)
{
    int chunk = n > 256 ? n : 256;
    for (int l = 0; l <= N_LAYERS; l++) {
        B->act[l] = zeros((size_t)chunk * widths[l]);
        B->delta[l] = zeros((size_t)chunk * widths[l]);
    }
    B->x = zeros((size_t)n * N_IN);
    B->y = calloc((size_t)n, sizeof(int));
}

/* The steps, then the held-out accuracy and the report. */
static int train_loop(dd_context_h ctx, const options_t *o, layer_t *L,
                      buffers_t *Bp, const float *tx, const int *ty,
                      const teacher_t *teacherp, const double *keep)
{
    int rank = dd_rank(ctx);
    /* The job's first size, committed: a re-formed job of fewer or more
     * workers keeps the global batch, each worker taking its share. */
    int32_t first_workers = dd_num_workers(ctx);
    uint64_t start = 0, shard = o->seed * 1000003ull + (uint64_t)rank;
    if (register_model(ctx, L) != 0 || register_state(ctx, L) != 0 ||
        dd_elastic_state_add(ctx, "train_mlp.first_workers", &first_workers,
                             sizeof(first_workers)) != DD_OK ||
        dd_strategy_set(ctx, o->strategy) != DD_OK ||
        (o->compression != NULL &&
         dd_compression_set(ctx, o->compression) != DD_OK) ||
        dd_model_commit(ctx) != DD_OK || dd_elastic_restore(ctx, &start)) {
        return -1;
    }
    options_t run = *o;
    int64_t global_batch = (int64_t)o->batch * first_workers;
    if (o->global) {
        run.batch =
            (int)global_slice(global_batch, rank, dd_num_workers(ctx), NULL);
    } else if (start > 0) {
        /* A re-formed job: a data stream of its own from here on. */
        shard += start * 7919ull;
    }
    o = &run;
    uint64_t *shardp = &shard;
    int chunk = o->batch > 256 ? o->batch : 256;
    buffers_alloc(Bp, o->batch);
    double loss = 0, t_total = 0, wait = 0, test_loss, acc = 0;
    size_t synced = 0, extra = 0, wire = 0;
    drift_t drift;
    memset(&drift, 0, sizeof(drift));
    if (rank == 0 && !o->json) {
        printf("%6s %8s %8s %9s %7s %9s\n", "step", "loss", "test_acc",
               "step_ms", "synced", "wait_ms");
    }
    for (int step = (int)start; step < o->steps; step++) {
        dd_step_stats_t st = {.field_mask = DD_STEP_STATS_FIELD_WAIT_S |
                                            DD_STEP_STATS_FIELD_BYTES_SYNCED |
                                            DD_STEP_STATS_FIELD_LAYERS_SYNCED |
                                            DD_STEP_STATS_FIELD_EXTRA_BYTES |
                                            DD_STEP_STATS_FIELD_WIRE_BYTES};
        if (o->global) {
            draw_global(teacherp, o->seed, (uint64_t)step, global_batch, rank,
                        dd_num_workers(ctx), Bp->x, Bp->y);
        } else {
            draw(teacherp, shardp, o->batch, Bp->x, Bp->y,
                 o->noniid ? keep : NULL);
        }
        double t0 = now_s();
        if (train_step(ctx, L, Bp, o, &loss, &st) != 0) {
            return -1;
        }
        /* The step's time, taken before the evaluation below, which only
         * rank 0 runs and only on the lines it prints. */
        double step_s = now_s() - t0;
        t_total += step_s;
        wait += st.wait_s;
        synced += st.bytes_synced;
        extra += st.extra_bytes;
        wire += st.wire_bytes;
        drift_sample(ctx, L, &drift);
        if ((step + 1) % o->commit_every == 0 && dd_elastic_commit(ctx)) {
            return -1;
        }
        if (rank == 0 && !o->json &&
            ((step + 1) % o->log_every == 0 || step == 0)) {
            acc = evaluate(L, Bp->act, tx, ty, TEST_SIZE, chunk, &test_loss);
            printf("%6d %8.4f %8.3f %9.2f %7d %9.2f\n", step + 1, loss, acc,
                   step_s * 1e3, st.layers_synced, st.wait_s * 1e3);
        }
    }
    /* Local SGD replicas drift between syncs: average before evaluating,
     * as one would before a checkpoint. */
    if (dd_sync_all(ctx) != DD_OK) {
        return -1;
    }
    acc = evaluate(L, Bp->act, tx, ty, TEST_SIZE, chunk, &test_loss);
    int ran = o->steps - (int)start > 0 ? o->steps - (int)start : 1;
    if (rank == 0 && o->json) {
        printf("{\"strategy\":\"%s\",\"data\":\"%s\",\"steps\":%d,"
               "\"workers\":%d,\"aggregators\":%d,"
               "\"final_loss\":%.5f,\"accuracy\":%.4f,\"mean_step_s\":%.6f,"
               "\"mean_wait_s\":%.6f,\"synced_bytes\":%zu,"
               "\"extra_bytes\":%zu,\"compression\":\"%s\","
               "\"wire_bytes\":%zu,\"forward_marks\":%s,"
               "\"params_checksum\":\"%016llx\"",
               dd_strategy_name(ctx),
               o->noniid   ? "noniid"
               : o->global ? "global"
                           : "iid",
               o->steps, dd_num_workers(ctx),
               dd_world_size(ctx) - dd_num_workers(ctx), test_loss, acc,
               t_total / ran, wait / ran, synced, extra,
               o->compression != NULL ? o->compression : "default", wire,
               o->no_marks ? "false" : "true", params_checksum(L));
        drift_print(&drift);
        printf("}\n");
    } else if (rank == 0) {
        printf("done: %s%s, %d workers, %d steps: held-out accuracy %.3f, "
               "loss %.4f, %.2f ms/step (%.2f ms exposed wait), %.1f MB "
               "synced per worker (%.1f MB of extra syncs, %.1f MB on the "
               "wire), parameters %016llx\n",
               dd_strategy_name(ctx), o->noniid ? " (noniid data)" : "",
               dd_num_workers(ctx), o->steps, acc, test_loss,
               t_total / ran * 1e3, wait / ran * 1e3, synced / 1e6, extra / 1e6,
               wire / 1e6, params_checksum(L));
    }
    return 0;
}

/* Trains the model in L (registered with the library, so the caller frees
 * it after dd_finalize); frees its own buffers. */
static int train(dd_context_h ctx, const options_t *o, layer_t *L)
{
    static teacher_t teacher;
    buffers_t B;
    int rank = dd_rank(ctx);
    uint64_t held = o->seed;
    double keep[N_OUT];

    memset(&B, 0, sizeof(B));
    teacher_init(&teacher, o->seed);
    noniid_init(keep, o->seed, rank, dd_num_workers(ctx));
    model_init(L, o->seed + (unsigned)rank); /* commit makes them equal */
    float *tx = zeros((size_t)TEST_SIZE * N_IN);
    int *ty = calloc(TEST_SIZE, sizeof(int));
    draw(&teacher, &held, TEST_SIZE, tx, ty, NULL);
    int rc = train_loop(ctx, o, L, &B, tx, ty, &teacher, keep);
    buffers_free(&B);
    free(tx);
    free(ty);
    return rc;
}

int main(int argc, char **argv)
{
    options_t o;
    dd_context_h ctx;
    layer_t L[N_LAYERS] = {0};

    if (parse(argc, argv, &o) != 0) {
        return 2;
    }
    if (dd_init(NULL, &ctx) != DD_OK) {
        fprintf(stderr, "train_mlp: %s\n", dd_last_error());
        return 1;
    }
    int rc;
    if (dd_role(ctx) == DD_ROLE_AGGREGATOR) {
        /* An aggregator rank holds no model: it sums the chunks the
         * workers push until every worker has finished. */
        rc = dd_aggregator_serve(ctx) == DD_OK ? 0 : -1;
    } else {
        rc = train(ctx, &o, L);
    }
    if (rc != 0) {
        fprintf(stderr, "train_mlp: rank %d: %s\n", dd_rank(ctx),
                dd_last_error());
    }
    dd_status_t fin = dd_finalize(ctx);
    model_free(L);
    return rc != 0 ? 1 : fin != DD_OK;
}
