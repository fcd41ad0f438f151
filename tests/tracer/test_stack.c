/* Stack table: interning gives stable ids, distinct stacks distinct ids, concurrent interning agrees, a full
 * table returns 0 instead of corrupting; the PC and module sets answer "new" exactly once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "stack.h"

static void test_stack_intern_ids(void **state) {
    (void)state;
    pl_stack_table_t *t;
    assert_int_equal(pl_stack_create(1000, 0, &t), 0);
    uint64_t a[3] = {1, 2, 3}, b[3] = {1, 2, 4}, c[2] = {1, 2};
    bool n1, n2;
    uint32_t ia = pl_stack_intern(t, a, 3, &n1);
    assert_true(ia >= 1 && n1);
    assert_int_equal(pl_stack_intern(t, a, 3, &n2), ia);
    assert_false(n2);
    uint32_t ib = pl_stack_intern(t, b, 3, &n1), ic = pl_stack_intern(t, c, 2, &n2);
    assert_true(n1 && n2 && ib != ia && ic != ia && ic != ib);
    const uint64_t *pcs;
    assert_int_equal(pl_stack_get(t, ib, &pcs), 3);
    assert_int_equal(pcs[2], 4);
    assert_int_equal(pl_stack_count(t), 3);
    assert_int_equal(pl_stack_get(t, 99, &pcs), 0);
    assert_int_equal(pl_stack_intern(t, a, 0, &n1), 0);
    pl_stack_reset(t);
    assert_int_equal(pl_stack_count(t), 0);
    assert_int_equal(pl_stack_intern(t, b, 3, &n1), 1);
    assert_true(n1);
    pl_stack_destroy(t);
}

static void test_stack_full_table_returns_zero(void **state) {
    (void)state;
    pl_stack_table_t *t;
    assert_int_equal(pl_stack_create(8, 16, &t), 0);
    bool is_new;
    for (uint64_t i = 0; i < 8; i++) assert_int_equal(pl_stack_intern(t, &i, 1, &is_new), i + 1);
    uint64_t x = 100;
    assert_int_equal(pl_stack_intern(t, &x, 1, &is_new), 0);
    uint64_t y = 3;
    assert_int_equal(pl_stack_intern(t, &y, 1, &is_new), 4); /* existing stacks still found */
    int inserted = 0;
    for (uint64_t pc = 1; pc < 100; pc++) inserted += pl_stack_pc_insert(t, pc);
    assert_true(inserted >= 16 && inserted < 99);
    pl_stack_destroy(t);
}

static pl_stack_table_t *shared;
static uint32_t ids[4][200];

static void *worker(void *arg) {
    int w = (int)(intptr_t)arg;
    for (int round = 0; round < 50; round++)
        for (uint64_t i = 0; i < 200; i++) {
            uint64_t pcs[2] = {i, i * 7};
            bool is_new;
            uint32_t id = pl_stack_intern(shared, pcs, 2, &is_new);
            if (round == 0) ids[w][i] = id;
            else if (ids[w][i] != id) ids[w][i] = 0;
        }
    return NULL;
}

static void test_stack_concurrent_intern_agrees(void **state) {
    (void)state;
    assert_int_equal(pl_stack_create(0, 0, &shared), 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    assert_int_equal(pl_stack_count(shared), 200);
    for (int i = 0; i < 200; i++)
        for (int w = 0; w < 4; w++) {
            assert_true(ids[w][i] >= 1);
            assert_int_equal(ids[w][i], ids[0][i]);
        }
    pl_stack_destroy(shared);
}

static void test_stack_pc_and_module_sets(void **state) {
    (void)state;
    pl_stack_table_t *t;
    assert_int_equal(pl_stack_create(0, 0, &t), 0);
    assert_true(pl_stack_pc_insert(t, 0x1234));
    assert_false(pl_stack_pc_insert(t, 0x1234));
    assert_false(pl_stack_pc_insert(t, 0));
    bool is_new;
    uint32_t m = pl_stack_module_id(t, 0x400000, &is_new);
    assert_true(m >= 1 && is_new);
    assert_int_equal(pl_stack_module_id(t, 0x400000, &is_new), m);
    assert_false(is_new);
    assert_int_not_equal(pl_stack_module_id(t, 0x500000, &is_new), m);
    pl_stack_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stack_intern_ids),
        cmocka_unit_test(test_stack_full_table_returns_zero),
        cmocka_unit_test(test_stack_concurrent_intern_agrees),
        cmocka_unit_test(test_stack_pc_and_module_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
