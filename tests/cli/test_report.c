/* cli.report: `plateau report` end to end on generated traces (tests/cli/test_report_synth.h): exit status 0 on a
 * report (leak or not, partial or not), 1 on unusable input, 2 on bad arguments; the text names the leaking metric,
 * the call site and the cut-short reason; --json and --html are written; --metric filters. Env: PL_PLATEAU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_report_synth.h"
#include "../common/tmpdir.h"

static const char *plateau;
static char dir[128];
static char out_buf[65536], err_buf[8192];

static int setup(void **state) {
    (void)state;
    return pl_test_tmpdir_make(dir, sizeof dir, "report");
}

static int teardown(void **state) {
    (void)state;
    return pl_test_tmpdir_remove(dir);
}

static void slurp_into(const char *path, char *buf, size_t cap) {
    size_t n = 0;
    unsigned char *b = synth_slurp(path, &n);
    if (!b) n = 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(buf, b, n);
    buf[n] = 0;
    free(b);
}

/* Run `plateau report ARGS`; returns the exit status, fills out_buf / err_buf. */
static int report(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' report %s >'%s/out' 2>'%s/err'", plateau, args, dir, dir);
    int st = system(cmd);
    char p[256];
    snprintf(p, sizeof p, "%s/out", dir);
    slurp_into(p, out_buf, sizeof out_buf);
    snprintf(p, sizeof p, "%s/err", dir);
    slurp_into(p, err_buf, sizeof err_buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void make_trace(const char *name, synth_cfg_t c) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    assert_int_equal(synth_trace(p, &c), 0);
}

static void test_report_leak_trace(void **state) {
    (void)state;
    synth_cfg_t c = synth_default();
    c.step_ns = 250000000; /* 256 KiB per 0.25 s step: ~18 h to the 64 GiB host, a leak that matters */
    make_trace("leak.pltrace", c);
    char args[512];
    snprintf(args, sizeof args, "'%s/leak.pltrace' --json '%s/r.json' --html '%s/r.html' --ascii", dir, dir, dir);
    assert_int_equal(report(args), 0);
    assert_non_null(strstr(out_buf, "plateau report: "));
    assert_non_null(strstr(out_buf, "heap.bytes"));
    assert_non_null(strstr(out_buf, "dev.allocated"));
    assert_non_null(strstr(out_buf, " leak "));
    assert_non_null(strstr(out_buf, " plateau "));
    assert_non_null(strstr(out_buf, "leaky_collect+0x1c (trainer)"));
    assert_non_null(strstr(out_buf, "JSON report: "));
    assert_non_null(strstr(out_buf, "HTML report: "));
    assert_null(strstr(out_buf, "run cut short"));
    char p[256], buf[4096];
    snprintf(p, sizeof p, "%s/r.json", dir);
    slurp_into(p, buf, sizeof buf);
    assert_non_null(strstr(buf, "\"schema\": \"plateau.report\""));
    snprintf(p, sizeof p, "%s/r.html", dir);
    slurp_into(p, buf, sizeof buf);
    assert_true(strncmp(buf, "<!DOCTYPE html>", 15) == 0);
}

static void test_report_metric_filter(void **state) {
    (void)state;
    char args[512];
    snprintf(args, sizeof args, "'%s/leak.pltrace' --metric dev.allocated --since-step 5", dir);
    assert_int_equal(report(args), 0);
    assert_non_null(strstr(out_buf, "dev.allocated"));
    assert_null(strstr(out_buf, "rss.file"));
    assert_null(strstr(out_buf, "heap.bytes"));
}

/* --metric rss hides the live heap from the report, not from the recording: the diagnosis must not say the heap
 * was not recorded, nor that its bytes stay flat under --metric heap.count. */
static void test_report_metric_filter_heap_recorded(void **state) {
    (void)state;
    synth_cfg_t c = synth_default();
    c.leak_bytes = 10u << 20; /* RSS follows: an RSS leak with the heap behind it */
    c.n_steps = 200;
    make_trace("rssleak.pltrace", c);
    char args[512];
    snprintf(args, sizeof args, "'%s/rssleak.pltrace' --metric rss", dir);
    assert_int_equal(report(args), 0);
    assert_non_null(strstr(out_buf, "RSS grows"));
    assert_null(strstr(out_buf, "was not recorded"));
    assert_non_null(strstr(out_buf, "was recorded but --metric leaves it out of this report"));
    snprintf(args, sizeof args, "'%s/rssleak.pltrace' --metric heap.count", dir);
    assert_int_equal(report(args), 0);
    assert_non_null(strstr(out_buf, "Host leak: live allocations grow"));
    assert_null(strstr(out_buf, "bytes stay flat"));
}

static void test_report_run_dir(void **state) {
    (void)state;
    char d[256];
    snprintf(d, sizeof d, "%s/run", dir);
    assert_int_equal(mkdir(d, 0700), 0);
    synth_cfg_t c = synth_default();
    c.pid = 100;
    c.leak_bytes = 0;
    make_trace("run/100.0.pltrace", c);
    c.pid = 101;
    c.ppid = 100;
    c.leak_bytes = 256 * 1024;
    c.step_ns = 250000000; /* ~18 h to the 64 GiB host: a leak that matters */
    c.device = false;
    c.clean_end = false;
    make_trace("run/101.0.pltrace", c);
    char args[512];
    snprintf(args, sizeof args, "'%s'", d);
    assert_int_equal(report(args), 0);
    assert_non_null(strstr(out_buf, "run: 2 processes, total PSS"));
    if (!strstr(out_buf, "leaking: pid 101")) fprintf(stderr, "%s\n%s\n", out_buf, err_buf);
    assert_non_null(strstr(out_buf, "leaking: pid 101"));
    /* a child without an end record (workers often _exit) is flagged, but the run is not "cut short" */
    assert_null(strstr(out_buf, "run cut short"));
    assert_non_null(strstr(out_buf, "[no end record]"));
    /* without its parent's trace, it is the root: then the run was cut short */
    char p[300];
    snprintf(p, sizeof p, "'%s/101.0.pltrace'", d);
    assert_int_equal(report(p), 0);
    assert_non_null(strstr(out_buf, "run cut short: 101.0.pltrace has no end record"));
}

/* A trace without an end record whose process is still running here is "still running": the pid
 * exists, started no later than the trace, and runs the trace's executable. This test process plays it. */
static void test_report_still_running(void **state) {
    (void)state;
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = 0;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    synth_cfg_t c = synth_default();
    c.pid = (uint32_t)getpid();
    c.clean_end = false;
    c.n_steps = 20;
    c.exe = self;
    c.start_realtime_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
    make_trace("alive.pltrace", c);
    char args[512], want[96];
    snprintf(want, sizeof want, "pid %u is still running", (unsigned)getpid());
    snprintf(args, sizeof args, "'%s/alive.pltrace'", dir);
    assert_int_equal(report(args), 0);
    assert_non_null(strstr(out_buf, want));
    assert_null(strstr(out_buf, "ended by a signal"));
    /* the same pid, but the trace started before this process did: a reused pid, not the traced process */
    c.start_realtime_ns = 0; /* 2023 */
    make_trace("reused.pltrace", c);
    snprintf(args, sizeof args, "'%s/reused.pltrace'", dir);
    assert_int_equal(report(args), 0);
    assert_null(strstr(out_buf, want));
    assert_non_null(strstr(out_buf, "ended by a signal (a crash, SIGKILL, the OOM killer) or still running"));
    /* the same pid and start, another executable */
    c.start_realtime_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
    c.exe = "/usr/bin/not-this-program";
    make_trace("other.pltrace", c);
    snprintf(args, sizeof args, "'%s/other.pltrace'", dir);
    assert_int_equal(report(args), 0);
    assert_null(strstr(out_buf, want));
    assert_non_null(strstr(out_buf, "ended by a signal (a crash, SIGKILL, the OOM killer) or still running"));
}

static void test_report_truncated(void **state) {
    (void)state;
    synth_cfg_t c = synth_default();
    make_trace("cut.pltrace", c);
    char p[256];
    snprintf(p, sizeof p, "%s/cut.pltrace", dir);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(truncate(p, sb.st_size - 2000), 0);
    char args[512];
    snprintf(args, sizeof args, "'%s'", p);
    assert_int_equal(report(args), 0);
    assert_non_null(strstr(out_buf, "run cut short: damaged tail"));
    assert_non_null(strstr(out_buf, "damaged trace, partial report: "));
    assert_non_null(strstr(err_buf, "cut.pltrace"));
    assert_non_null(strstr(err_buf, "offset"));
}

static void test_report_unusable_input(void **state) {
    (void)state;
    char p[256], args[512];
    snprintf(p, sizeof p, "%s/junk.pltrace", dir);
    FILE *f = fopen(p, "w");
    fputs("PLATEAU but not really a trace header, only some text padded out to length......", f);
    fclose(f);
    snprintf(args, sizeof args, "'%s'", p);
    assert_int_equal(report(args), 1);
    assert_non_null(strstr(err_buf, "junk.pltrace"));
    assert_int_equal(report("/nonexistent/plateau-run"), 1);
    assert_non_null(strstr(err_buf, "/nonexistent/plateau-run"));
    snprintf(args, sizeof args, "'%s/leak.pltrace' --json /nonexistent/dir/r.json", dir);
    assert_int_equal(report(args), 1); /* the report is printed, but the JSON could not be written */
    assert_non_null(strstr(err_buf, "/nonexistent/dir/r.json"));
}

static void test_report_bad_arguments(void **state) {
    (void)state;
    assert_int_equal(report(""), 2);
    assert_int_equal(report("x --metric nonsense"), 2);
    assert_non_null(strstr(err_buf, "unknown metric"));
    assert_int_equal(report("x --since-step -3"), 2);
    assert_int_equal(report("a b c"), 1); /* three runs merge (issue 15): none of them exists */
    assert_non_null(strstr(err_buf, "no usable trace"));
    assert_int_equal(report("--merge --compare a b"), 2);
    assert_int_equal(report("--compare a b c"), 2);
    assert_int_equal(report("a b"), 1);   /* a comparison of two runs that do not exist */
    assert_int_equal(report("a b --html x.html"), 2);
}

int main(void) {
    plateau = getenv("PL_PLATEAU");
    if (!plateau) {
        fprintf(stderr, "PL_PLATEAU not set\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_leak_trace),
        cmocka_unit_test(test_report_metric_filter),
        cmocka_unit_test(test_report_metric_filter_heap_recorded),
        cmocka_unit_test(test_report_run_dir),
        cmocka_unit_test(test_report_truncated),
        cmocka_unit_test(test_report_still_running),
        cmocka_unit_test(test_report_unusable_input),
        cmocka_unit_test(test_report_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
