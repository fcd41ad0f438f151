/* tune/rmm_log: RMM logging_resource_adaptor CSV logs (tests/fixtures/rmm, written by
 * tools/gen-snapshot-fixtures.py from the same histories as the snapshot fixtures) -> replay sequence -> replay /
 * tune; strictness: every malformed line is refused with its line and column; a cut last line is damage.
 * usage: test_tune_rmm_log FIXTURE_DIR (tests/fixtures/rmm)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/files.h"

#include "rmm_log.h"
#include "tune.h"

static const char *fixture_dir;

/* a fixture, whole and NUL-terminated */
static char *slurp(const char *name, size_t *len) {
    char *b = pl_test_slurp(fixture_dir, name, len);
    if (!b) fail_msg("cannot read %s/%s", fixture_dir, name);
    return b;
}

static int64_t json_int(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    if (!p) fail_msg("no %s in the sidecar", key);
    return strtoll(p + strlen(pat), NULL, 10);
}

static void test_rmm_log_basic(void **state) {
    (void)state;
    char *json = slurp("basic.json", NULL);
    static const char *names[] = {"basic.csv", "basic_crlf.csv"};
    for (int k = 0; k < 2; k++) {
        size_t len;
        char *b = slurp(names[k], &len), err[512] = "";
        pl_replay_seq_t s;
        pl_rmm_log_info_t in;
        int rc = pl_rmm_log_read(b, len, names[k], 0, &s, &in, err, sizeof err);
        if (rc) fail_msg("%s: %d: %s", names[k], rc, err);
        assert_false(s.damaged);
        assert_int_equal(s.n_allocs, json_int(json, "n_allocs"));
        assert_int_equal(s.n_frees, json_int(json, "n_frees"));
        assert_int_equal(s.n_probes, json_int(json, "n_probes"));
        assert_int_equal(s.n_unmatched_frees, 0);
        assert_int_equal(in.n_allocate, s.n_allocs);
        assert_int_equal(in.n_failures, 1);
        assert_int_equal(in.n_threads_seen, 1);
        assert_int_equal(in.n_lines, in.n_allocate + in.n_free + in.n_failures);
        pl_alloc_config_t cfg;
        assert_int_equal(pl_alloc_config_parse("", &cfg, err, sizeof err), 0);
        pl_replay_result_t r;
        assert_int_equal(pl_replay_run(&s, &cfg, PL_REPLAY_DEFAULT_CAPACITY_BYTES, &r, err, sizeof err), 0);
        assert_int_equal(r.peak_allocated_bytes, json_int(json, "peak_allocated_bytes"));
        assert_int_equal(r.peak_requested_bytes, json_int(json, "peak_requested_bytes"));
        char sum[1024];
        pl_rmm_log_summary(&in, &s, sum, sizeof sum);
        assert_non_null(strstr(sum, "1 allocate failure"));
        pl_replay_seq_free(&s);
        free(b);
    }
    free(json);
}

static void test_rmm_log_frag_tune(void **state) {
    (void)state;
    size_t len;
    char *b = slurp("frag.csv", &len), err[512];
    pl_replay_seq_t s;
    assert_int_equal(pl_rmm_log_read(b, len, "frag.csv", 0, &s, NULL, err, sizeof err), 0);
    pl_tune_grid_t *g = malloc(sizeof *g);
    assert_int_equal(pl_tune_grid_parse("expandable_segments=False|True", g, err, sizeof err), 0);
    pl_tune_t t;
    assert_int_equal(pl_tune_run(&s, g, (uint64_t)100 << 20, 1, &t, err, sizeof err), 0);
    assert_string_equal(t.entries[0].conf, "expandable_segments:True");
    assert_int_equal(t.baseline.res.first_oom_event, 45);
    pl_tune_free(&t);
    free(g);
    pl_replay_seq_free(&s);
    free(b);
}

#define HDR "Thread,Time,Action,Pointer,Size,Stream\n"
#define OK1 "7,14:00:00.000001,allocate,0x7f0000000000,4096,0x0\n"

static void expect_bad(const char *text, int want_rc, const char *needle) {
    pl_replay_seq_t s;
    char err[512] = "";
    int rc = pl_rmm_log_read(text, strlen(text), "log.csv", 0, &s, NULL, err, sizeof err);
    if (rc != want_rc) fail_msg("rc %d (want %d) for:\n%s\n%s", rc, want_rc, text, err);
    if (!strstr(err, needle)) fail_msg("'%s' not in '%s'", needle, err);
    if (!rc) pl_replay_seq_free(&s);
}

