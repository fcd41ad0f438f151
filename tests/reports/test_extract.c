/* reports.extract: traces written by the tracer's writer -> report model -> verdicts (reports/extract.c).
 *
 * Planted cases: a device warmup plateau with a host leak from a known function (the plateau must not be called a
 * leak, the leak must be found and its site named), no leak at all, a trace without step records (time buckets),
 * a killed process (no end record), a truncated file (partial report naming file and offset), a run directory of
 * two processes (which one leaks, PSS totals), files that are not traces, and a golden JSON
 * (tests/reports/golden/extract_synth.json; regenerate with PL_REGEN_GOLDEN=1 and review the diff).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/test_report_synth.h"
#include "helpers.h"
#include "../common/files.h"
#include "analyze.h"
#include "extract.h"
#include "render.h"
#include "render_html.h"
#include "words.h"

static const char *g_golden_dir;

typedef struct run { pl_report_t *r; pl_extract_t x; } run_t;

static void run_file(run_t *u, const char *path) {
    u->r = pl_report_create(path);
    assert_non_null(u->r);
    pl_extract_init(&u->x);
    assert_int_equal(pl_extract_path(u->r, &u->x, path, NULL), 0);
    assert_int_equal(pl_run_analyze(&(pl_run_t){u->r, &u->x}), 0); /* as the command: how each process ended too */
}

static void run_free(run_t *u) {
    pl_extract_free(&u->x);
    pl_report_destroy(u->r);
}

static const pl_report_metric_t *metric(const run_t *u, size_t proc, pl_metric_t m) {
    assert_true(proc < u->r->n_procs);
    const pl_report_metric_t *mt = &u->r->procs[proc]->metrics[m];
    assert_true(mt->present);
    return mt;
}

/* The run model (run.h): a run made by pl_run_create owns its report and extraction, each process image points at
 * its row; a run's text report is the report's section, then the run's lines; the run renderers refuse a run
 * without its extraction, which HTML renders without the process table. */
static void test_extract_run_model(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "model.pltrace");
    synth_cfg_t c = synth_default();
    c.step_ns = 250000000; /* 256 KiB per 0.25 s step: ~18 h to the 64 GiB host, a leak that matters */
    assert_int_equal(synth_trace(p, &c), 0);
    pl_run_t run;
    assert_int_equal(pl_run_create(&run, p), 0);
    assert_int_equal(pl_extract_path(run.report, run.ext, p, NULL), 0);
    assert_int_equal(pl_run_analyze(&run), 0);
    assert_int_equal(run.ext->n_procs, 1);
    assert_ptr_equal(run.ext->procs[0].proc, run.report->procs[0]);
    char *whole = NULL, *parts = NULL;
    size_t whole_len = 0, parts_len = 0;
    FILE *f = open_memstream(&whole, &whole_len);
    assert_int_equal(pl_render_run_text(&run, f, NULL), 0);
    fclose(f);
    f = open_memstream(&parts, &parts_len);
    assert_int_equal(pl_render_text(run.report, f, NULL), 0);
    assert_int_equal(pl_render_run_lines(&run, f, false), 0);
    fclose(f);
    assert_string_equal(whole, parts);
    assert_non_null(strstr(whole, "call sites by live-byte growth"));
    pl_run_t bare = {run.report, NULL};
    FILE *null = fopen("/dev/null", "w");
    assert_non_null(null);
    assert_int_equal(pl_render_run_json(&bare, null, 0), -EINVAL);
    assert_int_equal(pl_render_run_lines(&bare, null, false), -EINVAL);
    assert_int_equal(pl_render_html(&bare, null), 0);
    assert_int_equal(pl_run_analyze(&(pl_run_t){NULL, NULL}), -EINVAL);
    fclose(null);
    free(whole);
    free(parts);
    pl_run_destroy(&run);
    assert_null(run.report);
    assert_null(run.ext);
    pl_run_destroy(&run); /* safe on a destroyed run */
}

static void test_extract_plateau_and_host_leak(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "a.pltrace");
    synth_cfg_t c = synth_default();
    c.step_ns = 250000000; /* 256 KiB per 0.25 s step: ~18 h to the 64 GiB host, a leak that matters */
    assert_int_equal(synth_trace(p, &c), 0);
    run_t u;
    run_file(&u, p);
    assert_int_equal(u.r->n_procs, 1);
    assert_false(u.r->cut_short);
    const pl_extract_proc_t *xp = &u.x.procs[0];
    assert_true(xp->clean_end);
    assert_false(xp->damaged);
    assert_int_equal(xp->n_steps, 160);
    assert_int_equal(u.r->procs[0]->pid, 4242);
    assert_string_equal(u.r->procs[0]->name, "python3 train.py");
    assert_string_equal(xp->cmdline, "python3 train.py --steps");
    /* the device warmup is a plateau, never a leak */
    const pl_report_metric_t *da = metric(&u, 0, PL_METRIC_DEV_ALLOCATED);
    assert_int_equal(da->series.n_points, 160);
    assert_int_equal(da->verdict.kind, PL_VERDICT_PLATEAU);
    assert_true(da->verdict.warmup_end_step >= 40 && da->verdict.warmup_end_step <= 60);
    assert_int_equal(metric(&u, 0, PL_METRIC_DEV_TENSORS)->verdict.kind, PL_VERDICT_PLATEAU);
    assert_int_not_equal(metric(&u, 0, PL_METRIC_DEV_RESERVED)->verdict.kind, PL_VERDICT_LEAK);
    assert_int_not_equal(metric(&u, 0, PL_METRIC_RSS_FILE)->verdict.kind, PL_VERDICT_LEAK);
    /* the host heap leaks 256 KiB per step */
    const pl_report_metric_t *hb = metric(&u, 0, PL_METRIC_HEAP_BYTES);
    assert_int_equal(hb->verdict.kind, PL_VERDICT_LEAK);
    assert_true(hb->verdict.slope_per_step > 0.9 * 256 * 1024 && hb->verdict.slope_per_step < 1.1 * 256 * 1024);
    assert_int_equal(metric(&u, 0, PL_METRIC_HEAP_COUNT)->verdict.kind, PL_VERDICT_LEAK);
    /* limits from the trace */
    assert_true(u.r->limits.device_bytes == (double)(16ull << 30));
    assert_true(u.r->limits.host_bytes == (double)(64ull << 30));
    /* the site: leaky_collect <- main, allocator frame skipped; the freed scratch buffer is not a site */
    assert_true(xp->n_sites >= 1);
    assert_string_equal(xp->site_metric, "heap.bytes");
    assert_int_equal(xp->sites[0].stack_id, 1);
    assert_non_null(strstr(xp->sites[0].frames[0], "leaky_collect"));
    assert_non_null(strstr(xp->sites[0].frames[0], "(trainer)"));
    assert_non_null(strstr(xp->sites[0].frames[1], "main"));
    for (size_t i = 0; i < xp->n_sites; i++) assert_int_not_equal(xp->sites[i].stack_id, 2);
    double tail = (double)(160 - xp->site_tail_step + 1) * 256 * 1024;
    assert_true(xp->sites[0].growth_bytes > 0.8 * tail && xp->sites[0].growth_bytes < 1.2 * tail);
    assert_int_equal(xp->sites[0].n_live, 160);
    assert_int_equal(pl_run_leaking(&u.x, NULL), 0);
    /* the text extras name the site */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){u.r, &u.x}, f, false), 0);
    fclose(f);
    assert_non_null(strstr(buf, "leaky_collect+0x1c (trainer)"));
    assert_non_null(strstr(buf, "leaking: pid 4242"));
    free(buf);
    run_free(&u);
}

/* Sampled allocations are weighted by size / (1 - e^(-size/rate)) (weight(), cached by size): a leaked size that
 * shares its cache slot with the freed 1 MiB scratch buffer, allocated between the leaks, still gets its own weight. */
static void test_extract_sampled_weights(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "w.pltrace");
    synth_cfg_t c = synth_default();
    c.step_ns = 250000000;
    c.sample_bytes = 524288;
    c.leak_bytes = 201072; /* the cache slot of 1 << 20 */
    c.leak_from = 2;       /* the scratch buffer (1 MiB) is weighted first */
    assert_int_equal(synth_trace(p, &c), 0);
    run_t u;
    run_file(&u, p);
    const pl_extract_proc_t *xp = &u.x.procs[0];
    assert_true(xp->n_sites >= 1);
    assert_int_equal(xp->sites[0].stack_id, 1);
    assert_int_equal(xp->sites[0].n_live, 159);
    double w = 201072.0 / -expm1(-201072.0 / 524288.0);
    assert_true(fabs(xp->sites[0].live_bytes - 159 * w) < 1e-6 * 159 * w);
    run_free(&u);
}

static void test_extract_no_leak(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "b.pltrace");
    synth_cfg_t c = synth_default();
    c.leak_bytes = 0;
    assert_int_equal(synth_trace(p, &c), 0);
    run_t u;
    run_file(&u, p);
    for (int m = 0; m < PL_METRIC__COUNT; m++)
        if (u.r->procs[0]->metrics[m].present)
            assert_int_not_equal(u.r->procs[0]->metrics[m].verdict.kind, PL_VERDICT_LEAK);
    assert_int_equal(pl_run_leaking(&u.x, NULL), -1);
    assert_int_equal(u.x.procs[0].n_sites, 0);
    run_free(&u);
}

/* Sites are findings only for a leaking process: growth that has not (yet) been judged a leak, e.g. a warmup or a
 * run too short to tell, lists no "call sites by live-byte growth". */
static void test_extract_sites_only_when_leaking(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "s.pltrace");
    synth_cfg_t c = synth_default();
    c.n_steps = 60; /* growth since step 1, within the warmup allowance: inconclusive, not leak */
    assert_int_equal(synth_trace(p, &c), 0);
    run_t u;
    run_file(&u, p);
    assert_int_equal(metric(&u, 0, PL_METRIC_HEAP_BYTES)->verdict.kind, PL_VERDICT_INCONCLUSIVE);
    assert_int_equal(pl_run_leaking(&u.x, NULL), -1);
    assert_true(u.x.procs[0].n_sites >= 1); /* the growing site is known... */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){u.r, &u.x}, f, false), 0);
    fclose(f);
    assert_null(strstr(buf, "call sites")); /* ...but not reported as a finding */
    free(buf);
    run_free(&u);
}

/* The module file is gone (the synthetic trace's /opt/app/trainer): the site is named from the trace's dladdr name,
 * in full and demangled, however long (the report once cut it at 95 bytes, which also broke the demangling). */
static void test_extract_long_dladdr_name(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "long.pltrace");
    synth_cfg_t c = synth_default();
    c.leak_symbol = "_ZN25a_rather_long_namespace_a25a_rather_long_namespace_b25a_rather_long_namespace_c"
                    "25a_rather_long_namespace_d13leaky_collectEv";
    assert_true(strlen(c.leak_symbol) > 120);
    assert_int_equal(synth_trace(p, &c), 0);
    run_t u;
    run_file(&u, p);
    const pl_extract_proc_t *xp = &u.x.procs[0];
    assert_true(xp->n_sites >= 1);
    assert_string_equal(xp->sites[0].frames[0],
                        "a_rather_long_namespace_a::a_rather_long_namespace_b::a_rather_long_namespace_c::"
                        "a_rather_long_namespace_d::leaky_collect()+0x1c (trainer)");
    run_free(&u);
}

