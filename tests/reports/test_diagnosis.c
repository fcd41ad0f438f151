/* reports.diagnosis: cross-metric findings over analysed report processes (reports/diagnosis.c, report.c).
 * Each case plants one situation from issue 4 and checks the finding that must (and must not) be made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "diagnosis.h"
#include "report.h"
#include "run.h"
#include "synth.h"
#include "words.h"

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


/* RSS grows while the live heap is not decided: never "allocator retention" (an undecided series is not
 * a flat one), and the process is "not decided", not "no leak" */
static void test_diagnosis_undecided_heap_is_not_flat(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_RSS_ANON, LEAK, 5e9, 6e6);
    put(p, PL_METRIC_HEAP_BYTES, GROWING_SHORT, 3e9, 5e6);
    r->limits.host_bytes = 64e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_int_equal(p->metrics[PL_METRIC_HEAP_BYTES].verdict.kind, PL_VERDICT_INCONCLUSIVE);
    assert_false(has(p, PL_DX_HOST_RETENTION));
    assert_false(has(p, PL_DX_NO_LEAK));
    assert_true(has(p, PL_DX_UNDECIDED));
    assert_non_null(strstr(text(p, PL_DX_UNDECIDED), "not decided"));
    assert_int_equal(p->verdict.kind, PL_PV_UNDECIDED);
    assert_int_equal(r->verdict.kind, PL_PV_UNDECIDED);
    assert_non_null(strstr(r->verdict.line, "verdict: not decided yet: run ~"));
    pl_report_destroy(r);
}

/* Practical significance, pinned: 1 s steps, 64 GB of host memory, live heap at 1 GB. 300 KB/step reaches the limit
 * in ~58 h: slow growth under the default 24 h, a leak under --slow-hours 100; 2 MB/step (~9 h) is a leak. */
static void test_diagnosis_slow_growth_thresholds(void **state) {
    (void)state;
    static const struct { double rate, slow_hours; pl_pverdict_t want; } cases[] = {
        {300e3, 24, PL_PV_SLOW_GROWTH}, {300e3, 100, PL_PV_LEAK}, {2e6, 24, PL_PV_LEAK}, {2e6, 8, PL_PV_SLOW_GROWTH},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pl_report_t *r;
        pl_report_process_t *p = fresh(&r);
        put(p, PL_METRIC_HEAP_BYTES, LEAK, 1e9, cases[i].rate);
        r->limits.host_bytes = 64e9;
        r->practical.slow_hours = cases[i].slow_hours;
        assert_int_equal(pl_report_analyze(r), 0);
        assert_int_equal(p->metrics[PL_METRIC_HEAP_BYTES].verdict.kind, PL_VERDICT_LEAK);
        assert_int_equal(p->verdict.kind, cases[i].want);
        assert_int_equal(r->verdict.kind, cases[i].want);
        if (cases[i].want == PL_PV_SLOW_GROWTH) {
            assert_true(has(p, PL_DX_SLOW_GROWTH));
            assert_false(has(p, PL_DX_HOST_LEAK));
            assert_false(has(p, PL_DX_OOM));
            assert_non_null(strstr(r->verdict.line, "slow growth"));
        } else {
            assert_true(has(p, PL_DX_HOST_LEAK));
            assert_non_null(strstr(r->verdict.line, "verdict: LEAK in pid 42 (train): +"));
            assert_non_null(strstr(r->verdict.line, "OOM in ~"));
        }
        pl_report_destroy(r);
    }
    /* no limit, no step times: a leak when it doubles within horizon_steps */
    static const struct { int64_t horizon; pl_pverdict_t want; } hz[] = {{1000, PL_PV_SLOW_GROWTH},
                                                                          {10000, PL_PV_LEAK}};
    for (size_t i = 0; i < 2; i++) {
        pl_report_t *r;
        pl_report_process_t *p = fresh(&r);
        double kl[] = {1e5 / 3, 1e5, 40, 20}; /* 20/step on 1e5: doubles in 5000 steps */
        pl_sample_t *smp = synth_series(7, 300, synth_warmup_then_leak, kl, 0.002, 0, 0); /* no times */
        assert_int_equal(pl_report_set_samples(p, PL_METRIC_HEAP_COUNT, smp, 300, NULL), 0);
        free(smp);
        r->practical.horizon_steps = hz[i].horizon;
        assert_int_equal(pl_report_analyze(r), 0);
        assert_int_equal(p->metrics[PL_METRIC_HEAP_COUNT].verdict.kind, PL_VERDICT_LEAK);
        assert_false(isfinite(p->metrics[PL_METRIC_HEAP_COUNT].verdict.per_hour));
        assert_int_equal(p->verdict.kind, hz[i].want);
        pl_report_destroy(r);
    }
}

