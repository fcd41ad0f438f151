/* reports.render: golden tests of the text and JSON renderers (reports/render_text.c, render_json.c).
 *
 * Two small deterministic reports (a device run with retained tensors, a host run cut short with two processes)
 * are rendered and compared byte for byte with tests/reports/golden/. To accept a deliberate change, run
 * tools/regen-report-goldens.sh BUILD_DIR and review the diff (git diff tests/reports/golden).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "render.h"
#include "synth.h"
#include "words.h"

static const char *g_dir;

static void put(pl_report_process_t *p, pl_metric_t m, uint64_t seed, size_t n, synth_shape_fn fn, const double *k,
                double sd, double step_s) {
    pl_sample_t *s = synth_series(seed, n, fn, k, sd, 0, step_s);
    if (!pl_metric_is_bytes(m))
        for (size_t i = 0; i < n; i++) s[i].value = (double)(int64_t)s[i].value;
    assert_int_equal(pl_report_set_samples(p, m, s, n, NULL), 0);
    free(s);
}

static pl_report_t *device_report(void) {
    pl_report_t *r = pl_report_create("runs/gpt2-retain/trace.plt");
    r->limits.device_bytes = 16e9;
    r->limits.host_bytes = 64e9;
    pl_report_process_t *p = pl_report_add_process(r, 1234, 0, "train.py");
    put(p, PL_METRIC_RSS, 1, 200, synth_linear_then_flat, (double[]){2e9, 5e9, 20}, 0.002, 2.0);
    put(p, PL_METRIC_DEV_ALLOCATED, 2, 200, synth_warmup_then_leak, (double[]){1e9, 6e9, 30, 20e6}, 0.002, 2.0);
    put(p, PL_METRIC_DEV_RESERVED, 3, 200, synth_warmup_then_leak, (double[]){2e9, 7e9, 30, 20e6}, 0.002, 2.0);
    put(p, PL_METRIC_DEV_TENSORS, 4, 200, synth_warmup_then_leak, (double[]){800, 1236, 10, 1}, 0, 2.0);
    assert_int_equal(pl_report_analyze(r), 0);
    return r;
}

static pl_report_t *host_report(void) {
    pl_report_t *r = pl_report_create("runs/vision-ft");
    pl_report_set_cut_short(r, "no end record: killed by SIGKILL or the OOM killer");
    r->limits.cgroup_bytes = 32e9;
    r->limits.host_bytes = 64e9;
    pl_report_process_t *p = pl_report_add_process(r, 177381, -1, "python train.py");
    put(p, PL_METRIC_RSS, 5, 240, synth_warmup_then_leak, (double[]){4e9, 9e9, 40, 8e6}, 0.002, 1.5);
    put(p, PL_METRIC_RSS_ANON, 6, 240, synth_warmup_then_leak, (double[]){3e9, 8e9, 40, 8e6}, 0.002, 1.5);
    put(p, PL_METRIC_RSS_FILE, 7, 240, synth_flat, (double[]){1e9}, 0.002, 1.5);
    put(p, PL_METRIC_HEAP_BYTES, 8, 240, synth_linear_then_flat, (double[]){2e9, 6e9, 40}, 0.002, 1.5);
    put(p, PL_METRIC_HEAP_COUNT, 9, 240, synth_linear_then_flat, (double[]){1e5, 3e5, 40}, 0.001, 1.5);
    /* a dataloader worker: the real warmup's first run (corpus seed003_run1), cut at step 70 while growing */
    pl_report_process_t *w = pl_report_add_process(r, 177390, -1, "pt_data_worker");
    static const double mb[] = {5552, 7159, 8851, 10515, 12227, 13919, 15736};
    pl_sample_t s[7 * 8];
    for (int i = 0; i < 7 * 8; i++) /* 8 samples per 10-step interval, the first at each interval's baseline */
        s[i] = (pl_sample_t){10 * (i / 8 + 1) + i % 8, (int64_t)(i * 3) * 1000000000LL,
                             mb[i / 8] * 1e6 * (1 + 0.01 * (i % 8))};
    assert_int_equal(pl_report_set_samples(w, PL_METRIC_PSS, s, 7 * 8, NULL), 0);
    assert_int_equal(pl_report_analyze(r), 0);
    return r;
}

static char *render(const pl_report_t *r, int kind) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    pl_render_text_opts_t o = {.ascii = kind == 1};
    if (kind == 2) assert_int_equal(pl_render_json(r, f, 16), 0);
    else assert_int_equal(pl_render_text(r, f, &o), 0);
    fclose(f);
    return buf;
}

static void check(const char *name, const char *got) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    if (getenv("PL_REGEN_GOLDEN")) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(got, f);
        fclose(f);
        print_message("wrote %s\n", path);
        return;
    }
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("missing golden %s (run tools/regen-report-goldens.sh)", path);
    static char want[1 << 18];
    size_t n = fread(want, 1, sizeof want - 1, f);
    want[n] = 0;
    fclose(f);
    if (strcmp(want, got)) {
        print_message("--- %s differs; got:\n%s\n", path, got);
        fail_msg("golden mismatch: %s", name);
    }
}

static void test_render_device_report(void **state) {
    (void)state;
    pl_report_t *r = device_report();
    const char *names[3] = {"device.txt", "device.ascii.txt", "device.json"};
    for (int k = 0; k < 3; k++) {
        char *out = render(r, k);
        check(names[k], out);
        free(out);
    }
    pl_report_destroy(r);
}

static void test_render_host_report(void **state) {
    (void)state;
    pl_report_t *r = host_report();
    const char *names[3] = {"host.txt", "host.ascii.txt", "host.json"};
    for (int k = 0; k < 3; k++) {
        char *out = render(r, k);
        check(names[k], out);
        free(out);
    }
    pl_report_destroy(r);
}

