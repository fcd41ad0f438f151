/* preload/mranges.c alone (no preload, so it runs under ASan+UBSan): splits, trims, replacement, overlap, a full
 * table (a new range untracked, a split dropping its lower piece), ranges at both ends of the address space,
 * random operations checked page by page against a bitmap, and callers serialising from several threads. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mranges.h"

#define PG 4096u

static void new_table(pl_mranges_t *t, uint32_t max) {
    memset(t, 0, sizeof *t);
    assert_int_equal(pl_mranges_map(t, max), 0);
}

/* Sorted by lo descending, disjoint, non-empty. */
static void check_invariants(const pl_mranges_t *t) {
    for (uint32_t i = 0; i < t->n; i++) {
        assert_true(t->r[i].lo < t->r[i].hi);
        if (i) assert_true(t->r[i].hi <= t->r[i - 1].lo);
    }
}

static void test_mranges_add_cut(void **state) {
    (void)state;
    pl_mranges_t t;
    new_table(&t, 0);
    assert_int_equal(t.max, 512); /* the minimum */
    pl_mranges_delta_t d = {0, 0};
    pl_mranges_add(&t, 100 * PG, 110 * PG, &d);
    pl_mranges_add(&t, 50 * PG, 60 * PG, &d);   /* below: the common append */
    pl_mranges_add(&t, 200 * PG, 201 * PG, &d); /* above: an insert at the front */
    assert_int_equal(d.bytes, 21 * PG);
    assert_int_equal(d.count, 3);
    assert_int_equal(t.n, 3);
    check_invariants(&t);
    /* A hole in the middle makes two ranges. */
    d = (pl_mranges_delta_t){0, 0};
    pl_mranges_cut(&t, 103 * PG, 105 * PG, &d);
    assert_int_equal(d.bytes, -2 * (int64_t)PG);
    assert_int_equal(d.count, 1);
    assert_int_equal(t.n, 4);
    check_invariants(&t);
    assert_int_equal(pl_mranges_overlap(&t, 100 * PG, 110 * PG), 8 * PG);
    /* A cut over several ranges and gaps: trims both ends, drops the one inside. */
    d = (pl_mranges_delta_t){0, 0};
    pl_mranges_cut(&t, 55 * PG, 108 * PG, &d);
    assert_int_equal(d.bytes, -(int64_t)(5 + 3 + 3) * PG);
    assert_int_equal(d.count, -1);
    assert_int_equal(pl_mranges_overlap(&t, 0, 300 * PG), (5 + 2 + 1) * PG);
    check_invariants(&t);
    /* Nothing there, or an empty range: no change. */
    d = (pl_mranges_delta_t){0, 0};
    pl_mranges_cut(&t, 70 * PG, 90 * PG, &d);
    pl_mranges_cut(&t, 50 * PG, 50 * PG, &d);
    pl_mranges_add(&t, 80 * PG, 80 * PG, &d);
    assert_int_equal(d.bytes, 0);
    assert_int_equal(d.count, 0);
    assert_int_equal(t.n, 3);
}

/* A MAP_FIXED mapping over tracked pages: what it covers is replaced, not counted twice. */
static void test_mranges_replace(void **state) {
    (void)state;
    pl_mranges_t t;
    new_table(&t, 0);
    pl_mranges_delta_t d = {0, 0};
    pl_mranges_add(&t, 10 * PG, 20 * PG, &d);
    pl_mranges_add(&t, 15 * PG, 25 * PG, &d);
    assert_int_equal(d.bytes, 15 * PG);
    assert_int_equal(d.count, 2); /* [20,25) new, [15,20) replaced the top of [10,20) */
    assert_int_equal(pl_mranges_overlap(&t, 0, 100 * PG), 15 * PG);
    check_invariants(&t);
    pl_mranges_add(&t, 5 * PG, 30 * PG, &d); /* swallows both */
    assert_int_equal(d.bytes, 25 * PG);
    assert_int_equal(d.count, 1);
    assert_int_equal(t.n, 1);
}

/* The ends of the address space: binary search and the arithmetic must not wrap. */
static void test_mranges_address_ends(void **state) {
    (void)state;
    pl_mranges_t t;
    new_table(&t, 0);
    uintptr_t top = UINTPTR_MAX & ~(uintptr_t)(PG - 1); /* the last page starts here */
    pl_mranges_delta_t d = {0, 0};
    pl_mranges_add(&t, top - 4 * PG, top, &d);
    pl_mranges_add(&t, 0, 2 * PG, &d);
    assert_int_equal(d.bytes, 6 * PG);
    assert_int_equal(pl_mranges_overlap(&t, 0, top), 6 * PG);
    assert_int_equal(pl_mranges_overlap(&t, top - PG, top), PG);
    pl_mranges_cut(&t, 0, PG, &d);
    pl_mranges_cut(&t, top - PG, top, &d);
    assert_int_equal(d.bytes, 4 * PG);
    assert_int_equal(d.count, 2);
    check_invariants(&t);
}

