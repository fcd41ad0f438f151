/* tests/allocator/helpers.h: small fixtures shared by the allocator tests.
 *
 * Backend selection: the fixtures run on the sim backend unless PLATEAU_TEST_BACKEND=cuda, in which case they
 * create the cuda backend over the CUDA driver test double ($PLATEAU_LIBCUDA, tests/cuda_double). The sim options
 * a test asks for become the double's configuration through its control API pl_cuda_double_reset (dlopen of the
 * same path gives the same handle): capacity, granularity, fail_alloc_at (the double counts plain cuMemAlloc only,
 * the sim counts plain + physical allocations; no test sets it with expandable segments) and fail_map_at.
 * touch is ignored there (the double's memory is always real; touch=false tests simply never write).
 * At fx_close the double must report no contract violation, no leak, nothing live and no memory in use.
 * Streams: fx_stream(f, i) is stream i on sim and, on cuda, a real stream created on the double (0 = the
 * default stream), so record_stream and expandable segments of several streams run on both backends.
 * Held streams (work that stays pending) exist only on sim: fx_hold_stream returns false on cuda.
 */
#pragma once

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <plateau/alloc.h>

#include "internal.h"

#if PL_HAVE_CUDA
#include <dlfcn.h>

#include <cuda.h>

#include "cuda_double.h"
#endif

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

#define FX_MAX_STREAMS 8

typedef struct fixture {
    pl_backend_t *be;
    pl_alloc_t *a;
    bool cuda;                               /* cuda backend over the driver double */
    pl_stream_t streams[FX_MAX_STREAMS];     /* cuda: streams created by fx_stream (0 = not yet) */
    void *ctx;                               /* cuda: the primary context the fixture retained for its streams */
} fixture_t;

/* PLATEAU_TEST_BACKEND=cuda selects the cuda backend (anything else, or unset: sim). */
static inline bool fx_want_cuda(void) {
    const char *v = getenv("PLATEAU_TEST_BACKEND");
    return v && strcmp(v, "cuda") == 0;
}

#if PL_HAVE_CUDA
/* The double's control API and the few driver calls the fixture makes itself, from the same handle the
 * backend dlopens ($PLATEAU_LIBCUDA). */
typedef struct fx_double {
    void *h;
    pl_cuda_double_reset_fn *reset;
    pl_cuda_double_counters_fn *counters;
    pl_cuda_double_live_fn *live;
    pl_cuda_double_last_violation_fn *last_violation;
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
} fx_double_t;

static inline void *fx_double_sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p) fail_msg("the driver double has no %s", name);
    return p;
}

static inline fx_double_t *fx_double(void) {
    static fx_double_t d;
    if (d.h) return &d;
    const char *path = getenv("PLATEAU_LIBCUDA");
    if (!path || !*path) fail_msg("PLATEAU_TEST_BACKEND=cuda needs PLATEAU_LIBCUDA naming the driver double");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) fail_msg("dlopen %s: %s", path, dlerror());
    *(void **)&d.reset = fx_double_sym(h, "pl_cuda_double_reset");
    *(void **)&d.counters = fx_double_sym(h, "pl_cuda_double_counters");
    *(void **)&d.live = fx_double_sym(h, "pl_cuda_double_live");
    *(void **)&d.last_violation = fx_double_sym(h, "pl_cuda_double_last_violation");
    *(void **)&d.retain = fx_double_sym(h, "cuDevicePrimaryCtxRetain");
    *(void **)&d.release = fx_double_sym(h, "cuDevicePrimaryCtxRelease_v2");
    *(void **)&d.set_current = fx_double_sym(h, "cuCtxSetCurrent");
    *(void **)&d.stream_create = fx_double_sym(h, "cuStreamCreate");
    *(void **)&d.stream_destroy = fx_double_sym(h, "cuStreamDestroy_v2");
    d.h = h;
    return &d;
}

static inline pl_cuda_double_counters_t fx_double_counters(void) {
    pl_cuda_double_counters_t c;
    fx_double()->counters(&c);
    return c;
}

/* Reconfigure the double from sim options (+ `extra`, e.g. "fail_code:999") and create the cuda backend. */
static inline void fx_cuda_backend(fixture_t *f, const pl_sim_options_t *o, const char *extra) {
    char conf[512];
    snprintf(conf, sizeof conf, "capacity:%zu,granularity:%zu,fail_alloc_at:%llu,fail_map_at:%llu,leak_exitcode:97%s%s",
             o->capacity_bytes, o->granularity_bytes, (unsigned long long)o->fail_alloc_at,
             (unsigned long long)o->fail_map_at, extra && *extra ? "," : "", extra ? extra : "");
    if (fx_double()->reset(conf)) fail_msg("pl_cuda_double_reset(\"%s\") failed", conf);
    char err[512];
    int rc = pl_backend_cuda_create(0, &f->be, err, sizeof err);
    if (rc) fail_msg("pl_backend_cuda_create: %d %s", rc, err);
    assert_string_equal(f->be->ops->name, "cuda");
    f->cuda = true;
}