/* issue 23 H3: a live-allocation count growing +1/step on ~300 blocks doubles within the horizon, but the 64 B
 * blocks behind it are heap.bytes growing too slowly to matter: the count is slow growth too, never LEAK. The same
 * count beside heap.bytes that matters, anonymous RSS that matters (many small blocks fragmenting the heap), or
 * heap.bytes not recorded, stays a leak. */
static void test_diagnosis_count_leak_needs_bytes_that_matter(void **state) {
    (void)state;
    enum { SLOW_BYTES, FAST_BYTES, FAST_RSS_ANON, NO_BYTES };
    for (int k = SLOW_BYTES; k <= NO_BYTES; k++) {
        pl_report_t *r;
        pl_report_process_t *p = fresh(&r);
        put(p, PL_METRIC_HEAP_COUNT, LEAK, 300, 1);
        if (k != NO_BYTES) put(p, PL_METRIC_HEAP_BYTES, LEAK, 20e3, k == FAST_BYTES ? 2e6 : 64);
        put(p, PL_METRIC_RSS_ANON, k == FAST_RSS_ANON ? LEAK : FLAT, 50e6, 2e6);
        r->limits.host_bytes = 64e9;
        assert_int_equal(pl_report_analyze(r), 0);
        assert_int_equal(p->metrics[PL_METRIC_HEAP_COUNT].verdict.kind, PL_VERDICT_LEAK);
        if (k == SLOW_BYTES) {
            assert_int_equal(p->metrics[PL_METRIC_HEAP_BYTES].verdict.kind, PL_VERDICT_LEAK); /* real, but slow */
            assert_int_equal(p->verdict.kind, PL_PV_SLOW_GROWTH);
            assert_int_equal(r->verdict.kind, PL_PV_SLOW_GROWTH);
            assert_false(has(p, PL_DX_HOST_LEAK));
            assert_null(strstr(r->verdict.line, "LEAK"));
            assert_string_equal(pl_report_metric_label(p, PL_METRIC_HEAP_COUNT), "slow growth");
            /* the label says what the analysis judged: a horizon changed after it changes nothing */
            r->practical.slow_hours = 1e9;
            r->practical.horizon_steps = 1000000000;
            assert_string_equal(pl_report_metric_label(p, PL_METRIC_HEAP_COUNT), "slow growth");
        } else {
            assert_int_equal(p->verdict.kind, PL_PV_LEAK);
            assert_true(has(p, PL_DX_HOST_LEAK));
            assert_string_equal(pl_report_metric_label(p, PL_METRIC_HEAP_COUNT), "leak");
        }
        pl_report_destroy(r);
    }
}

/* PSS moves when other processes map or unmap shared pages: it never makes a process leak on its own; RSS beside a
 * flat live heap is retention, a finding, and the process is "no leak" */