static void test_render_json_escapes_and_nulls(void **state) {
    (void)state;
    pl_report_t *r = pl_report_create("a\"b\\c\n\x01");
    pl_report_add_process(r, 1, -1, "tab\there");
    assert_int_equal(pl_report_analyze(r), 0);
    char *out = render(r, 2);
    assert_non_null(strstr(out, "\"source\": \"a\\\"b\\\\c\\n\\u0001\""));
    assert_non_null(strstr(out, "\"name\": \"tab\\there\""));
    assert_non_null(strstr(out, "\"rank\": null"));
    assert_non_null(strstr(out, "\"device_bytes\": null"));
    free(out);
    assert_int_equal(pl_render_json(NULL, stdout, 0), -EINVAL);
    assert_int_equal(pl_render_text(r, NULL, NULL), -EINVAL);
    pl_report_destroy(r);
}

/* The sparkline is scaled to the judged window: a 136 KiB/step climb on a 360 MiB baseline after a first-step jump
 * (the model loaded in step 1) rises across the line, `\u2581\u2581\u2582\u2582...\u2588`, instead of
 * `\u2581\u2588\u2588\u2588...` where the jump dwarfed the climb. */
static void test_render_sparkline_judged_window(void **state) {
    (void)state;
    pl_report_t *r = pl_report_create("runs/torch-leak");
    r->limits.host_bytes = 64e9;
    pl_report_process_t *p = pl_report_add_process(r, 4242, -1, "python3 train.py");
    enum { N = 300 };
    pl_sample_t s[N];
    for (int i = 0; i < N; i++) /* step 1: 24 MiB; then 360 MiB + 136 KiB per step */
        s[i] = (pl_sample_t){i + 1, (int64_t)i * 100000000LL,
                             i == 0 ? 24.0 * 1048576 : 360.0 * 1048576 + 136.0 * 1024 * (double)(i + 1)};
    assert_int_equal(pl_report_set_samples(p, PL_METRIC_HEAP_BYTES, s, N, NULL), 0);
    assert_int_equal(pl_report_analyze(r), 0);
    char *t = render(r, 0);
    print_message("%s", t);
    const char *line = strstr(t, "  heap.bytes    ");
    assert_non_null(line);
    assert_non_null(strstr(line, "LEAK") ? strstr(line, "LEAK") : strstr(line, "leak"));
    /* the 24 characters of the sparkline: levels 0..7 of U+2581..U+2588 (3 bytes each) */
    const unsigned char *c = (const unsigned char *)line + strlen("  heap.bytes    ");
    int level[24], n_levels = 0, seen[8] = {0};
    for (int k = 0; k < 24; k++, c += 3) {
        assert_true(c[0] == 0xe2 && c[1] == 0x96 && c[2] >= 0x81 && c[2] <= 0x88);
        level[k] = c[2] - 0x81;
        if (!seen[level[k]]++) n_levels++;
    }
    for (int k = 1; k < 24; k++) assert_true(level[k] >= level[k - 1]); /* it rises ... */
    assert_int_equal(level[0], 0);
    assert_int_equal(level[23], 7);
    assert_true(n_levels >= 7);                                        /* ... through the rows, not in one jump */
    assert_true(level[1] <= 1 && level[12] >= 2 && level[12] <= 5);
    free(t);
    pl_report_destroy(r);
}

/* The workers' line says of each folded worker what it is: one whose loop period detection found steps, so only the
 * others "never step" (the view's counts, run.h). */
static void test_render_workers_line_loops(void **state) {
    (void)state;
    pl_run_view_t v = {.n_workers = 3, .n_workers_nodata = 1, .workers_pid_lo = 11, .workers_pid_hi = 13};
    char line[400];
    assert_int_equal(pl_run_view_workers_line(&v, line, sizeof line), 3);
    assert_string_equal(line, "workers (3 processes that never step, pids 11..13): none leaks; 2 flat, 1 too brief "
                              "to judge");
    v.n_workers_looped = 1;
    pl_run_view_workers_line(&v, line, sizeof line);
    assert_string_equal(line, "workers (3 processes: 1 whose loop period detection found, 2 that never step, pids "
                              "11..13): none leaks; 2 flat, 1 too brief to judge");
    v.n_workers_looped = 2;
    pl_run_view_workers_line(&v, line, sizeof line);
    assert_string_equal(line, "workers (3 processes: 2 whose loops period detection found, 1 that never steps, pids "
                              "11..13): none leaks; 2 flat, 1 too brief to judge");
    v.n_workers_looped = 3;
    pl_run_view_workers_line(&v, line, sizeof line);
    assert_string_equal(line, "workers (3 processes whose loops period detection found, pids 11..13): none leaks; 2 "
                              "flat, 1 too brief to judge");
    v = (pl_run_view_t){.n_workers = 1, .n_workers_looped = 1, .workers_pid_lo = 7, .workers_pid_hi = 7};
    pl_run_view_workers_line(&v, line, sizeof line);
    assert_string_equal(line, "workers (1 process whose loop period detection found, pid 7): none leaks; 1 flat");
    v.n_workers = v.n_workers_looped = 0; /* none: no line */
    assert_int_equal(pl_run_view_workers_line(&v, line, sizeof line), 0);
    assert_string_equal(line, "");
}

int main(int argc, char **argv) {
    g_dir = argc > 1 ? argv[1] : "tests/reports/golden";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_device_report),
        cmocka_unit_test(test_render_host_report),
        cmocka_unit_test(test_render_json_escapes_and_nulls),
        cmocka_unit_test(test_render_sparkline_judged_window),
        cmocka_unit_test(test_render_workers_line_loops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
