/* tests/allocator/test_alloc.c: one test per allocator rule (pools, split, merge, best fit, streams,
 * max_split_size, record_stream, GC, OOM path, stats, snapshot, hook, observer, misuse). */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

#define GiB ((size_t)1 << 30)

static void test_alloc_small_pool_split(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, GiB, true, "");
    char *p = pl_alloc_malloc(f.a, 100, 0), *q = pl_alloc_malloc(f.a, 512, 0);
    assert_non_null(p);
    assert_int_equal(pl_alloc_block_size(f.a, p), 512);
    assert_ptr_equal(q, p + 512); /* carved from the same 2 MiB segment, split at 512 B */
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.segment[PL_POOL_SMALL].current, 1);
    assert_int_equal(s.reserved_bytes[PL_POOL_SMALL].current, 2 * MiB);
    assert_int_equal(s.allocated_bytes[PL_POOL_ALL].current, 1024);
    assert_int_equal(s.requested_bytes[PL_POOL_ALL].current, 612);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].current, 1);
    assert_int_equal(s.inactive_split_bytes[PL_POOL_SMALL].current, 2 * MiB - 1024);
    memset(p, 1, 100);
    memset(q, 2, 512);
    void *z = pl_alloc_malloc(f.a, 0, 0); /* size 0: unique non-NULL 512 B block */
    assert_non_null(z);
    assert_int_equal(pl_alloc_block_size(f.a, z), 512);
    pl_alloc_free(f.a, z);
    pl_alloc_free(f.a, p);
    pl_alloc_free(f.a, q);
    fx_check(&f);
    s = fx_stats(&f);
    assert_int_equal(s.inactive_split[PL_POOL_ALL].current, 0); /* merged back into one whole segment */
    assert_int_equal(s.releasable_bytes, 2 * MiB);
    fx_close(&f);
}

static void test_alloc_large_pool_split_rule(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, GiB, true, "");
    /* 9 MiB from a 20 MiB segment: remainder 11 MiB > 1 MiB, split */
    void *a = pl_alloc_malloc(f.a, 9 * MiB, 0);
    assert_int_equal(pl_alloc_block_size(f.a, a), 9 * MiB);
    /* 19.5 MiB: segment rounded to 20 MiB, remainder 0.5 MiB <= 1 MiB: not split */
    void *b = pl_alloc_malloc(f.a, 19 * MiB + 512 * KiB, 0);
    assert_int_equal(pl_alloc_block_size(f.a, b), 20 * MiB);
    /* 1.5 MiB: large pool, carved from a's segment remainder (best fit 11 MiB) */
    char *c = pl_alloc_malloc(f.a, MiB + 512 * KiB, 0);
    assert_ptr_equal(c, (char *)a + 9 * MiB);
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.segment[PL_POOL_LARGE].current, 2);
    assert_int_equal(s.num_device_alloc, 2);
    pl_alloc_free(f.a, a);
    pl_alloc_free(f.a, b);
    pl_alloc_free(f.a, c);
    fx_close(&f);
}

static void test_alloc_merge_neighbours(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, GiB, true, "");
    char *x = pl_alloc_malloc(f.a, 4 * MiB, 0), *y = pl_alloc_malloc(f.a, 4 * MiB, 0),
         *z = pl_alloc_malloc(f.a, 4 * MiB, 0);
    assert_ptr_equal(y, x + 4 * MiB);
    assert_ptr_equal(z, y + 4 * MiB);
    pl_alloc_free(f.a, x);
    pl_alloc_free(f.a, z); /* merges with the 8 MiB tail */
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.inactive_split[PL_POOL_LARGE].current, 2);
    assert_int_equal(s.largest_free_bytes, 12 * MiB);
    pl_alloc_free(f.a, y); /* merges both sides: one free 20 MiB block */
    s = fx_stats(&f);
    assert_int_equal(s.inactive_split[PL_POOL_LARGE].current, 0);
    assert_int_equal(s.largest_free_bytes, 20 * MiB);
    assert_true(s.fragmentation == 0.0);
    /* the merged block serves a 16 MiB request in place */
    void *w = pl_alloc_malloc(f.a, 16 * MiB, 0);
    assert_ptr_equal(w, x);
    assert_int_equal(fx_stats(&f).num_device_alloc, 1);
    pl_alloc_free(f.a, w);
    fx_close(&f);
}

