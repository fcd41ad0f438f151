/* allocator/bins.h: best-fit bins of one (pool, stream), TLSF-style (not installed).
 *
 * Sizes map to 848 classes: 16 classes of 512 B below 8 KiB, then 16 equal classes per power of two. A bitmap
 * marks the non-empty classes. Within a class, blocks sit in a treap keyed by (size, addr); a block's priority is
 * a 16-bit hash of its address, so the shape is reproducible and costs no generator state (ties only cost
 * balance, and classes are small). Best fit is exact, as PyTorch's std::set order: lower bound in the request's
 * own class; if nothing there fits, the leftmost block of the next non-empty class (a bitmap scan). Classes hold
 * few blocks (a replay of 10M random events walks under 1.5 nodes per operation), so every operation is O(1)
 * class work + a short tree walk.
 *
 * The operations on the malloc / free path are inline here: they run once or twice per call, and as calls they
 * cost more than their bodies. bins.c has the rest (join of two subtrees, largest block, the invariant check).
 */
#pragma once

#include "internal.h"

static inline unsigned pl_bins_class(size_t size) {
    if (size < 8192) return (unsigned)(size >> 9);
    unsigned fl = 63u - (unsigned)__builtin_clzll((unsigned long long)size); /* >= 13 */
    unsigned sl = (unsigned)(size >> (fl - 4)) & 15u;
    return 16u + (fl - 13u) * 16u + sl;
}

/* Treap priority of a block at addr (addresses are 512-byte aligned: the low bits carry nothing). */
static inline uint16_t pl_bins_prio(uintptr_t addr) {
    return (uint16_t)(((uint64_t)(addr >> 9) * 0x9E3779B97F4A7C15ull) >> 48);
}

static inline bool pl_bins_less(const pl_block_t *x, const pl_block_t *y) {
    return x->size_bytes < y->size_bytes || (x->size_bytes == y->size_bytes && x->addr < y->addr);
}

/* The treap of l's keys followed by r's (every key of l below every key of r). */
pl_block_t *pl_bins_join(pl_block_t *l, pl_block_t *r);

/* Treap insertion without recursion or rotations: walk down while the nodes' priorities are at least b's, then
 * split the subtree found there around b's key and hang the halves under b. The tree is the one rotate-up
 * insertion builds (a treap's shape is fixed by its keys and distinct priorities). b->prio must be set. */
static inline void pl_bins_insert(pl_binset_t *bs, pl_block_t *b) {
    unsigned c = pl_bins_class(b->size_bytes);
    pl_block_t **link = &bs->roots[c];
    while (*link && (*link)->prio >= b->prio) link = pl_bins_less(b, *link) ? &(*link)->left : &(*link)->right;
    pl_block_t *t = *link, **l = &b->left, **r = &b->right;
    while (t) {
        if (pl_bins_less(t, b)) {
            *l = t;
            l = &t->right;
            t = t->right;
        } else {
            *r = t;
            r = &t->left;
            t = t->left;
        }
    }
    *l = *r = NULL;
    *link = b;
    b->bin = (uint16_t)c;
    bs->bitmap[c >> 6] |= 1ull << (c & 63);
    bs->n_blocks++;
}

/* Unlink b, found at *link (the root slot or its parent's child pointer). */
static inline void pl_bins_remove_at(pl_binset_t *bs, pl_block_t *b, pl_block_t **link) {
    pl_block_t *l = b->left, *r = b->right;
    *link = !l ? r : !r ? l : pl_bins_join(l, r);
    b->left = b->right = NULL;
    unsigned c = b->bin;
    if (!bs->roots[c]) bs->bitmap[c >> 6] &= ~(1ull << (c & 63));
    bs->n_blocks--;
}

static inline void pl_bins_remove(pl_binset_t *bs, pl_block_t *b) {
    pl_block_t **link = &bs->roots[b->bin];
    while (*link && *link != b) link = pl_bins_less(b, *link) ? &(*link)->left : &(*link)->right;
    if (!*link) return; /* not present: caller's bug, caught by pl_alloc_check */
    pl_bins_remove_at(bs, b, link);
}

/* Best fit for size (NULL when no block is large enough); *link_out gets the link pointing at it, for
 * pl_bins_remove_at (no second walk). */
static inline pl_block_t *pl_bins_lower_bound_link(pl_binset_t *bs, size_t size, pl_block_t ***link_out) {
    unsigned c = pl_bins_class(size);
    if (c >= PL_BIN_N) return NULL;
    pl_block_t **link = &bs->roots[c], *best = NULL;
    while (*link) {
        pl_block_t *t = *link;
        if (t->size_bytes >= size) {
            best = t;
            *link_out = link;
            link = &t->left;
        } else {
            link = &t->right;
        }
    }
    if (best) return best;
    /* next non-empty class: every block there is larger than size */
    unsigned w = (c + 1) >> 6;
    uint64_t bits = (c + 1) < PL_BIN_N ? bs->bitmap[w] & (~0ull << ((c + 1) & 63)) : 0;
    while (!bits) {
        if (++w >= PL_BIN_WORDS) return NULL;
        bits = bs->bitmap[w];
    }
    link = &bs->roots[w * 64 + (unsigned)__builtin_ctzll(bits)];
    while ((*link)->left) link = &(*link)->left;
    *link_out = link;
    return *link;
}

pl_block_t *pl_bins_lower_bound(const pl_binset_t *bs, size_t size);
pl_block_t *pl_bins_largest(const pl_binset_t *bs);
int pl_bins_check(const pl_binset_t *bs, size_t *n_out);
