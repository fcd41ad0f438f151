/* reports/live: a trace written while it is followed. Labels move from warming up to flat (a plateau) and to LEAK;
 * every byte is read once (bytes read == file size after each poll, across polls); the held memory stays bounded
 * over a long run; a helper that ended without steps keeps no series; the run ends when every trace has ended. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "live.h"
#include "helpers.h"

/* the trace of process pid running exe, in the scratch directory */
static void tw_open(pl_test_tw_t *t, const char *name, uint32_t pid, const char *exe) {
    pl_rec_process_t proc = {.pid = pid, .exe = exe, .host_mem_bytes = 16ull << 30, .rank = -1,
                             .cgroup_max_bytes = PL_TRACE_NA};
    pl_test_tw_open(t, name, pid, &proc);
}

static uint64_t size_of(const char *path) {
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (uint64_t)sb.st_size;
}

static pl_live_status_t poll_status(pl_live_t *l) {
    assert_int_equal(pl_live_poll(l), 0);
    pl_live_status_t s;
    assert_int_equal(pl_live_status(l, &s), 0);
    char line[512];
    pl_live_format(&s, line, sizeof line);
    printf("  %s\n", line);
    return s;
}

static void test_live_warmup_then_plateau_then_leak(void **state) {
    (void)state;
    pl_live_t *l = pl_live_open(pl_test_dir, NULL);
    assert_non_null(l);
    pl_live_status_t s = poll_status(l);
    assert_false(s.have_proc);

    pl_test_tw_t t;
    tw_open(&t, "1.pltrace", 100, "/usr/bin/trainer");
    pl_test_tw_steps(&t, 60, 10e6, 1e6); /* 60 steps of +1 MB: a warmup, or a leak? too early to say */
    s = poll_status(l);
    assert_true(s.have_proc);
    assert_int_equal(s.pid, 100);
    assert_int_equal(s.step, 60);
    assert_int_equal(s.m[PL_LIVE_HEAP].state, PL_LIVE_WARMING);
    assert_int_equal(s.state, PL_LIVE_WARMING);
    assert_int_equal(pl_live_bytes_read(l), size_of(t.path)); /* each byte once */
    assert_false(s.ended);
    assert_int_equal(s.n_alive, 1);

    pl_test_tw_steps(&t, 240, 70e6, 0); /* then flat: it was a warmup */
    s = poll_status(l);
    assert_int_equal(s.step, 300);
    assert_int_equal(s.m[PL_LIVE_HEAP].state, PL_LIVE_FLAT);
    assert_true(s.m[PL_LIVE_HEAP].warmup_steps > 50);
    assert_int_equal(pl_live_bytes_read(l), size_of(t.path));

    pl_test_tw_steps(&t, 200, 70e6 - 300 * 256e3, 256e3); /* then it leaks 256 kB/step */
    s = poll_status(l);
    assert_int_equal(s.step, 500);
    assert_int_equal(s.m[PL_LIVE_HEAP].state, PL_LIVE_LEAK);
    assert_int_equal(s.state, PL_LIVE_LEAK);
    assert_int_equal(s.state_metric, PL_LIVE_HEAP);
    assert_true(s.m[PL_LIVE_HEAP].has_oom);
    assert_true(s.m[PL_LIVE_HEAP].per_step > 200e3 && s.m[PL_LIVE_HEAP].per_step < 300e3);
    assert_int_equal(pl_live_bytes_read(l), size_of(t.path));
    char line[512];
    pl_live_format(&s, line, sizeof line);
    assert_non_null(strstr(line, "heap: LEAK +"));
    assert_non_null(strstr(line, "OOM in ~"));

    pl_test_tw_end(&t);
    s = poll_status(l);
    assert_true(s.ended);
    assert_int_equal(s.n_alive, 0);
    pl_live_close(l);
}

/* one census at the current step: its record, then `total_loss` sized at it (its graph grows 8 nodes/step) */
static void census(pl_test_tw_t *t, uint32_t c) {
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    r.type = PL_REC_RETENTION;
    r.t_ns = 2 + t->step * 10000000;
    r.u.retention = (pl_rec_retention_t){.census = c, .step = (uint64_t)t->step, .items = 100, .nodes = 1,
                                         .bytes = 1000, .path = "", .what = "", .kind = "census", .file = "",
                                         .fix = ""};
    pl_test_emit(t->w, &r);
    r.u.retention = (pl_rec_retention_t){.census = c, .step = (uint64_t)t->step, .items = PL_TRACE_NA,
                                         .nodes = 8 * (uint64_t)t->step, .bytes = 4, .line = 17,
                                         .path = "total_loss", .what = "local of train() in main.py",
                                         .kind = "tensor", .file = "/src/main.py", .fix = ""};
    pl_test_emit(t->w, &r);
}

