/* CRC-32C (tracer/core/crc.c): the dispatched implementation (the SSE4.2 crc32 instruction where the CPU has it) and
 * the portable slicing-by-8 one both equal the bit-at-a-time definition, for every length 0..300 at every alignment
 * 0..7, when continued piece by piece, and on the standard check value. A trace written by one must verify with
 * the other. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "crc.h"

/* The definition: reflected CRC over polynomial 0x82f63b78, one bit at a time, complemented in and out. */
static uint32_t crc_bitwise(uint32_t crc, const uint8_t *p, size_t len) {
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
    }
    return ~crc;
}

static void fill(uint8_t *b, size_t n) {
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (uint8_t)(x >> 16);
    }
}

static void test_crc_check_value(void **state) {
    (void)state;
    const char *s = "123456789";
    assert_int_equal(pl_crc_update(0, s, 9), 0xe3069283u);
    assert_int_equal(pl_crc_update_portable(0, s, 9), 0xe3069283u);
    assert_int_equal(pl_crc_update(0, s, 0), 0);
}

static void test_crc_every_length_and_alignment(void **state) {
    (void)state;
    uint8_t buf[320];
    fill(buf, sizeof buf);
    for (size_t off = 0; off < 8; off++)
        for (size_t len = 0; off + len <= 308; len++) {
            uint32_t want = crc_bitwise(0, buf + off, len);
            assert_int_equal(pl_crc_update(0, buf + off, len), want);
            assert_int_equal(pl_crc_update_portable(0, buf + off, len), want);
        }
}

static void test_crc_continues_across_pieces(void **state) {
    (void)state;
    size_t n = 1 << 16;
    uint8_t *b = malloc(n);
    assert_non_null(b);
    fill(b, n);
    uint32_t want = crc_bitwise(0, b, n);
    uint32_t c = 0, cp = 0;
    for (size_t at = 0, piece = 1; at < n; at += piece, piece = piece * 3 % 1021 + 1) {
        size_t k = at + piece > n ? n - at : piece;
        c = pl_crc_update(c, b + at, k);
        cp = pl_crc_update_portable(cp, b + at, k);
    }
    assert_int_equal(c, want);
    assert_int_equal(cp, want);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc_check_value),
        cmocka_unit_test(test_crc_every_length_and_alignment),
        cmocka_unit_test(test_crc_continues_across_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
