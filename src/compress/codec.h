/*
 * The codec registry: the codecs compiled into the library, found by name,
 * and the parsing of a spec ("none", "topk:0.01") into a live instance.
 * It knows nothing of layers, jobs or the wire, and must include nothing
 * but src/core headers and the public headers.
 */
#ifndef DD_COMPRESS_CODEC_H
#define DD_COMPRESS_CODEC_H

#include <dreamddp/compress.h>

#include <stddef.h>

/** One instance created from a spec, with the table that runs it. */
typedef struct {
    const dd_codec_ops_t *ops;
    dd_codec_t *codec;
} dd_codec_ref_t;

/** The identity codec ("none"), in none.c. */
extern const dd_codec_ops_t dd_codec_none_ops;
/** IEEE binary16 on the wire ("fp16"), in float16.c. */
extern const dd_codec_ops_t dd_codec_fp16_ops;
/** bfloat16 on the wire ("bf16"), in float16.c. */
extern const dd_codec_ops_t dd_codec_bf16_ops;
/** The k largest magnitudes and their indices ("topk:RATIO"), in topk.c. */
extern const dd_codec_ops_t dd_codec_topk_ops;
/** Low-rank factors P, Q of matrices ("powersgd:RANK"), in powersgd.c. */
extern const dd_codec_ops_t dd_codec_powersgd_ops;

/** The built-in table named name (whole string, case-sensitive), or NULL. */
const dd_codec_ops_t *dd_codec_find(const char *name);

/**
 * Writes the accepted codec names to buf, comma-separated ("none, fp16"),
 * truncated to size. For messages and the configuration's docs.
 */
void dd_codec_names(char *buf, size_t size);

/**
 * Splits spec at its first ':' into a name and an argument (NULL without
 * ':'), finds the codec and creates an instance from the argument. Returns
 * DD_OK with *ref_p set; DD_ERR_INVALID_CONFIG, reported with a message
 * that names the spec and either lists the accepted names (unknown codec)
 * or says what the codec accepts (bad argument); DD_ERR_UNSUPPORTED when a
 * table carries another ABI version; DD_ERR_NO_MEMORY. Any thread.
 */
dd_status_t dd_codec_open(const char *spec, dd_codec_ref_t *ref_p);

/** Destroys the instance (its states must be freed). NULL is allowed. */
void dd_codec_close(dd_codec_ref_t *ref);

/**
 * The dtype a summable codec's wire carries for a layer of dtype (the
 * layer's own for DD_CODEC_WIRE_AS_INPUT); DD_DTYPE_U8 for the others.
 */
dd_dtype_t dd_codec_wire_dtype(const dd_codec_ops_t *ops, dd_dtype_t dtype);

#endif
