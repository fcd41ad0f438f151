/* libplateau: no-op definitions of the step and mark API (include/plateau/step.h) for programs that link it
 * (`pkg-config --libs plateau`) instead of looking the functions up at run time. Under `plateau run` the preloaded
 * tracer (libplateau_preload.so) comes before this library in the global symbol lookup order, so the program's
 * calls reach the tracer's definitions; without the tracer they land here and do nothing. Never part of the
 * preload itself. */
#include <plateau/step.h>

PL_STEP_API void plateau_step(void) {}
PL_STEP_API void plateau_step_auto(void) {}
PL_STEP_API void plateau_mark(const char *label) { (void)label; }
PL_STEP_API void plateau_alloc_stats(int source, int device, const uint64_t *vals, int n) {
    (void)source;
    (void)device;
    (void)vals;
    (void)n;
}
PL_STEP_API void plateau_retention(unsigned census, unsigned flags, const uint64_t *vals, int n, const char *path,
                                   const char *what, const char *kind, const char *file, int line, const char *fix) {
    (void)census;
    (void)flags;
    (void)vals;
    (void)n;
    (void)path;
    (void)what;
    (void)kind;
    (void)file;
    (void)line;
    (void)fix;
}
