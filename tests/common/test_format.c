/* common/format: the terminal escape (names from traces and directories must not drive the terminal). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "format.h"

static void test_format_escape_controls(void **state) {
    (void)state;
    char b[256];
    assert_string_equal(pl_format_escape("\x1b]0;PWNED\a\x1b[31mEVIL", b, sizeof b), "\\x1b]0;PWNED\\x07\\x1b[31mEVIL");
    assert_string_equal(pl_format_escape("a\nb\tc\rd\\e\x7f", b, sizeof b), "a\\nb\\tc\\rd\\\\e\\x7f");
    assert_string_equal(pl_format_escape(NULL, b, sizeof b), "");
    assert_string_equal(pl_format_escape("train.py --lr 3e-4", b, sizeof b), "train.py --lr 3e-4");
}

static void test_format_escape_utf8(void **state) {
    (void)state;
    char b[256];
    assert_string_equal(pl_format_escape("Tr\xc3\xbc" "e \xe2\x82\xac \xf0\x9f\x98\x80", b, sizeof b),
                        "Tr\xc3\xbc" "e \xe2\x82\xac \xf0\x9f\x98\x80"); /* ü, euro sign, an emoji: kept */
    assert_string_equal(pl_format_escape("\xc2\x9b" "31m", b, sizeof b), "\\xc2\\x9b31m"); /* C1 CSI */
    assert_string_equal(pl_format_escape("\x9b" "31m", b, sizeof b), "\\x9b31m");        /* raw C1 byte */
    assert_string_equal(pl_format_escape("a\xe2\x80\xae" "b", b, sizeof b), "a\\xe2\\x80\\xaeb"); /* RLO */
    assert_string_equal(pl_format_escape("\xe2\x82", b, sizeof b), "\\xe2\\x82");          /* cut sequence */
    assert_string_equal(pl_format_escape("\xed\xa0\x80", b, sizeof b), "\\xed\\xa0\\x80");   /* surrogate */
    assert_string_equal(pl_format_escape("\xc0\xaf", b, sizeof b), "\\xc0\\xaf");           /* overlong */
}

static void test_format_escape_bounded(void **state) {
    (void)state;
    char b[10];
    assert_string_equal(pl_format_escape("abcdefghi", b, sizeof b), "abcdefghi"); /* fits exactly */
    assert_string_equal(pl_format_escape("abcdefghij", b, sizeof b), "abcdef...");
    assert_string_equal(pl_format_escape("abcd\x1b\x1b", b, sizeof b), "abcd...");  /* never half an escape */
    const char *x = pl_format_esc("\x1b"), *y = pl_format_esc("y");
    assert_string_equal(x, "\\x1b"); /* still valid after the next call */
    assert_string_equal(y, "y");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_escape_controls),
        cmocka_unit_test(test_format_escape_utf8),
        cmocka_unit_test(test_format_escape_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
