/* The preload's dlsym trampoline (preload/dlsym_trampoline.h), tested alone: this program links
 * libdlsym_tramp.so (the trampoline, exporting `dlsym` and probe() = 1) and then libdlsym_tramp_probe2.so
 * (probe() = 2). Checks:
 *  - dlsym(RTLD_NEXT, "probe") from this program answers the first object after it (probe() == 1). Were the
 *    trampoline to call the real dlsym instead of jumping, glibc would take the trampoline's library as the caller
 *    and answer the next one (probe() == 2).
 *  - a name the hook claims goes to the slow path; a handle lookup still works;
 *  - backtrace() inside the hook unwinds through the trampoline to main (its CFI is right).
 * Plain C (no cmocka): it is also cross-built for aarch64 and run under qemu by dlsym_trampoline_cross.sh.
 * Exit 0 = pass, 77 = no trampoline on this architecture (skip), 1 = failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "check.h" /* PL_CHECK: a failure exits 1 */

int tramp_available(void);
int tramp_init(void);
int tramp_slow_calls(void);
void *tramp_marker(void);
int tramp_unwound_to_main(void);
int probe2_loaded(void); /* keeps libdlsym_tramp_probe2.so linked */

/* exported (-rdynamic, and visible despite the build's -fvisibility=hidden) so dladdr can name it */
__attribute__((visibility("default"))) int main(void) {
    if (!tramp_available()) {
        fprintf(stderr, "test_dlsym_trampoline: no dlsym trampoline on this architecture: skipped\n");
        return 77;
    }
    PL_CHECK(probe2_loaded());
    PL_CHECK(tramp_init());
    void *p = dlsym(RTLD_NEXT, "probe");
    PL_CHECK(p != NULL);
    int (*probe)(void);
    memcpy(&probe, &p, sizeof p);
    PL_CHECK(probe() == 1);
    PL_CHECK(tramp_slow_calls() == 0);
    PL_CHECK(dlsym(RTLD_DEFAULT, "tramp_hot") == tramp_marker());
    PL_CHECK(tramp_slow_calls() == 1);
    void *h = dlopen("libdlsym_tramp_probe2.so", RTLD_NOW | RTLD_NOLOAD);
    PL_CHECK(h != NULL);
    p = dlsym(h, "probe");
    PL_CHECK(p != NULL);
    memcpy(&probe, &p, sizeof p);
    PL_CHECK(probe() == 2);
    PL_CHECK(dlsym(RTLD_DEFAULT, "tramp_unwind") == NULL);
    PL_CHECK(tramp_unwound_to_main());
    PL_CHECK(tramp_slow_calls() == 1);
    printf("test_dlsym_trampoline: ok\n");
    return 0;
}
