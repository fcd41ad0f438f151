/* allocator/debug.h: the allocator's checks, by PL_DEBUG (config.h, from meson's debug_level option).
 *
 *   PL_REQUIRE(cond, what, ptr)  always on, only where continuing would corrupt the heap (a double free, a backend
 *                                that refuses to take memory back): one line on stderr naming file:line, the
 *                                condition, `what` and `ptr`, then abort().
 *   PL_ASSERT(cond)              PL_DEBUG >= 1: cheap local invariants (the neighbour links, sizes, segment,
 *                                stream and states of the blocks a splice or merge touches); same line, abort().
 *   PL_EXPENSIVE                 1 when PL_DEBUG >= 2: whole-heap walks (pl_alloc_check after every malloc, free
 *                                and empty_cache: alloc.c).
 * All three test PL_DEBUG with a plain `if`, so disabled checks still compile and cost nothing at run time.
 */
#pragma once

#include "config.h"

#define PL_EXPENSIVE (PL_DEBUG >= 2)

/* Prints "plateau allocator: FILE:LINE: check `cond` failed: what [ptr]" and aborts. Never returns. */
__attribute__((noreturn, cold)) void pl_debug_fail(const char *file, int line, const char *cond, const char *what,
                                                   const void *ptr);

#define PL_REQUIRE(cond, what, ptr)                                                                      \
    do {                                                                                                 \
        if (__builtin_expect(!(cond), 0)) pl_debug_fail(__FILE__, __LINE__, #cond, what, ptr);           \
    } while (0)

#define PL_ASSERT(cond)                                                                                  \
    do {                                                                                                 \
        if (PL_DEBUG >= 1 && __builtin_expect(!(cond), 0))                                               \
            pl_debug_fail(__FILE__, __LINE__, #cond, "invariant broken", NULL);                          \
    } while (0)
