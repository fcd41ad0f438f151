/* Target: a leak in a static (non-exported) function, which dladdr cannot name even with -rdynamic: the report
 * must find leak_static_fn in the executable's .symtab (reports/ingest/symbols.c). Each step keeps 16 blocks of 4000
 * bytes from leak_static_fn; temporaries are freed. Usage: leak_static [STEPS=30]. */
#include "target.h"

static void *volatile *kept;
static size_t n_kept;

static __attribute__((noinline)) void leak_static_fn(void) {
    for (int i = 0; i < 16; i++) {
        kept[n_kept] = malloc(4000);
        memset(kept[n_kept], 1, 4000);
        n_kept++;
    }
}

static __attribute__((noinline)) void scratch_static_fn(void) {
    void *volatile t[8];
    for (int i = 0; i < 8; i++) t[i] = malloc(2000);
    for (int i = 0; i < 8; i++) free(t[i]);
}

int main(int argc, char **argv) {
    int steps = arg_int(argc, argv, 1, 30);
    kept = calloc((size_t)steps * 16, sizeof(void *));
    PL_CHECK(kept);
    for (int s = 0; s < steps; s++) {
        scratch_static_fn();
        leak_static_fn();
        step();
    }
    printf("leaked %zu blocks\n", n_kept);
    return 0;
}
