/*
 * SHA-256 as FIPS 180-4 specifies it, one call over a whole message: the
 * message is padded into 64-byte blocks and each block compressed into
 * the eight-word state. No I/O.
 */
#include "core/sha256.h"

#include <stdlib.h>
#include <string.h>

static const uint32_t dd_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t dd_rotr(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void dd_sha256_block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64], s[8];

    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 =
            dd_rotr(w[i - 15], 7) ^ dd_rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 =
            dd_rotr(w[i - 2], 17) ^ dd_rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(s, h, sizeof(s));
    for (int i = 0; i < 64; i++) {
        uint32_t e = s[4], a = s[0];
        uint32_t t1 = s[7] + (dd_rotr(e, 6) ^ dd_rotr(e, 11) ^ dd_rotr(e, 25)) +
                      ((e & s[5]) ^ (~e & s[6])) + dd_sha256_k[i] + w[i];
        uint32_t t2 = (dd_rotr(a, 2) ^ dd_rotr(a, 13) ^ dd_rotr(a, 22)) +
                      ((a & s[1]) ^ (a & s[2]) ^ (s[1] & s[2]));
        memmove(&s[1], &s[0], 7 * sizeof(uint32_t));
        s[4] += t1;
        s[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) {
        h[i] += s[i];
    }
}

void dd_sha256(const void *data, size_t len, uint8_t out[DD_SHA256_BYTES])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    uint8_t last[128] = {0};
    size_t full = len / 64 * 64, rest = len - full;
    uint64_t bits = (uint64_t)len * 8;

    for (size_t off = 0; off < full; off += 64) {
        dd_sha256_block(h, p + off);
    }
    /* The tail, a 1 bit, zeros, and the length in bits: one block or two. */
    memcpy(last, p + full, rest);
    last[rest] = 0x80;
    size_t n = rest + 1 + 8 <= 64 ? 64 : 128;
    for (int i = 0; i < 8; i++) {
        last[n - 1 - i] = (uint8_t)(bits >> (8 * i));
    }
    for (size_t off = 0; off < n; off += 64) {
        dd_sha256_block(h, last + off);
    }
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

uint64_t dd_sha256_derive(const char *label, const char *secret)
{
    size_t ll = strlen(label) + 1, sl = strlen(secret);
    uint8_t *msg = malloc(ll + sl), out[DD_SHA256_BYTES];
    uint64_t v = 0;

    if (msg == NULL) {
        return 0; /* refused by every store: no value is 0 by chance */
    }
    memcpy(msg, label, ll); /* with its terminating zero */
    memcpy(msg + ll, secret, sl);
    dd_sha256(msg, ll + sl, out);
    memset(msg, 0, ll + sl);
    free(msg);
    for (int i = 0; i < 8; i++) {
        v = v << 8 | out[i];
    }
    return v;
}

int dd_hmac_sha256(const void *key, size_t klen, const void *data, size_t len,
                   uint8_t out[DD_SHA256_BYTES])
{
    uint8_t k[64] = {0}, inner[DD_SHA256_BYTES], outer[64 + DD_SHA256_BYTES];
    uint8_t *msg = malloc(64 + len);

    memset(out, 0, DD_SHA256_BYTES);
    if (msg == NULL) {
        return -1;
    }
    if (klen > 64) {
        dd_sha256(key, klen, k); /* a long key is hashed first */
    } else {
        memcpy(k, key, klen);
    }
    for (int i = 0; i < 64; i++) {
        msg[i] = k[i] ^ 0x36;
        outer[i] = k[i] ^ 0x5c;
    }
    memcpy(msg + 64, data, len);
    dd_sha256(msg, 64 + len, inner);
    memcpy(outer + 64, inner, DD_SHA256_BYTES);
    dd_sha256(outer, sizeof(outer), out);
    memset(k, 0, sizeof(k));
    memset(msg, 0, 64);
    free(msg);
    return 0;
}
