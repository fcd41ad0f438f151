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

static void mkdirs(const char *root, const char *rel) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (char *q = p + strlen(root) + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            mkdir(p, 0700);
            *q = '/';
        }
    mkdir(p, 0700);
}

static void put_file(const char *root, const char *rel, const char *text) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    write_file(p, text);
}

/* issue 23 H4: the memory limit of cgroup v1 (memory.limit_in_bytes, the hierarchy's hierarchical_memory_limit,
 * v1's "unlimited"), of a v1/v2 hybrid (memory on v1), and v2's least memory.max over the ancestors. */
static void test_rss_cgroup_v1_v2_hybrid_limits(void **state) {
    (void)state;
    char root[] = "/tmp/pl-test-rss-XXXXXX";
    assert_non_null(mkdtemp(root));
    char proc[300], cg[300];
    snprintf(proc, sizeof proc, "%s/proc", root);
    snprintf(cg, sizeof cg, "%s/cg", root);
    mkdir(proc, 0700);
    mkdir(cg, 0700);
    pl_rss_ctx_t ctx;
    pl_rec_rss_t s;

    /* v1: the memory controller mounted at <root>/memory (named with another controller on its line) */
    mkdirs(cg, "memory/slurm/job1");
    put_file(proc, "cgroup", "12:cpuset:/\n4:cpu,memory:/slurm/job1\n1:name=systemd:/user.slice\n");
    put_file(cg, "memory/slurm/job1/memory.usage_in_bytes", "4096000\n");
    put_file(cg, "memory/slurm/job1/memory.limit_in_bytes", "41943040\n"); /* 40 MiB */
    pl_rss_init(&ctx, proc, cg);
    assert_true(ctx.cgroup_v1);
    assert_non_null(strstr(ctx.cgroup_dir, "/cg/memory/slurm/job1"));
    pl_rss_sample(&ctx, &s);
    assert_int_equal(s.cgroup_current, 4096000);
    assert_int_equal(pl_rss_cgroup_max(&ctx), 41943040);
    /* the hierarchy's limit, lower than the cgroup's own, as the kernel reports it */
    put_file(cg, "memory/slurm/job1/memory.stat", "cache 0\nrss 4096000\nhierarchical_memory_limit 20971520\n");
    assert_int_equal(pl_rss_cgroup_max(&ctx), 20971520);
    /* v1's "no limit" is PAGE_COUNTER_MAX pages */
    put_file(cg, "memory/slurm/job1/memory.stat", "hierarchical_memory_limit 9223372036854771712\n");
    put_file(cg, "memory/slurm/job1/memory.limit_in_bytes", "9223372036854771712\n");
    assert_int_equal(pl_rss_cgroup_max(&ctx), PL_TRACE_NA);
    pl_rss_close(&ctx);

    /* hybrid: v2 at <root>/unified without the memory controller, memory on v1 */
    mkdirs(cg, "unified/user.slice");
    put_file(cg, "unified/user.slice/cgroup.procs", "");
    put_file(proc, "cgroup", "0::/user.slice\n7:memory:/slurm/job1\n");
    put_file(cg, "memory/slurm/job1/memory.stat", "hierarchical_memory_limit 31457280\n");
    pl_rss_init(&ctx, proc, cg);
    assert_true(ctx.cgroup_v1);
    assert_int_equal(pl_rss_cgroup_max(&ctx), 31457280);
    pl_rss_close(&ctx);

    /* v2: the least memory.max from the cgroup up to the root */
    mkdirs(cg, "kubepods/pod1/ctr");
    put_file(proc, "cgroup", "0::/kubepods/pod1/ctr\n");
    put_file(cg, "kubepods/pod1/ctr/memory.current", "1000\n");
    put_file(cg, "kubepods/pod1/ctr/memory.max", "max\n");
    put_file(cg, "kubepods/pod1/memory.max", "536870912\n");
    put_file(cg, "kubepods/memory.max", "1073741824\n");
    pl_rss_init(&ctx, proc, cg);
    assert_false(ctx.cgroup_v1);
    assert_int_equal(pl_rss_cgroup_max(&ctx), 536870912);
    put_file(cg, "kubepods/pod1/ctr/memory.max", "268435456\n");
    assert_int_equal(pl_rss_cgroup_max(&ctx), 268435456);
    pl_rss_close(&ctx);

    /* v2 on a hybrid's unified mount (no memory line on v1): read there */
    mkdirs(cg, "unified/job2");
    put_file(cg, "unified/job2/memory.current", "2000\n");
    put_file(cg, "unified/job2/memory.max", "123456789\n");
    put_file(proc, "cgroup", "0::/job2\n");
    pl_rss_init(&ctx, proc, cg);
    assert_non_null(strstr(ctx.cgroup_dir, "/cg/unified/job2"));
    assert_int_equal(pl_rss_cgroup_max(&ctx), 123456789);
    pl_rss_close(&ctx);

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
        cmocka_unit_test(test_rss_cgroup_v1_v2_hybrid_limits),
        cmocka_unit_test(test_rss_live_sample_sees_touched_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
