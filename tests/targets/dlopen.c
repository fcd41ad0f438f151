/* Target: a leak inside a library loaded with dlopen after the tracer started. Usage: dlopen PLUGIN.so
 * [STEPS=10]. */
#include "target.h"

int main(int argc, char **argv) {
    PL_CHECK(argc >= 2);
    void *h = dlopen(argv[1], RTLD_NOW);
    PL_CHECK(h);
    void (*leak)(void);
    void *p = dlsym(h, "plugin_leak");
    PL_CHECK(p);
    memcpy(&leak, &p, sizeof p);
    int steps = arg_int(argc, argv, 2, 10);
    for (int s = 0; s < steps; s++) {
        leak();
        step();
    }
    return 0;
}
