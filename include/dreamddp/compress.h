/*
 * The ABI between libdreamddp and its codecs: what turns a layer's buffer
 * into the bytes that go on the wire and back (identity, fp16, bf16, topk,
 * powersgd).
 *
 * A codec is a versioned ops table, dd_codec_ops_t. The core finds it by
 * the name in a spec ("topk:0.01": name "topk", argument "0.01"), checks
 * abi_version, creates an instance from the argument, and then gives every
 * compressed layer its own state (error feedback residuals live there):
 * encode before the wire, decode after. Codecs are compiled into the
 * library; this header must not include anything but dreamddp.h and the
 * standard headers, and a codec never calls into the scheduler, the
 * aggregators or the backends.
 *
 * Plain C99. Buffers are host memory; the caller stages device buffers.
 */
#ifndef DREAMDDP_COMPRESS_H
#define DREAMDDP_COMPRESS_H

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Version of this ABI. The core refuses a codec whose table carries another
 * version. Bump it on any change to the structs or slots below.
 */
#define DD_CODEC_ABI_VERSION 2u

/** Longest codec name, without the NUL. */
#define DD_CODEC_NAME_MAX 31

/** A codec instance (one per spec in use), defined by the codec. */
typedef struct dd_codec dd_codec_t;

/** A layer's state under one instance (residuals, factors), defined by the
 *  codec. */
typedef struct dd_codec_state dd_codec_state_t;

/** Bits of dd_codec_ops_t::caps. */
enum {
    /**
     * Encoded data can be summed on the wire: the encoding of a layer is
     * exactly count elements of the wire dtype (see dd_codec_ops_t::
     * wire_dtype), element i stands for input element i, and decoding the
     * element-wise sum of n ranks' encodings gives the sum of their inputs
     * (up to the wire dtype's rounding). Aggregators and allreduce can then
     * sum encoded buffers as plain arrays of the wire dtype. Identity and
     * fp16 have it; topk does not (each rank sends other indices).
     */
    DD_CODEC_CAP_SUMMABLE = 1u << 0,
    /**
     * encode() keeps what it dropped in the layer's state and adds it back
     * at the next encode (error feedback), so a state must not be shared
     * between layers nor reset between steps.
     */
    DD_CODEC_CAP_ERROR_FEEDBACK = 1u << 1
};

/**
 * Value of dd_codec_ops_t::wire_dtype meaning "the layer's own dtype"
 * (identity sums f32 as f32 and bf16 as bf16).
 */
#define DD_CODEC_WIRE_AS_INPUT DD_DTYPE_LAST

/**
 * A codec's table. All slots are required, except the four of the
 * multi-round protocol, which a codec without one (rounds = 0) leaves NULL.
 * An instance is used by one
 * thread at a time (the caller serializes calls on it and on its states);
 * different instances are independent. A state belongs to one layer: its
 * count, dtype and shape are fixed when it is created.
 *
 * Errors are reported where they are detected (logged and recorded as the
 * calling thread's dd_last_error()), naming the layer's count and dtype or
 * the bytes at fault, and returned; create() instead writes its reason to
 * why, and the caller reports it with the whole spec.
 */
