/* Target: a warmup, then a leak (or a plateau), with optional hand-offs so that a test can see each phase while the
 * program runs, without timing. Usage: warmleak WARMUP STEPS [GO_FILE|-] [END_FILE|-] [LEAK_BYTES=65536]
 *   WARMUP steps each keep 256 KiB (a cache filling up); then, once GO_FILE exists, STEPS steps each keep
 *   LEAK_BYTES (0: a plateau) and sleep 2 ms; then it waits for END_FILE and exits 0. A missing file is waited for
 *   at most 120 s (a hang guard: exit 4). */
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

__attribute__((noinline)) void warm_cache(void) {
    char *volatile p = malloc(256 * 1024);
    PL_CHECK(p);
    memset(p, 1, 256 * 1024);
}

__attribute__((noinline)) void leak_step(size_t bytes) {
    if (!bytes) return;
    char *volatile p = malloc(bytes);
    PL_CHECK(p);
    memset(p, 2, bytes);
}

__attribute__((noinline)) void temporaries(void) {
    void *volatile t[16];
    for (int i = 0; i < 16; i++) t[i] = malloc(1000 + (size_t)i * 64);
    for (int i = 0; i < 16; i++) free(t[i]);
}

static void wait_file(const char *path) {
    if (!path || !strcmp(path, "-")) return;
    struct stat sb;
    for (int i = 0; i < 12000; i++) {
        if (!stat(path, &sb)) return;
        usleep(10000);
    }
    fprintf(stderr, "warmleak: %s never appeared\n", path);
    exit(4);
}

int main(int argc, char **argv) {
    int warmup = arg_int(argc, argv, 1, 30), steps = arg_int(argc, argv, 2, 300);
    size_t leak = (size_t)arg_int(argc, argv, 5, 65536);
    for (int s = 0; s < warmup; s++) {
        warm_cache();
        temporaries();
        step();
        usleep(2000);
    }
    wait_file(argc > 3 ? argv[3] : NULL);
    for (int s = 0; s < steps; s++) {
        leak_step(leak);
        temporaries();
        step();
        usleep(2000);
    }
    wait_file(argc > 4 ? argv[4] : NULL);
    return 0;
}
