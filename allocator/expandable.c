/* allocator/expandable.c: expandable segments, one virtual range per (pool, stream) with physical pages
 * (backend granularity) mapped on demand and unmapped when empty_cache / GC / the OOM path releases them.
 *
 * The range is reserved once (2 x device capacity) and starts as one UNMAPPED block. Growth
 * maps the fewest pages that make a FREE run of the requested size: pages at the start of an UNMAPPED block
 * that follows a FREE block (or at its end before a FREE block), so freed tails are reused before new memory
 * is mapped, and holes left by earlier releases are refilled before the range grows. Unmapped ranges are
 * always page aligned; pages[i] holds the physical handle of page i (0 = unmapped).
 * cuMemUnmap does not wait for queued work, so every batch of unmaps of pages that were handed out is preceded
 * by one stream_synchronize of the segment's stream; when that fails (a held sim stream, a lost device) the
 * pages stay mapped and cached. Errors of the backend are passed up as its negative errno (-ENOMEM = OOM).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "internal.h"

static size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

pl_segment_t *pl_expandable_get(pl_alloc_t *a, pl_binset_t *bs, int *rc) {
    *rc = -ENOMEM;
    if (bs->expandable) return bs->expandable;
    size_t g = a->gran_bytes;
    /* twice the capacity: holes left by releases in the middle never starve growth at the end before the
     * device is full (address space is cheap; PyTorch reserves capacity + 1/8) */
    size_t cap = a->capacity_bytes > SIZE_MAX / 4 ? SIZE_MAX / 4 : a->capacity_bytes;
    size_t va = round_up(2 * cap, g);
    pl_segment_t *seg = calloc(1, sizeof *seg);
    pl_block_t *b = pl_slab_get(a);
    if (!seg || !b) goto fail;
    seg->n_pages = va / g;
    seg->pages = calloc(seg->n_pages, sizeof *seg->pages);
    if (!seg->pages) goto fail;
    int r = a->be->ops->addr_reserve(a->be, va, &seg->addr);
    if (r) {
        *rc = r;
        goto fail;
    }
    seg->size_bytes = va;
    seg->stream = bs->stream;
    seg->pool = bs->pool;
    seg->expandable = true;
    seg->bins = bs;
    seg->first = b;
    b->addr = seg->addr;
    b->size_bytes = va;
    pl_block_set_seg(b, seg);
    b->pool = bs->pool;
    b->state = PL_BLOCK_UNMAPPED;
    pl_alloc_segment_link(a, seg);
    bs->expandable = seg;
    return seg;
fail:
    if (b) pl_slab_put(a, b);
    if (seg) free(seg->pages);
    free(seg);
    return NULL;
}

static void unmap_pages(pl_alloc_t *a, pl_segment_t *seg, size_t first, size_t n) {
    size_t g = a->gran_bytes;
    for (size_t i = first; i < first + n; i++) {
        if (!seg->pages[i]) continue;
        a->be->ops->unmap(a->be, seg->addr + i * g, g);
        a->be->ops->phys_release(a->be, seg->pages[i]);
        seg->pages[i] = 0;
        a->stats.num_device_unmap++;
    }
}

/* Returns 0 or the backend's negative errno; on failure the pages mapped here are unmapped again (they were
 * never handed out, so no stream sync is needed). */
static int map_pages(pl_alloc_t *a, pl_segment_t *seg, uintptr_t start, size_t bytes) {
    size_t g = a->gran_bytes, first = (start - seg->addr) / g, n = bytes / g;
    const pl_backend_ops_t *ops = a->be->ops;
    for (size_t i = first; i < first + n; i++) {
        pl_phys_t h;
        uintptr_t at = seg->addr + i * g;
        int rc = ops->phys_create(a->be, g, &h);
        if (rc) goto undo;
        if ((rc = ops->map(a->be, at, g, h))) {
            ops->phys_release(a->be, h);
            goto undo;
        }
        seg->pages[i] = h;
        a->stats.num_device_map++;
        if ((rc = ops->set_access(a->be, at, g))) goto undo;
        continue;
    undo:
        unmap_pages(a, seg, first, i + 1 - first);
        return rc < 0 ? rc : -EIO;
    }
    return 0;
}

