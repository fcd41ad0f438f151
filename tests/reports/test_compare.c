/* tests/reports/test_compare: reports/compare.c on synthetic processes (report model filled with generated
 * series, classified by pl_report_analyze), one per outcome: glibc retention, a real leak under both allocators,
 * RSS growth outside the heap, nothing grows, and the undecided cases that must not be called retention; plus
 * the allocator guess from usable sizes in generated traces (read into the run model), and the JSON output. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "analyze.h"
#include "compare.h"
#include "compare_render.h"
#include "extract.h"
#include "report.h"
#include "helpers.h"

#include "../common/files.h"

static const char *g_golden_dir = "tests/reports/golden";

#define N_STEPS 300

/* kind of series: flat level, or a leak of `rate` per step from step 0 */
static void set_series(pl_report_process_t *p, pl_metric_t m, double level, double rate, unsigned seed) {
    pl_sample_t s[N_STEPS];
    srand(seed);
    for (int i = 0; i < N_STEPS; i++) {
        double noise = level * 1e-4 * ((double)rand() / RAND_MAX - 0.5);
        s[i] = (pl_sample_t){i + 1, (int64_t)(i + 1) * 10000000, level + rate * i + noise};
    }
    assert_int_equal(pl_report_set_samples(p, m, s, N_STEPS, NULL), 0);
}

/* one process: rss.anon and heap.bytes/heap.count at their rates (0 = flat); n_steps < N_STEPS cuts RSS short */
static pl_report_process_t *proc(pl_report_t *r, double rss_rate, double heap_rate, bool short_rss) {
    pl_report_process_t *p = pl_report_add_process(r, 100 + (int64_t)r->n_procs, -1, "train");
    assert_non_null(p);
    set_series(p, PL_METRIC_HEAP_BYTES, 50e6, heap_rate, 1);
    set_series(p, PL_METRIC_HEAP_COUNT, 1e5, heap_rate > 0 ? 10 : 0, 2);
    if (short_rss) {
        pl_sample_t s[5];
        for (int i = 0; i < 5; i++) s[i] = (pl_sample_t){i + 1, (int64_t)(i + 1) * 10000000, 80e6 + rss_rate * i};
        assert_int_equal(pl_report_set_samples(p, PL_METRIC_RSS_ANON, s, 5, NULL), 0);
    } else set_series(p, PL_METRIC_RSS_ANON, 80e6, rss_rate, 3);
    return p;
}

/* json: when not NULL, the JSON rendering (malloc'd) */
static pl_compare_t run_case_json(double rss_a, double heap_a, double rss_b, double heap_b, const char *alloc_a,
                                  const char *alloc_b, bool short_rss_b, char **json) {
    pl_report_t *r = pl_report_create("synthetic");
    assert_non_null(r);
    pl_report_process_t *a = proc(r, rss_a, heap_a, false), *b = proc(r, rss_b, heap_b, short_rss_b);
    assert_int_equal(pl_report_analyze(r), 0);
    pl_compare_t c;
    assert_int_equal(pl_compare_runs(a, alloc_a, "runs/a", b, alloc_b, "runs/b", &c), 0);
    /* the rows are borrowed from the report: render before it goes */
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(pl_compare_render_text(&c, f), 0);
    assert_int_equal(pl_compare_render_json(&c, f), 0);
    fclose(f);
    if (json) {
        size_t len = 0;
        f = open_memstream(json, &len);
        assert_non_null(f);
        assert_int_equal(pl_compare_render_json(&c, f), 0);
        fclose(f);
    }
    for (int i = 0; i < 2; i++) c.run[i].proc = NULL; /* the rows die with the report */
    pl_report_destroy(r);
    return c;
}

static pl_compare_t run_case(double rss_a, double heap_a, double rss_b, double heap_b, const char *alloc_a,
                             const char *alloc_b, bool short_rss_b) {
    return run_case_json(rss_a, heap_a, rss_b, heap_b, alloc_a, alloc_b, short_rss_b, NULL);
}

/* the JSON byte for byte: retention in run A (growing_run 0), and undecided with unknown allocators (nulls) */
static void test_compare_golden_json(void **state) {
    (void)state;
    char *json = NULL;
    run_case_json(100e3, 0, 0, 0, "glibc", "jemalloc", false, &json);
    assert_true(pl_test_golden(g_golden_dir, "compare_retention.json", json, strlen(json)));
    free(json);
    run_case_json(100e3, 0, 0, 0, NULL, NULL, true, &json);
    assert_true(pl_test_golden(g_golden_dir, "compare_unknown.json", json, strlen(json)));
    free(json);
}

