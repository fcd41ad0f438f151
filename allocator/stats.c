/* allocator/stats.c: PyTorch-named counters and the derived figures PyTorch lacks.
 *
 * current/peak follow the live value; allocated/freed accumulate increases/decreases (PyTorch's Stat). The hot path
 * keeps them in a compact internal form (internal.h: per-pool values, an all-pool peak, allocated derived);
 * pl_stats_view turns it into the public one. active / active_bytes are only kept apart from
 * allocation / allocated_bytes once a block has waited for record_stream events (until then they are equal).
 * largest_free, releasable and fragmentation
 * are computed on demand by a walk of the segments (stats calls are not on the hot path).
 */
#include "config.h"

#include <string.h>

#include "internal.h"

/* Internal triple (internal.h) -> public Stat. */
static void view_stat(pl_stat_t out[PL_POOL_N], const pl_stat_t in[PL_POOL_N]) {
    out[PL_POOL_ALL] = (pl_stat_t){.peak = in[PL_POOL_ALL].peak};
    for (int p = PL_POOL_SMALL; p <= PL_POOL_LARGE; p++) {
        out[p] = in[p];
        out[p].allocated = in[p].current + in[p].freed - in[p].allocated;
        out[PL_POOL_ALL].current += out[p].current;
        out[PL_POOL_ALL].allocated += out[p].allocated;
        out[PL_POOL_ALL].freed += out[p].freed;
    }
}

void pl_stats_view(const pl_alloc_t *a, pl_alloc_stats_t *out) {
    const pl_alloc_stats_t *in = &a->stats;
    *out = *in;
    view_stat(out->allocation, in->allocation);
    view_stat(out->segment, in->segment);
    view_stat(out->active, a->active_tracked ? in->active : in->allocation);
    view_stat(out->inactive_split, in->inactive_split);
    view_stat(out->allocated_bytes, in->allocated_bytes);
    view_stat(out->reserved_bytes, in->reserved_bytes);
    view_stat(out->active_bytes, a->active_tracked ? in->active_bytes : in->allocated_bytes);
    view_stat(out->inactive_split_bytes, in->inactive_split_bytes);
    view_stat(out->requested_bytes, in->requested_bytes);
}

void pl_stats_track_active(pl_alloc_t *a) {
    if (a->active_tracked) return;
    memcpy(a->stats.active, a->stats.allocation, sizeof a->stats.active);
    memcpy(a->stats.active_bytes, a->stats.allocated_bytes, sizeof a->stats.active_bytes);
    a->active_tracked = true;
}

void pl_stats_derive(pl_alloc_t *a, pl_alloc_stats_t *out) {
    pl_stats_view(a, out);
    size_t largest = 0, free_total = 0, releasable = 0;
    for (pl_segment_t *s = a->segments; s; s = s->next_seg) {
        if (!s->expandable && s->first->state == PL_BLOCK_FREE && !s->first->next) releasable += s->size_bytes;
        for (pl_block_t *b = s->first; b; b = b->next) {
            if (b->state != PL_BLOCK_FREE) continue;
            free_total += b->size_bytes;
            if (b->size_bytes > largest) largest = b->size_bytes;
            if (s->expandable) releasable += pl_expandable_releasable(a, b);
        }
    }
    out->largest_free_bytes = largest;
    out->releasable_bytes = releasable;
    out->fragmentation = free_total ? 1.0 - (double)largest / (double)free_total : 0.0;
    out->capacity_bytes = a->capacity_bytes;
}

static void reset(pl_stat_t s[PL_POOL_N]) {
    for (int p = PL_POOL_SMALL; p <= PL_POOL_LARGE; p++) {
        s[p].peak = s[p].current;
        s[p].allocated = s[p].current; /* the base: allocated reads 0 */
        s[p].freed = 0;
    }
    s[PL_POOL_ALL].peak = pl_stats_current(s);
}

PL_API void pl_alloc_reset_peak_stats(pl_alloc_t *a) {
    pthread_mutex_lock(&a->mu);
    pl_alloc_stats_t *st = &a->stats;
    reset(st->allocation);
    reset(st->segment);
    reset(st->active);
    reset(st->inactive_split);
    reset(st->allocated_bytes);
    reset(st->reserved_bytes);
    reset(st->active_bytes);
    reset(st->inactive_split_bytes);
    reset(st->requested_bytes);
    pthread_mutex_unlock(&a->mu);
}

PL_API void pl_alloc_get_stats(pl_alloc_t *a, pl_alloc_stats_t *out) {
    pthread_mutex_lock(&a->mu);
    pl_stats_derive(a, out);
    pthread_mutex_unlock(&a->mu);
}
