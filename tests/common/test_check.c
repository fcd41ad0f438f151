/* common/check: a failed PL_CHECK names the expression, where, the hint and errno, and exits with PL_CHECK_EXIT;
 * a failed PL_CHECK_RC names the call and the status it returned; a passing one does nothing. Each check runs in a child whose stderr comes back through a pipe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PL_CHECK_EXIT 7
#include "check.h"

/* Runs fn in a child; its stderr into err (NUL-terminated), its exit status returned (-1: not a normal exit). */
static int in_child(void (*fn)(void), char *err, size_t err_len) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < err_len && (r = read(fds[0], err + n, err_len - 1 - n)) > 0) n += (size_t)r;
    err[n] = 0;
    close(fds[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int x = 2;

static void passes(void) {
    PL_CHECK(x == 2);
    PL_CHECK(x > 1, "never printed");
}

/* each check and the line it sits on */
static void fails_bare(void) { errno = 0; PL_CHECK(x == 3); } enum { BARE_LINE = __LINE__ };
static void fails_hint(void) { errno = ENOENT; PL_CHECK(x + 1 == 4, "off by one"); } enum { HINT_LINE = __LINE__ };

static int status_of(int rc) { return rc; }
static void passes_rc(void) { PL_CHECK_RC(status_of(0)); }
static void fails_rc(void) { errno = ENOENT; PL_CHECK_RC(status_of(x - 300)); } enum { RC_LINE = __LINE__ };

static void test_check_pass(void **state) {
    (void)state;
    char err[512];
    assert_int_equal(in_child(passes, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(in_child(passes_rc, err, sizeof err), 0);
    assert_string_equal(err, "");
}

/* a status code is printed as the call returned it, without errno's text (it is not errno) */
static void test_check_rc(void **state) {
    (void)state;
    char err[512], want[512];
    assert_int_equal(in_child(fails_rc, err, sizeof err), 7);
    snprintf(want, sizeof want, "%s: status_of(x - 300) returned -298 at %s:%d\n", program_invocation_short_name,
             __FILE__, RC_LINE);
    assert_string_equal(err, want);
}

static void test_check_fail(void **state) {
    (void)state;
    char err[512], want[512];
    assert_int_equal(in_child(fails_bare, err, sizeof err), 7);
    snprintf(want, sizeof want, "%s: x == 3 failed at %s:%d\n", program_invocation_short_name, __FILE__, BARE_LINE);
    assert_string_equal(err, want);
    assert_int_equal(in_child(fails_hint, err, sizeof err), 7);
    snprintf(want, sizeof want, "%s: x + 1 == 4 failed at %s:%d: off by one (errno: %s)\n",
             program_invocation_short_name, __FILE__, HINT_LINE, strerror(ENOENT));
    assert_string_equal(err, want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_pass),
        cmocka_unit_test(test_check_fail),
        cmocka_unit_test(test_check_rc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
