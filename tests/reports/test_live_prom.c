/* reports/live_prom: the live verdict as a Prometheus textfile. Two ranks of one job (rank 0 leaks, rank 1 is
 * flat) and a helper without steps: one sample set per rank with its verdict (one-hot), step, memory, rate and
 * projected OOM; nothing for the helper; every family once, HELP and TYPE before its samples; label values escaped.
 * The format is also parsed by prometheus_client in python.prometheus (tests/python/test_integrations.py). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "live.h"
#include "live_prom.h"
#include "helpers.h"

/* the trace of rank `rank` (-1: none) of a job on gpu-node-7, its argv[0] argv0, in the scratch directory */
static void tw_open(pl_test_tw_t *t, const char *name, uint32_t pid, const char *argv0, int32_t rank) {
    pl_rec_process_t proc = {.pid = pid, .exe = "/usr/bin/python3", .host_mem_bytes = 16ull << 30, .rank = rank,
                             .local_rank = rank, .cgroup_max_bytes = PL_TRACE_NA, .n_argv = 1, .argc = 1,
                             .node = "gpu-node-7"};
    proc.argv[0] = argv0;
    pl_test_tw_open(t, name, pid, &proc);
}

static char *render(pl_live_t *l) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    assert_int_equal(pl_live_prom_write(l, "/runs/job \"7\"", 1700000000.5, f), 0);
    fclose(f);
    printf("%s", buf);
    return buf;
}

static size_t count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* the value of the one sample line that starts with prefix */
static double sample(const char *text, const char *prefix) {
    assert_int_equal(count(text, prefix), 1);
    const char *p = strstr(text, prefix) + strlen(prefix);
    return strtod(p, NULL);
}

#define LABELS(pid, rank, argv0) \
    "{run=\"/runs/job \\\"7\\\"\",pid=\"" pid "\",rank=\"" rank "\",process=\"" argv0 "\",node=\"gpu-node-7\""

