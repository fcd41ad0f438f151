/* Device selection (training/device.h) and the CUDA kernels module, without a GPU.
 * - no driver (PLATEAU_LIBCUDA at a missing path): auto runs on the cpu and says why; --device cuda fails (exit 2).
 * - the driver test double (tests/cuda_double) reporting devices: the driver probe passes, then the CUDA runtime
 *   inside the module cannot run on the double (it needs a real driver), so auto falls back to the cpu and
 *   --device cuda fails, both naming the failing runtime call.
 * - the module exports a complete table and keeps the static CUDA runtime hidden; plateau-train links neither
 *   libcudart nor libcuda.
 * argv[1] = plateau-train. PL_TEST_CUDA_DOUBLE / PL_TEST_CUDA_MODULE: paths, "" when not built.
 */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/shell.h"

#include "device.h"
#include "ops.h"

#ifndef PL_TEST_CUDA_DOUBLE
#define PL_TEST_CUDA_DOUBLE ""
#endif
#ifndef PL_TEST_CUDA_MODULE
#define PL_TEST_CUDA_MODULE ""
#endif

static const char *train_exe;
static const char *tiny = "--layers 1 --heads 2 --channels 16 --seq 8 --batch 2 --threads 1 --steps 2";
static const char *no_driver = "/nonexistent/plateau-test/libcuda.so.1";

static bool have_double(void) { return PL_TEST_CUDA_DOUBLE[0] != '\0'; }
static bool have_module(void) { return PL_TEST_CUDA_MODULE[0] != '\0'; }

/* Environment of one case: the driver path, the double's config, and the module path (NULL = unset). */
static void env(const char *libcuda, const char *double_conf, const char *module) {
    if (libcuda) setenv("PLATEAU_LIBCUDA", libcuda, 1);
    else unsetenv("PLATEAU_LIBCUDA");
    if (double_conf) setenv("PL_CUDA_DOUBLE", double_conf, 1);
    else unsetenv("PL_CUDA_DOUBLE");
    if (module) setenv("PLATEAU_TRAIN_CUDA_MODULE", module, 1);
    else unsetenv("PLATEAU_TRAIN_CUDA_MODULE");
}


static char out[1 << 16];

static void assert_contains(const char *hay, const char *needle) {
    if (!strstr(hay, needle)) fail_msg("expected \"%s\" in:\n%s", needle, hay);
}

/* ---- selection, as a library ---- */

static void test_device_parse(void **state) {
    (void)state;
    pl_device_kind_t k;
    assert_int_equal(pl_train_device_parse("auto", &k), 0);
    assert_int_equal(k, PL_DEVICE_AUTO);
    assert_int_equal(pl_train_device_parse("cpu", &k), 0);
    assert_int_equal(k, PL_DEVICE_CPU);
    assert_int_equal(pl_train_device_parse("cuda", &k), 0);
    assert_int_equal(k, PL_DEVICE_CUDA);
    assert_int_equal(pl_train_device_parse("gpu", &k), -EINVAL);
}

static void test_device_cpu_requested(void **state) {
    (void)state;
    env(no_driver, NULL, NULL);
    pl_train_device_t dev;
    char err[512];
    assert_int_equal(pl_train_device_open(PL_DEVICE_CPU, NULL, &dev, err, sizeof err), 0);
    assert_int_equal(dev.kind, PL_DEVICE_CPU);
    assert_ptr_equal(dev.ops, pl_train_ops_cpu());
    assert_non_null(dev.backend);
    assert_contains(dev.reason, "cpu (requested");
    pl_train_device_close(&dev);
}

/* (1) auto with no driver: cpu, with the reason (the failing dlopen, or a build without CUDA) */
static void test_device_auto_without_driver_is_cpu(void **state) {
    (void)state;
    env(no_driver, NULL, NULL);
    pl_train_device_t dev;
    char err[512];
    assert_int_equal(pl_train_device_open(PL_DEVICE_AUTO, NULL, &dev, err, sizeof err), 0);
    assert_int_equal(dev.kind, PL_DEVICE_CPU);
    assert_string_equal(dev.ops->name, "cpu");
    assert_contains(dev.reason, "cpu (auto: no usable CUDA device: ");
    assert_contains(dev.reason, have_module() ? no_driver : "built without the CUDA kernels module");
    pl_train_device_close(&dev);
}

