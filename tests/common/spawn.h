/* Run a program from a test with its stdout and stderr on pipes: start it, read what it wrote, wait for it.
 * Header-only (include by relative path). No cmocka here: functions return -1 on failure, callers assert. */
#pragma once

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs in the child between fork and exec (environment, limits). */
typedef void (*pl_test_child_fn)(void *ctx);

/* Start argv[0] with argv; *out_fd / *err_fd receive the read ends of its stdout / stderr
 * (-1 on failure). The child gets SIGSEGV
 * back at its default (cmocka installs a handler), then child(ctx) when given. Returns the pid or -1. */
static inline pid_t pl_test_spawn(char *const argv[], pl_test_child_fn child, void *ctx, int *out_fd, int *err_fd) {
    int po[2], pe[2];
    *out_fd = *err_fd = -1;
    if (pipe(po)) return -1;
    if (pipe(pe)) {
        close(po[0]);
        close(po[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        if (child) child(ctx);
        execv(argv[0], argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    if (pid < 0) {
        close(po[0]);
        close(pe[0]);
        return -1;
    }
    *out_fd = po[0];
    *err_fd = pe[0];
    return pid;
}

/* Read fd to end of file into buf (NUL-terminated, at most cap - 1 bytes kept). */
static inline void pl_test_read_all(int fd, char *buf, size_t cap) {
    size_t got = 0;
    ssize_t n;
    while (got < cap - 1 && (n = read(fd, buf + got, cap - 1 - got)) > 0) got += (size_t)n;
    buf[got] = 0;
}

/* Read the child's stdout then stderr (the programs tests run write little), close both, wait. Returns the exit
 * status, 128 + the signal that killed it, or -1 when waiting failed. */
static inline int pl_test_finish(pid_t pid, int out_fd, int err_fd, char *out, size_t out_cap, char *err,
                                 size_t err_cap) {
    pl_test_read_all(out_fd, out, out_cap);
    pl_test_read_all(err_fd, err, err_cap);
    close(out_fd);
    close(err_fd);
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