static void test_alloc_best_fit(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, GiB, true, "");
    /* one 20 MiB segment: [4 MiB x][2 MiB s1][2 MiB y][2 MiB s2][10 MiB rest] */
    char *x = pl_alloc_malloc(f.a, 4 * MiB, 0);
    void *s1 = pl_alloc_malloc(f.a, 2 * MiB, 0);
    char *y = pl_alloc_malloc(f.a, 2 * MiB, 0);
    void *s2 = pl_alloc_malloc(f.a, 2 * MiB, 0);
    pl_alloc_free(f.a, x);
    pl_alloc_free(f.a, y);
    /* free blocks: 4 MiB at x, 2 MiB at y, 10 MiB tail: a 2 MiB request takes y (best fit), not x */
    assert_ptr_equal(pl_alloc_malloc(f.a, 2 * MiB, 0), y);
    /* 3 MiB: best fit is x (4 MiB), split (remainder 1 MiB is not > 1 MiB: not split!) */
    void *x2 = pl_alloc_malloc(f.a, 3 * MiB, 0);
    assert_ptr_equal(x2, x);
    assert_int_equal(pl_alloc_block_size(f.a, x2), 4 * MiB);
    pl_alloc_free(f.a, x2);
    pl_alloc_free(f.a, y);
    pl_alloc_free(f.a, s1);
    pl_alloc_free(f.a, s2);
    fx_close(&f);
}

static void test_alloc_streams_are_separate(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, GiB, true, "");
    void *p = pl_alloc_malloc(f.a, 4 * MiB, 1);
    pl_alloc_free(f.a, p);
    void *q = pl_alloc_malloc(f.a, 4 * MiB, 2); /* a free block of stream 1 is not used by stream 2 */
    assert_true(q != p);
    assert_int_equal(fx_stats(&f).num_device_alloc, 2);
    void *r = pl_alloc_malloc(f.a, 4 * MiB, 1); /* but is by stream 1 */
    assert_ptr_equal(r, p);
    pl_alloc_free(f.a, q);
    pl_alloc_free(f.a, r);
    fx_close(&f);
}

static void test_alloc_max_split_small_request(void **state) {
    (void)state;
    for (int limited = 0; limited < 2; limited++) {
        fixture_t f;
        fx_open(&f, GiB, true, limited ? "max_split_size_mb:20" : "");
        char *big = pl_alloc_malloc(f.a, 30 * MiB, 0);
        pl_alloc_free(f.a, big);
        /* a 3 MiB request after a 30 MiB free block: under max_split_size_mb:20 the oversize block is not split */
        void *p = pl_alloc_malloc(f.a, 3 * MiB, 0);
        pl_alloc_stats_t s = fx_stats(&f);
        if (limited) {
            assert_true((char *)p < big || (char *)p >= big + 30 * MiB);
            assert_int_equal(s.num_device_alloc, 2);
            assert_int_equal(s.segment[PL_POOL_LARGE].current, 2);
        } else {
            assert_ptr_equal(p, big);
            assert_int_equal(s.num_device_alloc, 1);
        }
        pl_alloc_free(f.a, p);
        fx_close(&f);
    }
}

static void test_alloc_max_split_oversize_request(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, GiB, true, "max_split_size_mb:20"); /* max_non_split_rounding_mb defaults to 20 */
    char *big = pl_alloc_malloc(f.a, 64 * MiB, 0);
    pl_alloc_free(f.a, big);
    void *p = pl_alloc_malloc(f.a, 40 * MiB, 0); /* waste 24 MiB >= 20: a new segment */
    assert_true(p != big);
    void *q = pl_alloc_malloc(f.a, 50 * MiB, 0); /* waste 14 MiB < 20: the whole cached block, unsplit */
    assert_ptr_equal(q, big);
    assert_int_equal(pl_alloc_block_size(f.a, q), 64 * MiB);
    pl_alloc_free(f.a, p);
    pl_alloc_free(f.a, q);
    fx_close(&f);
    fx_open(&f, GiB, true, "max_split_size_mb:20,max_non_split_rounding_mb:30");
    big = pl_alloc_malloc(f.a, 64 * MiB, 0);
    pl_alloc_free(f.a, big);
    p = pl_alloc_malloc(f.a, 40 * MiB, 0); /* waste 24 < 30 now */
    assert_ptr_equal(p, big);
    pl_alloc_free(f.a, p);
    fx_close(&f);
}