/* Everything given back to the double, and no call broke the driver's contract. */
static inline void fx_double_assert_clean(void) {
    pl_cuda_double_counters_t c = fx_double_counters();
    if (c.n_violations) fail_msg("driver contract broken %llu time(s), last: %s", (unsigned long long)c.n_violations,
                                 fx_double()->last_violation());
    assert_int_equal(c.n_leaks, 0);
    assert_int_equal(fx_double()->live(1), 0);
    assert_int_equal(c.used_bytes, 0);
    assert_int_equal(c.n_ctx_active, 0);
    /* every page the allocator unmapped was unmapped after a stream sync (pages mapped by a failed, injected
     * growth are given back unsynchronised: they were never handed out) */
    if (c.n_injected == 0 && c.n_unmap_synced != c.n_unmap)
        fail_msg("%llu of %llu cuMemUnmap calls had no cuStreamSynchronize before them",
                 (unsigned long long)(c.n_unmap - c.n_unmap_synced), (unsigned long long)c.n_unmap);
}
#endif

/* A device with options *o (the sim backend, or the double configured from *o) and an allocator with config
 * `conf` (a string). */
static inline void fx_open_opts(fixture_t *f, const pl_sim_options_t *o, const char *conf) {
    memset(f, 0, sizeof *f);
    if (fx_want_cuda()) {
#if PL_HAVE_CUDA
        fx_cuda_backend(f, o, NULL);
#else
        fail_msg("PLATEAU_TEST_BACKEND=cuda in a build without CUDA's headers");
#endif
    } else {
        assert_int_equal(pl_backend_sim_create(o, &f->be), 0);
    }
    pl_alloc_config_t c;
    char err[512];
    if (pl_alloc_config_parse(conf, &c, err, sizeof err)) fail_msg("config '%s': %s", conf, err);
    assert_int_equal(pl_alloc_create(f->be, &c, &f->a, err, sizeof err), 0);
}

/* A device of `capacity` bytes (touch as given, sim only) and an allocator with config `conf`. */
static inline void fx_open(fixture_t *f, size_t capacity, bool touch, const char *conf) {
    pl_sim_options_t o;
    pl_sim_options_default(&o);
    o.capacity_bytes = capacity;
    o.touch = touch;
    fx_open_opts(f, &o, conf);
}

/* Stream i (0 <= i < FX_MAX_STREAMS) of this fixture's device: i itself on sim; on cuda, a stream created on the
 * double the first time (0 stays the default stream), destroyed by fx_close. */
static inline pl_stream_t fx_stream(fixture_t *f, int i) {
    assert_true(i >= 0 && i < FX_MAX_STREAMS);
    if (!f->cuda || i == 0) return (pl_stream_t)i;
#if PL_HAVE_CUDA
    if (!f->streams[i]) {
        fx_double_t *d = fx_double();
        if (!f->ctx) {
            CUcontext ctx = NULL;
            assert_int_equal(d->retain(&ctx, 0), CUDA_SUCCESS);
            f->ctx = ctx;
        }
        assert_int_equal(d->set_current((CUcontext)f->ctx), CUDA_SUCCESS);
        CUstream s = NULL;
        assert_int_equal(d->stream_create(&s, 0), CUDA_SUCCESS);
        f->streams[i] = (pl_stream_t)s;
    }
#endif
    return f->streams[i];
}

/* Hold (or release) fx_stream(f, i): its recorded events stay pending while held. Only the sim backend can;
 * returns false (nothing done) on cuda, whose double runs every stream's work synchronously. */
static inline bool fx_hold_stream(fixture_t *f, int i, bool held) {
    if (f->cuda) return false;
    pl_backend_sim_hold_stream(f->be, fx_stream(f, i), held);
    return true;
}

static inline void fx_check(fixture_t *f) {
    char err[512];
    if (pl_alloc_check(f->a, err, sizeof err)) fail_msg("invariant broken: %s", err);
}

static inline void fx_close(fixture_t *f) {
    fx_check(f);
    pl_alloc_destroy(f->a);
#if PL_HAVE_CUDA
    if (f->cuda) {
        fx_double_t *d = fx_double();
        for (int i = 0; i < FX_MAX_STREAMS; i++)
            if (f->streams[i]) assert_int_equal(d->stream_destroy((CUstream)f->streams[i]), CUDA_SUCCESS);
        if (f->ctx) {
            assert_int_equal(d->set_current(NULL), CUDA_SUCCESS);
            assert_int_equal(d->release(0), CUDA_SUCCESS);
        }
    }
#endif
    pl_backend_destroy(f->be);
#if PL_HAVE_CUDA
    if (f->cuda) fx_double_assert_clean();
#endif
}

static inline pl_alloc_stats_t fx_stats(fixture_t *f) {
    pl_alloc_stats_t s;
    pl_alloc_get_stats(f->a, &s);
    return s;
}
