/* collector/logtail.c: a job's log followed as tail -F does: lines as they are appended (a partial line waits for
 * its newline), a file that does not exist yet, truncation in place, rotation (renamed away and replaced). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "logtail.h"

typedef struct { char text[4096]; int n; } lines_t;

static void on_line(void *ctx, const char *s, size_t n) {
    lines_t *l = ctx;
    size_t used = strlen(l->text);
    snprintf(l->text + used, sizeof l->text - used, "%.*s|", (int)n, s);
    l->n++;
}

static void append(const char *path, const char *text) {
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_logtail_follow(void **state) {
    (void)state;
    char path[64], old[80];
    snprintf(path, sizeof path, "/tmp/pl-logtail-%d.log", (int)getpid());
    snprintf(old, sizeof old, "%s.1", path);
    unlink(path);
    pl_logtail_t *t = NULL;
    assert_int_equal(pl_logtail_open(path, &t), 0);
    lines_t l = {0};
    assert_int_equal(pl_logtail_poll(t, on_line, &l), PL_LOGTAIL_MISSING); /* not there yet: waited for */
    append(path, "step 1\nstep 2\nste");
    assert_int_equal(pl_logtail_poll(t, on_line, &l), 0);
    assert_string_equal(l.text, "step 1|step 2|");
    append(path, "p 3\n");
    assert_int_equal(pl_logtail_poll(t, on_line, &l), 0);
    assert_string_equal(l.text, "step 1|step 2|step 3|"); /* the partial line waited for its newline */
    /* truncated in place (copytruncate): its new content from the start */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("step 4\n", f);
    fclose(f);
    l = (lines_t){0};
    assert_int_equal(pl_logtail_poll(t, on_line, &l), PL_LOGTAIL_TRUNCATED);
    assert_string_equal(l.text, "step 4|");
    /* rotated: the old file gets a last line after the rename, then a new file takes the name */
    assert_int_equal(rename(path, old), 0);
    append(old, "step 5\n");
    append(path, "step 6\n");
    l = (lines_t){0};
    assert_int_equal(pl_logtail_poll(t, on_line, &l), PL_LOGTAIL_ROTATED);
    assert_string_equal(l.text, "step 5|step 6|");
    /* removed: waited for again, then read from its start */
    unlink(path);
    l = (lines_t){0};
    assert_int_equal(pl_logtail_poll(t, on_line, &l), PL_LOGTAIL_MISSING);
    append(path, "step 7\n");
    assert_int_equal(pl_logtail_poll(t, on_line, &l), 0);
    assert_string_equal(l.text, "step 7|");
    pl_logtail_close(t);
    unlink(path);
    unlink(old);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_logtail_follow)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
