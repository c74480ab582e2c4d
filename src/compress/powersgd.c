/*
 * The PowerSGD codec ("powersgd:RANK", Vogels et al. 2019): a layer shaped
 * rows x cols, M, goes as a rank-r product P Q^T, with P = M Q (Q from the
 * previous step, seeded alike on every rank) orthogonalised by Gram-Schmidt
 * and Q = M^T P. Error feedback: the residual M - P Q^T is added to the
 * next step's layer. Layers without a shape, vectors, and layers whose
 * factors would not be smaller than the layer (min(rows, cols) <= r
 * among them) are sent dense, as f32.
 *
 * The sum of two ranks' encodings is not the encoding of the sum, so a
 * real sync runs the two-round protocol of compress.h: round 0 sends the
 * local P = M Q, the caller sums P; round 1 orthogonalises the sum (the
 * same on every rank), sends the local Q = M^T P; the caller sums Q;
 * decode_round gives P Q^T = the sum over ranks of each one's P Q_local^T.
 * A rank's residual is its M - P Q_local^T, so what every rank lost is
 * kept exactly. The summed Q, its columns normalised, seeds the next step.
 *
 * encode/decode alone give one rank's [P | Q] (P orthogonalised on its own
 * M) and P Q^T; they are for one rank's use (tests, the benchmark), not for
 * summing on the wire. The wire holds P's r columns one after another
 * (rows floats each), then Q's (cols floats each).
 *
 * f32 layers only. The arithmetic is plain C in blocks of eight lanes, so
 * that every CPU gives the same bits (the orthogonalisation and the decode
 * must agree on every rank); encode and decode must not allocate.
 */
#include "compress/codec.h"

#include "core/log.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DD_PSGD_RANK_MAX 1024

/* The inner loops are built twice, for AVX2 and for the baseline, and the
 * CPU picks at load time. Both give the same bits: AVX2 does not bring
 * FMA, so a * x + y is rounded twice either way, and the lanes of a dot
 * product are the same eight whatever the vector width. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DD_PSGD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DD_PSGD_CLONES
#endif
#define DD_PSGD_SEED 0x5eed5eedu

struct dd_codec {
    unsigned rank;
};

struct dd_codec_state {
    size_t count, rows, cols;
    unsigned r;       /* 0: the layer is sent dense */
    unsigned next;    /* the protocol's next round; r rounds + 1: decode */
    uint32_t seed;    /* the state of the generator that seeds Q */
    float *residual;  /* count: M + the last residual between rounds */
    float *p;         /* r x rows: P's columns, orthogonalised */
    float *q;         /* r x cols: Q's columns, the next step's seed */
    float *q_local;   /* r x cols: this rank's Q in round 1 */
    float *scratch_p; /* r x rows: a wire's P in decode */
};

static dd_status_t dd_psgd_create(const char *arg, char *why, size_t why_size,
                                  dd_codec_t **codec_p)
{
    unsigned long rank = 0;
    char *end = NULL;

    if (arg != NULL && arg[0] >= '0' && arg[0] <= '9') {
        rank = strtoul(arg, &end, 10);
    }
    if (end == NULL || *end != '\0' || rank < 1 || rank > DD_PSGD_RANK_MAX) {
        snprintf(why, why_size,
                 "powersgd takes the rank of its factors, 1 to %d, such as "
                 "powersgd:4 (got %s%s%s)",
                 DD_PSGD_RANK_MAX, arg != NULL ? "'" : "",
                 arg != NULL ? arg : "no rank", arg != NULL ? "'" : "");
        return DD_ERR_INVALID_CONFIG;
    }
    dd_codec_t *codec = malloc(sizeof(*codec));
    if (codec == NULL) {
        return DD_ERR_NO_MEMORY; /* dd_codec_open reports it */
    }
    codec->rank = (unsigned)rank;
    *codec_p = codec;
    return DD_OK;
}

static void dd_psgd_destroy(dd_codec_t *codec)
{
    free(codec);
}

