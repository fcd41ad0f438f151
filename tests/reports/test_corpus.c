/* Acceptance test of the verdict on the labeled corpus (tests/fixtures/series/, tools/gen-series-corpus.py).
 *
 * Targets: no plateau, flat or cut-off warmup series is called a leak; >= 95 % of the leaks that can be
 * decided (runs not marked short) are found; leaks of >= 0.1 % of the level per step are found within 50 steps of
 * their tail (the series truncated to tail_from + 50), or under a sawtooth of p steps within 10 periods; the real warmup's run 1 (seed003_run1_*) is inconclusive
 * and its run 2 a plateau with the warmup ending at step 80-90; every `expect=` holds. Prints the confusion matrix.
 * The same series also go through the whole report: as a process's heap.bytes (heap.count for count
 * series), with the diagnosis, the process verdict and the run verdict: no plateau/flat/warmup series may give a
 * leaking process, a "LEAK" run verdict or a host-leak finding; a decidable leak must give all three. Prints the
 * process-verdict matrix too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "report.h"
#include "series.h"
#include "seriesfile.h"
#include "verdict.h"

static const char *g_dir;

enum { T_PLATEAU, T_FLAT, T_LEAK, T_WARMUP, T_N };
static const char *truth_names[T_N] = {"plateau", "flat", "leak", "warmup"};

static int truth_of(const char *label) {
    for (int i = 0; i < T_N; i++)
        if (label && !strcmp(label, truth_names[i])) return i;
    return -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Classify the samples with step <= max_step (all when max_step < 0). */
static pl_verdict_t classify(const pl_seriesfile_t *f, int64_t max_step) {
    size_t n = 0;
    pl_sample_t *smp = malloc((f->n_samples + 1) * sizeof *smp);
    assert_non_null(smp);
    for (size_t i = 0; i < f->n_samples; i++)
        if (max_step < 0 || f->samples[i].step <= max_step) smp[n++] = f->samples[i];
    pl_series_t s;
    assert_int_equal(pl_series_build(smp, n, NULL, &s), 0);
    pl_verdict_t v;
    assert_int_equal(pl_verdict_classify(&s, NULL, &v), 0);
    pl_series_free(&s);
    free(smp);
    return v;
}

/* The series as the heap of a one-process report, analysed. Caller destroys. */
static pl_report_t *as_report(const pl_seriesfile_t *f) {
    pl_report_t *r = pl_report_create("corpus");
    assert_non_null(r);
    pl_report_process_t *p = pl_report_add_process(r, 1, -1, "corpus");
    assert_non_null(p);
    const char *unit = pl_seriesfile_get(f, "unit");
    pl_metric_t m = unit && !strcmp(unit, "count") ? PL_METRIC_HEAP_COUNT : PL_METRIC_HEAP_BYTES;
    assert_int_equal(pl_report_set_samples(p, m, f->samples, f->n_samples, NULL), 0);
    assert_int_equal(pl_report_analyze(r), 0);
    return r;
}

static bool has_dx(const pl_report_process_t *p, pl_dx_t code) {
    for (size_t i = 0; i < p->n_findings; i++)
        if (p->findings[i].code == code) return true;
    return false;
}

