/* allocator/blockmap.c: ptr -> block for ALLOCATED blocks, an open-addressing hash table with linear
 * probing and backward-shift deletion (no tombstones), kept at most half full, keys stored inline so a lookup
 * touches one cache line. O(1) expected per op; grows by doubling (amortised, never in steady state).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "internal.h"

static size_t hash(uintptr_t addr) {
    uint64_t x = (uint64_t)addr >> 9; /* blocks are 512 B aligned */
    x ^= x >> 31;                      /* splitmix64 finalizer: every address bit reaches the low bits */
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return (size_t)(x ^ (x >> 31));
}

int pl_blockmap_init(pl_blockmap_t *m) {
    m->slots = calloc(1024, sizeof *m->slots);
    if (!m->slots) return -ENOMEM;
    m->mask = 1023;
    m->n = 0;
    return 0;
}

void pl_blockmap_fini(pl_blockmap_t *m) {
    free(m->slots);
    m->slots = NULL;
}

static void put(pl_blockmap_slot_t *slots, size_t mask, pl_block_t *b) {
    size_t i = hash(b->addr) & mask;
    while (slots[i].block) i = (i + 1) & mask;
    slots[i].addr = b->addr;
    slots[i].block = b;
}

int pl_blockmap_insert(pl_blockmap_t *m, pl_block_t *b) {
    if (2 * (m->n + 1) > m->mask + 1) {
        size_t cap = 2 * (m->mask + 1);
        pl_blockmap_slot_t *s = calloc(cap, sizeof *s);
        if (!s) return -ENOMEM;
        for (size_t i = 0; i <= m->mask; i++)
            if (m->slots[i].block) put(s, cap - 1, m->slots[i].block);
        free(m->slots);
        m->slots = s;
        m->mask = cap - 1;
    }
    put(m->slots, m->mask, b);
    m->n++;
    return 0;
}

pl_block_t *pl_blockmap_find(const pl_blockmap_t *m, uintptr_t addr) {
    for (size_t i = hash(addr) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->slots[i].block) return NULL;
        if (m->slots[i].addr == addr) return m->slots[i].block;
    }
}

pl_block_t *pl_blockmap_remove(pl_blockmap_t *m, uintptr_t addr) {
    size_t i = hash(addr) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        if (!m->slots[i].block) return NULL;
        if (m->slots[i].addr == addr) break;
    }
    pl_block_t *found = m->slots[i].block;
    /* Backward shift: pull later members of the probe run into the hole when their home allows it. */
    size_t hole = i;
    for (size_t j = (i + 1) & m->mask; m->slots[j].block; j = (j + 1) & m->mask) {
        size_t home = hash(m->slots[j].addr) & m->mask;
        /* j may move to hole unless its home lies cyclically in (hole, j] */
        bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].block = NULL;
    m->n--;
    return found;
}
