/* reports.warmup: MSER-L tail start and regime-change confirmation (reports/warmup.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "warmup.h"
#include "synth.h"

static void xy(const pl_sample_t *s, size_t n, double *x, double *y) {
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)s[i].step;
        y[i] = s[i].value;
    }
}

static void test_warmup_linear_then_flat_end_found(void **state) {
    (void)state;
    const double k[] = {5e9, 17e9, 85};
    for (uint64_t seed = 1; seed <= 10; seed++) {
        pl_sample_t *s = synth_series(seed, 240, synth_linear_then_flat, k, 0.005, 0, 0);
        double x[240], y[240];
        xy(s, 240, x, y);
        pl_warmup_t w;
        assert_int_equal(pl_warmup_detect(x, y, 240, 8, 40, 0.002, &w), 0);
        assert_true(w.found);
        if (x[w.end_index] < 75 || x[w.end_index] > 95) fail_msg("seed %llu: end %g", (unsigned long long)seed,
                                                                  x[w.end_index]);
        assert_true(w.pre_offset < 0); /* the warmup sits below the plateau */
        free(s);
    }
}

static void test_warmup_none_in_flat_or_single_line(void **state) {
    (void)state;
    const double flat[] = {8e9};
    const double leak[] = {4e9, 0, 4e6}; /* onset at 0: one line from the first step */
    synth_shape_fn fns[] = {synth_flat, synth_onset_leak};
    const double *ks[] = {flat, leak};
    for (int f = 0; f < 2; f++)
        for (uint64_t seed = 1; seed <= 10; seed++) {
            pl_sample_t *s = synth_series(seed, 200, fns[f], ks[f], 0.005, 0, 0);
            double x[200], y[200];
            xy(s, 200, x, y);
            pl_warmup_t w;
            assert_int_equal(pl_warmup_detect(x, y, 200, 8, 40, 0.002, &w), 0);
            if (w.found) fail_msg("shape %d seed %llu: regime change at %g", f, (unsigned long long)seed,
                                  x[w.end_index]);
            assert_int_equal(w.end_index, 0);
            free(s);
        }
}

static void test_warmup_leak_onset_after_plateau(void **state) {
    (void)state;
    const double k[] = {8e9, 150, 8e6};
    pl_sample_t *s = synth_series(4, 300, synth_onset_leak, k, 0.003, 0, 0);
    double x[300], y[300];
    xy(s, 300, x, y);
    pl_warmup_t w;
    assert_int_equal(pl_warmup_detect(x, y, 300, 8, 40, 0.002, &w), 0);
    assert_true(w.found);
    assert_true(x[w.end_index] >= 130 && x[w.end_index] <= 170);
    assert_true(w.pre_offset > 0); /* the flat part sits above the leak line extended back */
    assert_true(w.tail_slope > 6e6 && w.tail_slope < 10e6);
    free(s);
}

static void test_warmup_misuse(void **state) {
    (void)state;
    double x[10] = {0}, y[10] = {0};
    pl_warmup_t w;
    assert_int_equal(pl_warmup_detect(x, y, 5, 8, 40, 0.002, &w), -EINVAL);
    assert_int_equal(pl_warmup_detect(x, y, 10, 2, 40, 0.002, &w), -EINVAL);
    assert_int_equal(pl_warmup_detect(NULL, y, 10, 8, 40, 0.002, &w), -EINVAL);
    assert_int_equal(pl_warmup_detect(x, y, 10, 8, 40, 0.002, &w), -EINVAL); /* x not increasing */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warmup_linear_then_flat_end_found),
        cmocka_unit_test(test_warmup_none_in_flat_or_single_line),
        cmocka_unit_test(test_warmup_leak_onset_after_plateau),
        cmocka_unit_test(test_warmup_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