static void test_alloc_record_stream_defers_reuse(void **state) {
    (void)state;
    if (fx_want_cuda()) {
        /* The driver double runs all work synchronously: an event is complete as soon as it is recorded, so a
         * deferred reuse cannot be observed there (no "held stream" in the double). test_backend_cuda's
         * events_and_record_stream covers record_stream's driver calls on cuda; the stress test runs
         * record_stream on real streams of the double. */
        skip();
    }
    fixture_t f;
    fx_open(&f, GiB, true, "");
    pl_stream_t s1 = fx_stream(&f, 1), s2 = fx_stream(&f, 2);
    assert_true(fx_hold_stream(&f, 2, true)); /* work queued on stream 2 is still running */
    void *p = pl_alloc_malloc(f.a, 4 * MiB, s1);
    assert_int_equal(pl_alloc_record_stream(f.a, p, s2), 0);
    assert_int_equal(pl_alloc_record_stream(f.a, p, s1), 0); /* own stream: ignored */
    assert_int_equal(pl_alloc_record_stream(f.a, (char *)p + 512, s2), -EINVAL);
    pl_alloc_free(f.a, p);
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.allocated_bytes[PL_POOL_ALL].current, 0);
    assert_int_equal(s.active_bytes[PL_POOL_ALL].current, 4 * MiB); /* pending free */
    void *q = pl_alloc_malloc(f.a, 4 * MiB, s1);
    assert_true(q != p); /* not reused while stream 2's event is pending */
    char *snap;
    size_t len;
    assert_int_equal(pl_alloc_snapshot_json(f.a, &snap, &len), 0);
    assert_non_null(strstr(snap, "\"requested_size\":4194304,\"state\":\"active_pending_free\"")); /* kept while pending */
    free(snap);
    pl_alloc_empty_cache(f.a); /* cannot synchronize a held stream: the block stays */
    assert_int_equal(fx_stats(&f).active_bytes[PL_POOL_ALL].current, 8 * MiB);
    fx_check(&f);
    assert_true(fx_hold_stream(&f, 2, false));
    void *r = pl_alloc_malloc(f.a, 4 * MiB, s1); /* events complete: p's block is reused */
    assert_ptr_equal(r, p);
    assert_int_equal(fx_stats(&f).active_bytes[PL_POOL_ALL].current, 8 * MiB);
    pl_alloc_free(f.a, q);
    pl_alloc_free(f.a, r);
    fx_close(&f);
}

static void test_alloc_gc_threshold(void **state) {
    (void)state;
    size_t res[2], dev_free[2];
    for (int gc = 0; gc < 2; gc++) {
        fixture_t f;
        fx_open(&f, 100 * MiB, false, gc ? "garbage_collection_threshold:0.5" : "");
        void *p[4];
        for (int i = 0; i < 4; i++) p[i] = pl_alloc_malloc(f.a, 12 * MiB, 0);
        for (int i = 0; i < 4; i++) pl_alloc_free(f.a, p[i]);
        void *q = pl_alloc_malloc(f.a, 14 * MiB, 0); /* reserved 48 <= 50: no GC yet */
        pl_alloc_free(f.a, q);
        q = pl_alloc_malloc(f.a, 16 * MiB, 0); /* reserved 62 > 50: GC releases old cached blocks first */
        assert_non_null(q);
        pl_alloc_stats_t s = fx_stats(&f);
        res[gc] = (size_t)s.reserved_bytes[PL_POOL_ALL].current;
        dev_free[gc] = (size_t)s.num_device_free;
        pl_alloc_free(f.a, q);
        fx_close(&f);
    }
    assert_int_equal(dev_free[0], 0);
    assert_true(dev_free[1] >= 1);
    assert_int_equal(res[0], 78 * MiB);
    assert_true(res[1] <= 66 * MiB);
}

typedef struct events {
    int n[8];
    pl_alloc_event_t last[8];
} events_t;

static void hook(void *ctx, const pl_alloc_event_t *ev) {
    events_t *e = ctx;
    e->n[ev->kind]++;
    e->last[ev->kind] = *ev;
}

