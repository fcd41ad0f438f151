/* allocator/bins.c: best-fit bins of one (pool, stream), TLSF-style.
 *
 * Sizes map to 848 classes: 16 classes of 512 B below 8 KiB, then 16 equal classes per power of two. A bitmap
 * marks the non-empty classes. Within a class, blocks sit in a treap keyed by (size, addr) (priorities from
 * the allocator's generator, so the shape is reproducible). Best fit is exact, as PyTorch's std::set order:
 * lower bound in the request's own class; if nothing there fits, the leftmost block of the next non-empty class
 * (a bitmap scan). Classes hold few blocks, so every operation is O(1) class work + a short tree walk.
 */
#include "config.h"

#include <errno.h>

#include "internal.h"

static unsigned size_class(size_t size) {
    if (size < 8192) return (unsigned)(size >> 9);
    unsigned fl = 63u - (unsigned)__builtin_clzll((unsigned long long)size); /* >= 13 */
    unsigned sl = (unsigned)(size >> (fl - 4)) & 15u;
    return 16u + (fl - 13u) * 16u + sl;
}

static bool less(const pl_block_t *x, const pl_block_t *y) {
    return x->size_bytes < y->size_bytes || (x->size_bytes == y->size_bytes && x->addr < y->addr);
}

static pl_block_t *join(pl_block_t *l, pl_block_t *r) {
    if (!l) return r;
    if (!r) return l;
    if (l->prio > r->prio) {
        l->right = join(l->right, r);
        return l;
    }
    r->left = join(l, r->left);
    return r;
}

/* Treap insertion without recursion or rotations: walk down while the nodes' priorities are at least b's, then
 * split the subtree found there around b's key and hang the halves under b. The tree is the one rotate-up
 * insertion builds (a treap's shape is fixed by its keys and distinct priorities). */
void pl_bins_insert(pl_binset_t *bs, pl_block_t *b) {
    unsigned c = size_class(b->size_bytes);
    pl_block_t **link = &bs->roots[c];
    while (*link && (*link)->prio >= b->prio) link = less(b, *link) ? &(*link)->left : &(*link)->right;
    pl_block_t *t = *link, **l = &b->left, **r = &b->right;
    while (t) {
        if (less(t, b)) {
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

void pl_bins_remove_at(pl_binset_t *bs, pl_block_t *b, pl_block_t **link) {
    *link = join(b->left, b->right);
    b->left = b->right = NULL;
    unsigned c = b->bin;
    if (!bs->roots[c]) bs->bitmap[c >> 6] &= ~(1ull << (c & 63));
    bs->n_blocks--;
}

void pl_bins_remove(pl_binset_t *bs, pl_block_t *b) {
    pl_block_t **link = &bs->roots[b->bin];
    while (*link && *link != b) link = less(b, *link) ? &(*link)->left : &(*link)->right;
    if (!*link) return; /* not present: caller's bug, caught by pl_alloc_check */
    pl_bins_remove_at(bs, b, link);
}

pl_block_t *pl_bins_lower_bound_link(pl_binset_t *bs, size_t size, pl_block_t ***link_out) {
    unsigned c = size_class(size);
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

pl_block_t *pl_bins_lower_bound(const pl_binset_t *bs, size_t size) {
    pl_block_t **link;
    return pl_bins_lower_bound_link((pl_binset_t *)bs, size, &link);
}

pl_block_t *pl_bins_largest(const pl_binset_t *bs) {
    for (int w = PL_BIN_WORDS - 1; w >= 0; w--) {
        if (!bs->bitmap[w]) continue;
        pl_block_t *t = bs->roots[w * 64 + 63 - __builtin_clzll(bs->bitmap[w])];
        while (t->right) t = t->right;
        return t;
    }
    return NULL;
}

static int check(const pl_block_t *t, const pl_block_t *lo, const pl_block_t *hi, unsigned c, size_t *n) {
    if (!t) return 0;
    if ((lo && !less(lo, t)) || (hi && !less(t, hi))) return -EFAULT;
    if ((t->left && t->left->prio > t->prio) || (t->right && t->right->prio > t->prio)) return -EFAULT;
    if (t->state != PL_BLOCK_FREE || size_class(t->size_bytes) != c || t->bin != c) return -EFAULT;
    (*n)++;
    int rc = check(t->left, lo, t, c, n);
    return rc ? rc : check(t->right, t, hi, c, n);
}

int pl_bins_check(const pl_binset_t *bs, size_t *n_out) {
    size_t n = 0;
    int rc = 0;
    for (unsigned c = 0; c < PL_BIN_N && !rc; c++) {
        if (!!bs->roots[c] != !!(bs->bitmap[c >> 6] >> (c & 63) & 1)) rc = -EFAULT;
        if (!rc) rc = check(bs->roots[c], NULL, NULL, c, &n);
    }
    if (!rc && n != bs->n_blocks) rc = -EFAULT;
    *n_out = n;
    return rc;
}