/* A clean exit frees everything after the last step marker: that partial step is teardown, not training, and must
 * not show as a final drop; a run cut short keeps its partial step (its last recorded moments). */
static void test_extract_teardown_after_last_step(void **state) {
    (void)state;
    for (int clean = 0; clean <= 1; clean++) {
        char p[256];
        pl_test_path(p, sizeof p, clean ? "td1.pltrace" : "td0.pltrace");
        synth_cfg_t c = synth_default();
        c.leak_bytes = 0;
        c.teardown = true;
        c.clean_end = clean;
        assert_int_equal(synth_trace(p, &c), 0);
        run_t u;
        run_file(&u, p);
        const pl_report_metric_t *da = metric(&u, 0, PL_METRIC_DEV_ALLOCATED);
        const pl_report_metric_t *hb = metric(&u, 0, PL_METRIC_HEAP_BYTES);
        size_t want = (size_t)c.n_steps + (clean ? 0 : 1);
        assert_int_equal(da->series.n_points, want);
        assert_int_equal(hb->series.n_points, want);
        double last = da->series.points[da->series.n_points - 1].base;
        if (clean) {
            assert_true(last > 4.9 * (double)(1 << 30));
            assert_int_equal(da->verdict.kind, PL_VERDICT_PLATEAU);
        } else {
            assert_true(last == 0.0);
        }
        run_free(&u);
    }
}

/* The growing site is named from the live bytes at the last step, even when the program frees what it kept after that
 * step (a Python program's teardown) and its stack's history has been thinned (160 steps: more points than a history
 * keeps). It used to read the value after the teardown, and named no site in about half the runs of a PyTorch
 * script. */
static void test_extract_site_survives_teardown(void **state) {
    (void)state;
    for (int n = 150; n <= 165; n++) { /* wherever the thinned history's last point falls */
        char p[256], name[64];
        snprintf(name, sizeof name, "tdsite%d.pltrace", n);
        pl_test_path(p, sizeof p, name);
        synth_cfg_t c = synth_default();
        c.n_steps = n;
        c.teardown = true;
        assert_int_equal(synth_trace(p, &c), 0);
        run_t u;
        run_file(&u, p);
        assert_true(u.x.procs[0].n_sites >= 1);
        assert_int_equal(u.x.procs[0].sites[0].stack_id, 1);
        /* growth since the tail's start: most of the blocks kept since */
        int64_t since = u.x.procs[0].site_tail_step;
        assert_true(since > 0 && since < n);
        assert_true(u.x.procs[0].sites[0].growth_bytes >= 0.8 * (double)(n - since) * (double)c.leak_bytes);
        run_free(&u);
    }
}

static void test_extract_time_buckets(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "c.pltrace");
    synth_cfg_t c = synth_default();
    c.with_steps = false;
    c.device = false;
    assert_int_equal(synth_trace(p, &c), 0);
    run_t u;
    run_file(&u, p);
    const pl_report_metric_t *hb = metric(&u, 0, PL_METRIC_HEAP_BYTES);
    assert_true(hb->series.by_time);
    assert_true(hb->series.n_points >= 100);
    assert_int_equal(hb->verdict.kind, PL_VERDICT_LEAK);
    assert_false(u.r->procs[0]->metrics[PL_METRIC_DEV_ALLOCATED].present);
    assert_true(u.x.procs[0].n_sites >= 1);
    assert_int_equal(u.x.procs[0].sites[0].stack_id, 1);
    run_free(&u);
}

static void test_extract_killed_no_end_record(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "d.pltrace");
    synth_cfg_t c = synth_default();
    c.clean_end = false;
    assert_int_equal(synth_trace(p, &c), 0);
    run_t u;
    run_file(&u, p);
    assert_true(u.r->cut_short);
    assert_non_null(strstr(u.r->cut_reason, "d.pltrace has no end record"));
    assert_false(u.x.procs[0].clean_end);
    assert_false(u.x.procs[0].damaged);
    assert_int_equal(u.r->procs[0]->findings[0].code, PL_DX_CUT_SHORT);
    run_free(&u);
}

static void test_extract_truncated_partial(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "e.pltrace");
    synth_cfg_t c = synth_default();
    assert_int_equal(synth_trace(p, &c), 0);
    size_t len = 0;
    unsigned char *b = synth_slurp(p, &len);
    assert_non_null(b);
    assert_true(len > 4000);
    /* cut in the middle of the last chunks: a partial report from what was readable */
    pl_report_t *r = pl_report_create("e.pltrace");
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_mem(r, &x, b, len - 3000, "e.pltrace", NULL), 0);
    assert_int_equal(pl_report_analyze(r), 0);
    assert_true(x.procs[0].damaged);
    assert_true(r->cut_short);
    assert_non_null(strstr(x.procs[0].error, "e.pltrace"));
    assert_non_null(strstr(x.procs[0].error, "offset"));
    const pl_report_metric_t *hb = &r->procs[0]->metrics[PL_METRIC_HEAP_BYTES];
    assert_true(hb->present);
    assert_true(hb->series.n_points > 50 && hb->series.n_points < 160);
    pl_extract_free(&x);
    pl_report_destroy(r);
    free(b);
}


/* processes in pid order (file names sort "10001" before "9999"); a process that never steps beside one
 * that does is a worker, folded into one line when quiet; a step-less process's teardown bucket is not its "last";
 * the leaking process is read off the process verdict */
static void test_extract_roles_order_and_teardown(void **state) {
    (void)state;
    char d[256], p[300];
    pl_test_path(d, sizeof d, "roles");
    assert_int_equal(mkdir(d, 0700), 0);
    synth_cfg_t c = synth_default();
    c.pid = 9999;
    c.leak_bytes = 0;
    snprintf(p, sizeof p, "%s/9999.0.pltrace", d);
    assert_int_equal(synth_trace(p, &c), 0);
    c.pid = 10001;
    c.ppid = 9999;
    c.with_steps = false;
    c.device = false;
    c.teardown = true;
    snprintf(p, sizeof p, "%s/10001.0.pltrace", d);
    assert_int_equal(synth_trace(p, &c), 0);
    run_t u;
    run_file(&u, d);
    assert_int_equal(u.x.n_procs, 2);
    assert_int_equal(u.x.procs[0].pid, 9999);
    assert_int_equal(u.r->procs[0]->pid, 9999);
    assert_ptr_equal(u.x.procs[1].proc, u.r->procs[1]);
    assert_int_equal(u.r->procs[0]->role, PL_ROLE_MAIN);
    assert_int_equal(u.r->procs[1]->role, PL_ROLE_WORKER);
    /* the worker's series is by time; its last point is the running value, not the teardown's 0 */
    const pl_report_metric_t *wh = metric(&u, 1, PL_METRIC_HEAP_BYTES);
    assert_true(wh->series.by_time);
    assert_true(wh->verdict.last_value > 0.5 * wh->verdict.peak);
    assert_int_not_equal(u.r->verdict.kind, PL_PV_LEAK);
    assert_int_equal(pl_run_leaking(&u.x, NULL), -1);
    /* the long-lived worker is also judged as the trainer's pool, on its steps: flat */
    assert_int_equal(u.r->n_procs, 3);
    assert_int_equal(u.r->procs[2]->n_pool, 1);
    assert_int_equal(u.r->procs[2]->pid, 9999);
    assert_false(u.r->procs[2]->metrics[PL_METRIC_HEAP_BYTES].series.by_time);
    assert_int_not_equal(u.r->procs[2]->verdict.kind, PL_PV_LEAK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_text(u.r, f, NULL), 0);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){u.r, &u.x}, f, false), 0);
    fclose(f);
    assert_true(!strncmp(buf, "verdict: ", 9));
    assert_non_null(strstr(buf, "workers (1 process that never step"));
    assert_null(strstr(buf, "process 10001"));
    assert_non_null(strstr(buf, "worker process that never step"));
    free(buf);
    run_free(&u);
}

/* the trainer's long-lived workers, summed on its steps: two workers that each keep 1 MiB per second
 * (one trainer step per second) are a pool that leaks 2 MiB/step (64 GiB host: OOM in ~9 h), and the run says so */
static void test_extract_worker_pool_on_trainer_steps(void **state) {
    (void)state;
    char d[256], p[300];
    pl_test_path(d, sizeof d, "pool");
    assert_int_equal(mkdir(d, 0700), 0);
    synth_cfg_t c = synth_default();
    c.pid = 500;
    c.leak_bytes = 0;
    snprintf(p, sizeof p, "%s/500.0.pltrace", d);
    assert_int_equal(synth_trace(p, &c), 0);
    c.with_steps = false;
    c.device = false;
    c.leak_bytes = 1 << 20;
    for (uint32_t pid = 501; pid <= 502; pid++) {
        c.pid = pid;
        c.ppid = 500;
        snprintf(p, sizeof p, "%s/%u.0.pltrace", d, pid);
        assert_int_equal(synth_trace(p, &c), 0);
    }
    run_t u;
    run_file(&u, d);
    assert_int_equal(u.r->n_procs, 4);
    const pl_report_process_t *pool = u.r->procs[3];
    assert_int_equal(pool->n_pool, 2);
    assert_int_equal(pool->pid, 500);
    const pl_report_metric_t *hb = &pool->metrics[PL_METRIC_HEAP_BYTES];
    assert_true(hb->present);
    assert_false(hb->series.by_time);
    assert_int_equal(hb->verdict.kind, PL_VERDICT_LEAK);
    assert_true(hb->verdict.slope_per_step > 0.9 * 2 * (1 << 20) && hb->verdict.slope_per_step < 1.1 * 2 * (1 << 20));
    assert_int_equal(pool->verdict.kind, PL_PV_LEAK);
    assert_int_equal(u.r->verdict.kind, PL_PV_LEAK);
    assert_int_equal(u.r->procs[0]->verdict.kind == PL_PV_LEAK, 0); /* the trainer itself does not leak */
    run_free(&u);
}

/* A trainer whose loop starts after a minute of start-up (imports, a dataset built in Python) forks its persistent
 * workers when the loop starts: they live through all of its steps, and are its pool, though not through the
 * start-up before its first step ended (73 % of the trainer's trace) */
