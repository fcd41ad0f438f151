/* preload/pset.c alone (no preload, so it runs under ASan+UBSan): membership, the counting filter's edges (no false
 * negative once a counter saturates, a false positive costs a probe and removes nothing), a full table, probe
 * chains that wrap past the table's end, tombstone rebuilds, reset, and threads inserting and taking while others
 * probe lock-free across rebuilds. Pointers are plain numbers here: the set never dereferences them. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "pset.h"

static pl_pset_t *new_set(void) {
    pl_pset_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

/* No free of the tables: they are mmap'd for the process's life by design; ASan sees only the object. */
static void free_set(pl_pset_t *s) { free(s); }

/* Addresses as malloc returns them (16-byte aligned), distinct per (seed, i). */
static uintptr_t addr(uint32_t seed, uint32_t i) { return ((uintptr_t)seed << 36) + ((uintptr_t)i << 4) + 0x10000; }

/* The table slot a pointer hashes to in a set of `slots` slots (the same hash as pset.c; checked below by making a
 * probe chain wrap, which only happens if this matches). */
static uint32_t slot_of(uintptr_t p, uint32_t slots) {
    return (uint32_t)((((uint64_t)p >> 4) * 0x9e3779b97f4a7c15ull) >> 40) & (slots - 1);
}

static void test_pset_insert_take(void **state) {
    (void)state;
    pl_pset_t *s = new_set();
    assert_false(pl_pset_take(s, addr(1, 1))); /* empty, unmapped */
    assert_int_equal(pl_pset_insert(s, addr(1, 1), 0), 1);
    assert_int_equal(pl_pset_insert(s, addr(1, 1), 0), 1); /* twice: one member */
    assert_int_equal(pl_pset_insert(s, addr(1, 2), 0), 1);
    assert_int_equal(pl_pset_live(s), 2);
    assert_true(pl_pset_maybe(s, addr(1, 1)));
    assert_false(pl_pset_take(s, addr(1, 3)));
    assert_true(pl_pset_take(s, addr(1, 1)));
    assert_false(pl_pset_take(s, addr(1, 1))); /* once */
    assert_int_equal(pl_pset_live(s), 1);
    assert_true(pl_pset_take(s, addr(1, 2)));
    assert_int_equal(pl_pset_live(s), 0);
    assert_false(pl_pset_maybe(s, addr(1, 1)));
    assert_false(pl_pset_maybe(s, addr(1, 2)));
    assert_int_equal(s->slots, PL_PSET_MIN_SLOTS); /* 0 asked: the minimum */
    free_set(s);
}

/* n addresses that share one filter counter. */
static void same_bucket(uintptr_t *out, int n) {
    uint32_t want = pl_pset_filter_hash(addr(7, 0));
    int k = 0;
    for (uint32_t i = 0; k < n; i++)
        if (pl_pset_filter_hash(addr(7, i)) == want) out[k++] = addr(7, i);
}

static void test_pset_filter_shared_counter(void **state) {
    (void)state;
    pl_pset_t *s = new_set();
    uintptr_t p[2];
    same_bucket(p, 2);
    assert_int_equal(pl_pset_insert(s, p[0], 0), 1);
    assert_int_equal(pl_pset_insert(s, p[1], 0), 1);
    assert_true(pl_pset_take(s, p[0]));
    assert_true(pl_pset_maybe(s, p[1])); /* the counter still counts p[1] */
    assert_true(pl_pset_maybe(s, p[0])); /* a false positive ... */
    assert_false(pl_pset_take(s, p[0])); /* ... that removes nothing */
    assert_int_equal(pl_pset_live(s), 1);
    assert_true(pl_pset_take(s, p[1]));
    assert_false(pl_pset_maybe(s, p[0])); /* back to zero */
    free_set(s);
}

static void test_pset_filter_saturates(void **state) {
    (void)state;
    pl_pset_t *s = new_set();
    enum { N = 300 }; /* more than a counter holds */
    static uintptr_t p[N];
    same_bucket(p, N);
    for (int i = 0; i < N; i++) assert_int_equal(pl_pset_insert(s, p[i], 4096), 1);
    assert_int_equal(s->filter[pl_pset_filter_hash(p[0])], 255);
    /* Take all but the last: a counter that had counted down would reach 0 before the last member goes. */
    for (int i = 0; i < N - 1; i++) assert_true(pl_pset_take(s, p[i]));
    assert_true(pl_pset_maybe(s, p[N - 1]));
    assert_true(pl_pset_take(s, p[N - 1]));
    /* Saturated counters stick: every later pointer of that bucket is a false positive, never a wrong answer. */
    assert_true(pl_pset_maybe(s, p[0]));
    assert_false(pl_pset_take(s, p[0]));
    assert_int_equal(pl_pset_live(s), 0);
    free_set(s);
}