pl_block_t *pl_expandable_grow(pl_alloc_t *a, pl_segment_t *seg, size_t size, int *rc) {
    size_t g = a->gran_bytes;
    *rc = -ENOMEM;
    pl_block_t *best = NULL;
    size_t best_m = 0;
    bool best_from_end = false;
    for (pl_block_t *u = seg->first; u; u = u->next) {
        if (u->state != PL_BLOCK_UNMAPPED) continue;
        size_t pf = u->prev && u->prev->state == PL_BLOCK_FREE ? u->prev->size_bytes : 0;
        size_t nf = u->next && u->next->state == PL_BLOCK_FREE ? u->next->size_bytes : 0;
        if (size > pf + u->size_bytes + nf) continue;
        size_t m;
        bool from_end = false;
        if (pf || !nf) {
            m = size > pf ? round_up(size - pf, g) : g;
            if (m > u->size_bytes || pf + m < size) m = u->size_bytes;
        } else {
            from_end = true;
            m = round_up(size - nf, g);
            if (m > u->size_bytes) m = u->size_bytes;
        }
        if (!best || m < best_m) {
            best = u;
            best_m = m;
            best_from_end = from_end;
        }
    }
    if (!best || best_m > a->capacity_bytes - a->reserved_bytes) return NULL;
    pl_block_t *u = best, *mb = u;
    if (best_m < u->size_bytes) {
        mb = pl_slab_get(a);
        if (!mb) return NULL;
    }
    uintptr_t start = best_from_end ? u->addr + u->size_bytes - best_m : u->addr;
    if ((*rc = map_pages(a, seg, start, best_m))) {
        if (mb != u) pl_slab_put(a, mb);
        return NULL;
    }
    if (mb != u) {
        pl_block_set_seg(mb, seg);
        mb->pool = seg->pool;
        mb->addr = start;
        mb->size_bytes = best_m;
        u->size_bytes -= best_m;
        if (best_from_end) { /* u, mb */
            pl_block_splice(seg, u, mb, u->next);
        } else { /* mb, u */
            u->addr += best_m;
            pl_block_splice(seg, u->prev, mb, u);
        }
    }
    *rc = 0;
    mb->state = 0;
    seg->mapped_bytes += best_m;
    a->reserved_bytes += best_m;
    pl_stats_inc(a->stats.reserved_bytes, seg->pool, (int64_t)best_m);
    pl_alloc_emit(a, PL_ALLOC_EV_SEGMENT_MAP, start, best_m, 0, seg->stream, seg->pool);
    /* join FREE neighbours into one run */
    pl_block_t *p = mb->prev, *n = mb->next;
    if (p && p->state == PL_BLOCK_FREE) {
        pl_alloc_bins_remove(a, p); /* leaves p's state 0, as mb's */
        mb = pl_block_merge(a, p, mb);
    }
    if (n && n->state == PL_BLOCK_FREE) {
        pl_alloc_bins_remove(a, n);
        pl_block_merge(a, mb, n);
    }
    return mb;
}

size_t pl_expandable_releasable(const pl_alloc_t *a, const pl_block_t *b) {
    size_t g = a->gran_bytes;
    uintptr_t lo = round_up(b->addr, g), hi = (b->addr + b->size_bytes) / g * g;
    return hi > lo ? hi - lo : 0;
}

int pl_expandable_sync(pl_alloc_t *a, pl_segment_t *seg) {
    return a->be->ops->stream_synchronize(a->be, seg->stream);
}

size_t pl_expandable_release_block(pl_alloc_t *a, pl_block_t *b, pl_block_t **after, bool *synced) {
    size_t g = a->gran_bytes;
    pl_segment_t *seg = b->seg;
    uintptr_t start = b->addr, end = b->addr + b->size_bytes;
    uintptr_t lo = round_up(start, g), hi = end / g * g;
    if (hi <= lo) {
        if (after) *after = b->next;
        return 0;
    }
    pl_block_t *head = NULL, *tail = NULL;
    if (lo > start && !(head = pl_slab_get(a))) goto nomem;
    if (hi < end && !(tail = pl_slab_get(a))) goto nomem;
    if (!synced || !*synced) {
        /* the pages were handed out: work queued on the segment's stream may still use them */
        if (pl_expandable_sync(a, seg)) goto nomem;
        if (synced) *synced = true;
    }
    pl_alloc_bins_remove(a, b);
    unmap_pages(a, seg, (lo - seg->addr) / g, (hi - lo) / g);
    seg->mapped_bytes -= hi - lo;
    a->reserved_bytes -= hi - lo;
    pl_stats_dec(a->stats.reserved_bytes, seg->pool, (int64_t)(hi - lo));
    pl_alloc_emit(a, PL_ALLOC_EV_SEGMENT_UNMAP, lo, hi - lo, 0, seg->stream, seg->pool);
    /* b becomes the unmapped middle; head and tail stay cached */
    pl_block_t *mid = b;
    mid->addr = lo;
    mid->size_bytes = hi - lo;
    mid->state = PL_BLOCK_UNMAPPED;
    if (head) {
        pl_block_set_seg(head, seg);
        head->pool = seg->pool;
        head->addr = start;
        head->size_bytes = lo - start;
        pl_block_splice(seg, mid->prev, head, mid);
    }
    if (tail) {
        pl_block_set_seg(tail, seg);
        tail->pool = seg->pool;
        tail->addr = hi;
        tail->size_bytes = end - hi;
        pl_block_splice(seg, mid, tail, mid->next);
    }
    /* merge with unmapped neighbours (only possible where there is no head / tail) */
    pl_block_t *p = mid->prev, *n = mid->next;
    if (p && p->state == PL_BLOCK_UNMAPPED) mid = pl_block_merge(a, p, mid);
    if (n && n->state == PL_BLOCK_UNMAPPED) pl_block_merge(a, mid, n);
    if (head) pl_alloc_bins_insert(a, head);
    if (tail) pl_alloc_bins_insert(a, tail);
    if (after) *after = (tail ? tail : mid)->next;
    return hi - lo;
nomem:
    if (head) pl_slab_put(a, head);
    if (tail) pl_slab_put(a, tail);
    if (after) *after = b->next;
    return 0;
}

void pl_expandable_destroy(pl_alloc_t *a, pl_segment_t *seg) {
    size_t mapped = seg->mapped_bytes;
    /* the allocator is going away (or nothing is mapped): wait once, then unmap regardless */
    if (mapped) pl_expandable_sync(a, seg);
    unmap_pages(a, seg, 0, seg->n_pages);
    if (mapped) {
        a->reserved_bytes -= mapped;
        pl_stats_dec(a->stats.reserved_bytes, seg->pool, (int64_t)mapped);
    }
    a->be->ops->addr_free(a->be, seg->addr, seg->size_bytes);
    for (pl_block_t *b = seg->first; b;) {
        pl_block_t *n = b->next;
        pl_slab_put(a, b);
        b = n;
    }
    if (seg->bins->expandable == seg) seg->bins->expandable = NULL;
    pl_alloc_segment_unlink(a, seg);
    free(seg->pages);
    free(seg);
}
