/* The preload's dlsym trampoline (preload/dlsym_trampoline.h) alone, in a shared library, for
 * test_dlsym_trampoline.c (built natively, and cross-built for aarch64 by dlsym_trampoline_cross.sh). It plays the
 * preload's part: the hidden hooks the trampoline calls, and an exported probe() that a later library
 * (dlsym_tramp_probe2.c) defines too, so the test can tell which object RTLD_NEXT started after. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <execinfo.h>
#include <string.h>

#define HIDDEN __attribute__((visibility("hidden")))
#define EXPORT __attribute__((visibility("default")))

typedef void *(*dlsym_fn)(void *, const char *);
HIDDEN dlsym_fn pl_cuda_real_dlsym;
HIDDEN int pl_cuda_dlsym_hot(void *handle, const char *name);
HIDDEN void *pl_cuda_dlsym_slow(void *handle, const char *name);

static int n_slow;
static int unwound_to_main; /* backtrace() from inside the hook reached the test's main: the CFI is right */
static int marker;

int pl_cuda_dlsym_hot(void *handle, const char *name) {
    (void)handle;
    if (!strcmp(name, "tramp_unwind")) {
        void *pcs[32];
        int n = backtrace(pcs, 32);
        for (int i = 0; i < n; i++) {
            Dl_info info;
            if (dladdr(pcs[i], &info) && info.dli_sname && !strcmp(info.dli_sname, "main")) unwound_to_main = 1;
        }
        return 0;
    }
    return !strcmp(name, "tramp_hot");
}

void *pl_cuda_dlsym_slow(void *handle, const char *name) {
    (void)handle;
    (void)name;
    n_slow++;
    return &marker;
}

#include "dlsym_trampoline.h"

EXPORT int tramp_available(void) { return PL_DLSYM_TRAMPOLINE; }

EXPORT int tramp_init(void) {
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17"); /* aarch64's first glibc version */
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    memcpy(&pl_cuda_real_dlsym, &p, sizeof p);
    return p != NULL;
}

EXPORT int tramp_slow_calls(void) { return n_slow; }
EXPORT void *tramp_marker(void) { return &marker; }
EXPORT int tramp_unwound_to_main(void) { return unwound_to_main; }
EXPORT int probe(void) { return 1; }
