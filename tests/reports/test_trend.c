/* reports.trend: Theil-Sen, Sen's interval, Mann-Kendall with the Hamed-Rao correction (reports/trend.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "trend.h"
#include "synth.h"

static void fill(double *x, double *y, size_t n, uint64_t seed, double slope, double sd, double phi) {
    synth_rng_t r = {seed * 7919 + 1};
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        e = phi * e + sqrt(1 - phi * phi) * synth_gauss(&r);
        x[i] = (double)(i + 1);
        y[i] = 1000 + slope * x[i] + sd * e;
    }
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : (x > y);
}

/* The slope and its interval are order statistics of the pairwise slopes (selected, not sorted, in trend.c): they
 * must be exactly the sorted array's, on ties (quantised, flat), runs, alternation, overflowing slopes and noise. */
static void test_trend_order_statistics_match_sorted(void **state) {
    (void)state;
    enum { N = 301 };
    static double x[N], y[N], sl[N * (N - 1) / 2];
    for (int shape = 0; shape < 7; shape++)
        for (size_t n = 3; n <= N; n += n < 20 ? 1 : 37) {
            synth_rng_t r = {(uint64_t)shape * 1000 + n};
            for (size_t i = 0; i < n; i++) {
                x[i] = (double)(i + 1) * (shape == 6 ? 1e-300 : 1);
                double g = synth_gauss(&r);
                y[i] = shape == 0 ? 5.0 : shape == 1 ? floor(3 * g) : shape == 2 ? (double)(i % 2) * 7
                     : shape == 3 ? (double)(i / 10) : shape == 4 ? 1e6 + 0.3 * (double)i + 50 * g
                     : shape == 5 ? (double)(n - i) : 1e300 * g;
            }
            pl_trend_t t;
            assert_int_equal(pl_trend_fit(x, y, n, 0.9, 1.0, &t), 0);
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) {
                    double dy = y[j] - y[i], s = dy / (x[j] - x[i]);
                    sl[m++] = isfinite(s) ? s : dy > 0 ? HUGE_VAL : -HUGE_VAL;
                }
            qsort(sl, m, sizeof *sl, cmp_d);
            double slope = m % 2 ? sl[m / 2] : 0.5 * (sl[m / 2 - 1] + sl[m / 2]);
            if (!isfinite(slope)) slope = sl[m / 2];
            double c = pl_trend_norm_isf(0.05) * sqrt(t.var_s);
            double m1 = 0.5 * ((double)m - c), m2 = 0.5 * ((double)m + c);
            double lo_i = floor(m1) - 1, hi_i = ceil(m2);
            if (lo_i < 0) lo_i = 0;
            if (hi_i > (double)m - 1) hi_i = (double)m - 1;
            double lo = m1 < 1 ? -HUGE_VAL : sl[(size_t)lo_i], hi = m2 >= (double)m ? HUGE_VAL : sl[(size_t)hi_i];
            assert_true(t.slope == slope || (isnan(t.slope) && isnan(slope)));
            assert_true(t.slope_lo == lo);
            assert_true(t.slope_hi == hi);
        }
}

static void test_trend_exact_line(void **state) {
    (void)state;
    double x[50], y[50];
    fill(x, y, 50, 1, 2.5, 0, 0);
    pl_trend_t t;
    assert_int_equal(pl_trend_fit(x, y, 50, 0.9, 1.0, &t), 0);
    assert_true(fabs(t.slope - 2.5) < 1e-12);
    assert_true(fabs(t.intercept - 1000) < 1e-9);
    assert_true(t.slope_lo <= 2.5 && t.slope_hi >= 2.5 && t.slope_hi - t.slope_lo < 1e-9);
    assert_true(t.p_up < 1e-10);
    assert_true(t.p_down > 0.999);
    assert_true(t.mk_s == 50.0 * 49 / 2);
}

static void test_trend_planted_leak_found_in_noise(void **state) {
    (void)state;
    /* slope 0.5/step under noise sd 10: invisible step to step, obvious over 200 steps */
    double x[200], y[200];
    fill(x, y, 200, 2, 0.5, 10, 0);
    pl_trend_t t;
    assert_int_equal(pl_trend_fit(x, y, 200, 0.9, 1.0, &t), 0);
    assert_true(t.p_up < 0.001);
    assert_true(t.slope_lo > 0);
    assert_true(t.slope_lo <= 0.5 && t.slope_hi >= 0.5);
    assert_true(fabs(t.slope - 0.5) < 0.1);
    assert_true(fabs(t.resid_sigma - 10) < 2);
}

