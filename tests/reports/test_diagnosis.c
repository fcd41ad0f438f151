/* reports.diagnosis: cross-metric findings over analysed report processes (reports/diagnosis.c, report.c).
 * Each case plants one situation from issue 4 and checks the finding that must (and must not) be made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reports/report.h"
#include "synth.h"

enum { FLAT, PLATEAU, LEAK, GROWING_SHORT };

/* 300 steps of 1 s: FLAT at level, PLATEAU = warmup to level over 40 steps, LEAK = plateau + rate/step. */
static void put(pl_report_process_t *p, pl_metric_t m, int shape, double level, double rate) {
    double kf[] = {level}, kp[] = {level / 3, level, 40}, kl[] = {level / 3, level, 40, rate};
    pl_sample_t *s;
    size_t n = 300;
    if (shape == FLAT) s = synth_series((uint64_t)m + 1, n, synth_flat, kf, 0.002, 0, 1.0);
    else if (shape == PLATEAU) s = synth_series((uint64_t)m + 1, n, synth_linear_then_flat, kp, 0.002, 0, 1.0);
    else if (shape == LEAK) s = synth_series((uint64_t)m + 1, n, synth_warmup_then_leak, kl, 0.002, 0, 1.0);
    else {
        n = 60;
        s = synth_series((uint64_t)m + 1, n, synth_onset_leak, (double[]){level, 0, rate}, 0.002, 0, 1.0);
    }
    if (!pl_metric_is_bytes(m))
        for (size_t i = 0; i < n; i++) s[i].value = (double)(int64_t)s[i].value;
    assert_int_equal(pl_report_set_samples(p, m, s, n, NULL), 0);
    free(s);
}

static bool has(const pl_report_process_t *p, pl_dx_t code) {
    for (size_t i = 0; i < p->n_findings; i++)
        if (p->findings[i].code == code) return true;
    return false;
}

static const char *text(const pl_report_process_t *p, pl_dx_t code) {
    for (size_t i = 0; i < p->n_findings; i++)
        if (p->findings[i].code == code) return p->findings[i].text;
    return "";
}

static pl_report_process_t *fresh(pl_report_t **r) {
    *r = pl_report_create("test");
    assert_non_null(*r);
    pl_report_process_t *p = pl_report_add_process(*r, 42, -1, "train");
    assert_non_null(p);
    return p;
}

static void test_diagnosis_retained_tensors(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_DEV_ALLOCATED, LEAK, 8e9, 8e6);
    put(p, PL_METRIC_DEV_TENSORS, LEAK, 7070, 2);
    put(p, PL_METRIC_DEV_RESERVED, LEAK, 9e9, 8e6);
    r->limits.device_bytes = 16e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_RETAINED_TENSORS));
    assert_false(has(p, PL_DX_FRAGMENTATION)); /* allocated grows too: not fragmentation */
    assert_false(has(p, PL_DX_NO_LEAK));
    assert_true(has(p, PL_DX_OOM));
    assert_non_null(strstr(text(p, PL_DX_OOM), "device capacity"));
    pl_report_destroy(r);
}

static void test_diagnosis_fragmentation(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_DEV_ALLOCATED, PLATEAU, 8e9, 0);
    put(p, PL_METRIC_DEV_TENSORS, PLATEAU, 7070, 0);
    put(p, PL_METRIC_DEV_RESERVED, LEAK, 9e9, 12e6);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_FRAGMENTATION));
    assert_non_null(strstr(text(p, PL_DX_FRAGMENTATION), "plateau tune"));
    assert_non_null(strstr(text(p, PL_DX_FRAGMENTATION), "expandable_segments"));
    assert_false(has(p, PL_DX_RETAINED_TENSORS));
    assert_false(has(p, PL_DX_DEVICE_GROWTH));
    pl_report_destroy(r);
}