/* The rank a layer is sent at, 0 for dense; checks the dtype and shape. */
static dd_status_t dd_psgd_layer(const dd_codec_t *codec, size_t count,
                                 dd_dtype_t dtype, size_t rows, size_t cols,
                                 unsigned *r_p)
{
    size_t r = codec->rank;

    if (dtype != DD_DTYPE_F32) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_COMPRESS,
                        "codec powersgd: cannot encode %s elements (f32 "
                        "only)",
                        dd_dtype_name(dtype));
    }
    if ((rows == 0) != (cols == 0) ||
        (rows != 0 && (cols > SIZE_MAX / rows || rows * cols != count))) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                        "codec powersgd: a layer of %zu elements shaped "
                        "%zu x %zu",
                        count, rows, cols);
    }
    if (count > SIZE_MAX / sizeof(float)) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                        "codec powersgd: %zu f32 elements overflow size_t",
                        count);
    }
    /* Dense when the factors, (rows + cols) r, would not be smaller. */
    int dense = rows <= r || cols <= r || (rows + cols) * r >= count;
    *r_p = dense ? 0 : (unsigned)r;
    return DD_OK;
}

static size_t dd_psgd_wire(size_t count, size_t rows, size_t cols, unsigned r)
{
    return (r == 0 ? count : (rows + cols) * r) * sizeof(float);
}

static dd_status_t dd_psgd_encoded_size(const dd_codec_t *codec, size_t count,
                                        dd_dtype_t dtype, size_t rows,
                                        size_t cols, size_t *bytes_p)
{
    unsigned r = 0;
    dd_status_t status = dd_psgd_layer(codec, count, dtype, rows, cols, &r);
    if (status == DD_OK) {
        *bytes_p = dd_psgd_wire(count, rows, cols, r);
    }
    return status;
}

/* xorshift32: the same numbers on every rank. */
static float dd_psgd_random(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return (float)(*x >> 8) * 0x1p-23f - 1.0f; /* in [-1, 1) */
}

static void dd_psgd_state_free(dd_codec_t *codec, dd_codec_state_t *state)
{
    (void)codec;
    if (state != NULL) {
        free(state->residual);
        free(state->p);
        free(state->q);
        free(state->q_local);
        free(state->scratch_p);
        free(state);
    }
}

static dd_status_t dd_psgd_state_create(dd_codec_t *codec, size_t count,
                                        dd_dtype_t dtype, size_t rows,
                                        size_t cols, dd_codec_state_t **state_p)
{
    unsigned r = 0;
    dd_status_t status = dd_psgd_layer(codec, count, dtype, rows, cols, &r);
    if (status != DD_OK) {
        return status;
    }
    dd_codec_state_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        goto err_no_memory;
    }
    *s = (dd_codec_state_t){.count = count,
                            .rows = rows,
                            .cols = cols,
                            .r = r,
                            .seed = DD_PSGD_SEED};
    if (r > 0) {
        s->residual = calloc(count, sizeof(float));
        s->p = calloc(r * rows, sizeof(float));
        s->q = malloc(r * cols * sizeof(float));
        s->q_local = malloc(r * cols * sizeof(float));
        s->scratch_p = malloc(r * rows * sizeof(float));
        if (!s->residual || !s->p || !s->q || !s->q_local || !s->scratch_p) {
            goto err_free_state;
        }
        for (size_t i = 0; i < r * cols; i++) {
            s->q[i] = dd_psgd_random(&s->seed);
        }
    }
    *state_p = s;
    return DD_OK;

err_free_state:
    dd_psgd_state_free(codec, s);
err_no_memory:
    return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_COMPRESS,
                    "codec powersgd: no memory for a layer state of %zu x "
                    "%zu",
                    rows, cols);
}

static dd_status_t dd_psgd_check(const dd_codec_state_t *s, size_t count,
                                 dd_dtype_t dtype, const char *call)
{
    if (count == s->count && dtype == DD_DTYPE_F32) {
        return DD_OK;
    }
    return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                    "codec powersgd: %s of %zu %s elements on a layer state "
                    "of %zu f32 elements",
                    call, count, dd_dtype_name(dtype), s->count);
}

