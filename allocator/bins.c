/* allocator/bins.c: the bins' out-of-line operations (the hot ones are inline in bins.h, which describes the
 * structure): join of two subtrees, lower bound without the link, the largest block and the invariant check.
 */
#include "config.h"

#include <errno.h>

#include "bins.h"

pl_block_t *pl_bins_join(pl_block_t *l, pl_block_t *r) {
    if (!l) return r;
    if (!r) return l;
    if (l->prio > r->prio) {
        l->right = pl_bins_join(l->right, r);
        return l;
    }
    r->left = pl_bins_join(l, r->left);
    return r;
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
    if ((lo && !pl_bins_less(lo, t)) || (hi && !pl_bins_less(t, hi))) return -EFAULT;
    if ((t->left && t->left->prio > t->prio) || (t->right && t->right->prio > t->prio)) return -EFAULT;
    if (t->prio != pl_bins_prio(t->addr)) return -EFAULT;
    if (t->state != PL_BLOCK_FREE || pl_bins_class(t->size_bytes) != c || t->bin != c) return -EFAULT;
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
