/* reports.series: the per-step baseline model (reports/series.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "series.h"

#define NS 1000000000LL

static void test_series_baseline_is_step_minimum(void **state) {
    (void)state;
    /* step 1: 100, spike 500, 120; step 2: 110, 90; given out of order */
    pl_sample_t s[] = {{2, 4 * NS, 110}, {1, 1 * NS, 100}, {1, 2 * NS, 500}, {2, 5 * NS, 90}, {1, 3 * NS, 120}};
    pl_series_t out;
    assert_int_equal(pl_series_build(s, 5, NULL, &out), 0);
    assert_int_equal(out.n_points, 2);
    assert_false(out.by_time);
    assert_int_equal(out.points[0].step, 1);
    assert_true(out.points[0].base == 100);
    assert_true(out.points[0].peak == 500);
    assert_int_equal(out.points[0].n_samples, 3);
    assert_int_equal(out.points[0].t_ns, 1 * NS);
    assert_true(out.points[1].base == 90);
    assert_true(out.peak == 500);
    assert_int_equal(out.peak_step, 1);
    assert_true(fabs(out.step_ns - 3.0 * NS) < 1);
    pl_series_free(&out);
    pl_series_free(&out); /* idempotent */
}

static void test_series_drops_stepless_and_nonfinite(void **state) {
    (void)state;
    pl_sample_t s[] = {{-1, 0, 1e9}, {3, -1, 7}, {4, -1, NAN}, {5, -1, INFINITY}, {4, -1, 9}};
    pl_series_t out;
    assert_int_equal(pl_series_build(s, 5, NULL, &out), 0);
    assert_int_equal(out.n_points, 2);
    assert_int_equal(out.n_dropped, 3);
    assert_true(out.peak == 9);
    assert_true(out.step_ns == 0);
    pl_series_free(&out);
}

/* A step beyond 2^53 (a hostile or corrupt trace) is dropped: the verdict's step arithmetic then cannot overflow
 * (UBSan found a signed overflow in pl_verdict_classify on fuzzed traces before). */
static void test_series_drops_absurd_steps(void **state) {
    (void)state;
    pl_sample_t s[] = {{1, -1, 5}, {INT64_MAX, -1, 6}, {PL_SERIES_MAX_STEP + 1, -1, 7}, {PL_SERIES_MAX_STEP, -1, 8}};
    pl_series_t out;
    assert_int_equal(pl_series_build(s, 4, NULL, &out), 0);
    assert_int_equal(out.n_points, 2);
    assert_int_equal(out.n_dropped, 2);
    assert_int_equal(out.points[1].step, PL_SERIES_MAX_STEP);
    pl_series_free(&out);
}

static void test_series_time_buckets_without_steps(void **state) {
    (void)state;
    pl_sample_t s[40];
    for (int i = 0; i < 40; i++) s[i] = (pl_sample_t){-1, (int64_t)i * NS, (double)(100 + (i % 4) * 10)};
    pl_series_opts_t o = {.bucket_ns = 4 * NS, .max_buckets = 4096};
    pl_series_t out;
    assert_int_equal(pl_series_build(s, 40, &o, &out), 0);
    assert_true(out.by_time);
    assert_int_equal(out.bucket_ns, 4 * NS);
    assert_int_equal(out.n_points, 10);
    for (size_t i = 0; i < out.n_points; i++) {
        assert_int_equal(out.points[i].step, (int64_t)i);
        assert_true(out.points[i].base == 100); /* the per-bucket minimum removes the sawtooth */
        assert_true(out.points[i].peak == 130);
    }
    pl_series_free(&out);
    /* a long span widens the buckets to stay within max_buckets */
    pl_sample_t l[2] = {{-1, 0, 1}, {-1, INT64_MAX, 2}};
    o.max_buckets = 16;
    assert_int_equal(pl_series_build(l, 2, &o, &out), 0);
    assert_true(out.n_points == 2 && out.points[1].step < 16);
    pl_series_free(&out);
}

static void test_series_order_fallback_and_empty(void **state) {
    (void)state;
    pl_sample_t s[] = {{-1, -1, 5}, {-1, -1, 3}};
    pl_series_t out;
    assert_int_equal(pl_series_build(s, 2, NULL, &out), 0);
    assert_int_equal(out.n_points, 2);
    assert_true(out.points[1].base == 3 && out.points[1].step == 1);
    pl_series_free(&out);
    assert_int_equal(pl_series_build(NULL, 0, NULL, &out), 0);
    assert_int_equal(out.n_points, 0);
    assert_null(out.points);
    assert_int_equal(pl_series_build(NULL, 3, NULL, &out), -EINVAL);
    assert_int_equal(pl_series_build(s, 2, NULL, NULL), -EINVAL);
}

