/* reports.ending: how a process ended (reports/ending.c, docs/end-of-run.md), from run.status and the trace.
 *
 * A run directory holding a synthetic trace (tests/cli/test_report_synth.h) that leaks 256 KiB per step and has no
 * end record, with the run.status lines plateau run writes: a SIGKILL is "the OOM killer" only when an OOM kill was
 * counted (in the run's cgroup, or on the host when the cgroup could not be read), kill -9 otherwise, a line from an
 * older plateau (no counts) says neither; a crash is a crash; no status is "no end record"; a killed child without a
 * status of its own takes the run's OOM count; a clean exit with a status says it. What was live at the last record
 * and what grew in the last 10 steps are the leak's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../cli/test_report_synth.h"
#include "analyze.h"
#include "helpers.h"
#include "end.h"
#include "ending.h"
#include "extract.h"
#include "render.h"
#include "render_html.h"

static int g_n;

/* A fresh run directory: the trainer (pid 4242, no end record unless clean), optionally a child (pid 4243, no end
 * record), and run.status holding `status` (NULL: none). Read and analysed into run. */
static void make_run(pl_run_t *run, bool clean, bool child, const char *status) {
    char d[256], p[300];
    snprintf(d, sizeof d, "%s/run%d", pl_test_dir, g_n++);
    assert_int_equal(mkdir(d, 0700), 0);
    snprintf(p, sizeof p, "%s/4242.0.pltrace", d);
    synth_cfg_t c = synth_default();
    c.clean_end = clean;
    assert_int_equal(synth_trace(p, &c), 0);
    if (child) {
        snprintf(p, sizeof p, "%s/4243.0.pltrace", d);
        c.pid = 4243;
        c.ppid = 4242;
        c.with_steps = false;
        c.clean_end = false;
        assert_int_equal(synth_trace(p, &c), 0);
    }
    if (status) {
        snprintf(p, sizeof p, "%s/run.status", d);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs(status, f);
        fclose(f);
    }
    assert_int_equal(pl_run_create(run, d), 0);
    assert_int_equal(pl_extract_path(run->report, run->ext, d, NULL), 0);
    assert_int_equal(pl_run_analyze(run), 0);
}

static const pl_extract_proc_t *proc(const pl_run_t *run, uint32_t pid) {
    for (size_t i = 0; i < run->ext->n_procs; i++)
        if (run->ext->procs[i].pid == pid) return &run->ext->procs[i];
    fail_msg("no pid %u", pid);
    return NULL;
}

static pl_end_t end_of(const pl_run_t *run, uint32_t pid) {
    pl_end_t e;
    pl_end_of(run->ext, proc(run, pid), &e);
    return e;
}

static void test_ending_sigkill_with_and_without_oom_kill(void **state) {
    (void)state;
    pl_run_t run;
    make_run(&run, false, false, "pid 4242 signal 9 oom_kill 1 host_oom_kill 1\n");
    pl_end_t e = end_of(&run, 4242);
    assert_int_equal(e.kind, PL_END_OOM_KILL);
    assert_int_equal(e.oom_kill, 1);
    assert_non_null(strstr(e.line, "killed by SIGKILL while the OOM killer killed 1 process in the run's cgroup "
                                   "(memory.events): out of memory"));
    assert_non_null(strstr(run.report->cut_reason, "; the OOM killer killed 1 process in the run's cgroup while it ran"));
    pl_run_destroy(&run);

    make_run(&run, false, false, "pid 4242 signal 9 oom_kill 0 host_oom_kill 0\n");
    e = end_of(&run, 4242);
    assert_int_equal(e.kind, PL_END_SIGKILL);
    assert_non_null(strstr(e.line, "the kernel counted no OOM kill on this host while it ran"));
    pl_run_destroy(&run);

    /* the cgroup unreadable (no count), the host's counted one */
    make_run(&run, false, false, "pid 4242 signal 9 host_oom_kill 1\n");
    e = end_of(&run, 4242);
    assert_int_equal(e.kind, PL_END_OOM_KILL);
    assert_int_equal(e.oom_kill, -1);
    assert_non_null(strstr(e.line, "the kernel's OOM killer killed 1 process on this host (/proc/vmstat)"));
    pl_run_destroy(&run);

    /* run.status from an older plateau: no counts, so neither OOM nor kill -9 is claimed */
    make_run(&run, false, false, "pid 4242 signal 9\n");
    e = end_of(&run, 4242);
    assert_int_equal(e.kind, PL_END_SIGKILL);
    assert_string_equal(e.line, "killed by SIGKILL: the OOM killer or kill -9");
    pl_run_destroy(&run);
}

