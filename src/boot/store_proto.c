/*
 * Encoding and decoding of the TCP store's frames. No I/O here.
 */
#include "boot/store_proto.h"
#include "core/sha256.h"

#include <stdlib.h>
#include <string.h>

void dd_store_buf_put(dd_store_buf_t *b, const void *src, size_t len)
{
    if (b->failed) {
        return;
    }
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len) {
            cap *= 2;
        }
        uint8_t *data = realloc(b->data, cap);
        if (data == NULL) {
            b->failed = 1;
            return;
        }
        b->data = data;
        b->cap = cap;
    }
    if (len > 0) {
        memcpy(b->data + b->len, src, len);
    }
    b->len += len;
}

void dd_store_buf_u8(dd_store_buf_t *b, uint8_t v)
{
    dd_store_buf_put(b, &v, 1);
}

void dd_store_buf_u16(dd_store_buf_t *b, uint16_t v)
{
    uint8_t le[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    dd_store_buf_put(b, le, 2);
}

void dd_store_buf_u32(dd_store_buf_t *b, uint32_t v)
{
    uint8_t le[4];
    for (int i = 0; i < 4; i++) {
        le[i] = (uint8_t)(v >> (8 * i));
    }
    dd_store_buf_put(b, le, 4);
}

void dd_store_buf_u64(dd_store_buf_t *b, uint64_t v)
{
    uint8_t le[8];
    for (int i = 0; i < 8; i++) {
        le[i] = (uint8_t)(v >> (8 * i));
    }
    dd_store_buf_put(b, le, 8);
}

void dd_store_buf_str(dd_store_buf_t *b, const char *s)
{
    size_t len = strlen(s);
    if (len > UINT16_MAX) {
        b->failed = 1;
        return;
    }
    dd_store_buf_u16(b, (uint16_t)len);
    dd_store_buf_put(b, s, len);
}

void dd_store_buf_bytes(dd_store_buf_t *b, const void *v, size_t len)
{
    if (len > DD_STORE_MAX_FRAME) {
        b->failed = 1;
        return;
    }
    dd_store_buf_u32(b, (uint32_t)len);
    dd_store_buf_put(b, v, len);
}

void dd_store_buf_begin(dd_store_buf_t *b)
{
    b->len = 0;
    b->failed = 0;
    dd_store_buf_u32(b, 0);
}

void dd_store_buf_finish(dd_store_buf_t *b)
{
    if (b->failed || b->len - 4 > DD_STORE_MAX_FRAME) {
        b->failed = 1;
        return;
    }
    uint32_t body = (uint32_t)(b->len - 4);
    for (int i = 0; i < 4; i++) {
        b->data[i] = (uint8_t)(body >> (8 * i));
    }
}

void dd_store_buf_free(dd_store_buf_t *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

static const uint8_t *dd_store_take(dd_store_cursor_t *c, size_t len)
{
    if (c->failed || c->left < len) {
        c->failed = 1;
        return NULL;
    }
    const uint8_t *p = c->p;
    c->p += len;
    c->left -= len;
    return p;
}

uint8_t dd_store_get_u8(dd_store_cursor_t *c)
{
    const uint8_t *p = dd_store_take(c, 1);
    return p ? p[0] : 0;
}

uint16_t dd_store_get_u16(dd_store_cursor_t *c)
{
    const uint8_t *p = dd_store_take(c, 2);
    return p ? (uint16_t)(p[0] | (p[1] << 8)) : 0;
}

uint32_t dd_store_get_u32(dd_store_cursor_t *c)
{
    const uint8_t *p = dd_store_take(c, 4);
    uint32_t v = 0;
    for (int i = 0; p && i < 4; i++) {
        v |= (uint32_t)p[i] << (8 * i);
    }
    return v;
}

uint64_t dd_store_get_u64(dd_store_cursor_t *c)
{
    const uint8_t *p = dd_store_take(c, 8);
    uint64_t v = 0;
    for (int i = 0; p && i < 8; i++) {
        v |= (uint64_t)p[i] << (8 * i);
    }
    return v;
}

void dd_store_get_str(dd_store_cursor_t *c, char *out, size_t size)
{
    size_t len = dd_store_get_u16(c);
    const uint8_t *p = dd_store_take(c, len);
    if (p == NULL || len >= size) {
        c->failed = 1;
        out[0] = '\0';
        return;
    }
    memcpy(out, p, len);
    out[len] = '\0';
}

const void *dd_store_get_bytes(dd_store_cursor_t *c, size_t *len_p)
{
    size_t len = dd_store_get_u32(c);
    const uint8_t *p = dd_store_take(c, len);
    *len_p = p ? len : 0;
    return p;
}

void dd_store_proof(uint64_t secret, const uint8_t nonce[DD_STORE_NONCE],
                    int rank, int world, uint8_t out[32])
{
    static const char label[] = "dreamddp store proof";
    uint8_t key[8], msg[sizeof(label) + DD_STORE_NONCE + 8];

    for (int i = 0; i < 8; i++) {
        key[i] = (uint8_t)(secret >> (56 - 8 * i));
    }
    memcpy(msg, label, sizeof(label)); /* with its zero */
    memcpy(msg + sizeof(label), nonce, DD_STORE_NONCE);
    for (int i = 0; i < 4; i++) {
        msg[sizeof(label) + DD_STORE_NONCE + i] =
            (uint8_t)((uint32_t)rank >> (24 - 8 * i));
        msg[sizeof(label) + DD_STORE_NONCE + 4 + i] =
            (uint8_t)((uint32_t)world >> (24 - 8 * i));
    }
    dd_hmac_sha256(key, sizeof(key), msg, sizeof(msg), out);
    memset(key, 0, sizeof(key));
}
