/* allocator: the handle API (pl_alloc_malloc_block / pl_alloc_free_block, the fast replay's entry points) and the
 * compact statistics behind both paths.
 * - The handle API makes the same decisions as the public one: same outcomes, block sizes and stats after every op of
 *   a random script with OOMs, resets and several streams, under several configs; invariants hold throughout.
 * - The stats keep PyTorch's Stat semantics exactly: a reference model fed by the event hook (the old per-update
 *   code) agrees on current / peak / allocated / freed for every pool, across peak resets.
 * - active / active_bytes split from allocation / allocated_bytes only once a freed block waits for stream events.
 * - A batch (pl_alloc_run_batch: the handle API's loop inside the allocator) gives what the same ops give through the
 *   handle API one call at a time: failing ops, peak reserved and the gap at it, map / unmap event counts, stats
 *   after every chunk, block sizes.
 * - inactive_split moves by net changes, as PyTorch's: a split block shrinking or a free merging into its cached
 *   tail does not count a block leaving and another arriving.
 * - Misuse: a handle block freed twice (by call or by batch), or passed to pl_alloc_free, stops the process. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "batch.h"
#include "helpers.h"

static uint64_t rng_state;
static uint64_t rng(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static size_t draw_size(void) {
    uint64_t k = rng() % 100;
    if (k < 5) return (size_t)(rng() % 600);
    if (k < 65) return 512 + (size_t)(rng() % (256 * KiB));
    if (k < 92) return MiB + (size_t)(rng() % (8 * MiB));
    return 10 * MiB + (size_t)(rng() % (60 * MiB));
}

/* Free p through the API that gave it: the handle API's block, or the public API's pointer. */
static void free_either(pl_alloc_t *a, void *p, bool handle) {
    if (handle)
        pl_alloc_free_block(a, p);
    else
        pl_alloc_free(a, p);
}

#define N_OPS 3000
#define MAX_LIVE 120
#define SNAP_EVERY 200
#define N_SNAPS (N_OPS / SNAP_EVERY)

typedef struct run {
    bool ok[N_OPS];         /* malloc ops: success */
    size_t size[N_OPS];     /* malloc ops: block size */
    pl_alloc_stats_t snaps[N_SNAPS];
} run_t;

/* One script (seeded), through the public API (handle = false) or the handle API, on a fresh 384 MiB device. */
static void run_script(const char *conf, uint64_t seed, bool handle, run_t *out) {
    fixture_t f;
    fx_open(&f, 384 * MiB, false, conf);
    memset(out, 0, sizeof *out);
    rng_state = seed;
    void *live[MAX_LIVE];
    size_t n_live = 0;
    for (int i = 0; i < N_OPS; i++) {
        bool do_alloc = n_live < MAX_LIVE / 4 || (n_live < MAX_LIVE && (rng() & 1));
        if (do_alloc) {
            size_t size = draw_size();
            pl_stream_t st = fx_stream(&f, rng() % 4 == 0 ? 1 + (int)(rng() % 2) : 0);
            void *p;
            if (handle) {
                pl_block_t *b = pl_alloc_malloc_block(f.a, size, st);
                p = b;
                if (b) out->size[i] = b->size_bytes;
            } else {
                p = pl_alloc_malloc(f.a, size, st);
                if (p) out->size[i] = pl_alloc_block_size(f.a, p);
            }
            out->ok[i] = p != NULL;
            if (p) live[n_live++] = p;
        } else if (n_live) {
            size_t k = (size_t)(rng() % n_live);
            free_either(f.a, live[k], handle);
            live[k] = live[--n_live];
        }
        if (i == N_OPS / 3) pl_alloc_reset_peak_stats(f.a);
        if (i == 2 * N_OPS / 3) pl_alloc_empty_cache(f.a);
        if ((i + 1) % SNAP_EVERY == 0) {
            fx_check(&f);
            out->snaps[i / SNAP_EVERY] = fx_stats(&f);
        }
    }
    for (size_t k = 0; k < n_live; k++) free_either(f.a, live[k], handle);
    fx_close(&f);
}