static void test_diagnosis_rss_anon_retention_vs_file_pages(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_RSS, LEAK, 6e9, 6e6);
    put(p, PL_METRIC_RSS_ANON, LEAK, 5e9, 6e6);
    put(p, PL_METRIC_RSS_FILE, FLAT, 1e9, 0);
    put(p, PL_METRIC_HEAP_BYTES, PLATEAU, 3e9, 0);
    put(p, PL_METRIC_HEAP_COUNT, PLATEAU, 2e5, 0);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_HOST_RETENTION));
    assert_false(has(p, PL_DX_HOST_LEAK)); /* live heap flat: not a program leak */
    const char *t = text(p, PL_DX_HOST_RETENTION);
    assert_non_null(strstr(t, "RssAnon"));
    assert_non_null(strstr(t, "jemalloc"));
    assert_non_null(strstr(t, "MALLOC_ARENA_MAX"));
    assert_non_null(strstr(t, "malloc_trim"));
    assert_non_null(strstr(t, "disagree"));
    pl_report_destroy(r);

    p = fresh(&r);
    put(p, PL_METRIC_RSS, LEAK, 6e9, 6e6);
    put(p, PL_METRIC_RSS_ANON, FLAT, 5e9, 0);
    put(p, PL_METRIC_RSS_FILE, LEAK, 1e9, 6e6);
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 3e9, 0);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_FILE_PAGES));
    assert_non_null(strstr(text(p, PL_DX_FILE_PAGES), "RssFile"));
    assert_false(has(p, PL_DX_HOST_RETENTION));
    assert_false(has(p, PL_DX_HOST_LEAK));
    pl_report_destroy(r);
}

static void test_diagnosis_host_leak_judged_on_live_heap(void **state) {
    (void)state;
    /* small-block leak: live heap +1 MB/step, RSS +20 MB/step (amplified) */
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_RSS, LEAK, 6e9, 20e6);
    put(p, PL_METRIC_HEAP_BYTES, LEAK, 3e9, 1e6);
    put(p, PL_METRIC_HEAP_COUNT, LEAK, 2e5, 500);
    r->limits.host_bytes = 16e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_HOST_LEAK));
    assert_non_null(strstr(text(p, PL_DX_HOST_LEAK), "faster"));
    assert_false(has(p, PL_DX_HOST_RETENTION));
    assert_true(has(p, PL_DX_OOM));
    assert_non_null(strstr(text(p, PL_DX_OOM), "host memory"));
    pl_report_destroy(r);

    /* heap grows, RSS flat: the two disagree, and the leak is still reported */
    p = fresh(&r);
    put(p, PL_METRIC_RSS, PLATEAU, 6e9, 0);
    put(p, PL_METRIC_HEAP_BYTES, LEAK, 3e9, 1e6);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_HOST_LEAK));
    assert_true(has(p, PL_DX_HEAP_NOT_RSS));
    pl_report_destroy(r);
}

static void test_diagnosis_rss_without_heap(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_RSS, LEAK, 6e9, 6e6);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_RSS_UNEXPLAINED));
    assert_false(has(p, PL_DX_HOST_LEAK));
    pl_report_destroy(r);
}

static void test_diagnosis_no_leak_undecided_cut_short(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_RSS, PLATEAU, 17e9, 0);
    put(p, PL_METRIC_DEV_TENSORS, FLAT, 7070, 0);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_int_equal(p->n_findings, 1);
    assert_true(has(p, PL_DX_NO_LEAK));
    assert_non_null(strstr(text(p, PL_DX_NO_LEAK), "warms up"));
    pl_report_destroy(r);

    p = fresh(&r);
    put(p, PL_METRIC_RSS, GROWING_SHORT, 5e9, 50e6);
    pl_report_set_cut_short(r, "SIGKILL");
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_CUT_SHORT));
    assert_non_null(strstr(text(p, PL_DX_CUT_SHORT), "SIGKILL"));
    assert_true(has(p, PL_DX_UNDECIDED));
    assert_non_null(strstr(text(p, PL_DX_UNDECIDED), "more steps"));
    assert_false(has(p, PL_DX_NO_LEAK));
    pl_report_destroy(r);
}

