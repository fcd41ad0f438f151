/* Read a whole file from a test (fixtures, traces), and compare output with a golden file. Header-only (include
 * by relative path). No cmocka here: returns NULL or false on failure, callers assert. */
#pragma once

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dir/name (or name alone when dir is NULL), NUL-terminated, malloc'd; its length (without the NUL) in *len when
 * len is not NULL (0 on failure). */
static inline char *pl_test_slurp(const char *dir, const char *name, size_t *len) {
    if (len) *len = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s%s%s", dir ? dir : "", dir ? "/" : "", name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (b = malloc((size_t)n + 1)) != NULL && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (!b) return NULL;
    b[n] = '\0';
    if (len) *len = (size_t)n;
    return b;
}

/* A golden test: true when the len bytes at buf equal the file dir/name. With PL_REGEN_GOLDEN set in the
 * environment the file is (re)written from buf first (then review the diff: a golden change is an output change).
 * On a mismatch, what was got goes to stderr. */
static inline bool pl_test_golden(const char *dir, const char *name, const char *buf, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (getenv("PL_REGEN_GOLDEN")) {
        FILE *g = fopen(path, "wb");
        if (!g || fwrite(buf, 1, len, g) != len || fclose(g)) return false;
    }
    size_t glen = 0;
    char *gold = pl_test_slurp(dir, name, &glen);
    bool same = gold && glen == len && memcmp(gold, buf, len) == 0;
    if (!same) fprintf(stderr, "%s: %s (regenerate with PL_REGEN_GOLDEN=1 and review the diff); got:\n%.*s\n", path,
                       gold ? "differs" : "missing", (int)len, buf);
    free(gold);
    return same;
}
