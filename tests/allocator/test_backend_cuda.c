/* tests/allocator/test_backend_cuda.c: the allocator's cuda backend over the CUDA driver test double.
 *
 * The backend dlopens $PLATEAU_LIBCUDA (the double, set by meson) exactly as it would a real driver; the test
 * dlopens the same path (same handle) to reset and configure the double and to read its counters and call log.
 * After every allocator is destroyed the double must hold nothing: no live object, no contract violation.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "cuda_double.h"
#include "helpers.h"

typedef struct dbl {
    void *h;
    pl_cuda_double_reset_fn *reset;
    pl_cuda_double_counters_fn *counters;
    pl_cuda_double_log_fn *log;
    pl_cuda_double_live_fn *live;
} dbl_t;

static dbl_t D;

static void *sym(const char *name) {
    void *p = dlsym(D.h, name);
    if (!p) fail_msg("double has no %s", name);
    return p;
}

static void dbl_open(void) {
    const char *path = getenv("PLATEAU_LIBCUDA");
    if (!path || !*path) fail_msg("PLATEAU_LIBCUDA must name the driver double");
    D.h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!D.h) fail_msg("dlopen %s: %s", path, dlerror());
    *(void **)&D.reset = sym("pl_cuda_double_reset");
    *(void **)&D.counters = sym("pl_cuda_double_counters");
    *(void **)&D.log = sym("pl_cuda_double_log");
    *(void **)&D.live = sym("pl_cuda_double_live");
}

static int setup(void **state) {
    (void)state;
    if (!D.h) dbl_open();
    return 0;
}

static void dbl_reset(const char *conf) {
    char full[256];
    snprintf(full, sizeof full, "%s%sleak_exitcode:97", conf, *conf ? "," : "");
    assert_int_equal(D.reset(full), 0);
}

static pl_cuda_double_counters_t dbl_counters(void) {
    pl_cuda_double_counters_t c;
    D.counters(&c);
    return c;
}

/* Everything given back, no contract broken. */
static void dbl_assert_clean(void) {
    pl_cuda_double_counters_t c = dbl_counters();
    assert_int_equal(c.n_violations, 0);
    assert_int_equal(c.n_leaks, 0);
    assert_int_equal(D.live(1), 0);
    assert_int_equal(c.used_bytes, 0);
    assert_int_equal(c.n_ctx_active, 0);
}

static pl_backend_t *cuda_open(void) {
    pl_backend_t *be = NULL;
    char err[512];
    int rc = pl_backend_cuda_create(0, &be, err, sizeof err);
    if (rc) fail_msg("pl_backend_cuda_create: %d %s", rc, err);
    assert_string_equal(be->ops->name, "cuda");
    return be;
}

static void fx_cuda_open(fixture_t *f, const char *conf) {
    memset(f, 0, sizeof *f);
    f->be = cuda_open();
    f->cuda = true; /* fx_stream makes real streams of the double; fx_close checks the double is clean */
    pl_alloc_config_t c;
    char err[512];
    if (pl_alloc_config_parse(conf, &c, err, sizeof err)) fail_msg("config '%s': %s", conf, err);
    assert_int_equal(pl_alloc_create(f->be, &c, &f->a, err, sizeof err), 0);
}

typedef struct events {
    int n_oom, n_alloc;
} events_t;

static void count_hook(void *ctx, const pl_alloc_event_t *e) {
    events_t *ev = ctx;
    if (e->kind == PL_ALLOC_EV_OOM) ev->n_oom++;
    if (e->kind == PL_ALLOC_EV_ALLOC) ev->n_alloc++;
}

/* Number of log records of `call` with result CUDA_SUCCESS (or any result when any != 0). */
static size_t n_logged(uint32_t call, bool any) {
    pl_cuda_double_rec_t recs[256];
    size_t n = 0, first = 0, got;
    while ((got = D.log(first, recs, 256)) > 0) {
        for (size_t i = 0; i < got; i++)
            if (recs[i].call == call && (any || recs[i].result == CUDA_SUCCESS)) n++;
        first += got;
    }
    return n;
}