static void test_compare_retention(void **state) {
    (void)state;
    /* RSS +100 KiB/step under glibc, flat under jemalloc, live heap flat in both */
    pl_compare_t c = run_case(100e3, 0, 0, 0, "glibc", "jemalloc", false);
    assert_int_equal(c.kind, PL_COMPARE_RETENTION);
    assert_int_equal(c.growing_run, 0);
    assert_non_null(strstr(c.text, "glibc arena retention"));
    assert_non_null(strstr(c.text, "RSS grows under glibc"));
    /* the same with the runs given in the other order */
    c = run_case(0, 0, 100e3, 0, "jemalloc", "glibc", false);
    assert_int_equal(c.kind, PL_COMPARE_RETENTION);
    assert_int_equal(c.growing_run, 1);
}

static void test_compare_leak_both(void **state) {
    (void)state;
    /* deliberate misuse of the retention reading: the heap grows under both, RSS too: a real leak */
    pl_compare_t c = run_case(120e3, 64e3, 70e3, 64e3, "glibc", "jemalloc", false);
    assert_int_equal(c.kind, PL_COMPARE_LEAK);
    assert_int_equal(c.growing_run, -1);
    assert_non_null(strstr(c.text, "real leak"));
    /* a leak is a leak even when RSS has not moved yet under one allocator */
    c = run_case(0, 64e3, 0, 64e3, "glibc", "jemalloc", false);
    assert_int_equal(c.kind, PL_COMPARE_LEAK);
}

static void test_compare_outside_heap(void **state) {
    (void)state;
    pl_compare_t c = run_case(100e3, 0, 100e3, 0, "glibc", "jemalloc", false);
    assert_int_equal(c.kind, PL_COMPARE_OUTSIDE_HEAP);
    assert_non_null(strstr(c.text, "outside the malloc heap"));
}

static void test_compare_no_growth(void **state) {
    (void)state;
    pl_compare_t c = run_case(0, 0, 0, 0, "glibc", "jemalloc", false);
    assert_int_equal(c.kind, PL_COMPARE_NO_GROWTH);
}

static void test_compare_undecided(void **state) {
    (void)state;
    /* RSS of the jemalloc run too short to judge: not retention, not a guess */
    pl_compare_t c = run_case(100e3, 0, 0, 0, "glibc", "jemalloc", true);
    assert_int_equal(c.kind, PL_COMPARE_INCONCLUSIVE);
    assert_non_null(strstr(c.text, "rss.anon of jemalloc"));
    /* heap grows in one run only */
    c = run_case(100e3, 64e3, 0, 0, "glibc", "jemalloc", false);
    assert_int_equal(c.kind, PL_COMPARE_INCONCLUSIVE);
    /* RSS grows under jemalloc only: not glibc retention */
    c = run_case(0, 0, 100e3, 0, "glibc", "jemalloc", false);
    assert_int_equal(c.kind, PL_COMPARE_INCONCLUSIVE);
    assert_int_equal(c.growing_run, -1);
    /* allocators unknown: retention of run A's allocator, said conditionally */
    c = run_case(100e3, 0, 0, 0, NULL, NULL, false);
    assert_int_equal(c.kind, PL_COMPARE_RETENTION);
    assert_string_equal(c.run[0].allocator, "unknown");
    assert_non_null(strstr(c.text, "if the two runs differ only"));
}

/* a trace with a process_start record naming `recorded` (NULL: none, as before format 1.2), then n host_alloc
 * records of the given usable sizes (cycled) */
static void write_trace_rec(const char *path, const char *recorded, const uint64_t *sizes, size_t n_sizes, size_t n) {
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 1, .ppid = 0};
    pl_rec_process_t proc = {.pid = 1, .exe = "/bin/x", .host_allocator = recorded};
    pl_writer_t *w = pl_test_trace_open(path, &h, NULL, 0, &proc);
    for (size_t i = 0; i < n; i++) {
        pl_trace_record_t a;
        memset(&a, 0, sizeof a);
        a.type = PL_REC_HOST_ALLOC;
        a.t_ns = 10 + (int64_t)i;
        a.u.host_alloc = (pl_rec_host_alloc_t){.addr = 0x1000 + i * 64, .size = sizes[i % n_sizes], .tid = 1};
        pl_test_emit(w, &a);
    }
    pl_test_trace_close(w);
}

static void write_trace(const char *path, const uint64_t *sizes, size_t n_sizes, size_t n) {
    write_trace_rec(path, NULL, sizes, n_sizes, n);
}