static void test_alloc_oom_message_and_event(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, 64 * MiB, true, "");
    events_t ev = {0};
    pl_alloc_set_hook(f.a, hook, &ev);
    void *a = pl_alloc_malloc(f.a, 40 * MiB, 0);
    assert_non_null(a);
    assert_null(pl_alloc_malloc(f.a, 40 * MiB, 0));
    const char *msg = pl_alloc_last_error();
    assert_non_null(strstr(msg, "Tried to allocate 40.00 MiB"));
    assert_non_null(strstr(msg, "total capacity of 64.00 MiB"));
    assert_non_null(strstr(msg, "of which 24.00 MiB is free"));
    assert_non_null(strstr(msg, "40.00 MiB is allocated by plateau"));
    assert_non_null(strstr(msg, "0 bytes is reserved by plateau but unallocated"));
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.num_ooms, 1);
    assert_int_equal(s.num_alloc_retries, 1);
    assert_int_equal(ev.n[PL_ALLOC_EV_OOM], 1);
    assert_int_equal(ev.last[PL_ALLOC_EV_OOM].requested_bytes, 40 * MiB);
    assert_int_equal(ev.n[PL_ALLOC_EV_ALLOC], 1);
    assert_int_equal(ev.n[PL_ALLOC_EV_SEGMENT_MAP], 1);
    assert_int_equal(ev.last[PL_ALLOC_EV_SEGMENT_MAP].size_bytes, 40 * MiB);
    /* absurd sizes fail cleanly, on both paths */
    assert_null(pl_alloc_malloc(f.a, SIZE_MAX, 0));
    assert_null(pl_alloc_malloc(f.a, SIZE_MAX / 2, 0));
    fx_check(&f);
    pl_alloc_free(f.a, a);
    assert_int_equal(ev.n[PL_ALLOC_EV_FREE], 1);
    assert_ptr_equal((void *)ev.last[PL_ALLOC_EV_FREE].addr, a);
    fx_close(&f);
}

static void test_alloc_oom_releases_cache_and_retries(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, 64 * MiB, true, "");
    void *a = pl_alloc_malloc(f.a, 40 * MiB, 0);
    pl_alloc_free(f.a, a); /* 40 MiB cached, unusable for 50 MiB */
    void *b = pl_alloc_malloc(f.a, 50 * MiB, 0);
    assert_non_null(b); /* the cached segment was released, then the device allocation succeeded */
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.num_device_free, 1);
    assert_int_equal(s.num_ooms, 0);
    pl_alloc_free(f.a, b);
    /* fragmentation inside split segments: reserved-but-unallocated is large, the message suggests expandable */
    pl_alloc_empty_cache(f.a);
    void *p[6];
    for (int i = 0; i < 6; i++) assert_non_null(p[i] = pl_alloc_malloc(f.a, 9 * MiB, 0)); /* 3 x 20 MiB segments */
    for (int i = 0; i < 6; i += 2) pl_alloc_free(f.a, p[i]);
    assert_null(pl_alloc_malloc(f.a, 16 * MiB, 0));
    assert_non_null(strstr(pl_alloc_last_error(), "33.00 MiB is reserved by plateau but unallocated"));
    assert_non_null(strstr(pl_alloc_last_error(), "PLATEAU_ALLOC_CONF=expandable_segments:True"));
    /* PyTorch users know the PyTorch name; the message is whole (not cut by the error buffer) */
    assert_non_null(strstr(pl_alloc_last_error(), "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
    assert_non_null(strstr(pl_alloc_last_error(), "to avoid fragmentation."));
    for (int i = 1; i < 6; i += 2) pl_alloc_free(f.a, p[i]);
    fx_close(&f);
}

static void test_alloc_fault_injection(void **state) {
    (void)state;
    pl_sim_options_t o;
    pl_sim_options_default(&o);
    o.capacity_bytes = GiB;
    o.fail_alloc_at = 2;
    fixture_t f;
    fx_open_opts(&f, &o, "");
    char why[256];
    f.be->ops->last_error(f.be, why, sizeof why);
    assert_string_equal(why, ""); /* nothing failed yet */
    void *a = pl_alloc_malloc(f.a, 30 * MiB, 0);
    assert_non_null(a);
    /* the 2nd device allocation fails; nothing is cached, so the retry (3rd call) succeeds */
    void *b = pl_alloc_malloc(f.a, 30 * MiB, 0);
    assert_non_null(b);
    /* the backend's last_error op names the failed call; the retry's success does not clear it */
    f.be->ops->last_error(f.be, why, sizeof why);
    assert_non_null(strstr(why, f.cuda ? "cuMemAlloc_v2(31457280 bytes)" : "sim mem_alloc(31457280 bytes): injected "
                                                                           "failure (fail_alloc_at:2)"));
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.num_alloc_retries, 1); /* nothing cached to free: the retry after empty_cache succeeds */
    assert_int_equal(s.num_device_alloc, 2);
    pl_alloc_free(f.a, a);
    pl_alloc_free(f.a, b);
    fx_close(&f);
}