static void test_extract_worker_pool_after_startup(void **state) {
    (void)state;
    char d[256], p[300];
    pl_test_path(d, sizeof d, "poolstart");
    assert_int_equal(mkdir(d, 0700), 0);
    synth_cfg_t c = synth_default();
    c.pid = 500;
    c.leak_bytes = 0;
    c.startup_ns = 60000000000LL;
    snprintf(p, sizeof p, "%s/500.0.pltrace", d);
    assert_int_equal(synth_trace(p, &c), 0);
    c.with_steps = false;
    c.device = false;
    c.leak_bytes = 1 << 20;
    c.startup_ns = 0;
    c.t0_ns = 61000000000LL; /* forked when the loop starts */
    for (uint32_t pid = 501; pid <= 502; pid++) {
        c.pid = pid;
        c.ppid = 500;
        snprintf(p, sizeof p, "%s/%u.0.pltrace", d, pid);
        assert_int_equal(synth_trace(p, &c), 0);
    }
    run_t u;
    run_file(&u, d);
    assert_int_equal(u.r->n_procs, 4);
    const pl_report_process_t *pool = u.r->procs[3];
    assert_int_equal(pool->n_pool, 2);
    assert_int_equal(pool->metrics[PL_METRIC_HEAP_BYTES].verdict.kind, PL_VERDICT_LEAK);
    assert_int_equal(u.r->verdict.kind, PL_PV_LEAK);
    run_free(&u);
}

/* Copy-on-access needs a worker forked from its parent (the same command line) whose PSS is not moved by siblings
 * coming and going: two persistent workers whose PSS climbs 1 MiB/s beside a flat heap and RSS are named; a
 * validation worker of the same trainer that starts and exits while they live (its pages were shared with them)
 * makes their PSS move for another reason, and nothing is named */
static void test_extract_copy_on_access_siblings(void **state) {
    (void)state;
    for (int with_val = 0; with_val <= 1; with_val++) {
        char d[256], p[300];
        pl_test_path(d, sizeof d, with_val ? "cowval" : "cow");
        assert_int_equal(mkdir(d, 0700), 0);
        synth_cfg_t c = synth_default();
        c.pid = 500;
        c.leak_bytes = 0;
        c.n_steps = 80;
        snprintf(p, sizeof p, "%s/500.0.pltrace", d);
        assert_int_equal(synth_trace(p, &c), 0);
        c.with_steps = false;
        c.device = false;
        c.n_steps = 60;
        c.pss_per_step = 1 << 20;
        c.t0_ns = 5000000000LL;
        c.ppid = 500;
        for (uint32_t pid = 501; pid <= 502; pid++) {
            c.pid = pid;
            snprintf(p, sizeof p, "%s/%u.0.pltrace", d, pid);
            assert_int_equal(synth_trace(p, &c), 0);
        }
        if (with_val) {
            c.pid = 503;
            c.n_steps = 3;
            c.pss_per_step = 0;
            c.t0_ns = 30000000000LL;
            snprintf(p, sizeof p, "%s/503.0.pltrace", d);
            assert_int_equal(synth_trace(p, &c), 0);
        }
        run_t u;
        run_file(&u, d);
        size_t n_cow = 0;
        for (size_t i = 0; i < u.r->n_procs; i++) n_cow += u.r->procs[i]->verdict.cow_rise > 0;
        assert_int_equal(n_cow, with_val ? 0 : 2);
        char line[400];
        assert_int_equal(pl_report_cow_line(u.r, line, sizeof line), with_val ? 0 : 2);
        run_free(&u);
    }
}

/* A trainer (pid 500, 160 steps of 1 s, flat heap unless trainer_leak) that starts 2 validation workers every 20
 * steps (7 generations, each worker living 2 s, forked: its heap starts at the trainer's). Each worker of
 * generation g holds gen_bytes * g more than the trainer's heap when it started. */
static void write_generations(const char *d, int64_t gen_bytes, uint64_t trainer_leak) {
    char p[300];
    assert_int_equal(mkdir(d, 0700), 0);
    synth_cfg_t c = synth_default();
    c.pid = 500;
    c.leak_bytes = trainer_leak;
    snprintf(p, sizeof p, "%s/500.0.pltrace", d);
    assert_int_equal(synth_trace(p, &c), 0);
    for (int g = 1; g <= 7; g++)
        for (uint32_t k = 0; k < 2; k++) {
            synth_cfg_t w = synth_default();
            w.pid = 600 + 2 * (uint32_t)g + k;
            w.ppid = 500;
            w.n_steps = 2;
            w.with_steps = false;
            w.device = false;
            w.leak_bytes = 0;
            /* forked at 1 s + (20 g + 0.5) s: the trainer's heap then is 100 MB + 20 g steps of its leak */
            w.t0_ns = 1000000000LL + (20LL * g) * 1000000000LL + 500000000LL + (int64_t)k * 10000000;
            w.base_bytes = 100000000 + (int64_t)(20 * g) * (int64_t)trainer_leak + g * gen_bytes;
            snprintf(p, sizeof p, "%s/%u.0.pltrace", d, w.pid);
            assert_int_equal(synth_trace(p, &w), 0);
        }
}

static const pl_report_process_t *gen_row_of(const run_t *u) {
    const pl_report_process_t *g = NULL;
    for (size_t i = 0; i < u->r->n_procs; i++)
        if (u->r->procs[i]->n_gen) {
            assert_null(g); /* one loader: one row */
            g = u->r->procs[i];
        }
    assert_non_null(g);
    return g;
}

static char *render_html_buf(run_t *u) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_html(&(pl_run_t){u->r, &u->x}, f), 0);
    fclose(f);
    return buf;
}

/* where needle starts in hay, or (size_t)-1 */
static size_t at(const char *hay, const char *needle) {
    const char *p = strstr(hay, needle);
    return p ? (size_t)(p - hay) : (size_t)-1;
}

/* whether pos lies inside the <details> element that opens at open (counting the nested ones between them) */
static bool inside(const char *hay, size_t open, size_t pos) {
    if (open == (size_t)-1 || pos == (size_t)-1 || pos < open) return false;
    int depth = 0;
    for (size_t i = open; i < pos; i++) {
        if (!strncmp(hay + i, "<details", 8)) depth++;
        else if (!strncmp(hay + i, "</details>", 10) && --depth == 0) return false;
    }
    return depth > 0;
}

static char *render_all_text(run_t *u) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_text(u->r, f, NULL), 0);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){u->r, &u->x}, f, false), 0);
    fclose(f);
    return buf;
}

/* A forked worker that ended before the sampler's first read (os._exit, under load) has no RSS sample: it is made
 * of its parent's pages, so the parent's RSS tells it from a short helper; an exec'd program without one (a
 * different command line) stays a helper. */
static void test_extract_forked_worker_without_rss(void **state) {
    (void)state;
    char d[256], p[300];
    pl_test_path(d, sizeof d, "fork-norss");
    assert_int_equal(mkdir(d, 0700), 0);
    synth_cfg_t c = synth_default();
    c.pid = 700;
    c.leak_bytes = 0;
    snprintf(p, sizeof p, "%s/700.0.pltrace", d);
    assert_int_equal(synth_trace(p, &c), 0);
    static const char *const shell[] = {"readlink", "-f", "python3"};
    for (uint32_t k = 0; k < 2; k++) {
        synth_cfg_t w = synth_default();
        w.pid = 701 + k;
        w.ppid = 700;
        w.n_steps = 2;
        w.step_ns = 200000000; /* 0.6 s in all */
        w.with_steps = false;
        w.device = false;
        w.leak_bytes = 0;
        w.no_rss = true;
        w.t0_ns = 20LL * 1000000000LL;
        if (k == 1) w.argv = shell, w.n_argv = 3, w.exe = "/usr/bin/readlink";
        snprintf(p, sizeof p, "%s/%u.0.pltrace", d, w.pid);
        assert_int_equal(synth_trace(p, &w), 0);
    }
    run_t u;
    run_file(&u, d);
    assert_int_equal(u.x.n_procs, 3);
    for (size_t i = 0; i < u.x.n_procs; i++) {
        const pl_extract_proc_t *q = &u.x.procs[i];
        assert_false(q->proc->metrics[PL_METRIC_RSS].present && q->pid != 700);
        if (q->pid == 701) assert_false(q->proc->helper); /* the fork: its parent's 700 MB */
        if (q->pid == 702) assert_true(q->proc->helper);  /* readlink */
    }
    run_free(&u);
}

/* validation workers whose generations each hold 2 MiB more per worker: a leak of the run, said per generation */
static void test_extract_generations_leak(void **state) {
    (void)state;
    char d[256];
    pl_test_path(d, sizeof d, "gen-leak");
    write_generations(d, 2 << 20, 0);
    run_t u;
    run_file(&u, d);
    const pl_report_process_t *g = gen_row_of(&u);
    assert_int_equal(g->pid, 500);
    assert_int_equal(g->n_gen, 7);
    assert_int_equal(g->n_gen_workers, 14);
    assert_int_equal(g->gen_every_steps, 20);
    assert_int_equal(g->role, PL_ROLE_WORKER);
    const pl_report_metric_t *hb = &g->metrics[PL_METRIC_HEAP_BYTES];
    assert_int_equal(hb->series.n_points, 7);
    assert_int_equal(hb->series.points[0].step, 20);
    assert_int_equal(hb->verdict.kind, PL_VERDICT_LEAK);
    /* 2 workers x 2 MiB more per generation, every 20 steps: 4 MiB / 20 steps */
    assert_true(fabs(hb->verdict.slope_per_step - 4.0 * (1 << 20) / 20) < 0.05 * 4.0 * (1 << 20) / 20);
    assert_int_equal(g->verdict.kind, PL_PV_LEAK);
    assert_int_equal(u.r->verdict.kind, PL_PV_LEAK);
    assert_non_null(strstr(u.r->verdict.line, "14 workers in 7 generations of 2"));
    char *buf = render_all_text(&u);
    assert_non_null(strstr(buf, "process 500 14 workers in 7 generations of 2"));
    assert_non_null(strstr(buf, "each generation holds more live heap than the last, +3.99 MiB per generation"));
    assert_null(strstr(buf, "generations: "));
    free(buf);
    /* HTML: the leaking generations in full before the workers' section; the quiet workers collapsed in it */
    buf = render_html_buf(&u);
    size_t gen = at(buf, "<h2>Process 500 14 workers in 7 generations of 2</h2>"), wk = at(buf, "<h2>Workers</h2>");
    size_t det = at(buf, "<details class=\"workers\"><summary>workers (14 processes that never step, pids 602..615)");
    assert_true(gen != (size_t)-1 && wk != (size_t)-1 && det != (size_t)-1);
    assert_true(gen < wk && wk < det);
    assert_true(det < at(buf, "<h2>Process 602 "));
    assert_true(inside(buf, det, at(buf, "<h2>Process 602 ")) && inside(buf, det, at(buf, "<h2>Process 615 ")));
    assert_null(strstr(buf, "<details class=\"generations\">"));
    /* the trainer's charts mark the validation passes on their step axis: a generation starts every 20 steps */
    const char *trainer = strstr(buf, "<h2>Process 500 python3 train.py</h2>");
    assert_non_null(trainer);
    assert_non_null(strstr(trainer, "<title>validation pass at step 20</title>"));
    assert_non_null(strstr(trainer, "<title>validation pass at step 140</title>"));
    assert_non_null(strstr(trainer, "orange ticks = validation passes"));
    free(buf);
    run_free(&u);
}

