/* supervise/watcher.c: the watcher runs its body niced, with SIGINT ignored (Ctrl-C is the command's), and ends on
 * SIGTERM through the quit hook even when plateau blocked SIGTERM (plateau run relays it); pl_watcher_end gives the
 * body's exit status. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervise.h"

static volatile sig_atomic_t quit;
static void on_quit(int sig) { (void)sig; quit = 1; }
static void quit_on(int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit;
    sigaction(sig, &sa, NULL);
}

static int parent_nice;

/* 7 when it ended by the quit hook, niced by 10, SIGINT ignored; another value says which of those failed */
static int body(void *ctx) {
    int *hup_ignored = ctx;
    while (!quit) pause();
    struct sigaction cur;
    sigaction(SIGINT, NULL, &cur);
    if (cur.sa_handler != SIG_IGN) return 20;
    errno = 0;
    if (getpriority(PRIO_PROCESS, 0) != (parent_nice + 10 > 19 ? 19 : parent_nice + 10)) return 21;
    sigaction(SIGHUP, NULL, &cur);
    if ((cur.sa_handler == SIG_IGN) != *hup_ignored) return 22;
    return 7;
}

static void test_watcher_ends_on_sigterm(void **state) {
    (void)state;
    parent_nice = getpriority(PRIO_PROCESS, 0);
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, &old); /* as plateau run's relay does */
    /* plateau run's watcher keeps the SIGHUP disposition it inherits (under nohup: ignored, as the user asked): the
     * test starts from the default, whatever the test runner inherited */
    struct sigaction dfl, hup_before;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGHUP, &dfl, &hup_before);
    int hup_ignored = 0;
    pl_watcher_t w = {.mask = &old, .quit_on = quit_on, .body = body, .ctx = &hup_ignored};
    pid_t pid = pl_watcher_start(&w);
    assert_true(pid > 0);
    usleep(100 * 1000);
    int status = pl_watcher_end(pid);
    sigaction(SIGHUP, &hup_before, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 7);
}

static void test_watcher_attach_ignores_hup(void **state) {
    (void)state;
    parent_nice = getpriority(PRIO_PROCESS, 0);
    int hup_ignored = 1;
    pl_watcher_t w = {.ignore_hup = true, .quit_on = quit_on, .body = body, .ctx = &hup_ignored};
    pid_t pid = pl_watcher_start(&w);
    assert_true(pid > 0);
    usleep(100 * 1000);
    kill(pid, SIGHUP); /* ignored: it is still there for SIGTERM */
    int status = pl_watcher_end(pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watcher_ends_on_sigterm),
        cmocka_unit_test(test_watcher_attach_ignores_hup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
