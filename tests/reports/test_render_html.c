/* reports.render_html: the HTML report's page order and charts (reports/render_html.c), over synthetic traces
 * written by the tracer's writer (tests/cli/test_report_synth.h).
 *
 * Planted cases: a host leak (the verdict, the line to fix, the rate and the OOM before any chart; the deciding
 * metric's chart first, scaled to its data, projected on to the limit; the sites shown once), a warmup plateau (no
 * projection, flat metrics collapsed), a run too short to chart (one line, no chart), a trainer with quiet workers
 * (a tree, the workers folded) and two ranks (side by side). The browser's view of the same pages is
 * tests/cli/test_report_html.sh.
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
#include <sys/stat.h>

#include "../cli/test_report_synth.h"
#include "analyze.h"
#include "helpers.h"
#include "extract.h"
#include "render_html.h"


/* The HTML of the trace or run directory at path (written from the configs when n > 0). Caller frees. */
static char *html_of(const char *name, const synth_cfg_t *cfg, size_t n) {
    char path[256], file[320];
    snprintf(path, sizeof path, "%s/%s", pl_test_dir, name);
    if (n > 1) assert_int_equal(mkdir(path, 0700), 0);
    for (size_t i = 0; i < n; i++) {
        if (n > 1) snprintf(file, sizeof file, "%s/%u.0.pltrace", path, cfg[i].pid);
        else snprintf(file, sizeof file, "%s", path);
        assert_int_equal(synth_trace(file, &cfg[i]), 0);
    }
    pl_report_t *r = pl_report_create(path);
    assert_non_null(r);
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_path(r, &x, path, NULL), 0);
    assert_int_equal(pl_report_analyze(r), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_html(&(pl_run_t){r, &x}, f), 0);
    fclose(f);
    pl_extract_free(&x);
    pl_report_destroy(r);
    return buf;
}

static size_t at(const char *hay, const char *needle) {
    const char *p = strstr(hay, needle);
    return p ? (size_t)(p - hay) : (size_t)-1;
}

static size_t count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* The chart of metric `name`: from its <svg to its </svg> (copied, caller frees), NULL when there is none. */
static char *svg_of(const char *html, const char *name) {
    char label[64];
    snprintf(label, sizeof label, "aria-label=\"%s\"", name);
    const char *a = strstr(html, label), *b = a ? strstr(a, "</svg>") : NULL;
    return a && b ? strndup(a, (size_t)(b - a)) : NULL;
}

/* The y extent (user units) of the path whose title is `title` in svg, after checking its d is a drawn line: M, then
 * at least one L. */
static double path_extent(const char *svg, const char *title) {
    char t[96];
    snprintf(t, sizeof t, "><title>%s</title></path>", title);
    const char *end = strstr(svg, t);
    assert_non_null(end);
    const char *d = end;
    while (d > svg && strncmp(d, " d=\"", 4)) d--;
    assert_true(d > svg);
    d += 4;
    assert_int_equal(*d, 'M');
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    int n = 0;
    for (const char *p = d; p < end;) {
        double x, y;
        int used = 0;
        if (sscanf(p + 1, "%lf,%lf%n", &x, &y, &used) != 2) break;
        lo = fmin(lo, y), hi = fmax(hi, y), n++;
        p += 1 + used;
        while (p < end && *p == ' ') p++;
        if (*p != 'L') break;
    }
    assert_true(n >= 2);
    return hi - lo;
}

/* A host leak: what to do about it comes before any chart, and the leaking metric's chart shows the climb and its
 * projection to the limit. */
static void test_render_html_leak_first(void **state) {
    (void)state;
    synth_cfg_t c = synth_default();
    c.leak_bytes = 8 << 20;
    char *h = html_of("leak.pltrace", &c, 1);
    size_t head = at(h, "<section class=\"head head-leak\">"), sites = at(h, "<h3>Call sites by live-byte growth");
    assert_true(head != (size_t)-1 && sites != (size_t)-1);
    assert_true(head < at(h, "<dt>Top call site</dt><dd>leaky_collect+0x1c (trainer), +"));
    assert_true(head < at(h, "<dt>Rate</dt><dd>+8.00 MiB/step of heap.bytes"));
    assert_true(head < at(h, "<dt>OOM projected</dt><dd>in ~"));
    assert_true(sites < at(h, "<h2>Process 4242 ") && at(h, "<h2>Process 4242 ") < at(h, "<svg"));
    assert_int_equal(count(h, "Call sites by live-byte growth"), 1); /* under the verdict, not again below */
    /* the metric that decided the verdict is the first chart */
    assert_true(at(h, "aria-label=\"heap.bytes\"") == at(h, "aria-label="));
    char *svg = svg_of(h, "heap.bytes");
    assert_non_null(svg);
    /* scaled to its data: the climb of 160 steps x 8 MiB over a 100 MB base fills most of the plot's 166 units */
    assert_true(path_extent(svg, "baseline per step") > 120);
    /* scaled to the judged tail (steps 101-160), not to the whole climb: the fit spans most of the plot's height */
    assert_true(path_extent(svg, "fitted tail") > 120);
    assert_non_null(strstr(svg, ">y scaled to the judged tail: earlier points off the scale sit on its edge</text>"));
    assert_non_null(strstr(svg, "<title>baseline at step "));
    /* the projection on to the limit, with the step it reaches it */
    assert_non_null(strstr(svg, "<g class=\"projection\">"));
    assert_true(path_extent(svg, "fitted tail, projected") > 100);
    assert_non_null(strstr(svg, ">OOM at step "));
    assert_non_null(strstr(svg, ">limit "));
    assert_null(strstr(h, "<polyline")); /* every line is a path with a d a browser draws */
    free(svg);
    free(h);
}

