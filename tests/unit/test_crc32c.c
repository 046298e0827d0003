/*
 * test_crc32c.c - the checksum of net messages (src/base/crc32c.c): the
 * standard check value, and the fast paths (256-byte carry-less folding
 * where the CPU has VPCLMULQDQ, three CRC-instruction streams joined by
 * table shifts) against the plain table, over lengths and splits around
 * their block sizes, at odd alignments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/crc32c.h"

static void test_check_value(void **state)
{
    (void)state;
    /* CRC-32C of "123456789" (RFC 3720's polynomial): 0xe3069283. */
    assert_int_equal(crc32c_update(CRC32C_INIT, "123456789", 9) ^ 0xffffffffu, 0xe3069283u);
    assert_int_equal(crc32c_update_sw(CRC32C_INIT, "123456789", 9) ^ 0xffffffffu, 0xe3069283u);
    assert_int_equal(crc32c_update(CRC32C_INIT, NULL, 0), CRC32C_INIT);
}

static void test_fast_path_matches_table(void **state)
{
    (void)state;
    size_t n = 100003;
    unsigned char *buf = malloc(n + 8);
    assert_non_null(buf);
    srand(7);
    for (size_t i = 0; i < n + 8; i++)
        buf[i] = (unsigned char)rand();
    static const size_t lens[] = {0, 1, 7, 8, 9, 4095, 4096, 12287, 12288, 12289, 24576, 24577, 36864, 36941,
                                 255, 256, 511, 512, 513, 767, 768, 1024, 100003};
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (size_t off = 0; off < 8; off += 3) {
            size_t len = lens[l];
            uint32_t want = crc32c_update_sw(CRC32C_INIT, buf + off, len);
            assert_int_equal(crc32c_update(CRC32C_INIT, buf + off, len), want);
            /* Piece by piece, as a message's checksum is taken. */
            for (size_t cut = 0; cut <= len; cut += len / 5 + 1)
                assert_int_equal(crc32c_update(crc32c_update(CRC32C_INIT, buf + off, cut), buf + off + cut, len - cut),
                                 want);
        }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_value),
        cmocka_unit_test(test_fast_path_matches_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