/* A backend whose plain allocations fail with a device error (not OOM) and which explains it through its
 * last_error op: the sim with two ops replaced. */
static int lost_mem_alloc(pl_backend_t *b, size_t size, uintptr_t *out) {
    (void)b, (void)size, (void)out;
    return -EIO;
}
static void lost_last_error(pl_backend_t *b, char *buf, size_t len) {
    (void)b;
    snprintf(buf, len, "lostdev: cuMemAlloc_v2 said the device fell off the bus");
}

static void test_alloc_device_error_names_backend_call(void **state) {
    (void)state;
    pl_sim_options_t o;
    pl_sim_options_default(&o);
    o.capacity_bytes = GiB;
    pl_backend_t *be;
    assert_int_equal(pl_backend_sim_create(&o, &be), 0);
    static pl_backend_ops_t lost;
    lost = *be->ops;
    lost.name = "lostdev";
    lost.mem_alloc = lost_mem_alloc;
    lost.last_error = lost_last_error;
    be->ops = &lost;
    pl_alloc_config_t cfg;
    pl_alloc_config_default(&cfg);
    pl_alloc_t *a;
    assert_int_equal(pl_alloc_create(be, &cfg, &a, NULL, 0), 0);
    assert_null(pl_alloc_malloc(a, 4 * MiB, 0));
    const char *msg = pl_alloc_last_error();
    assert_non_null(strstr(msg, "the lostdev backend failed with device error (EIO), which is not out of memory: "
                                "lostdev: cuMemAlloc_v2 said the device fell off the bus"));
    pl_alloc_stats_t s;
    pl_alloc_get_stats(a, &s);
    assert_int_equal(s.num_ooms, 0);
    pl_alloc_destroy(a);
    pl_backend_destroy(be);
}

static void test_alloc_stats_releasable_and_fragmentation(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, GiB, true, "");
    void *a = pl_alloc_malloc(f.a, 12 * MiB, 0); /* own 12 MiB segment */
    char *b = pl_alloc_malloc(f.a, 4 * MiB, 0);  /* 20 MiB segment */
    char *c = pl_alloc_malloc(f.a, 4 * MiB, 0);
    void *d = pl_alloc_malloc(f.a, 4 * MiB, 0);
    pl_alloc_free(f.a, a);
    pl_alloc_free(f.a, c);
    pl_alloc_stats_t s = fx_stats(&f);
    /* free: 12 MiB (whole segment), 4 MiB hole, 8 MiB tail */
    assert_int_equal(s.largest_free_bytes, 12 * MiB);
    assert_int_equal(s.releasable_bytes, 12 * MiB);
    assert_true(s.fragmentation > 0.49 && s.fragmentation < 0.51); /* 1 - 12/24 */
    assert_int_equal(s.reserved_bytes[PL_POOL_ALL].current, 32 * MiB);
    assert_int_equal(s.reserved_bytes[PL_POOL_ALL].peak, 32 * MiB);
    assert_int_equal(s.allocated_bytes[PL_POOL_LARGE].peak, 24 * MiB);
    assert_int_equal(s.allocation[PL_POOL_ALL].allocated, 4);
    assert_int_equal(s.allocation[PL_POOL_ALL].freed, 2);
    assert_int_equal(s.capacity_bytes, GiB);
    pl_alloc_empty_cache(f.a);
    s = fx_stats(&f);
    assert_int_equal(s.reserved_bytes[PL_POOL_ALL].current, 20 * MiB);
    assert_int_equal(s.num_device_free, 1);
    assert_int_equal(s.releasable_bytes, 0);
    pl_alloc_reset_peak_stats(f.a);
    s = fx_stats(&f);
    assert_int_equal(s.reserved_bytes[PL_POOL_ALL].peak, 20 * MiB);
    assert_int_equal(s.allocation[PL_POOL_ALL].allocated, 0);
    pl_alloc_free(f.a, b);
    pl_alloc_free(f.a, d);
    fx_close(&f);
}

static void test_alloc_per_process_fraction(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, 100 * MiB, false, "per_process_memory_fraction:0.5");
    assert_int_equal(fx_stats(&f).capacity_bytes, 50 * MiB);
    void *a = pl_alloc_malloc(f.a, 40 * MiB, 0);
    assert_non_null(a);
    assert_null(pl_alloc_malloc(f.a, 20 * MiB, 0)); /* the device has room, the fraction does not */
    assert_non_null(strstr(pl_alloc_last_error(), "total capacity of 50.00 MiB"));
    pl_alloc_free(f.a, a);
    fx_close(&f);
}