static void handle_matches_public(const char *conf, uint64_t seed) {
    static run_t pub, hdl; /* large: not on the stack */
    run_script(conf, seed, false, &pub);
    run_script(conf, seed, true, &hdl);
    int n_ok = 0;
    for (int i = 0; i < N_OPS; i++) {
        if (pub.ok[i] != hdl.ok[i] || pub.size[i] != hdl.size[i])
            fail_msg("%s: op %d differs: public %d %zu, handle %d %zu", conf, i, pub.ok[i], pub.size[i], hdl.ok[i],
                     hdl.size[i]);
        n_ok += pub.ok[i];
    }
    for (int s = 0; s < N_SNAPS; s++) /* pl_alloc_stats_t is all 8-byte fields: no padding */
        assert_memory_equal(&pub.snaps[s], &hdl.snaps[s], sizeof pub.snaps[s]);
    assert_true(n_ok > N_OPS / 4);
    assert_true(pub.snaps[N_SNAPS - 1].num_ooms > 0); /* the script reaches the OOM path */
}

static void test_handle_default(void **state) {
    (void)state;
    handle_matches_public("", 1);
}

static void test_handle_expandable(void **state) {
    (void)state;
    handle_matches_public("expandable_segments:True", 2);
}

static void test_handle_max_split_gc(void **state) {
    (void)state;
    handle_matches_public("max_split_size_mb:32,garbage_collection_threshold:0.5", 3);
}

static void test_handle_roundup(void **state) {
    (void)state;
    handle_matches_public("roundup_power2_divisions:4,expandable_segments:True,garbage_collection_threshold:0.7", 4);
}

/* ---- stats against a reference model fed by the hook (PyTorch's Stat, updated for the pool and for ALL) ---- */

typedef struct ref {
    pl_stat_t allocation[PL_POOL_N], allocated_bytes[PL_POOL_N], requested_bytes[PL_POOL_N], reserved_bytes[PL_POOL_N];
} ref_t;

static void ref_add1(pl_stat_t *s, int64_t d) {
    s->current += d;
    if (d > 0) {
        s->allocated += d;
        if (s->current > s->peak) s->peak = s->current;
    } else {
        s->freed -= d;
    }
}

static void ref_add(pl_stat_t s[PL_POOL_N], int pool, int64_t d) {
    ref_add1(&s[PL_POOL_ALL], d);
    ref_add1(&s[pool], d);
}

static void ref_hook(void *ctx, const pl_alloc_event_t *ev) {
    ref_t *r = ctx;
    int64_t sz = (int64_t)ev->size_bytes, req = (int64_t)ev->requested_bytes;
    switch (ev->kind) {
    case PL_ALLOC_EV_ALLOC:
        ref_add(r->allocation, ev->pool, 1);
        ref_add(r->allocated_bytes, ev->pool, sz);
        ref_add(r->requested_bytes, ev->pool, req);
        break;
    case PL_ALLOC_EV_FREE:
        ref_add(r->allocation, ev->pool, -1);
        ref_add(r->allocated_bytes, ev->pool, -sz);
        ref_add(r->requested_bytes, ev->pool, -req);
        break;
    case PL_ALLOC_EV_SEGMENT_MAP: ref_add(r->reserved_bytes, ev->pool, sz); break;
    case PL_ALLOC_EV_SEGMENT_UNMAP: ref_add(r->reserved_bytes, ev->pool, -sz); break;
    default: break;
    }
}

static void ref_reset(pl_stat_t s[PL_POOL_N]) {
    for (int p = 0; p < PL_POOL_N; p++) {
        s[p].peak = s[p].current;
        s[p].allocated = s[p].freed = 0;
    }
}

static void assert_stat_equal(const pl_stat_t got[PL_POOL_N], const pl_stat_t want[PL_POOL_N], const char *what) {
    for (int p = 0; p < PL_POOL_N; p++)
        if (got[p].current != want[p].current || got[p].peak != want[p].peak || got[p].allocated != want[p].allocated ||
            got[p].freed != want[p].freed)
            fail_msg("%s[%d]: got %" PRId64 "/%" PRId64 "/%" PRId64 "/%" PRId64 ", want %" PRId64 "/%" PRId64 "/%" PRId64
                     "/%" PRId64 " (current/peak/allocated/freed)",
                     what, p, got[p].current, got[p].peak, got[p].allocated, got[p].freed, want[p].current,
                     want[p].peak, want[p].allocated, want[p].freed);
}

