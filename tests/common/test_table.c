/* common/table: growth keeps every key with its value, findable by linear probing from its home, for both empty
 * markers the callers use (0, all-ones), with keys that collide and wrap around the end of the table; the map
 * (pl_table_t) agrees with a model array through random puts and takes, and keeps its bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "table.h"

/* every key's home is the last slot: probes collide and wrap */
static size_t last_slot(uint64_t key, size_t cap) { (void)key; return cap - 1; }
static size_t low_bits(uint64_t key, size_t cap) { return (size_t)key & (cap - 1); }

static size_t find(const uint64_t *keys, size_t cap, uint64_t empty, pl_table_home_fn home, uint64_t key) {
    for (size_t i = home(key, cap), n = 0; n < cap; i = (i + 1) & (cap - 1), n++) {
        if (keys[i] == key) return i;
        if (keys[i] == empty) break;
    }
    return SIZE_MAX;
}

static void insert(uint64_t *keys, uint32_t *vals, size_t cap, uint64_t empty, pl_table_home_fn home, uint64_t key,
                   uint32_t val) {
    size_t i = home(key, cap);
    while (keys[i] != empty) i = (i + 1) & (cap - 1);
    keys[i] = key;
    vals[i] = val;
}

static void fill_and_grow(uint64_t empty, pl_table_home_fn home) {
    uint64_t *keys = NULL;
    uint32_t *vals = NULL;
    size_t cap = 0;
    assert_int_equal(pl_table_grow(&keys, &vals, &cap, 8, empty, home), 0);
    assert_int_equal(cap, 8);
    for (size_t i = 0; i < cap; i++) assert_true(keys[i] == empty);
    uint32_t n = 0;
    for (int round = 0; round < 4; round++) {
        while ((n + 1) * 2 <= cap) { /* half full, then grow */
            uint64_t key = 3 + 7 * (uint64_t)n;
            insert(keys, vals, cap, empty, home, key, 1000 + n);
            n++;
        }
        size_t before = cap;
        assert_int_equal(pl_table_grow(&keys, &vals, &cap, 8, empty, home), 0);
        assert_int_equal(cap, before * 2);
        size_t used = 0;
        for (size_t i = 0; i < cap; i++) used += keys[i] != empty;
        assert_int_equal(used, n);
        for (uint32_t k = 0; k < n; k++) {
            size_t at = find(keys, cap, empty, home, 3 + 7 * (uint64_t)k);
            assert_true(at != SIZE_MAX);
            assert_int_equal(vals[at], 1000 + k);
        }
    }
    free(keys);
    free(vals);
}

static void test_table_grow_zero_empty(void **state) {
    (void)state;
    fill_and_grow(0, low_bits);
    fill_and_grow(0, last_slot);
}

static void test_table_grow_ones_empty(void **state) {
    (void)state;
    fill_and_grow(UINT64_MAX, low_bits);
    fill_and_grow(UINT64_MAX, last_slot);
}

typedef struct val { uint64_t size; uint32_t aux; } val_t;

/* pl_table_t against a model array, through a long random mix of puts (new keys and updates) and takes: keys of
 * one stride (addresses) in a table kept small make long probe runs, which deletion by backward shift must leave
 * findable; every value comes back as stored, and key 0 is never stored. */
/* put through the pointer the table hands back */
static int put(pl_table_t *t, uint64_t key, const void *val, size_t n) {
    void *p;
    int rc = pl_table_put(t, key, &p);
    if (!rc && n) memcpy(p, val, n);
    return rc;
}

static bool take(pl_table_t *t, uint64_t key, void *out, size_t n) {
    void *p = pl_table_get(t, key);
    if (!p) return false;
    if (out) memcpy(out, p, n);
    pl_table_del(t, p);
    return true;
}

static void test_table_map_matches_model(void **state) {
    (void)state;
    enum { N = 2048 };
    static bool in[N];
    static val_t model[N];
    pl_table_t t;
    pl_table_init(&t, sizeof(val_t), 0);
    assert_null(pl_table_get(&t, 5));
    val_t v = {7, 1};
    assert_int_equal(put(&t, 0, &v, sizeof v), 1);
    assert_false(take(&t, 0, NULL, 0));
    uint64_t seed = 1;
    for (uint32_t step = 0; step < 200000; step++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t k = (seed >> 33) % N, key = 0x7f0000001000ull + k * 4096;
        if ((seed >> 20) & 1) {
            val_t nv = {seed, step};
            assert_int_equal(put(&t, key, &nv, sizeof nv), 0);
            in[k] = true;
            model[k] = nv;
        } else {
            val_t out = {0, 0};
            assert_int_equal(take(&t, key, &out, sizeof out), in[k]);
            if (in[k]) {
                assert_true(out.size == model[k].size);
                assert_int_equal(out.aux, model[k].aux);
            }
            in[k] = false;
        }
        if (step % 4999) continue;
        size_t n = 0, walked = 0;
        for (uint64_t j = 0; j < N; j++) {
            const val_t *g = pl_table_get(&t, 0x7f0000001000ull + j * 4096);
            assert_int_equal(g != NULL, in[j]);
            if (g) {
                n++;
                assert_true(g->size == model[j].size);
            }
        }
        for (size_t i = 0; i < t.cap; i++) walked += pl_table_slot(&t, i) != NULL;
        assert_int_equal(t.n, n);
        assert_int_equal(walked, n);
        assert_true(t.cap >= 2 * n); /* at most half full */
    }
    pl_table_free(&t);
    assert_null(pl_table_get(&t, 0x7f0000001000ull));
}

/* A bounded table refuses new keys when full but still updates the ones it holds; a value of 0 bytes is a set. */
static void test_table_map_bound(void **state) {
    (void)state;
    pl_table_t t;
    pl_table_init(&t, sizeof(uint32_t), 3);
    for (uint32_t k = 1; k <= 3; k++) assert_int_equal(put(&t, k, &k, sizeof k), 0);
    uint32_t v = 40;
    assert_int_equal(put(&t, 4, &v, sizeof v), 1);
    assert_null(pl_table_get(&t, 4));
    assert_int_equal(put(&t, 2, &v, sizeof v), 0); /* an update is not a new key */
    assert_int_equal(*(const uint32_t *)pl_table_get(&t, 2), 40);
    uint32_t out = 0;
    assert_true(take(&t, 1, &out, sizeof out));
    assert_int_equal(out, 1);
    assert_int_equal(put(&t, 4, &v, sizeof v), 0);
    assert_int_equal(t.n, 3);
    pl_table_free(&t);
    pl_table_t set;
    pl_table_init(&set, 0, 0);
    assert_int_equal(put(&set, 9, NULL, 0), 0);
    assert_non_null(pl_table_get(&set, 9));
    assert_null(pl_table_get(&set, 10));
    pl_table_free(&set);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_grow_zero_empty),
        cmocka_unit_test(test_table_grow_ones_empty),
        cmocka_unit_test(test_table_map_matches_model),
        cmocka_unit_test(test_table_map_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
