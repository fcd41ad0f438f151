/* tests/allocator/test_stress.c: seeded, reproducible randomized differential stress test.
 *
 * Thousands of mixed malloc / free / record_stream / empty_cache / stream hold-release operations across
 * three streams and several configs. After every operation: pl_alloc_check (blocks tile their segments, no
 * overlap, allocated + pending + cached free == reserved, stats agree with a walk), live blocks never overlap
 * each other, and the stats agree with a reference model kept here (allocation counts and bytes, active,
 * requested, per pool). Every byte of every live block is written with a per-block pattern (touch on sim),
 * and verified when the block is freed (every block is freed by the end), so a block handed out twice or carved wrong shows as corruption.
 * PL_STRESS_OPS (default 1200 per config, 7 configs) and PL_STRESS_SEED override the run; the 'slow' suite runs more.
 * With PLATEAU_TEST_BACKEND=cuda the same run goes through the cuda backend over the driver double, on real streams
 * of the double; there streams are never held (the double completes work at once), so no block waits.
 */
#include "config.h"

#include "helpers.h"

typedef struct live {
    unsigned char *p;
    size_t size;       /* requested */
    size_t rounded;
    int pool;
    unsigned char tag;
    pl_stream_t stream;
    uint32_t held_uses; /* bit s: record_stream(s) with s != stream */
} live_t;

typedef struct pending {
    size_t rounded, requested;
    int pool;
    uint32_t waiting; /* bit s: event recorded on held stream s */
} pending_t;

typedef struct model {
    int64_t alloc_n[PL_POOL_N], alloc_b[PL_POOL_N], active_n[PL_POOL_N], active_b[PL_POOL_N], req_b[PL_POOL_N];
} model_t;