/* the same workers without the growth: flat, folded into one line, the run does not leak */
static void test_extract_generations_flat(void **state) {
    (void)state;
    char d[256];
    pl_test_path(d, sizeof d, "gen-flat");
    write_generations(d, 0, 0);
    /* and a worker of its own between two passes (a generation of one: no row), whose trace is damaged */
    synth_cfg_t w = synth_default();
    w.pid = 700;
    w.ppid = 500;
    w.n_steps = 40;
    w.with_steps = false;
    w.device = false;
    w.leak_bytes = 0;
    w.t0_ns = 131300000000LL;
    char p[300];
    snprintf(p, sizeof p, "%s/700.0.pltrace", d);
    assert_int_equal(synth_trace(p, &w), 0);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(truncate(p, sb.st_size - 3000), 0);
    run_t u;
    run_file(&u, d);
    const pl_report_process_t *g = gen_row_of(&u);
    assert_int_equal(g->metrics[PL_METRIC_HEAP_BYTES].verdict.kind, PL_VERDICT_FLAT);
    assert_int_equal(g->verdict.kind, PL_PV_NO_LEAK);
    assert_int_not_equal(u.r->verdict.kind, PL_PV_LEAK);
    char *buf = render_all_text(&u);
    assert_non_null(strstr(buf, "generations: 14 workers of pid 500 in 7 generations (2 each, started every ~20 "
                                "steps): flat from one generation to the next (the last 5 within +-256 KiB)"));
    assert_null(strstr(buf, "process 500 14 workers"));
    free(buf);
    /* HTML: the trainer in full, then the workers and the generations collapsed, each under its line */
    buf = render_html_buf(&u);
    size_t tr = at(buf, "<h2>Process 500 python3 train.py</h2>"), wk = at(buf, "<h2>Workers</h2>");
    size_t gen = at(buf, "<details class=\"generations\"><summary>generations: 14 workers of pid 500 in 7 generations");
    assert_true(tr != (size_t)-1 && wk != (size_t)-1 && gen != (size_t)-1);
    assert_true(tr < wk && wk < at(buf, "<details class=\"workers\">") && at(buf, "<details class=\"workers\">") < gen);
    assert_true(gen < at(buf, "<h2>Process 500 14 workers in 7 generations of 2</h2>"));
    /* the damaged worker stays expanded, before the workers' section */
    assert_true(at(buf, "<h2>Process 700 ") < wk);
    free(buf);
    run_free(&u);
}

/* a trainer that leaks 256 KiB/step forks workers that inherit its growing heap: the leak is the trainer's, the
 * generations (what each worker adds) stay flat */
static void test_extract_generations_inherited(void **state) {
    (void)state;
    char d[256];
    pl_test_path(d, sizeof d, "gen-inherit");
    write_generations(d, 0, 2u << 20); /* a trainer leak that matters: ~9 h to the 64 GiB host */
    run_t u;
    run_file(&u, d);
    const pl_report_process_t *g = gen_row_of(&u);
    assert_int_equal(g->metrics[PL_METRIC_HEAP_BYTES].verdict.kind, PL_VERDICT_FLAT);
    assert_int_equal(u.r->procs[0]->verdict.kind, PL_PV_LEAK);
    assert_int_equal(u.r->verdict.n_leaking, 1);
    run_free(&u);
}

/* A process without a PSS sample (it lived less than 5 s, or PSS was off) adds nothing to the run's total PSS, and
 * the totals say over how many processes it is; with none, only RSS is totalled. */
static void test_extract_total_pss_without_samples(void **state) {
    (void)state;
    static const char *const want[2] = {
        "total PSS 658 MiB over the 1 with a PSS sample (a process's first comes 5 s after it starts; RSS 1.30 GiB, "
        "shared pages counted once per process)",
        "total RSS 1.30 GiB; no PSS sample (a process's first comes 5 s after it starts; PLATEAU_PSS=0 turns them "
        "off)"};
    for (int k = 0; k < 2; k++) {
        char d[256], p[300];
        pl_test_path(d, sizeof d, k ? "run_nopss" : "run_somepss");
        assert_int_equal(mkdir(d, 0700), 0);
        synth_cfg_t c = synth_default();
        c.pid = 100;
        c.leak_bytes = 0;
        c.no_pss = k == 1;
        snprintf(p, sizeof p, "%s/100.0.pltrace", d);
        assert_int_equal(synth_trace(p, &c), 0);
        c.pid = 101;
        c.ppid = 100;
        c.no_pss = true;
        snprintf(p, sizeof p, "%s/101.0.pltrace", d);
        assert_int_equal(synth_trace(p, &c), 0);
        run_t u;
        run_file(&u, d);
        assert_int_equal(u.x.n_procs, 2);
        size_t n_pss;
        double pss = pl_run_total_last(&u.x, PL_METRIC_PSS, &n_pss);
        assert_int_equal(n_pss, 1 - k);
        assert_true(fabs(pss - (k ? 0 : 690000000.0)) < 1.0);
        char totals[256];
        pl_run_totals_t t;
        pl_run_totals(&u.x, &t);
        assert_int_equal(t.kind, k ? PL_TOTALS_RSS : PL_TOTALS_PSS_SOME);
        pl_run_totals_phrase(&t, totals, sizeof totals);
        assert_string_equal(totals, want[k]);
        /* the process table's PSS column: "-" for the process without one (not its RSS) */
        char *buf = NULL, row[128];
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        assert_int_equal(pl_render_run_lines(&(pl_run_t){u.r, &u.x}, f, false), 0);
        fclose(f);
        snprintf(row, sizeof row, "  %8u %8u %5s %7llu %10s  ", 101u, 100u, "-",
                 (unsigned long long)u.x.procs[1].n_steps, "-");
        if (!strstr(buf, row)) fprintf(stderr, "%s", buf);
        assert_non_null(strstr(buf, row));
        free(buf);
        run_free(&u);
    }
}

static void test_extract_run_directory(void **state) {
    (void)state;
    char d[256], p[300];
    pl_test_path(d, sizeof d, "run");
    assert_int_equal(mkdir(d, 0700), 0);
    synth_cfg_t c = synth_default();
    c.pid = 100;
    c.leak_bytes = 0;
    snprintf(p, sizeof p, "%s/100.0.pltrace", d);
    assert_int_equal(synth_trace(p, &c), 0);
    c.pid = 101;
    c.ppid = 100;
    c.leak_bytes = 512 * 1024;
    c.step_ns = 250000000; /* 2 MiB/s: ~9 h to the 64 GiB host, a leak that matters */
    c.device = false;
    snprintf(p, sizeof p, "%s/101.0.pltrace", d);
    assert_int_equal(synth_trace(p, &c), 0);
    snprintf(p, sizeof p, "%s/notes.txt", d); /* ignored: not *.pltrace */
    FILE *f = fopen(p, "w");
    fputs("hello", f);
    fclose(f);
    run_t u;
    run_file(&u, d);
    assert_int_equal(u.x.n_procs, 2);
    assert_int_equal(u.x.n_files_failed, 0);
    size_t n;
    long k = pl_run_leaking(&u.x, &n);
    assert_int_equal(n, 1);
    assert_int_equal(k, 1);
    assert_int_equal(u.x.procs[1].pid, 101);
    assert_int_equal(u.x.procs[1].ppid, 100);
    double pss0 = 690000000.0, pss1 = 690000000.0 + 160 * 512.0 * 1024;
    size_t n_pss;
    assert_true(fabs(pl_run_total_last(&u.x, PL_METRIC_PSS, &n_pss) - (pss0 + pss1)) < 1.0);
    assert_int_equal(n_pss, 2);
    char totals[256];
    pl_run_totals_t t;
    pl_run_totals(&u.x, &t);
    assert_int_equal(t.kind, PL_TOTALS_PSS);
    pl_run_totals_phrase(&t, totals, sizeof totals);
    assert_string_equal(totals, "total PSS 1.36 GiB (RSS 1.38 GiB, shared pages counted once per process)");
    /* HTML: self-contained, one chart per metric, the processes table, the site */
    char *buf = NULL;
    size_t len = 0;
    f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_html(&(pl_run_t){u.r, &u.x}, f), 0);
    fclose(f);
    assert_null(strstr(buf, "<script"));
    assert_null(strstr(buf, "src=\"http"));
    assert_non_null(strstr(buf, "<h2>Processes</h2>"));
    assert_non_null(strstr(buf, "leaky_collect"));
    assert_non_null(strstr(buf, "fitted tail"));
    size_t n_svg = 0;
    for (const char *s = buf; (s = strstr(s, "<svg")); s++) n_svg++;
    size_t n_metrics = 0;
    for (size_t i = 0; i < u.r->n_procs; i++)
        for (int m = 0; m < PL_METRIC__COUNT; m++) n_metrics += u.r->procs[i]->metrics[m].present;
    assert_int_equal(n_svg, n_metrics);
    free(buf);
    run_free(&u);
}

/* ---- ranks (docs/verdict.md §9) ---- */

/* a rank's trace: pid, parent, rank (local rank = rank % 2), node, host leak per step (0 = flat) */
static void rank_trace(const char *dir, uint32_t pid, uint32_t ppid, int32_t rank, const char *node, uint64_t leak) {
    char p[300];
    synth_cfg_t c = synth_default();
    c.pid = pid;
    c.ppid = ppid;
    c.leak_bytes = leak;
    c.device = false;
    c.ranked = rank >= 0;
    c.rank = rank;
    c.local_rank = rank % 2;
    c.node = node;
    snprintf(p, sizeof p, "%s/%u.0.pltrace", dir, pid);
    assert_int_equal(synth_trace(p, &c), 0);
}

static char *render(run_t *u, int kind) { /* 0 text, 1 JSON, 2 HTML */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    if (kind == 0) assert_int_equal(pl_render_run_lines(&(pl_run_t){u->r, &u->x}, f, false), 0);
    if (kind == 1) assert_int_equal(pl_render_run_json(&(pl_run_t){u->r, &u->x}, f, 0), 0);
    if (kind == 2) assert_int_equal(pl_render_html(&(pl_run_t){u->r, &u->x}, f), 0);
    fclose(f);
    return buf;
}