static dd_status_t dd_psgd_bytes(size_t got, size_t want, const char *what)
{
    if (got == want) {
        return DD_OK;
    }
    return dd_error(DD_ERR_MESSAGE, DD_SUBSYS_COMPRESS,
                    "codec powersgd: %zu bytes for %s, expected %zu", got, what,
                    want);
}

/* a . b, in eight lanes summed in a fixed order: the same bits whether or
 * not the compiler vectorises it. */
DD_PSGD_CLONES static float dd_psgd_dot(const float *restrict a,
                                        const float *restrict b, size_t n)
{
    float lane[8] = {0};
    size_t j = 0;

    for (; j + 8 <= n; j += 8) {
        for (size_t l = 0; l < 8; l++) {
            lane[l] += a[j + l] * b[j + l];
        }
    }
    float sum = 0;
    for (; j < n; j++) {
        sum += a[j] * b[j];
    }
    for (size_t l = 0; l < 8; l++) {
        sum += lane[l];
    }
    return sum;
}

/* y += a x, in blocks of eight so that -O2 vectorises it. */
DD_PSGD_CLONES static void dd_psgd_axpy(float *restrict y, float a,
                                        const float *restrict x, size_t n)
{
    size_t j = 0;

    for (; j + 8 <= n; j += 8) {
        for (size_t l = 0; l < 8; l++) {
            y[j + l] += a * x[j + l];
        }
    }
    for (; j < n; j++) {
        y[j] += a * x[j];
    }
}

/* Modified Gram-Schmidt on the r vectors of length n at v (one after
 * another), sums in double, each vector projected out twice ("twice is
 * enough"): once is not when a vector is nearly in the span of the others
 * (a layer of rank below r), since what is left is then mostly the
 * rounding of the first pass. A vector with nothing left of its own is
 * zeroed: its direction is covered, and zero sends nothing. */
static void dd_psgd_orthogonalise(float *v, size_t n, unsigned r)
{
    for (unsigned k = 0; k < r; k++) {
        float *vk = v + (size_t)k * n;
        double before = 0;
        for (size_t i = 0; i < n; i++) {
            before += (double)vk[i] * vk[i];
        }
        for (unsigned j = 0; j < 2 * k; j++) {
            const float *vj = v + (size_t)(j % k) * n;
            double d = 0;
            for (size_t i = 0; i < n; i++) {
                d += (double)vk[i] * vj[i];
            }
            for (size_t i = 0; i < n; i++) {
                vk[i] = (float)(vk[i] - d * vj[i]);
            }
        }
        double norm = 0;
        for (size_t i = 0; i < n; i++) {
            norm += (double)vk[i] * vk[i];
        }
        /* Below this, what is left is rounding, not a direction. */
        int keep = norm > 1e-60 && norm > before * 1e-10;
        norm = sqrt(norm);
        for (size_t i = 0; i < n; i++) {
            vk[i] = keep ? (float)(vk[i] / norm) : 0.0f;
        }
    }
}

/* Round 0: residual += M, P = residual Q (P's columns at p). */
static void dd_psgd_round0(dd_codec_state_t *s, const float *m, float *p)
{
    for (size_t i = 0; i < s->rows; i++) {
        float *e = s->residual + i * s->cols;
        dd_psgd_axpy(e, 1.0f, m + i * s->cols, s->cols);
        for (unsigned k = 0; k < s->r; k++) {
            p[k * s->rows + i] = dd_psgd_dot(e, s->q + k * s->cols, s->cols);
        }
    }
}

/* Round 1, with the summed P in s->p: orthogonalise it, Q_local =
 * residual^T P, and keep residual - P Q_local^T. */
static void dd_psgd_round1(dd_codec_state_t *s)
{
    size_t rows = s->rows, cols = s->cols;

    dd_psgd_orthogonalise(s->p, rows, s->r);
    memset(s->q_local, 0, s->r * cols * sizeof(float));
    for (size_t i = 0; i < rows; i++) {
        const float *e = s->residual + i * cols;
        for (unsigned k = 0; k < s->r; k++) {
            dd_psgd_axpy(s->q_local + k * cols, s->p[k * rows + i], e, cols);
        }
    }
    for (size_t i = 0; i < rows; i++) {
        float *e = s->residual + i * cols;
        for (unsigned k = 0; k < s->r; k++) {
            dd_psgd_axpy(e, -s->p[k * rows + i], s->q_local + k * cols, cols);
        }
    }
}

