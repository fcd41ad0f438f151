/* reports.seriesfile: the corpus text format parser (reports/seriesfile.c), including hostile input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seriesfile.h"

static int parse(const char *text, size_t max, pl_seriesfile_t *f, pl_parse_error_t *e) {
    return pl_seriesfile_parse(text, strlen(text), max, f, e);
}

static void test_seriesfile_parses_header_and_samples(void **state) {
    (void)state;
    const char *t = "# plateau-series 1 label=plateau name=x warmup_min=80\r\n"
                    "# a comment\n\n"
                    "10 5434000000\n"
                    "  20\t7017000000   12.5\n"
                    "20 1e3\n";
    pl_seriesfile_t f;
    pl_parse_error_t e;
    assert_int_equal(parse(t, 100, &f, &e), 0);
    assert_int_equal(f.n_samples, 3);
    assert_int_equal(f.n_meta, 3);
    assert_string_equal(pl_seriesfile_get(&f, "label"), "plateau");
    assert_string_equal(pl_seriesfile_get(&f, "warmup_min"), "80");
    assert_null(pl_seriesfile_get(&f, "missing"));
    assert_int_equal(f.samples[0].step, 10);
    assert_true(f.samples[0].value == 5434000000.0);
    assert_int_equal(f.samples[0].t_ns, -1);
    assert_int_equal(f.samples[1].t_ns, 12500000000LL);
    assert_true(f.samples[2].value == 1000);
    pl_seriesfile_free(&f);
}

static void test_seriesfile_rejects_bad_lines_with_position(void **state) {
    (void)state;
    static const struct {
        const char *text;
        size_t line;
    } bad[] = {
        {"plateau-series 1\n1 2\n", 1},
        {"# plateau-series 2\n", 1},
        {"# plateau-series 1 =x\n", 1},
        {"# plateau-series 1 k=v\n1 2\n-1 3\n", 3},
        {"# plateau-series 1\n1 nan\n", 2},
        {"# plateau-series 1\n1 inf\n", 2},
        {"# plateau-series 1\n1 1e999\n", 2},
        {"# plateau-series 1\n1 2 3 4\n", 2},
        {"# plateau-series 1\n1 2 -3\n", 2},
        {"# plateau-series 1\n99999999999999999999 2\n", 2},
        {"# plateau-series 1\n1\n", 2},
        {"# plateau-series 1\n1 2x\n", 2},
        {"# plateau-series 1\n0x10 2\n", 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pl_seriesfile_t f;
        pl_parse_error_t e = {0};
        int rc = parse(bad[i].text, 100, &f, &e);
        if (rc != -EINVAL || e.line != bad[i].line) fail_msg("case %zu: rc %d line %zu (%s)", i, rc, e.line, e.msg);
        assert_true(e.msg[0] != 0);
    }
    /* offset names the byte where the bad line starts */
    pl_seriesfile_t f;
    pl_parse_error_t e;
    assert_int_equal(parse("# plateau-series 1\n1 2\nbad\n", 100, &f, &e), -EINVAL);
    assert_int_equal(e.offset, 23);
}

static void test_seriesfile_hostile_input_is_bounded(void **state) {
    (void)state;
    pl_seriesfile_t f;
    pl_parse_error_t e;
    /* sample bound */
    char buf[4096];
    size_t l = (size_t)snprintf(buf, sizeof buf, "# plateau-series 1\n");
    for (int i = 0; i < 200; i++) l += (size_t)snprintf(buf + l, sizeof buf - l, "%d 1\n", i);
    assert_int_equal(pl_seriesfile_parse(buf, l, 100, &f, &e), -E2BIG);
    assert_int_equal(e.line, 102);
    assert_int_equal(pl_seriesfile_parse(buf, l, 200, &f, &e), 0);
    pl_seriesfile_free(&f);
    /* overlong line, NUL byte, not NUL-terminated buffer, empty input, too many header keys */
    char lng[400];
    memset(lng, '1', sizeof lng);
    assert_int_equal(pl_seriesfile_parse(lng, sizeof lng, 100, &f, &e), -EINVAL);
    const char nul[] = "# plateau-series 1\n1 2\0 3\n";
    assert_int_equal(pl_seriesfile_parse(nul, sizeof nul - 1, 100, &f, &e), -EINVAL);
    const char unterminated[] = {'#', ' ', 'p'};
    assert_int_equal(pl_seriesfile_parse(unterminated, 3, 100, &f, &e), -EINVAL);
    assert_int_equal(pl_seriesfile_parse("", 0, 100, &f, &e), -EINVAL);
    l = (size_t)snprintf(buf, sizeof buf, "# plateau-series 1");
    for (int i = 0; i < 40; i++) l += (size_t)snprintf(buf + l, sizeof buf - l, " k%d=v", i);
    assert_int_equal(pl_seriesfile_parse(buf, l, 100, &f, &e), -EINVAL);
    assert_int_equal(pl_seriesfile_parse(NULL, 5, 100, &f, &e), -EINVAL);
}

static void test_seriesfile_load(void **state) {
    (void)state;
    pl_seriesfile_t f;
    pl_parse_error_t e;
    assert_int_equal(pl_seriesfile_load("/nonexistent/plateau.txt", 1 << 20, 100, &f, &e), -ENOENT);
    char path[] = "/tmp/plateau-seriesfile-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    fputs("# plateau-series 1 a=b\n1 2\n2 3\n", fp);
    fclose(fp);
    assert_int_equal(pl_seriesfile_load(path, 1 << 20, 100, &f, &e), 0);
    assert_int_equal(f.n_samples, 2);
    pl_seriesfile_free(&f);
    assert_int_equal(pl_seriesfile_load(path, 8, 100, &f, &e), -EFBIG);
    assert_int_equal(pl_seriesfile_load(path, 31, 100, &f, &e), 0); /* exactly the file size */
    pl_seriesfile_free(&f);
    /* past the first buffer (64 KiB) and the first sample array (64): both grow, every sample kept in order */
    fp = fopen(path, "w");
    fputs("# plateau-series 1\n", fp);
    for (int i = 1; i <= 20000; i++) fprintf(fp, "%d %d\n", i, 3 * i);
    long size = ftell(fp);
    fclose(fp);
    assert_true(size > 65536 * 2);
    assert_int_equal(pl_seriesfile_load(path, (size_t)size, 20000, &f, &e), 0);
    assert_int_equal(f.n_samples, 20000);
    for (size_t i = 0; i < f.n_samples; i++) {
        assert_int_equal(f.samples[i].step, (int64_t)i + 1);
        assert_true(f.samples[i].value == 3.0 * (double)(i + 1));
    }
    pl_seriesfile_free(&f);
    assert_int_equal(pl_seriesfile_load(path, (size_t)size - 1, 20000, &f, &e), -EFBIG);
    assert_int_equal(pl_seriesfile_load(path, (size_t)size, 19999, &f, &e), -E2BIG);
    remove(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seriesfile_parses_header_and_samples),
        cmocka_unit_test(test_seriesfile_rejects_bad_lines_with_position),
        cmocka_unit_test(test_seriesfile_hostile_input_is_bounded),
        cmocka_unit_test(test_seriesfile_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
