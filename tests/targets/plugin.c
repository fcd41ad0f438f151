/* Shared library for the dlopen target: plugin_leak keeps 8 KiB per call. */
#include <stdlib.h>
#include <string.h>

static void *volatile kept[4096];
static int n_kept;

__attribute__((visibility("default"), noinline)) void plugin_leak(void) {
    if (n_kept < 4096) {
        kept[n_kept] = malloc(8192);
        memset(kept[n_kept], 2, 8192);
        n_kept++;
    }
}