static void test_corpus_targets(void **state) {
    (void)state;
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    char *names[512];
    size_t n_names = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n_names < 512) {
        size_t l = strlen(e->d_name);
        if (l > 4 && !strcmp(e->d_name + l - 4, ".txt")) names[n_names++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n_names, sizeof *names, cmp_str);
    assert_true(n_names >= 40);

    int matrix[T_N][4] = {{0}};
    int pmatrix[T_N][PL_PV__COUNT] = {{0}};
    int report_false_leaks = 0, report_missed = 0, dx_wrong = 0;
    int false_leaks = 0, expect_fail = 0, leaks = 0, leaks_found = 0, fast = 0, fast_found = 0, short_leaks = 0;
    for (size_t i = 0; i < n_names; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", g_dir, names[i]);
        pl_seriesfile_t f;
        pl_parse_error_t err;
        int rc = pl_seriesfile_load(path, 1 << 24, 1 << 20, &f, &err);
        if (rc) fail_msg("%s: parse error %d at line %zu: %s", path, rc, err.line, err.msg);
        int truth = truth_of(pl_seriesfile_get(&f, "label"));
        assert_true(truth >= 0);
        const char *expect = pl_seriesfile_get(&f, "expect");
        const char *shortv = pl_seriesfile_get(&f, "short");
        int is_short = shortv && !strcmp(shortv, "1");
        pl_verdict_t v = classify(&f, -1);
        matrix[truth][v.kind]++;
        int bad = 0;
        if (truth != T_LEAK && v.kind == PL_VERDICT_LEAK) {
            false_leaks++;
            bad = 1;
        }
        if (expect && strcmp(expect, pl_verdict_name(v.kind))) {
            expect_fail++;
            bad = 1;
        }
        const char *wmin = pl_seriesfile_get(&f, "warmup_min"), *wmax = pl_seriesfile_get(&f, "warmup_max");
        if (wmin && wmax && (!v.has_warmup || v.warmup_end_step < atoll(wmin) || v.warmup_end_step > atoll(wmax))) {
            expect_fail++;
            bad = 1;
        }
        if (truth == T_LEAK && is_short) short_leaks++;
        if (truth == T_LEAK && !is_short) {
            leaks++;
            if (v.kind == PL_VERDICT_LEAK) leaks_found++;
            else bad = 1;
        }
        /* the whole report: process verdict, run verdict, diagnosis code */
        pl_report_t *rep = as_report(&f);
        const pl_report_process_t *rp = rep->procs[0];
        pmatrix[truth][rp->verdict.kind]++;
        bool run_leak = rep->verdict.kind == PL_PV_LEAK && !strncmp(rep->verdict.line, "verdict: LEAK", 13);
        bool dx_leak = has_dx(rp, PL_DX_HOST_LEAK);
        if (rp->verdict.kind != (rep->verdict.kind) || run_leak != (rp->verdict.kind == PL_PV_LEAK)) {
            dx_wrong++; /* one process: the run verdict is the process verdict */
            bad = 1;
        }
        if (dx_leak != (rp->verdict.kind == PL_PV_LEAK)) { /* the verdict is the diagnosis's */
            dx_wrong++;
            bad = 1;
        }
        if (v.kind == PL_VERDICT_INCONCLUSIVE && v.undecided != PL_UNDECIDED_NO_DATA &&
            !(rp->verdict.kind == PL_PV_UNDECIDED && has_dx(rp, PL_DX_UNDECIDED))) {
            dx_wrong++; /* an undecided series is never read as flat */
            bad = 1;
        }
        if (truth != T_LEAK && (rp->verdict.kind == PL_PV_LEAK || run_leak || dx_leak)) {
            report_false_leaks++;
            bad = 1;
        }
        if (truth == T_LEAK && !is_short && !(rp->verdict.kind == PL_PV_LEAK && run_leak && dx_leak)) {
            report_missed++;
            bad = 1;
        }
        char rline[96];
        snprintf(rline, sizeof rline, " [process %s, dx %s]", pl_pverdict_name(rp->verdict.kind),
                 rp->n_findings ? pl_dx_name(rp->findings[0].code) : "-");
        pl_report_destroy(rep);
        char trunc[128] = "";
        const char *rate = pl_seriesfile_get(&f, "rate_rel"), *tail = pl_seriesfile_get(&f, "tail_from");
        if (truth == T_LEAK && !is_short && rate && tail && atof(rate) >= 0.001) {
            fast++;
            /* under a sawtooth the verdict judges each period's low: it needs min_tail_points (+2) periods */
            pl_verdict_params_t dp;
            pl_verdict_params_default(&dp);
            int64_t horizon = 50, saw = (int64_t)(dp.min_tail_points + 2) * v.sawtooth_period;
            if (saw > horizon) horizon = saw;
            pl_verdict_t t = classify(&f, atoll(tail) + horizon);
            if (t.kind == PL_VERDICT_LEAK) fast_found++;
            else bad = 1;
            snprintf(trunc, sizeof trunc, " @tail+%lld:%s(%s,from %lld)", (long long)horizon, pl_verdict_name(t.kind),
                     pl_verdict_undecided_name(t.undecided), (long long)t.tail_start_step);
        }
        print_message("%s %-48s %-8s -> %-12s warmup_end=%-5lld tail=%lld..%lld slope=%.3g/step (%.3g%%) "
                      "ci=[%.3g,%.3g] p=%.2g vf=%.2f more=%lld %s%s%s\n",
                      bad ? "!!" : "  ", names[i], truth_names[truth], pl_verdict_name(v.kind),
                      (long long)v.warmup_end_step, (long long)v.tail_start_step, (long long)v.last_step,
                      v.slope_per_step, v.level != 0 ? 100 * v.slope_per_step / v.level : 0.0, v.slope_lo,
                      v.slope_hi, v.p_up, v.var_factor, (long long)v.more_steps,
                      pl_verdict_undecided_name(v.undecided), trunc, rline);
        pl_seriesfile_free(&f);
        free(names[i]);
    }
    print_message("\nconfusion matrix (rows: truth, columns: verdict)\n%-10s %8s %8s %8s %13s\n", "", "flat",
                  "plateau", "leak", "inconclusive");
    for (int t = 0; t < T_N; t++)
        print_message("%-10s %8d %8d %8d %13d\n", truth_names[t], matrix[t][PL_VERDICT_FLAT],
                      matrix[t][PL_VERDICT_PLATEAU], matrix[t][PL_VERDICT_LEAK], matrix[t][PL_VERDICT_INCONCLUSIVE]);
    print_message("false leaks: %d; leaks found: %d/%d (%.1f%%, %d short runs excluded); "
                  ">=0.1%%/step leaks found within 50 tail steps: %d/%d; expectation failures: %d\n",
                  false_leaks, leaks_found, leaks, leaks ? 100.0 * leaks_found / leaks : 0.0, short_leaks,
                  fast_found, fast, expect_fail);
    print_message("\nprocess verdict (rows: truth, columns: process verdict of the whole report)\n%-10s", "");
    for (int k = 0; k < PL_PV__COUNT; k++) print_message(" %11s", pl_pverdict_name((pl_pverdict_t)k));
    print_message("\n");
    for (int t = 0; t < T_N; t++) {
        print_message("%-10s", truth_names[t]);
        for (int k = 0; k < PL_PV__COUNT; k++) print_message(" %11d", pmatrix[t][k]);
        print_message("\n");
    }
    print_message("report: false leaks %d, decidable leaks missed %d, verdict/diagnosis disagreements %d\n",
                  report_false_leaks, report_missed, dx_wrong);
    assert_int_equal(report_false_leaks, 0);
    assert_int_equal(report_missed, 0);
    assert_int_equal(dx_wrong, 0);
    assert_int_equal(false_leaks, 0);
    assert_int_equal(expect_fail, 0);
    assert_true(leaks >= 20);
    assert_true(leaks_found * 100 >= leaks * 95);
    assert_true(fast >= 10);
    assert_int_equal(fast_found, fast);
}