/* A host leak whose projected OOM is another metric's (the earliest to its limit): the verdict box names it, so
 * the OOM time cannot be read as the rate's metric's. */
static void test_render_html_oom_metric(void **state) {
    (void)state;
    synth_cfg_t c = synth_default();
    c.leak_bytes = 8 << 20;
    char path[256];
    snprintf(path, sizeof path, "%s/oom.pltrace", pl_test_dir);
    assert_int_equal(synth_trace(path, &c), 0);
    for (int other = 0; other < 2; other++) {
        pl_report_t *r = pl_report_create(path);
        assert_non_null(r);
        pl_extract_t x;
        pl_extract_init(&x);
        assert_int_equal(pl_extract_path(r, &x, path, NULL), 0);
        assert_int_equal(pl_report_analyze(r), 0);
        pl_report_process_t *p = r->procs[0];
        assert_int_equal(p->verdict.metric, PL_METRIC_HEAP_BYTES);
        assert_true(p->verdict.has_oom);
        p->verdict.oom_metric = other ? PL_METRIC_RSS : PL_METRIC_HEAP_BYTES;
        p->metrics[PL_METRIC_RSS].limit_source = "the test's limit"; /* escaped in the page */
        char *h = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&h, &len);
        assert_int_equal(pl_render_html(&(pl_run_t){r, &x}, f), 0);
        fclose(f);
        const char *oom = strstr(h, "<dt>OOM projected</dt><dd>");
        assert_non_null(oom);
        const char *end = strstr(oom, "</dd>");
        assert_non_null(end);
        const char *n = strstr(oom, "steps from the last, rss against the test&#39;s limit");
        bool named = n && n < end;
        assert_true(other ? named : !named);
        free(h);
        pl_extract_free(&x);
        pl_report_destroy(r);
    }
}

/* A trace without steps is judged by time buckets: the facts under the verdict are in seconds, never in buckets
 * called steps or seconds. */
static void test_render_html_by_time(void **state) {
    (void)state;
    synth_cfg_t c = synth_default();
    c.with_steps = false;
    c.leak_bytes = 8 << 20;
    char *h = html_of("by-time.pltrace", &c, 1);
    if (getenv("PL_DUMP_HTML")) fputs(h, stderr);
    const char *head = strstr(h, "<section class=\"head "), *end = head ? strstr(head, "</section>") : NULL;
    assert_non_null(end);
    char *facts = strndup(head, (size_t)(end - head));
    assert_non_null(strstr(facts, "<dt>Rate</dt><dd>+"));
    assert_non_null(strstr(facts, "/s of heap.bytes"));
    assert_null(strstr(facts, "bucket"));
    assert_null(strstr(facts, "steps"));
    free(facts);
    free(h);
}

/* A warmup plateau: said first, no projection anywhere, the flat metrics collapsed under one line. */
static void test_render_html_plateau(void **state) {
    (void)state;
    synth_cfg_t c = synth_default();
    c.leak_bytes = 0;
    char *h = html_of("flat.pltrace", &c, 1);
    assert_non_null(strstr(h, "<section class=\"head head-ok\">\n<p class=\"verdict\">verdict: no leak"));
    assert_non_null(strstr(h, "<dt>Warmup</dt><dd>49 steps of "));
    assert_null(strstr(h, "class=\"projection\""));
    assert_null(strstr(h, "<dt>Rate</dt>"));
    size_t flat = at(h, "<details class=\"flat-charts\"><summary>flat metrics</summary>");
    assert_true(flat != (size_t)-1);
    assert_true(at(h, "aria-label=\"dev.allocated\"") < flat); /* the plateau is shown open */
    assert_true(flat < at(h, "aria-label=\"heap.bytes\""));
    char *svg = svg_of(h, "dev.allocated");
    assert_non_null(strstr(svg, "<title>warmup</title>"));
    assert_true(path_extent(svg, "baseline per step") > 120); /* the warmup's 4 GiB climb fills the plot */
    free(svg);
    free(h);
}