static void test_rmm_log_bad_lines(void **state) {
    (void)state;
    expect_bad("Thread,Time,Action,Pointer,Size\n" OK1, -EBADMSG, "log.csv: line 1, column 1: not an RMM log");
    expect_bad("", -EBADMSG, "empty file");
    expect_bad(HDR "7,t,allocate,0x10,12\n", -EBADMSG, "line 2, column 21: 5 fields, 6 expected");
    expect_bad(HDR "7,t,allocate,0x10,12,0x0,9\n", -EBADMSG, "line 2, column 26: more than 6 fields");
    expect_bad(HDR OK1 "7,t,alloc,0x10,12,0x0\n", -EBADMSG, "line 3, column 5: action 'alloc'");
    expect_bad(HDR "7,t,allocate,7f00,12,0x0\n", -EBADMSG, "line 2, column 14: pointer is not 0x-prefixed hex");
    expect_bad(HDR "7,t,allocate,0x12345678901234567,12,0x0\n", -EBADMSG, "column 14: pointer");
    expect_bad(HDR "7,t,allocate,(nil),12,0x0\n", -EBADMSG, "null pointer for a successful allocate");
    expect_bad(HDR "7,t,allocate,0x10,12a,0x0\n", -EBADMSG, "line 2, column 19: size is not a decimal");
    expect_bad(HDR "7,t,allocate,0x10,99999999999999999999,0x0\n", -EBADMSG, "size is not a decimal");
    expect_bad(HDR "7,t,allocate,0x10,,0x0\n", -EBADMSG, "size is not a decimal");
    expect_bad(HDR "7,t,allocate,0x10,12,zz\n", -EBADMSG, "line 2, column 22: stream is neither");
    expect_bad(HDR ",t,allocate,0x10,12,0x0\n", -EBADMSG, "column 1: empty or unprintable thread id");
    expect_bad(HDR "7,,allocate,0x10,12,0x0\n", -EBADMSG, "column 3: empty or unprintable time");
    expect_bad(HDR OK1 "\n" OK1, -EBADMSG, "line 3, column 1: empty line");
    /* no allocation at all */
    expect_bad(HDR "7,t,free,0x10,12,0x0\n", -ENODATA, "no allocations");
    expect_bad(HDR, -ENODATA, "no allocations");
    /* event limit */
    pl_replay_seq_t s;
    char err[512];
    const char *two = HDR OK1 "7,t,allocate,0x20,12,0x0\n";
    assert_int_equal(pl_rmm_log_read(two, strlen(two), "l", 1, &s, NULL, err, sizeof err), -E2BIG);
    assert_non_null(strstr(err, "--max-events"));
}

static void test_rmm_log_accepts(void **state) {
    (void)state;
    pl_replay_seq_t s;
    pl_rmm_log_info_t in;
    char err[512];
    /* older logs: deallocate, decimal streams, seconds as time; trailing blank lines; a free of an unknown pointer */
    const char *t = HDR "1,1634567890.1,allocate,0x7f8a40000000,1024,140\n"
                        "2,1634567890.2,deallocate,0x7f8a40000000,1024,140\n"
                        "2,1634567890.3,free,0x7f8a4000dead,64,0\n"
                        "3,1634567890.4,allocate failure,0x0,1099511627776,0\n\n\n";
    assert_int_equal(pl_rmm_log_read(t, strlen(t), "old", 0, &s, &in, err, sizeof err), 0);
    assert_int_equal(s.n_allocs, 1);
    assert_int_equal(s.n_frees, 1);
    assert_int_equal(s.n_unmatched_frees, 1);
    assert_int_equal(s.n_probes, 1);
    assert_int_equal(s.n_streams, 2);
    assert_int_equal(in.n_threads_seen, 3);
    char sum[1024];
    pl_rmm_log_summary(&in, &s, sum, sizeof sum);
    assert_non_null(strstr(sum, "1 frees of pointers the log never allocated"));
    pl_replay_seq_free(&s);
    /* a last line cut while it was written: damaged, the lines before are kept */
    const char *cut = HDR OK1 "7,14:00:00.000002,allocate,0x7f00000";
    assert_int_equal(pl_rmm_log_read(cut, strlen(cut), "cut", 0, &s, &in, err, sizeof err), 0);
    assert_true(s.damaged);
    assert_non_null(strstr(s.error, "cut: line 3"));
    assert_int_equal(s.n_allocs, 1);
    pl_replay_seq_free(&s);
    /* ... but a complete last line without a newline is fine */
    const char *nonl = HDR "7,t,allocate,0x10,12,0x0";
    assert_int_equal(pl_rmm_log_read(nonl, strlen(nonl), "n", 0, &s, &in, err, sizeof err), 0);
    assert_false(s.damaged);
    pl_replay_seq_free(&s);
}

/* Every prefix of a log is either a damaged/complete sequence or a clean error; never a crash. */
static void test_rmm_log_truncated_everywhere(void **state) {
    (void)state;
    size_t len;
    char *b = slurp("frag.csv", &len), err[512];
    for (size_t n = 0; n < len; n++) {
        char *c = malloc(n ? n : 1);
        memcpy(c, b, n);
        pl_replay_seq_t s;
        int rc = pl_rmm_log_read(c, n, "t", 0, &s, NULL, err, sizeof err);
        if (!rc) pl_replay_seq_free(&s);
        else if (rc != -EBADMSG && rc != -ENODATA) fail_msg("cut at %zu: rc %d: %s", n, rc, err);
        free(c);
    }
    free(b);
}

int main(int argc, char **argv) {
    fixture_dir = argc > 1 ? argv[1] : "tests/fixtures/rmm";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmm_log_basic),     cmocka_unit_test(test_rmm_log_frag_tune),
        cmocka_unit_test(test_rmm_log_bad_lines), cmocka_unit_test(test_rmm_log_accepts),
        cmocka_unit_test(test_rmm_log_truncated_everywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
