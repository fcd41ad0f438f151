/* reports.window: what grew between two steps (reports/window.c, extract.c's window, window_render.c).
 *
 * A synthetic trace (tests/cli/test_report_synth.h) whose host leak starts mid-run, at step 101 of 160: a window
 * after the onset names the leaking site with its exact growth (every allocation recorded, sample_bytes 0), a window
 * before it names no site and shows no growth of the live heap; a window that runs past the run's end is measured to
 * its last step (said), one that starts after it, and a process without steps, are left out (said). The site lists
 * of a window are measured exactly at its ends, not from the thinned per-stack histories of the tail's sites.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/test_report_synth.h"
#include "analyze.h"
#include "helpers.h"
#include "between.h"
#include "extract.h"
#include "render.h"
#include "render_html.h"
#include "retention.h"
#include "window.h"

#define LEAK (256 * 1024)


/* the late-leak trace, written once */
static const char *late_trace(void) {
    static char p[256];
    if (p[0]) return p;
    snprintf(p, sizeof p, "%s/late.pltrace", pl_test_dir);
    synth_cfg_t c = synth_default();
    c.leak_from = 101;
    assert_int_equal(synth_trace(p, &c), 0);
    return p;
}

/* Read path with the window from..to into run. */
static void read_window(pl_run_t *run, const char *path, int64_t from, int64_t to) {
    assert_int_equal(pl_run_create(run, path), 0);
    pl_extract_opts_t o = {.window = true, .window_from = from, .window_to = to};
    assert_int_equal(pl_extract_path(run->report, run->ext, path, &o), 0);
    assert_int_equal(pl_run_analyze(run), 0);
}

static char *text_of(const pl_run_t *run) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_window_text(run, f), 0);
    fclose(f);
    return buf;
}

/* After the onset: the leaking function, first, with exactly the bytes it kept in the window; the live heap's
 * change says the same. */
static void test_window_after_onset_names_the_leak(void **state) {
    (void)state;
    pl_run_t run;
    read_window(&run, late_trace(), 110, 150);
    const pl_extract_proc_t *p = &run.ext->procs[0];
    assert_int_equal(pl_window_fit(p), PL_WINDOW_WHOLE);
    const pl_extract_window_t *w = p->window;
    assert_int_equal(w->end_step, 150);
    assert_true(w->n_sites >= 1);
    assert_non_null(strstr(w->sites[0].frames[0], "leaky_collect"));
    assert_true(w->sites[0].growth_bytes == 40.0 * LEAK); /* steps 111..150 each kept LEAK, all recorded */
    assert_true(w->sites[0].live_bytes == 50.0 * LEAK);  /* steps 101..150 */
    assert_int_equal(w->n_grew, 1);                        /* the scratch buffer is freed in its step */
    pl_window_metric_t m;
    assert_true(pl_window_metric(run.report->procs[0], PL_METRIC_HEAP_BYTES, 110, 150, &m));
    assert_int_equal(m.from_step, 110);
    assert_int_equal(m.to_step, 150);
    assert_true(fabs(m.change - 40.0 * LEAK) < 64 * 1024); /* the synthetic wobble is under 52 KiB */
    char *t = text_of(&run);
    assert_non_null(strstr(t, "what grew between step 110 and step 150"));
    assert_non_null(strstr(t, "1. +10.0 MiB (live 12.5 MiB at step 150)"));
    assert_non_null(strstr(t, "leaky_collect"));
    assert_null(strstr(t, "no call site"));
    free(t);
    pl_run_destroy(&run);
}

/* Before the onset: no site grew, and the live heap did not either (only the wobble). */
static void test_window_before_onset_shows_no_growth(void **state) {
    (void)state;
    pl_run_t run;
    read_window(&run, late_trace(), 20, 90);
    const pl_extract_window_t *w = run.ext->procs[0].window;
    assert_int_equal(pl_window_fit(&run.ext->procs[0]), PL_WINDOW_WHOLE);
    assert_int_equal(w->n_sites, 0);
    assert_int_equal(w->n_grew, 0);
    pl_window_metric_t m;
    assert_true(pl_window_metric(run.report->procs[0], PL_METRIC_HEAP_BYTES, 20, 90, &m));
    assert_true(fabs(m.change) < 64 * 1024);
    assert_true(pl_window_metric(run.report->procs[0], PL_METRIC_HEAP_COUNT, 20, 90, &m));
    assert_true(m.change == 0);
    char *t = text_of(&run);
    assert_non_null(strstr(t, "no call site's live bytes grew between step 20 and step 90"));
    assert_null(strstr(t, "leaky_collect"));
    free(t);
    pl_run_destroy(&run);
}

