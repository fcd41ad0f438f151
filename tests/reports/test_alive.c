/* reports.alive: is the process behind a trace still the one running under its pid (reports/alive.c)? The check
 * that --stop-on-leak makes before it signals a pid (cli/stop.c) and the report makes before "still running".
 * A child of this test stands for the traced process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alive.h"

static int64_t now_realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_alive_same_process_by_start_time_and_exe(void **state) {
    (void)state;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = 0;
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* runs until the test closes the pipe */
        close(fd[1]);
        char c;
        while (read(fd[0], &c, 1) > 0) {
        }
        _exit(0);
    }
    close(fd[0]);
    int64_t trace_start = now_realtime_ns(); /* its trace starts after the process did */
    assert_true(pl_alive_same_process((uint32_t)pid, trace_start, exe));
    assert_true(pl_alive_same_process((uint32_t)pid, trace_start, "")); /* executable unknown: not checked */
    /* a trace that started 10 s before this process: the pid belongs to a later process */
    assert_false(pl_alive_same_process((uint32_t)pid, trace_start - 10000000000LL, exe));
    assert_false(pl_alive_same_process((uint32_t)pid, trace_start, "/usr/bin/some-other-program"));
    assert_false(pl_alive_same_process((uint32_t)pid, 0, exe)); /* start unknown: never "the same" */
    close(fd[1]);
    int st;
    /* a zombie (ended, not reaped yet) is not running */
    for (int i = 0; i < 2000 && pl_alive_same_process((uint32_t)pid, trace_start, exe); i++) usleep(1000);
    assert_false(pl_alive_same_process((uint32_t)pid, trace_start, exe));
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_false(pl_alive_same_process((uint32_t)pid, trace_start, exe));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alive_same_process_by_start_time_and_exe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
