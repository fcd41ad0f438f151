/* Target for tests/preload/test_cuda.c: device allocations through the stand-in runtime (cudart_standin.c),
 * linked dynamically like a program linking libcudart. Runtime-named calls (each must be recorded once, as
 * runtime), direct driver calls (recorded as driver), a virtual-memory round trip, and one out-of-memory request.
 * Holds 3 MiB live while sleeping `sleep_ms` (argv[1], default 60) so the RSS sampler sees device memory.
 * With argv[2] = N > 0, N threads then each make 200 allocation/free pairs (alternately runtime and driver).
 * Prints which object dlsym(RTLD_NEXT, "malloc") from this program resolves to (the preload's interposed dlsym
 * must keep RTLD_NEXT relative to the caller: the answer is the preload itself, the next object after us). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int cudaMalloc(void **ptr, size_t size);
int cudaFree(void *ptr);
int cudaMallocAsync(void **ptr, size_t size, void *stream);
int cudaFreeAsync(void *ptr, void *stream);
int cudaMallocManaged(void **ptr, size_t size, unsigned int flags);
int standin_driver_alloc(uint64_t *ptr, size_t size);
int standin_driver_free(uint64_t ptr);
int standin_vmm(int n_chunks);
void standin_shutdown(void);

#define CHECK(x)                                                                                               \
    do {                                                                                                       \
        int rc_ = (x);                                                                                         \
        if (rc_) {                                                                                             \
            fprintf(stderr, "target_cuda: %s -> %d\n", #x, rc_);                                              \
            return 1;                                                                                          \
        }                                                                                                      \
    } while (0)

#define PAIRS_PER_THREAD 200

static void *thread_main(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    for (int i = 0; i < PAIRS_PER_THREAD; i++) {
        size_t size = 512 + 8 * (size_t)i + id;
        if (i % 2) {
            uint64_t d;
            if (standin_driver_alloc(&d, size) || standin_driver_free(d)) return (void *)1;
        } else {
            void *p;
            if (cudaMalloc(&p, size) || cudaFree(p)) return (void *)1;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    long sleep_ms = argc > 1 ? atol(argv[1]) : 60;
    Dl_info info;
    void *next_malloc = dlsym(RTLD_NEXT, "malloc");
    printf("next_malloc %s\n", next_malloc && dladdr(next_malloc, &info) && info.dli_fname ? info.dli_fname : "?");
    fflush(stdout);
    void *a, *b, *c, *m;
    uint64_t d;
    CHECK(cudaMalloc(&a, 1000));
    CHECK(cudaMalloc(&b, 3u << 20));
    CHECK(standin_driver_alloc(&d, 4096));
    CHECK(cudaMallocAsync(&c, 5000, NULL));
    CHECK(cudaMallocManaged(&m, 777, 1 /* CU_MEM_ATTACH_GLOBAL */));
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    CHECK(cudaFree(a));
    CHECK(standin_driver_free(d));
    CHECK(cudaFreeAsync(c, NULL));
    CHECK(cudaFree(m));
    CHECK(standin_vmm(2));
    void *big;
    int rc = cudaMalloc(&big, (size_t)64 << 30); /* more than the double's capacity */
    if (rc != 2) {
        fprintf(stderr, "target_cuda: expected out of memory, got %d\n", rc);
        return 1;
    }
    CHECK(cudaFree(b));
    int n_threads = argc > 2 ? atoi(argv[2]) : 0;
    pthread_t tids[16];
    if (n_threads > 16) n_threads = 16;
    for (int t = 0; t < n_threads; t++) pthread_create(&tids[t], NULL, thread_main, (void *)(uintptr_t)t);
    for (int t = 0; t < n_threads; t++) {
        void *ret;
        pthread_join(tids[t], &ret);
        if (ret) {
            fprintf(stderr, "target_cuda: thread %d failed\n", t);
            return 1;
        }
    }
    standin_shutdown();
    return 0;
}
