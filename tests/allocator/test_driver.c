/* tests/allocator/test_driver.c: the cuda backend on whatever driver is loaded: the real libcuda.so.1 on a machine
 * with a GPU (the GPU check, tools/gpu-check.sh step 1), or $PLATEAU_LIBCUDA (the driver double in CI).
 *
 * Unlike the rest of the allocator suite, these tests use nothing but the driver API: no control API of the double
 * (capacity, injected failures, counters), and device memory touched only through the driver (cuMemsetD8_v2,
 * cuMemcpyDtoH_v2; on the double a page mapped without access faults there, as the copy fails on a GPU). What is
 * checked against the driver's own accounting (cuMemGetInfo_v2: free device memory):
 *   - plain segments: the free memory drops by what the allocator reserved and comes back whole at empty_cache;
 *   - expandable segments on real virtual memory (cuMemAddressReserve/Create/Map/SetAccess): pages of the driver's
 *     granularity mapped on demand at the end of one range, blocks contiguous across pages, every byte writable
 *     and readable, unmapped and given back at empty_cache;
 *   - streams: blocks of two streams never share a segment, and both are given back;
 *   - out of memory: a request larger than the device fails cleanly with the allocator's out-of-memory message
 *     (one OOM counted), and the allocator keeps working.
 * Each test prints one `gpu-check:` line with what it measured; tools/gpu-check.sh copies them into its table.
 * The fixture retains device 0's primary context for the whole test, so cuMemGetInfo has a context and the
 * context's own memory stays constant between the readings. */
#include "config.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>

#include <plateau/alloc.h>

#include "internal.h"

#define MiB ((size_t)1 << 20)

typedef struct driver {
    void *h;
    bool is_double; /* the driver double (it exports its control API): said in the output */
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*mem_get_info)(size_t *, size_t *);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*memcpy_dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*ctx_synchronize)(void);
} driver_t;

static driver_t drv;

static void *sym(const char *name, bool required) {
    void *p = dlsym(drv.h, name);
    if (!p && required) fail_msg("the driver has no %s", name);
    return p;
}

/* The driver the backend will load: $PLATEAU_LIBCUDA, else libcuda.so.1 (dlopen of the same path gives the same
 * handle, so this is the backend's driver). */
static int driver_setup(void **state) {
    (void)state;
    const char *path = getenv("PLATEAU_LIBCUDA");
    if (!path || !*path) path = "libcuda.so.1";
    drv.h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!drv.h) fail_msg("dlopen %s: %s", path, dlerror());
    drv.is_double = dlsym(drv.h, "pl_cuda_double_counters") != NULL;
    *(void **)&drv.retain = sym("cuDevicePrimaryCtxRetain", true);
    *(void **)&drv.release = sym("cuDevicePrimaryCtxRelease_v2", true);
    *(void **)&drv.set_current = sym("cuCtxSetCurrent", true);
    *(void **)&drv.mem_get_info = sym("cuMemGetInfo_v2", true);
    *(void **)&drv.granularity = sym("cuMemGetAllocationGranularity", true);
    *(void **)&drv.stream_create = sym("cuStreamCreate", true);
    *(void **)&drv.stream_destroy = sym("cuStreamDestroy_v2", true);
    *(void **)&drv.memset_d8 = sym("cuMemsetD8_v2", true);
    *(void **)&drv.memcpy_dtoh = sym("cuMemcpyDtoH_v2", true);
    *(void **)&drv.ctx_synchronize = sym("cuCtxSynchronize", true);
    printf("gpu-check: driver %s (%s)\n", path, drv.is_double ? "the driver double" : "a real driver");
    return 0;
}

typedef struct fixture {
    pl_backend_t *be;
    pl_alloc_t *a;
    CUcontext ctx;
    size_t free0, total, granularity;
} fixture_t;

static size_t free_bytes(fixture_t *f) {
    size_t fr = 0, tot = 0;
    assert_int_equal(drv.set_current(f->ctx), CUDA_SUCCESS);
    assert_int_equal(drv.mem_get_info(&fr, &tot), CUDA_SUCCESS);
    return fr;
}

