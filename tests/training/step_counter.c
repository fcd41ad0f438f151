/* Test double of the tracer's step API (include/plateau/step.h) for tests/training/test_train_cli.c: preloaded into
 * plateau-train, it counts plateau_step() and plateau_mark() calls and reports them on stderr at exit. */
#include <stdio.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static int n_steps, n_marks;
static char last_mark[64];

EXPORT void plateau_step(void) { n_steps++; }

EXPORT void plateau_mark(const char *label) {
    n_marks++;
    snprintf(last_mark, sizeof last_mark, "%s", label ? label : "");
}

__attribute__((destructor)) static void report(void) {
    fprintf(stderr, "step_counter: steps=%d marks=%d last=%s\n", n_steps, n_marks, last_mark);
}