/* out = P Q^T, P's columns at p (rows each), Q's at q (cols each). */
static void dd_psgd_product(const dd_codec_state_t *s, const float *p,
                            const float *q, float *out)
{
    for (size_t i = 0; i < s->rows; i++) {
        float *o = out + i * s->cols;
        memset(o, 0, s->cols * sizeof(float));
        for (unsigned k = 0; k < s->r; k++) {
            dd_psgd_axpy(o, p[k * s->rows + i], q + k * s->cols, s->cols);
        }
    }
}

/* The next step's Q: q's columns normalised; one with nothing in it
 * (a layer of zeros) is drawn anew, or P = M Q would stay zero for ever.
 * q is the same on every rank, and so is what comes out. */
static void dd_psgd_seed_next(dd_codec_state_t *s, const float *q)
{
    memcpy(s->q, q, s->r * s->cols * sizeof(float));
    for (unsigned k = 0; k < s->r; k++) {
        float *qk = s->q + k * s->cols;
        double norm = 0;
        for (size_t j = 0; j < s->cols; j++) {
            norm += (double)qk[j] * qk[j];
        }
        norm = sqrt(norm);
        for (size_t j = 0; j < s->cols; j++) {
            qk[j] =
                norm > 1e-30 ? (float)(qk[j] / norm) : dd_psgd_random(&s->seed);
        }
    }
}

static dd_status_t dd_psgd_encode(dd_codec_t *codec, dd_codec_state_t *s,
                                  const void *in, size_t count,
                                  dd_dtype_t dtype, void *out,
                                  size_t *out_bytes_p)
{
    (void)codec;
    dd_status_t status = dd_psgd_check(s, count, dtype, "encode");
    if (status != DD_OK) {
        return status;
    }
    size_t pb = (size_t)s->r * s->rows * sizeof(float);
    size_t qb = (size_t)s->r * s->cols * sizeof(float);
    if (s->r == 0) {
        if (count > 0) {
            memcpy(out, in, count * sizeof(float));
        }
    } else {
        dd_psgd_round0(s, in, s->p);
        dd_psgd_round1(s);
        memcpy(out, s->p, pb);
        memcpy((unsigned char *)out + pb, s->q_local, qb);
        dd_psgd_seed_next(s, s->q_local);
    }
    s->next = 0;
    *out_bytes_p = dd_psgd_wire(count, s->rows, s->cols, s->r);
    return DD_OK;
}

static dd_status_t dd_psgd_decode(dd_codec_t *codec, dd_codec_state_t *s,
                                  const void *in, size_t in_bytes, void *out,
                                  size_t count, dd_dtype_t dtype)
{
    (void)codec;
    dd_status_t status = dd_psgd_check(s, count, dtype, "decode");
    if (status == DD_OK) {
        status =
            dd_psgd_bytes(in_bytes, dd_psgd_wire(count, s->rows, s->cols, s->r),
                          "an encoding");
    }
    if (status != DD_OK) {
        return status;
    }
    if (s->r == 0) {
        if (count > 0) {
            memcpy(out, in, count * sizeof(float));
        }
        return DD_OK;
    }
    size_t pb = (size_t)s->r * s->rows * sizeof(float);
    /* Copies: the wire need not be aligned for floats. */
    memcpy(s->scratch_p, in, pb);
    memcpy(s->q_local, (const unsigned char *)in + pb, in_bytes - pb);
    dd_psgd_product(s, s->scratch_p, s->q_local, out);
    return DD_OK;
}

static unsigned dd_psgd_state_rounds(const dd_codec_t *codec,
                                     const dd_codec_state_t *s)
{
    (void)codec;
    return s->r == 0 ? 1 : 2;
}

