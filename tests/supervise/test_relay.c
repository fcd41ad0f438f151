/* supervise/relay.c: which signals reach the command through plateau (docs/env.md, "Signals"): only one sent by
 * another process to plateau alone, or to the group once the command has left it; and the relay itself: a command
 * that ends is reaped with its status, a signal sent to plateau alone reaches it once, the watcher is ended before
 * the command is reaped. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervise.h"

static void test_relay_forwards(void **state) {
    (void)state;
    /* user, ours, group, child_in_group */
    assert_true(pl_relay_forwards(true, false, false, true));   /* kill PLATEAU_PID: the command would not get it */
    assert_false(pl_relay_forwards(false, false, false, true)); /* the kernel's (tty, our SIGPIPE): it got its own */
    assert_false(pl_relay_forwards(true, true, false, true));   /* sent by plateau or by the command itself */
    assert_false(pl_relay_forwards(true, false, true, true));   /* kill -- -PGID: it got it already */
    assert_true(pl_relay_forwards(true, false, true, false));   /* to the group, the command has left it */
}

static void test_relay_exit_status(void **state) {
    (void)state;
    pl_relay_t r;
    pl_relay_open(&r);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pl_relay_child_restore(&r);
        _exit(7);
    }
    r.child = pid;
    pid_t watcher = 0;
    int status = -1, watcher_status = 0;
    const char *failed = NULL;
    assert_int_equal(pl_relay_wait(&r, &watcher, &status, &watcher_status, &failed), 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 7);
    pl_relay_close(&r);
    sigprocmask(SIG_SETMASK, &r.old_mask, NULL);
}

/* The command: waits for SIGUSR1 (its mask restored: it is not blocked there), then exits 20 + how many it got. */
static volatile sig_atomic_t got;
static void on_usr1(int sig) { (void)sig; got++; }

static void test_relay_forwards_signal_to_plateau_alone(void **state) {
    (void)state;
    pl_relay_t r;
    pl_relay_open(&r);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGUSR1, on_usr1);
        pl_relay_child_restore(&r);
        close(ready[0]);
        if (write(ready[1], "x", 1) != 1) _exit(1);
        while (!got) pause();
        usleep(200 * 1000); /* a second, wrong relay would arrive meanwhile */
        _exit(20 + got);
    }
    r.child = pid;
    close(ready[1]);
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    /* sent to plateau alone, by another process (a fork of ours that is neither plateau nor the command) */
    pid_t sender = fork();
    assert_true(sender >= 0);
    if (sender == 0) {
        kill(getppid(), SIGUSR1);
        _exit(0);
    }
    pid_t watcher = 0;
    int status = -1, watcher_status = 0;
    const char *failed = NULL;
    assert_int_equal(pl_relay_wait(&r, &watcher, &status, &watcher_status, &failed), 0);
    waitpid(sender, NULL, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 21);
    pl_relay_close(&r);
    sigprocmask(SIG_SETMASK, &r.old_mask, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay_forwards),
        cmocka_unit_test(test_relay_exit_status),
        cmocka_unit_test(test_relay_forwards_signal_to_plateau_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