static void test_backend_cuda_create_queries_device(void **state) {
    (void)state;
    dbl_reset("capacity:256MiB,granularity:4MiB");
    pl_backend_t *be = cuda_open();
    size_t g = 0, fr = 0, tot = 0;
    assert_int_equal(be->ops->granularity(be, &g), 0);
    assert_int_equal(g, 4 * MiB);
    assert_int_equal(be->ops->mem_info(be, &fr, &tot), 0);
    assert_int_equal(tot, 256 * MiB);
    assert_int_equal(fr, 256 * MiB);
    assert_int_equal(dbl_counters().n_ctx_active, 1); /* primary context retained */
    assert_string_equal(pl_backend_cuda_last_error(be), "");
    pl_backend_destroy(be);
    dbl_assert_clean();
}

static void test_backend_cuda_plain_alloc_free(void **state) {
    (void)state;
    dbl_reset("capacity:256MiB");
    fixture_t f;
    fx_cuda_open(&f, "");
    char *small = pl_alloc_malloc(f.a, 1000, 0);
    char *mid = pl_alloc_malloc(f.a, 5 * MiB, 0);
    char *big = pl_alloc_malloc(f.a, 30 * MiB, 0);
    assert_non_null(small);
    assert_non_null(mid);
    assert_non_null(big);
    /* the double's device memory is host memory: the whole block must be writable */
    memset(small, 1, 1000);
    memset(mid, 2, 5 * MiB);
    memset(big, 3, 30 * MiB);
    pl_alloc_stats_t s = fx_stats(&f);
    pl_cuda_double_counters_t c = dbl_counters();
    assert_int_equal(s.num_device_alloc, 3); /* 2 MiB small segment, 20 MiB large, 30 MiB large */
    assert_int_equal(c.n_alloc, (uint64_t)s.num_device_alloc);
    assert_int_equal(c.used_bytes, (uint64_t)s.reserved_bytes[PL_POOL_ALL].current);
    assert_int_equal(c.used_bytes, (2 + 20 + 30) * MiB);
    pl_alloc_free(f.a, small);
    pl_alloc_free(f.a, mid);
    pl_alloc_free(f.a, big);
    assert_int_equal(dbl_counters().n_free, 0); /* cached, not returned */
    pl_alloc_empty_cache(f.a);
    s = fx_stats(&f);
    c = dbl_counters();
    assert_int_equal(s.num_device_free, 3);
    assert_int_equal(c.n_free, 3);
    assert_int_equal(c.used_bytes, 0);
    assert_int_equal(n_logged(PL_CUDA_DOUBLE_MEM_ALLOC, false), 3);
    fx_close(&f);
    dbl_assert_clean();
}

static void test_backend_cuda_destroy_returns_live_segments(void **state) {
    (void)state;
    dbl_reset("capacity:256MiB");
    fixture_t f;
    fx_cuda_open(&f, "expandable_segments:False");
    assert_non_null(pl_alloc_malloc(f.a, 3 * MiB, 0)); /* still allocated at destroy */
    fixture_t g;
    g.be = f.be;
    pl_alloc_config_t c;
    pl_alloc_config_parse("expandable_segments:True", &c, NULL, 0);
    assert_int_equal(pl_alloc_create(g.be, &c, &g.a, NULL, 0), 0); /* a second allocator, same backend */
    assert_non_null(pl_alloc_malloc(g.a, 7 * MiB, 0));
    pl_alloc_destroy(g.a);
    fx_close(&f);
    dbl_assert_clean();
}