/* Five steps: too few points for a verdict, so no chart: one line names them. */
static void test_render_html_few_points(void **state) {
    (void)state;
    synth_cfg_t c = synth_default();
    c.n_steps = 5;
    c.warmup = 2;
    char *h = html_of("short.pltrace", &c, 1);
    assert_null(strstr(h, "<svg"));
    assert_non_null(strstr(h, "<p class=\"few\">Too few points to chart: rss 5 points, last "));
    assert_int_equal(count(h, "<p class=\"few\">"), 1);
    assert_null(strstr(h, "<p class=\"legend\">")); /* no chart, no legend */
    free(h);
}

/* A trainer with three quiet workers and two ranks of their own: the processes as a tree, the workers folded under
 * the trainer, the ranks side by side (in the tree and in their sections). */
static void test_render_html_tree(void **state) {
    (void)state;
    synth_cfg_t c[5];
    c[0] = synth_default();
    c[0].pid = 900;
    c[0].leak_bytes = 0;
    for (int k = 1; k <= 2; k++) {
        c[k] = synth_default();
        c[k].pid = 900 + (uint32_t)k;
        c[k].ppid = 900;
        c[k].n_steps = 100;
        c[k].with_steps = false;
        c[k].device = false;
        c[k].leak_bytes = 0;
        c[k].t0_ns = 5000000000LL;
    }
    for (int k = 3; k <= 4; k++) {
        c[k] = synth_default();
        c[k].pid = 950 + (uint32_t)k;
        c[k].ranked = true;
        c[k].rank = k - 3;
        c[k].local_rank = k - 3;
        c[k].node = "gpu-1";
        c[k].leak_bytes = k == 4 ? 8 << 20 : 0;
    }
    char *h = html_of("tree", c, 5);
    if (getenv("PL_DUMP_HTML")) fputs(h, stderr);
    size_t tree = at(h, "<h2>Processes</h2>"), trainer = at(h, "<li><span class=\"flat\">no-leak</span> pid 900,");
    assert_true(tree != (size_t)-1 && trainer != (size_t)-1 && tree < trainer);
    size_t fold = at(h, "<li><details><summary>2 quiet workers</summary>");
    assert_true(trainer < fold && fold < at(h, "pid 901,") && at(h, "pid 902,") < at(h, "</ul></details></li>"));
    /* the ranks: roots of their own, side by side */
    size_t side = at(h, "<ul class=\"tree side\">");
    assert_true(side != (size_t)-1 && side < at(h, "pid 953, rank 0, node gpu-1") &&
                side < at(h, "pid 954, rank 1, node gpu-1"));
    size_t cols = at(h, "<div class=\"side\">\n<div class=\"col\">\n<h2>Process 953 ");
    assert_true(cols != (size_t)-1 && cols < at(h, "<div class=\"col\">\n<h2>Process 954 "));
    assert_true(at(h, "<h2>Process 900 ") < cols); /* the trainer in full before the ranks */
    free(h);
}

/* Two traces that name each other as parent (pids reused across a long run): the one that started first is the
 * root, the other its child; neither is lost from the tree. */
static void test_render_html_tree_pid_cycle(void **state) {
    (void)state;
    synth_cfg_t c[2];
    for (int k = 0; k < 2; k++) {
        c[k] = synth_default();
        c[k].pid = 10 + (uint32_t)k;
        c[k].ppid = 11 - (uint32_t)k;
        c[k].leak_bytes = 0;
        c[k].t0_ns = (1 + k) * 1000000000LL;
    }
    char *h = html_of("cycle", c, 2);
    size_t a = at(h, "</span> pid 10, "), b = at(h, "</span> pid 11, ");
    assert_true(a != (size_t)-1 && b != (size_t)-1 && a < b);
    assert_true(at(h, "<ul class=\"tree\">\n<li>") < a); /* the root list, then pid 11 nested under pid 10 */
    assert_true(at(h + a, "<ul class=\"tree\">\n<li>") < b - a);
    free(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_html_oom_metric),
        cmocka_unit_test(test_render_html_leak_first),
        cmocka_unit_test(test_render_html_by_time),
        cmocka_unit_test(test_render_html_plateau),
        cmocka_unit_test(test_render_html_few_points),
        cmocka_unit_test(test_render_html_tree),
        cmocka_unit_test(test_render_html_tree_pid_cycle),
    };
    return cmocka_run_group_tests(tests, pl_test_dir_setup, pl_test_dir_teardown);
}