static void test_alloc_snapshot_json(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, GiB, true, "");
    void *a = pl_alloc_malloc(f.a, 1000, 3);
    void *b = pl_alloc_malloc(f.a, 3 * MiB, 0);
    char *js;
    size_t len;
    assert_int_equal(pl_alloc_snapshot_json(f.a, &js, &len), 0);
    assert_int_equal(strlen(js), len);
    assert_true(js[0] == '{' && js[len - 1] == '}');
    char want[128];
    snprintf(want, sizeof want, "{\"address\":%" PRIuPTR ",\"size\":1024,\"requested_size\":1000,\"state\":\"active_allocated\"}",
             (uintptr_t)a);
    assert_non_null(strstr(js, want));
    assert_non_null(strstr(js, "\"stream\":3,\"pool\":\"small\",\"expandable\":false"));
    assert_non_null(strstr(js, "\"total_size\":20971520"));
    assert_non_null(strstr(js, "\"state\":\"inactive\""));
    free(js);
    pl_alloc_free(f.a, a);
    /* a freed (cached) block reports no requested size */
    assert_int_equal(pl_alloc_snapshot_json(f.a, &js, &len), 0);
    snprintf(want, sizeof want, "{\"address\":%" PRIuPTR ",\"size\":2097152,\"requested_size\":0,\"state\":\"inactive\"}",
             (uintptr_t)a);
    assert_non_null(strstr(js, want));
    free(js);
    pl_alloc_free(f.a, b);
    fx_close(&f);
}

/* pl_alloc_snapshot_json of test_alloc_snapshot_json_bytes, recorded from the printf writer it had before the JSON
 * emitter (common/json.c) took over: the port must not change a byte */
#define SNAPSHOT_WANT \
    "{\"device\":0,\"capacity\":1073741824,\"reserved\":25165824,\"segments\":[{\"address\":A," \
    "\"total_size\":2097152,\"reserved_address_space\":2097152,\"stream\":0,\"pool\":\"small\"," \
    "\"expandable\":false,\"blocks\":[{\"address\":A,\"size\":2097152,\"requested_size\":0," \
    "\"state\":\"inactive\"}]},{\"address\":A,\"total_size\":20971520," \
    "\"reserved_address_space\":20971520,\"stream\":0,\"pool\":\"large\",\"expandable\":false," \
    "\"blocks\":[{\"address\":A,\"size\":3145728,\"requested_size\":3145728," \
    "\"state\":\"active_allocated\"},{\"address\":A,\"size\":17825792,\"requested_size\":0," \
    "\"state\":\"inactive\"}]},{\"address\":A,\"total_size\":2097152," \
    "\"reserved_address_space\":2097152,\"stream\":3,\"pool\":\"small\",\"expandable\":false," \
    "\"blocks\":[{\"address\":A,\"size\":1024,\"requested_size\":1000," \
    "\"state\":\"active_allocated\"},{\"address\":A,\"size\":2096128,\"requested_size\":0," \
    "\"state\":\"inactive\"}]}]}"
#define SNAPSHOT_WANT_EXPANDABLE \
    "{\"device\":0,\"capacity\":1073741824,\"reserved\":4194304,\"segments\":[{\"address\":A," \
    "\"total_size\":4194304,\"reserved_address_space\":2147483648,\"stream\":0,\"pool\":\"large\"," \
    "\"expandable\":true,\"blocks\":[{\"address\":A,\"size\":3145728,\"requested_size\":3145728," \
    "\"state\":\"active_allocated\"},{\"address\":A,\"size\":1048576,\"requested_size\":0," \
    "\"state\":\"inactive\"}]}]}"
/* the snapshot with every "address":N as "address":A (the sim backend's addresses vary), malloc'd */
static char *snapshot_shape(pl_alloc_t *a) {
    char *js;
    size_t len;
    assert_int_equal(pl_alloc_snapshot_json(a, &js, &len), 0);
    assert_int_equal(strlen(js), len);
    char *o = malloc(len + 1), *w = o;
    assert_non_null(o);
    for (const char *r = js; *r;) {
        bool at = !strncmp(r, "\"address\":", 10);
        if (!at) {
            *w++ = *r++;
            continue;
        }
        memcpy(w, r, 10);
        w += 10, r += 10;
        *w++ = 'A';
        while (*r >= '0' && *r <= '9') r++;
    }
    *w = 0;
    free(js);
    return o;
}