typedef struct dd_codec_ops {
    uint32_t abi_version; /**< DD_CODEC_ABI_VERSION the codec was built
                               against */
    /** "topk": the name in a spec; at most DD_CODEC_NAME_MAX characters,
     *  lowercase, no ':'. */
    const char *name;
    unsigned caps; /**< DD_CODEC_CAP_* bits */
    /** With DD_CODEC_CAP_SUMMABLE: the dtype the wire carries and is summed
     *  in (DD_DTYPE_F16 for fp16), or DD_CODEC_WIRE_AS_INPUT. Without it:
     *  DD_DTYPE_U8 (opaque bytes). */
    dd_dtype_t wire_dtype;

    /**
     * Parses the spec's argument and creates an instance. arg is what
     * follows the ':' ("0.01" for "topk:0.01"; "" for "topk:"), or NULL
     * when the spec has no ':'. Returns DD_OK with *codec_p set;
     * DD_ERR_INVALID_CONFIG when arg is missing, extra or malformed, with
     * the reason and what is accepted written to why (NUL-terminated, no
     * spec: the caller adds it), without logging; DD_ERR_NO_MEMORY. Any
     * thread.
     */
    dd_status_t (*create)(const char *arg, char *why, size_t why_size,
                          dd_codec_t **codec_p);

    /** Frees an instance whose states are all freed. NULL is allowed. */
    void (*destroy)(dd_codec_t *codec);

    /**
     * Upper bound of the bytes encode() writes for a layer of count
     * elements of dtype, shaped rows x cols (rows * cols == count) for
     * codecs that work on matrices (powersgd), or 0 x 0 when the layer has
     * no shape. Exact for summable codecs. Returns DD_OK with *bytes_p
     * set; DD_ERR_UNSUPPORTED for a dtype the codec does not encode;
     * DD_ERR_INVALID_PARAM for a shape that does not match count where the
     * codec needs one (codecs that need none ignore it). Pure.
     */
    dd_status_t (*encoded_size)(const dd_codec_t *codec, size_t count,
                                dd_dtype_t dtype, size_t rows, size_t cols,
                                size_t *bytes_p);

    /**
     * Creates the state of one layer (count, dtype and shape as for
     * encoded_size). Residuals start at zero. Returns DD_OK with *state_p
     * set; DD_ERR_UNSUPPORTED or DD_ERR_INVALID_PARAM as encoded_size does;
     * DD_ERR_NO_MEMORY.
     */
    dd_status_t (*state_create)(dd_codec_t *codec, size_t count,
                                dd_dtype_t dtype, size_t rows, size_t cols,
                                dd_codec_state_t **state_p);

    /** Frees a layer's state. NULL is allowed. */
    void (*state_free)(dd_codec_t *codec, dd_codec_state_t *state);

    /**
     * Encodes count elements of dtype from in into out, which holds at
     * least encoded_size() bytes and does not overlap in; sets *out_bytes_p
     * to the bytes written. Updates the state's residuals (error
     * feedback). Returns DD_OK; DD_ERR_INVALID_PARAM when count or dtype
     * is not the state's (out and the state are then untouched).
     */
    dd_status_t (*encode)(dd_codec_t *codec, dd_codec_state_t *state,
                          const void *in, size_t count, dd_dtype_t dtype,
                          void *out, size_t *out_bytes_p);

    /**
     * Decodes in_bytes bytes from in (one rank's encoding or, for summable
     * codecs, the sum of several) into count elements of dtype at out,
     * overwriting them; out does not overlap in. Does not change the
     * residuals. Returns DD_OK; DD_ERR_INVALID_PARAM when count or dtype
     * is not the state's; DD_ERR_MESSAGE when in_bytes or the encoding's
     * contents do not fit (out is then unspecified).
     */
    dd_status_t (*decode)(dd_codec_t *codec, dd_codec_state_t *state,
                          const void *in, size_t in_bytes, void *out,
                          size_t count, dd_dtype_t dtype);

    /**
     * The most rounds of the codec's multi-round protocol, or 0 when it
     * has none. The protocol serves codecs whose encodings cannot be summed
     * in one go (the sum of two ranks' encodings is not the encoding of the
     * sum of their layers) but can be in steps: PowerSGD sums P = M Q,
     * then Q = M^T P with P orthogonalised.
     *
     * For one layer, every rank runs: for r = 0 to state_rounds() - 1,
     * encode_round(r) writes round_size(r) bytes, an array of f32 that the
     * caller sums element-wise over the ranks in f32 (an allreduce with
     * DD_REDUCE_SUM, or the aggregators' sum); round 0 reads the layer,
     * round r > 0 reads the sum of round r - 1. decode_round() reads the
     * sum of the last round and writes the sum over the ranks of what
     * their layers were encoded as (the caller divides for a mean). The
     * rounds of one layer must all run, in order, on every rank, before
     * the layer's next encode; other layers may interleave. Error feedback
     * keeps, as with encode, what a rank's layer lost.
     */
    unsigned rounds;

    /** The rounds a layer takes, 1 to rounds (a layer the codec sends
     *  dense takes one). Pure. */
    unsigned (*state_rounds)(const dd_codec_t *codec,
                             const dd_codec_state_t *state);

    /**
     * Bytes that encode_round(round) writes for the layer (a multiple of
     * sizeof(float)), exact. Returns DD_OK with *bytes_p set;
     * DD_ERR_INVALID_PARAM for a round the layer does not take. Pure.
     */
    dd_status_t (*round_size)(const dd_codec_t *codec,
                              const dd_codec_state_t *state, unsigned round,
                              size_t *bytes_p);

    /**
     * Runs round of the protocol: round 0 reads the layer (in_bytes =
     * count elements of its dtype), a later round the sum over the ranks
     * of the previous round's output (in_bytes = its round_size). Writes
     * round_size(round) bytes to out, which does not overlap in, and sets
     * *out_bytes_p to them. Returns DD_OK; DD_ERR_INVALID_PARAM for a
     * round out of order or one the layer does not take; DD_ERR_MESSAGE
     * when in_bytes does not fit.
     */
    dd_status_t (*encode_round)(dd_codec_t *codec, dd_codec_state_t *state,
                                unsigned round, const void *in, size_t in_bytes,
                                void *out, size_t *out_bytes_p);

    /**
     * Ends the protocol: reads the sum over the ranks of the last round's
     * output (in_bytes = its round_size) and writes count elements of
     * dtype to out, overwriting them. Returns DD_OK; DD_ERR_INVALID_PARAM
     * when count or dtype is not the state's or the rounds have not all
     * run; DD_ERR_MESSAGE when in_bytes does not fit.
     */
    dd_status_t (*decode_round)(dd_codec_t *codec, dd_codec_state_t *state,
                                const void *in, size_t in_bytes, void *out,
                                size_t count, dd_dtype_t dtype);
} dd_codec_ops_t;

#ifdef __cplusplus
}
#endif

#endif /* DREAMDDP_COMPRESS_H */