/* A non-member that passes the filter: the lock-free probe must answer no, and the members stay. */
static void test_pset_probe_false_positive(void **state) {
    (void)state;
    pl_pset_t *s = new_set();
    for (uint32_t i = 0; i < 400; i++) assert_int_equal(pl_pset_insert(s, addr(2, i), 0), 1);
    int probed = 0;
    for (uint32_t i = 400; probed < 50; i++) {
        uintptr_t q = addr(2, 100000 + i);
        if (!pl_pset_maybe(s, q)) continue;
        assert_false(pl_pset_take(s, q));
        probed++;
    }
    assert_int_equal(pl_pset_live(s), 400);
    for (uint32_t i = 0; i < 400; i++) assert_true(pl_pset_take(s, addr(2, i)));
    free_set(s);
}

/* At most half full of live members: the next insert is refused (the caller does not sample), and a take makes
 * room again (the tombstone goes in a rebuild). */
static void test_pset_full(void **state) {
    (void)state;
    pl_pset_t *s = new_set();
    uint32_t half = PL_PSET_MIN_SLOTS / 2;
    for (uint32_t i = 0; i < half; i++) assert_int_equal(pl_pset_insert(s, addr(3, i), 0), 1);
    assert_int_equal(pl_pset_insert(s, addr(3, half), 0), 0);
    assert_false(pl_pset_take(s, addr(3, half)));
    assert_int_equal(pl_pset_live(s), half);
    assert_true(pl_pset_take(s, addr(3, 0)));
    assert_int_equal(pl_pset_insert(s, addr(3, half), 0), 1);
    for (uint32_t i = 1; i <= half; i++) assert_true(pl_pset_take(s, addr(3, i)));
    assert_int_equal(pl_pset_live(s), 0);
    free_set(s);
}

/* Members hashing to the last slot: their chain continues at slot 0. Removing the first leaves a tombstone the
 * others are still found across; a rebuild keeps them. */
static void test_pset_wraparound(void **state) {
    (void)state;
    pl_pset_t *s = new_set();
    uint32_t last = PL_PSET_MIN_SLOTS - 1;
    uintptr_t p[4];
    int k = 0;
    for (uint32_t i = 0; k < 4; i++)
        if (slot_of(addr(4, i), PL_PSET_MIN_SLOTS) == last) p[k++] = addr(4, i);
    for (int i = 0; i < 4; i++) assert_int_equal(pl_pset_insert(s, p[i], 0), 1);
    const uintptr_t *t = atomic_load(&s->cur);
    assert_int_equal(t[last], p[0]);
    assert_int_equal(t[0], p[1]); /* wrapped */
    assert_int_equal(t[2], p[3]);
    assert_true(pl_pset_take(s, p[0]));
    assert_true(pl_pset_take(s, p[2])); /* found past the tombstone, across the wrap */
    assert_int_equal(pl_pset_insert(s, p[0], 0), 1); /* reuses the tombstone */
    assert_int_equal(t[last], p[0]);
    /* Fill with churn until a rebuild drops the tombstones: the members survive it. */
    unsigned seq0 = atomic_load(&s->seq);
    for (uint32_t i = 0; atomic_load(&s->seq) == seq0; i++) {
        assert_int_equal(pl_pset_insert(s, addr(5, i), 0), 1);
        assert_true(pl_pset_take(s, addr(5, i)));
    }
    assert_true(pl_pset_take(s, p[0]));
    assert_true(pl_pset_take(s, p[1]));
    assert_true(pl_pset_take(s, p[3]));
    assert_int_equal(pl_pset_live(s), 0);
    free_set(s);
}

