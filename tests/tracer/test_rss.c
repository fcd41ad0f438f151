/* RSS sampler: parsing of /proc text, fixture roots (cgroup found, "max" read as NA), and a live sample
 * that moves when this process touches memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "rss.h"

static void test_rss_parse_kb(void **state) {
    (void)state;
    const char *status = "Name:\tx\nVmRSS:\t  5000 kB\nRssAnon:\t    1200 kB\nRssFile:\t  300 kB\nRssShmem:\t0 kB\n";
    assert_int_equal(pl_rss_parse_kb(status, "RssAnon:"), 1200 * 1024);
    assert_int_equal(pl_rss_parse_kb(status, "RssFile:"), 300 * 1024);
    assert_int_equal(pl_rss_parse_kb(status, "RssShmem:"), 0);
    assert_int_equal(pl_rss_parse_kb(status, "Pss:"), PL_TRACE_NA);
    assert_int_equal(pl_rss_parse_kb("Pss: garbage\n", "Pss:"), PL_TRACE_NA);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_rss_fixture_roots(void **state) {
    (void)state;
    char root[] = "/tmp/pl-test-rss-XXXXXX";
    assert_non_null(mkdtemp(root));
    char p[512], proc[300], cg[300];
    snprintf(proc, sizeof proc, "%s/proc", root);
    snprintf(cg, sizeof cg, "%s/cg", root);
    mkdir(proc, 0700);
    mkdir(cg, 0700);
    snprintf(p, sizeof p, "%s/job", cg);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/cgroup", proc);
    write_file(p, "0::/job\n");
    snprintf(p, sizeof p, "%s/status", proc);
    write_file(p, "RssAnon:\t 10 kB\nRssFile:\t 20 kB\nRssShmem:\t 30 kB\n");
    snprintf(p, sizeof p, "%s/smaps_rollup", proc);
    write_file(p, "Rss: 100 kB\nPss:  40 kB\n");
    snprintf(p, sizeof p, "%s/job/memory.current", cg);
    write_file(p, "123456\n");
    snprintf(p, sizeof p, "%s/job/memory.max", cg);
    write_file(p, "max\n");

    pl_rss_ctx_t ctx;
    pl_rss_init(&ctx, proc, cg);
    assert_non_null(strstr(ctx.cgroup_dir, "/cg/job"));
    pl_rec_rss_t s;
    pl_rss_sample(&ctx, &s);
    assert_int_equal(s.rss_anon, 10240);
    assert_int_equal(s.rss_file, 20480);
    assert_int_equal(s.rss_shmem, 30720);
    assert_int_equal(s.pss, 40960);
    assert_int_equal(s.cgroup_current, 123456);
    assert_int_equal(s.device_used, PL_TRACE_NA);
    assert_int_equal(pl_rss_cgroup_max(&ctx), PL_TRACE_NA);
    snprintf(p, sizeof p, "%s/job/memory.max", cg);
    write_file(p, "1073741824\n");
    assert_int_equal(pl_rss_cgroup_max(&ctx), 1073741824);

    /* No cgroup file at all: fields are NA, never garbage. */
    snprintf(p, sizeof p, "%s/cgroup", proc);
    unlink(p);
    pl_rss_init(&ctx, proc, cg);
    assert_string_equal(ctx.cgroup_dir, "");
    pl_rss_sample(&ctx, &s);
    assert_int_equal(s.cgroup_current, PL_TRACE_NA);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

static void test_rss_live_sample_sees_touched_memory(void **state) {
    (void)state;
    pl_rss_ctx_t ctx;
    pl_rss_init(&ctx, NULL, NULL);
    pl_rec_rss_t before, after;
    pl_rss_sample(&ctx, &before);
    assert_true(before.rss_anon != PL_TRACE_NA);
    assert_true(before.pss != PL_TRACE_NA);
    size_t n = 64u << 20;
    char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    memset(m, 1, n);
    pl_rss_sample(&ctx, &after);
    assert_true(after.rss_anon >= before.rss_anon + n - (4u << 20));
    assert_true(after.pss >= before.pss + n / 2);
    munmap(m, n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rss_parse_kb),
        cmocka_unit_test(test_rss_fixture_roots),
        cmocka_unit_test(test_rss_live_sample_sees_touched_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