/* A launcher and two ranks, only rank 1 leaks: the verdict names rank 1, the ranks disagree, one row per rank. */
static void test_extract_ranks_one_leaks(void **state) {
    (void)state;
    char d[256];
    pl_test_path(d, sizeof d, "ranks1");
    assert_int_equal(mkdir(d, 0700), 0);
    synth_cfg_t c = synth_default(); /* the launcher: no rank, never steps */
    c.pid = 100;
    c.leak_bytes = 0;
    c.device = false;
    c.with_steps = false;
    c.node = "node-a";
    char p[300];
    snprintf(p, sizeof p, "%s/100.0.pltrace", d);
    assert_int_equal(synth_trace(p, &c), 0);
    rank_trace(d, 101, 100, 0, "node-a", 0);
    rank_trace(d, 102, 100, 1, "node-a", 1 << 20);
    run_t u;
    run_file(&u, d);
    const pl_run_verdict_t *rv = &u.r->verdict;
    assert_int_equal(rv->kind, PL_PV_LEAK);
    assert_int_equal(rv->n_ranks, 2);
    assert_int_equal(rv->n_nodes, 1);
    assert_int_equal(rv->n_ranks_leaking, 1);
    assert_int_equal(rv->ranks_agree, 0);
    assert_non_null(strstr(rv->line, "verdict: LEAK in rank 1 (pid 102, node node-a): +1.00 MiB/step of heap.bytes"));
    assert_non_null(strstr(rv->ranks_line, "ranks disagree: rank 1 grows +1.00 MiB/step (heap.bytes) while rank 0 is "
                                           "flat: a leak on one rank only"));
    char *t = render(&u, 0);
    assert_non_null(strstr(t, "leaking: rank 1 (pid 102, node node-a)"));
    assert_non_null(strstr(t, "ranks: 2 on 1 node: ranks disagree"));
    const char *row0 = strstr(t, "      0     0 node-a                101");
    const char *row1 = strstr(t, "      1     1 node-a                102");
    assert_non_null(row0);
    assert_non_null(row1);
    assert_true(row0 < row1);
    assert_non_null(strstr(row0, "no-leak"));
    assert_non_null(strstr(row1, "leak         +1.00 MiB/step heap.bytes"));
    free(t);
    t = render(&u, 1);
    assert_non_null(strstr(t, "\"ranks\": {\"n_ranks\": 2, \"n_nodes\": 1, \"agree\": false"));
    assert_non_null(strstr(t, "\"leaking\": [1], \"flat\": [0]"));
    assert_non_null(strstr(t, "{\"rank\": 1, \"local_rank\": 1, \"node\": \"node-a\", \"pid\": 102"));
    assert_non_null(strstr(t, "\"role\": \"worker\", \"helper\": false, \"rank\": null, \"local_rank\": null, "
                              "\"node\": \"node-a\""));
    free(t);
    t = render(&u, 2);
    assert_non_null(strstr(t, "<h2>Ranks</h2>"));
    assert_non_null(strstr(t, "<h2>Process 102 python3 train.py (rank 1, node node-a)</h2>"));
    free(t);
    run_free(&u);
}

/* Both ranks leak: said once, as an agreement; the verdict counts the other rank. Both flat: they agree too. */
static void test_extract_ranks_agree(void **state) {
    (void)state;
    char d[256];
    pl_test_path(d, sizeof d, "ranks2");
    assert_int_equal(mkdir(d, 0700), 0);
    rank_trace(d, 201, 1, 0, "node-a", 1 << 20);
    rank_trace(d, 202, 1, 1, "node-a", 1 << 20);
    run_t u;
    run_file(&u, d);
    const pl_run_verdict_t *rv = &u.r->verdict;
    assert_int_equal(rv->ranks_agree, 1);
    assert_int_equal(rv->n_ranks_leaking, 2);
    assert_non_null(strstr(rv->line, " (and 1 more rank): "));
    assert_non_null(strstr(rv->ranks_line, "ranks agree: all 2 ranks leak"));
    assert_null(strstr(rv->ranks_line, "disagree"));
    run_free(&u);
    pl_test_path(d, sizeof d, "ranks3");
    assert_int_equal(mkdir(d, 0700), 0);
    rank_trace(d, 301, 1, 0, "node-a", 0);
    rank_trace(d, 302, 1, 1, "node-a", 0);
    run_file(&u, d);
    assert_int_equal(u.r->verdict.kind, PL_PV_NO_LEAK);
    assert_int_equal(u.r->verdict.ranks_agree, 1);
    assert_string_equal(u.r->verdict.ranks_line, "ranks agree: all 2 ranks are flat");
    run_free(&u);
}

/* Two nodes' run directories merged: pid 101 on both nodes stays two processes, and node-b's rank (whose parent pid
 * 100 exists only on node-a) is a root without an end record there: the run is cut short. */
static void test_extract_merge_nodes(void **state) {
    (void)state;
    char a[256], b[256];
    pl_test_path(a, sizeof a, "node-a");
    pl_test_path(b, sizeof b, "node-b");
    assert_int_equal(mkdir(a, 0700), 0);
    assert_int_equal(mkdir(b, 0700), 0);
    synth_cfg_t c = synth_default();
    c.pid = 100;
    c.leak_bytes = 0;
    c.device = false;
    c.with_steps = false;
    c.node = "node-a";
    char p[300];
    snprintf(p, sizeof p, "%s/100.0.pltrace", a);
    assert_int_equal(synth_trace(p, &c), 0);
    rank_trace(a, 101, 100, 0, "node-a", 0);
    c.pid = 101; /* node-b's rank 1: same pid, parent 100 not traced on node-b, killed (no end record) */
    c.ppid = 100;
    c.leak_bytes = 1 << 20;
    c.with_steps = true;
    c.clean_end = false;
    c.ranked = true;
    c.rank = 1;
    c.local_rank = 0;
    c.node = "node-b";
    c.t0_ns = 500000000; /* node-b's monotonic clock reads less: no order across hosts by it */
    snprintf(p, sizeof p, "%s/101.0.pltrace", b);
    assert_int_equal(synth_trace(p, &c), 0);
    int32_t *ranks;
    size_t n_ranks, n_unranked;
    assert_int_equal(pl_extract_scan_ranks(a, &ranks, &n_ranks, &n_unranked), 0);
    assert_int_equal(n_ranks, 1);
    assert_int_equal(ranks[0], 0);
    assert_int_equal(n_unranked, 1);
    free(ranks);
    run_t u;
    u.r = pl_report_create("merged");
    pl_extract_init(&u.x);
    const char *paths[] = {a, b};
    assert_int_equal(pl_extract_paths(u.r, &u.x, paths, 2, NULL), 0);
    assert_int_equal(pl_run_analyze(&(pl_run_t){u.r, &u.x}), 0); /* as the command: it says why the run was cut */
    assert_int_equal(u.x.n_procs, 3);
    assert_string_equal(u.x.procs[0].node, "node-a"); /* node by node: the launcher and rank 0, then node-b */
    assert_int_equal(u.x.procs[0].pid, 100);
    assert_string_equal(u.x.procs[2].node, "node-b");
    assert_int_equal(u.r->verdict.n_ranks, 2);
    assert_int_equal(u.r->verdict.n_nodes, 2);
    assert_non_null(strstr(u.r->verdict.line, "verdict: LEAK in rank 1 (pid 101, node node-b)"));
    assert_int_equal(u.r->verdict.ranks_agree, 0);
    assert_true(u.r->cut_short);
    assert_non_null(strstr(u.r->cut_reason, "101.0.pltrace has no end record"));
    char *t = render(&u, 0);
    assert_non_null(strstr(t, "ranks: 2 on 2 nodes"));
    free(t);
    run_free(&u);
    /* a path that does not exist: the error names it */
    u.r = pl_report_create("merged");
    pl_extract_init(&u.x);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/none", pl_test_dir);
    const char *bad[] = {a, missing};
    assert_int_equal(pl_extract_paths(u.r, &u.x, bad, 2, NULL), 0);
    assert_int_equal(u.x.n_procs, 2);
    assert_int_equal(u.x.n_files_failed, 1);
    assert_non_null(strstr(u.x.failed[0], "none"));
    run_free(&u);
}

/* A row's name is the interpreter and its program, past the flags torchrun puts before it, or the module of -m. */
static void test_extract_process_names(void **state) {
    (void)state;
    static const char *const u_script[] = {"/usr/bin/python3", "-u", "/work/train.py", "--lr", "1"};
    static const char *const m_mod[] = {"/usr/bin/python3", "-m", "torch.distributed.run", "--standalone", "t.py"};
    static const char *const c_code[] = {"python3", "-c", "import x"};
    static const char *const x_opt[] = {"python3", "-X", "dev", "train.py"};
    static const char *const shell[] = {"/bin/sh", "-c", "python3 train.py"};
    static const struct { const char *const *argv; uint32_t n; const char *want; } cases[] = {
        {u_script, 5, "python3 train.py"}, {m_mod, 5, "python3 -m torch.distributed.run"}, {c_code, 3, "python3"},
        {x_opt, 4, "python3"}, {shell, 3, "sh"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s/name%zu.pltrace", pl_test_dir, i);
        synth_cfg_t c = synth_default();
        c.n_steps = 10;
        c.argv = cases[i].argv;
        c.n_argv = cases[i].n;
        assert_int_equal(synth_trace(p, &c), 0);
        run_t u;
        run_file(&u, p);
        assert_string_equal(u.r->procs[0]->name, cases[i].want);
        run_free(&u);
    }
}

static void test_extract_bad_inputs(void **state) {
    (void)state;
    char d[256], p[300];
    pl_test_path(d, sizeof d, "junk");
    assert_int_equal(mkdir(d, 0700), 0);
    snprintf(p, sizeof p, "%s/junk.pltrace", d);
    FILE *f = fopen(p, "w");
    fputs("this is not a plateau trace, just text that is long enough to hold a header......", f);
    fclose(f);
    pl_report_t *r = pl_report_create(p);
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_path(r, &x, p, NULL), -EBADMSG);
    assert_int_equal(x.n_procs, 0);
    assert_int_equal(x.n_files_failed, 1);
    assert_non_null(strstr(x.first_error, "junk.pltrace"));
    pl_extract_free(&x);
    pl_report_destroy(r);
    /* a directory with only that file: nothing usable */
    r = pl_report_create(d);
    pl_extract_init(&x);
    assert_int_equal(pl_extract_path(r, &x, d, NULL), -ENOENT);
    assert_int_equal(x.n_files_failed, 1);
    pl_extract_free(&x);
    pl_report_destroy(r);
    /* missing path */
    r = pl_report_create("nope");
    pl_extract_init(&x);
    assert_int_equal(pl_extract_path(r, &x, "/nonexistent/plateau/run", NULL), -ENOENT);
    assert_non_null(strstr(x.first_error, "/nonexistent/plateau/run"));
    pl_extract_free(&x);
    pl_report_destroy(r);
    /* an empty buffer, and a header alone (a process that died at once) */
    r = pl_report_create("mem");
    pl_extract_init(&x);
    assert_int_not_equal(pl_extract_mem(r, &x, "", 0, "empty", NULL), 0);
    pl_extract_free(&x);
    pl_report_destroy(r);
}

static void test_extract_bounded_points(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "f.pltrace");
    synth_cfg_t c = synth_default();
    c.n_steps = 400;
    assert_int_equal(synth_trace(p, &c), 0);
    pl_report_t *r = pl_report_create(p);
    pl_extract_t x;
    pl_extract_init(&x);
    pl_extract_opts_t o = {.max_points = 64, .since_step = 11};
    assert_int_equal(pl_extract_path(r, &x, p, &o), 0);
    assert_int_equal(pl_report_analyze(r), 0);
    const pl_report_metric_t *hb = &r->procs[0]->metrics[PL_METRIC_HEAP_BYTES];
    assert_true(hb->series.n_points <= 64 && hb->series.n_points >= 32);
    assert_true(hb->series.points[0].step >= 11);
    assert_int_equal(hb->verdict.kind, PL_VERDICT_LEAK);
    pl_extract_free(&x);
    pl_report_destroy(r);
}


