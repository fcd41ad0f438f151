/* allocator/stats.c: PyTorch-named counters and the derived figures PyTorch lacks.
 *
 * Every counter pair is updated for its pool and for PL_POOL_ALL at once. current/peak follow the live value;
 * allocated/freed accumulate increases/decreases (PyTorch's Stat). largest_free, releasable and fragmentation
 * are computed on demand by a walk of the segments (stats calls are not on the hot path).
 */
#include "config.h"

#include "internal.h"

void pl_stats_derive(pl_alloc_t *a, pl_alloc_stats_t *out) {
    *out = a->stats;
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
    for (int i = 0; i < PL_POOL_N; i++) {
        s[i].peak = s[i].current;
        s[i].allocated = 0;
        s[i].freed = 0;
    }
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
