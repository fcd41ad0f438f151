/* tests/allocator/test_pluggable.c: PyTorch's pluggable-allocator entry points (allocator/pluggable.c), called
 * from C the way CUDAPluggableAllocator calls them, over the CUDA driver test double ($PLATEAU_LIBCUDA).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sys/types.h>

#include "cuda_double.h"
#include "helpers.h"

/* The exports of libplateau_alloc.so that PyTorch (or ctypes) loads by name. */
void *plateau_torch_malloc(ssize_t size, int device, void *stream);
void plateau_torch_free(void *ptr, ssize_t size, int device, void *stream);
int plateau_torch_stats(int device, pl_alloc_stats_t *out);
int plateau_torch_empty_cache(int device);
const char *plateau_torch_last_error(void);
void plateau_torch_release_all(void);

static void *dbl_h;
static pl_cuda_double_reset_fn *dbl_reset_fn;
static pl_cuda_double_counters_fn *dbl_counters_fn;
static pl_cuda_double_live_fn *dbl_live_fn;

static int setup(void **state) {
    (void)state;
    const char *path = getenv("PLATEAU_LIBCUDA");
    if (!path || !(dbl_h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return -1;
    *(void **)&dbl_reset_fn = dlsym(dbl_h, "pl_cuda_double_reset");
    *(void **)&dbl_counters_fn = dlsym(dbl_h, "pl_cuda_double_counters");
    *(void **)&dbl_live_fn = dlsym(dbl_h, "pl_cuda_double_live");
    return dbl_reset_fn && dbl_counters_fn && dbl_live_fn ? 0 : -1;
}

static pl_cuda_double_counters_t counters(void) {
    pl_cuda_double_counters_t c;
    dbl_counters_fn(&c);
    return c;
}

static void test_pluggable_malloc_free_stats(void **state) {
    (void)state;
    assert_int_equal(dbl_reset_fn("capacity:256MiB,devices:2,leak_exitcode:97"), 0);
    assert_int_equal(setenv("PLATEAU_ALLOC_CONF", "", 1), 0);
    pl_alloc_stats_t s;
    assert_int_equal(plateau_torch_stats(0, &s), -ENOENT); /* nothing created before the first malloc */
    void *stream = NULL; /* the legacy default stream */
    char *p = plateau_torch_malloc(1000, 0, stream);
    char *q = plateau_torch_malloc(25 * (ssize_t)MiB, 0, stream);
    char *r = plateau_torch_malloc(4096, 1, stream); /* second device: its own allocator */
    assert_non_null(p);
    assert_non_null(q);
    assert_non_null(r);
    memset(p, 1, 1000);
    memset(q, 2, 25 * MiB);
    memset(r, 3, 4096);
    assert_int_equal(plateau_torch_stats(0, &s), 0);
    assert_int_equal(s.allocation[PL_POOL_ALL].current, 2);
    assert_int_equal(s.requested_bytes[PL_POOL_ALL].current, 1000 + 25 * MiB);
    assert_int_equal(s.capacity_bytes, 256 * MiB);
    assert_int_equal(s.num_device_alloc, 2);
    pl_alloc_stats_t s1;
    assert_int_equal(plateau_torch_stats(1, &s1), 0);
    assert_int_equal(s1.allocation[PL_POOL_ALL].current, 1);
    pl_cuda_double_counters_t c = counters();
    assert_int_equal(c.n_alloc, 3);
    assert_int_equal(c.n_ctx_active, 2);
    plateau_torch_free(p, 1000, 0, stream);
    plateau_torch_free(q, 25 * (ssize_t)MiB, 0, stream);
    plateau_torch_free(r, 4096, 1, stream);
    plateau_torch_free(NULL, 0, 0, stream); /* no-op */
    assert_int_equal(plateau_torch_stats(0, &s), 0);
    assert_int_equal(s.allocation[PL_POOL_ALL].current, 0);
    assert_int_equal(s.allocation[PL_POOL_ALL].peak, 2);
    assert_int_equal(s.reserved_bytes[PL_POOL_ALL].current, (2 + 26) * MiB); /* cached */
    assert_int_equal(plateau_torch_empty_cache(0), 0);
    assert_int_equal(plateau_torch_stats(0, &s), 0);
    assert_int_equal(s.reserved_bytes[PL_POOL_ALL].current, 0);
    assert_int_equal(counters().n_free, 2);
    plateau_torch_release_all();
    c = counters();
    assert_int_equal(c.n_violations, 0);
    assert_int_equal(c.n_ctx_active, 0);
    assert_int_equal(c.used_bytes, 0);
    assert_int_equal(dbl_live_fn(1), 0);
    assert_int_equal(plateau_torch_stats(0, &s), -ENOENT);
}

static void test_pluggable_reads_alloc_conf(void **state) {
    (void)state;
    assert_int_equal(dbl_reset_fn("capacity:256MiB,leak_exitcode:97"), 0);
    assert_int_equal(setenv("PLATEAU_ALLOC_CONF", "expandable_segments:True", 1), 0);
    void *p = plateau_torch_malloc(3 * (ssize_t)MiB, 0, NULL);
    assert_non_null(p);
    pl_cuda_double_counters_t c = counters();
    assert_int_equal(c.n_reserve, 1);
    assert_int_equal(c.n_map, 2);
    assert_int_equal(c.n_alloc, 0);
    plateau_torch_free(p, 3 * (ssize_t)MiB, 0, NULL);
    plateau_torch_release_all();
    assert_int_equal(dbl_live_fn(1), 0);
    assert_int_equal(counters().n_violations, 0);
    /* a malformed config: the malloc fails and says why; the failure sticks for that device */
    assert_int_equal(setenv("PLATEAU_ALLOC_CONF", "expandable_segments:maybe", 1), 0);
    assert_null(plateau_torch_malloc(512, 0, NULL));
    assert_non_null(strstr(plateau_torch_last_error(), "expandable_segments"));
    assert_int_equal(setenv("PLATEAU_ALLOC_CONF", "", 1), 0);
    assert_null(plateau_torch_malloc(512, 0, NULL));
    assert_non_null(strstr(plateau_torch_last_error(), "device 0 unusable"));
    plateau_torch_release_all(); /* forgets the failure */
    void *q = plateau_torch_malloc(512, 0, NULL);
    assert_non_null(q);
    plateau_torch_free(q, 512, 0, NULL);
    plateau_torch_release_all();
    assert_int_equal(dbl_live_fn(1), 0);
}

static void test_pluggable_errors(void **state) {
    (void)state;
    assert_int_equal(dbl_reset_fn("capacity:64MiB,leak_exitcode:97"), 0);
    assert_int_equal(setenv("PLATEAU_ALLOC_CONF", "", 1), 0);
    assert_null(plateau_torch_malloc(512, -1, NULL));
    assert_non_null(strstr(plateau_torch_last_error(), "out of range"));
    assert_null(plateau_torch_malloc(-5, 0, NULL));
    assert_non_null(strstr(plateau_torch_last_error(), "negative size"));
    assert_null(plateau_torch_malloc(512, 3, NULL)); /* the double has one device */
    assert_non_null(strstr(plateau_torch_last_error(), "device 3 not present"));
    /* OOM: NULL and the allocator's message */
    assert_null(plateau_torch_malloc(100 * (ssize_t)MiB, 0, NULL));
    assert_non_null(strstr(plateau_torch_last_error(), "out of memory"));
    pl_alloc_stats_t s;
    assert_int_equal(plateau_torch_stats(0, &s), 0);
    assert_int_equal(s.num_ooms, 1);
    /* free on a device that never allocated is refused, not forwarded */
    int x;
    plateau_torch_free(&x, 4, 5, NULL);
    assert_non_null(strstr(plateau_torch_last_error(), "never allocated"));
    plateau_torch_release_all();
    assert_int_equal(dbl_live_fn(1), 0);
    /* no driver at all */
    char *saved = strdup(getenv("PLATEAU_LIBCUDA"));
    assert_int_equal(setenv("PLATEAU_LIBCUDA", "/nonexistent/libcuda.so.1", 1), 0);
    assert_null(plateau_torch_malloc(512, 0, NULL));
    assert_non_null(strstr(plateau_torch_last_error(), "no CUDA driver"));
    assert_int_equal(setenv("PLATEAU_LIBCUDA", saved, 1), 0);
    free(saved);
    plateau_torch_release_all();
}

#define N_THREADS 4
#define N_ROUNDS 300

static void *churn(void *arg) {
    uintptr_t seed = (uintptr_t)arg;
    void *held[8] = {0};
    for (int i = 0; i < N_ROUNDS; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        int slot = (int)((seed >> 33) % 8);
        if (held[slot]) {
            plateau_torch_free(held[slot], 0, 0, NULL);
            held[slot] = NULL;
        } else {
            ssize_t size = (ssize_t)((seed >> 20) % (3 * MiB)) + 1;
            held[slot] = plateau_torch_malloc(size, 0, (void *)(seed & 1));
            if (!held[slot]) return (void *)1;
            memset(held[slot], 0x5a, (size_t)(size < 4096 ? size : 4096));
        }
    }
    for (int s = 0; s < 8; s++) plateau_torch_free(held[s], 0, 0, NULL);
    return NULL;
}

/* Many threads, lazy creation racing on the first malloc: one allocator, nothing lost. */
static void test_pluggable_threads(void **state) {
    (void)state;
    assert_int_equal(dbl_reset_fn("capacity:1GiB,leak_exitcode:97"), 0);
    assert_int_equal(setenv("PLATEAU_ALLOC_CONF", "expandable_segments:True", 1), 0);
    pthread_t th[N_THREADS];
    for (uintptr_t i = 0; i < N_THREADS; i++) assert_int_equal(pthread_create(&th[i], NULL, churn, (void *)(i + 1)), 0);
    for (int i = 0; i < N_THREADS; i++) {
        void *rv;
        assert_int_equal(pthread_join(th[i], &rv), 0);
        assert_null(rv);
    }
    pl_alloc_stats_t s;
    assert_int_equal(plateau_torch_stats(0, &s), 0);
    assert_int_equal(s.allocation[PL_POOL_ALL].current, 0);
    assert_true(s.allocation[PL_POOL_ALL].allocated > 0);
    pl_cuda_double_counters_t c = counters();
    assert_int_equal(c.n_ctx_active, 1);
    assert_true(c.n_reserve <= 4); /* (small, large) x streams 0 and 1 */
    plateau_torch_release_all();
    c = counters();
    assert_int_equal(c.n_violations, 0);
    assert_int_equal(dbl_live_fn(1), 0);
    assert_int_equal(setenv("PLATEAU_ALLOC_CONF", "", 1), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pluggable_malloc_free_stats),
        cmocka_unit_test(test_pluggable_reads_alloc_conf),
        cmocka_unit_test(test_pluggable_errors),
        cmocka_unit_test(test_pluggable_threads),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