/* Straddling the onset: only the steps after it count. */
static void test_window_straddling_onset(void **state) {
    (void)state;
    pl_run_t run;
    read_window(&run, late_trace(), 50, 120);
    const pl_extract_window_t *w = run.ext->procs[0].window;
    assert_true(w->n_sites >= 1);
    assert_true(w->sites[0].growth_bytes == 20.0 * LEAK); /* 101..120 */
    pl_run_destroy(&run);
}

/* Past the end: measured to the last step (160), said; the teardown after it is not counted. After the end, and a
 * process without steps: left out, with the reason the command prints. */
static void test_window_bad_windows(void **state) {
    (void)state;
    pl_run_t run;
    read_window(&run, late_trace(), 150, 400);
    const pl_extract_proc_t *p = &run.ext->procs[0];
    assert_int_equal(pl_window_fit(p), PL_WINDOW_CUT);
    assert_int_equal(p->window->end_step, 160);
    assert_true(p->window->sites[0].growth_bytes == 10.0 * LEAK);
    char *t = text_of(&run);
    assert_non_null(strstr(t, "step 150 -> 160 (its last step: it ended inside the window)"));
    free(t);
    char why[256];
    assert_int_equal(pl_window_usable(run.ext, why, sizeof why), 1);
    pl_run_destroy(&run);

    read_window(&run, late_trace(), 160, 400);
    assert_int_equal(pl_window_fit(&run.ext->procs[0]), PL_WINDOW_AFTER_END);
    assert_int_equal(pl_window_usable(run.ext, why, sizeof why), 0);
    assert_non_null(strstr(why, "ended before step 161 (the last completed step: 160)"));
    t = text_of(&run);
    assert_non_null(strstr(t, "left out, ended before the window: pid 4242 (python3 train.py) at step 160\n"));
    free(t);
    pl_run_destroy(&run);

    char p2[256];
    snprintf(p2, sizeof p2, "%s/nosteps.pltrace", pl_test_dir);
    synth_cfg_t c = synth_default();
    c.with_steps = false;
    assert_int_equal(synth_trace(p2, &c), 0);
    read_window(&run, p2, 10, 20);
    assert_int_equal(pl_window_fit(&run.ext->procs[0]), PL_WINDOW_NO_STEPS);
    assert_int_equal(pl_window_usable(run.ext, why, sizeof why), 0);
    assert_non_null(strstr(why, "no process of the run recorded steps"));
    pl_run_destroy(&run);
}

/* The teardown after a clean end frees the leak: a window to the last step still counts what the loop kept. A
 * cut-short process (no end record) is measured to its last completed step as well. */
static void test_window_teardown_and_cut_short(void **state) {
    (void)state;
    for (int clean = 0; clean <= 1; clean++) {
        char p[256];
        snprintf(p, sizeof p, "%s/td%d.pltrace", pl_test_dir, clean);
        synth_cfg_t c = synth_default();
        c.leak_from = 101;
        c.teardown = true;
        c.clean_end = clean;
        assert_int_equal(synth_trace(p, &c), 0);
        pl_run_t run;
        read_window(&run, p, 120, 500);
        const pl_extract_window_t *w = run.ext->procs[0].window;
        assert_int_equal(w->end_step, 160);
        assert_true(w->n_sites >= 1);
        assert_true(w->sites[0].growth_bytes == 40.0 * LEAK);
        pl_run_destroy(&run);
    }
}

/* JSON ("between": null without a window; per process its metrics and sites) and HTML (the section). */
static void test_window_json_and_html(void **state) {
    (void)state;
    pl_run_t run;
    read_window(&run, late_trace(), 110, 150);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_json(&run, f, 0), 0);
    fclose(f);
    assert_non_null(strstr(buf, "\"between\": {"));
    assert_non_null(strstr(buf, "\"from_step\": 110"));
    assert_non_null(strstr(buf, "\"fit\": \"whole\""));
    assert_non_null(strstr(buf, "\"metric\": \"heap.bytes\""));
    assert_non_null(strstr(buf, "\"growth_bytes\": 10485760"));
    free(buf);
    f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_html(&run, f), 0);
    fclose(f);
    assert_non_null(strstr(buf, "<h2>What grew between step 110 and step 150</h2>"));
    assert_non_null(strstr(buf, "leaky_collect"));
    free(buf);
    pl_run_destroy(&run);

    assert_int_equal(pl_run_create(&run, late_trace()), 0);
    assert_int_equal(pl_extract_path(run.report, run.ext, late_trace(), NULL), 0);
    assert_int_equal(pl_run_analyze(&run), 0);
    f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_json(&run, f, 0), 0);
    fclose(f);
    assert_non_null(strstr(buf, "\"between\": null"));
    free(buf);
    pl_run_destroy(&run);
}

