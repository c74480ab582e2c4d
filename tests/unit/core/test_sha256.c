/*
 * Tests of SHA-256 (src/core/sha256.c) against FIPS 180-4's examples and
 * sha256sum at the padding's edges (55, 56, 64 bytes: one block of tail,
 * two, a whole block), and of the derivation under a label.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/sha256.h"

#include <stdio.h>
#include <string.h>

static void digest_hex(const uint8_t d[DD_SHA256_BYTES], char out[65])
{
    for (int i = 0; i < DD_SHA256_BYTES; i++) {
        snprintf(out + 2 * i, 3, "%02x", d[i]);
    }
}

static void hex(const void *data, size_t len, char out[65])
{
    uint8_t d[DD_SHA256_BYTES];

    dd_sha256(data, len, d);
    digest_hex(d, out);
}

static void test_vectors(void **state)
{
    char h[65], x[1000];

    hex("", 0, h);
    assert_string_equal(
        h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex("abc", 3, h);
    assert_string_equal(
        h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex(m, strlen(m), h);
    assert_string_equal(
        h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    memset(x, 'x', sizeof(x));
    hex(x, 55, h);
    assert_string_equal(
        h, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
    hex(x, 56, h);
    assert_string_equal(
        h, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
    hex(x, 64, h);
    assert_string_equal(
        h, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
    memset(x, 'a', sizeof(x));
    hex(x, 1000, h);
    assert_string_equal(
        h, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

/* The first 8 bytes of SHA-256(label, 0, secret): another label, another
 * value; the label's end is marked, so "ab" + "c" is not "a" + "bc". */
/* RFC 4231's HMAC-SHA256 cases 1, 2 and 6 (a key longer than a block). */
static void test_hmac(void **state)
{
    static const struct {
        const char *key, *data, *hex;
        size_t klen;
    } cases[] = {
        {"\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b"
         "\x0b\x0b\x0b\x0b\x0b",
         "Hi There",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
         20},
        {"Jefe", "what do ya want for nothing?",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 4},
    };
    uint8_t out[DD_SHA256_BYTES], key[131];
    char text[2 * DD_SHA256_BYTES + 1];

    (void)state;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        assert_int_equal(dd_hmac_sha256(cases[c].key, cases[c].klen,
                                        cases[c].data, strlen(cases[c].data),
                                        out),
                         0);
        digest_hex(out, text);
        assert_string_equal(text, cases[c].hex);
    }
    memset(key, 0xaa, sizeof(key));
    const char *data = "Test Using Larger Than Block-Size Key - Hash Key First";
    dd_hmac_sha256(key, sizeof(key), data, strlen(data), out);
    digest_hex(out, text);
    assert_string_equal(
        text,
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

static void test_derive(void **state)
{
    assert_true(
        dd_sha256_derive("dreamddp store login", "secret-of-this-job") ==
        0xaf903a8d67015235ull);
    assert_true(
        dd_sha256_derive("dreamddp local names", "secret-of-this-job") ==
        0x9a1357ad4c5d1854ull);
    assert_true(dd_sha256_derive("ab", "c") != dd_sha256_derive("a", "bc"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_derive),
        cmocka_unit_test(test_hmac),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