/* What compare finds for the trace at path: its process image read once into the run model, then the model alone. */
static void trace_allocator(const char *path, const char **a, const char **from) {
    pl_report_t *r = pl_report_create(path);
    assert_non_null(r);
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_file(r, &x, path, NULL), 0);
    assert_int_equal(x.n_procs, 1);
    pl_compare_proc_allocator(&x.procs[0], a, from);
    pl_extract_free(&x);
    pl_report_destroy(r);
}

static void test_compare_guess_allocator(void **state) {
    (void)state;
    /* the rule alone: 90 % or more 8 mod 16 is glibc, 1 % or less is jemalloc, in between or under 20 says nothing */
    assert_string_equal(pl_compare_guess_allocator(100, 90), "glibc");
    assert_null(pl_compare_guess_allocator(100, 89));
    assert_string_equal(pl_compare_guess_allocator(100, 1), "jemalloc");
    assert_null(pl_compare_guess_allocator(100, 2));
    assert_null(pl_compare_guess_allocator(19, 19));
    assert_string_equal(pl_compare_guess_allocator(20, 20), "glibc");
    /* from traces: the usable sizes extraction counted (sizes of 16 and below and mmap'd blocks left out) */
    char path[160];
    pl_test_path(path, sizeof path, "x.pltrace");
    const char *a = "x", *from = "x";
    static const uint64_t glibc_sizes[] = {24, 40, 65544, 524296, 1032};
    static const uint64_t je_sizes[] = {32, 48, 81920, 524288, 1024, 8};
    write_trace(path, glibc_sizes, 5, 100);
    trace_allocator(path, &a, &from);
    assert_non_null(a);
    assert_string_equal(a, "glibc");
    assert_string_equal(from, "guessed");
    unlink(path);
    write_trace(path, je_sizes, 6, 100);
    trace_allocator(path, &a, &from);
    assert_non_null(a);
    assert_string_equal(a, "jemalloc");
    unlink(path);
    write_trace(path, glibc_sizes, 5, 10); /* too few samples to tell */
    trace_allocator(path, &a, &from);
    assert_null(a);
    assert_string_equal(from, "");
    unlink(path);
    pl_compare_proc_allocator(NULL, &a, &from);
    assert_null(a);
}

/* The allocator the tracer recorded wins over the usable-size guess; traces without it fall back to the guess and
 * say so. */
static void test_compare_recorded_allocator(void **state) {
    (void)state;
    char path[160];
    pl_test_path(path, sizeof path, "x.pltrace");
    static const uint64_t glibc_sizes[] = {24, 40, 65544, 524296, 1032};
    const char *a = "x", *from = "x";
    /* recorded jemalloc, although the sizes look like glibc's: the record is what ran */
    write_trace_rec(path, "jemalloc", glibc_sizes, 5, 100);
    trace_allocator(path, &a, &from);
    assert_string_equal(a, "jemalloc");
    assert_string_equal(from, "recorded");
    unlink(path);
    write_trace_rec(path, "glibc", glibc_sizes, 5, 3); /* no samples needed */
    trace_allocator(path, &a, &from);
    assert_string_equal(a, "glibc");
    assert_string_equal(from, "recorded");
    unlink(path);
    write_trace_rec(path, "other:libfoo.so", glibc_sizes, 5, 3);
    trace_allocator(path, &a, &from);
    assert_string_equal(a, "other");
    assert_string_equal(from, "recorded");
    unlink(path);
    /* an older trace (no field) or a tracer that could not tell: the guess, marked as one */
    write_trace_rec(path, NULL, glibc_sizes, 5, 100);
    trace_allocator(path, &a, &from);
    assert_string_equal(a, "glibc");
    assert_string_equal(from, "guessed");
    unlink(path);
    write_trace_rec(path, "unknown", glibc_sizes, 5, 10);
    trace_allocator(path, &a, &from);
    assert_null(a);
    assert_string_equal(from, "");
    unlink(path);
}

int main(int argc, char **argv) {
    if (argc > 1) g_golden_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_golden_json),     cmocka_unit_test(test_compare_retention),       cmocka_unit_test(test_compare_leak_both),
        cmocka_unit_test(test_compare_outside_heap),    cmocka_unit_test(test_compare_no_growth),
        cmocka_unit_test(test_compare_undecided),
        cmocka_unit_test_setup_teardown(test_compare_guess_allocator, pl_test_dir_setup, pl_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_compare_recorded_allocator, pl_test_dir_setup, pl_test_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
