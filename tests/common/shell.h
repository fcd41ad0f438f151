/* Run a shell command line from a test and capture what it printed (stdout and stderr together).
 * Header-only (include by relative path). No cmocka here: returns -1 when the shell could not run, callers assert. */
#pragma once

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* printf-style command line; its output (up to len - 1 bytes) in buf, NUL-terminated. Returns the exit status, or
 * -1 when the shell could not be started or the command was killed by a signal. */
__attribute__((format(printf, 3, 4))) static inline int pl_test_shell(char *buf, size_t len, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    buf[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(buf, 1, len - 1, p);
    buf[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
