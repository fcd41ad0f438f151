/* common/table: growth keeps every key with its value, findable by linear probing from its home, for both empty
 * markers the callers use (0, all-ones), with keys that collide and wrap around the end of the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_grow_zero_empty),
        cmocka_unit_test(test_table_grow_ones_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
