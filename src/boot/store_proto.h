/*
 * Wire format of the TCP store, shared by client and server. A frame is a
 * 32-bit little-endian body length and the body. Requests start with an op
 * byte, replies with a reply byte. Strings are a 16-bit length and bytes,
 * values a 32-bit length and bytes.
 */
#ifndef DD_BOOT_STORE_PROTO_H
#define DD_BOOT_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define DD_STORE_MAGIC 0x44445354u /* "DDST" */
/* 2: the login is a challenge and an HMAC, the secret never travels. */
#define DD_STORE_VERSION 3
#define DD_STORE_MAX_FRAME (64u << 20)
#define DD_STORE_MAX_KEY 1024

enum {
    /* The login: HELLO, magic u32, version u16, rank i32, world i32 ->
     * code, reason, challenge (DD_STORE_NONCE bytes); then PROOF,
     * DD_STORE_PROOF_LABEL's HMAC (dd_store_proof) -> code, reason. */
    DD_STORE_OP_HELLO = 1,
    DD_STORE_OP_SET,   /* key, value */
    DD_STORE_OP_GET,   /* timeout_ms u32, key -> value */
    DD_STORE_OP_WAIT,  /* timeout_ms u32, n u16, keys -> (n bytes) */
    DD_STORE_OP_ADD,   /* key, delta i64 -> i64 */
    DD_STORE_OP_DEL,   /* key -> u8 deleted */
    DD_STORE_OP_PROOF, /* HMAC (32 bytes) -> code, reason */
    DD_STORE_OP_TIME   /* -> the server's wall clock, us (f64's bits, u64) */
};

#define DD_STORE_NONCE 32

/* The proof of the login secret: HMAC-SHA256 under the secret (8 bytes,
 * big-endian) of a label, the server's challenge, the rank and the world
 * size, so that a proof answers one challenge for one rank only. */
void dd_store_proof(uint64_t secret, const uint8_t nonce[DD_STORE_NONCE],
                    int rank, int world, uint8_t out[32]);

enum {
    DD_STORE_REPLY_OK = 0,
    DD_STORE_REPLY_TIMEOUT,  /* payload: present flags (WAIT) */
    DD_STORE_REPLY_REFUSED,  /* payload: reason string */
    DD_STORE_REPLY_MISMATCH, /* payload: reason string */
    DD_STORE_REPLY_BAD       /* payload: reason string */
};

/* A growable byte buffer for building frames. */
typedef struct {
    uint8_t *data;
    size_t len, cap;
    int failed;
} dd_store_buf_t;

/* A read cursor over a received body. */
typedef struct {
    const uint8_t *p;
    size_t left;
    int failed;
} dd_store_cursor_t;

void dd_store_buf_put(dd_store_buf_t *b, const void *src, size_t len);
void dd_store_buf_u8(dd_store_buf_t *b, uint8_t v);
void dd_store_buf_u16(dd_store_buf_t *b, uint16_t v);
void dd_store_buf_u32(dd_store_buf_t *b, uint32_t v);
void dd_store_buf_u64(dd_store_buf_t *b, uint64_t v);
void dd_store_buf_str(dd_store_buf_t *b, const char *s);
void dd_store_buf_bytes(dd_store_buf_t *b, const void *v, size_t len);
/* Starts a frame: reserves the length, which dd_store_buf_finish fills. */
void dd_store_buf_begin(dd_store_buf_t *b);
void dd_store_buf_finish(dd_store_buf_t *b);
void dd_store_buf_free(dd_store_buf_t *b);

uint8_t dd_store_get_u8(dd_store_cursor_t *c);
uint16_t dd_store_get_u16(dd_store_cursor_t *c);
uint32_t dd_store_get_u32(dd_store_cursor_t *c);
uint64_t dd_store_get_u64(dd_store_cursor_t *c);
/* Copies a string into out (NUL-terminated); fails if it does not fit. */
void dd_store_get_str(dd_store_cursor_t *c, char *out, size_t size);
/* Points into the body; valid while the body is. */
const void *dd_store_get_bytes(dd_store_cursor_t *c, size_t *len_p);

#endif
