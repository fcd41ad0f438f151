/* common/grow: an empty array gets its first capacity, a full one doubles, a need beyond the doubling is met, a
 * need already held changes nothing; counts whose byte size does not fit a size_t are refused before any
 * allocation (EOVERFLOW, the array untouched) and capacities saturate instead of wrapping; appends through pl_grow
 * keep every element. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include "grow.h"

static void test_grow_cap_doubles(void **state) {
    (void)state;
    assert_int_equal(pl_grow_cap(0, 1, 16, 4), 16);      /* empty: the first capacity */
    assert_int_equal(pl_grow_cap(0, 40, 16, 4), 64);     /* empty, a need above first: doubled from first */
    assert_int_equal(pl_grow_cap(16, 17, 16, 4), 32);    /* full: doubled */
    assert_int_equal(pl_grow_cap(16, 100, 16, 4), 128);  /* doubled until it holds need */
    assert_int_equal(pl_grow_cap(16, 16, 16, 4), 16);    /* already held */
    assert_int_equal(pl_grow_cap(0, 1, 0, 8), 1);        /* no first capacity: one element */
    assert_int_equal(pl_grow_cap(3, 4, 16, 8), 6);       /* a capacity not a power of two still doubles */
}

static void test_grow_cap_overflow(void **state) {
    (void)state;
    size_t max8 = SIZE_MAX / 8;
    assert_int_equal(pl_grow_cap(0, max8 + 1, 16, 8), 0);           /* need * 8 wraps */
    assert_int_equal(pl_grow_cap(16, SIZE_MAX, 16, 2), 0);
    assert_int_equal(pl_grow_cap(0, 1, 16, 0), 0);                  /* no element size */
    /* doubling would pass the largest count: saturate there, never wrap below need */
    size_t c = pl_grow_cap(max8 / 2 + 1, max8 / 2 + 2, 16, 8);
    assert_int_equal(c, max8);
    assert_true(c * 8 / 8 == c);
    assert_int_equal(pl_grow_cap(max8 - 1, max8, 16, 8), max8);
    /* bytes: doubling 2^63 would wrap to 0 */
    assert_int_equal(pl_grow_cap(SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 2, 16, 1), SIZE_MAX);
    assert_int_equal(pl_grow_cap(0, 5, SIZE_MAX, 8), max8);        /* a first capacity too large is clamped */
}

static void test_grow_appends(void **state) {
    (void)state;
    uint32_t *v = NULL;
    size_t cap = 0, n = 0;
    for (uint32_t i = 0; i < 10000; i++) {
        assert_int_equal(pl_grow((void **)&v, &cap, n + 1, sizeof *v), 0);
        assert_true(cap >= n + 1);
        v[n++] = i * 7;
    }
    assert_int_equal(cap, 16384); /* 16 doubled ten times */
    for (uint32_t i = 0; i < 10000; i++) assert_int_equal(v[i], i * 7);
    void *before = v;
    assert_int_equal(pl_grow((void **)&v, &cap, 5000, sizeof *v), 0); /* held: nothing moves */
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 16384);
    free(v);
}

static void test_grow_first(void **state) {
    (void)state;
    char *b = NULL;
    size_t cap = 0;
    assert_int_equal(pl_grow_first((void **)&b, &cap, 10, 1, 65536), 0);
    assert_int_equal(cap, 65536);
    assert_int_equal(pl_grow_first((void **)&b, &cap, 65537, 1, 65536), 0);
    assert_int_equal(cap, 131072);
    free(b);
}

static void test_grow_refuses_overflow(void **state) {
    (void)state;
    uint64_t *v = NULL;
    size_t cap = 0;
    assert_int_equal(pl_grow((void **)&v, &cap, 4, sizeof *v), 0);
    uint64_t *kept = v;
    size_t kept_cap = cap;
    errno = 0;
    assert_int_equal(pl_grow((void **)&v, &cap, SIZE_MAX / sizeof *v + 1, sizeof *v), -1);
    assert_int_equal(errno, EOVERFLOW);
    assert_ptr_equal(v, kept); /* untouched, still the caller's */
    assert_int_equal(cap, kept_cap);
    free(v);
}

#if defined(__SANITIZE_ADDRESS__)
#define PL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PL_TEST_ASAN 1
#endif
#endif

static void test_grow_enomem(void **state) {
    (void)state;
#ifdef PL_TEST_ASAN
    skip(); /* ASan reports an impossible allocation instead of returning NULL */
#else
    char *b = NULL;
    size_t cap = 0;
    assert_int_equal(pl_grow((void **)&b, &cap, 8, 1), 0);
    char *kept = b;
    errno = 0;
    /* fits a size_t, but no machine has it */
    assert_int_equal(pl_grow((void **)&b, &cap, SIZE_MAX / 2, 1), -1);
    assert_int_equal(errno, ENOMEM);
    assert_ptr_equal(b, kept);
    assert_int_equal(cap, 16);
    free(b);
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow_cap_doubles),  cmocka_unit_test(test_grow_cap_overflow),
        cmocka_unit_test(test_grow_appends),      cmocka_unit_test(test_grow_first),
        cmocka_unit_test(test_grow_refuses_overflow), cmocka_unit_test(test_grow_enomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
