/* tracer/read/rundir.c: which files of a run directory are read as traces. Only regular files named
 * *.pltrace; never a FIFO (opening it would block), a symbolic link, a file of another owner, or, when the directory
 * has a run-id file, a trace of another run; each one left out is named with its reason. Directories without a
 * run-id file are read whole. */
#include <errno.h>
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

#include <plateau/trace.h>

#include "event.h"

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/pl-test-rundir-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A trace header (all the listing reads) with this run id. */
static void write_trace(const char *name, uint64_t run_id) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .version_minor = PL_TRACE_VERSION_MINOR, .pid = 7,
                           .run_id = run_id};
    uint8_t b[PL_TRACE_HEADER_BYTES];
    pl_event_header_encode(&h, b);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, sizeof b, f), sizeof b);
    assert_int_equal(fclose(f), 0);
}

static void write_text(const char *name, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static bool listed(const pl_trace_dir_t *l, const char *name) {
    for (size_t i = 0; i < l->n_paths; i++) {
        const char *b = strrchr(l->paths[i], '/');
        if (b && !strcmp(b + 1, name)) return true;
    }
    return false;
}

static const char *skipped(const pl_trace_dir_t *l, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < l->n_skipped; i++)
        if (!strncmp(l->skipped[i], name, n) && l->skipped[i][n] == ':') return l->skipped[i] + n + 2;
    return NULL;
}

static void test_rundir_regular_files_only(void **state) {
    (void)state;
    write_trace("1.0.pltrace", 0);
    write_trace("2.0.pltrace", 0);
    write_text("notes.txt", "not a trace name");
    char p[256], q[256];
    snprintf(p, sizeof p, "%s/fifo.pltrace", g_dir);
    assert_int_equal(mkfifo(p, 0600), 0);
    snprintf(p, sizeof p, "%s/link.pltrace", g_dir);
    snprintf(q, sizeof q, "%s/1.0.pltrace", g_dir);
    assert_int_equal(symlink(q, p), 0);
    snprintf(p, sizeof p, "%s/dir.pltrace", g_dir);
    assert_int_equal(mkdir(p, 0700), 0);
    pl_trace_dir_t l;
    assert_int_equal(pl_trace_dir_list(g_dir, &l), 0);
    assert_int_equal(l.n_paths, 2);
    assert_true(listed(&l, "1.0.pltrace") && listed(&l, "2.0.pltrace"));
    assert_true(strcmp(l.paths[0], l.paths[1]) < 0); /* sorted */
    assert_true(l.run_id == 0);
    assert_int_equal(l.n_skipped, 3);
    assert_string_equal(skipped(&l, "fifo.pltrace"), "a FIFO, not a regular file");
    assert_string_equal(skipped(&l, "link.pltrace"), "a symbolic link, not a regular file");
    assert_string_equal(skipped(&l, "dir.pltrace"), "a directory, not a regular file");
    pl_trace_dir_free(&l);
    pl_trace_dir_free(&l); /* safe twice */
    /* the reader refuses a FIFO given by name at once, without blocking */
    pl_trace_reader_t *rd;
    snprintf(p, sizeof p, "%s/fifo.pltrace", g_dir);
    assert_int_equal(pl_trace_open(p, &rd), -EINVAL);
    assert_non_null(strstr(pl_trace_open_error(), "a FIFO, not a regular file"));
    assert_int_equal(pl_trace_dir_list("/nonexistent/plateau-run", &l), -ENOENT);
}

static void test_rundir_run_id_and_owner(void **state) {
    (void)state;
    write_trace("10.0.pltrace", 0xabc);
    write_trace("11.0.pltrace", 0xabc);
    write_trace("12.0.pltrace", 0xdef);   /* an earlier run's */
    write_trace("13.0.pltrace", 0);       /* written without a run id */
    write_text("14.0.pltrace", "short");  /* unreadable header: left to the reader, which says why */
    pl_trace_dir_t l;
    assert_int_equal(pl_trace_dir_list(g_dir, &l), 0); /* no run-id file yet: every trace */
    assert_true(listed(&l, "12.0.pltrace") && listed(&l, "13.0.pltrace"));
    pl_trace_dir_free(&l);
    write_text(PL_TRACE_RUN_ID_FILE, "0000000000000abc\n");
    assert_int_equal(pl_trace_dir_list(g_dir, &l), 0);
    assert_true(l.run_id == 0xabc);
    assert_true(listed(&l, "10.0.pltrace") && listed(&l, "11.0.pltrace") && listed(&l, "14.0.pltrace"));
    assert_false(listed(&l, "12.0.pltrace") || listed(&l, "13.0.pltrace"));
    assert_non_null(skipped(&l, "12.0.pltrace"));
    assert_non_null(strstr(skipped(&l, "12.0.pltrace"), "from another run (run id 0000000000000def"));
    assert_non_null(strstr(skipped(&l, "13.0.pltrace"), "written outside this run (no run id"));
    pl_trace_dir_free(&l);
    if (geteuid() != 0) return; /* chown needs root: the owner checks below */
    char p[256];
    snprintf(p, sizeof p, "%s/11.0.pltrace", g_dir);
    assert_int_equal(chown(p, 4242, (gid_t)-1), 0);
    assert_int_equal(pl_trace_dir_list(g_dir, &l), 0);
    assert_false(listed(&l, "11.0.pltrace"));
    assert_non_null(strstr(skipped(&l, "11.0.pltrace"), "owned by uid 4242, not by the directory's owner"));
    pl_trace_dir_free(&l);
    /* a run-id file of another owner is not the directory's: no run id, every owned trace */
    snprintf(p, sizeof p, "%s/%s", g_dir, PL_TRACE_RUN_ID_FILE);
    assert_int_equal(chown(p, 4242, (gid_t)-1), 0);
    assert_int_equal(pl_trace_dir_list(g_dir, &l), 0);
    assert_true(l.run_id == 0);
    assert_true(listed(&l, "12.0.pltrace"));
    pl_trace_dir_free(&l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rundir_regular_files_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rundir_run_id_and_owner, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
