/* tests/allocator/test_rounding.c: 512 B rounding, roundup_power2_divisions, pools and segment sizes. */
#include "config.h"

#include "helpers.h"

static void test_rounding_512(void **state) {
    (void)state;
    pl_alloc_config_t c;
    pl_alloc_config_default(&c);
    assert_int_equal(pl_rounding_round(&c, 0), 512);
    assert_int_equal(pl_rounding_round(&c, 1), 512);
    assert_int_equal(pl_rounding_round(&c, 512), 512);
    assert_int_equal(pl_rounding_round(&c, 513), 1024);
    assert_int_equal(pl_rounding_round(&c, 1000 * 1000), 1000448);
    assert_int_equal(pl_rounding_round(&c, 5 * MiB + 1), 5 * MiB + 512);
}

static void test_rounding_power2_divisions(void **state) {
    (void)state;
    pl_alloc_config_t c;
    char err[256];
    assert_int_equal(pl_alloc_config_parse("roundup_power2_divisions:4", &c, err, sizeof err), 0);
    /* 1 MiB + 1 lies in [1, 2) MiB: steps of 256 KiB */
    assert_int_equal(pl_rounding_round(&c, MiB + 1), MiB + 256 * KiB);
    assert_int_equal(pl_rounding_round(&c, MiB + 256 * KiB), MiB + 256 * KiB);
    assert_int_equal(pl_rounding_round(&c, 3 * MiB), 3 * MiB);          /* on a step */
    assert_int_equal(pl_rounding_round(&c, 5 * MiB + 1), 6 * MiB);      /* [4, 8) MiB: steps of 1 MiB */
    assert_int_equal(pl_rounding_round(&c, 4 * MiB), 4 * MiB);          /* power of two kept */
    assert_int_equal(pl_rounding_round(&c, 1500), 1536);                /* below 512 x 4: plain rounding */
    assert_int_equal(pl_rounding_round(&c, 2049), 2560);                /* 2049 > 2048: step 512 */
    assert_int_equal(pl_rounding_round(&c, 7048), 7168);                /* [4096, 8192): step 1024 */
    /* bucket form: 1 division below 256 MiB (plain), 2 in [256, 512) MiB, 8 above */
    assert_int_equal(pl_alloc_config_parse("roundup_power2_divisions:[256:1,512:2,>:8]", &c, err, sizeof err), 0);
    assert_int_equal(pl_rounding_round(&c, 100 * MiB + 1), 100 * MiB + 512);
    assert_int_equal(pl_rounding_round(&c, 300 * MiB), 384 * MiB);
    assert_int_equal(pl_rounding_round(&c, 600 * MiB), 640 * MiB);
}

static void test_rounding_pools_and_segments(void **state) {
    (void)state;
    assert_int_equal(pl_rounding_pool(512), PL_POOL_SMALL);
    assert_int_equal(pl_rounding_pool(MiB), PL_POOL_SMALL);
    assert_int_equal(pl_rounding_pool(MiB + 512), PL_POOL_LARGE);
    assert_int_equal(pl_rounding_segment_size(512), 2 * MiB);
    assert_int_equal(pl_rounding_segment_size(MiB), 2 * MiB);
    assert_int_equal(pl_rounding_segment_size(MiB + 512), 20 * MiB);
    assert_int_equal(pl_rounding_segment_size(10 * MiB - 512), 20 * MiB);
    assert_int_equal(pl_rounding_segment_size(10 * MiB), 10 * MiB);
    assert_int_equal(pl_rounding_segment_size(11 * MiB + 512), 12 * MiB);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding_512),
        cmocka_unit_test(test_rounding_power2_divisions),
        cmocka_unit_test(test_rounding_pools_and_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
