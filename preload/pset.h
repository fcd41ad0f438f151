/* The set of sampled live pointers (heap.c's sampling): which addresses got a host_alloc record and still need a
 * host_free one. Written under a mutex (a sample is rare); read lock-free by every free() of the program, so the
 * common free (a pointer never sampled) costs one byte load in a small counting filter and nothing else.
 * Invariants: the filter never says "absent" for a live member (counters saturate at 255 and then stick); a
 * reader never misses a member because of a concurrent rebuild (seqlock over two tables, rebuilt into the other
 * one, never resized in place). No malloc: the tables are mmap'd on first insert (MAP_NORESERVE, touched lazily);
 * the filter is part of the object (static storage in the preload). Linked alone by its unit test
 * (tests/preload/test_pset.c), so it depends on nothing else in preload/. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define PL_PSET_FILTER_BITS 17
#define PL_PSET_MIN_SLOTS 1024u

typedef struct pl_pset {
    pthread_mutex_t mu;               /* guards writers, used, tombs */
    uintptr_t *tabs[2];
    _Atomic(uintptr_t *) cur;
    atomic_uint seq;                  /* odd while the table is being rebuilt */
    uint32_t used, tombs;             /* mu */
    uint32_t slots;                   /* table size, a power of two, set on first insert */
    atomic_long live;
    atomic_bool failed;               /* the tables could not be mapped: the set stays empty */
    /* Counting filter by a hash of the address bits: 128 KiB that stay in cache, instead of a random line of the
     * big table. Counters change under mu (insert +1, take -1); 255 sticks. */
    _Alignas(64) _Atomic uint8_t filter[1u << PL_PSET_FILTER_BITS];
} pl_pset_t;

#define PL_PSET_INITIALIZER {.mu = PTHREAD_MUTEX_INITIALIZER}

static inline uint32_t pl_pset_filter_hash(uintptr_t p) {
    return (uint32_t)(((uint64_t)p >> 4) * 0xc2b2ae3d27d4eb4full >> (64 - PL_PSET_FILTER_BITS));
}

/* False only when p is certainly not in the set (one relaxed byte load; async-signal-safe). Visibility to a
 * freeing thread: the sample is inserted before malloc returns the pointer, and the program hands the pointer
 * over with its own ordering. */
static inline bool pl_pset_maybe(const pl_pset_t *s, uintptr_t p) {
    return atomic_load_explicit(&s->filter[pl_pset_filter_hash(p)], memory_order_relaxed) != 0;
}

/* Add p. `slots` (rounded up to PL_PSET_MIN_SLOTS; a power of two) sizes the tables when this is the first insert.
 * Returns 1 when p is in the set, 0 when the set is full of live members (p not added: do not sample it), -ENOMEM
 * when the tables cannot be mapped (now or on an earlier insert). Takes the mutex. */
int pl_pset_insert(pl_pset_t *s, uintptr_t p, uint32_t slots);

/* Remove p; true when it was a member. A pointer that is not a member takes no lock (filter, then a lock-free
 * probe). */
bool pl_pset_take(pl_pset_t *s, uintptr_t p);

/* Members now (a relaxed read). */
long pl_pset_live(const pl_pset_t *s);

/* Forget every member and re-initialise the mutex (a fork child: only this thread survives, the lock may be held
 * by a thread that no longer exists). Keeps the tables' address space. */
void pl_pset_reset(pl_pset_t *s);