static void stats_reference(const char *conf, uint64_t seed, bool handle) {
    fixture_t f;
    fx_open(&f, 384 * MiB, false, conf); /* OOMs, cache release and GC included */
    ref_t ref;
    memset(&ref, 0, sizeof ref);
    pl_alloc_set_hook(f.a, ref_hook, &ref);
    rng_state = seed;
    void *live[MAX_LIVE];
    size_t n_live = 0;
    for (int i = 0; i < N_OPS; i++) {
        if (n_live < MAX_LIVE / 4 || (n_live < MAX_LIVE && (rng() & 1))) {
            size_t size = draw_size();
            void *p = handle ? (void *)pl_alloc_malloc_block(f.a, size, 0) : pl_alloc_malloc(f.a, size, 0);
            if (p) live[n_live++] = p;
        } else if (n_live) {
            size_t k = (size_t)(rng() % n_live);
            free_either(f.a, live[k], handle);
            live[k] = live[--n_live];
        }
        if (rng() % 500 == 0) {
            pl_alloc_reset_peak_stats(f.a);
            ref_reset(ref.allocation);
            ref_reset(ref.allocated_bytes);
            ref_reset(ref.requested_bytes);
            ref_reset(ref.reserved_bytes);
        }
        if (i % 50 == 0 || i == N_OPS - 1) {
            pl_alloc_stats_t s = fx_stats(&f);
            assert_stat_equal(s.allocation, ref.allocation, "allocation");
            assert_stat_equal(s.allocated_bytes, ref.allocated_bytes, "allocated_bytes");
            assert_stat_equal(s.requested_bytes, ref.requested_bytes, "requested_bytes");
            assert_stat_equal(s.reserved_bytes, ref.reserved_bytes, "reserved_bytes");
            /* nothing waited for stream events: active is allocation, field for field */
            assert_stat_equal(s.active, ref.allocation, "active");
            assert_stat_equal(s.active_bytes, ref.allocated_bytes, "active_bytes");
        }
    }
    pl_alloc_set_hook(f.a, NULL, NULL);
    for (size_t k = 0; k < n_live; k++) free_either(f.a, live[k], handle);
    fx_close(&f);
}

static void test_stats_reference_plain(void **state) {
    (void)state;
    stats_reference("", 11, false);
    stats_reference("max_split_size_mb:32", 12, true);
}

static void test_stats_reference_expandable(void **state) {
    (void)state;
    stats_reference("expandable_segments:True", 13, false);
    stats_reference("expandable_segments:True,garbage_collection_threshold:0.6", 14, true);
}

/* A freed block that waits for a held stream stays active: from then on active and allocation differ. */
static void test_stats_active_split(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, 256 * MiB, false, "");
    if (!fx_hold_stream(&f, 1, true)) {
        fx_close(&f);
        skip(); /* cuda double: no held streams */
    }
    void *p = pl_alloc_malloc(f.a, MiB, 0), *q = pl_alloc_malloc(f.a, 2 * MiB, 0);
    assert_non_null(p);
    assert_non_null(q);
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.active[PL_POOL_ALL].current, 2);
    assert_int_equal(s.active_bytes[PL_POOL_ALL].current, s.allocated_bytes[PL_POOL_ALL].current);
    assert_int_equal(pl_alloc_record_stream(f.a, p, fx_stream(&f, 1)), 0);
    pl_alloc_free(f.a, p);
    s = fx_stats(&f);
    assert_int_equal(s.allocation[PL_POOL_ALL].current, 1);
    assert_int_equal(s.allocation[PL_POOL_ALL].freed, 1);
    assert_int_equal(s.active[PL_POOL_ALL].current, 2); /* p is pending, still active */
    assert_int_equal(s.active[PL_POOL_ALL].freed, 0);
    assert_int_equal(s.active[PL_POOL_ALL].allocated, 2);
    assert_int_equal(s.active_bytes[PL_POOL_ALL].current, s.allocated_bytes[PL_POOL_ALL].current + (int64_t)MiB);
    fx_check(&f);
    pl_alloc_free(f.a, q);
    void *r = pl_alloc_malloc(f.a, 512, 0);
    assert_non_null(r);
    s = fx_stats(&f);
    assert_int_equal(s.active[PL_POOL_ALL].current, 2); /* p still waits, r is new */
    assert_int_equal(s.active[PL_POOL_ALL].peak, 2);
    assert_int_equal(s.allocation[PL_POOL_ALL].current, 1);
    fx_hold_stream(&f, 1, false);
    pl_alloc_empty_cache(f.a); /* processes the completed event */
    s = fx_stats(&f);
    assert_int_equal(s.active[PL_POOL_ALL].current, 1);
    assert_int_equal(s.active[PL_POOL_ALL].freed, 2);
    assert_int_equal(s.active_bytes[PL_POOL_ALL].current, s.allocated_bytes[PL_POOL_ALL].current);
    fx_check(&f);
    pl_alloc_reset_peak_stats(f.a);
    s = fx_stats(&f);
    assert_int_equal(s.active[PL_POOL_ALL].peak, 1);
    assert_int_equal(s.active[PL_POOL_ALL].allocated, 0);
    pl_alloc_free(f.a, r);
    fx_close(&f);
}

