/* Target: steps during an allocation storm. Two threads allocate and free without pause while the main thread
 * allocates a little and calls plateau_step() STEPS times (a mark every 10 steps); run with
 * PLATEAU_SAMPLE_BYTES=0 and a small PLATEAU_BUFFER_BYTES the writer cannot keep up, sampled records are lost,
 * and the step records must all be there. Usage: stepstorm [STEPS=100]. Output: "steps N". */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "target.h"

static atomic_int done;

static void *storm(void *arg) {
    unsigned x = (unsigned)(uintptr_t)arg;
    void *ring[32] = {0};
    while (!atomic_load_explicit(&done, memory_order_relaxed)) {
        for (int i = 0; i < 256; i++) {
            x = x * 1103515245u + 12345u;
            int slot = (int)((x >> 8) % 32);
            free(ring[slot]);
            ring[slot] = malloc(16 + (x >> 16) % 2000);
            PL_CHECK(ring[slot]);
        }
    }
    for (int i = 0; i < 32; i++) free(ring[i]);
    return NULL;
}

int main(int argc, char **argv) {
    int steps = arg_int(argc, argv, 1, 100);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) PL_CHECK(pthread_create(&th[i], NULL, storm, (void *)(uintptr_t)(i + 1)) == 0);
    for (int s = 1; s <= steps; s++) {
        void *volatile t[64];
        for (int i = 0; i < 64; i++) t[i] = malloc(100 + (size_t)i * 10);
        for (int i = 0; i < 64; i++) free(t[i]);
        if (s % 10 == 0) mark("ten");
        step();
    }
    atomic_store(&done, 1);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    printf("steps %d\n", steps);
    return 0;
}