static void test_series_compact_keeps_min_and_max(void **state) {
    (void)state;
    pl_sample_t s[100];
    for (int i = 0; i < 100; i++) s[i] = (pl_sample_t){i, -1, (double)(i % 10 == 5 ? 1000 : i)};
    pl_series_t a, c;
    assert_int_equal(pl_series_build(s, 100, NULL, &a), 0);
    assert_int_equal(pl_series_compact(&a, 10, &c), 0);
    assert_int_equal(c.n_points, 10);
    for (size_t j = 0; j < 10; j++) {
        assert_int_equal(c.points[j].step, (int64_t)(10 * j));
        assert_true(c.points[j].base == (double)(10 * j));
        assert_true(c.points[j].peak == 1000);
        assert_int_equal(c.points[j].n_samples, 10);
    }
    pl_series_free(&c);
    assert_int_equal(pl_series_compact(&a, 1000, &c), 0);
    assert_int_equal(c.n_points, 100);
    pl_series_free(&c);
    assert_int_equal(pl_series_compact(&a, 1, &c), -EINVAL);
    pl_series_free(&a);
}

/* n steps of fn(t) with a small deterministic wobble (+-0.2 %) */
static void build_fn(pl_series_t *out, int n, double (*fn)(int)) {
    pl_sample_t *s = malloc((size_t)n * sizeof *s);
    assert_non_null(s);
    for (int t = 0; t < n; t++) s[t] = (pl_sample_t){t, (int64_t)t * NS, fn(t) * (1 + 0.002 * ((t * 7919) % 11 - 5) / 5.0)};
    assert_int_equal(pl_series_build(s, (size_t)n, NULL, out), 0);
    free(s);
}

static double saw10(int t) { return 4e9 * (1 + 0.4 * (t % 10) / 10.0); }                        /* gc every 10 */
static double saw10_late(int t) { return 4e9 * (1 + 0.4 * ((t + 3) % 10) / 10.0); }              /* other phase */
static double eval50(int t) { return 4e9 * (t % 50 == 0 ? 1.3 : 1.0); }                           /* a spike step */
static double stairs(int t) { return 4e9 + 5e8 * (t / 25); }                                      /* never falls */
static double noise(int t) { return 4e9 * (1 + 0.05 * (((t * 2654435761u) >> 7) % 100) / 100.0); } /* irregular */

/* A sawtooth across steps is found, with its period, and folded to each period's low; a spike step every 50, a
 * staircase that never falls and irregular noise are not sawtooths. */
static void test_series_sawtooth(void **state) {
    (void)state;
    pl_series_t a, f;
    int64_t per = -1;
    build_fn(&a, 200, saw10);
    assert_int_equal(pl_series_sawtooth(&a, &f, &per), 0);
    assert_int_equal(per, 10);
    assert_int_equal(f.n_points, 20);
    for (size_t j = 0; j < f.n_points; j++) {
        assert_int_equal(f.points[j].step % 10, 0);     /* each period's low is its first step */
        assert_true(f.points[j].base < 4.01e9);
        assert_true(f.points[j].peak > 5.4e9);          /* the period's top is kept as its peak */
        assert_int_equal(f.points[j].n_samples, 10);
    }
    pl_series_free(&f);
    pl_series_free(&a);
    build_fn(&a, 120, saw10_late);
    assert_int_equal(pl_series_sawtooth(&a, &f, &per), 0);
    assert_int_equal(per, 10);
    assert_int_equal(f.n_points, 13); /* a partial period at the start, 11 whole ones, a partial one at the end */
    assert_int_equal(f.points[1].step, 7);
    pl_series_free(&f);
    pl_series_free(&a);
    double (*none[])(int) = {eval50, stairs, noise};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        build_fn(&a, 300, none[i]);
        per = -1;
        assert_int_equal(pl_series_sawtooth(&a, &f, &per), 0);
        assert_int_equal(per, 0);
        pl_series_free(&a);
    }
    build_fn(&a, 12, saw10); /* too short to tell */
    assert_int_equal(pl_series_sawtooth(&a, &f, &per), 0);
    assert_int_equal(per, 0);
    pl_series_free(&a);
    assert_int_equal(pl_series_sawtooth(NULL, &f, &per), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_series_baseline_is_step_minimum),
        cmocka_unit_test(test_series_drops_stepless_and_nonfinite),
        cmocka_unit_test(test_series_drops_absurd_steps),
        cmocka_unit_test(test_series_time_buckets_without_steps),
        cmocka_unit_test(test_series_order_fallback_and_empty),
        cmocka_unit_test(test_series_compact_keeps_min_and_max),
        cmocka_unit_test(test_series_sawtooth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
