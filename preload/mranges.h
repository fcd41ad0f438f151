/* The program's live anonymous mappings as disjoint page-aligned ranges [lo, hi), sorted by lo *descending*: the
 * kernel places new mappings below older ones, so the common insert is an append. A partial munmap trims or splits
 * a range, mremap moves or resizes it, a MAP_FIXED mapping replaces what it covers, so live bytes stay exact
 * (counted in whole pages, as the kernel maps them). The range count is what `mmap_live_count` reports: a hole
 * punched in the middle of a mapping makes two.
 * Not thread-safe: the caller serialises every call (heap.c holds its mutex across the real mmap/munmap/mremap
 * and the update, so two threads' operations on the same addresses are applied in the kernel's order). No
 * malloc: storage is mmap'd (raw system call) by pl_mranges_map. When full, a new range is not tracked (and not
 * counted), and a split that finds no room drops its lower piece from the count (live bytes then under-count,
 * never go negative). Linked alone by its unit test (tests/preload/test_mranges.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct { uintptr_t lo, hi; } pl_mrange_t;

typedef struct pl_mranges {
    pl_mrange_t *r;  /* [max], NULL until mapped */
    uint32_t n;      /* ranges in r */
    uint32_t max;    /* capacity of r */
    bool failed;     /* the storage could not be mapped: nothing is tracked */
} pl_mranges_t;

/* What an operation changed: tracked bytes and ranges (the caller adds them to its counters). */
typedef struct { int64_t bytes, count; } pl_mranges_delta_t;

/* Map storage for `max` ranges (at least 512) unless mapped already or failed before. Returns 0 or -ENOMEM. */
int pl_mranges_map(pl_mranges_t *t, uint32_t max);

/* Forget [lo, hi) (unmapped or replaced): trims, splits or drops the ranges it overlaps. */
void pl_mranges_cut(pl_mranges_t *t, uintptr_t lo, uintptr_t hi, pl_mranges_delta_t *d);

/* Track the new mapping [lo, hi), after cutting whatever it replaced. Needs pl_mranges_map first (else nothing
 * is tracked). */
void pl_mranges_add(pl_mranges_t *t, uintptr_t lo, uintptr_t hi, pl_mranges_delta_t *d);

/* Tracked bytes of [lo, hi). */
uintptr_t pl_mranges_overlap(const pl_mranges_t *t, uintptr_t lo, uintptr_t hi);
