/* A plugin (think: a Python extension module) linked against the stand-in libcudart and loaded by
 * target_cuda_local with RTLD_LOCAL: the runtime is then in the plugin's local scope only, so the preload's
 * exported cudaMalloc must find the real one there (dlsym(RTLD_NEXT) from the preload cannot). */
#include <stddef.h>

int cudaMalloc(void **ptr, size_t size);
int cudaFree(void *ptr);

__attribute__((visibility("default"))) int cuda_plugin_run(void) {
    void *p = NULL;
    int rc = cudaMalloc(&p, 4096 * 3);
    if (rc) return rc;
    return cudaFree(p);
}
