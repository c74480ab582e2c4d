/*
 * SHA-256 (FIPS 180-4), for deriving the values a job's secret token
 * yields (the store's login, the names of local objects) so that none
 * can be computed from another. No I/O.
 */
#ifndef DD_CORE_SHA256_H
#define DD_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define DD_SHA256_BYTES 32

/** out = SHA-256 of the len bytes at data. */
void dd_sha256(const void *data, size_t len, uint8_t out[DD_SHA256_BYTES]);

/**
 * The first 8 bytes of SHA-256(label, a zero byte, secret), big-endian: a
 * value of the secret that values under other labels do not reveal.
 */
uint64_t dd_sha256_derive(const char *label, const char *secret);

/** out = HMAC-SHA256 (RFC 2104) of the len bytes at data under the klen
 *  bytes of key. 0, or -1 when out of memory (out is then zeros). */
int dd_hmac_sha256(const void *key, size_t klen, const void *data, size_t len,
                   uint8_t out[DD_SHA256_BYTES]);

#endif