/* Hostile but well-framed values: extreme steps and sizes, frees of unknown addresses, stacks never declared,
 * negative allocator totals, times and signed totals at the ends of what a reader accepts (+-2^62,
 * PL_TRACE_MAX_T_NS: beyond it a record is malformed, tests/tracer/test_event.c). Extraction must stay defined
 * (UBSan) and bounded, and every renderer must cope. */
static void test_extract_hostile_values(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "h.pltrace");
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 9, .ppid = 1, .start_mono_ns = PL_TRACE_MAX_T_NS};
    pl_writer_t *w = pl_test_trace_open(p, &h, NULL, 0, NULL);
    pl_trace_record_t r;
    for (int i = 0; i < 300; i++) {
        memset(&r, 0, sizeof r);
        r.t_ns = (i % 2) ? 0 : PL_TRACE_MAX_T_NS - i;
        switch (i % 10) {
        case 0: r.type = PL_REC_STEP; r.u.step.step = i % 20 ? (uint64_t)i : UINT64_MAX; break;
        case 1:
            r.type = PL_REC_RSS;
            r.u.rss = (pl_rec_rss_t){.step = (uint64_t)1 << 63, .rss_anon = UINT64_MAX - 1, .rss_file = 0,
                                     .rss_shmem = 7, .pss = PL_TRACE_NA, .cgroup_current = 1,
                                     .device_used = UINT64_MAX - 2, .device_total = UINT64_MAX - 3};
            break;
        case 2:
            r.type = PL_REC_DEVICE_ALLOC;
            r.u.device = (pl_rec_device_t){.source = (uint32_t)i % 5, .addr = (uint64_t)i * 16, .size = UINT64_MAX};
            break;
        case 3: r.type = PL_REC_DEVICE_FREE; r.u.device.addr = 0xdead; break;
        case 4: r.type = PL_REC_HOST_ALLOC; r.u.host_alloc = (pl_rec_host_alloc_t){.addr = 64, .size = UINT64_MAX, .stack_id = (uint32_t)i}; break;
        case 5: r.type = PL_REC_HOST_FREE; r.u.host_free.addr = (uint64_t)(i % 3) * 64; break;
        case 6:
            r.type = PL_REC_ALLOC_STATS;
            r.u.alloc_stats = (pl_rec_alloc_stats_t){.allocator_id = (uint32_t)i, .step = (uint64_t)i,
                                                     .allocated_bytes = -PL_TRACE_MAX_T_NS,
                                                     .reserved_bytes = PL_TRACE_MAX_T_NS, .n_allocations = -5, .capacity_bytes = PL_TRACE_NA};
            break;
        case 7: r.type = PL_REC_HEAP; r.u.heap = (pl_rec_heap_t){.step = 0, .live_bytes = -PL_TRACE_MAX_T_NS, .live_count = PL_TRACE_MAX_T_NS}; break;
        case 8: r.type = PL_REC_DEVICE_MAP; r.u.device = (pl_rec_device_t){.addr = 0, .size = 1}; break;
        default: r.type = PL_REC_FRAME; r.u.frame = (pl_rec_frame_t){.pc = (uint64_t)i, .module_id = 99, .symbol = ""}; break;
        }
        pl_test_emit(w, &r);
    }
    pl_test_trace_close(w);
    pl_report_t *rep = pl_report_create(p);
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_path(rep, &x, p, NULL), 0);
    assert_int_equal(pl_report_analyze(rep), 0);
    assert_true(rep->cut_short); /* no end record */
    FILE *f = fopen("/dev/null", "w");
    assert_non_null(f);
    assert_int_equal(pl_render_text(rep, f, NULL), 0);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){rep, &x}, f, false), 0);
    assert_int_equal(pl_render_run_json(&(pl_run_t){rep, &x}, f, 16), 0);
    assert_int_equal(pl_render_html(&(pl_run_t){rep, &x}, f), 0);
    fclose(f);
    pl_extract_free(&x);
    pl_report_destroy(rep);
}

static void test_extract_golden_json(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "g.pltrace");
    synth_cfg_t c = synth_default();
    c.n_steps = 120;
    c.clean_end = false;
    assert_int_equal(synth_trace(p, &c), 0);
    size_t len = 0;
    unsigned char *b = synth_slurp(p, &len);
    assert_non_null(b);
    pl_report_t *r = pl_report_create("synthetic.pltrace");
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_mem(r, &x, b, len, "synthetic.pltrace", NULL), 0);
    assert_int_equal(pl_run_analyze(&(pl_run_t){r, &x}), 0); /* as the command: how each process ended too */
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    assert_int_equal(pl_render_run_json(&(pl_run_t){r, &x}, f, 64), 0);
    fclose(f);
    char gp[512];
    snprintf(gp, sizeof gp, "%s/extract_synth.json", g_golden_dir);
    if (getenv("PL_REGEN_GOLDEN")) {
        FILE *g = fopen(gp, "w");
        assert_non_null(g);
        fwrite(out, 1, olen, g);
        fclose(g);
    }
    size_t glen = 0;
    unsigned char *gold = synth_slurp(gp, &glen);
    assert_non_null(gold);
    if (glen != olen || memcmp(gold, out, olen)) {
        fprintf(stderr, "JSON differs from %s; got:\n%s\n", gp, out);
        fail();
    }
    assert_non_null(strstr(out, "\"run\": {"));
    free(gold);
    free(out);
    free(b);
    pl_extract_free(&x);
    pl_report_destroy(r);
}

/* Device allocations seen by the hooks and by CUPTI memory activity: the report says whether they agree, and
 * CUPTI's copies never count twice. A trace without CUPTI records gets no cross-check (golden JSON unchanged). */
static void write_dev_trace(const char *p, int n_cupti) {
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 11, .ppid = 1};
    pl_writer_t *w = pl_test_trace_open(p, &h, NULL, 0, NULL);
    pl_trace_record_t r;
    for (int i = 0; i < 3; i++) {
        memset(&r, 0, sizeof r);
        r.type = PL_REC_DEVICE_ALLOC;
        r.t_ns = 1000 + i;
        r.u.device = (pl_rec_device_t){.source = i ? PL_DEV_SRC_RUNTIME : PL_DEV_SRC_DRIVER, .addr = 0x1000u * (i + 1),
                                       .size = 4096};
        pl_test_emit(w, &r);
        if (i >= n_cupti) continue;
        r.u.device.source = PL_DEV_SRC_CUPTI; /* the same allocation, reported by CUPTI */
        pl_test_emit(w, &r);
    }
    memset(&r, 0, sizeof r);
    r.type = PL_REC_PROCESS_END;
    r.t_ns = 2000;
    pl_test_emit(w, &r);
    pl_test_trace_close(w);
}

/* s with every occurrence of what replaced by "DIR" (malloc'd) */
static char *masked(const char *s, const char *what) {
    size_t n = strlen(what);
    char *o = malloc(3 * strlen(s) + 1), *w = o; /* "DIR" may be longer than what */
    assert_non_null(o);
    while (*s) {
        if (n && !strncmp(s, what, n)) {
            memcpy(w, "DIR", 3);
            w += 3, s += n;
        } else {
            *w++ = *s++;
        }
    }
    *w = 0;
    return o;
}

static void render_both(run_t *u, char *text, size_t text_cap, char *json, size_t json_cap) {
    FILE *f = fmemopen(text, text_cap, "w");
    assert_non_null(f);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){u->r, &u->x}, f, false), 0);
    fclose(f);
    f = fmemopen(json, json_cap, "w");
    assert_non_null(f);
    assert_int_equal(pl_render_run_json(&(pl_run_t){u->r, &u->x}, f, 16), 0);
    fclose(f);
}

