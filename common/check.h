/* common/check: the fail-fast check of programs (benchmarks, demos, test targets): when expr is false, print
 * "<program>: <expr> failed at <file>:<line>[: <hint>]" (and errno's text when errno is not 0: the last error,
 * maybe an older one) on stderr and exit; PL_CHECK_RC for calls that return a status code.
 * Libraries never use it: they return errors (docs/ARCHITECTURE.md, "Rules"). Header-only. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The exit status of a failed check; a program that needs another one defines it before including this header. */
#ifndef PL_CHECK_EXIT
#define PL_CHECK_EXIT 1
#endif

__attribute__((noreturn, unused)) static void pl_check_fail(const char *expr, const char *file, int line,
                                                           const char *hint) {
    int e = errno;
    fprintf(stderr, "%s: %s failed at %s:%d%s%s", program_invocation_short_name, expr, file, line, hint ? ": " : "",
            hint ? hint : "");
    if (e) fprintf(stderr, " (errno: %s)", strerror(e));
    fputc('\n', stderr);
    exit(PL_CHECK_EXIT);
}

__attribute__((noreturn, unused)) static void pl_check_fail_rc(const char *call, long long rc, const char *file,
                                                              int line) {
    fprintf(stderr, "%s: %s returned %lld at %s:%d\n", program_invocation_short_name, call, rc, file, line);
    exit(PL_CHECK_EXIT);
}

/* PL_CHECK(expr) or PL_CHECK(expr, "hint") */
#define PL_CHECK(...) PL_CHECK_PICK(__VA_ARGS__, PL_CHECK_HINT, PL_CHECK_BARE, unused)(__VA_ARGS__)
#define PL_CHECK_PICK(a, b, name, ...) name
#define PL_CHECK_BARE(expr) PL_CHECK_HINT(expr, NULL)
#define PL_CHECK_HINT(expr, hint)                                     \
    do {                                                              \
        if (!(expr)) pl_check_fail(#expr, __FILE__, __LINE__, hint); \
    } while (0)

/* PL_CHECK_RC(call): call returns a status, 0 on success (the CUDA runtime and driver, pthread_*): any other
 * status prints "<program>: <call> returned <status> at <file>:<line>" and exits. The status is the API's own code,
 * not errno, so no errno text follows. */
#define PL_CHECK_RC(call)                                                                \
    do {                                                                                 \
        long long pl_check_rc_ = (long long)(call);                                      \
        if (pl_check_rc_) pl_check_fail_rc(#call, pl_check_rc_, __FILE__, __LINE__);     \
    } while (0)
