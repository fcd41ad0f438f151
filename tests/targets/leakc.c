/* Target: a C loop that keeps BYTES per step, then calls plateau_step(). Usage:
 *   leakc [STEPS=300] [BYTES=65536] [WARMUP=0] [STEP_US=1000]
 * WARMUP 0: every step keeps BYTES (a leak). WARMUP N > 0: only the first N steps keep BYTES, then the loop runs on
 * flat (a warmup of N steps, then a plateau). Each step also frees its temporaries and sleeps STEP_US microseconds.
 * Prints "done" on stdout at the end and exits 0: a test sees whether the program ran to its end. */
#include <unistd.h>

#include "target.h"

__attribute__((noinline)) static void keep(size_t bytes) {
    if (!bytes) return;
    char *volatile p = malloc(bytes);
    PL_CHECK(p);
    memset(p, 1, bytes); /* touched: RSS grows with it */
}

__attribute__((noinline)) static void temporaries(void) {
    void *volatile t[8];
    for (int i = 0; i < 8; i++) t[i] = malloc(512 + (size_t)i * 64);
    for (int i = 0; i < 8; i++) free(t[i]);
}

int main(int argc, char **argv) {
    int steps = arg_int(argc, argv, 1, 300), warmup = arg_int(argc, argv, 3, 0), step_us = arg_int(argc, argv, 4, 1000);
    size_t bytes = (size_t)arg_int(argc, argv, 2, 65536);
    for (int s = 0; s < steps; s++) {
        temporaries();
        if (warmup == 0 || s < warmup) keep(bytes);
        if (step_us > 0) usleep((useconds_t)step_us);
        step();
    }
    printf("done\n");
    return 0;
}