static void test_trend_planted_flat_not_called_growth(void **state) {
    (void)state;
    int false_up = 0;
    for (uint64_t seed = 0; seed < 50; seed++) {
        double x[100], y[100];
        fill(x, y, 100, 100 + seed, 0, 10, 0);
        pl_trend_t t;
        assert_int_equal(pl_trend_fit(x, y, 100, 0.9, 1.0, &t), 0);
        false_up += t.p_up < 0.01;
        assert_true(t.slope_lo <= t.slope && t.slope <= t.slope_hi);
    }
    assert_true(false_up <= 3); /* nominal 1 % of 50 */
}

static void test_trend_autocorrelation_widens(void **state) {
    (void)state;
    /* AR(1) phi=0.9 noise without trend: the uncorrected test would call many of these trends */
    int naive = 0, corrected = 0;
    for (uint64_t seed = 0; seed < 40; seed++) {
        double x[150], y[150];
        fill(x, y, 150, 500 + seed, 0, 10, 0.9);
        pl_trend_t t;
        assert_int_equal(pl_trend_fit(x, y, 150, 0.9, 1.0, &t), 0);
        assert_true(t.var_factor >= 1.0);
        double z_naive = t.z * sqrt(t.var_factor);
        naive += pl_trend_norm_sf(z_naive) < 0.01;
        corrected += t.p_up < 0.01;
    }
    assert_true(naive >= 5);
    assert_true(corrected * 3 <= naive);
    /* a sub-window may inherit a larger factor */
    double x[60], y[60];
    fill(x, y, 60, 9, 0, 10, 0);
    pl_trend_t a, b;
    assert_int_equal(pl_trend_fit(x, y, 60, 0.9, 1.0, &a), 0);
    assert_int_equal(pl_trend_fit(x, y, 60, 0.9, 16.0, &b), 0);
    assert_true(b.var_factor == 16.0);
    assert_true(b.slope_hi - b.slope_lo > a.slope_hi - a.slope_lo);
}

static void test_trend_robust_to_spikes_and_ties(void **state) {
    (void)state;
    double x[80], y[80];
    fill(x, y, 80, 3, 1.0, 0, 0);
    y[10] += 1e6;
    y[40] += 1e6;
    y[70] -= 1e6;
    pl_trend_t t;
    assert_int_equal(pl_trend_fit(x, y, 80, 0.9, 1.0, &t), 0);
    assert_true(fabs(t.slope - 1.0) < 1e-9);
    for (int i = 0; i < 80; i++) y[i] = 7; /* all ties: no trend, zero variance */
    assert_int_equal(pl_trend_fit(x, y, 80, 0.9, 1.0, &t), 0);
    assert_true(t.slope == 0 && t.mk_s == 0 && t.var_s == 0 && t.p_up == 0.5);
}

static void test_trend_misuse(void **state) {
    (void)state;
    double x[4] = {1, 2, 2, 3}, y[4] = {1, 2, 3, 4};
    pl_trend_t t;
    assert_int_equal(pl_trend_fit(x, y, 4, 0.9, 1.0, &t), -EINVAL); /* x not increasing */
    x[2] = 2.5;
    assert_int_equal(pl_trend_fit(x, y, 2, 0.9, 1.0, &t), -EINVAL);
    assert_int_equal(pl_trend_fit(x, y, 4, 1.0, 1.0, &t), -EINVAL);
    y[1] = NAN;
    assert_int_equal(pl_trend_fit(x, y, 4, 0.9, 1.0, &t), -EINVAL);
    assert_int_equal(pl_trend_fit(NULL, y, 4, 0.9, 1.0, &t), -EINVAL);
    double *big = calloc(PL_TREND_MAX_N + 1, sizeof *big);
    assert_int_equal(pl_trend_fit(big, big, PL_TREND_MAX_N + 1, 0.9, 1.0, &t), -E2BIG);
    free(big);
}

static void test_trend_helpers(void **state) {
    (void)state;
    double v[] = {5, 1, 4, 2};
    assert_true(pl_trend_median(v, 4) == 3);
    assert_true(pl_trend_median(v, 3) == 2); /* sorted in place: {1,2,4} */
    assert_true(isnan(pl_trend_median(v, 0)));
    assert_true(fabs(pl_trend_norm_isf(0.05) - 1.6448536) < 1e-6);
    assert_true(fabs(pl_trend_norm_sf(1.959963985) - 0.025) < 1e-9);
    assert_true(isnan(pl_trend_norm_isf(0)));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trend_exact_line),
        cmocka_unit_test(test_trend_order_statistics_match_sorted),
        cmocka_unit_test(test_trend_planted_leak_found_in_noise),
        cmocka_unit_test(test_trend_planted_flat_not_called_growth),
        cmocka_unit_test(test_trend_autocorrelation_widens),
        cmocka_unit_test(test_trend_robust_to_spikes_and_ties),
        cmocka_unit_test(test_trend_misuse),
        cmocka_unit_test(test_trend_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