static void test_extract_cupti_crosscheck(void **state) {
    (void)state;
    static char text[1 << 16], json[1 << 18];
    static const struct { int n_cupti; const char *line, *json; } cases[] = {
        {3, "device allocations: hooks 3 (12.0 KiB), CUPTI 3 (12.0 KiB): agree", "\"agree\": true"},
        {2, "device allocations: hooks 3 (12.0 KiB), CUPTI 2 (8.00 KiB): DIFFER", "\"agree\": false"},
        {0, NULL, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char p[256];
        snprintf(p, sizeof p, "%s/dev%zu.pltrace", pl_test_dir, k);
        write_dev_trace(p, cases[k].n_cupti);
        run_t u;
        run_file(&u, p);
        assert_int_equal(u.x.n_procs, 1);
        assert_int_equal(u.x.procs[0].n_hook_dev_allocs, 3);
        assert_int_equal(u.x.procs[0].hook_dev_alloc_bytes, 3 * 4096);
        assert_int_equal(u.x.procs[0].n_cupti_dev_allocs, (uint64_t)cases[k].n_cupti);
        assert_int_equal(u.x.procs[0].n_untracked, 0); /* CUPTI's copy of an address is not a second live block */
        memset(text, 0, sizeof text);
        memset(json, 0, sizeof json);
        render_both(&u, text, sizeof text - 1, json, sizeof json - 1);
        if (k == 0) { /* the whole document once, byte for byte, the temporary dir as DIR */
            char *doc = masked(json, pl_test_dir);
            assert_true(pl_test_golden(g_golden_dir, "extract_crosscheck.json", doc, strlen(doc)));
            free(doc);
        }
        if (cases[k].line) {
            if (!strstr(text, cases[k].line)) fprintf(stderr, "text:\n%s\n", text);
            assert_non_null(strstr(text, cases[k].line));
            assert_non_null(strstr(json, "\"device_crosscheck\": {\"hook_allocs\": 3"));
            assert_non_null(strstr(json, cases[k].json));
        } else {
            assert_null(strstr(text, "device allocations:"));
            assert_null(strstr(json, "device_crosscheck"));
        }
        run_free(&u);
    }
}

/* A CUDA program's trace for the device sites (docs/cuda-interception.md "Device call sites"), written record by record. Each of
 * DEVSITES_STEPS steps: stack 1 (train_cuda.py:55, native leak_segment) takes 2 MiB from the driver and, when leak, never gives
 * it back (else frees it within the step); stack 2 (train_cuda.py:30) takes 4 MiB and frees it; stack 3 maps 1 MiB
 * and unmaps it the next step; stack 5 (native grow_map) maps 512 KiB for good when leak; plateau's own allocator
 * allocates and frees a block at stack 1's address (a tensor in that segment: must not end it); CUPTI reports stack
 * 1's allocation again and 8 MiB more under stack 4, never freed (CUPTI is never counted); a driver free of an
 * address never seen allocated; the host: stack 6 allocates 64 KiB a step, never freed, while the live heap stays
 * flat (a host site that grows, which a device leak's report must not list first). */
#define DEVSITES_STEPS 160
static void write_devsites_trace(const char *p, bool leak) {
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 77, .ppid = 1, .start_mono_ns = 1000000000LL,
                           .start_realtime_ns = 1700000000000000000LL};
    pl_writer_t *w;
    assert_int_equal(pl_writer_open(p, &h, NULL, &w), 0);
    pl_trace_record_t r;
    int64_t t = 1000000000LL;
#define EMIT_AT(tt) do { r.t_ns = (tt); assert_int_equal(pl_writer_emit(w, &r), 0); memset(&r, 0, sizeof r); } while (0)
    memset(&r, 0, sizeof r);
    r.type = PL_REC_PROCESS_START;
    r.u.process = (pl_rec_process_t){.pid = 77, .ppid = 1, .rank = -1, .local_rank = -1, .exe = "/usr/bin/python3",
                                     .host_mem_bytes = 64ull << 30, .cgroup_max_bytes = PL_TRACE_NA,
                                     .start_realtime_ns = h.start_realtime_ns, .argc = 2, .n_argv = 2};
    r.u.process.argv[0] = "python3";
    r.u.process.argv[1] = "train_cuda.py";
    EMIT_AT(t);
    r.type = PL_REC_MODULE;
    r.u.module = (pl_rec_module_t){.module_id = 1, .base = 0x7f0000000000ull, .path = "/opt/plateau/libplateau_preload.so"};
    EMIT_AT(t);
    r.type = PL_REC_MODULE;
    r.u.module = (pl_rec_module_t){.module_id = 2, .base = 0x400000, .path = "/opt/app/cuda_app"};
    EMIT_AT(t);
    static const struct { uint64_t pc; uint32_t mod; const char *sym; } fr[] = {
        {0x7f0000002000ull, 1, "cudaMalloc"}, {0x401000, 2, "leak_segment"}, {0x402000, 2, "cached_segment"},
        {0x403000, 2, "expand_map"}, {0x404000, 2, "cupti_only"}, {0x405000, 2, "grow_map"},
        {0x406000, 2, "host_list"}, {0x407000, 2, "main"}};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) {
        r.type = PL_REC_FRAME;
        r.u.frame = (pl_rec_frame_t){.pc = fr[i].pc, .module_id = fr[i].mod, .module_offset = fr[i].pc & 0xffff,
                                     .symbol = fr[i].sym, .symbol_offset = 0x10};
        EMIT_AT(t);
    }
    r.type = PL_REC_PYFRAME;
    r.u.pyframe = (pl_rec_pyframe_t){.pyframe_id = 1, .line = 55, .file = "/nonexistent/train_cuda.py", .function = "step"};
    EMIT_AT(t);
    r.type = PL_REC_PYFRAME;
    r.u.pyframe = (pl_rec_pyframe_t){.pyframe_id = 2, .line = 30, .file = "/nonexistent/train_cuda.py", .function = "step"};
    EMIT_AT(t);
    for (uint32_t id = 1; id <= 6; id++) { /* stack id: hook <- its function (frame id) <- main; 1, 2 with Python */
        r.type = PL_REC_STACK;
        r.u.stack.stack_id = id;
        r.u.stack.n_frames = 3;
        r.u.stack.pcs[0] = fr[0].pc;
        r.u.stack.pcs[1] = fr[id].pc;
        r.u.stack.pcs[2] = fr[7].pc;
        if (id <= 2) {
            r.u.stack.n_py = 1;
            r.u.stack.py[0] = id;
        }
        EMIT_AT(t);
    }
    const uint64_t MiB = 1 << 20;
    for (uint64_t s = 1; s <= DEVSITES_STEPS; s++) {
        int64_t ts = t + (int64_t)s * 1000000000LL;
        uint64_t leak_addr = 0x700000000000ull + s * 0x10000000ull;
        r.type = PL_REC_DEVICE_ALLOC;
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_RUNTIME, .addr = leak_addr, .size = 2 * MiB, .stack_id = 1};
        EMIT_AT(ts + 1);
        r.type = PL_REC_DEVICE_ALLOC; /* CUPTI's copy of it */
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_CUPTI, .addr = leak_addr, .size = 2 * MiB, .stack_id = 1};
        EMIT_AT(ts + 2);
        r.type = PL_REC_DEVICE_ALLOC; /* a tensor of plateau's own allocator at the segment's start, then freed */
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_ALLOCATOR, .addr = leak_addr, .size = MiB, .stack_id = 4};
        EMIT_AT(ts + 3);
        r.type = PL_REC_DEVICE_FREE;
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_ALLOCATOR, .addr = leak_addr, .size = MiB};
        EMIT_AT(ts + 4);
        r.type = PL_REC_DEVICE_ALLOC; /* CUPTI alone, never freed */
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_CUPTI, .addr = 0x7a0000000000ull + s * 0x10000000ull,
                                       .size = 8 * MiB, .stack_id = 4};
        EMIT_AT(ts + 5);
        r.type = PL_REC_DEVICE_ALLOC;
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_DRIVER, .addr = 0x7b0000000000ull, .size = 4 * MiB,
                                       .stack_id = 2};
        EMIT_AT(ts + 6);
        r.type = PL_REC_DEVICE_FREE;
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_DRIVER, .addr = 0x7b0000000000ull, .size = 4 * MiB};
        EMIT_AT(ts + 7);
        r.type = PL_REC_DEVICE_FREE; /* an address never seen allocated (size 0, as the hooks write it) */
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_RUNTIME, .addr = 0x7c0000000000ull + s};
        EMIT_AT(ts + 8);
        if (s > 1) {
            r.type = PL_REC_DEVICE_UNMAP;
            r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_DRIVER, .addr = 0x7d0000000000ull + (s - 1) * MiB,
                                           .size = MiB};
            EMIT_AT(ts + 9);
        }
        r.type = PL_REC_DEVICE_MAP;
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_DRIVER, .addr = 0x7d0000000000ull + s * MiB, .size = MiB,
                                       .stack_id = 3};
        EMIT_AT(ts + 10);
        if (leak) {
            r.type = PL_REC_DEVICE_MAP;
            r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_DRIVER, .addr = 0x7e0000000000ull + s * MiB,
                                           .size = MiB / 2, .stack_id = 5};
            EMIT_AT(ts + 11);
        } else {
            r.type = PL_REC_DEVICE_FREE;
            r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_RUNTIME, .addr = leak_addr, .size = 2 * MiB};
            EMIT_AT(ts + 11);
        }
        r.type = PL_REC_HOST_ALLOC;
        r.u.host_alloc = (pl_rec_host_alloc_t){.addr = 0x10000000ull + s * 0x100000ull, .size = 64 * 1024,
                                               .stack_id = 6, .tid = 77};
        EMIT_AT(ts + 12);
        r.type = PL_REC_ALLOC_STATS; /* torch's counters: dev.allocated and dev.reserved */
        int64_t held = (int64_t)(100 * MiB + (leak ? 2 * MiB * s : 0));
        r.u.alloc_stats = (pl_rec_alloc_stats_t){.allocator_id = PL_ALLOC_ID_TORCH_CUDA, .device = 0, .step = s,
                                                 .allocated_bytes = held, .reserved_bytes = held + 20 * (int64_t)MiB,
                                                 .n_allocations = 50, .active_bytes = (int64_t)PL_TRACE_NA,
                                                 .inactive_split_bytes = (int64_t)PL_TRACE_NA,
                                                 .num_alloc_retries = (int64_t)PL_TRACE_NA,
                                                 .num_ooms = (int64_t)PL_TRACE_NA, .capacity_bytes = 1ull << 30};
        EMIT_AT(ts + 13);
        r.type = PL_REC_HEAP;
        r.u.heap = (pl_rec_heap_t){.step = s, .live_bytes = 2000000000, .live_count = 9000,
                                   .n_alloc = s, .n_free = 0};
        EMIT_AT(ts + 13);
        r.type = PL_REC_STEP;
        r.u.step.step = s;
        EMIT_AT(ts + 14);
    }
    r.type = PL_REC_PROCESS_END;
    EMIT_AT(t + (DEVSITES_STEPS + 1) * 1000000000LL);
#undef EMIT_AT
    assert_int_equal(pl_writer_flush(w), 0);
    pl_writer_close(w);
    pl_writer_destroy(w);
}

/* A device leak's report lists the device sites, by growth over the device verdict's tail: the leaking line first,
 * the growing mapping second, nothing of CUPTI, of plateau's own allocator, of the freed or unmapped memory; the
 * growing host site is kept as the host sites (JSON host_sites), not shown first. A healthy run's report has the
 * host sites as before. */
/* The top device site's sentence: named by its Python line, else by its first native frame; in a process that runs
 * Python, a site with no Python frame was requested on a thread running none (the autograd engine during backward,
 * as measured on an H200), and the sentence says that such a request need not be the line that keeps the memory. */
static void test_dev_site_sentence_no_python(void **state) {
    (void)state;
    char *frames[1] = {"alloc_block+0xcb (libc10_cuda.so)"};
    pl_extract_site_t st = {.growth_bytes = 1 << 20, .live_bytes = 2 << 20, .n_frames = 1, .share = 1.0};
    st.frames[0] = frames[0];
    pl_extract_dev_list_t l = {0};
    pl_run_sites_t v = {.device = true, .metric = "dev.allocated", .since = 101, .n = 1, .sites = &st, .dev = &l};
    char buf[512];
    assert_true(pl_run_dev_site_sentence(&v, true, buf, sizeof buf) > 0);  /* a C program: its native frame only */
    assert_string_equal(buf, "100% of the device memory taken from the driver since step 101 was requested at "
                             "alloc_block+0xcb (libc10_cuda.so)");
    v.python = true;
    assert_true(pl_run_dev_site_sentence(&v, true, buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "requested at alloc_block+0xcb (libc10_cuda.so) on a thread running no Python"));
    assert_non_null(strstr(buf, "not necessarily by the line that keeps it"));
    st.py_name = "train.py:55 in <module>", st.py_file = "/x/train.py", st.py_line = 55;
    assert_true(pl_run_dev_site_sentence(&v, true, buf, sizeof buf) > 0);  /* a Python line: no caveat */
    assert_string_equal(buf, "100% of the device memory taken from the driver since step 101 was requested at "
                             "train.py:55");
}

