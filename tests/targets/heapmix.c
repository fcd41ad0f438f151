/* Target: a leak in the malloc heap and in the program's own anonymous mappings, for comparing host allocators.
 * Each step keeps 16 blocks of 4000 bytes, one block of 300 KiB (large enough that glibc serves it by mmap and
 * jemalloc from a mapped extent) and one 64 KiB anonymous mapping of its own; the step's temporaries are freed.
 * The live heap must grow by the same amount per step on glibc and on jemalloc (usable sizes aside), and the
 * mapping by exactly 64 KiB per step. Usage: heapmix [STEPS=20]. */
#include <sys/mman.h>

#include "target.h"

#define MAP_BYTES (64 * 1024)

static void *volatile *kept;
static size_t n_kept;

__attribute__((noinline)) static void keep_some(void) {
    for (int i = 0; i < 16; i++) {
        kept[n_kept] = malloc(4000);
        PL_CHECK(kept[n_kept]);
        memset(kept[n_kept], 1, 4000);
        n_kept++;
    }
    kept[n_kept] = malloc(300 * 1024);
    PL_CHECK(kept[n_kept]);
    memset(kept[n_kept], 2, 300 * 1024);
    n_kept++;
    void *m = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    PL_CHECK(m != MAP_FAILED);
    memset(m, 3, MAP_BYTES);
}

__attribute__((noinline)) static void temporaries(void) {
    void *volatile t[32];
    for (int i = 0; i < 32; i++) t[i] = malloc(1000 + (size_t)i * 2000);
    for (int i = 0; i < 32; i++) free(t[i]);
}

int main(int argc, char **argv) {
    int steps = arg_int(argc, argv, 1, 20);
    kept = calloc((size_t)steps * 17, sizeof(void *));
    PL_CHECK(kept);
    for (int s = 0; s < steps; s++) {
        temporaries();
        keep_some();
        step();
    }
    printf("kept %zu blocks\n", n_kept);
    return 0;
}
