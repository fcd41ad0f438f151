/* Target: a leak that starts mid-run, and a chosen end. Usage: lateleak FLAT LEAK [BYTES=262144] [END=exit]
 *   FLAT steps allocate and free temporaries only (flat memory); then LEAK steps each also keep BYTES from
 *   leak_later(); then the program ends as END says: "exit" (return 0), "segv" (a crash: SIGSEGV), "abort"
 *   (SIGABRT), "kill" (SIGKILL, as the OOM killer sends it), "exhaust" (keeps allocating 1 MiB blocks until malloc
 *   fails, under an address-space limit: exit 12, as an out-of-memory program does). */
#include <signal.h>
#include <unistd.h>

#include "target.h"

__attribute__((noinline)) void leak_later(size_t bytes) {
    char *volatile p = malloc(bytes);
    PL_CHECK(p);
    memset(p, 3, bytes);
}

__attribute__((noinline)) void scratch(void) {
    void *volatile t[8];
    for (int i = 0; i < 8; i++) t[i] = malloc(4096 + (size_t)i * 512);
    for (int i = 0; i < 8; i++) free(t[i]);
}

__attribute__((noinline)) static int exhaust(void) {
    for (;;) {
        char *volatile p = malloc(1 << 20);
        if (!p) return 12;
        memset(p, 4, 1 << 20);
    }
}

int main(int argc, char **argv) {
    int flat = arg_int(argc, argv, 1, 50), leak = arg_int(argc, argv, 2, 50);
    size_t bytes = (size_t)arg_int(argc, argv, 3, 262144);
    const char *end = argc > 4 ? argv[4] : "exit";
    for (int s = 0; s < flat + leak; s++) {
        if (s >= flat) leak_later(bytes);
        scratch();
        step();
        usleep(1000);
    }
    if (!strcmp(end, "segv")) raise(SIGSEGV);
    if (!strcmp(end, "abort")) abort();
    if (!strcmp(end, "kill")) raise(SIGKILL);
    if (!strcmp(end, "exhaust")) return exhaust();
    return 0;
}
