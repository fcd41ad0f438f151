/* tests/reports/test_generations: the generation rule (reports/generations.c, docs/verdict.md §8) on hand-made
 * generation series: the exact Mann-Kendall tail, the fewest generations that can be a leak, the band, plateaus. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "generations.h"

#define MiB (1024.0 * 1024.0)

/* n generations every 50 steps (first at step 50, 10 s per step), values in MiB */
static pl_series_t gens(const double *mib, size_t n) {
    pl_sample_t smp[64];
    for (size_t i = 0; i < n; i++)
        smp[i] = (pl_sample_t){(int64_t)(50 * (i + 1)), (int64_t)(500 * (i + 1)) * 1000000000LL, mib[i] * MiB};
    pl_series_t s;
    assert_int_equal(pl_series_build(smp, n, NULL, &s), 0);
    return s;
}

static pl_verdict_t judge(const double *mib, size_t n) {
    pl_series_t s = gens(mib, n);
    pl_verdict_t v;
    assert_int_equal(pl_generations_classify(&s, 0.01, &v), 0);
    pl_series_free(&s);
    return v;
}

/* P(S >= max) = 1/n!; the null distribution is symmetric; below the smallest S, 1 */
static void test_generations_mk_exact(void **state) {
    (void)state;
    assert_true(fabs(pl_generations_mk_p(4, 6) - 1.0 / 24) < 1e-12);
    assert_true(fabs(pl_generations_mk_p(5, 10) - 1.0 / 120) < 1e-12);
    assert_true(fabs(pl_generations_mk_p(3, 1) - 0.5) < 1e-12); /* S of 3 values: -3,-1,1,3 weighted 1,2,2,1 */
    assert_true(fabs(pl_generations_mk_p(3, 3) - 1.0 / 6) < 1e-12);
    assert_true(fabs(pl_generations_mk_p(6, 1) - 0.5) < 1e-12); /* S of 6 values is odd, symmetric: P(S >= 1) = 1/2 */
    assert_true(pl_generations_mk_p(7, -21) == 1);
    assert_true(isnan(pl_generations_mk_p(1, 0)));
    assert_true(isnan(pl_generations_mk_p(PL_GEN_MAX_GENERATIONS + 1, 0)));
    assert_true(pl_generations_mk_p(64, 2016) > 0 && pl_generations_mk_p(64, 2016) < 1e-80);
}

/* 4 perfectly increasing generations cannot be a leak at alpha 1 % (1/4! = 4.2 %); 5 can */
static void test_generations_fewest_for_a_leak(void **state) {
    (void)state;
    const double up[] = {10, 14, 18, 22, 26};
    pl_verdict_t v = judge(up, 4);
    assert_int_equal(v.kind, PL_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.undecided, PL_UNDECIDED_NOISY);
    assert_int_equal(v.more_steps, 50); /* one more generation */
    v = judge(up, 5);
    assert_int_equal(v.kind, PL_VERDICT_LEAK);
    assert_true(fabs(v.slope_per_step - 4 * MiB / 50) < 1);
    assert_true(fabs(v.per_hour - 4 * MiB / 50 * 360) < 1); /* 10 s per step */
    v = judge(up, 2);
    assert_int_equal(v.kind, PL_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.undecided, PL_UNDECIDED_NO_DATA);
}

/* growth inside the band (2 % of the level, at least 256 KiB) is ties, not a trend: flat */
static void test_generations_band(void **state) {
    (void)state;
    const double small[] = {100, 100.3, 100.6, 100.9, 101.2, 101.5, 101.8};
    pl_verdict_t v = judge(small, 7);
    assert_int_equal(v.kind, PL_VERDICT_FLAT);
    const double tiny[] = {1, 1.1, 1.2, 1.25, 1.3, 1.35, 1.4}; /* all within 2 x 256 KiB */
    v = judge(tiny, 7);
    assert_int_equal(v.kind, PL_VERDICT_FLAT);
    const double clear[] = {1, 2, 3, 4, 5, 6, 7};
    assert_int_equal(judge(clear, 7).kind, PL_VERDICT_LEAK);
}

/* the first pass warms something up, the later ones are equal: a plateau, never a leak */
static void test_generations_plateau_and_noise(void **state) {
    (void)state;
    const double warm[] = {10, 20, 30, 30.2, 30.1, 30.3, 30.2, 30.1};
    pl_verdict_t v = judge(warm, 8);
    assert_int_equal(v.kind, PL_VERDICT_PLATEAU);
    assert_true(v.has_warmup);
    assert_int_equal(v.warmup_end_step, 150); /* the last two thirds: from the third generation */
    /* a healthy run of tests/targets/torch_valgen.py: the first pass caches nothing, one later generation held a
     * transient 1 MiB more (one worker's peak): a plateau, not undecided; also with two such generations */
    const double real[] = {0.221, 2.226, 2.179, 2.170, 2.175, 2.177, 3.172, 2.172};
    v = judge(real, 8);
    assert_int_equal(v.kind, PL_VERDICT_PLATEAU);
    const double real2[] = {0.221, 2.226, 2.179, 3.170, 2.175, 2.177, 3.172, 2.172};
    assert_int_equal(judge(real2, 8).kind, PL_VERDICT_PLATEAU);
    /* ... and when the odd one is the last (a slope through the window's ends would call that a trend) */
    const double real3[] = {0.221, 2.226, 2.179, 2.170, 2.175, 2.177, 2.172, 3.172};
    assert_int_equal(judge(real3, 8).kind, PL_VERDICT_PLATEAU);
    /* a long warmup (4 generations rising) then 6 equal ones: Mann-Kendall over all ten is significant, but the
     * recent generations are flat: a plateau, never a leak */
    const double long_warm[] = {2, 4, 6, 8, 10, 10.1, 10, 10.1, 10, 10.1};
    v = judge(long_warm, 10);
    assert_true(v.p_up < 0.01);
    assert_int_equal(v.kind, PL_VERDICT_PLATEAU);
    const double noisy[] = {10, 30, 12, 28, 11, 31};
    v = judge(noisy, 6);
    assert_int_equal(v.kind, PL_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.undecided, PL_UNDECIDED_NOISY);
    assert_int_equal(v.more_steps, 100);
    /* one generation lower in the middle of a steady rise: still a leak (a rank test, not "every one higher") */
    const double dip[] = {10, 12, 14, 13, 18, 20, 22, 24};
    assert_int_equal(judge(dip, 8).kind, PL_VERDICT_LEAK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generations_mk_exact),
        cmocka_unit_test(test_generations_fewest_for_a_leak),
        cmocka_unit_test(test_generations_band),
        cmocka_unit_test(test_generations_plateau_and_noise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