static void fx_open(fixture_t *f, const char *conf) {
    memset(f, 0, sizeof *f);
    char err[512];
    int rc = pl_backend_cuda_create(0, &f->be, err, sizeof err);
    if (rc) fail_msg("pl_backend_cuda_create: %d %s", rc, err);
    assert_int_equal(drv.retain(&f->ctx, 0), CUDA_SUCCESS); /* the backend's context: the same primary context */
    assert_int_equal(drv.set_current(f->ctx), CUDA_SUCCESS);
    assert_int_equal(drv.mem_get_info(&f->free0, &f->total), CUDA_SUCCESS);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    assert_int_equal(drv.granularity(&f->granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    pl_alloc_config_t c;
    if (pl_alloc_config_parse(conf, &c, err, sizeof err)) fail_msg("config '%s': %s", conf, err);
    rc = pl_alloc_create(f->be, &c, &f->a, err, sizeof err);
    if (rc) fail_msg("pl_alloc_create: %d %s", rc, err);
}

static pl_alloc_stats_t stats(fixture_t *f) {
    pl_alloc_stats_t s;
    pl_alloc_get_stats(f->a, &s);
    return s;
}

/* Everything given back: nothing reserved, and the driver's free memory exactly as before the allocator's first
 * request (the context retained throughout, so its own memory did not change). */
static void fx_close(fixture_t *f) {
    char err[512];
    if (pl_alloc_check(f->a, err, sizeof err)) fail_msg("invariant broken: %s", err);
    pl_alloc_empty_cache(f->a);
    pl_alloc_stats_t s = stats(f);
    assert_int_equal(s.reserved_bytes[PL_POOL_ALL].current, 0);
    assert_int_equal(s.num_device_alloc, s.num_device_free);
    assert_int_equal(s.num_device_map, s.num_device_unmap);
    size_t fr = free_bytes(f);
    if (fr != f->free0)
        fail_msg("device memory not given back: %zu bytes free before, %zu after empty_cache", f->free0, fr);
    pl_alloc_destroy(f->a);
    pl_backend_destroy(f->be);
    assert_int_equal(drv.set_current(NULL), CUDA_SUCCESS);
    assert_int_equal(drv.release(0), CUDA_SUCCESS);
}

/* Write `byte` over [p, p+n) through the driver and read it back. */
static void fill_and_check(fixture_t *f, void *p, size_t n, unsigned char byte) {
    static unsigned char buf[4 * MiB];
    assert_true(n <= sizeof buf);
    memset(buf, byte ^ 0xff, n);
    assert_int_equal(drv.set_current(f->ctx), CUDA_SUCCESS);
    assert_int_equal(drv.memset_d8((CUdeviceptr)(uintptr_t)p, byte, n), CUDA_SUCCESS);
    assert_int_equal(drv.memcpy_dtoh(buf, (CUdeviceptr)(uintptr_t)p, n), CUDA_SUCCESS);
    assert_int_equal(drv.ctx_synchronize(), CUDA_SUCCESS);
    for (size_t i = 0; i < n; i++)
        if (buf[i] != byte) fail_msg("byte %zu of %p reads 0x%02x, wrote 0x%02x", i, p, buf[i], byte);
}

static void test_driver_plain_segments(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, "");
    void *small = pl_alloc_malloc(f.a, 4096, 0);          /* small pool: a 2 MiB segment */
    void *mid = pl_alloc_malloc(f.a, 3 * MiB, 0);         /* large pool: a 20 MiB segment */
    void *big = pl_alloc_malloc(f.a, 40 * MiB, 0);        /* its own 40 MiB segment */
    assert_non_null(small);
    assert_non_null(mid);
    assert_non_null(big);
    pl_alloc_stats_t s = stats(&f);
    assert_int_equal(s.num_device_alloc, 3);
    assert_int_equal(s.reserved_bytes[PL_POOL_ALL].current, (int64_t)(62 * MiB));
    size_t used = f.free0 - free_bytes(&f);
    /* the driver may round each segment up to its granularity, no more */
    if (used < 62 * MiB || used > 62 * MiB + 3 * f.granularity)
        fail_msg("the driver's free memory dropped by %zu bytes for 62 MiB reserved", used);
    fill_and_check(&f, small, 4096, 0x11);
    fill_and_check(&f, mid, 3 * MiB, 0x22);
    fill_and_check(&f, (char *)big + 36 * MiB, 4 * MiB, 0x33);
    pl_alloc_free(f.a, small);
    pl_alloc_free(f.a, mid);
    pl_alloc_free(f.a, big);
    printf("gpu-check: plain segments: 3 cuMemAlloc, 62 MiB reserved, driver free memory -%zu bytes, all given back\n",
           used);
    fx_close(&f);
}

static void test_driver_expandable_segments(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, "expandable_segments:True");
    size_t g = f.granularity;
    assert_true(g >= 4096 && (g & (g - 1)) == 0);
    size_t n1 = 3 * g / 2, n2 = 2 * g; /* the first block ends inside a page, the second spans the next two */
    char *a = pl_alloc_malloc(f.a, n1, 0);
    char *b = pl_alloc_malloc(f.a, n2, 0);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_equal(b, a + n1); /* one virtual range, grown at its end */
    pl_alloc_stats_t s = stats(&f);
    assert_int_equal(s.num_device_alloc, 0);
    size_t mapped = (size_t)s.reserved_bytes[PL_POOL_ALL].current;
    assert_int_equal(mapped, 4 * g); /* ceil(3.5 pages) */
    assert_int_equal(s.num_device_map, 4);
    size_t used = f.free0 - free_bytes(&f);
    if (used != mapped) fail_msg("the driver's free memory dropped by %zu bytes for %zu mapped", used, mapped);
    fill_and_check(&f, a, n1, 0x5a);
    fill_and_check(&f, b, n2, 0xa5); /* across the page boundaries the block spans */
    pl_alloc_free(f.a, b);
    pl_alloc_empty_cache(f.a);   /* the free tail's whole pages go: [2, 4) pages */
    s = stats(&f);
    assert_int_equal(s.reserved_bytes[PL_POOL_ALL].current, 2 * g);
    assert_int_equal(s.num_device_unmap, 2);
    assert_int_equal(f.free0 - free_bytes(&f), 2 * g);
    b = pl_alloc_malloc(f.a, n2, 0); /* maps them again, at the same addresses */
    assert_ptr_equal(b, a + n1);
    fill_and_check(&f, b, n2, 0x3c);
    pl_alloc_free(f.a, a);
    pl_alloc_free(f.a, b);
    s = stats(&f);
    printf("gpu-check: expandable segments: granularity %zu KiB, %lld maps, %zu bytes mapped, driver free memory "
           "-%zu bytes, all given back\n", g >> 10, (long long)s.num_device_map, mapped, used);
    fx_close(&f);
}