/* Full: a new range is not tracked; a split with no room drops its lower piece (under-counts, never negative). */
static void test_mranges_full(void **state) {
    (void)state;
    pl_mranges_t t;
    new_table(&t, 512);
    pl_mranges_delta_t d = {0, 0};
    for (uint32_t i = 0; i < 512; i++) {
        uintptr_t lo = (uintptr_t)(2000 - 2 * i) * 4 * PG; /* 4 pages, a 4-page gap below */
        pl_mranges_add(&t, lo, lo + 4 * PG, &d);
    }
    assert_int_equal(t.n, 512);
    assert_int_equal(d.count, 512);
    pl_mranges_delta_t e = {0, 0};
    pl_mranges_add(&t, 1, PG, &e); /* below everything: no room */
    pl_mranges_add(&t, 5000 * 4 * PG, 5001 * 4 * PG, &e);
    assert_int_equal(e.bytes, 0);
    assert_int_equal(e.count, 0);
    /* Punch a one-page hole in the second page of a 4-page range: the upper 2 pages stay, the lower one goes. */
    uintptr_t lo = 2000u * 4 * PG;
    pl_mranges_cut(&t, lo + PG, lo + 2 * PG, &e);
    assert_int_equal(e.bytes, -2 * (int64_t)PG);
    assert_int_equal(e.count, 0);
    assert_int_equal(pl_mranges_overlap(&t, lo, lo + 4 * PG), 2 * PG);
    /* A replacement over a range frees its slot first, so it is tracked. */
    pl_mranges_add(&t, lo, lo + 4 * PG, &e);
    assert_int_equal(pl_mranges_overlap(&t, lo, lo + 4 * PG), 4 * PG);
    check_invariants(&t);
}

/* Random adds and cuts over 1024 pages against a page bitmap: the summed deltas equal the tracked bytes, the
 * summed counts the table size, and overlap() every window. */
static void test_mranges_random_model(void **state) {
    (void)state;
    enum { PAGES = 1024 };
    pl_mranges_t t;
    new_table(&t, 1 << 14);
    static unsigned char page[PAGES];
    memset(page, 0, sizeof page);
    int64_t bytes = 0, count = 0;
    uint64_t rng = 88172645463325252ull;
    for (int op = 0; op < 20000; op++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint32_t a = (uint32_t)(rng % PAGES), len = 1 + (uint32_t)((rng >> 20) % 40);
        uint32_t b = a + len > PAGES ? PAGES : a + len;
        pl_mranges_delta_t d = {0, 0};
        uintptr_t base = (uintptr_t)1 << 40;
        if ((rng >> 40) % 3) {
            pl_mranges_cut(&t, base + a * PG, base + b * PG, &d);
            memset(page + a, 0, b - a);
        } else {
            pl_mranges_add(&t, base + a * PG, base + b * PG, &d);
            memset(page + a, 1, b - a);
        }
        bytes += d.bytes;
        count += d.count;
        assert_int_equal(count, t.n);
        if (op % 97 == 0) {
            check_invariants(&t);
            int64_t want = 0;
            for (int i = 0; i < PAGES; i++) want += page[i] * (int64_t)PG;
            assert_int_equal(bytes, want);
            uint32_t w0 = (uint32_t)((rng >> 8) % PAGES), w1 = w0 + (uint32_t)((rng >> 30) % 64);
            if (w1 > PAGES) w1 = PAGES;
            uintptr_t in = 0;
            for (uint32_t i = w0; i < w1; i++) in += page[i] * PG;
            assert_int_equal(pl_mranges_overlap(&t, base + w0 * PG, base + w1 * PG), in);
        }
    }
}

/* The contract is "the caller serialises": threads updating one table under one mutex, each in its own address
 * band, end with exact totals. */
enum { N_THREADS = 4, OPS = 5000 };
static pl_mranges_t shared_t;
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t shared_bytes, shared_count;

static void *mapper(void *arg) {
    uintptr_t band = ((uintptr_t)(uintptr_t)arg + 1) << 32;
    for (uint32_t i = 0; i < OPS; i++) {
        pl_mranges_delta_t d = {0, 0};
        pthread_mutex_lock(&shared_mu);
        uintptr_t a = band + (uintptr_t)(i % 64) * 4 * PG, c = band + (uintptr_t)(i % 50) * 4 * PG;
        pl_mranges_add(&shared_t, a, a + 3 * PG, &d);
        if (i % 3 == 0) pl_mranges_cut(&shared_t, c + PG, c + 2 * PG, &d); /* a hole in another range */
        shared_bytes += d.bytes;
        shared_count += d.count;
        pthread_mutex_unlock(&shared_mu);
    }
    return NULL;
}

static void test_mranges_serialised_threads(void **state) {
    (void)state;
    new_table(&shared_t, 4096);
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, mapper, (void *)(uintptr_t)i), 0);
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    check_invariants(&shared_t);
    assert_int_equal(shared_count, shared_t.n);
    int64_t sum = 0;
    for (uint32_t i = 0; i < shared_t.n; i++) sum += (int64_t)(shared_t.r[i].hi - shared_t.r[i].lo);
    assert_int_equal(shared_bytes, sum);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mranges_add_cut),
        cmocka_unit_test(test_mranges_replace),
        cmocka_unit_test(test_mranges_address_ends),
        cmocka_unit_test(test_mranges_full),
        cmocka_unit_test(test_mranges_random_model),
        cmocka_unit_test(test_mranges_serialised_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