static void test_live_prom_ranks(void **state) {
    (void)state;
    pl_test_tw_t r0, r1, helper;
    tw_open(&r0, "r0.pltrace", 101, "trainer", 0);
    tw_open(&r1, "r1.pltrace", 102, "trainer", 1);
    tw_open(&helper, "h.pltrace", 103, "sh", -1);
    pl_test_tw_end(&helper);
    pl_test_tw_steps(&r0, 400, 10e6, 256e3); /* rank 0 leaks 256 kB/step */
    pl_test_tw_steps(&r1, 400, 10e6, 0);     /* rank 1 flat */
    pl_live_t *l = pl_live_open(pl_test_dir, NULL);
    assert_non_null(l);
    assert_int_equal(pl_live_poll(l), 0);
    char *t = render(l);
    /* every family once, HELP then TYPE */
    const char *fams[] = {"plateau_run_ended", "plateau_processes_running", "plateau_last_update_timestamp_seconds",
                          "plateau_verdict", "plateau_step", "plateau_steps_per_second", "plateau_memory_bytes",
                          "plateau_growth_bytes_per_step", "plateau_growth_bytes_per_second", "plateau_oom_seconds",
                          "plateau_oom_step", "plateau_more_steps"};
    for (size_t k = 0; k < sizeof fams / sizeof fams[0]; k++) {
        char help[128], type[128];
        snprintf(help, sizeof help, "# HELP %s ", fams[k]);
        snprintf(type, sizeof type, "# TYPE %s gauge\n", fams[k]);
        assert_int_equal(count(t, help), 1);
        assert_int_equal(count(t, type), 1);
        assert_true(strstr(t, help) < strstr(t, type));
    }
    assert_int_equal(sample(t, "plateau_run_ended{run=\"/runs/job \\\"7\\\"\"}"), 0);
    assert_int_equal(sample(t, "plateau_processes_running{run=\"/runs/job \\\"7\\\"\"}"), 2);
    /* one-hot verdicts: rank 0 leaks, rank 1 is flat; 7 states each; nothing of the helper */
    assert_int_equal(sample(t, "plateau_verdict" LABELS("101", "0", "trainer") ",state=\"leak\"}"), 1);
    assert_int_equal(sample(t, "plateau_verdict" LABELS("101", "0", "trainer") ",state=\"flat\"}"), 0);
    assert_int_equal(sample(t, "plateau_verdict" LABELS("102", "1", "trainer") ",state=\"flat\"}"), 1);
    assert_int_equal(sample(t, "plateau_verdict" LABELS("102", "1", "trainer") ",state=\"leak\"}"), 0);
    assert_int_equal(count(t, "plateau_verdict{"), 14);
    assert_null(strstr(t, "pid=\"103\""));
    assert_int_equal(sample(t, "plateau_step" LABELS("101", "0", "trainer") "}"), 400);
    double rate = sample(t, "plateau_steps_per_second" LABELS("101", "0", "trainer") "}");
    assert_true(rate > 99 && rate < 101); /* 10 ms steps */
    double per_step = sample(t, "plateau_growth_bytes_per_step" LABELS("101", "0", "trainer") ",metric=\"heap\"}");
    assert_true(per_step > 250e3 && per_step < 262e3);
    double per_s = sample(t, "plateau_growth_bytes_per_second" LABELS("101", "0", "trainer") ",metric=\"heap\"}");
    assert_true(per_s > 0.99 * per_step * rate && per_s < 1.01 * per_step * rate);
    double mem = sample(t, "plateau_memory_bytes" LABELS("101", "0", "trainer") ",metric=\"heap\"}");
    assert_true(mem == 10e6 + 400 * 256e3);
    /* the OOM against the 16 GiB host: (16 GiB - 112.4 MB) / 256 kB/step more steps, at 100 steps/s */
    double oom_step = sample(t, "plateau_oom_step" LABELS("101", "0", "trainer") ",metric=\"heap\"}");
    double oom_s = sample(t, "plateau_oom_seconds" LABELS("101", "0", "trainer") ",metric=\"heap\"}");
    double want_step = 400 + ((double)(16ull << 30) - mem) / per_step;
    assert_true(oom_step > 0.95 * want_step && oom_step < 1.05 * want_step);
    assert_true(oom_s > 0.9 * (oom_step - 400) / rate && oom_s < 1.1 * (oom_step - 400) / rate);
    /* a flat rank has no OOM */
    assert_null(strstr(t, "plateau_oom_step" LABELS("102", "1", "trainer")));
    assert_null(strstr(t, "plateau_oom_seconds" LABELS("102", "1", "trainer")));
    free(t);

    pl_test_tw_end(&r0);
    pl_test_tw_end(&r1);
    assert_int_equal(pl_live_poll(l), 0);
    t = render(l);
    assert_int_equal(sample(t, "plateau_run_ended{run=\"/runs/job \\\"7\\\"\"}"), 1);
    assert_int_equal(sample(t, "plateau_processes_running{run=\"/runs/job \\\"7\\\"\"}"), 0);
    assert_int_equal(sample(t, "plateau_verdict" LABELS("101", "0", "trainer") ",state=\"leak\"}"), 1);
    free(t);
    pl_live_close(l);
}

/* warming up: no slope yet, but the steps before a verdict; a name with a newline and invalid UTF-8 escaped */
static void test_live_prom_warming_and_escapes(void **state) {
    (void)state;
    pl_test_tw_t a;
    tw_open(&a, "a.pltrace", 201, "we\\ird\nname\xff", -1);
    pl_test_tw_steps(&a, 30, 10e6, 1e6);
    pl_live_t *l = pl_live_open(pl_test_dir, NULL);
    assert_int_equal(pl_live_poll(l), 0);
    char *t = render(l);
    const char *lab = "{run=\"/runs/job \\\"7\\\"\",pid=\"201\",rank=\"\",process=\"we\\\\ird\\nname";
    assert_non_null(strstr(t, lab));
    assert_null(strstr(t, "\xff"));
    char want[512];
    snprintf(want, sizeof want, "plateau_verdict%s", lab);
    assert_int_equal(count(t, want), 7);
    assert_null(strstr(t, "plateau_growth_bytes_per_step{")); /* no tail judged while warming up */
    assert_non_null(strstr(t, "plateau_more_steps{"));
    assert_non_null(strstr(t, "state=\"warming_up\"} 1\n"));
    free(t);
    pl_test_tw_end(&a);
    pl_live_close(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_live_prom_ranks, pl_test_dir_setup, pl_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_live_prom_warming_and_escapes, pl_test_dir_setup, pl_test_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