/* The snapshot byte for byte (addresses aside): two streams, both pools, a cached block, an expandable segment. */
static void test_alloc_snapshot_json_bytes(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, GiB, true, "");
    void *a = pl_alloc_malloc(f.a, 1000, 3);
    void *b = pl_alloc_malloc(f.a, 3 * MiB, 0);
    void *c = pl_alloc_malloc(f.a, 5000, 0);
    pl_alloc_free(f.a, c);
    char *got = snapshot_shape(f.a);
    assert_string_equal(got, SNAPSHOT_WANT);
    free(got);
    pl_alloc_free(f.a, a);
    pl_alloc_free(f.a, b);
    fx_close(&f);

    fx_open(&f, GiB, true, "expandable_segments:True");
    a = pl_alloc_malloc(f.a, 3 * MiB, 0);
    got = snapshot_shape(f.a);
    assert_string_equal(got, SNAPSHOT_WANT_EXPANDABLE);
    free(got);
    pl_alloc_free(f.a, a);
    fx_close(&f);

    fx_open(&f, GiB, true, "");
    got = snapshot_shape(f.a);
    assert_string_equal(got, "{\"device\":0,\"capacity\":1073741824,\"reserved\":0,\"segments\":[]}");
    free(got);
    fx_close(&f);
}

static size_t count_str(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Cached blocks of one size class (in one treap) report requested size 0 in the snapshot, every one of them, and
 * the live ones between them their true requested size. */
static void test_alloc_snapshot_free_blocks_requested_zero(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, GiB, true, "");
    void *x[16], *y[16];
    for (int i = 0; i < 16; i++) {
        x[i] = pl_alloc_malloc(f.a, 4096, 0);
        y[i] = pl_alloc_malloc(f.a, 4000, 0); /* keeps the x blocks apart: no merge */
    }
    for (int i = 0; i < 16; i++) pl_alloc_free(f.a, x[i]);
    char *js;
    size_t len;
    assert_int_equal(pl_alloc_snapshot_json(f.a, &js, &len), 0);
    size_t n_inactive = count_str(js, "\"state\":\"inactive\"");
    assert_true(n_inactive >= 16); /* 16 free 4 KiB blocks + the segment's tail */
    assert_int_equal(count_str(js, "\"requested_size\":0,\"state\":\"inactive\""), n_inactive);
    assert_int_equal(count_str(js, "\"size\":4096,\"requested_size\":4000,\"state\":\"active_allocated\""), 16);
    free(js);
    fx_check(&f);
    for (int i = 0; i < 16; i++) pl_alloc_free(f.a, y[i]);
    fx_close(&f);
}

static int n_observed;
static pl_alloc_t *observed;

/* The process-wide observer looked up with dlsym (the test executable exports it). */
PL_API void plateau_alloc_observer(pl_alloc_t *a, bool created);
PL_API void plateau_alloc_observer(pl_alloc_t *a, bool created) {
    n_observed += created ? 1 : -1;
    if (created) observed = a;
}

static void test_alloc_observer(void **state) {
    (void)state;
    fixture_t f;
    int before = n_observed;
    fx_open(&f, GiB, true, "");
    assert_int_equal(n_observed, before + 1);
    assert_ptr_equal(observed, f.a);
    fx_close(&f);
    assert_int_equal(n_observed, before);
}

/* The names in alloc.h are the functions' real names: an observer that does not link the allocator finds them. */
static void test_alloc_observer_symbol_names(void **state) {
    (void)state;
    void *obs = dlsym(RTLD_DEFAULT, PL_ALLOC_OBSERVER_SYMBOL), *hook = dlsym(RTLD_DEFAULT, PL_ALLOC_SET_HOOK_SYMBOL);
    void *stats = dlsym(RTLD_DEFAULT, PL_ALLOC_GET_STATS_SYMBOL);
    pl_alloc_observer_fn want_obs = plateau_alloc_observer;
    void (*want_hook)(pl_alloc_t *, pl_alloc_hook_fn, void *) = pl_alloc_set_hook;
    void (*want_stats)(pl_alloc_t *, pl_alloc_stats_t *) = pl_alloc_get_stats;
    assert_memory_equal(&obs, &want_obs, sizeof obs);
    assert_memory_equal(&hook, &want_hook, sizeof hook);
    assert_memory_equal(&stats, &want_stats, sizeof stats);
}

