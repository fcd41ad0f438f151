/* reports.symbols: offline symbolisation (ingest/symbols.c). A static function of this very program is looked up
 * by module path + offset the way a trace records it; identity checks (build-id, size+mtime) refuse a file that is
 * not the one that ran; C++ names demangle; broken files (truncated, garbage, corrupted section table) never crash
 * and never yield a name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols.h"

static __attribute__((noinline, used)) int probe_static_fn(int x) { return x * 3 + 1; }

/* module offset of probe_static_fn + 5, as a return address inside it would be recorded */
static uint64_t probe_offset(void) {
    Dl_info info;
    int (*fn)(int) = probe_static_fn;
    void *p;
    memcpy(&p, &fn, sizeof p);
    assert_true(dladdr(p, &info) != 0);
    return (uint64_t)((uintptr_t)p - (uintptr_t)info.dli_fbase) + 5;
}

static char exe[4096];

static void self_path(void) {
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = 0;
}

static void test_symbols_static_function_of_this_program(void **state) {
    (void)state;
    self_path();
    pl_symbols_t *s = pl_symbols_new();
    assert_non_null(s);
    pl_sym_module_t m = {exe, "", UINT64_MAX, 0};
    const char *name = NULL;
    uint64_t off = 0;
    assert_int_equal(pl_symbols_lookup(s, &m, probe_offset(), &name, &off), PL_SYM_OK);
    assert_string_equal(name, "probe_static_fn");
    assert_int_equal(off, 5);
    /* offset 0 and far past the end name nothing */
    assert_int_equal(pl_symbols_lookup(s, &m, 0, &name, &off), PL_SYM_NOT_FOUND);
    assert_int_equal(pl_symbols_lookup(s, &m, 1ull << 40, &name, &off), PL_SYM_NOT_FOUND);
    assert_int_equal(probe_static_fn(1), 4);
    pl_symbols_free(s);
}

static void test_symbols_identity_checked(void **state) {
    (void)state;
    self_path();
    struct stat sb;
    assert_int_equal(stat(exe, &sb), 0);
    int64_t mtime = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    pl_symbols_t *s = pl_symbols_new();
    const char *name = NULL;
    uint64_t off = 0;
    pl_sym_module_t same = {exe, "", (uint64_t)sb.st_size, mtime};
    assert_int_equal(pl_symbols_lookup(s, &same, probe_offset(), &name, &off), PL_SYM_OK);
    pl_sym_module_t resized = {exe, "", (uint64_t)sb.st_size + 1, mtime};
    assert_int_equal(pl_symbols_lookup(s, &resized, probe_offset(), &name, &off), PL_SYM_CHANGED);
    pl_sym_module_t touched = {exe, "", (uint64_t)sb.st_size, mtime + 1};
    assert_int_equal(pl_symbols_lookup(s, &touched, probe_offset(), &name, &off), PL_SYM_CHANGED);
    /* a build-id wins over size and mtime; a wrong one means another build */
    pl_sym_module_t other_build = {exe, "00112233445566778899aabbccddeeff00112233", (uint64_t)sb.st_size, mtime};
    assert_int_equal(pl_symbols_lookup(s, &other_build, probe_offset(), &name, &off), PL_SYM_CHANGED);
    pl_sym_module_t missing = {"/nonexistent/plateau/module.so", "", UINT64_MAX, 0};
    assert_int_equal(pl_symbols_lookup(s, &missing, 100, &name, &off), PL_SYM_NO_FILE);
    pl_sym_module_t dir = {"/tmp", "", UINT64_MAX, 0};
    assert_int_equal(pl_symbols_lookup(s, &dir, 100, &name, &off), PL_SYM_NO_FILE);
    pl_sym_module_t dev = {"/dev/zero", "", UINT64_MAX, 0};
    assert_int_equal(pl_symbols_lookup(s, &dev, 100, &name, &off), PL_SYM_NO_FILE);
    pl_symbols_free(s);
}

static void test_symbols_demangle(void **state) {
    (void)state;
    pl_symbols_t *s = pl_symbols_new();
    const char *d = pl_symbols_demangle(s, "_ZN2ns3ClsIiE4growEm");
#if PL_HAVE_CXA_DEMANGLE
    assert_string_equal(d, "ns::Cls<int>::grow(unsigned long)");
#else
    assert_string_equal(d, "_ZN2ns3ClsIiE4growEm");
#endif
    assert_string_equal(pl_symbols_demangle(s, "leak_static_fn"), "leak_static_fn");
    assert_string_equal(pl_symbols_demangle(s, "_Zgarbage!!"), "_Zgarbage!!"); /* not a valid name: as is */
    assert_string_equal(pl_symbols_demangle(s, "memcpy@GLIBC_2.14"), "memcpy");
    assert_string_equal(pl_symbols_demangle(s, ""), "");
    pl_symbols_free(s);
}

/* Copies of this program, broken in different ways: no crash (ASan watches), never a wrong OK. */
static void test_symbols_broken_files(void **state) {
    (void)state;
    self_path();
    int fd = open(exe, O_RDONLY);
    assert_true(fd >= 0);
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    size_t len = (size_t)sb.st_size;
    unsigned char *img = malloc(len);
    assert_non_null(img);
    assert_int_equal(pread(fd, img, len, 0), (ssize_t)len);
    close(fd);
    char path[] = "/tmp/pl-test-symbols-XXXXXX";
    int out = mkstemp(path);
    assert_true(out >= 0);
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    const size_t cuts[] = {0, 10, 63, 64, 200, len / 3, len / 2, len - 1};
    for (int variant = 0; variant < 12; variant++) {
        unsigned char *w = malloc(len);
        memcpy(w, img, len);
        size_t n = len;
        if (variant < 8) n = cuts[variant];
        else if (variant == 8) memset(w + eh.e_shoff, 0xff, len - eh.e_shoff); /* section table garbage */
        else if (variant == 9) { Elf64_Ehdr *e = (void *)w; e->e_shoff = (uint64_t)len - 8; }
        else if (variant == 10) { Elf64_Ehdr *e = (void *)w; e->e_phnum = 0xffff; }
        else for (size_t i = 64; i < len; i++) w[i] = (unsigned char)(i * 131 + 7); /* noise after the header */
        assert_int_equal(ftruncate(out, 0), 0);
        assert_int_equal(pwrite(out, w, n, 0), (ssize_t)n);
        free(w);
        pl_symbols_t *s = pl_symbols_new();
        pl_sym_module_t m = {path, "", UINT64_MAX, 0};
        const char *name = NULL;
        uint64_t off = 0;
        for (uint64_t o = 1; o < (1u << 16); o += 97) {
            pl_sym_status_t st = pl_symbols_lookup(s, &m, o, &name, &off);
            if (st == PL_SYM_OK) assert_non_null(name);
        }
        if (variant < 5 || variant == 10) /* no usable header or program headers: not a module */
            assert_int_equal(pl_symbols_lookup(s, &m, probe_offset(), &name, &off), PL_SYM_NO_FILE);
        pl_symbols_free(s);
    }
    close(out);
    unlink(path);
    free(img);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symbols_static_function_of_this_program),
        cmocka_unit_test(test_symbols_identity_checked),
        cmocka_unit_test(test_symbols_demangle),
        cmocka_unit_test(test_symbols_broken_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
