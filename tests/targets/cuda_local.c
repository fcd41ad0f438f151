/* Target for tests/preload/test_cuda.c: dlopen(argv[1], RTLD_LOCAL) a plugin linked against a CUDA runtime and
 * run its cuda_plugin_run (cuda_plugin.c). Exit status: 0, or the plugin's error code, or 2..4 for set-up errors. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "target_cuda_local: %s\n", dlerror());
        return 3;
    }
    void *sym = dlsym(h, "cuda_plugin_run");
    if (!sym) return 4;
    int (*run)(void);
    memcpy(&run, &sym, sizeof sym);
    int rc = run();
    if (rc) fprintf(stderr, "target_cuda_local: cuda_plugin_run -> %d\n", rc);
    return rc;
}