static void test_alloc_free_unknown_pointer_aborts(void **state) {
    (void)state;
    /* deliberate misuse: a double free must stop the program, not corrupt the cache */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fixture_t f;
        fx_open(&f, GiB, true, "");
        void *p = pl_alloc_malloc(f.a, 4096, 0);
        pl_alloc_free(f.a, p);
        freopen("/dev/null", "w", stderr);
        pl_alloc_free(f.a, p);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

typedef struct thread_arg {
    pl_alloc_t *a;
    int id;                  /* 0..3: seed and byte pattern */
    pl_stream_t stream;      /* two threads share each stream */
    pl_stream_t rec_stream;  /* recorded on some blocks */
    int failures;
} thread_arg_t;

static void *worker(void *p) {
    thread_arg_t *t = p;
    uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(t->id + 1);
    unsigned char *live[32] = {0};
    size_t sizes[32] = {0};
    for (int i = 0; i < 4000; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        int k = (int)(seed % 32);
        if (live[k]) {
            for (size_t j = 0; j < sizes[k] && j < 65536; j += 97)
                if (live[k][j] != (unsigned char)t->id) t->failures++;
            pl_alloc_free(t->a, live[k]);
            live[k] = NULL;
        } else {
            sizes[k] = (size_t)(seed >> 20) % (3 * MiB) + 1;
            live[k] = pl_alloc_malloc(t->a, sizes[k], t->stream);
            if (!live[k]) {
                t->failures++;
                continue;
            }
            memset(live[k], (unsigned char)t->id, sizes[k] < 65536 ? sizes[k] : 65536);
            if (i % 50 == 0) pl_alloc_record_stream(t->a, live[k], t->rec_stream);
            if (i % 500 == 0) pl_alloc_empty_cache(t->a);
        }
    }
    for (int k = 0; k < 32; k++) pl_alloc_free(t->a, live[k]);
    return NULL;
}

static void test_alloc_threads(void **state) {
    (void)state;
    for (int exp = 0; exp < 2; exp++) {
        fixture_t f;
        fx_open(&f, GiB, true, exp ? "expandable_segments:True" : "");
        pthread_t th[4];
        thread_arg_t args[4];
        for (int i = 0; i < 4; i++) {
            args[i] = (thread_arg_t){.a = f.a, .id = i, .stream = fx_stream(&f, i % 2),
                                     .rec_stream = fx_stream(&f, 7)};
            assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            assert_int_equal(args[i].failures, 0);
        }
        pl_alloc_empty_cache(f.a);
        pl_alloc_stats_t s = fx_stats(&f);
        assert_int_equal(s.allocated_bytes[PL_POOL_ALL].current, 0);
        assert_int_equal(s.active_bytes[PL_POOL_ALL].current, 0);
        assert_int_equal(s.reserved_bytes[PL_POOL_ALL].current, 0);
        fx_close(&f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_small_pool_split),
        cmocka_unit_test(test_alloc_large_pool_split_rule),
        cmocka_unit_test(test_alloc_merge_neighbours),
        cmocka_unit_test(test_alloc_best_fit),
        cmocka_unit_test(test_alloc_streams_are_separate),
        cmocka_unit_test(test_alloc_max_split_small_request),
        cmocka_unit_test(test_alloc_max_split_oversize_request),
        cmocka_unit_test(test_alloc_record_stream_defers_reuse),
        cmocka_unit_test(test_alloc_snapshot_free_blocks_requested_zero),
        cmocka_unit_test(test_alloc_gc_threshold),
        cmocka_unit_test(test_alloc_oom_message_and_event),
        cmocka_unit_test(test_alloc_oom_releases_cache_and_retries),
        cmocka_unit_test(test_alloc_fault_injection),
        cmocka_unit_test(test_alloc_device_error_names_backend_call),
        cmocka_unit_test(test_alloc_stats_releasable_and_fragmentation),
        cmocka_unit_test(test_alloc_per_process_fraction),
        cmocka_unit_test(test_alloc_snapshot_json),
        cmocka_unit_test(test_alloc_snapshot_json_bytes),
        cmocka_unit_test(test_alloc_observer),
        cmocka_unit_test(test_alloc_observer_symbol_names),
        cmocka_unit_test(test_alloc_free_unknown_pointer_aborts),
        cmocka_unit_test(test_alloc_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