static void test_extract_device_sites(void **state) {
    (void)state;
    static char text[1 << 16], json[1 << 18];
    char p[256];
    pl_test_path(p, sizeof p, "devsites-leak.pltrace");
    write_devsites_trace(p, true);
    run_t u;
    run_file(&u, p);
    const pl_extract_proc_t *xp = &u.x.procs[0];
    const pl_proc_verdict_t *pv = &u.r->procs[0]->verdict;
    assert_int_equal(pv->kind, PL_PV_LEAK);
    assert_true(pv->metric == PL_METRIC_DEV_ALLOCATED || pv->metric == PL_METRIC_DEV_RESERVED);
    assert_non_null(xp->dev_sites);
    assert_int_equal(xp->dev_sites->n_stacks, 4); /* stacks 1, 2, 3, 5: not CUPTI's, not the allocator's */
    pl_run_sites_t v;
    assert_true(pl_run_sites(xp, &v));
    assert_true(v.device);
    assert_string_equal(v.metric, pl_metric_name((pl_metric_t)pv->metric));
    assert_int_equal(v.since, u.r->procs[0]->metrics[pv->metric].verdict.tail_start_step);
    assert_int_equal(v.n, 2);
    assert_int_equal(v.dev->n_grew, 2);
    const double MiB = 1 << 20;
    double steps = (double)(DEVSITES_STEPS - v.since + 1);
    assert_int_equal(v.sites[0].stack_id, 1);
    assert_string_equal(v.sites[0].py_name, "train_cuda.py:55 in step");
    assert_non_null(strstr(v.sites[0].frames[0], "leak_segment")); /* the hook's frame skipped */
    /* from the end of the step before the tail, as the thinned history has it (never later): a few steps more */
    assert_true(v.sites[0].growth_bytes >= 2 * MiB * steps && v.sites[0].growth_bytes <= 1.2 * 2 * MiB * steps);
    assert_true(v.sites[0].live_bytes == 2 * MiB * DEVSITES_STEPS);
    assert_int_equal(v.sites[0].n_live, DEVSITES_STEPS);
    assert_int_equal(v.sites[1].stack_id, 5);
    assert_null(v.sites[1].py_name);
    assert_non_null(strstr(v.sites[1].frames[0], "grow_map"));
    assert_true(v.sites[1].growth_bytes == v.sites[0].growth_bytes / 4); /* the same steps' history */
    assert_true(v.dev->growth_bytes == v.sites[0].growth_bytes + v.sites[1].growth_bytes);
    assert_true(fabs(v.sites[0].share - 0.8) < 1e-9);
    char line[512];
    assert_true(pl_run_dev_site_sentence(&v, true, line, sizeof line) > 0);
    assert_int_equal(v.since, 101); /* the device verdict's tail, as analysis found it */
    assert_string_equal(line, "80% of the device memory taken from the driver since step 101 was requested at "
                              "train_cuda.py:55");
    assert_int_equal(xp->sites[0].stack_id, 6); /* the host sites are still measured */
    memset(text, 0, sizeof text);
    memset(json, 0, sizeof json);
    render_both(&u, text, sizeof text - 1, json, sizeof json - 1);
    if (!strstr(text, "device call sites")) fprintf(stderr, "text:\n%s\n", text);
    assert_non_null(strstr(text, "device call sites by growth of device memory taken from the driver (pid 77, "));
    assert_non_null(strstr(text, "  1. +"));
    assert_non_null(strstr(text, ") train_cuda.py:55 in step\n"));
    assert_null(strstr(text, "call sites by live-byte growth"));
    assert_null(strstr(text, "host_list"));
    assert_non_null(strstr(json, "\"memory\": \"device\", \"granularity\": \"segment\""));
    assert_non_null(strstr(json, "\"host_sites\": {\"metric\": \"heap.bytes\""));
    char *html = NULL;
    size_t html_len = 0;
    FILE *f = open_memstream(&html, &html_len);
    assert_int_equal(pl_render_html(&(pl_run_t){u.r, &u.x}, f), 0);
    fclose(f);
    assert_non_null(strstr(html, "Device call sites by growth of device memory taken from the driver"));
    assert_non_null(strstr(html, "<dt>Where</dt><dd>80% of the device memory taken from the driver"));
    assert_null(strstr(html, "Call sites by live-byte growth"));
    free(html);
    run_free(&u);

    pl_test_path(p, sizeof p, "devsites-healthy.pltrace");
    write_devsites_trace(p, false);
    run_file(&u, p);
    xp = &u.x.procs[0];
    assert_int_not_equal(u.r->procs[0]->verdict.kind, PL_PV_LEAK);
    assert_non_null(xp->dev_sites);
    assert_false(pl_run_sites(xp, &v));
    assert_false(v.device);
    assert_int_equal(v.n, xp->n_sites);
    memset(json, 0, sizeof json);
    render_both(&u, text, sizeof text - 1, json, sizeof json - 1);
    assert_null(strstr(text, "device call sites"));
    assert_null(strstr(json, "\"memory\": \"device\""));
    assert_null(strstr(json, "host_sites"));
    run_free(&u);
}

/* The reason a run was cut short is never cut: a damaged trace deep in a long directory gives the whole reader
 * message, the file by its base name (it read "...; the trace ends her" at 128 characters). */
static void test_extract_cut_reason_whole(void **state) {
    (void)state;
    char d[300], p[400];
    pl_test_path(d, sizeof d, "a-directory-with-a-rather-long-name-as-cluster-scratch-paths-often-are-0123456789abcdef");
    assert_int_equal(mkdir(d, 0700), 0);
    snprintf(p, sizeof p, "%s/1234567.0.pltrace", d);
    synth_cfg_t c = synth_default();
    assert_int_equal(synth_trace(p, &c), 0);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(truncate(p, sb.st_size - 3000), 0);
    run_t u;
    run_file(&u, d);
    assert_true(u.x.procs[0].damaged);
    assert_true(u.r->cut_short);
    const char *reason = u.r->cut_reason;
    assert_non_null(strstr(reason, "damaged tail: 1234567.0.pltrace: offset "));
    size_t n = strlen(reason);
    assert_true(n > 9 && !strcmp(reason + n - 9, "ends here"));
    bool said = false; /* the diagnosis repeats it whole */
    for (size_t k = 0; k < u.r->procs[0]->n_findings; k++) said |= strstr(u.r->procs[0]->findings[k].text, reason) != NULL;
    assert_true(said);
    run_free(&u);
    /* a reason longer than the report keeps ends in a visible "..." */
    pl_report_t *r = pl_report_create("x");
    char longer[600];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    pl_report_set_cut_short(r, longer);
    n = strlen(r->cut_reason);
    assert_true(n == sizeof r->cut_reason - 1 && !strcmp(r->cut_reason + n - 3, "..."));
    pl_report_destroy(r);
}

/* Every skipped file is named (the first five, then "and N more"), in the text report and in JSON; it used to name
 * only the first. */
static void test_extract_skipped_files_named(void **state) {
    (void)state;
    char d[256], p[320];
    pl_test_path(d, sizeof d, "skips");
    assert_int_equal(mkdir(d, 0700), 0);
    synth_cfg_t c = synth_default();
    snprintf(p, sizeof p, "%s/1.0.pltrace", d);
    assert_int_equal(synth_trace(p, &c), 0);
    for (int i = 0; i < 7; i++) {
        snprintf(p, sizeof p, "%s/junk%d.pltrace", d, i);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs("not a plateau trace, but long enough to hold a header.........................", f);
        fclose(f);
    }
    run_t u;
    run_file(&u, d);
    assert_int_equal(u.x.n_files_failed, 7);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){u.r, &u.x}, f, false), 0);
    fclose(f);
    const char *line = strstr(buf, "skipped 7 files: ");
    assert_non_null(line);
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "junk%d.pltrace: ", i);
        const char *at = strstr(line, name);
        assert_non_null(at);
        assert_true(!memchr(line, '\n', (size_t)(at - line))); /* on the one line */
    }
    assert_null(strstr(buf, "junk5.pltrace"));
    assert_non_null(strstr(line, "; and 2 more\n"));
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_json(&(pl_run_t){u.r, &u.x}, f, 0), 0);
    fclose(f);
    const char *ff = strstr(buf, "\"failed_files\": [\"");
    assert_non_null(ff);
    assert_non_null(strstr(ff, "junk4.pltrace: "));
    assert_true(strstr(ff, "junk4.pltrace: ") < strchr(ff, ']'));
    free(buf);
    run_free(&u);
}

/* Records the writer dropped are said, with their share of the host allocation events, in text and JSON (a
 * `--sample-bytes 0` storm kept 3.4M of 16M allocations and the report did not say so). */
static void test_extract_lost_records_said(void **state) {
    (void)state;
    char p[256];
    pl_test_path(p, sizeof p, "lost.pltrace");
    synth_cfg_t c = synth_default();
    c.lost_records = 48; /* of 160 steps x (2 allocations + 1 free) = 480 host events: 10% */
    assert_int_equal(synth_trace(p, &c), 0);
    run_t u;
    run_file(&u, p);
    assert_int_equal(u.x.procs[0].n_lost_records, 48);
    assert_int_equal(u.x.procs[0].n_host_events, 480);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){u.r, &u.x}, f, false), 0);
    fclose(f);
    assert_non_null(strstr(buf, "pid 4242: the trace lost 48 records (10.0% of host allocation events): stacks and "
                                "counts may be incomplete\n"));
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_json(&(pl_run_t){u.r, &u.x}, f, 0), 0);
    fclose(f);
    assert_non_null(strstr(buf, "\"lost_records\": 48, \"host_events\": 480, \"lost_share\": 0.1,"));
    free(buf);
    run_free(&u);
    /* none lost: no line */
    pl_test_path(p, sizeof p, "kept.pltrace");
    c.lost_records = 0;
    assert_int_equal(synth_trace(p, &c), 0);
    run_file(&u, p);
    buf = NULL;
    f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){u.r, &u.x}, f, false), 0);
    fclose(f);
    assert_null(strstr(buf, "lost"));
    free(buf);
    run_free(&u);
}

int main(int argc, char **argv) {
    g_golden_dir = argc > 1 ? argv[1] : "tests/reports/golden";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extract_plateau_and_host_leak),
        cmocka_unit_test(test_extract_run_model),
        cmocka_unit_test(test_extract_sampled_weights),
        cmocka_unit_test(test_extract_no_leak),
        cmocka_unit_test(test_extract_sites_only_when_leaking),
        cmocka_unit_test(test_extract_long_dladdr_name),
        cmocka_unit_test(test_extract_teardown_after_last_step),
        cmocka_unit_test(test_extract_site_survives_teardown),
        cmocka_unit_test(test_extract_time_buckets),
        cmocka_unit_test(test_extract_killed_no_end_record),
        cmocka_unit_test(test_extract_truncated_partial),
        cmocka_unit_test(test_extract_cut_reason_whole),
        cmocka_unit_test(test_extract_skipped_files_named),
        cmocka_unit_test(test_extract_lost_records_said),
        cmocka_unit_test(test_extract_roles_order_and_teardown),
        cmocka_unit_test(test_extract_worker_pool_on_trainer_steps),
        cmocka_unit_test(test_extract_worker_pool_after_startup),
        cmocka_unit_test(test_extract_copy_on_access_siblings),
        cmocka_unit_test(test_extract_generations_leak),
        cmocka_unit_test(test_extract_generations_flat),
        cmocka_unit_test(test_extract_generations_inherited),
        cmocka_unit_test(test_extract_run_directory),
        cmocka_unit_test(test_extract_total_pss_without_samples),
        cmocka_unit_test(test_extract_forked_worker_without_rss),
        cmocka_unit_test(test_extract_ranks_one_leaks),
        cmocka_unit_test(test_extract_ranks_agree),
        cmocka_unit_test(test_extract_merge_nodes),
        cmocka_unit_test(test_extract_process_names),
        cmocka_unit_test(test_extract_bad_inputs),
        cmocka_unit_test(test_extract_bounded_points),
        cmocka_unit_test(test_extract_hostile_values),
        cmocka_unit_test(test_extract_golden_json),
        cmocka_unit_test(test_extract_cupti_crosscheck),
        cmocka_unit_test(test_extract_device_sites),
        cmocka_unit_test(test_dev_site_sentence_no_python),
    };
    return cmocka_run_group_tests(tests, pl_test_dir_setup, pl_test_dir_teardown);
}
