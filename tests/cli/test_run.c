/* Integration: `plateau run` end to end. Runs the built plateau (finding the preload next to itself, no
 * PLATEAU_PRELOAD) on target programs; checks options reach the trace, the exit status is the command's,
 * SIGTERM sent to plateau is forwarded, --host-allocator jemalloc puts the program on jemalloc, and bad
 * arguments fail with status 2. Env (set by meson): PL_PLATEAU, PL_TARGETS. */
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "../preload/trace_summary.h"
#include "../common/spawn.h"
#include "../common/tmpdir.h"

static const char *plateau, *targets;
static char dir[256];
static char out_buf[8192], err_buf[8192];

static int setup(void **state) {
    (void)state;
    return pl_test_tmpdir_make(dir, sizeof dir, "run");
}

static int teardown(void **state) {
    (void)state;
    return pl_test_tmpdir_remove(dir);
}


static void child_env(void *ctx) {
    (void)ctx;
    unsetenv("PLATEAU_PRELOAD");
    unsetenv("LD_PRELOAD");
}

static pid_t start(char *const argv[], int *o, int *e) {
    pid_t pid = pl_test_spawn(argv, child_env, NULL, o, e);
    assert_true(pid > 0);
    return pid;
}

static int finish(pid_t pid, int o, int e) {
    int rc = pl_test_finish(pid, o, e, out_buf, sizeof out_buf, err_buf, sizeof err_buf);
    assert_true(rc >= 0);
    return rc;
}

static int run(char *const argv[]) {
    int o, e;
    pid_t pid = start(argv, &o, &e);
    return finish(pid, o, e);
}

static int traces_in(const char *d, char paths[][600], int max) {
    DIR *dd = opendir(d);
    if (!dd) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dd)) && n < max)
        if (strstr(e->d_name, ".pltrace")) snprintf(paths[n++], 600, "%s/%s", d, e->d_name);
    closedir(dd);
    return n;
}

static void test_run_options_reach_the_trace(void **state) {
    (void)state;
    char out[300], target[300];
    snprintf(out, sizeof out, "%s/a/b", dir); /* nested: created by plateau run */
    snprintf(target, sizeof target, "%s/target_leak", targets);
    char *argv[] = {(char *)plateau, "run", "-o", out, "--sample-bytes", "0", "--interval-ms", "20", "--",
                    target, "5", NULL};
    assert_int_equal(run(argv), 0);
    assert_non_null(strstr(out_buf, "leaked 80 blocks"));
    /* The report summary follows the command's own output (plateau report is built into plateau). */
    assert_non_null(strstr(out_buf, "plateau report:"));
    assert_true(strstr(out_buf, "plateau report:") > strstr(out_buf, "leaked 80 blocks"));
    assert_non_null(strstr(err_buf, "1 trace file in"));
    assert_non_null(strstr(err_buf, "/a/b"));
    char paths[4][600];
    assert_int_equal(traces_in(out, paths, 4), 1);
    static summary_t s;
    summarize(paths[0], "leak_function", &s);
    assert_int_equal(s.rc, 0);
    assert_int_equal(s.sample_bytes, 0);
    assert_int_equal(s.n_steps, 5);
    assert_true(s.n_sym_stacks >= 1);
    assert_true(s.has_end);
}

/* --sample-bytes reads the one size grammar (common/units.h): 1GB is 10^9 bytes, 2g is 2 GiB. */
static void test_run_sample_bytes_units(void **state) {
    (void)state;
    const struct {
        const char *arg;
        uint64_t want;
    } cases[] = {{"1GB", 1000000000ull}, {"2g", 2ull << 30}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[300], target[300];
        snprintf(out, sizeof out, "%s/units%zu", dir, i);
        snprintf(target, sizeof target, "%s/target_leak", targets);
        char *argv[] = {(char *)plateau, "run", "-o", out, "--sample-bytes", (char *)cases[i].arg, "--",
                        target, "1", NULL};
        assert_int_equal(run(argv), 0);
        char paths[4][600];
        assert_int_equal(traces_in(out, paths, 4), 1);
        static summary_t s;
        summarize(paths[0], "leak_function", &s);
        assert_int_equal(s.rc, 0);
        assert_true(s.sample_bytes == cases[i].want);
    }
}

static void test_run_returns_the_command_status(void **state) {
    (void)state;
    char out[300];
    snprintf(out, sizeof out, "%s/status", dir);
    char *argv[] = {(char *)plateau, "run", "-o", out, "--", "/bin/sh", "-c", "exit 7", NULL};
    assert_int_equal(run(argv), 7); /* the report printed after it does not change the status */
    assert_non_null(strstr(out_buf, "plateau report:"));
    char *quiet[] = {(char *)plateau, "run", "-o", out, "--append", "--no-report", "--", "/bin/sh", "-c", "exit 0",
                     NULL};
    assert_int_equal(run(quiet), 0);
    assert_null(strstr(out_buf, "plateau report:"));
    char *missing[] = {(char *)plateau, "run", "-o", out, "--append", "--no-report", "--", "/nonexistent/program",
                       NULL};
    assert_int_equal(run(missing), 127);
}

