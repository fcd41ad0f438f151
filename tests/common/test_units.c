/* common/units: the size grammar (every unit, case, the decimal/binary split, overflow at the edge, rejects) and
 * each formatter style against the strings the outputs printed before they shared one file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include "units.h"

static uint64_t parsed(const char *s) {
    uint64_t v = 12345;
    int rc = pl_units_parse(s, &v);
    if (rc != 0) fail_msg("'%s' did not parse (%d)", s, rc);
    return v;
}

static void test_units_parse_units(void **state) {
    (void)state;
    assert_true(parsed("0") == 0);
    assert_true(parsed("524288") == 524288);
    assert_true(parsed("7B") == 7);
    assert_true(parsed("512K") == 512ull << 10);
    assert_true(parsed("512k") == 512ull << 10);
    assert_true(parsed("512KiB") == 512ull << 10);
    assert_true(parsed("512kib") == 512ull << 10);
    assert_true(parsed("3M") == 3ull << 20);
    assert_true(parsed("3MiB") == 3ull << 20);
    assert_true(parsed("1G") == 1ull << 30);
    assert_true(parsed("80GiB") == 80ull << 30);
    assert_true(parsed("2T") == 2ull << 40);
    assert_true(parsed("2tib") == 2ull << 40);
    /* KB..TB count in powers of 1000, as PLATEAU_SIM_DEVICE always read them */
    assert_true(parsed("1KB") == 1000);
    assert_true(parsed("1MB") == 1000000);
    assert_true(parsed("1GB") == 1000000000);
    assert_true(parsed("1gb") == 1000000000);
    assert_true(parsed("1TB") == 1000000000000ull);
    assert_true(parsed("007K") == 7ull << 10);
}

static void test_units_parse_edges(void **state) {
    (void)state;
    assert_true(parsed("18446744073709551615") == UINT64_MAX);
    assert_true(parsed("16777215T") == 16777215ull << 40);
    uint64_t v = 99;
    assert_int_equal(pl_units_parse("18446744073709551616", &v), -ERANGE);
    assert_int_equal(pl_units_parse("99999999999999999999999", &v), -ERANGE);
    assert_int_equal(pl_units_parse("16777216T", &v), -ERANGE);
    assert_int_equal(pl_units_parse("18446744073709552KB", &v), -ERANGE);
    assert_int_equal(pl_units_parse("18446744073709551KB", &v), 0);
    assert_true(v == 18446744073709551000ull);
    v = 99;
    assert_int_equal(pl_units_parse("18446744073709551616X", &v), -EINVAL); /* a bad unit is named before the size */
    assert_true(v == 99);
}

static void test_units_parse_rejects(void **state) {
    (void)state;
    const char *bad[] = {"", "K", "-1", "+1", " 1", "1 ", "1 K", "1.5G", "1e9", "0x10", "1KK", "1Ki", "1iB",
                         "1Kb8", "1X", "1XB", "1PiB", "1bytes", "12G\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 99;
        if (pl_units_parse(bad[i], &v) != -EINVAL) fail_msg("'%s' was taken as a size", bad[i]);
        assert_true(v == 99);
    }
    uint64_t v = 99;
    assert_int_equal(pl_units_parse(NULL, &v), -EINVAL);
    /* "1K\0junk" is "1K" to C: the embedded NUL ends the string */
    assert_int_equal(pl_units_parse("1K\0junk", &v), 0);
}

#define FMT(style, v, want)                                                \
    do {                                                                   \
        char b_[64];                                                       \
        assert_string_equal(pl_units_format((v), (style), b_, sizeof b_), (want)); \
    } while (0)

static void test_units_format_sig3(void **state) {
    (void)state;
    FMT(PL_UNITS_SIG3, 512, "512 B");
    FMT(PL_UNITS_SIG3, 0, "0 B");
    FMT(PL_UNITS_SIG3, 1023, "1023 B");
    FMT(PL_UNITS_SIG3, 1024, "1.00 KiB");
    FMT(PL_UNITS_SIG3, 1536, "1.50 KiB");
    FMT(PL_UNITS_SIG3, 10.0 * 1024 * 1024, "10.0 MiB");
    FMT(PL_UNITS_SIG3, 200.0 * 1024 * 1024, "200 MiB");
    FMT(PL_UNITS_SIG3, 1000.0 * 1024, "1000 KiB");
    FMT(PL_UNITS_SIG3, 17.0 * 1024 * 1024 * 1024, "17.0 GiB");
    FMT(PL_UNITS_SIG3, -4.2 * 1024 * 1024, "-4.20 MiB");
    FMT(PL_UNITS_SIG3, 3.0 * 1125899906842624.0, "3.00 PiB");
    FMT(PL_UNITS_SIG3, 2048.0 * 1125899906842624.0, "2048 PiB");
    FMT(PL_UNITS_SIG3, NAN, "?");
    FMT(PL_UNITS_SIG3, -INFINITY, "?");
}

static void test_units_format_tenths(void **state) {
    (void)state;
    FMT(PL_UNITS_TENTHS, 512, "512 B");
    FMT(PL_UNITS_TENTHS, 3.1 * 1024 * 1024 * 1024, "3.10 GiB");
    FMT(PL_UNITS_TENTHS, 200.0 * 1024 * 1024, "200.0 MiB");
    FMT(PL_UNITS_TENTHS, 1000.0 * 1024, "1000.0 KiB");
    FMT(PL_UNITS_TENTHS, -2.0 * 1024 * 1024, "-2.00 MiB");
    FMT(PL_UNITS_TENTHS, 3.0 * 1125899906842624.0, "3072.0 TiB");
    FMT(PL_UNITS_TENTHS, NAN, "nan B");
}

static void test_units_format_fixed2_torch(void **state) {
    (void)state;
    FMT(PL_UNITS_FIXED2, 512, "512 B");
    FMT(PL_UNITS_FIXED2, 1024, "1.00 KiB");
    FMT(PL_UNITS_FIXED2, 200.0 * 1024 * 1024, "200.00 MiB");
    FMT(PL_UNITS_FIXED2, -3.0 * 1024, "-3.00 KiB");
    FMT(PL_UNITS_FIXED2, 80.0 * 1024 * 1024 * 1024, "80.00 GiB");
    FMT(PL_UNITS_TORCH, 512, "512 bytes");
    FMT(PL_UNITS_TORCH, 40.0 * 1024 * 1024, "40.00 MiB");
    FMT(PL_UNITS_TORCH, 3.0 * 1125899906842624.0, "3072.00 TiB");
}

static void test_units_format_cuts(void **state) {
    (void)state;
    char b[6];
    assert_string_equal(pl_units_format(17.0 * 1024 * 1024 * 1024, PL_UNITS_SIG3, b, sizeof b), "17.0 ");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_parse_units),   cmocka_unit_test(test_units_parse_edges),
        cmocka_unit_test(test_units_parse_rejects), cmocka_unit_test(test_units_format_sig3),
        cmocka_unit_test(test_units_format_tenths), cmocka_unit_test(test_units_format_fixed2_torch),
        cmocka_unit_test(test_units_format_cuts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