/* Handle blocks are not in the ptr map: the public API does not know them. */
static void test_handle_not_in_map(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, 256 * MiB, false, "");
    pl_block_t *b = pl_alloc_malloc_block(f.a, 3000, 0);
    assert_non_null(b);
    assert_int_equal(b->size_bytes, 3072);
    assert_int_equal(b->state, PL_BLOCK_ALLOCATED);
    assert_int_equal(pl_alloc_block_size(f.a, (void *)b->addr), 0);
    assert_int_equal(pl_alloc_record_stream(f.a, (void *)b->addr, fx_stream(&f, 1)), -EINVAL);
    fx_check(&f);
    pl_alloc_free_block(f.a, b);
    pl_alloc_free_block(f.a, NULL); /* no-op, like free(NULL) */
    fx_close(&f);
}

/* ---- batches ---- */

#define B_OPS 4000
#define B_SLOTS 100
#define B_CHUNK 250

/* A seeded script: allocations into empty slots, frees of full ones (some of whose mallocs fail), probes. */
static size_t make_ops(pl_alloc_op_t *ops, uint64_t seed) {
    rng_state = seed;
    bool full[B_SLOTS] = {false};
    size_t n = 0;
    for (int i = 0; i < B_OPS; i++) {
        uint32_t slot = (uint32_t)(rng() % B_SLOTS);
        uint16_t stream = (uint16_t)(rng() % 4 == 0 ? 1 + rng() % 2 : 0);
        if (rng() % 40 == 0) {
            ops[n++] = (pl_alloc_op_t){.size_bytes = draw_size(), .stream = stream, .kind = PL_ALLOC_OP_PROBE};
        } else if (full[slot]) {
            ops[n++] = (pl_alloc_op_t){.slot = slot, .kind = PL_ALLOC_OP_FREE};
            full[slot] = false;
        } else {
            ops[n++] = (pl_alloc_op_t){.size_bytes = draw_size(), .slot = slot, .stream = stream, .kind = PL_ALLOC_OP_ALLOC};
            full[slot] = true;
        }
    }
    return n;
}

typedef struct batch_run {
    size_t failed[B_OPS], n_failed;
    int64_t peak_reserved, unallocated_at_peak;
    int64_t n_map_events, n_unmap_events; /* batch: what the batch returned; one at a time: the allocator's */
    pl_alloc_stats_t snaps[B_OPS / B_CHUNK + 1];
    size_t n_snaps;
    size_t slot_size[B_SLOTS];  /* block size in each slot at the end, 0 = empty */
} batch_run_t;

