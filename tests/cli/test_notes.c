/* cli/notes.c: plateau run's end-of-run notes, grouped by text with the number of processes that said each; a
 * planted FIFO or link under the notes file's name is never read (and never blocks). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "commands.h"
#include "../common/tmpdir.h"

static char dir[256];

static int setup(void **state) {
    (void)state;
    return pl_test_tmpdir_make(dir, sizeof dir, "notes");
}

static int teardown(void **state) {
    (void)state;
    return pl_test_tmpdir_remove(dir);
}

static void write_notes(const char *text) {
    char path[400];
    snprintf(path, sizeof path, "%s/plateau-notes", dir);
    unlink(path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* What pl_cli_notes_print prints, in a static buffer; *n: its return value. */
static const char *printed(int *n) {
    static char *buf;
    size_t len;
    free(buf);
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    *n = pl_cli_notes_print(dir, out);
    fclose(out);
    return buf;
}

static void test_notes_grouped_by_text(void **state) {
    (void)state;
    write_notes("11\tplateau: this Python's frames are not readable\n"
                "12\tplateau: PLATEAU_INTERVAL_MS='0' is not an integer\n"
                "13\tplateau: this Python's frames are not readable\n"
                "13\tplateau: this Python's frames are not readable\n" /* an exec'd image of the same pid */
                "14\tplateau: this Python's frames are not readable\n"
                "no tab here\n"
                "15\tplateau: half a line still being writ");
    int n;
    const char *out = printed(&n);
    assert_int_equal(n, 2);
    assert_string_equal(out, "plateau: 3 processes: this Python's frames are not readable\n"
                             "plateau: pid 12: PLATEAU_INTERVAL_MS='0' is not an integer\n");
}

static void test_notes_escape_control_bytes(void **state) {
    (void)state;
    write_notes("7\tplateau: cannot create '\x1b]0;X\a'\n");
    int n;
    const char *out = printed(&n);
    assert_int_equal(n, 1);
    assert_null(strchr(out, '\x1b'));
    assert_null(strchr(out, '\a'));
}

static void test_notes_none_or_planted(void **state) {
    (void)state;
    char path[400], target[400];
    snprintf(path, sizeof path, "%s/plateau-notes", dir);
    unlink(path);
    int n;
    assert_string_equal(printed(&n), "");
    assert_int_equal(n, 0);
    assert_int_equal(mkfifo(path, 0600), 0); /* no writer: a blocking open would hang here */
    assert_string_equal(printed(&n), "");
    assert_int_equal(n, 0);
    unlink(path);
    snprintf(target, sizeof target, "%s/elsewhere", dir);
    FILE *f = fopen(target, "w");
    assert_non_null(f);
    fputs("1\tplateau: planted\n", f);
    fclose(f);
    assert_int_equal(symlink(target, path), 0);
    assert_string_equal(printed(&n), "");
    assert_int_equal(n, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notes_grouped_by_text),
        cmocka_unit_test(test_notes_escape_control_bytes),
        cmocka_unit_test(test_notes_none_or_planted),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
