/* common/hash: the finaliser against MurmurHash3's published fmix64 values, and what pl_hash_pcs keys on (every
 * frame, their order, their count). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "hash.h"

static void test_hash_mix64(void **state) {
    (void)state;
    assert_true(pl_hash_mix64(0) == 0);
    assert_true(pl_hash_mix64(1) == 0xb456bcfc34c2cb2cull);
    assert_true(pl_hash_mix64(0xdeadbeefull) == 0xd24bd59f862a1dacull);
}

static void test_hash_pcs(void **state) {
    (void)state;
    const uint64_t a[] = {0x401000, 0x402000}, b[] = {0x402000, 0x401000}, z[] = {0x401000, 0x402000, 0};
    assert_true(pl_hash_pcs(a, 2) == 0x752b3c9973bb49f4ull);
    assert_true(pl_hash_pcs(a, 2) != pl_hash_pcs(b, 2));
    assert_true(pl_hash_pcs(a, 2) != pl_hash_pcs(z, 3));
    assert_true(pl_hash_pcs(a, 1) != pl_hash_pcs(a, 2));
    assert_true(pl_hash_pcs(a, 0) == 0x9e3779b97f4a7c15ull);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_mix64),
        cmocka_unit_test(test_hash_pcs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