/* Many rebuilds with a standing population: every member is found at the end. */
static void test_pset_churn(void **state) {
    (void)state;
    pl_pset_t *s = new_set();
    for (uint32_t i = 0; i < 100; i++) assert_int_equal(pl_pset_insert(s, addr(6, i), 0), 1);
    for (uint32_t i = 100; i < 50000; i++) {
        assert_int_equal(pl_pset_insert(s, addr(6, i), 0), 1);
        assert_true(pl_pset_take(s, addr(6, i - 100)));
    }
    assert_int_equal(pl_pset_live(s), 100);
    for (uint32_t i = 49900; i < 50000; i++) assert_true(pl_pset_take(s, addr(6, i)));
    assert_int_equal(pl_pset_live(s), 0);
    assert_true(atomic_load(&s->seq) > 100); /* it did rebuild, many times */
    free_set(s);
}

static void test_pset_reset(void **state) {
    (void)state;
    pl_pset_t *s = new_set();
    for (uint32_t i = 0; i < 50; i++) assert_int_equal(pl_pset_insert(s, addr(8, i), 0), 1);
    pthread_mutex_lock(&s->mu); /* as a fork child finds it: held by a thread that is gone */
    pl_pset_reset(s);
    assert_int_equal(pl_pset_live(s), 0);
    for (uint32_t i = 0; i < 50; i++) {
        assert_false(pl_pset_maybe(s, addr(8, i)));
        assert_false(pl_pset_take(s, addr(8, i)));
    }
    assert_int_equal(pl_pset_insert(s, addr(8, 1), 0), 1);
    assert_true(pl_pset_take(s, addr(8, 1)));
    free_set(s);
}

/* Writers insert and take their own pointers (a small table: rebuilds all the time) while probers take pointers
 * that share the writers' filter counters but were never inserted. A member must always be found (a lock-free
 * probe racing a rebuild must not miss it), a non-member never. */
enum { N_WRITERS = 4, N_PROBERS = 2, ROUNDS = 20000, KEEP = 48 };
static pl_pset_t *conc;
static atomic_int writers_left;
static atomic_int n_wrong;

static void *writer(void *arg) {
    uint32_t id = (uint32_t)(uintptr_t)arg;
    for (uint32_t i = 0; i < ROUNDS; i++) {
        if (pl_pset_insert(conc, addr(16 + id, i), 0) != 1) atomic_fetch_add(&n_wrong, 1);
        if (i >= KEEP && !pl_pset_take(conc, addr(16 + id, i - KEEP))) atomic_fetch_add(&n_wrong, 1);
    }
    for (uint32_t i = ROUNDS - KEEP; i < ROUNDS; i++)
        if (!pl_pset_take(conc, addr(16 + id, i))) atomic_fetch_add(&n_wrong, 1);
    atomic_fetch_sub(&writers_left, 1);
    return NULL;
}

static void *prober(void *arg) {
    uint32_t id = (uint32_t)(uintptr_t)arg;
    for (uint32_t i = 0; atomic_load(&writers_left) > 0; i = (i + 1) % ROUNDS) {
        /* 8 bytes past a writer's pointer: the same filter counter (the hash ignores the low 4 bits), never a
         * member */
        uintptr_t q = addr(16 + (id + i) % N_WRITERS, i) + 8;
        if (pl_pset_take(conc, q)) atomic_fetch_add(&n_wrong, 1);
    }
    return NULL;
}

static void test_pset_concurrent(void **state) {
    (void)state;
    conc = new_set();
    atomic_store(&writers_left, N_WRITERS);
    atomic_store(&n_wrong, 0);
    pthread_t w[N_WRITERS], p[N_PROBERS];
    for (int i = 0; i < N_PROBERS; i++) assert_int_equal(pthread_create(&p[i], NULL, prober, (void *)(uintptr_t)i), 0);
    for (int i = 0; i < N_WRITERS; i++) assert_int_equal(pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)i), 0);
    for (int i = 0; i < N_WRITERS; i++) pthread_join(w[i], NULL);
    for (int i = 0; i < N_PROBERS; i++) pthread_join(p[i], NULL);
    assert_int_equal(atomic_load(&n_wrong), 0);
    assert_int_equal(pl_pset_live(conc), 0);
    assert_int_equal(conc->used, 0);
    free_set(conc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pset_insert_take),
        cmocka_unit_test(test_pset_filter_shared_counter),
        cmocka_unit_test(test_pset_filter_saturates),
        cmocka_unit_test(test_pset_probe_false_positive),
        cmocka_unit_test(test_pset_full),
        cmocka_unit_test(test_pset_wraparound),
        cmocka_unit_test(test_pset_churn),
        cmocka_unit_test(test_pset_reset),
        cmocka_unit_test(test_pset_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
