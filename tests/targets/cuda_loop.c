/* Target for the GPU check over the driver double (tools/gpu-check.sh step 3, docs/gpu-check.md): a training-like
 * loop whose device memory goes through the stand-in runtime (cudart_standin.c, linked like libcudart), one
 * plateau_step() a step. Each step allocates three working buffers (1, 2 and 3 MiB) and frees them; then
 *   leak     keeps one 1 MiB cudaMalloc a step (the line marked `gpu-check: leak`)
 *   healthy  fills a cache of 30 slots of 1 MiB over the first 30 steps, then reuses it: a warmup that plateaus
 * Usage: cuda_loop leak|healthy [STEPS=200]. Prints "cuda_loop: N steps, M MiB kept". Exits 3 on a failed call. */
#include <stdint.h>

#include "target.h"

int cudaMalloc(void **ptr, size_t size);
int cudaFree(void *ptr);

#define MiB ((size_t)1 << 20)
#define MAX_STEPS 4096

int main(int argc, char **argv) {
    PL_CHECK(argc >= 2);
    int leak = strcmp(argv[1], "leak") == 0;
    PL_CHECK(leak || strcmp(argv[1], "healthy") == 0);
    int steps = arg_int(argc, argv, 2, 200);
    PL_CHECK(steps > 0 && steps <= MAX_STEPS);
    static void *kept[MAX_STEPS];
    void *cache[30] = {0};
    int n_kept = 0;
    for (int s = 0; s < steps; s++) {
        void *work[3];
        for (int i = 0; i < 3; i++) PL_CHECK(cudaMalloc(&work[i], (size_t)(i + 1) * MiB) == 0);
        for (int i = 2; i >= 0; i--) PL_CHECK(cudaFree(work[i]) == 0);
        if (leak) {
            PL_CHECK(cudaMalloc(&kept[n_kept++], MiB) == 0); /* gpu-check: leak */
        } else if (!cache[s % 30]) {
            PL_CHECK(cudaMalloc(&cache[s % 30], MiB) == 0);
            n_kept++;
        }
        step();
    }
    printf("cuda_loop: %d steps, %d MiB kept\n", steps, n_kept);
    fflush(stdout);
    for (int i = 0; i < n_kept && leak; i++) PL_CHECK(cudaFree(kept[i]) == 0);
    for (int i = 0; i < 30; i++)
        if (cache[i]) PL_CHECK(cudaFree(cache[i]) == 0);
    return 0;
}
