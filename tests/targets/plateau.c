/* Target: a warmup plateau. A cache grows during the first WARMUP steps (cache_fill keeps 64 KiB per step)
 * and stays at that size; per-step work allocates and frees everything else. Usage: plateau [STEPS=40]
 * [WARMUP=10]. */
#include "target.h"

static void *volatile cache[1024]; /* volatile: the compiler must not elide these mallocs */

__attribute__((noinline)) void cache_fill(int s) {
    for (int i = 0; i < 16; i++) {
        cache[s * 16 + i] = malloc(4096);
        memset(cache[s * 16 + i], 1, 4096);
    }
}

__attribute__((noinline)) void work(void) {
    void *volatile t[64];
    for (int i = 0; i < 64; i++) t[i] = malloc(512 + (size_t)i * 64);
    for (int i = 63; i >= 0; i--) free(t[i]);
}

int main(int argc, char **argv) {
    int steps = arg_int(argc, argv, 1, 40), warmup = arg_int(argc, argv, 2, 10);
    PL_CHECK(warmup * 16 <= 1024);
    for (int s = 0; s < steps; s++) {
        if (s < warmup) cache_fill(s);
        work();
        step();
    }
    return 0;
}
