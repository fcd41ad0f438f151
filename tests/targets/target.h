/* Shared bits of the preload's target programs: the step/mark API looked up at run time (the programs also
 * run without the tracer), and fail-fast checks (common/check.h PL_CHECK; a failed one exits 3). */
#pragma once

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PL_CHECK_EXIT 3
#include "check.h"

static inline void step(void) {
    static void (*fn)(void);
    static int looked;
    if (!looked) {
        void *p = dlsym(RTLD_DEFAULT, "plateau_step");
        memcpy(&fn, &p, sizeof p);
        looked = 1;
    }
    if (fn) fn();
}

static inline void mark(const char *label) {
    void (*fn)(const char *);
    void *p = dlsym(RTLD_DEFAULT, "plateau_mark");
    memcpy(&fn, &p, sizeof p);
    if (fn) fn(label);
}

static inline int arg_int(int argc, char **argv, int i, int def) { return argc > i ? atoi(argv[i]) : def; }