static dd_status_t dd_psgd_round_size(const dd_codec_t *codec,
                                      const dd_codec_state_t *s, unsigned round,
                                      size_t *bytes_p)
{
    unsigned rounds = dd_psgd_state_rounds(codec, s);

    if (round >= rounds) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                        "codec powersgd: round %u of a layer of %zu x %zu "
                        "that takes %u",
                        round, s->rows, s->cols, rounds);
    }
    size_t n = s->r == 0 ? s->count : round == 0 ? s->rows : s->cols;
    *bytes_p = n * (s->r == 0 ? 1 : s->r) * sizeof(float);
    return DD_OK;
}

static dd_status_t dd_psgd_encode_round(dd_codec_t *codec, dd_codec_state_t *s,
                                        unsigned round, const void *in,
                                        size_t in_bytes, void *out,
                                        size_t *out_bytes_p)
{
    size_t want = s->count * sizeof(float), bytes;
    dd_status_t status = dd_psgd_round_size(codec, s, round, &bytes);

    if (status == DD_OK && round != s->next) {
        status = dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                          "codec powersgd: round %u of a layer of %zu x %zu "
                          "before round %u",
                          round, s->rows, s->cols, s->next);
    }
    if (status == DD_OK && round == 1) {
        dd_psgd_round_size(codec, s, 0, &want);
    }
    if (status == DD_OK) {
        status = dd_psgd_bytes(in_bytes, want,
                               round == 0 ? "round 0 (the layer)"
                                          : "round 1 (the summed P)");
    }
    if (status != DD_OK) {
        return status;
    }
    if (s->r == 0) {
        if (bytes > 0) {
            memcpy(out, in, bytes);
        }
    } else if (round == 0) {
        dd_psgd_round0(s, in, s->p);
        memcpy(out, s->p, bytes);
    } else {
        memcpy(s->p, in, in_bytes);
        dd_psgd_round1(s);
        memcpy(out, s->q_local, bytes);
    }
    s->next = round + 1;
    *out_bytes_p = bytes;
    return DD_OK;
}

static dd_status_t dd_psgd_decode_round(dd_codec_t *codec, dd_codec_state_t *s,
                                        const void *in, size_t in_bytes,
                                        void *out, size_t count,
                                        dd_dtype_t dtype)
{
    unsigned last = dd_psgd_state_rounds(codec, s) - 1;
    size_t want = 0;
    dd_status_t status = dd_psgd_check(s, count, dtype, "decode_round");

    if (status == DD_OK && s->next != last + 1) {
        status = dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                          "codec powersgd: decode_round of a layer of %zu x "
                          "%zu before its round %u",
                          s->rows, s->cols, s->next);
    }
    if (status == DD_OK) {
        dd_psgd_round_size(codec, s, last, &want);
        status = dd_psgd_bytes(in_bytes, want, "the last round's sum");
    }
    if (status != DD_OK) {
        return status;
    }
    if (s->r == 0) {
        if (count > 0) {
            memcpy(out, in, count * sizeof(float));
        }
    } else {
        memcpy(s->q_local, in, in_bytes);
        dd_psgd_product(s, s->p, s->q_local, out);
        dd_psgd_seed_next(s, s->q_local);
    }
    s->next = 0;
    return DD_OK;
}

const dd_codec_ops_t dd_codec_powersgd_ops = {
    .abi_version = DD_CODEC_ABI_VERSION,
    .name = "powersgd",
    .caps = DD_CODEC_CAP_ERROR_FEEDBACK,
    .wire_dtype = DD_DTYPE_U8,
    .create = dd_psgd_create,
    .destroy = dd_psgd_destroy,
    .encoded_size = dd_psgd_encoded_size,
    .state_create = dd_psgd_state_create,
    .state_free = dd_psgd_state_free,
    .encode = dd_psgd_encode,
    .decode = dd_psgd_decode,
    .rounds = 2,
    .state_rounds = dd_psgd_state_rounds,
    .round_size = dd_psgd_round_size,
    .encode_round = dd_psgd_encode_round,
    .decode_round = dd_psgd_decode_round,
};
