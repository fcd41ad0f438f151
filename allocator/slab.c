/* allocator/slab.c: block descriptors come from chunks of 256, recycled through a free list, so the hot
 * path never calls malloc for metadata once the chunk count has reached its high-water mark.
 * Chunks live until the allocator is destroyed. pl_slab_get / pl_slab_put are inline (internal.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SLAB_N 256

/* A new chunk, zeroed, onto the free list; returns its first block (still on the list). */
pl_block_t *pl_slab_refill(pl_alloc_t *a) {
    /* header padded to a block's alignment */
    size_t hdr = (sizeof(pl_slab_chunk_t) + _Alignof(pl_block_t) - 1) / _Alignof(pl_block_t) * _Alignof(pl_block_t);
    /* cache-line aligned, so every block starts a line (pl_block_t is 64-byte aligned, internal.h) */
    char *mem = aligned_alloc(_Alignof(pl_block_t), hdr + SLAB_N * sizeof(pl_block_t));
    if (!mem) return NULL;
    memset(mem, 0, hdr + SLAB_N * sizeof(pl_block_t));
    pl_slab_chunk_t *c = (pl_slab_chunk_t *)mem;
    c->next = a->chunks;
    a->chunks = c;
    pl_block_t *blocks = (pl_block_t *)(mem + hdr);
    for (int i = SLAB_N - 1; i >= 0; i--) {
        blocks[i].left = a->free_blocks;
        a->free_blocks = &blocks[i];
    }
    return a->free_blocks;
}

void pl_slab_fini(pl_alloc_t *a) {
    while (a->chunks) {
        pl_slab_chunk_t *c = a->chunks;
        a->chunks = c->next;
        free(c);
    }
    a->free_blocks = NULL;
}