static void test_diagnosis_pss_and_rss_never_decide(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_PSS, LEAK, 2e9, 4e6);
    put(p, PL_METRIC_RSS, FLAT, 3e9, 0);
    put(p, PL_METRIC_HEAP_BYTES, PLATEAU, 1e9, 0);
    r->limits.host_bytes = 64e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_PSS_SHARING));
    assert_false(has(p, PL_DX_OOM));
    assert_int_equal(p->verdict.kind, PL_PV_NO_LEAK);
    assert_non_null(strstr(r->verdict.line, "verdict: no leak (warmup "));
    assert_string_equal(pl_report_metric_label(p, PL_METRIC_PSS), "grows");
    assert_string_equal(pl_report_metric_label(p, PL_METRIC_HEAP_BYTES), "plateau");
    pl_report_destroy(r);

    p = fresh(&r);
    put(p, PL_METRIC_RSS_ANON, LEAK, 5e9, 6e6);
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 3e9, 0);
    r->limits.host_bytes = 16e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_HOST_RETENTION));
    assert_int_equal(p->verdict.kind, PL_PV_NO_LEAK);
    assert_int_equal(p->verdict.other_dx, PL_DX_HOST_RETENTION);
    assert_non_null(strstr(r->verdict.line, "verdict: no leak"));
    assert_non_null(strstr(r->verdict.line, "host-allocator retention in pid 42"));
    assert_string_equal(pl_report_metric_label(p, PL_METRIC_RSS_ANON), "grows");
    pl_report_destroy(r);

    /* the same retention ~11 h from the limit, seen for 5 min: a creep beside a flat heap may level off at any
     * time, and 11 h is 130 times what was seen: the retention is said (a guess, with the settings that help), its
     * projection is not, in the diagnosis nor in the headline (issue 27 item 4) */
    p = fresh(&r);
    put(p, PL_METRIC_RSS_ANON, LEAK, 5e9, 1.5e6);
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 3e9, 0);
    r->limits.host_bytes = 64e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_HOST_RETENTION));
    assert_non_null(strstr(text(p, PL_DX_HOST_RETENTION), "A guess"));
    assert_non_null(strstr(text(p, PL_DX_HOST_RETENTION), "MALLOC_TRIM_THRESHOLD_"));
    assert_false(has(p, PL_DX_OOM));
    assert_int_equal(p->verdict.other_dx, -1);
    assert_int_equal(p->verdict.kind, PL_PV_NO_LEAK);
    assert_null(strstr(r->verdict.line, "retention"));
    assert_non_null(strstr(r->verdict.line, "verdict: no leak"));
    pl_report_destroy(r);
    /* ~29 min from the limit, within twenty times the 5 min seen: said */
    p = fresh(&r);
    put(p, PL_METRIC_RSS_ANON, LEAK, 5e9, 1.5e6);
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 3e9, 0);
    r->limits.host_bytes = 8e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_OOM));
    assert_int_equal(p->verdict.other_dx, PL_DX_HOST_RETENTION);
    pl_report_destroy(r);

    /* without the live heap, RSS is the program's memory: it decides */
    p = fresh(&r);
    put(p, PL_METRIC_RSS_ANON, LEAK, 5e9, 6e6);
    put(p, PL_METRIC_PSS, FLAT, 3e9, 0);
    r->limits.host_bytes = 16e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_int_equal(p->verdict.kind, PL_PV_LEAK);
    assert_int_equal(p->verdict.metric, PL_METRIC_RSS_ANON);
    assert_string_equal(pl_report_metric_label(p, PL_METRIC_RSS_ANON), "leak");
    pl_report_destroy(r);
}

/* Copy-on-access (issue 27 item 2): a forked worker's PSS climbs while its RSS and live heap stay flat: named as
 * such with its ceiling, never a leak and never "a share moved"; the same growth in a process that is no fork of
 * its parent stays pss-sharing; a forked worker whose live heap leaks is still a leak */