static void test_backend_cuda_expandable_grow_shrink(void **state) {
    (void)state;
    dbl_reset("capacity:128MiB,granularity:2MiB");
    fixture_t f;
    fx_cuda_open(&f, "expandable_segments:True");
    char *a = pl_alloc_malloc(f.a, 3 * MiB, 0);  /* large pool, stream 0: 2 pages */
    char *b = pl_alloc_malloc(f.a, 9 * MiB, 0);  /* same range grows */
    char *s = pl_alloc_malloc(f.a, 4096, 0);     /* small pool, stream 0: its own range */
    char *t = pl_alloc_malloc(f.a, 3 * MiB, fx_stream(&f, 5)); /* large pool, stream 5: its own range */
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(s);
    assert_non_null(t);
    /* writes fault (SIGSEGV) unless every mapped page got cuMemSetAccess */
    memset(a, 1, 3 * MiB);
    memset(b, 2, 9 * MiB);
    memset(s, 3, 4096);
    memset(t, 4, 3 * MiB);
    pl_cuda_double_counters_t c = dbl_counters();
    pl_alloc_stats_t st = fx_stats(&f);
    assert_int_equal(c.n_reserve, 3); /* once per (stream, pool) */
    assert_int_equal(c.n_alloc, 0);   /* no plain segments */
    assert_int_equal(c.n_create, (uint64_t)st.num_device_map);
    assert_int_equal(c.n_map, c.n_create);
    assert_int_equal(c.n_set_access, c.n_map);
    assert_int_equal(c.used_bytes, (uint64_t)st.reserved_bytes[PL_POOL_ALL].current);
    /* a 3 MiB + 9 MiB range (12 MiB = 6 pages) + 1 small page + 2 pages */
    assert_int_equal(c.n_map, 6 + 1 + 2);
    /* every map is followed by the set-access of the same page */
    pl_cuda_double_rec_t recs[64];
    size_t n = D.log(0, recs, 64);
    for (size_t i = 0; i < n; i++)
        if (recs[i].call == PL_CUDA_DOUBLE_MEM_MAP) {
            assert_true(i + 1 < n);
            assert_int_equal(recs[i + 1].call, PL_CUDA_DOUBLE_MEM_SET_ACCESS);
            assert_int_equal(recs[i + 1].ptr, recs[i].ptr);
            assert_int_equal(recs[i].size_bytes, 2 * MiB);
        }
    /* shrink: free b (the tail), release cache: its pages go back */
    assert_int_equal(c.n_stream_sync, 0);
    pl_alloc_free(f.a, b);
    pl_alloc_empty_cache(f.a);
    c = dbl_counters();
    st = fx_stats(&f);
    assert_int_equal(c.n_unmap, (uint64_t)st.num_device_unmap);
    assert_true(c.n_unmap >= 4);
    /* cuMemUnmap does not synchronise: the segment's stream was synchronised once, before the batch */
    assert_int_equal(c.n_stream_sync, 1);
    assert_int_equal(c.n_unmap_synced, c.n_unmap);
    assert_int_equal(c.n_release, c.n_unmap);
    assert_int_equal(c.n_live_mappings, c.n_map - c.n_unmap);
    assert_int_equal(c.used_bytes, (uint64_t)st.reserved_bytes[PL_POOL_ALL].current);
    /* grow again in the same range: no new reservation */
    char *b2 = pl_alloc_malloc(f.a, 9 * MiB, 0);
    assert_non_null(b2);
    memset(b2, 5, 9 * MiB);
    assert_int_equal(dbl_counters().n_reserve, 3);
    pl_alloc_free(f.a, a);
    pl_alloc_free(f.a, b2);
    pl_alloc_free(f.a, s);
    pl_alloc_free(f.a, t);
    pl_alloc_empty_cache(f.a);
    c = dbl_counters();
    assert_int_equal(c.n_live_mappings, 0);
    assert_int_equal(c.n_live_handles, 0);
    assert_int_equal(c.used_bytes, 0);
    assert_int_equal(c.n_unmap_synced, c.n_unmap);
    assert_int_equal(c.n_stream_sync, 1 + 3); /* one per segment (stream 0 large, small; stream 5 large) */
    /* a range with no page mapped is given back by empty_cache */
    assert_int_equal(c.n_live_reservations, 0);
    assert_int_equal(c.n_address_free, 3);
    fx_close(&f);
    c = dbl_counters();
    assert_int_equal(c.n_map, c.n_unmap);
    assert_int_equal(c.n_create, c.n_release);
    dbl_assert_clean();
}

