/* The TCP store's frame encoding: round trips and truncated input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "boot/store_proto.h"

static void test_round_trip(void **state)
{
    dd_store_buf_t b = {0};
    dd_store_buf_begin(&b);
    dd_store_buf_u8(&b, 7);
    dd_store_buf_u16(&b, 0xBEEF);
    dd_store_buf_u32(&b, 0xDEADBEEFu);
    dd_store_buf_u64(&b, 0x0123456789ABCDEFull);
    dd_store_buf_str(&b, "key/1");
    dd_store_buf_bytes(&b, "\0\1\2", 3);
    dd_store_buf_finish(&b);
    assert_false(b.failed);
    assert_int_equal(b.len, 4 + 1 + 2 + 4 + 8 + 2 + 5 + 4 + 3);
    assert_int_equal(b.data[0], b.len - 4); /* little-endian length */

    dd_store_cursor_t c = {b.data + 4, b.len - 4, 0};
    char key[16];
    size_t vlen;
    assert_int_equal(dd_store_get_u8(&c), 7);
    assert_int_equal(dd_store_get_u16(&c), 0xBEEF);
    assert_int_equal(dd_store_get_u32(&c), 0xDEADBEEFu);
    assert_true(dd_store_get_u64(&c) == 0x0123456789ABCDEFull);
    dd_store_get_str(&c, key, sizeof(key));
    assert_string_equal(key, "key/1");
    const uint8_t *v = dd_store_get_bytes(&c, &vlen);
    assert_int_equal(vlen, 3);
    assert_int_equal(v[2], 2);
    assert_false(c.failed);
    assert_int_equal(c.left, 0);
    dd_store_buf_free(&b);
}

static void test_truncated_and_oversized(void **state)
{
    const uint8_t body[] = {5, 0, 'a', 'b'}; /* claims 5 bytes, has 2 */
    dd_store_cursor_t c = {body, sizeof(body), 0};
    char key[16];
    dd_store_get_str(&c, key, sizeof(key));
    assert_true(c.failed);
    assert_string_equal(key, "");
    assert_int_equal(dd_store_get_u32(&c), 0); /* stays failed */

    const uint8_t big[] = {20,  0,   'a', 'a', 'a', 'a', 'a', 'a',
                           'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a',
                           'a', 'a', 'a', 'a', 'a', 'a'};
    dd_store_cursor_t d = {big, sizeof(big), 0};
    dd_store_get_str(&d, key, sizeof(key)); /* does not fit in 16 */
    assert_true(d.failed);

    const uint8_t bytes[] = {0xff, 0xff, 0xff, 0x7f, 1};
    dd_store_cursor_t e = {bytes, sizeof(bytes), 0};
    size_t len = 99;
    assert_null(dd_store_get_bytes(&e, &len));
    assert_int_equal(len, 0);
    assert_true(e.failed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_truncated_and_oversized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