static uint64_t rnd(uint64_t *s) {
    *s += 0x9E3779B97F4A7C15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void madd(model_t *m, int pool, int64_t an, int64_t ab, int64_t xn, int64_t xb, int64_t rb) {
    int idx[2] = {PL_POOL_ALL, pool};
    for (int k = 0; k < 2; k++) {
        m->alloc_n[idx[k]] += an;
        m->alloc_b[idx[k]] += ab;
        m->active_n[idx[k]] += xn;
        m->active_b[idx[k]] += xb;
        m->req_b[idx[k]] += rb;
    }
}

/* Every byte holds the block's tag (memset: fast enough to write whole 40 MiB blocks thousands of times). */
static void verify_block(const live_t *l) {
    uint64_t word = 0x0101010101010101ull * l->tag;
    size_t k = 0;
    for (; k + 8 <= l->size; k += 8) {
        uint64_t v;
        memcpy(&v, l->p + k, 8);
        if (v != word) break;
    }
    for (; k < l->size; k++)
        if (l->p[k] != l->tag) fail_msg("block %p (%zu bytes) corrupted at byte %zu", (void *)l->p, l->size, k);
}

static int cmp_live(const void *x, const void *y) {
    const live_t *a = x, *b = y;
    return a->p < b->p ? -1 : a->p > b->p;
}

static size_t pick_size(uint64_t *seed) {
    uint64_t r = rnd(seed);
    switch (r % 8) {
    case 0: return 0;
    case 1:
    case 2: return 1 + (r >> 8) % 4096;                 /* tiny */
    case 3:
    case 4: return 4096 + (r >> 8) % (1 << 20);          /* small pool */
    case 5:
    case 6: return (1 << 20) + (r >> 8) % (9 << 20);     /* large, 20 MiB segments */
    default: return (10 << 20) + (r >> 8) % (14 << 20);  /* large, own segments */
    }
}

static void run(const char *conf, uint64_t seed, int n_ops) {
    fixture_t f;
    pl_sim_options_t o;
    pl_sim_options_default(&o);
    o.capacity_bytes = (size_t)2 << 30;
    fx_open_opts(&f, &o, conf);
    enum { MAX_LIVE = 96, MAX_PENDING = 512, N_STREAMS = 3 };
    live_t live[MAX_LIVE];
    int n_live = 0;
    pending_t pend[MAX_PENDING];
    int n_pend = 0;
    bool held[N_STREAMS] = {false};
    model_t m;
    memset(&m, 0, sizeof m);
    for (int op = 0; op < n_ops; op++) {
        uint64_t r = rnd(&seed) % 100;
        if (r < 45 && n_live < MAX_LIVE && n_pend < MAX_PENDING - N_STREAMS) {
            /* malloc: first, pending blocks whose streams all completed leave the active stats */
            for (int i = 0; i < n_pend;)
                if (!pend[i].waiting) {
                    madd(&m, pend[i].pool, 0, 0, -1, -(int64_t)pend[i].rounded, -(int64_t)pend[i].requested);
                    pend[i] = pend[--n_pend];
                } else {
                    i++;
                }
            size_t size = pick_size(&seed);
            pl_stream_t s = fx_stream(&f, (int)(rnd(&seed) % N_STREAMS));
            unsigned char *p = pl_alloc_malloc(f.a, size, s);
            if (!p) fail_msg("%s seed %llu op %d: OOM for %zu: %s", conf, (unsigned long long)seed, op, size,
                             pl_alloc_last_error());
            live_t *l = &live[n_live++];
            *l = (live_t){.p = p, .size = size, .rounded = pl_alloc_block_size(f.a, p),
                          .tag = (unsigned char)(1 + op % 255), .stream = s};
            assert_true(l->rounded >= size && l->rounded % 512 == 0);
            /* pool from the rounded request, not from the (possibly larger, unsplit) block */
            pl_alloc_config_t cfg;
            char err[256];
            assert_int_equal(pl_alloc_config_parse(conf, &cfg, err, sizeof err), 0);
            l->pool = pl_rounding_pool(pl_rounding_round(&cfg, size));
            memset(p, l->tag, size);
            madd(&m, l->pool, 1, (int64_t)l->rounded, 1, (int64_t)l->rounded, (int64_t)size);
        } else if (r < 85 && n_live > 0) {
            int i = (int)(rnd(&seed) % (uint64_t)n_live);
            live_t l = live[i];
            verify_block(&l);
            live[i] = live[--n_live];
            pl_alloc_free(f.a, l.p);
            madd(&m, l.pool, -1, -(int64_t)l.rounded, 0, 0, 0);
            uint32_t waiting = 0;
            for (int s = 0; s < N_STREAMS; s++)
                if ((l.held_uses >> s & 1) && held[s]) waiting |= 1u << s;
            /* a block with recorded streams is pending until the next malloc / empty_cache processes events */
            if (l.held_uses) {
                pend[n_pend++] = (pending_t){.rounded = l.rounded, .requested = l.size, .pool = l.pool,
                                             .waiting = waiting};
            } else {
                madd(&m, l.pool, 0, 0, -1, -(int64_t)l.rounded, -(int64_t)l.size);
            }
        } else if (r < 92 && n_live > 0) {
            int i = (int)(rnd(&seed) % (uint64_t)n_live);
            int si = (int)(rnd(&seed) % N_STREAMS);
            pl_stream_t s = fx_stream(&f, si);
            assert_int_equal(pl_alloc_record_stream(f.a, live[i].p, s), 0);
            if (s != live[i].stream) live[i].held_uses |= 1u << si;
        } else if (r < 97) {
            int s = (int)(rnd(&seed) % N_STREAMS);
            /* only sim streams can be held; on cuda (the double runs work at once) they never are */
            if (fx_hold_stream(&f, s, !held[s])) held[s] = !held[s];
            if (!held[s])
                for (int i = 0; i < n_pend; i++) pend[i].waiting &= ~(1u << s);
        } else {
            pl_alloc_empty_cache(f.a);
            for (int i = 0; i < n_pend;)
                if (!pend[i].waiting) {
                    madd(&m, pend[i].pool, 0, 0, -1, -(int64_t)pend[i].rounded, -(int64_t)pend[i].requested);
                    pend[i] = pend[--n_pend];
                } else {
                    i++;
                }
        }
        /* invariants after every operation */
        char err[512];
        if (pl_alloc_check(f.a, err, sizeof err))
            fail_msg("%s seed %llu op %d: %s", conf, (unsigned long long)seed, op, err);
        pl_alloc_stats_t s = fx_stats(&f);
        for (int p = 0; p < PL_POOL_N; p++) {
            if (s.allocation[p].current != m.alloc_n[p] || s.allocated_bytes[p].current != m.alloc_b[p] ||
                s.active[p].current != m.active_n[p] || s.active_bytes[p].current != m.active_b[p] ||
                s.requested_bytes[p].current != m.req_b[p])
                fail_msg("%s op %d pool %d: stats (n %lld b %lld active %lld/%lld req %lld) != model (%lld %lld "
                         "%lld/%lld %lld)",
                         conf, op, p, (long long)s.allocation[p].current, (long long)s.allocated_bytes[p].current,
                         (long long)s.active[p].current, (long long)s.active_bytes[p].current,
                         (long long)s.requested_bytes[p].current, (long long)m.alloc_n[p], (long long)m.alloc_b[p],
                         (long long)m.active_n[p], (long long)m.active_b[p], (long long)m.req_b[p]);
        }
        assert_true(s.reserved_bytes[PL_POOL_ALL].current >= s.active_bytes[PL_POOL_ALL].current);
        assert_int_equal(s.num_ooms, 0);
        if (op % 256 == 0) {
            live_t sorted[MAX_LIVE];
            memcpy(sorted, live, (size_t)n_live * sizeof *live);
            qsort(sorted, (size_t)n_live, sizeof *sorted, cmp_live);
            for (int i = 1; i < n_live; i++)
                if (sorted[i - 1].p + sorted[i - 1].rounded > sorted[i].p)
                    fail_msg("%s op %d: live blocks overlap", conf, op);
        }
    }
    for (int s = 0; s < N_STREAMS; s++) fx_hold_stream(&f, s, false);
    for (int i = 0; i < n_live; i++) {
        verify_block(&live[i]);
        pl_alloc_free(f.a, live[i].p);
    }
    pl_alloc_empty_cache(f.a);
    pl_alloc_stats_t s = fx_stats(&f);
    assert_int_equal(s.reserved_bytes[PL_POOL_ALL].current, 0);
    assert_int_equal(s.active_bytes[PL_POOL_ALL].current, 0);
    assert_int_equal(s.num_device_alloc + s.num_device_map >= 1, 1);
    fx_close(&f);
}

static const char *const configs[] = {
    "",
    "max_split_size_mb:20",
    "expandable_segments:True",
    "garbage_collection_threshold:0.3",
    "roundup_power2_divisions:[1:4,64:8,>:2]",
    "expandable_segments:True,max_split_size_mb:24,garbage_collection_threshold:0.4,roundup_power2_divisions:4",
    "max_split_size_mb:20,garbage_collection_threshold:0.2,per_process_memory_fraction:0.5",
};

static void test_stress_randomized_differential(void **state) {
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    int n_ops = 600; /* ASan makes the byte writes ~4x slower: keep the unit run well under a minute */
#else
    int n_ops = 1200;
#endif
    if (getenv("PL_STRESS_OPS")) n_ops = atoi(getenv("PL_STRESS_OPS"));
    uint64_t seed = getenv("PL_STRESS_SEED") ? strtoull(getenv("PL_STRESS_SEED"), NULL, 0) : 20261122;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        print_message("  config '%s' seed %llu ops %d\n", configs[i], (unsigned long long)(seed + i), n_ops);
        run(configs[i], seed + i, n_ops);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_randomized_differential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
