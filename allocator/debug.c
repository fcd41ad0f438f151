/* allocator/debug.c: the one failure path of PL_REQUIRE and PL_ASSERT (debug.h). Fail fast: the heap is about to
 * be (or already is) inconsistent, so nothing is freed and nothing else is called but stderr and abort(). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "debug.h"

void pl_debug_fail(const char *file, int line, const char *cond, const char *what, const void *ptr) {
    if (ptr)
        fprintf(stderr, "plateau allocator: %s:%d: check `%s` failed: %s %p\n", file, line, cond, what, ptr);
    else
        fprintf(stderr, "plateau allocator: %s:%d: check `%s` failed: %s\n", file, line, cond, what);
    abort();
}