static void test_device_cuda_without_driver_fails(void **state) {
    (void)state;
    env(no_driver, NULL, NULL);
    pl_train_device_t dev;
    char err[512];
    assert_int_equal(pl_train_device_open(PL_DEVICE_CUDA, NULL, &dev, err, sizeof err), -ENODEV);
    assert_null(dev.backend);
    assert_contains(err, "--device cuda: ");
    assert_contains(err, have_module() ? no_driver : "built without the CUDA kernels module");
}

/* (2) the double reports 2 devices: the driver probe passes; the module's CUDA runtime cannot initialise on it */
static void test_device_double_runtime_fails(void **state) {
    (void)state;
    if (!have_double() || !have_module()) skip();
    env(PL_TEST_CUDA_DOUBLE, "devices:2,verbose:0", PL_TEST_CUDA_MODULE);
    pl_train_device_t dev;
    char err[768];
    assert_int_equal(pl_train_device_open(PL_DEVICE_AUTO, NULL, &dev, err, sizeof err), 0);
    assert_int_equal(dev.kind, PL_DEVICE_CPU);
    assert_contains(dev.reason, "cpu (auto: no usable CUDA device: ");
    assert_contains(dev.reason, "CUDA runtime of " PL_TEST_CUDA_MODULE " failed to initialise: cudaGetDeviceCount: ");
    pl_train_device_close(&dev);

    assert_int_equal(pl_train_device_open(PL_DEVICE_CUDA, NULL, &dev, err, sizeof err), -ENODEV);
    assert_null(dev.backend);
    assert_contains(err, "--device cuda: ");
    assert_contains(err, "cudaGetDeviceCount: cudaError"); /* the call and the runtime's error name */
}

/* the driver probe passes but the module is missing: the message names the module's dlopen */
static void test_device_double_module_missing(void **state) {
    (void)state;
    if (!have_double()) skip();
    env(PL_TEST_CUDA_DOUBLE, "verbose:0", "/nonexistent/plateau-test/libplateau-train-cuda.so");
    pl_train_device_t dev;
    char err[768];
    assert_int_equal(pl_train_device_open(PL_DEVICE_CUDA, NULL, &dev, err, sizeof err), -ENODEV);
    assert_contains(err, "cannot load the CUDA kernels module: dlopen(\"/nonexistent/plateau-test/");
    assert_int_equal(pl_train_device_open(PL_DEVICE_AUTO, NULL, &dev, err, sizeof err), 0);
    assert_int_equal(dev.kind, PL_DEVICE_CPU);
    assert_contains(dev.reason, "cannot load the CUDA kernels module");
    pl_train_device_close(&dev);
}