static void test_diagnosis_copy_on_access(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_HEAP_BYTES, PLATEAU, 3e8, 0);
    pl_report_process_t *w = pl_report_add_process(r, 43, -1, "worker");
    assert_non_null(w);
    w->role = PL_ROLE_WORKER;
    w->forked_heap_bytes = 5e8;
    put(w, PL_METRIC_PSS, LEAK, 1.5e8, 2e5); /* 50 MB -> 150 MB in 40 steps, then +200 KB/step: +202 MB */
    put(w, PL_METRIC_RSS, FLAT, 4e8, 0);
    put(w, PL_METRIC_RSS_ANON, FLAT, 3.5e8, 0);
    put(w, PL_METRIC_HEAP_BYTES, FLAT, 3e8, 0);
    r->limits.host_bytes = 64e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(w, PL_DX_COPY_ON_ACCESS));
    assert_false(has(w, PL_DX_PSS_SHARING));
    const char *t = text(w, PL_DX_COPY_ON_ACCESS);
    assert_non_null(strstr(t, "Copy-on-access, not a leak"));
    assert_non_null(strstr(t, "numpy"));
    assert_int_equal(w->verdict.kind, PL_PV_NO_LEAK);
    const pl_series_t *ps = &w->metrics[PL_METRIC_PSS].series;
    assert_true(w->verdict.cow_rise > 1e8);
    assert_true(fabs(w->verdict.cow_rise - (ps->points[ps->n_points - 1].base - ps->points[0].base)) < 1);
    /* the ceiling: PSS can rise to the worker's RSS (4e8), below its first PSS and what it inherited (5e8) */
    assert_true(fabs(w->verdict.cow_ceiling - 4e8) < 0.02e8);
    assert_non_null(strstr(r->verdict.line, "verdict: no leak"));
    char line[400];
    assert_int_equal(pl_report_cow_line(r, line, sizeof line), 1);
    assert_non_null(strstr(line, "copy-on-access in 1 forked worker (pid 43): PSS +"));
    assert_non_null(strstr(line, "not a leak"));
    /* the trainer's cgroup counts the copied pages: a growth within the workers' ceiling is theirs, a larger one is
     * not explained by them */
    put(p, PL_METRIC_CGROUP, LEAK, 3e8, 2e5);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_COPY_ON_ACCESS));
    assert_false(has(p, PL_DX_RSS_UNEXPLAINED));
    assert_non_null(strstr(text(p, PL_DX_COPY_ON_ACCESS), "cgroup grows (+"));
    put(p, PL_METRIC_CGROUP, LEAK, 3e8, 2e6); /* +520 MB over its tail: more than they can copy */
    assert_int_equal(pl_report_analyze(r), 0);
    assert_false(has(p, PL_DX_COPY_ON_ACCESS));
    assert_true(has(p, PL_DX_RSS_UNEXPLAINED));
    /* a smaller inherited heap bounds it first */
    w->forked_heap_bytes = 2.2e8;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(w, PL_DX_COPY_ON_ACCESS));
    assert_true(w->verdict.cow_ceiling < 3.9e8);
    assert_true(w->verdict.cow_ceiling >= w->metrics[PL_METRIC_PSS].verdict.last_value * 0.99);
    /* not a fork of its parent: PSS growth alone is a share that moved */
    w->forked_heap_bytes = 0;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_false(has(w, PL_DX_COPY_ON_ACCESS));
    assert_true(has(w, PL_DX_PSS_SHARING));
    assert_int_equal(pl_report_cow_line(r, line, sizeof line), 0);
    /* RSS rising with PSS: pages are being added, not copied */
    w->forked_heap_bytes = 3e8;
    put(w, PL_METRIC_RSS, LEAK, 4e8, 2e5);
    put(w, PL_METRIC_RSS_ANON, LEAK, 3.5e8, 2e5);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_false(has(w, PL_DX_COPY_ON_ACCESS));
    /* a forked worker whose live heap leaks is a leak, and the run's */
    put(w, PL_METRIC_HEAP_BYTES, LEAK, 3e8, 2e6);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_false(has(w, PL_DX_COPY_ON_ACCESS));
    assert_int_equal(w->verdict.kind, PL_PV_LEAK);
    assert_int_equal(r->verdict.kind, PL_PV_LEAK);
    pl_report_destroy(r);
}

/* First touch (issue 27 item 3): RssAnon grows beside a flat live heap that is larger than it (the heap counts the
 * program's mappings whole when they are made; their pages become resident when first written): allocated memory
 * filled as the program goes, bounded by the heap, never retention and never projected to the limit. RssAnon at or
 * above the live heap, or without room left for the growth it showed, stays retention. */
static void test_diagnosis_first_touch(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_RSS_ANON, LEAK, 3e8, 1e6); /* 1e8 -> 3e8 in 40 steps, then +1 MB/step: 5.6e8 at the end */
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 1.1e9, 0);
    r->limits.host_bytes = 2e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_FIRST_TOUCH));
    assert_false(has(p, PL_DX_HOST_RETENTION));
    assert_false(has(p, PL_DX_OOM));
    assert_int_equal(p->verdict.kind, PL_PV_NO_LEAK);
    assert_int_equal(p->verdict.other_dx, -1);
    const char *t = text(p, PL_DX_FIRST_TOUCH);
    assert_non_null(strstr(t, "touched for the first time"));
    assert_non_null(strstr(t, "a guess"));
    assert_non_null(strstr(t, "Bounded: "));
    assert_non_null(strstr(r->verdict.line, "verdict: no leak"));
    pl_report_destroy(r);
    /* the live heap below RssAnon: freed memory kept, retention */
    p = fresh(&r);
    put(p, PL_METRIC_RSS_ANON, LEAK, 3e8, 1e6);
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 2e8, 0);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_false(has(p, PL_DX_FIRST_TOUCH));
    assert_true(has(p, PL_DX_HOST_RETENTION));
    pl_report_destroy(r);
    /* above it, but with less room left than RssAnon grew over its tail (2.6e8): retention */
    p = fresh(&r);
    put(p, PL_METRIC_RSS_ANON, LEAK, 3e8, 1e6);
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 6e8, 0);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_false(has(p, PL_DX_FIRST_TOUCH));
    assert_true(has(p, PL_DX_HOST_RETENTION));
    pl_report_destroy(r);
}