/* test_reports_corpus DIR [--show FILE...]: with --show, print the verdict of each FILE and exit (debugging aid). */
static int show(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        pl_seriesfile_t f;
        pl_parse_error_t err;
        int rc = pl_seriesfile_load(argv[i], 1 << 24, 1 << 20, &f, &err);
        if (rc) {
            fprintf(stderr, "%s: error %d at line %zu: %s\n", argv[i], rc, err.line, err.msg);
            return 1;
        }
        pl_series_t s;
        pl_verdict_t v;
        if (pl_series_build(f.samples, f.n_samples, NULL, &s) || pl_verdict_classify(&s, NULL, &v)) return 1;
        printf("%s: %s%s%s warmup_end=%lld tail=%lld..%lld level=%.4g slope=%.4g [%.4g, %.4g] thr=%.4g p=%.3g "
               "vf=%.2f noise=%.4g more=%lld\n",
               argv[i], pl_verdict_name(v.kind), v.undecided ? "/" : "", pl_verdict_undecided_name(v.undecided),
               (long long)v.warmup_end_step, (long long)v.tail_start_step, (long long)v.last_step, v.level,
               v.slope_per_step, v.slope_lo, v.slope_hi, v.threshold_per_step, v.p_up, v.var_factor, v.noise,
               (long long)v.more_steps);
        pl_series_free(&s);
        pl_seriesfile_free(&f);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[2], "--show")) return show(argc - 3, argv + 3);
    g_dir = argc > 1 ? argv[1] : "tests/fixtures/series";
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_corpus_targets)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
