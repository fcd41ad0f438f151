/* tune/replay: the fast replay (the allocator's unlocked handle API, no hook, peaks from the stats) and the
 * reference replay (public locked API + tracking hook) give the same pl_replay_result_t, field by field, on generated
 * sequences under configs that exercise every allocator path: expandable segments, max_split_size,
 * garbage_collection_threshold, roundup_power2_divisions, a small device with OOMs and probes, several streams, and
 * the snapshot at stats_event. The fast path is also deterministic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "../common/replay_confs.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static uint64_t rng_state;
static uint64_t rng(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Random frees from a live set of up to max_live tensors, sizes 0 B .. 96 MiB (mostly small), 3 streams, a probe
 * now and then, and the recorded-stats mark in the middle. */
static void generate(pl_replay_seq_t *s, uint64_t seed, size_t n_events, size_t max_live) {
    rng_state = seed;
    uint64_t *live = calloc(max_live, sizeof *live);
    assert_non_null(live);
    size_t n_live = 0;
    uint64_t next_addr = 0x7f0000000000ull;
    pl_replay_seq_init(s, 0);
    while (s->n_events < n_events) {
        uint64_t r = rng() % 100;
        if (r < 2) {
            assert_int_equal(pl_replay_seq_probe(s, (rng() % 3 + 1) * 256 * MiB, 0), 0);
        } else if (n_live < max_live / 2 || (n_live < max_live && r < 51)) {
            uint64_t k = rng() % 100, size;
            if (k < 5)
                size = rng() % 600; /* 0 and sub-512 B requests */
            else if (k < 65)
                size = 512 + rng() % (256 * 1024);
            else if (k < 92)
                size = MiB + rng() % (8 * MiB);
            else
                size = 10 * MiB + rng() % (86 * MiB);
            live[n_live++] = next_addr;
            assert_int_equal(pl_replay_seq_alloc(s, next_addr, size, rng() % 5 == 0 ? 1 + rng() % 2 : 0), 0);
            next_addr += 4 * MiB;
        } else {
            size_t i = (size_t)(rng() % n_live);
            assert_int_equal(pl_replay_seq_free_addr(s, live[i]), 0);
            live[i] = live[--n_live];
        }
        if (s->n_events == n_events / 2) {
            s->have_stats = true;
            s->stats_event = s->n_events;
        }
    }
    free(live);
}

static void assert_same_result(const pl_replay_result_t *x, const pl_replay_result_t *y) {
    const char *field = pl_replay_result_diff(x, y);
    if (field) fail_msg("fast and locked replays differ in %s", field);
}


/* Both paths, every config, one capacity. Returns the number of configs whose replay saw an OOM. */
static int compare_paths(const pl_replay_seq_t *s, uint64_t capacity) {
    int n_oom = 0;
    char err[512];
    for (size_t i = 0; i < PL_TEST_N_REPLAY_CONFS; i++) {
        pl_alloc_config_t cfg;
        assert_int_equal(pl_alloc_config_parse(pl_test_replay_confs[i], &cfg, err, sizeof err), 0);
        pl_replay_result_t fast, fast2, locked;
        memset(&fast, 0x5a, sizeof fast);
        memset(&locked, 0xa5, sizeof locked);
        assert_int_equal(pl_replay_run_path(s, &cfg, capacity, PL_REPLAY_PATH_FAST, &fast, err, sizeof err), 0);
        assert_int_equal(pl_replay_run_path(s, &cfg, capacity, PL_REPLAY_PATH_LOCKED, &locked, err, sizeof err), 0);
        assert_int_equal(pl_replay_run(s, &cfg, capacity, &fast2, err, sizeof err), 0); /* the default: fast */
        assert_same_result(&fast, &locked);
        assert_same_result(&fast, &fast2);
        assert_true(fast.have_at_stats);
        assert_true(fast.peak_reserved_bytes >= fast.peak_allocated_bytes);
        assert_true(fast.n_device_calls > 0);
        if (fast.n_ooms) n_oom++;
    }
    return n_oom;
}

static void test_paths_roomy_device(void **state) {
    (void)state;
    pl_replay_seq_t s;
    generate(&s, 0x1234567ull, 20000, 600);
    /* probes of up to 768 MiB fit on 80 GiB: no OOM anywhere */
    assert_int_equal(compare_paths(&s, 0), 0);
    pl_replay_seq_free(&s);
}

static void test_paths_small_device(void **state) {
    (void)state;
    pl_replay_seq_t s;
    generate(&s, 0xfeedbeefull, 20000, 400);
    /* 3 GiB against ~1.5-3 GiB live plus 256-768 MiB probes: OOMs, failed allocations (their frees skipped),
     * cache release and retries in every config */
    int n_oom = compare_paths(&s, 3 * GiB);
    assert_int_equal(n_oom, (int)(PL_TEST_N_REPLAY_CONFS));
    pl_replay_seq_free(&s);
}

static void test_paths_reuse_heavy(void **state) {
    (void)state;
    pl_replay_seq_t s;
    /* few live tensors: mostly cache hits, splits and merges inside a handful of segments */
    generate(&s, 42, 30000, 24);
    compare_paths(&s, 0);
    compare_paths(&s, 1 * GiB);
    pl_replay_seq_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_roomy_device),
        cmocka_unit_test(test_paths_small_device),
        cmocka_unit_test(test_paths_reuse_heavy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
