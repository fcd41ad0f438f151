/* supervise/run_status.c: the line DIR/run.status gets (exit, signal, the OOM killer's counts where readable), appended
 * run after run; a FIFO or a link planted under its name is never written (and never blocks). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervise.h"
#include "../common/tmpdir.h"

static char dir[256];

static int setup(void **state) {
    (void)state;
    return pl_test_tmpdir_make(dir, sizeof dir, "runstatus");
}

static int teardown(void **state) {
    (void)state;
    return pl_test_tmpdir_remove(dir);
}

#define EXITED(n) ((n) << 8)   /* a wait status: exited with n */
#define KILLED(sig) (sig)      /* a wait status: killed by sig */

static void test_run_status_line(void **state) {
    (void)state;
    char line[160];
    pl_oom_counts_t unknown = {-1, -1}, before = {2, 40}, after = {3, 41};
    pl_run_status_line(line, sizeof line, 42, EXITED(7), unknown, after);
    assert_string_equal(line, "pid 42 exit 7\n");
    int n = pl_run_status_line(line, sizeof line, 42, KILLED(SIGKILL), before, after);
    assert_string_equal(line, "pid 42 signal 9 oom_kill 1 host_oom_kill 1\n");
    assert_int_equal(n, (int)strlen(line));
    pl_oom_counts_t host_only = {-1, 40};
    pl_run_status_line(line, sizeof line, 5, EXITED(0), host_only, after);
    assert_string_equal(line, "pid 5 exit 0 host_oom_kill 1\n");
    pl_oom_counts_t went_back = {3, 41}; /* a counter that went down (a new cgroup) says nothing */
    pl_run_status_line(line, sizeof line, 5, EXITED(0), went_back, before);
    assert_string_equal(line, "pid 5 exit 0\n");
}

static void read_file(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = 0;
    fclose(f);
}

static void test_run_status_appends(void **state) {
    (void)state;
    char path[400], text[400];
    snprintf(path, sizeof path, "%s/run.status", dir);
    unlink(path);
    pl_oom_counts_t unknown = {-1, -1};
    assert_int_equal(pl_run_status_write(dir, 11, EXITED(1), unknown), 0);
    assert_int_equal(pl_run_status_write(dir, 12, KILLED(SIGTERM), unknown), 0);
    read_file(path, text, sizeof text);
    assert_string_equal(text, "pid 11 exit 1\npid 12 signal 15\n");
    unlink(path);
}

static void test_run_status_refuses_fifo_and_link(void **state) {
    (void)state;
    char path[400], target[400];
    snprintf(path, sizeof path, "%s/run.status", dir);
    snprintf(target, sizeof target, "%s/elsewhere", dir);
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
    pl_oom_counts_t unknown = {-1, -1};
    assert_int_equal(pl_run_status_write(dir, 11, EXITED(0), unknown), -EINVAL); /* and it did not block */
    unlink(path);
    assert_int_equal(symlink(target, path), 0);
    assert_int_equal(pl_run_status_write(dir, 11, EXITED(0), unknown), -EINVAL);
    assert_int_equal(access(target, F_OK), -1); /* nothing written through the link */
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_status_line),
        cmocka_unit_test(test_run_status_appends),
        cmocka_unit_test(test_run_status_refuses_fifo_and_link),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