static void test_run_forwards_sigterm(void **state) {
    (void)state;
    char out[300], target[300];
    snprintf(out, sizeof out, "%s/term", dir);
    snprintf(target, sizeof target, "%s/target_spin", targets);
    char *argv[] = {(char *)plateau, "run", "-o", out, "--", target, "10", NULL};
    int o, e;
    pid_t pid = start(argv, &o, &e);
    char line[16] = {0};
    assert_true(read(o, line, sizeof line - 1) > 0); /* "ready": the traced program runs */
    kill(pid, SIGTERM);
    assert_int_equal(finish(pid, o, e), 128 + SIGTERM);
    assert_non_null(strstr(err_buf, "killed by signal 15"));
    char paths[2][600];
    assert_int_equal(traces_in(out, paths, 2), 1);
}

static void test_run_host_allocator_jemalloc(void **state) {
    (void)state;
    if (access(PL_JEMALLOC_PATH, R_OK) != 0) skip(); /* config.h: "" when the build found none */
    char out[300];
    snprintf(out, sizeof out, "%s/je", dir);
    char *argv[] = {(char *)plateau, "run", "-o", out, "--host-allocator", "jemalloc", "--", "/bin/sh", "-c",
                    "grep -c libjemalloc /proc/$$/maps", NULL};
    assert_int_equal(run(argv), 0);
    assert_true(atoi(out_buf) >= 1);
    char *glibc[] = {(char *)plateau, "run", "-o", out, "--append", "--", "/bin/sh", "-c",
                     "grep -c libjemalloc /proc/$$/maps", NULL};
    assert_int_equal(run(glibc), 1); /* grep -c finds nothing: exit 1 */
}

/* The first record (process_start) of the trace whose rank is `rank`, in d; false when none has it. */
static bool find_rank(const char *d, int32_t rank, int32_t *local_rank, char *node, size_t node_size) {
    char paths[8][600];
    int n = traces_in(d, paths, 8);
    for (int i = 0; i < n; i++) {
        pl_trace_reader_t *r;
        if (pl_trace_open(paths[i], &r)) continue;
        pl_trace_record_t rec;
        bool hit = pl_trace_next(r, &rec) > 0 && rec.type == PL_REC_PROCESS_START && rec.u.process.rank == rank;
        if (hit) {
            *local_rank = rec.u.process.local_rank;
            snprintf(node, node_size, "%s", rec.u.process.node);
        }
        pl_trace_close(r);
        if (hit) return true;
    }
    return false;
}

/* issue 15: a rank's process_start carries its rank and local rank (torchrun's, Open MPI's, Slurm's and MPICH's
 * variables) and the host name (trace 1.7). */
static void test_run_rank_and_node(void **state) {
    (void)state;
    char host[64] = "";
    assert_int_equal(gethostname(host, sizeof host - 1), 0);
    static const struct { const char *env; int32_t rank, local_rank; } cases[] = {
        {"RANK=3 LOCAL_RANK=1", 3, 1}, {"OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_LOCAL_RANK=2", 5, 2},
        {"SLURM_PROCID=6 SLURM_LOCALID=3", 6, 3}, {"PMI_RANK=7 MPI_LOCALRANKID=0", 7, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[300], cmd[200];
        snprintf(out, sizeof out, "%s/rank%zu", dir, i);
        snprintf(cmd, sizeof cmd, "%s exec /bin/true", cases[i].env);
        char *argv[] = {(char *)plateau, "run", "--no-report", "-o", out, "--", "/bin/sh", "-c", cmd, NULL};
        assert_int_equal(run(argv), 0);
        int32_t local_rank = -9;
        char node[64] = "";
        assert_true(find_rank(out, cases[i].rank, &local_rank, node, sizeof node));
        assert_int_equal(local_rank, cases[i].local_rank);
        assert_string_equal(node, host);
    }
}

static void test_run_bad_arguments(void **state) {
    (void)state;
    char *none[] = {(char *)plateau, "run", NULL};
    assert_int_equal(run(none), 2);
    assert_non_null(strstr(err_buf, "no command given"));
    char *alloc[] = {(char *)plateau, "run", "--host-allocator", "tcmalloc", "--", "true", NULL};
    assert_int_equal(run(alloc), 2);
    assert_non_null(strstr(err_buf, "tcmalloc"));
    char *bytes[] = {(char *)plateau, "run", "--sample-bytes", "lots", "--", "true", NULL};
    assert_int_equal(run(bytes), 2);
    char *interval[] = {(char *)plateau, "run", "--interval-ms", "0", "--", "true", NULL};
    assert_int_equal(run(interval), 2);
    char *unknown[] = {(char *)plateau, "run", "--frobnicate", "--", "true", NULL};
    assert_int_equal(run(unknown), 2);
}

int main(void) {
    plateau = getenv("PL_PLATEAU");
    targets = getenv("PL_TARGETS");
    if (!plateau || !targets) {
        fprintf(stderr, "PL_PLATEAU and PL_TARGETS must be set\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_options_reach_the_trace),
        cmocka_unit_test(test_run_sample_bytes_units),
        cmocka_unit_test(test_run_returns_the_command_status),
        cmocka_unit_test(test_run_forwards_sigterm),
        cmocka_unit_test(test_run_host_allocator_jemalloc),
        cmocka_unit_test(test_run_rank_and_node),
        cmocka_unit_test(test_run_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