static void test_backend_cuda_oom_retries_then_fails(void **state) {
    (void)state;
    /* The context costs 16 MiB the allocator cannot see, so the driver refuses before the allocator's own limit. */
    dbl_reset("capacity:64MiB,ctx_bytes:16MiB");
    fixture_t f;
    fx_cuda_open(&f, "");
    void *p = pl_alloc_malloc(f.a, 20 * MiB, 0);
    assert_non_null(p);
    pl_alloc_free(f.a, p); /* 20 MiB cached */
    void *q = pl_alloc_malloc(f.a, 30 * MiB, 0); /* 16 + 20 + 30 > 64: OOM, release the cached 20, again */
    assert_non_null(q);
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.num_alloc_retries, 0); /* release_available sufficed: no full-cache retry */
    assert_int_equal(s.num_device_free, 1);
    assert_int_equal(s.num_ooms, 0);
    assert_int_equal(dbl_counters().n_ooms, 1);
    void *r = pl_alloc_malloc(f.a, 30 * MiB, 0); /* 16 + 30 + 30 > 64, nothing to free */
    assert_null(r);
    s = fx_stats(&f);
    assert_int_equal(s.num_ooms, 1);
    assert_int_equal(s.num_alloc_retries, 1); /* tried again after releasing every cached block */
    assert_int_equal(dbl_counters().n_ooms, 3);
    assert_non_null(strstr(pl_alloc_last_error(), "out of memory"));
    const char *be_err = pl_backend_cuda_last_error(f.be);
    assert_non_null(strstr(be_err, "cuMemAlloc_v2"));
    assert_non_null(strstr(be_err, "CUDA_ERROR_OUT_OF_MEMORY"));
    pl_alloc_free(f.a, q);
    fx_close(&f);
    dbl_assert_clean();
}

static void test_backend_cuda_fault_injection(void **state) {
    (void)state;
    /* the 2nd cuMemMap fails: the page's handle is released, the first page unmapped, and the retry works */
    dbl_reset("capacity:128MiB,fail_map_at:2");
    fixture_t f;
    fx_cuda_open(&f, "expandable_segments:True");
    char *p = pl_alloc_malloc(f.a, 6 * MiB, 0);
    assert_non_null(p);
    memset(p, 7, 6 * MiB);
    pl_cuda_double_counters_t c = dbl_counters();
    assert_int_equal(c.n_injected, 1);
    assert_int_equal(n_logged(PL_CUDA_DOUBLE_MEM_MAP, true) - n_logged(PL_CUDA_DOUBLE_MEM_MAP, false), 1);
    assert_int_equal(fx_stats(&f).num_alloc_retries, 1);
    assert_int_equal(c.n_live_handles, 3);
    assert_int_equal(c.n_live_mappings, 3);
    assert_int_equal(c.n_violations, 0);
    assert_non_null(strstr(pl_backend_cuda_last_error(f.be), "cuMemMap"));
    pl_alloc_free(f.a, p);
    fx_close(&f);
    dbl_assert_clean();

    /* plain path: the 1st cuMemAlloc_v2 fails once */
    dbl_reset("capacity:128MiB,fail_alloc_at:1");
    fx_cuda_open(&f, "");
    p = pl_alloc_malloc(f.a, 1 * MiB + 1, 0);
    assert_non_null(p);
    assert_int_equal(fx_stats(&f).num_alloc_retries, 1);
    assert_int_equal(dbl_counters().n_injected, 1);
    pl_alloc_free(f.a, p);
    fx_close(&f);
    dbl_assert_clean();

    /* cuMemSetAccess fails: the mapped page is unmapped and released, then the retry works */
    dbl_reset("capacity:128MiB,fail_access_at:1");
    fx_cuda_open(&f, "expandable_segments:True");
    p = pl_alloc_malloc(f.a, 2 * MiB, 0);
    assert_non_null(p);
    memset(p, 1, 2 * MiB);
    c = dbl_counters();
    assert_int_equal(c.n_injected, 1);
    assert_int_equal(c.n_live_mappings, 1);
    assert_int_equal(c.n_live_handles, 1);
    assert_non_null(strstr(pl_backend_cuda_last_error(f.be), "cuMemSetAccess"));
    pl_alloc_free(f.a, p);
    fx_close(&f);
    dbl_assert_clean();
}

/* A driver failure that is not out of memory (here CUDA_ERROR_UNKNOWN / CUDA_ERROR_ILLEGAL_ADDRESS, as from a lost
 * device) fails the malloc at once: no cache release, no retry, not an OOM, and the message names the call. */