static void run_ops(const char *conf, const pl_alloc_op_t *ops, size_t n, bool batch, batch_run_t *out) {
    fixture_t f;
    fx_open(&f, 384 * MiB, false, conf);
    memset(out, 0, sizeof *out);
    uint64_t streams[3];
    for (int k = 0; k < 3; k++) streams[k] = (uint64_t)fx_stream(&f, k);
    pl_block_t *slots[B_SLOTS] = {NULL};
    pl_alloc_batch_t bt = {.ops = ops, .slots = slots, .streams = streams, .peak_reserved = -1};
    for (size_t pos = 0; pos < n; pos += B_CHUNK) {
        size_t end = pos + B_CHUNK < n ? pos + B_CHUNK : n;
        if (batch) {
            for (size_t i = pos; i < end;) {
                i = pl_alloc_run_batch(f.a, &bt, i, end);
                if (i < end) out->failed[out->n_failed++] = i++;
            }
        } else { /* the same loop, one handle call at a time */
            for (size_t i = pos; i < end; i++) {
                const pl_alloc_op_t *e = &ops[i];
                if (e->kind == PL_ALLOC_OP_FREE) {
                    pl_alloc_free_block(f.a, slots[e->slot]);
                    slots[e->slot] = NULL;
                    continue;
                }
                pl_block_t *b = pl_alloc_malloc_block(f.a, e->size_bytes, (pl_stream_t)streams[e->stream]);
                if (e->kind == PL_ALLOC_OP_ALLOC)
                    slots[e->slot] = b;
                else
                    pl_alloc_free_block(f.a, b);
                pl_alloc_stats_t st = fx_stats(&f);
                if (st.reserved_bytes[PL_POOL_ALL].current > bt.peak_reserved) {
                    bt.peak_reserved = st.reserved_bytes[PL_POOL_ALL].current;
                    bt.unallocated_at_peak = bt.peak_reserved - st.allocated_bytes[PL_POOL_ALL].current;
                }
                if (!b) out->failed[out->n_failed++] = i;
            }
        }
        fx_check(&f);
        out->snaps[out->n_snaps++] = fx_stats(&f);
    }
    out->peak_reserved = bt.peak_reserved;
    out->unallocated_at_peak = bt.unallocated_at_peak;
    out->n_map_events = batch ? bt.n_map_events : f.a->n_map_events;
    out->n_unmap_events = batch ? bt.n_unmap_events : f.a->n_unmap_events;
    for (int k = 0; k < B_SLOTS; k++) {
        out->slot_size[k] = slots[k] ? slots[k]->size_bytes : 0;
        pl_alloc_free_block(f.a, slots[k]);
    }
    fx_close(&f);
}

static void batch_matches_handle(const char *conf, uint64_t seed) {
    static pl_alloc_op_t ops[B_OPS];
    static batch_run_t one, bat;
    size_t n = make_ops(ops, seed);
    run_ops(conf, ops, n, false, &one);
    run_ops(conf, ops, n, true, &bat);
    assert_int_equal(bat.n_failed, one.n_failed);
    for (size_t i = 0; i < one.n_failed; i++) assert_int_equal(bat.failed[i], one.failed[i]);
    assert_true(one.n_failed > 0); /* the script reaches the OOM path */
    assert_int_equal(bat.peak_reserved, one.peak_reserved);
    assert_int_equal(bat.unallocated_at_peak, one.unallocated_at_peak);
    assert_true(one.peak_reserved > 0);
    assert_int_equal(bat.n_map_events, one.n_map_events); /* what tune/replay.c reports as n_map_events */
    assert_int_equal(bat.n_unmap_events, one.n_unmap_events);
    assert_true(one.n_map_events > 0);
    assert_int_equal(bat.n_snaps, one.n_snaps);
    for (size_t k = 0; k < one.n_snaps; k++) assert_memory_equal(&bat.snaps[k], &one.snaps[k], sizeof one.snaps[k]);
    assert_memory_equal(bat.slot_size, one.slot_size, sizeof one.slot_size);
}

static void test_batch_default(void **state) {
    (void)state;
    batch_matches_handle("", 21);
}

static void test_batch_expandable_gc(void **state) {
    (void)state;
    batch_matches_handle("expandable_segments:True,garbage_collection_threshold:0.6", 22);
    batch_matches_handle("max_split_size_mb:32,roundup_power2_divisions:4", 23);
}

/* PyTorch's inactive_split accounting: net changes per malloc / free. */
static void test_split_stats_net(void **state) {
    (void)state;
    fixture_t f;
    fx_open(&f, 256 * MiB, false, "");
    void *x = pl_alloc_malloc(f.a, 4096, 0); /* a 2 MiB small segment: x + a cached tail */
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].current, 1);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].allocated, 1);
    assert_int_equal(s.inactive_split_bytes[PL_POOL_SMALL].allocated, 2 * MiB - 4096);
    void *y = pl_alloc_malloc(f.a, 8192, 0); /* the tail shrinks: no block leaves, 8 KiB do */
    s = fx_stats(&f);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].current, 1);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].allocated, 1);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].freed, 0);
    assert_int_equal(s.inactive_split_bytes[PL_POOL_SMALL].current, 2 * MiB - 4096 - 8192);
    assert_int_equal(s.inactive_split_bytes[PL_POOL_SMALL].freed, 8192);
    pl_alloc_free(f.a, y); /* merges into the tail: the cached block grows by 8 KiB */
    s = fx_stats(&f);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].current, 1);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].allocated, 1);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].freed, 0);
    assert_int_equal(s.inactive_split_bytes[PL_POOL_SMALL].allocated, 2 * MiB - 4096 + 8192);
    pl_alloc_free(f.a, x); /* the whole segment again: not split */
    s = fx_stats(&f);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].current, 0);
    assert_int_equal(s.inactive_split[PL_POOL_SMALL].freed, 1);
    assert_int_equal(s.inactive_split_bytes[PL_POOL_SMALL].current, 0);
    assert_int_equal(s.inactive_split_bytes[PL_POOL_SMALL].freed, 2 * MiB - 4096 + 8192);
    assert_int_equal(s.inactive_split_bytes[PL_POOL_ALL].peak, 2 * MiB - 4096);
    fx_close(&f);
}

