/* Target: an 8-thread malloc storm (mixed sizes, calloc/realloc/memalign/free, cross-thread frees). Between
 * two plateau_step() calls, exactly KEPT blocks per thread stay live; the program prints how many blocks and
 * usable bytes it kept so the test can compare the tracer's exact totals.
 * Usage: storm [ITERS=200000] [THREADS=8]. Output: "kept N BYTES". */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>

#include "target.h"

#define KEPT 100

typedef struct {
    int iters;
    unsigned seed;
    void *kept[KEPT];
    size_t kept_bytes;
    void *handoff[256]; /* freed by the next thread: cross-thread frees */
} work_t;

static work_t works[64];
static int n_threads;

static void *worker(void *arg) {
    work_t *w = arg;
    void *ring[64] = {0};
    unsigned x = w->seed;
    for (int i = 0; i < w->iters; i++) {
        x = x * 1103515245u + 12345u;
        size_t size = 8u << ((x >> 16) % 12); /* 8 B .. 16 KiB */
        size += (x >> 8) % 64;
        int slot = (int)((x >> 4) % 64);
        if (ring[slot]) free(ring[slot]);
        switch ((x >> 20) % 4) {
        case 0: ring[slot] = malloc(size); break;
        case 1: ring[slot] = calloc(1, size); break;
        case 2: ring[slot] = realloc(malloc(16), size); break;
        default: ring[slot] = memalign(64, size); break;
        }
        PL_CHECK(ring[slot]);
    }
    for (int i = 0; i < 64; i++) free(ring[i]);
    for (int i = 0; i < 256; i++) w->handoff[i] = malloc(100 + (size_t)i);
    for (int i = 0; i < KEPT; i++) {
        w->kept[i] = malloc(24 + (size_t)i * 8);
        w->kept_bytes += malloc_usable_size(w->kept[i]);
    }
    return NULL;
}

static void run(int iters) {
    pthread_t th[64];
    for (int i = 0; i < n_threads; i++) {
        works[i].iters = iters;
        works[i].seed = 17u * (unsigned)i + 1;
        PL_CHECK(pthread_create(&th[i], NULL, worker, &works[i]) == 0);
    }
    for (int i = 0; i < n_threads; i++) pthread_join(th[i], NULL);
    /* Cross-thread frees: each thread's handoff blocks are freed here, by the main thread. */
    for (int i = 0; i < n_threads; i++)
        for (int k = 0; k < 256; k++) free(works[i].handoff[k]);
}

int main(int argc, char **argv) {
    int iters = arg_int(argc, argv, 1, 200000);
    n_threads = arg_int(argc, argv, 2, 8);
    PL_CHECK(n_threads >= 1 && n_threads <= 64);
    /* Warm-up round: thread creation's own first-time allocations happen here, outside the measurement. */
    run(100);
    for (int i = 0; i < n_threads; i++) {
        for (int k = 0; k < KEPT; k++) free(works[i].kept[k]);
        works[i].kept_bytes = 0;
    }
    step();
    run(iters);
    step();
    size_t n = 0, bytes = 0;
    for (int i = 0; i < n_threads; i++) {
        n += KEPT;
        bytes += works[i].kept_bytes;
    }
    printf("kept %zu %zu\n", n, bytes);
    fflush(stdout);
    return 0;
}
