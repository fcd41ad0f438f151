/* Target for tests/preload/test_cuda.c: dlopen the real CUDA runtime (argv[1]) and call cudaMalloc once. Without
 * a GPU the call fails during the runtime's initialisation (expected): what matters is the driver look-ups the
 * runtime made on the way, which the preload reports with PLATEAU_DEBUG_CUDA=1. Prints the cudaMalloc result. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "target_cudart_real: %s\n", dlerror());
        return 3;
    }
    void *sym = dlsym(h, "cudaMalloc");
    int (*cuda_malloc)(void **, size_t);
    if (!sym) return 4;
    memcpy(&cuda_malloc, &sym, sizeof sym);
    void *p = NULL;
    printf("cudaMalloc %d\n", cuda_malloc(&p, 1 << 20));
    return 0;
}