/* Runs fn in a child; true when the child died of SIGABRT. */
static bool aborts(void (*fn)(void)) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fclose(stderr); /* the expected PL_REQUIRE message is noise here */
        fn();
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

/* A default allocator on a new sim device, for a misuse child (exits 3 when it cannot). */
static pl_alloc_t *child_alloc(void) {
    pl_backend_t *be;
    pl_alloc_t *a;
    pl_alloc_config_t c;
    pl_alloc_config_default(&c);
    if (pl_backend_sim_create(NULL, &be) || pl_alloc_create(be, &c, &a, NULL, 0)) _exit(3);
    return a;
}

static void double_free_block(void) {
    pl_alloc_t *a = child_alloc();
    pl_block_t *b = pl_alloc_malloc_block(a, 4096, 0);
    pl_block_t *keep = pl_alloc_malloc_block(a, 4096, 0); /* b's neighbour: b is not merged away */
    (void)keep;
    pl_alloc_free_block(a, b);
    pl_alloc_free_block(a, b);
}

static void public_free_of_handle_block(void) {
    pl_alloc_t *a = child_alloc();
    pl_block_t *b = pl_alloc_malloc_block(a, 4096, 0);
    pl_alloc_free(a, (void *)b->addr);
}

static void free_block_of_public_block(void) {
    pl_alloc_t *a = child_alloc();
    void *p = pl_alloc_malloc(a, 4096, 0);
    /* the map is hashed: find p's block wherever it sits */
    for (size_t i = 0; i <= a->map.mask; i++)
        if (a->map.slots[i].block && a->map.slots[i].addr == (uintptr_t)p) pl_alloc_free_block(a, a->map.slots[i].block);
}

static void batch_double_free(void) {
    pl_alloc_t *a = child_alloc();
    pl_block_t *b = pl_alloc_malloc_block(a, 4096, 0);
    pl_block_t *keep = pl_alloc_malloc_block(a, 4096, 0); /* b's neighbour: b is not merged away */
    (void)keep;
    pl_block_t *slots[2] = {b, b}; /* one block in two slots */
    const pl_alloc_op_t ops[2] = {{.slot = 0, .kind = PL_ALLOC_OP_FREE}, {.slot = 1, .kind = PL_ALLOC_OP_FREE}};
    uint64_t streams[1] = {0};
    pl_alloc_batch_t bt = {.ops = ops, .slots = slots, .streams = streams, .peak_reserved = -1};
    pl_alloc_run_batch(a, &bt, 0, 2);
}

static void test_handle_misuse(void **state) {
    (void)state;
    if (fx_want_cuda()) skip(); /* sim only: the children make their own devices */
    assert_true(aborts(double_free_block));
    assert_true(aborts(public_free_of_handle_block));
    assert_true(aborts(free_block_of_public_block));
    assert_true(aborts(batch_double_free));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handle_default),
        cmocka_unit_test(test_handle_expandable),
        cmocka_unit_test(test_handle_max_split_gc),
        cmocka_unit_test(test_handle_roundup),
        cmocka_unit_test(test_stats_reference_plain),
        cmocka_unit_test(test_stats_reference_expandable),
        cmocka_unit_test(test_stats_active_split),
        cmocka_unit_test(test_handle_not_in_map),
        cmocka_unit_test(test_batch_default),
        cmocka_unit_test(test_batch_expandable_gc),
        cmocka_unit_test(test_split_stats_net),
        cmocka_unit_test(test_handle_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
