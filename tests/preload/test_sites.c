/* Integration: readable call sites end to end. A target runs under the preload, the report front end
 * (reports/extract.c) reads its run directory, and the growing-site list must name the leaking function in full:
 * a static C function (only in .symtab, invisible to dladdr), and C++ template methods in a namespace (no
 * -rdynamic: resolved from .symtab and demangled, one of them far longer than the old 160-character frame buffer).
 * A binary changed after the run (its build-id patched) must be reported as such, not misnamed.
 * Env (set by meson): PL_PRELOAD (the library), PL_TARGETS (directory of target_* programs). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "analyze.h"
#include "extract.h"
#include "../common/spawn.h"
#include "../common/tmpdir.h"

static const char *preload, *targets;
static char run_dir[256];
static char out_buf[16384], err_buf[16384];

static int setup(void **state) {
    (void)state;
    return pl_test_tmpdir_make(run_dir, sizeof run_dir, "sites");
}

static int teardown(void **state) {
    (void)state;
    return pl_test_tmpdir_remove(run_dir);
}

static void child_env(void *ctx) {
    (void)ctx;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/run", run_dir);
    setenv("LD_PRELOAD", preload, 1);
    setenv("PLATEAU_DIR", dir, 1);
    setenv("PLATEAU_QUIET", "1", 1);
    setenv("PLATEAU_SAMPLE_BYTES", "0", 1);
}

/* Run prog (a path) with argument "40" into a fresh run_dir/run. */
static void run_target(const char *prog) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/run'", run_dir);
    assert_int_equal(system(cmd), 0);
    char *argv[] = {(char *)(uintptr_t)prog, "40", NULL};
    int o, e;
    pid_t pid = pl_test_spawn(argv, child_env, NULL, &o, &e);
    assert_true(pid > 0);
    int rc = pl_test_finish(pid, o, e, out_buf, sizeof out_buf, err_buf, sizeof err_buf);
    if (rc != 0) fprintf(stderr, "target stderr:\n%s\n", err_buf);
    assert_int_equal(rc, 0);
}

typedef struct { pl_report_t *r; pl_extract_t x; } report_t;

static const pl_extract_proc_t *report(report_t *u) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/run", run_dir);
    u->r = pl_report_create(dir);
    assert_non_null(u->r);
    pl_extract_init(&u->x);
    assert_int_equal(pl_extract_path(u->r, &u->x, dir, NULL), 0);
    assert_int_equal(pl_report_analyze(u->r), 0);
    assert_int_equal(u->x.n_procs, 1);
    return &u->x.procs[0];
}

static void report_free(report_t *u) {
    pl_extract_free(&u->x);
    pl_report_destroy(u->r);
}

/* The innermost frame of a growing site that contains `needle`, or NULL. */
static const char *site_frame(const pl_extract_proc_t *p, const char *needle) {
    for (size_t i = 0; i < p->n_sites; i++)
        if (p->sites[i].n_frames && strstr(p->sites[i].frames[0], needle)) return p->sites[i].frames[0];
    return NULL;
}

static void dump_sites(const pl_extract_proc_t *p) {
    for (size_t i = 0; i < p->n_sites; i++)
        for (size_t f = 0; f < p->sites[i].n_frames; f++) fprintf(stderr, "site %zu: %s\n", i, p->sites[i].frames[f]);
}

static void test_sites_static_c_function_named(void **state) {
    (void)state;
    char prog[600];
    snprintf(prog, sizeof prog, "%s/target_leak_static", targets);
    run_target(prog);
    report_t u;
    const pl_extract_proc_t *p = report(&u);
    const char *f = site_frame(p, "leak_static_fn+0x");
    if (!f) dump_sites(p);
    assert_non_null(f);
    assert_non_null(strstr(f, "(target_leak_static)"));
    assert_null(strstr(f, "changed since the run"));
    /* the freed scratch blocks do not grow: never a site */
    assert_null(site_frame(p, "scratch_static_fn"));
    report_free(&u);
}

static void test_sites_cxx_template_methods_demangled_in_full(void **state) {
    (void)state;
    char prog[600];
    snprintf(prog, sizeof prog, "%s/target_leak_cxx", targets);
    if (access(prog, X_OK) != 0) skip(); /* built only when a C++ compiler is found */
    run_target(prog);
    report_t u;
    const pl_extract_proc_t *p = report(&u);
    const char *f = site_frame(p, "ns::Cls<int>::grow(unsigned long)+0x");
    if (!f || getenv("PL_TEST_VERBOSE")) dump_sites(p);
    assert_non_null(f);
    assert_non_null(strstr(f, "(target_leak_cxx)"));
    /* the long instantiation, whole: std::string spelled out, the closing of the template and the signature */
    const char *g = site_frame(p, "ns::Cls<std::map<std::__cxx11::basic_string<char");
    if (!g) dump_sites(p);
    assert_non_null(g);
    assert_non_null(strstr(g, "std::vector<std::pair<int, double>"));
    assert_non_null(strstr(g, "::grow(unsigned long)+0x"));
    assert_true(strlen(g) > 200);
    report_free(&u);
}

/* Flip one byte of the build-id note of a copy of the program after the run: the report must say the module
 * changed instead of reading names from the wrong file. */
static void test_sites_rebuilt_binary_detected(void **state) {
    (void)state;
    char src[600], copy[600];
    snprintf(src, sizeof src, "%s/target_leak_static", targets);
    snprintf(copy, sizeof copy, "%s/leak_copy", run_dir);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, copy);
    assert_int_equal(system(cmd), 0);
    run_target(copy);
    /* find the note: "GNU\0" after a (namesz 4, descsz 20, type 3) header */
    int fd = open(copy, O_RDWR);
    assert_true(fd >= 0);
    static unsigned char buf[1 << 16];
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    assert_true(n > 64);
    static const unsigned char hdr[16] = {4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0};
    ssize_t at = -1;
    for (ssize_t i = 0; i + 36 <= n && at < 0; i++)
        if (!memcmp(buf + i, hdr, sizeof hdr)) at = i + 16;
    assert_true(at > 0);
    buf[at] ^= 0xff;
    assert_int_equal(pwrite(fd, buf + at, 1, at), 1);
    close(fd);
    report_t u;
    const pl_extract_proc_t *p = report(&u);
    const char *f = site_frame(p, "changed since the run");
    if (!f || getenv("PL_TEST_VERBOSE")) dump_sites(p);
    assert_non_null(f);
    assert_null(site_frame(p, "leak_static_fn")); /* not resolved from the changed file */
    report_free(&u);
}

int main(void) {
    preload = getenv("PL_PRELOAD");
    targets = getenv("PL_TARGETS");
    if (!preload || !targets) {
        fprintf(stderr, "PL_PRELOAD and PL_TARGETS must be set\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sites_static_c_function_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sites_cxx_template_methods_demangled_in_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sites_rebuilt_binary_detected, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