static void test_driver_streams(void **state) {
    (void)state;
    for (int exp = 0; exp < 2; exp++) {
        fixture_t f;
        fx_open(&f, exp ? "expandable_segments:True" : "");
        CUstream st = NULL;
        assert_int_equal(drv.set_current(f.ctx), CUDA_SUCCESS);
        assert_int_equal(drv.stream_create(&st, 0), CUDA_SUCCESS);
        void *p0 = pl_alloc_malloc(f.a, 1 * MiB, 0);
        void *p1 = pl_alloc_malloc(f.a, 1 * MiB, (pl_stream_t)st);
        assert_non_null(p0);
        assert_non_null(p1);
        pl_alloc_stats_t s = stats(&f);
        assert_int_equal(s.segment[PL_POOL_ALL].current, 2); /* one segment (or range) per stream */
        pl_alloc_free(f.a, p0);
        pl_alloc_free(f.a, p1);
        void *q = pl_alloc_malloc(f.a, 1 * MiB, (pl_stream_t)st); /* reuses the stream's own block */
        assert_ptr_equal(q, p1);
        pl_alloc_free(f.a, q);
        pl_alloc_empty_cache(f.a);
        assert_int_equal(drv.set_current(f.ctx), CUDA_SUCCESS);
        assert_int_equal(drv.stream_destroy(st), CUDA_SUCCESS);
        fx_close(&f);
    }
    printf("gpu-check: streams: two streams never share a segment (plain and expandable)\n");
}

static void test_driver_oom(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, "");
    void *keep = pl_alloc_malloc(f.a, 1 * MiB, 0);
    assert_non_null(keep);
    void *p = pl_alloc_malloc(f.a, 2 * f.total, 0);
    assert_null(p);
    const char *e = pl_alloc_last_error();
    assert_non_null(e);
    if (!strstr(e, "out of memory on device 0"))
        fail_msg("not an out-of-memory message: %s", e);
    pl_alloc_stats_t s = stats(&f);
    assert_int_equal(s.num_ooms, 1);
    void *q = pl_alloc_malloc(f.a, 1 * MiB, 0); /* still serving */
    assert_non_null(q);
    fill_and_check(&f, q, 1 * MiB, 0x77);
    pl_alloc_free(f.a, q);
    pl_alloc_free(f.a, keep);
    printf("gpu-check: out of memory: %zu bytes asked of a %zu-byte device: NULL, one OOM, the allocator still "
           "serves\n", 2 * f.total, f.total);
    fx_close(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_driver_plain_segments),
        cmocka_unit_test(test_driver_expandable_segments),
        cmocka_unit_test(test_driver_streams),
        cmocka_unit_test(test_driver_oom),
    };
    return cmocka_run_group_tests(tests, driver_setup, NULL);
}
