/*
 * The codec registry: the list of built-in codecs and the parsing of a spec
 * into an instance. Adding a codec is one line in dd_codecs. It must not
 * know about layers or the wire, nor include anything outside src/core and
 * the public headers.
 */
#include "compress/codec.h"

#include "core/log.h"

#include <stdio.h>
#include <string.h>

/* In the order dd_codec_names() lists them. */
static const dd_codec_ops_t *const dd_codecs[] = {
    &dd_codec_none_ops, &dd_codec_fp16_ops,     &dd_codec_bf16_ops,
    &dd_codec_topk_ops, &dd_codec_powersgd_ops, NULL};

const dd_codec_ops_t *dd_codec_find(const char *name)
{
    for (size_t i = 0; dd_codecs[i] != NULL; i++) {
        if (strcmp(dd_codecs[i]->name, name) == 0) {
            return dd_codecs[i];
        }
    }
    return NULL;
}

void dd_codec_names(char *buf, size_t size)
{
    size_t len = 0;

    if (size == 0) {
        return;
    }
    buf[0] = '\0';
    for (size_t i = 0; dd_codecs[i] != NULL && len < size; i++) {
        int n = snprintf(buf + len, size - len, "%s%s", i > 0 ? ", " : "",
                         dd_codecs[i]->name);
        if (n < 0) {
            break;
        }
        len += (size_t)n;
    }
}

/* Copies the name part of spec (up to ':' or the end) to name; 0 when it
 * does not fit, so an overlong name reads as unknown. */
static int dd_codec_split(const char *spec, char *name, size_t size,
                          const char **arg_p)
{
    const char *colon = strchr(spec, ':');
    size_t len = colon != NULL ? (size_t)(colon - spec) : strlen(spec);

    *arg_p = colon != NULL ? colon + 1 : NULL;
    if (len >= size) {
        return 0;
    }
    memcpy(name, spec, len);
    name[len] = '\0';
    return 1;
}

dd_status_t dd_codec_open(const char *spec, dd_codec_ref_t *ref_p)
{
    char name[DD_CODEC_NAME_MAX + 1], names[256], why[256];
    const dd_codec_ops_t *ops = NULL;
    const char *arg;
    dd_codec_t *codec;

    if (spec == NULL) {
        return dd_error(DD_ERR_INVALID_PARAM, DD_SUBSYS_COMPRESS,
                        "no codec spec given");
    }
    if (dd_codec_split(spec, name, sizeof(name), &arg)) {
        ops = dd_codec_find(name);
    }
    if (ops == NULL) {
        dd_codec_names(names, sizeof(names));
        return dd_error(DD_ERR_INVALID_CONFIG, DD_SUBSYS_COMPRESS,
                        "invalid codec spec '%s': unknown codec, expected "
                        "one of %s",
                        spec, names);
    }
    if (ops->abi_version != DD_CODEC_ABI_VERSION) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_COMPRESS,
                        "codec %s has ABI version %u, the library %u",
                        ops->name, (unsigned)ops->abi_version,
                        (unsigned)DD_CODEC_ABI_VERSION);
    }
    if (ops->rounds > 0 &&
        (ops->state_rounds == NULL || ops->round_size == NULL ||
         ops->encode_round == NULL || ops->decode_round == NULL)) {
        return dd_error(DD_ERR_UNSUPPORTED, DD_SUBSYS_COMPRESS,
                        "codec %s has %u rounds but not their slots", ops->name,
                        ops->rounds);
    }
    why[0] = '\0';
    dd_status_t status = ops->create(arg, why, sizeof(why), &codec);
    if (status == DD_ERR_INVALID_CONFIG) {
        return dd_error(status, DD_SUBSYS_COMPRESS,
                        "invalid codec spec '%s': %s", spec, why);
    }
    if (status != DD_OK) {
        return dd_error(status, DD_SUBSYS_COMPRESS,
                        "cannot create codec '%s': %s", spec,
                        dd_status_string(status));
    }
    *ref_p = (dd_codec_ref_t){.ops = ops, .codec = codec};
    return DD_OK;
}

void dd_codec_close(dd_codec_ref_t *ref)
{
    if (ref != NULL && ref->ops != NULL) {
        ref->ops->destroy(ref->codec);
        *ref = (dd_codec_ref_t){0};
    }
}

dd_dtype_t dd_codec_wire_dtype(const dd_codec_ops_t *ops, dd_dtype_t dtype)
{
    if (!(ops->caps & DD_CODEC_CAP_SUMMABLE)) {
        return DD_DTYPE_U8;
    }
    return ops->wire_dtype == DD_CODEC_WIRE_AS_INPUT ? dtype : ops->wire_dtype;
}
