/* Target: a known leak. Each step, leak_function() keeps 16 blocks of 4000 bytes (64000 B per step) and the
 * step's temporaries are freed. Usage: leak [STEPS=30]. Built with -rdynamic so the tracer can name
 * leak_function. */
#include "target.h"

void *volatile *kept;
size_t n_kept;

__attribute__((noinline)) void leak_function(void) {
    for (int i = 0; i < 16; i++) {
        kept[n_kept] = malloc(4000);
        memset(kept[n_kept], 1, 4000);
        n_kept++;
    }
}

__attribute__((noinline)) void temporaries(void) {
    void *volatile t[32];
    for (int i = 0; i < 32; i++) t[i] = malloc(1000 + (size_t)i * 100);
    for (int i = 0; i < 32; i++) free(t[i]);
}

int main(int argc, char **argv) {
    int steps = arg_int(argc, argv, 1, 30);
    kept = calloc((size_t)steps * 16, sizeof(void *));
    PL_CHECK(kept);
    for (int s = 0; s < steps; s++) {
        temporaries();
        leak_function();
        step();
    }
    printf("leaked %zu blocks\n", n_kept);
    return 0;
}