/* The holder the census names joins the line only while the program's memory grows (docs/retention.md). */
static void test_live_holder_named_when_it_leaks(void **state) {
    (void)state;
    pl_live_t *l = pl_live_open(pl_test_dir, NULL);
    assert_non_null(l);
    pl_test_tw_t t;
    tw_open(&t, "9.pltrace", 109, "/usr/bin/python3");
    uint32_t c = 0;
    for (int k = 0; k < 10; k++) { /* flat memory, a growing holder: not said */
        pl_test_tw_steps(&t, 20, 50e6, 0);
        census(&t, ++c);
    }
    assert_int_equal(pl_writer_flush(t.w), 0);
    pl_live_status_t s = poll_status(l);
    assert_int_equal(s.state, PL_LIVE_FLAT);
    assert_string_equal(s.holder, "");
    for (int k = 0; k < 10; k++) { /* then the heap leaks 256 kB/step */
        pl_test_tw_steps(&t, 20, 50e6 - 200 * 256e3, 256e3);
        census(&t, ++c);
    }
    assert_int_equal(pl_writer_flush(t.w), 0);
    s = poll_status(l);
    assert_int_equal(s.state, PL_LIVE_LEAK);
    assert_string_equal(s.holder, "total_loss");
    char line[512];
    pl_live_format(&s, line, sizeof line);
    assert_non_null(strstr(line, "heap: LEAK +"));
    assert_non_null(strstr(line, "  kept by `total_loss`"));
    pl_test_tw_end(&t);
    pl_live_close(l);
}

static void test_live_memory_bounded(void **state) {
    (void)state;
    pl_test_tw_t t;
    tw_open(&t, "2.pltrace", 200, "/usr/bin/trainer");
    pl_live_t *l = pl_live_open(pl_test_dir, NULL);
    size_t held_half = 0;
    for (int round = 0; round < 20; round++) {
        pl_test_tw_steps(&t, 5000, 50e6, 0);
        pl_live_status_t s = poll_status(l);
        assert_int_equal(s.step, (round + 1) * 5000);
        assert_int_equal(s.m[PL_LIVE_HEAP].state, PL_LIVE_FLAT);
        if (round == 9) held_half = pl_live_bytes_held(l);
    }
    /* 100 000 steps (1000 s) hold what 50 000 (500 s) did: at most PL_LIVE_MAX_BINS bins per metric */
    assert_int_equal(pl_live_bytes_held(l), held_half);
    assert_true(pl_live_bytes_held(l) < 64 * 1024);
    assert_int_equal(pl_live_bytes_read(l), size_of(t.path));
    pl_test_tw_end(&t);
    pl_live_close(l);
}

static void test_live_helpers_dropped(void **state) {
    (void)state;
    pl_live_t *l = pl_live_open(pl_test_dir, NULL);
    pl_test_tw_t main_t;
    tw_open(&main_t, "a-main.pltrace", 300, "/usr/bin/python3");
    pl_test_tw_steps(&main_t, 20, 5e6, 0);
    (void)poll_status(l);
    size_t held_one = pl_live_bytes_held(l);
    for (int i = 0; i < 20; i++) { /* short helpers: a periodic heap sample each, no steps, then their end */
        pl_test_tw_t h;
        char name[32];
        snprintf(name, sizeof name, "h%02d.pltrace", i);
        tw_open(&h, name, 400 + (uint32_t)i, "/bin/bash");
        pl_trace_record_t r;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_HEAP;
        r.t_ns = 5;
        r.u.heap.live_bytes = 1000;
        pl_test_emit(h.w, &r);
        pl_test_tw_end(&h);
    }
    pl_live_status_t s = poll_status(l);
    assert_int_equal(s.pid, 300); /* the stepping process is shown */
    assert_int_equal(s.n_alive, 1);
    assert_false(s.ended);
    /* the ended helpers keep only their file entry (the table of files may have grown) */
    assert_true(pl_live_bytes_held(l) <= held_one + 32 * 400);
    pl_test_tw_end(&main_t);
    s = poll_status(l);
    assert_true(s.ended);
    pl_live_close(l);
}

/* The run's traces are the ones the report reads (tracer/read/rundir.c): a FIFO named *.pltrace is neither opened (that
 * would block) nor counted as a trace of the run; a run.status file ends the run. */