static void test_diagnosis_misuse(void **state) {
    (void)state;
    size_t n;
    pl_finding_t f[2];
    assert_int_equal(pl_diagnosis_run(NULL, NULL, f, 2, &n), -EINVAL);
    assert_string_equal(pl_dx_name(PL_DX_FRAGMENTATION), "fragmentation");
    assert_string_equal(pl_dx_name((pl_dx_t)1000), "?");
    assert_string_equal(pl_metric_name(PL_METRIC_RSS_ANON), "rss.anon");
    assert_false(pl_metric_is_bytes(PL_METRIC_DEV_TENSORS));
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    assert_int_equal(pl_report_set_samples(p, PL_METRIC__COUNT, NULL, 0, NULL), -EINVAL);
    assert_int_equal(pl_report_analyze(NULL), -EINVAL);
    /* an empty process gets "flat" (nothing to say but no crash) */
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_NO_LEAK));
    pl_report_destroy(r);
    pl_report_destroy(NULL);
}

/* torch's counters (Python bootstrap, issue 18): inactive split bytes growing with allocated flat is fragmentation;
 * host live tensors growing is retained tensors; retries and OOMs are said whatever the series do, and only when
 * recorded. */
static void test_diagnosis_torch_counters(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_DEV_ALLOCATED, PLATEAU, 8e9, 0);
    put(p, PL_METRIC_DEV_RESERVED, FLAT, 9e9, 0);
    put(p, PL_METRIC_DEV_INACTIVE_SPLIT, LEAK, 5e8, 4e6);
    put(p, PL_METRIC_TENSORS, LEAK, 7070, 3);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_FRAGMENTATION));
    assert_non_null(strstr(text(p, PL_DX_FRAGMENTATION), "inactive parts of split blocks"));
    assert_non_null(strstr(text(p, PL_DX_FRAGMENTATION), "plateau tune"));
    assert_true(has(p, PL_DX_RETAINED_TENSORS));
    assert_non_null(strstr(text(p, PL_DX_RETAINED_TENSORS), "live torch.Tensor count grows"));
    assert_false(has(p, PL_DX_ALLOC_RETRIES)); /* not recorded (-1) */
    pl_report_destroy(r);

    p = fresh(&r);
    put(p, PL_METRIC_DEV_ALLOCATED, FLAT, 8e9, 0);
    put(p, PL_METRIC_DEV_RESERVED, FLAT, 9e9, 0);
    put(p, PL_METRIC_TENSORS, PLATEAU, 7070, 0);
    p->dev_ooms = 2;
    p->dev_alloc_retries = 5;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_ALLOC_RETRIES));
    assert_non_null(strstr(text(p, PL_DX_ALLOC_RETRIES), "2 out-of-memory errors and 5 allocation retries"));
    assert_false(has(p, PL_DX_FRAGMENTATION));
    assert_false(has(p, PL_DX_RETAINED_TENSORS));
    assert_true(has(p, PL_DX_NO_LEAK));
    pl_report_destroy(r);

    p = fresh(&r);
    put(p, PL_METRIC_DEV_ALLOCATED, FLAT, 8e9, 0);
    p->dev_ooms = 0;
    p->dev_alloc_retries = 0;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_false(has(p, PL_DX_ALLOC_RETRIES));
    pl_report_destroy(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diagnosis_retained_tensors),
        cmocka_unit_test(test_diagnosis_fragmentation),
        cmocka_unit_test(test_diagnosis_torch_counters),
        cmocka_unit_test(test_diagnosis_rss_anon_retention_vs_file_pages),
        cmocka_unit_test(test_diagnosis_host_leak_judged_on_live_heap),
        cmocka_unit_test(test_diagnosis_rss_without_heap),
        cmocka_unit_test(test_diagnosis_no_leak_undecided_cut_short),
        cmocka_unit_test(test_diagnosis_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
