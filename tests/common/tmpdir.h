/* Scratch directories for tests: one per test (cmocka setup/teardown), under /tmp, removed with their contents.
 * Header-only so every test program can include it by relative path without a library. */
#pragma once

#include <stdio.h>
#include <stdlib.h>

/* Create /tmp/pl-test-<name>-XXXXXX into dir (len bytes). Returns 0 or -1. */
static inline int pl_test_tmpdir_make(char *dir, size_t len, const char *name) {
    snprintf(dir, len, "/tmp/pl-test-%s-XXXXXX", name);
    return mkdtemp(dir) ? 0 : -1;
}

/* Remove dir and everything below it. Returns 0 or -1. */
static inline int pl_test_tmpdir_remove(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}
