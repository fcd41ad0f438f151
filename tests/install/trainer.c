/* A trainer built from an install (tests/install/test_install.sh): `cc trainer.c $(pkg-config --cflags --libs
 * plateau)`, or CMake's find_package(plateau). It steps with plateau_step() and plateau_mark() from
 * <plateau/step.h>, allocates through the caching allocator of <plateau/alloc.h> on the sim device, and prints
 * what it ran with. Usage: trainer [STEPS=12]. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plateau/alloc.h>
#include <plateau/step.h>

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 12;
    pl_sim_options_t so;
    pl_sim_options_default(&so);
    so.capacity_bytes = (size_t)1 << 30;
    pl_backend_t *be;
    pl_alloc_t *a;
    char err[256];
    if (pl_backend_sim_create(&so, &be) || pl_alloc_create(be, NULL, &a, err, sizeof err)) {
        fprintf(stderr, "trainer: cannot create the allocator\n");
        return 1;
    }
    plateau_mark("train-begin");
    for (int s = 0; s < steps; s++) {
        void *act = pl_alloc_malloc(a, (size_t)4 << 20, 0); /* an activation, freed within the step */
        char *host = malloc(4096);
        if (!act || !host) return 1;
        memset(host, s, 4096);
        pl_alloc_free(a, act);
        free(host);
        plateau_step();
    }
    pl_alloc_stats_t st;
    pl_alloc_get_stats(a, &st);
    printf("trainer: %d steps, peak reserved %zu bytes\n", steps, (size_t)st.reserved_bytes[0].peak);
    /* the tracer keeps its variables out of the program's environment (docs/env.md): which preload is mapped, and
     * the PYTHONPATH it hands to a Python child, from the tracer itself */
    char line[4096], preload[4096] = "";
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps)) {
        char *p = strstr(line, " /");
        if (p && strstr(p, "libplateau_preload.so")) {
            snprintf(preload, sizeof preload, "%s", p + 1);
            preload[strcspn(preload, "\n")] = 0;
            break;
        }
    }
    if (maps) fclose(maps);
    printf("preload=%s\n", preload);
    const char *(*env)(const char *);
    void *sym = dlsym(RTLD_DEFAULT, "plateau_env");
    memcpy(&env, &sym, sizeof env);
    const char *pp = env ? env("PYTHONPATH") : NULL;
    printf("PYTHONPATH=%s\n", pp ? pp : "");
    pl_alloc_destroy(a);
    pl_backend_destroy(be);
    return 0;
}