/* (4) the module exports every entry of the table; the static CUDA runtime inside it stays hidden */
static void test_device_module_exports_table(void **state) {
    (void)state;
    if (!have_module()) skip();
    void *h = dlopen(PL_TEST_CUDA_MODULE, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) fail_msg("dlopen(%s): %s", PL_TEST_CUDA_MODULE, dlerror());
    const pl_train_ops_t *(*get)(void) = NULL;
    *(void **)&get = dlsym(h, PL_TRAIN_CUDA_OPS_SYMBOL);
    assert_non_null(get);
    assert_non_null(dlsym(h, PL_TRAIN_CUDA_INIT_SYMBOL));
    const pl_train_ops_t *t = get(); /* makes no CUDA call */
    assert_non_null(t);
    assert_int_equal(t->abi, PL_TRAIN_OPS_ABI);
    assert_int_equal(t->size, sizeof(pl_train_ops_t));
    assert_string_equal(t->name, "cuda");
    assert_true(t->scratch_bytes >= sizeof(double));
#define CHECK_FIELD(f)                                                                                          \
    if (t->f == NULL) fail_msg("cuda table entry %s is NULL", #f);
    PL_TRAIN_OPS_FIELDS(CHECK_FIELD)
#undef CHECK_FIELD
    /* linked statically and hidden: the module does not hand the runtime's symbols to the process */
    assert_null(dlsym(h, "cudaMalloc"));
    assert_null(dlsym(h, "cudaGetDeviceCount"));
    assert_null(dlsym(h, "pl_cuda_matmul_forward")); /* the launchers are internal too */
}

/* ---- plateau-train ---- */

static void test_device_cli_auto_without_driver(void **state) {
    (void)state;
    env(no_driver, NULL, NULL);
    int rc = pl_test_shell(out, sizeof out, "%s %s", train_exe, tiny);
    assert_int_equal(rc, 0);
    assert_contains(out, "device: cpu (auto: no usable CUDA device: ");
    assert_contains(out, "expected memory budget (float32, device cpu)");
    assert_contains(out, "done: 2 steps on cpu");
    assert_contains(out, "allocator stats (sim device)");
}

static void test_device_cli_cuda_without_driver_exits_2(void **state) {
    (void)state;
    env(no_driver, NULL, NULL);
    int rc = pl_test_shell(out, sizeof out, "%s %s --device cuda", train_exe, tiny);
    assert_int_equal(rc, 2);
    assert_contains(out, "plateau-train: --device cuda: ");
    assert_contains(out, have_module() ? no_driver : "built without the CUDA kernels module");
    assert_null(strstr(out, "step ")); /* nothing ran */
    rc = pl_test_shell(out, sizeof out, "%s %s --device tpu", train_exe, tiny);
    assert_int_equal(rc, 1);
    assert_contains(out, "--device expects auto, cpu or cuda");
}

/* plateau-train finds the module beside itself (no PLATEAU_TRAIN_CUDA_MODULE), the runtime fails on the double */
static void test_device_cli_double(void **state) {
    (void)state;
    if (!have_double() || !have_module()) skip();
    env(PL_TEST_CUDA_DOUBLE, "devices:1,verbose:0,leak_exitcode:97", NULL); /* 97: the double saw a leak */
    int rc = pl_test_shell(out, sizeof out, "%s %s --device cuda", train_exe, tiny);
    assert_int_equal(rc, 2);
    assert_contains(out, "plateau-train: --device cuda: the driver reports a device, but the CUDA runtime of ");
    assert_contains(out, "libplateau-train-cuda.so failed to initialise: cudaGetDeviceCount: ");
    rc = pl_test_shell(out, sizeof out, "%s %s", train_exe, tiny);
    assert_int_equal(rc, 0);
    assert_contains(out, "device: cpu (auto: no usable CUDA device: the driver reports a device, but the CUDA runtime");
    assert_contains(out, "done: 2 steps on cpu");
}

/* the binary itself never needs the CUDA runtime or driver to load (ld.so's list of what it maps) */
static void test_device_cli_links_no_cuda(void **state) {
    (void)state;
    env(no_driver, NULL, NULL);
    int rc = pl_test_shell(out, sizeof out, "LD_TRACE_LOADED_OBJECTS=1 %s", train_exe);
    assert_int_equal(rc, 0);
    assert_contains(out, "libc.so"); /* the listing worked */
    assert_null(strstr(out, "libcuda"));
    assert_null(strstr(out, "libcudart"));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PLATEAU_TRAIN\n", argv[0]);
        return 2;
    }
    train_exe = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_parse),
        cmocka_unit_test(test_device_cpu_requested),
        cmocka_unit_test(test_device_auto_without_driver_is_cpu),
        cmocka_unit_test(test_device_cuda_without_driver_fails),
        cmocka_unit_test(test_device_double_runtime_fails),
        cmocka_unit_test(test_device_double_module_missing),
        cmocka_unit_test(test_device_module_exports_table),
        cmocka_unit_test(test_device_cli_auto_without_driver),
        cmocka_unit_test(test_device_cli_cuda_without_driver_exits_2),
        cmocka_unit_test(test_device_cli_double),
        cmocka_unit_test(test_device_cli_links_no_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
