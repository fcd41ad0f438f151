/* common/grow: the one growable-array step. An array of *cap elements of elem bytes grows geometrically (doubling,
 * from a first capacity) until it holds need elements, so n appends cost O(n) copies in all; the byte count is
 * checked for size_t overflow before any allocation, so a caller's count read from a file cannot wrap a realloc
 * size. Used by the readers and writers that keep their own arrays (tracer/read, tune, collector); pl_table_t
 * (table.h) keeps its own rehash. Not thread-safe per array. */
#pragma once

#include <stddef.h>

/* The first capacity pl_grow gives an empty array, in elements. */
#define PL_GROW_FIRST 16

/* The capacity an array of cap elements grows to so that it holds need: cap doubled (first when cap is 0) until it
 * is at least need, saturating at the largest count of elem-byte elements a size_t can measure. Returns cap when it
 * already holds need, 0 when need elements of elem bytes do not fit a size_t (or elem is 0). For callers that
 * charge the capacity to a budget or clamp it before they allocate. */
size_t pl_grow_cap(size_t cap, size_t need, size_t first, size_t elem);

/* The slow half of pl_grow_first: the realloc, for need > *cap. */
int pl_grow_realloc(void **p, size_t *cap, size_t need, size_t elem, size_t first);

/* Make *p (a malloc'd array of *cap elements of elem bytes, or NULL with *cap 0) hold at least need elements:
 * realloc to pl_grow_cap(*cap, need, first, elem). Returns 0 (also when it already holds need: inline, no call, so
 * it may sit on a per-record path), or -1 with errno EOVERFLOW (the byte count does not fit a size_t) or ENOMEM; on
 * failure *p and *cap are unchanged and *p is still the caller's to free. New elements are not initialised. */
static inline int pl_grow_first(void **p, size_t *cap, size_t need, size_t elem, size_t first) {
    return need <= *cap ? 0 : pl_grow_realloc(p, cap, need, elem, first);
}

/* pl_grow_first from PL_GROW_FIRST elements. */
static inline int pl_grow(void **p, size_t *cap, size_t need, size_t elem) {
    return pl_grow_first(p, cap, need, elem, PL_GROW_FIRST);
}