/* The run: main processes decide; a worker counts only when it leaks; undecided or empty workers fold */
static void test_diagnosis_run_verdict_workers(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_HEAP_BYTES, PLATEAU, 1e9, 0);
    pl_report_process_t *w1 = pl_report_add_process(r, 43, -1, "worker");
    pl_report_process_t *w2 = pl_report_add_process(r, 44, -1, "worker");
    assert_non_null(w1);
    assert_non_null(w2);
    w1->role = w2->role = PL_ROLE_WORKER;
    put(w1, PL_METRIC_HEAP_BYTES, GROWING_SHORT, 1e8, 1e6); /* undecided */
    r->limits.host_bytes = 64e9;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_int_equal(w1->verdict.kind, PL_PV_UNDECIDED);
    assert_int_equal(w2->verdict.kind, PL_PV_NO_DATA);
    assert_int_equal(r->verdict.kind, PL_PV_NO_LEAK);
    assert_int_equal(r->verdict.proc, 0);
    assert_int_equal(r->verdict.n_workers, 2);
    pl_run_view_t view; /* both fold: the view, which every renderer reads */
    assert_int_equal(pl_run_view_make(r, NULL, &view), 0);
    assert_int_equal(view.n_quiet, 2);
    assert_int_equal(view.n_workers, 2);
    assert_int_equal(view.fold[0], PL_FOLD_NONE);
    assert_int_equal(view.fold[1], PL_FOLD_WORKER);
    assert_int_equal(view.fold[2], PL_FOLD_WORKER);
    pl_run_view_free(&view);
    /* what "grows" means to every renderer (a rate, holders, an OOM or limit are said): leak and slow growth only */
    for (int k = 0; k < PL_PV__COUNT; k++)
        assert_int_equal(pl_pverdict_grows((pl_pverdict_t)k), k == PL_PV_LEAK || k == PL_PV_SLOW_GROWTH);
    /* the same undecided process as a main one makes the run undecided */
    w1->role = PL_ROLE_MAIN;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_int_equal(r->verdict.kind, PL_PV_UNDECIDED);
    assert_int_equal(r->verdict.proc, 1);
    /* a worker that leaks makes the run leak, named */
    w1->role = PL_ROLE_WORKER;
    put(w2, PL_METRIC_HEAP_BYTES, LEAK, 1e8, 2e6);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_int_equal(r->verdict.kind, PL_PV_LEAK);
    assert_non_null(strstr(r->verdict.line, "verdict: LEAK in pid 44 (worker)"));
    assert_int_equal(r->verdict.n_leaking, 1);
    pl_report_destroy(r);
}