static void test_backend_cuda_device_error_is_not_oom(void **state) {
    (void)state;
    dbl_reset("capacity:128MiB,fail_alloc_at:2,fail_code:999");
    fixture_t f;
    fx_cuda_open(&f, "");
    events_t ev;
    memset(&ev, 0, sizeof ev);
    pl_alloc_set_hook(f.a, count_hook, &ev);
    void *a = pl_alloc_malloc(f.a, 30 * MiB, 0);
    assert_non_null(a);
    pl_alloc_free(f.a, a);
    void *big = pl_alloc_malloc(f.a, 40 * MiB, 0); /* 30 MiB cached, no fit: the 2nd cuMemAlloc_v2 fails */
    assert_null(big);
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.num_ooms, 0);
    assert_int_equal(s.num_alloc_retries, 0);
    assert_int_equal(s.num_device_free, 0); /* the cache was not released for it */
    assert_int_equal(ev.n_oom, 0);
    const char *msg = pl_alloc_last_error();
    assert_non_null(strstr(msg, "device error on device 0"));
    assert_non_null(strstr(msg, "not out of memory"));
    assert_non_null(strstr(msg, "cuMemAlloc_v2(41943040 bytes)"));
    assert_non_null(strstr(msg, "CUDA_ERROR_UNKNOWN"));
    assert_null(strstr(msg, "out of memory on device"));
    pl_cuda_double_counters_t c = dbl_counters();
    assert_int_equal(c.n_injected, 1);
    assert_int_equal(n_logged(PL_CUDA_DOUBLE_MEM_ALLOC, true) - n_logged(PL_CUDA_DOUBLE_MEM_ALLOC, false), 1);
    big = pl_alloc_malloc(f.a, 40 * MiB, 0); /* injection fires once: the device works again */
    assert_non_null(big);
    pl_alloc_free(f.a, big);
    fx_close(&f);
    dbl_assert_clean();

    /* the same through an expandable segment's cuMemMap, and the OOM injection still takes the OOM path */
    dbl_reset("capacity:128MiB,fail_map_at:2,fail_code:700");
    fx_cuda_open(&f, "expandable_segments:True");
    char *p = pl_alloc_malloc(f.a, 6 * MiB, 0);
    assert_null(p);
    assert_int_equal(fx_stats(&f).num_ooms, 0);
    assert_int_equal(fx_stats(&f).num_alloc_retries, 0);
    assert_non_null(strstr(pl_alloc_last_error(), "cuMemMap("));
    assert_non_null(strstr(pl_alloc_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS"));
    c = dbl_counters();
    assert_int_equal(c.n_live_mappings, 0); /* the page mapped before the failure was given back */
    assert_int_equal(c.n_live_handles, 0);
    p = pl_alloc_malloc(f.a, 6 * MiB, 0);
    assert_non_null(p);
    memset(p, 3, 6 * MiB);
    pl_alloc_free(f.a, p);
    fx_close(&f);
    dbl_assert_clean();

    dbl_reset("capacity:128MiB,fail_map_at:2"); /* default fail_code: CUDA_ERROR_OUT_OF_MEMORY */
    fx_cuda_open(&f, "expandable_segments:True");
    p = pl_alloc_malloc(f.a, 6 * MiB, 0);
    assert_non_null(p); /* OOM path: release cache, retry */
    assert_int_equal(fx_stats(&f).num_alloc_retries, 1);
    pl_alloc_free(f.a, p);
    fx_close(&f);
    dbl_assert_clean();
}

/* Deliberate misuse: the backend refuses what the driver refuses and names the call and the CUresult. */
static void test_backend_cuda_misuse_is_reported(void **state) {
    (void)state;
    dbl_reset("capacity:64MiB,verbose:0");
    pl_backend_t *be = cuda_open();
    uintptr_t r = 0;
    pl_phys_t h = 0;
    assert_int_equal(be->ops->addr_reserve(be, 8 * MiB, &r), 0);
    assert_int_equal(be->ops->phys_create(be, 2 * MiB, &h), 0);
    /* not granularity-aligned */
    assert_int_equal(be->ops->map(be, r + 4096, 2 * MiB, h), -EINVAL);
    const char *e = pl_backend_cuda_last_error(be);
    assert_non_null(strstr(e, "cuMemMap"));
    assert_non_null(strstr(e, "CUDA_ERROR_INVALID_VALUE"));
    /* a plain free of something never allocated */
    assert_int_equal(be->ops->mem_free(be, r, 2 * MiB), -EINVAL);
    assert_non_null(strstr(pl_backend_cuda_last_error(be), "cuMemFree_v2"));
    /* freeing a range with a page still mapped */
    assert_int_equal(be->ops->map(be, r, 2 * MiB, h), 0);
    assert_int_equal(be->ops->addr_free(be, r, 8 * MiB), -EINVAL);
    assert_non_null(strstr(pl_backend_cuda_last_error(be), "cuMemAddressFree"));
    assert_int_equal(dbl_counters().n_violations, 3);
    /* out of memory is -ENOMEM (not a violation), for plain and physical memory alike */
    uintptr_t big = 0;
    assert_int_equal(be->ops->mem_alloc(be, 128 * MiB, &big), -ENOMEM);
    assert_non_null(strstr(pl_backend_cuda_last_error(be), "cuMemAlloc_v2(134217728 bytes) on device 0: "
                                                           "CUDA_ERROR_OUT_OF_MEMORY"));
    pl_phys_t hbig = 0;
    assert_int_equal(be->ops->phys_create(be, 64 * MiB, &hbig), -ENOMEM); /* 2 MiB already taken by h */
    assert_non_null(strstr(pl_backend_cuda_last_error(be), "cuMemCreate(67108864 bytes)"));
    assert_int_equal(big, 0);
    assert_int_equal(hbig, 0);
    assert_int_equal(dbl_counters().n_ooms, 2);
    /* the right order works */
    assert_int_equal(be->ops->set_access(be, r, 2 * MiB), 0);
    ((volatile char *)r)[0] = 1;
    assert_int_equal(be->ops->unmap(be, r, 2 * MiB), 0);
    assert_int_equal(be->ops->phys_release(be, h), 0);
    assert_int_equal(be->ops->addr_free(be, r, 8 * MiB), 0);
    pl_backend_destroy(be);
    pl_cuda_double_counters_t c = dbl_counters();
    assert_int_equal(c.n_violations, 3);
    assert_int_equal(D.live(1), 0);
}

static void test_backend_cuda_events_and_record_stream(void **state) {
    (void)state;
    dbl_reset("capacity:64MiB");
    fixture_t f;
    fx_cuda_open(&f, "");
    /* a real stream of the double (the backend records events on it) */
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    *(void **)&stream_create = sym("cuStreamCreate");
    *(void **)&stream_destroy = sym("cuStreamDestroy_v2");
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    CUresult (*set_current)(CUcontext);
    *(void **)&retain = sym("cuDevicePrimaryCtxRetain");
    *(void **)&release = sym("cuDevicePrimaryCtxRelease_v2");
    *(void **)&set_current = sym("cuCtxSetCurrent");
    CUcontext ctx = NULL;
    assert_int_equal(retain(&ctx, 0), CUDA_SUCCESS); /* the test's own use of the device */
    assert_int_equal(set_current(ctx), CUDA_SUCCESS);
    CUstream s2 = NULL;
    assert_int_equal(stream_create(&s2, 0), CUDA_SUCCESS);
    char *p = pl_alloc_malloc(f.a, 4096, 0);
    assert_non_null(p);
    assert_int_equal(pl_alloc_record_stream(f.a, p, (pl_stream_t)s2), 0);
    pl_alloc_free(f.a, p); /* an event is recorded on s2; the double completes it at once */
    assert_int_equal(dbl_counters().n_live_events, 1);
    char *q = pl_alloc_malloc(f.a, 4096, 0); /* processes the event: the block is reusable */
    assert_ptr_equal(q, p);
    assert_int_equal(dbl_counters().n_live_events, 0);
    pl_alloc_free(f.a, q);
    /* an event on a stream that does not exist: the allocator keeps the block out of reuse, nothing breaks */
    pl_backend_t *be = f.be;
    pl_event_t ev;
    assert_int_equal(be->ops->event_record(be, (pl_stream_t)0x1234, &ev), -EINVAL);
    assert_non_null(strstr(pl_backend_cuda_last_error(be), "cuEventRecord"));
    assert_int_equal(be->ops->event_record(be, 0, &ev), 0);
    assert_int_equal(be->ops->event_query(be, ev), 0);
    assert_int_equal(be->ops->event_synchronize(be, ev), 0);
    be->ops->event_destroy(be, ev);
    assert_int_equal(stream_destroy(s2), CUDA_SUCCESS);
    f.cuda = false; /* broke the contract on purpose and still holds the context: checked by hand below */
    fx_close(&f);
    assert_int_equal(set_current(NULL), CUDA_SUCCESS);
    assert_int_equal(release(0), CUDA_SUCCESS);
    pl_cuda_double_counters_t c = dbl_counters();
    assert_int_equal(c.n_live_events, 0);
    assert_int_equal(c.n_live_streams, 0);
    assert_int_equal(D.live(1), 0);
}

typedef struct thread_arg {
    pl_alloc_t *a;
    void *ptr;
    void *ctx_after;
    int get_ctx_rc;
} thread_arg_t;

static void *alloc_on_thread(void *p) {
    thread_arg_t *t = p;
    CUresult (*get_current)(CUcontext *);
    *(void **)&get_current = dlsym(D.h, "cuCtxGetCurrent");
    t->ptr = pl_alloc_malloc(t->a, 3 * MiB, 0);
    CUcontext ctx = (CUcontext)1;
    t->get_ctx_rc = get_current(&ctx);
    t->ctx_after = ctx;
    return NULL;
}

/* A thread without a current context allocates; the backend makes the primary context current for its calls
 * and leaves the thread as it found it. */
static void test_backend_cuda_other_thread_context(void **state) {
    (void)state;
    dbl_reset("capacity:64MiB");
    fixture_t f;
    fx_cuda_open(&f, "expandable_segments:True");
    thread_arg_t t = {.a = f.a};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, alloc_on_thread, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_non_null(t.ptr);
    assert_int_equal(t.get_ctx_rc, CUDA_SUCCESS);
    assert_null(t.ctx_after);
    pl_alloc_free(f.a, t.ptr);
    fx_close(&f);
    dbl_assert_clean();
}

static void test_backend_cuda_no_driver(void **state) {
    (void)state;
    char *saved = strdup(getenv("PLATEAU_LIBCUDA"));
    assert_int_equal(setenv("PLATEAU_LIBCUDA", "/nonexistent/libcuda.so.1", 1), 0);
    pl_backend_t *be = (pl_backend_t *)0x1;
    char err[512];
    assert_int_equal(pl_backend_cuda_create(0, &be, err, sizeof err), -ENODEV);
    assert_ptr_equal(be, (pl_backend_t *)0x1); /* untouched on failure */
    assert_non_null(strstr(err, "/nonexistent/libcuda.so.1"));
    assert_non_null(strstr(err, "no CUDA driver"));
    /* a library that is not a driver */
    assert_int_equal(setenv("PLATEAU_LIBCUDA", "libc.so.6", 1), 0);
    assert_int_equal(pl_backend_cuda_create(0, &be, err, sizeof err), -ENODEV);
    assert_non_null(strstr(err, "cuGetProcAddress_v2"));
    assert_int_equal(setenv("PLATEAU_LIBCUDA", saved, 1), 0);
    free(saved);
    /* the driver is there but the device is not */
    dbl_reset("devices:2");
    assert_int_equal(pl_backend_cuda_create(2, &be, err, sizeof err), -ENODEV);
    assert_non_null(strstr(err, "device 2 not present"));
    assert_non_null(strstr(err, "2 devices"));
    /* cuInit fails (bad double config): the failed call and its CUresult name are in the message */
    assert_int_equal(D.reset("capacity:banana"), -EINVAL);
    assert_int_equal(pl_backend_cuda_create(0, &be, err, sizeof err), -ENODEV);
    assert_non_null(strstr(err, "cuInit"));
    assert_non_null(strstr(err, "CUDA_ERROR_INVALID_VALUE"));
    dbl_reset("");
    /* device 1 of 2 works */
    dbl_reset("devices:2");
    assert_int_equal(pl_backend_cuda_create(1, &be, err, sizeof err), 0);
    assert_int_equal(be->device, 1);
    pl_backend_destroy(be);
    dbl_assert_clean();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_cuda_create_queries_device),
        cmocka_unit_test(test_backend_cuda_plain_alloc_free),
        cmocka_unit_test(test_backend_cuda_destroy_returns_live_segments),
        cmocka_unit_test(test_backend_cuda_expandable_grow_shrink),
        cmocka_unit_test(test_backend_cuda_oom_retries_then_fails),
        cmocka_unit_test(test_backend_cuda_fault_injection),
        cmocka_unit_test(test_backend_cuda_device_error_is_not_oom),
        cmocka_unit_test(test_backend_cuda_misuse_is_reported),
        cmocka_unit_test(test_backend_cuda_events_and_record_stream),
        cmocka_unit_test(test_backend_cuda_other_thread_context),
        cmocka_unit_test(test_backend_cuda_no_driver),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
