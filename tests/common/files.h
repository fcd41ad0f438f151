/* Read a whole file from a test (fixtures, traces). Header-only (include by relative path). No cmocka here:
 * returns NULL on failure, callers assert. */
#pragma once

#include <stdio.h>
#include <stdlib.h>

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