static void test_diagnosis_misuse(void **state) {
    (void)state;
    size_t n;
    pl_finding_t f[2];
    assert_int_equal(pl_diagnosis_run(NULL, NULL, NULL, f, 2, &n, NULL), -EINVAL);
    assert_string_equal(pl_dx_name(PL_DX_FRAGMENTATION), "fragmentation");
    assert_string_equal(pl_dx_name((pl_dx_t)1000), "?");
    assert_string_equal(pl_metric_name(PL_METRIC_RSS_ANON), "rss.anon");
    assert_false(pl_metric_is_bytes(PL_METRIC_DEV_TENSORS));
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    assert_int_equal(pl_report_set_samples(p, PL_METRIC__COUNT, NULL, 0, NULL), -EINVAL);
    assert_int_equal(pl_report_analyze(NULL), -EINVAL);
    /* an empty process (died before its first flush) is "no data", never "no leak" */
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(has(p, PL_DX_NO_DATA));
    assert_false(has(p, PL_DX_NO_LEAK));
    assert_int_equal(p->verdict.kind, PL_PV_NO_DATA);
    assert_int_equal(r->verdict.kind, PL_PV_NO_DATA);
    assert_non_null(strstr(r->verdict.line, "verdict: no data"));
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

/* `total_loss += loss`: the autograd nodes live tensors hold grow while the live heap's growth is below the practical
 * threshold; the process leaks on `autograd`, named as retained graphs. A sparse autograd series that is not decided
 * does not hold back the live heap's verdict. */
static void test_diagnosis_autograd(void **state) {
    (void)state;
    pl_report_t *r;
    pl_report_process_t *p = fresh(&r);
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 1.1e8, 0);
    put(p, PL_METRIC_HEAP_COUNT, FLAT, 3.3e5, 0);
    put(p, PL_METRIC_TENSORS, FLAT, 35, 0);
    put(p, PL_METRIC_AUTOGRAD, LEAK, 33, 12);
    p->autograd_saved_bytes = 0;
    p->autograd_saved_n = 0;
    p->autograd_lower = true;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_int_equal(p->verdict.kind, PL_PV_LEAK);
    assert_int_equal(p->verdict.metric, PL_METRIC_AUTOGRAD);
    assert_true(has(p, PL_DX_RETAINED_TENSORS));
    assert_non_null(strstr(text(p, PL_DX_RETAINED_TENSORS), "autograd nodes that live tensors hold grow 12/step"));
    assert_non_null(strstr(text(p, PL_DX_RETAINED_TENSORS), "the nodes themselves"));
    assert_null(strstr(text(p, PL_DX_RETAINED_TENSORS), "live tensors grow")); /* the gc count is flat */
    assert_false(has(p, PL_DX_NO_LEAK));
    pl_report_destroy(r);

    /* a validation loss kept with its graph: saved tensors read, a lower bound */
    p = fresh(&r);
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 1.1e8, 0);
    put(p, PL_METRIC_AUTOGRAD, LEAK, 33, 12);
    p->autograd_saved_bytes = 2 << 20;
    p->autograd_saved_n = 511;
    p->autograd_lower = true;
    assert_int_equal(pl_report_analyze(r), 0);
    assert_non_null(strstr(text(p, PL_DX_RETAINED_TENSORS), "saved at least 2.00 MiB in 511 tensors"));
    pl_report_destroy(r);

    /* flat: no finding; not decided (a few counts early in a short run): the live heap decides */
    p = fresh(&r);
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 1.1e8, 0);
    put(p, PL_METRIC_AUTOGRAD, FLAT, 11, 0);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_int_equal(p->verdict.kind, PL_PV_NO_LEAK);
    assert_false(has(p, PL_DX_RETAINED_TENSORS));
    pl_report_destroy(r);
    p = fresh(&r);
    put(p, PL_METRIC_HEAP_BYTES, FLAT, 1.1e8, 0);
    put(p, PL_METRIC_AUTOGRAD, GROWING_SHORT, 11, 12);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_int_not_equal(p->metrics[PL_METRIC_AUTOGRAD].verdict.kind, PL_VERDICT_LEAK);
    assert_int_equal(p->verdict.kind, PL_PV_NO_LEAK);
    assert_false(has(p, PL_DX_RETAINED_TENSORS));
    pl_report_destroy(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diagnosis_retained_tensors),
        cmocka_unit_test(test_diagnosis_fragmentation),
        cmocka_unit_test(test_diagnosis_torch_counters),
        cmocka_unit_test(test_diagnosis_autograd),
        cmocka_unit_test(test_diagnosis_rss_anon_retention_vs_file_pages),
        cmocka_unit_test(test_diagnosis_host_leak_judged_on_live_heap),
        cmocka_unit_test(test_diagnosis_rss_without_heap),
        cmocka_unit_test(test_diagnosis_no_leak_undecided_cut_short),
        cmocka_unit_test(test_diagnosis_undecided_heap_is_not_flat),
        cmocka_unit_test(test_diagnosis_slow_growth_thresholds),
        cmocka_unit_test(test_diagnosis_count_leak_needs_bytes_that_matter),
        cmocka_unit_test(test_diagnosis_pss_and_rss_never_decide),
        cmocka_unit_test(test_diagnosis_run_verdict_workers),
        cmocka_unit_test(test_diagnosis_copy_on_access),
        cmocka_unit_test(test_diagnosis_first_touch),
        cmocka_unit_test(test_diagnosis_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