static void test_live_lists_like_the_report(void **state) {
    (void)state;
    char fifo[300], status[300];
    snprintf(fifo, sizeof fifo, "%s/fifo.pltrace", pl_test_dir);
    snprintf(status, sizeof status, "%s/run.status", pl_test_dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pl_live_t *l = pl_live_open(pl_test_dir, NULL);
    pl_test_tw_t t;
    tw_open(&t, "a-main.pltrace", 300, "/usr/bin/python3");
    pl_test_tw_steps(&t, 5, 5e6, 0);
    pl_live_status_t s = poll_status(l);
    assert_int_equal(s.n_files, 1);
    assert_int_equal(s.pid, 300);
    assert_false(s.ended);
    FILE *f = fopen(status, "w");
    assert_non_null(f);
    fputs("pid 300 exit 0\n", f);
    fclose(f);
    s = poll_status(l);
    assert_true(s.ended); /* the command ended, though its trace has no end record yet */
    assert_int_equal(s.n_files, 1);
    pl_test_tw_end(&t);
    pl_live_close(l);
    unlink(fifo);
    unlink(status);
}

/* RSS growing beside a flat live heap: allocator retention, not the program's leak: "rss: grows", program flat */
static void test_live_rss_beside_heap_grows(void **state) {
    (void)state;
    pl_test_tw_t t;
    tw_open(&t, "3.pltrace", 500, "/usr/bin/trainer");
    for (int i = 0; i < 300; i++) {
        pl_trace_record_t r;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_RSS;
        r.t_ns = 1 + (t.step + 1) * 10000000;
        r.u.rss = (pl_rec_rss_t){.step = (uint64_t)t.step + 1, .rss_anon = 100000000 + (uint64_t)t.step * 1000000,
                                 .rss_file = 0, .rss_shmem = 0, .pss = PL_TRACE_NA, .cgroup_current = PL_TRACE_NA,
                                 .device_used = PL_TRACE_NA, .device_total = PL_TRACE_NA};
        pl_test_emit(t.w, &r);
        pl_test_tw_steps(&t, 1, 50e6, 0);
    }
    pl_live_t *l = pl_live_open(pl_test_dir, NULL);
    pl_live_status_t s = poll_status(l);
    assert_int_equal(s.m[PL_LIVE_HEAP].state, PL_LIVE_FLAT);
    assert_int_equal(s.m[PL_LIVE_RSS].state, PL_LIVE_LEAK);
    assert_false(s.m[PL_LIVE_RSS].program);
    assert_int_equal(s.state, PL_LIVE_FLAT);
    char line[512];
    pl_live_format(&s, line, sizeof line);
    assert_non_null(strstr(line, "rss: grows +"));
    assert_null(strstr(line, "LEAK"));
    pl_test_tw_end(&t);
    pl_live_close(l);
}

/* Seed 003: memory grew ~170 MB per 10 steps until step ~85, then stayed flat; the run was killed at step 70 as a
 * "leak". Live, step 70 is "warming up" (never LEAK or suspected), and after the plateau it is "flat". */
static void test_live_seed003_step70_is_warming_up(void **state) {
    (void)state;
    pl_test_tw_t t;
    tw_open(&t, "4.pltrace", 600, "/usr/bin/python3");
    pl_live_t *l = pl_live_open(pl_test_dir, NULL);
    for (int k = 0; k < 7; k++) {
        pl_test_tw_steps(&t, 10, 5.5e9, 170e6);
        pl_live_status_t s = poll_status(l);
        assert_int_equal(s.step, 10 * (k + 1));
        assert_int_equal(s.m[PL_LIVE_HEAP].state, PL_LIVE_WARMING);
        assert_int_equal(s.state, PL_LIVE_WARMING);
    }
    pl_test_tw_steps(&t, 15, 5.5e9, 170e6); /* to step 85 */
    pl_test_tw_steps(&t, 155, 5.5e9 + 85 * 170e6, 0); /* then flat to step 240 */
    pl_live_status_t s = poll_status(l);
    assert_int_equal(s.step, 240);
    assert_int_equal(s.m[PL_LIVE_HEAP].state, PL_LIVE_FLAT);
    pl_test_tw_end(&t);
    pl_live_close(l);
}

/* A process without steps is judged by seconds: its line says durations ("~39 s more", "after 12 s of warmup",
 * "OOM ~2.0 min into the run"), never "39 more ss" or "OOM at s 120". */
static void test_live_format_by_time_units(void **state) {
    (void)state;
    pl_live_status_t s;
    memset(&s, 0, sizeof s);
    s.have_proc = true;
    s.pid = 7;
    snprintf(s.name, sizeof s.name, "spin");
    s.by_time = true;
    s.rss_bytes = s.dev_bytes = NAN;
    s.m[PL_LIVE_HEAP] = (pl_live_mstatus_t){.present = true, .program = true, .state = PL_LIVE_WARMING,
                                            .more_steps = 39, .oom_seconds = NAN};
    char line[512];
    pl_live_format(&s, line, sizeof line);
    assert_null(strstr(line, "ss)"));
    assert_non_null(strstr(line, "(~39 s more)"));
    s.m[PL_LIVE_HEAP].state = PL_LIVE_FLAT;
    s.m[PL_LIVE_HEAP].warmup_steps = 12;
    pl_live_format(&s, line, sizeof line);
    assert_non_null(strstr(line, "after 12 s of warmup"));
    s.m[PL_LIVE_HEAP].state = PL_LIVE_LEAK;
    s.m[PL_LIVE_HEAP].per_step = 1024;
    s.m[PL_LIVE_HEAP].has_oom = true;
    s.m[PL_LIVE_HEAP].oom_step = 120;
    pl_live_format(&s, line, sizeof line);
    assert_null(strstr(line, "OOM at s"));
    assert_non_null(strstr(line, "OOM ~"));
    s.by_time = false; /* with steps: step words */
    s.m[PL_LIVE_HEAP].state = PL_LIVE_WARMING;
    s.m[PL_LIVE_HEAP].more_steps = 1;
    pl_live_format(&s, line, sizeof line);
    assert_non_null(strstr(line, "(1 more step)"));
}

/* The line says what the report's verdict says, in its order: who, the program's state on the metric that decided it
 * (here dev, not the first metric) with its rate and OOM, and the holder; then the step and the memory; then the
 * other metrics. */
static void test_live_format_verdict_first(void **state) {
    (void)state;
    pl_live_status_t s;
    memset(&s, 0, sizeof s);
    s.have_proc = true;
    s.pid = 12;
    snprintf(s.name, sizeof s.name, "python3 train.py");
    s.step = 140;
    s.steps_per_s = 12.5;
    s.rss_bytes = 1.2 * 1073741824.0;
    s.dev_bytes = 3.4 * 1073741824.0;
    s.m[PL_LIVE_HEAP] = (pl_live_mstatus_t){.present = true, .program = true, .state = PL_LIVE_FLAT,
                                            .oom_seconds = NAN};
    s.m[PL_LIVE_RSS] = (pl_live_mstatus_t){.present = true, .program = false, .state = PL_LIVE_LEAK,
                                           .per_step = 61542, .oom_seconds = NAN};
    s.m[PL_LIVE_DEV] = (pl_live_mstatus_t){.present = true, .program = true, .state = PL_LIVE_LEAK,
                                           .per_step = 65536, .has_oom = true, .oom_step = 9000,
                                           .oom_seconds = 7920};
    s.state = PL_LIVE_LEAK;
    s.state_metric = PL_LIVE_DEV;
    snprintf(s.holder, sizeof s.holder, "total_loss");
    char line[512];
    pl_live_format(&s, line, sizeof line);
    print_message("%s\n", line);
    assert_string_equal(line, "pid 12 python3 train.py  dev: LEAK +64.0 KiB/step, OOM in ~2.2 h  kept by `total_loss`"
                              "  step 140 (12.5/s)  rss 1.20 GiB  dev 3.40 GiB  heap: flat  rss: grows +60.1 KiB/step");
    s.state_metric = -1; /* nothing decided: the metrics in their order after the context */
    s.holder[0] = 0;
    pl_live_format(&s, line, sizeof line);
    assert_true(strstr(line, "  step 140") < strstr(line, "heap: flat"));
    assert_true(strstr(line, "heap: flat") < strstr(line, "dev: LEAK"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_format_verdict_first),
        cmocka_unit_test_setup_teardown(test_live_holder_named_when_it_leaks, pl_test_dir_setup, pl_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_live_warmup_then_plateau_then_leak, pl_test_dir_setup, pl_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_live_memory_bounded, pl_test_dir_setup, pl_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_live_helpers_dropped, pl_test_dir_setup, pl_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_live_rss_beside_heap_grows, pl_test_dir_setup, pl_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_live_lists_like_the_report, pl_test_dir_setup, pl_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_live_seed003_step70_is_warming_up, pl_test_dir_setup, pl_test_dir_teardown),
        cmocka_unit_test(test_live_format_by_time_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