static void test_ending_crash_and_no_status(void **state) {
    (void)state;
    pl_run_t run;
    make_run(&run, false, false, "pid 4242 signal 11 oom_kill 0 host_oom_kill 0\n");
    pl_end_t e = end_of(&run, 4242);
    assert_int_equal(e.kind, PL_END_CRASH);
    assert_string_equal(e.line, "crashed: SIGSEGV (signal 11)");
    pl_run_destroy(&run);

    make_run(&run, false, false, NULL);
    e = end_of(&run, 4242);
    assert_int_equal(e.kind, PL_END_NO_RECORD);
    assert_null(strstr(e.line, "out of memory"));
    pl_run_destroy(&run);
}

/* A child killed without a status of its own: the run's OOM count is said, as a count, not as its status. */
static void test_ending_child_takes_the_runs_oom_count(void **state) {
    (void)state;
    pl_run_t run;
    make_run(&run, true, true, "pid 4242 exit 1 oom_kill 2 host_oom_kill 2\n");
    pl_end_t e = end_of(&run, 4243);
    assert_int_equal(e.kind, PL_END_OOM_KILL);
    assert_non_null(strstr(e.line, "killed by a signal (no end record) while the OOM killer killed 2 processes"));
    e = end_of(&run, 4242);
    assert_int_equal(e.kind, PL_END_EXIT_STATUS);
    assert_string_equal(e.line, "exited with status 1");
    pl_run_destroy(&run);

    make_run(&run, true, false, "pid 4242 exit 0 oom_kill 0\n");
    e = end_of(&run, 4242);
    assert_int_equal(e.kind, PL_END_CLEAN);
    assert_null(proc(&run, 4242)->end); /* a clean end is not looked at */
    pl_run_destroy(&run);
}

/* What was live at the last record, what grew in the last 10 steps: the leak's, exactly (every allocation
 * recorded); in the text and JSON. */
static void test_ending_live_and_last_steps(void **state) {
    (void)state;
    pl_run_t run;
    make_run(&run, false, false, "pid 4242 signal 9 oom_kill 1\n");
    const pl_extract_window_t *w = proc(&run, 4242)->end;
    assert_non_null(w);
    assert_int_equal(w->end_step, 160);
    assert_int_equal(w->from_step, 150);
    assert_true(w->n_live >= 1);
    assert_non_null(strstr(w->live[0].frames[0], "leaky_collect"));
    assert_true(w->live[0].live_bytes == 160.0 * 256 * 1024);
    assert_true(w->n_sites >= 1);
    assert_true(w->sites[0].growth_bytes == 10.0 * 256 * 1024);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pl_end_text(&run, f);
    fclose(f);
    assert_non_null(strstr(buf, "end of pid 4242 (python3 train.py): killed by SIGKILL while the OOM killer"));
    assert_non_null(strstr(buf, "live by call site at its last record (sampled; 40.0 MiB in all):\n  1. 40.0 MiB"));
    assert_non_null(strstr(buf, "grew after step 150 (its last 10 steps, sampled; 1 site, +2.50 MiB in all)"));
    free(buf);
    f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_json(&run, f, 0), 0);
    fclose(f);
    assert_non_null(strstr(buf, "\"how\": \"oom-kill\""));
    assert_non_null(strstr(buf, "\"from_step\": 150"));
    free(buf);
    pl_run_destroy(&run);
}

/* The renderers say how a process ended as the analysis judged it, once (pl_run_analyze): a fact changed after the
 * analysis (an uncaught MemoryError recorded now) does not change what the text, the JSON and the HTML say. */
static void test_ending_rendered_as_judged(void **state) {
    (void)state;
    pl_run_t run;
    make_run(&run, false, false, "pid 4242 signal 9 oom_kill 1\n");
    pl_extract_proc_t *p = (pl_extract_proc_t *)proc(&run, 4242);
    snprintf(p->uncaught, sizeof p->uncaught, "MemoryError");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pl_end_text(&run, f);
    fclose(f);
    assert_non_null(strstr(buf, "end of pid 4242 (python3 train.py): killed by SIGKILL while the OOM killer"));
    assert_null(strstr(buf, "uncaught"));
    free(buf);
    f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_json(&run, f, 0), 0);
    fclose(f);
    assert_non_null(strstr(buf, "\"how\": \"oom-kill\""));
    free(buf);
    f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_html(&run, f), 0);
    fclose(f);
    assert_non_null(strstr(buf, "killed by SIGKILL while the OOM killer"));
    assert_null(strstr(buf, "ended by an uncaught MemoryError"));
    free(buf);
    pl_run_destroy(&run);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ending_sigkill_with_and_without_oom_kill),
        cmocka_unit_test(test_ending_crash_and_no_status),
        cmocka_unit_test(test_ending_child_takes_the_runs_oom_count),
        cmocka_unit_test(test_ending_live_and_last_steps),
        cmocka_unit_test(test_ending_rendered_as_judged),
    };
    return cmocka_run_group_tests(tests, pl_test_dir_setup, pl_test_dir_teardown);
}