/* A census: a list flat until step 100 then growing 10 items per census (every 10 steps), a bounded cache. */
static void fill_history(pl_retention_t *rt) {
    memset(rt, 0, sizeof *rt);
    for (uint32_t c = 1; c <= 20; c++) {
        pl_rec_retention_t q = {.census = c, .step = c * 10u, .items = 1000, .nodes = 0, .bytes = 1000, .path = "",
                                .what = "", .kind = "census", .file = "", .fix = ""};
        assert_int_equal(pl_retention_add(rt, &q), 0);
        uint64_t items = c <= 10 ? 100 : 100 + (c - 10) * 10u;
        q = (pl_rec_retention_t){.census = c, .step = c * 10u, .items = items, .bytes = items * 1024, .line = 9,
                                 .path = "history", .what = "global in train.py", .kind = "list",
                                 .file = "/src/train.py", .fix = ""};
        assert_int_equal(pl_retention_add(rt, &q), 0);
        q.path = "cache";
        q.items = 50;
        q.bytes = 50 * 1024;
        assert_int_equal(pl_retention_add(rt, &q), 0);
    }
    pl_retention_judge(rt);
}

/* The census's holders in a window: the list grew in a window after step 100 only; the bounded cache never did. */
static void test_window_holders(void **state) {
    (void)state;
    pl_retention_t rt;
    fill_history(&rt);
    size_t ix[5];
    double g[5], bg[5];
    assert_int_equal(pl_window_holders(&rt, 20, 90, ix, g, bg, 5), 0);
    assert_int_equal(pl_window_holders(&rt, 100, 150, ix, g, bg, 5), 1);
    assert_string_equal(rt.holders[ix[0]].path, "history");
    assert_true(g[0] == 50);
    assert_true(bg[0] == 50.0 * 1024);
    assert_int_equal(pl_window_holders(&rt, 95, 155, ix, g, bg, 5), 1); /* between censuses: the last at or before */
    assert_true(g[0] == 50);
    pl_retention_free(&rt);
}

/* The renderers say what the analysis judged of the window, once (pl_run_analyze): facts changed after the
 * analysis (the trace now said to have stopped before the window, the live heap's last point moved, a census that
 * grows in the window) change neither the text's process, nor its metrics' change, nor its holders. */
static void test_window_rendered_as_judged(void **state) {
    (void)state;
    pl_run_t run;
    read_window(&run, late_trace(), 110, 150);
    char *before = text_of(&run);
    pl_extract_proc_t *p = &run.ext->procs[0];
    p->window->reached = false;
    pl_series_t *s = &run.report->procs[0]->metrics[PL_METRIC_HEAP_BYTES].series;
    for (size_t i = 0; i < s->n_points; i++) s->points[i].base += (double)(s->points[i].step > 110) * 1e9;
    pl_retention_t rt, *was = p->retention;
    fill_history(&rt);
    p->retention = &rt;
    char *after = text_of(&run);
    p->retention = was;
    pl_retention_free(&rt);
    assert_string_equal(after, before);
    assert_null(strstr(after, "left out"));
    assert_null(strstr(after, "holders that grew"));
    free(before);
    free(after);
    pl_run_destroy(&run);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_after_onset_names_the_leak),
        cmocka_unit_test(test_window_rendered_as_judged),
        cmocka_unit_test(test_window_before_onset_shows_no_growth),
        cmocka_unit_test(test_window_straddling_onset),
        cmocka_unit_test(test_window_bad_windows),
        cmocka_unit_test(test_window_teardown_and_cut_short),
        cmocka_unit_test(test_window_json_and_html),
        cmocka_unit_test(test_window_holders),
    };
    return cmocka_run_group_tests(tests, pl_test_dir_setup, pl_test_dir_teardown);
}
