/* Target for tests/preload/test_cuda.c: device allocations through the stand-in runtime (cudart_standin.c),
 * linked dynamically like a program linking libcudart. Runtime-named calls (each must be recorded once, as
 * runtime), direct driver calls (recorded as driver), a virtual-memory round trip, and one out-of-memory request.
 * Then the per-thread-stream, pool, pitched, 3D and pinned-host variants: 7 runtime allocations and 2 driver ones
 * (pitched, pinned host), each freed.
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

#include "check.h"

int cudaMalloc(void **ptr, size_t size);
int cudaFree(void *ptr);
int cudaMallocAsync(void **ptr, size_t size, void *stream);
int cudaFreeAsync(void *ptr, void *stream);
int cudaMallocManaged(void **ptr, size_t size, unsigned int flags);
int standin_driver_alloc(uint64_t *ptr, size_t size);
int standin_driver_free(uint64_t ptr);
int standin_vmm(int n_chunks);
int cudaMallocAsync_ptsz(void **ptr, size_t size, void *stream);
int cudaFreeAsync_ptsz(void *ptr, void *stream);
int cudaMallocFromPoolAsync(void **ptr, size_t size, void *pool, void *stream);
int cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, void *pool, void *stream);
int cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height);
typedef struct { void *ptr; size_t pitch, xsize, ysize; } pitched_ptr_t; /* struct cudaPitchedPtr */
typedef struct { size_t width, height, depth; } extent_t;                 /* struct cudaExtent */
int cudaMalloc3D(pitched_ptr_t *out, extent_t extent);
int cudaMallocHost(void **ptr, size_t size);
int cudaHostAlloc(void **ptr, size_t size, unsigned int flags);
int cudaFreeHost(void *ptr);
int standin_driver_pitch(uint64_t *ptr, size_t width, size_t height);
int standin_driver_host(void **ptr, size_t size);
int standin_driver_free_host(void *ptr);
void standin_shutdown(void);

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
    PL_CHECK_RC(cudaMalloc(&a, 1000));
    PL_CHECK_RC(cudaMalloc(&b, 3u << 20));
    PL_CHECK_RC(standin_driver_alloc(&d, 4096));
    PL_CHECK_RC(cudaMallocAsync(&c, 5000, NULL));
    PL_CHECK_RC(cudaMallocManaged(&m, 777, 1 /* CU_MEM_ATTACH_GLOBAL */));
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    PL_CHECK_RC(cudaFree(a));
    PL_CHECK_RC(standin_driver_free(d));
    PL_CHECK_RC(cudaFreeAsync(c, NULL));
    PL_CHECK_RC(cudaFree(m));
    PL_CHECK_RC(standin_vmm(2));
    void *big;
    int rc = cudaMalloc(&big, (size_t)64 << 30); /* more than the double's capacity */
    if (rc != 2) {
        fprintf(stderr, "target_cuda: expected out of memory, got %d\n", rc);
        return 1;
    }
    PL_CHECK_RC(cudaFree(b));

    void *e, *f, *g, *h, *k, *l, *hp;
    size_t pitch = 0;
    uint64_t d2;
    PL_CHECK_RC(cudaMallocAsync_ptsz(&e, 6000, NULL));
    PL_CHECK_RC(cudaMallocFromPoolAsync(&f, 7000, (void *)1, NULL));
    PL_CHECK_RC(cudaMallocFromPoolAsync_ptsz(&g, 7100, (void *)1, NULL));
    PL_CHECK_RC(cudaMallocPitch(&h, &pitch, 1000, 3));
    pitched_ptr_t p3 = {0};
    PL_CHECK_RC(cudaMalloc3D(&p3, (extent_t){1000, 2, 3}));
    PL_CHECK_RC(cudaMallocHost(&k, 5000));
    PL_CHECK_RC(cudaHostAlloc(&l, 3000, 0));
    PL_CHECK_RC(standin_driver_pitch(&d2, 2000, 2));
    PL_CHECK_RC(standin_driver_host(&hp, 8192));
    PL_CHECK_RC(cudaFreeAsync_ptsz(e, NULL));
    PL_CHECK_RC(cudaFreeAsync(f, NULL));
    PL_CHECK_RC(cudaFreeAsync_ptsz(g, NULL));
    PL_CHECK_RC(cudaFree(h));
    PL_CHECK_RC(cudaFree(p3.ptr));
    PL_CHECK_RC(cudaFreeHost(k));
    PL_CHECK_RC(cudaFreeHost(l));
    PL_CHECK_RC(standin_driver_free(d2));
    PL_CHECK_RC(standin_driver_free_host(hp));
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
