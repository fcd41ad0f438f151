/* allocator/alloc.c: the caching allocator proper: pools, segments, best fit, split/merge, record_stream,
 * garbage collection, the OOM path, the event hook and the observer.
 *
 * Data flow: malloc rounds the request, looks for a best-fit FREE block in the (pool, stream) binset, else
 * gets device memory (a plain segment, or pages mapped at an expandable segment), splits the block when the
 * rules allow and records the result in the ptr->block map. free merges with FREE neighbours and caches the
 * block again. Device memory only goes back to the backend through empty_cache, GC and the OOM path.
 * Every public entry point takes a->mu; everything file-local below expects it held. The handle API
 * (pl_alloc_malloc_block / pl_alloc_free_block, internal.h) runs the same code without the lock and the ptr map,
 * for a caller that owns the allocator on one thread (replays).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "bins.h"
#include "debug.h"
#include "grow.h"
#include "internal.h"
#include "units.h"

static _Thread_local char last_error[640];

PL_API const char *pl_alloc_last_error(void) { return last_error; }

static void set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

void pl_alloc_emit(pl_alloc_t *a, pl_alloc_event_kind_t kind, uintptr_t addr, size_t size, size_t requested,
                   pl_stream_t stream, int pool) {
    if (kind == PL_ALLOC_EV_SEGMENT_MAP)
        a->n_map_events++;
    else if (kind == PL_ALLOC_EV_SEGMENT_UNMAP)
        a->n_unmap_events++;
    if (!a->hook) return;
    pl_alloc_event_t ev = {.kind = kind, .addr = addr, .size_bytes = size, .requested_bytes = requested,
                           .stream = stream, .pool = pool, .device = a->be->device};
    a->hook(a->hook_ctx, &ev);
}

/* PL_EXPENSIVE (debug level 2): the whole-heap walk after every malloc, free and empty_cache; a broken invariant
 * stops the program there, next to the operation that broke it. a->mu held (or the handle API's single owner). */
static inline void expensive_check(pl_alloc_t *a) {
    if (!PL_EXPENSIVE) return;
    char err[256];
    if (pl_alloc_check_locked(a, err, sizeof err)) pl_debug_fail(__FILE__, __LINE__, "pl_alloc_check", err, NULL);
}

/* ---- segments and bins ---- */

void pl_alloc_segment_link(pl_alloc_t *a, pl_segment_t *seg) {
    seg->prev_seg = NULL;
    seg->next_seg = a->segments;
    if (a->segments) a->segments->prev_seg = seg;
    a->segments = seg;
    a->n_segments++;
    pl_stats_inc(a->stats.segment, seg->pool, 1);
}

void pl_alloc_segment_unlink(pl_alloc_t *a, pl_segment_t *seg) {
    if (seg->prev_seg)
        seg->prev_seg->next_seg = seg->next_seg;
    else
        a->segments = seg->next_seg;
    if (seg->next_seg) seg->next_seg->prev_seg = seg->prev_seg;
    a->n_segments--;
    pl_stats_dec(a->stats.segment, seg->pool, 1);
}

bool pl_alloc_block_is_split(const pl_block_t *b) { return b->prev || b->next; }

/* inactive_split / inactive_split_bytes follow the FREE blocks of split plain segments (PyTorch does not count
 * expandable segments there). Like PyTorch, a malloc or free applies its net change once: a free that merges
 * neighbours and caches the result, or a malloc that shrinks a cached split block, moves the counters by the
 * difference only (their allocated / freed accumulators count net changes, as PyTorch's do). */
static inline void split_stats(pl_alloc_t *a, int pool, int64_t d_blocks, int64_t d_bytes) {
    if (d_blocks > 0)
        pl_stats_inc(a->stats.inactive_split, pool, d_blocks);
    else if (d_blocks < 0)
        pl_stats_dec(a->stats.inactive_split, pool, -d_blocks);
    if (d_bytes > 0)
        pl_stats_inc(a->stats.inactive_split_bytes, pool, d_bytes);
    else if (d_bytes < 0)
        pl_stats_dec(a->stats.inactive_split_bytes, pool, -d_bytes);
}

/* Into the bins as FREE, without the split counters; returns whether b counts as inactive_split. */
static inline bool bins_put(pl_alloc_t *a, pl_block_t *b) {
    b->state = PL_BLOCK_FREE;
    b->prio = pl_bins_prio(b->addr);
    if (a->gc_on) b->gc_base = a->lookups[b->pool];
    bool counted = !b->in_expandable && pl_alloc_block_is_split(b);
    b->counted_split = counted;
    pl_bins_insert(b->seg->bins, b);
    return counted;
}

/* Out of the bins (tree already unlinked), without the split counters; returns whether b counted. */
static inline bool bins_taken(pl_block_t *b) {
    bool counted = b->counted_split;
    b->counted_split = false;
    b->state = 0;
    return counted;
}

void pl_alloc_bins_insert(pl_alloc_t *a, pl_block_t *b) {
    if (bins_put(a, b)) split_stats(a, b->pool, 1, (int64_t)b->size_bytes);
}

void pl_alloc_bins_remove(pl_alloc_t *a, pl_block_t *b) {
    pl_bins_remove(b->seg->bins, b);
    if (bins_taken(b)) split_stats(a, b->pool, -1, -(int64_t)b->size_bytes);
}

static __attribute__((noinline)) pl_binset_t *new_bins(pl_alloc_t *a, int pool, pl_stream_t stream) {
    pl_binset_t *bs;
    for (bs = a->binsets[pool]; bs; bs = bs->next)
        if (bs->stream == stream) break;
    if (!bs) {
        bs = calloc(1, sizeof *bs);
        if (!bs) return NULL;
        bs->stream = stream;
        bs->pool = (uint8_t)pool;
        bs->next = a->binsets[pool];
        a->binsets[pool] = bs;
    }
    a->last_bins[pool] = bs;
    return bs;
}

/* The (pool, stream) binset; the last one used per pool is cached. NULL when out of host memory. */
static inline pl_binset_t *get_bins(pl_alloc_t *a, int pool, pl_stream_t stream) {
    pl_binset_t *bs = a->last_bins[pool];
    return bs && bs->stream == stream ? bs : new_bins(a, pool, stream);
}

static bool is_oversize(const pl_alloc_t *a, size_t size) { return size >= a->cfg.max_split_size_bytes; }

/* Best fit in bs for `size`, applying max_split_size rules to blocks of plain segments. The block is taken
 * out of the bins; its counted_split flag is left for take_block's net accounting. */
static pl_block_t *get_free_block(pl_alloc_t *a, pl_binset_t *bs, size_t size) {
    a->lookups[bs->pool]++;
    pl_block_t **link;
    pl_block_t *b = pl_bins_lower_bound_link(bs, size, &link);
    if (!b) return NULL;
    if (!b->in_expandable) {
        /* a request below max_split never takes an oversize block */
        if (!is_oversize(a, size) && is_oversize(a, b->size_bytes)) return NULL;
        /* an oversize request takes a cached block only if the waste stays under max_non_split_rounding */
        if (is_oversize(a, size) && b->size_bytes - size >= a->cfg.max_non_split_rounding_bytes) return NULL;
    }
    pl_bins_remove_at(bs, b, link); /* b is in bs: get_bins gave the binset of its pool and stream */
    return b;
}

static bool should_split(const pl_alloc_t *a, const pl_block_t *b, size_t size) {
    size_t remaining = b->size_bytes - size;
    if (b->pool == PL_POOL_SMALL || b->in_expandable) return remaining >= PL_MIN_BLOCK;
    return !is_oversize(a, size) && remaining > PL_SMALL_SIZE;
}

/* Hand out `b` (out of the bins: from get_free_block, or new device memory) for a request of `size` rounded
 * bytes: split off the tail when allowed. PyTorch's accounting: a split block shrinking leaves inactive_split as
 * is and takes `size` off its bytes; a whole block split counts its new tail; a split block taken whole leaves. */
static pl_block_t *take_block(pl_alloc_t *a, pl_block_t *b, size_t size) {
    bool was_counted = bins_taken(b);
    int64_t d_blocks = was_counted ? -1 : 0, d_bytes = was_counted ? -(int64_t)b->size_bytes : 0;
    if (should_split(a, b, size)) {
        pl_block_t *rest = pl_slab_get(a);
        if (rest) {
            rest->addr = b->addr + size;
            rest->size_bytes = b->size_bytes - size;
            rest->seg = b->seg;
            rest->in_expandable = b->in_expandable;
            rest->pool = b->pool;
            b->size_bytes = size;
            pl_block_splice(b->seg, b, rest, b->next);
            if (bins_put(a, rest)) {
                d_blocks++;
                d_bytes += (int64_t)rest->size_bytes;
            }
        } /* out of descriptor memory: hand out the whole block (correct, only wasteful) */
    }
    if (d_blocks | d_bytes) split_stats(a, b->pool, d_blocks, d_bytes);
    b->state = PL_BLOCK_ALLOCATED;
    return b;
}

/* Merge FREE neighbours (taking them out of the bins) and cache the block; the split counters move by the net
 * change (PyTorch's free_block). */
static void cache_block(pl_alloc_t *a, pl_block_t *b) {
    pl_block_t *p = b->prev, *n = b->next;
    int64_t d_blocks = 0, d_bytes = 0;
    if (p && p->state == PL_BLOCK_FREE) {
        pl_bins_remove(p->seg->bins, p);
        if (bins_taken(p)) {
            d_blocks--;
            d_bytes -= (int64_t)p->size_bytes;
        }
        b = pl_block_merge(a, p, b);
    }
    if (n && n->state == PL_BLOCK_FREE) {
        pl_bins_remove(n->seg->bins, n);
        if (bins_taken(n)) {
            d_blocks--;
            d_bytes -= (int64_t)n->size_bytes;
        }
        pl_block_merge(a, b, n);
    }
    if (bins_put(a, b)) {
        d_blocks++;
        d_bytes += (int64_t)b->size_bytes;
    }
    if (d_blocks | d_bytes) split_stats(a, b->pool, d_blocks, d_bytes);
}

/* A block's last use is over (free without stream uses, or its events completed). */
static void free_block(pl_alloc_t *a, pl_block_t *b) {
    if (a->active_tracked) {
        pl_stats_dec(a->stats.active, b->pool, 1);
        pl_stats_dec(a->stats.active_bytes, b->pool, (int64_t)b->size_bytes);
    }
    pl_stats_dec(a->stats.requested_bytes, b->pool, (int64_t)b->requested_bytes);
    b->requested_bytes = 0;
    cache_block(a, b);
}

/* ---- record_stream events ---- */

static void process_events(pl_alloc_t *a, bool synchronize) {
    pl_pending_event_t **link = &a->pending;
    while (*link) {
        pl_pending_event_t *e = *link;
        int rc = synchronize ? a->be->ops->event_synchronize(a->be, e->ev) : a->be->ops->event_query(a->be, e->ev);
        if (rc) {
            link = &e->next;
            continue;
        }
        *link = e->next;
        a->be->ops->event_destroy(a->be, e->ev);
        pl_block_t *b = e->block;
        e->next = a->free_pending;
        a->free_pending = e;
        if (--b->event_count == 0) free_block(a, b);
    }
}

static void insert_events(pl_alloc_t *a, pl_block_t *b) {
    b->state = PL_BLOCK_PENDING;
    for (uint32_t i = 0; i < b->n_uses; i++) {
        pl_pending_event_t *e = a->free_pending;
        if (e)
            a->free_pending = e->next;
        else
            e = malloc(sizeof *e);
        pl_event_t ev;
        if (!e || a->be->ops->event_record(a->be, b->uses[i], &ev)) {
            /* Cannot track the stream: keep the block out of reuse for good rather than risk a race. */
            free(e);
            b->event_count++;
            continue;
        }
        e->ev = ev;
        e->block = b;
        e->next = a->pending;
        a->pending = e;
        b->event_count++;
    }
    free(b->uses);
    b->uses = NULL;
    b->n_uses = b->cap_uses = 0;
    if (b->event_count == 0) free_block(a, b);
}

/* ---- device memory ---- */

/* NULL on failure with *rc = -ENOMEM (out of memory: the OOM path applies) or the backend's other error. */
static pl_block_t *alloc_plain(pl_alloc_t *a, pl_binset_t *bs, size_t size, int *rc) {
    *rc = -ENOMEM;
    size_t seg_size = pl_rounding_segment_size(size);
    if (seg_size < size || seg_size > a->capacity_bytes - a->reserved_bytes) return NULL;
    pl_segment_t *seg = calloc(1, sizeof *seg);
    pl_block_t *b = pl_slab_get(a);
    uintptr_t addr;
    if (seg && b) *rc = a->be->ops->mem_alloc(a->be, seg_size, &addr);
    if (*rc) {
        if (*rc > 0) *rc = -EIO; /* a backend broke the contract: not an OOM */
        free(seg);
        if (b) pl_slab_put(a, b);
        return NULL;
    }
    a->stats.num_device_alloc++;
    seg->addr = addr;
    seg->size_bytes = seg->mapped_bytes = seg_size;
    seg->stream = bs->stream;
    seg->pool = bs->pool;
    seg->bins = bs;
    seg->first = b;
    b->addr = addr;
    b->size_bytes = seg_size;
    pl_block_set_seg(b, seg);
    b->pool = bs->pool;
    pl_alloc_segment_link(a, seg);
    a->reserved_bytes += seg_size;
    pl_stats_inc(a->stats.reserved_bytes, seg->pool, (int64_t)seg_size);
    pl_alloc_emit(a, PL_ALLOC_EV_SEGMENT_MAP, addr, seg_size, 0, seg->stream, seg->pool);
    return b;
}

static pl_block_t *alloc_device(pl_alloc_t *a, pl_binset_t *bs, size_t size, bool retry, int *rc) {
    if (retry) a->stats.num_alloc_retries++;
    if (!a->cfg.expandable_segments) return alloc_plain(a, bs, size, rc);
    pl_segment_t *seg = pl_expandable_get(a, bs, rc);
    return seg ? pl_expandable_grow(a, seg, size, rc) : NULL;
}

static void release_plain(pl_alloc_t *a, pl_segment_t *seg) {
    pl_block_t *b = seg->first;
    pl_alloc_bins_remove(a, b);
    int rc = a->be->ops->mem_free(a->be, seg->addr, seg->size_bytes);
    PL_REQUIRE(rc == 0, "backend refused to free segment", (void *)seg->addr);
    a->stats.num_device_free++;
    a->reserved_bytes -= seg->size_bytes;
    pl_stats_dec(a->stats.reserved_bytes, seg->pool, (int64_t)seg->size_bytes);
    pl_alloc_emit(a, PL_ALLOC_EV_SEGMENT_UNMAP, seg->addr, seg->size_bytes, 0, seg->stream, seg->pool);
    pl_alloc_segment_unlink(a, seg);
    pl_slab_put(a, b);
    free(seg);
}

static bool plain_whole_free(const pl_segment_t *s) {
    return !s->expandable && s->first->state == PL_BLOCK_FREE && !s->first->next;
}

/* Release every cached block that is wholly free: plain segments and free pages of expandable segments.
 * Returns bytes released. */
static size_t release_cached(pl_alloc_t *a, bool synchronize) {
    if (a->pending) process_events(a, synchronize);
    size_t released = 0;
    pl_segment_t *s = a->segments;
    while (s) {
        pl_segment_t *next = s->next_seg;
        if (plain_whole_free(s)) {
            released += s->size_bytes;
            release_plain(a, s);
        } else if (s->expandable) {
            pl_block_t *b = s->first;
            bool synced = false; /* one stream sync per segment, before its first unmap */
            while (b) {
                if (b->state == PL_BLOCK_FREE)
                    released += pl_expandable_release_block(a, b, &b, &synced);
                else
                    b = b->next;
            }
            if (s->mapped_bytes == 0) pl_expandable_destroy(a, s);
        }
        s = next;
    }
    return released;
}

/* First OOM step: free cached blocks that can make room for `size` (PyTorch's
 * release_available_cached_blocks, extended to any max_split setting and to expandable pages). */
static bool release_available(pl_alloc_t *a, int pool, size_t size) {
    size_t need = a->cfg.expandable_segments ? size : pl_rounding_segment_size(size);
    if (a->cfg.expandable_segments) return release_cached(a, false) > 0;
    pl_segment_t *best = NULL;
    for (pl_segment_t *s = a->segments; s; s = s->next_seg)
        if (s->pool == pool && plain_whole_free(s) && s->size_bytes >= need &&
            (!best || s->size_bytes < best->size_bytes))
            best = s;
    if (best) {
        release_plain(a, best);
        return true;
    }
    /* no single block is large enough: release the largest ones until enough room is made */
    size_t released = 0;
    while (released < need) {
        pl_segment_t *big = NULL;
        for (pl_segment_t *s = a->segments; s; s = s->next_seg)
            if (s->pool == pool && plain_whole_free(s) && (!big || s->size_bytes > big->size_bytes)) big = s;
        if (!big) break;
        released += big->size_bytes;
        release_plain(a, big);
    }
    return released > 0;
}

/* garbage_collection_threshold: when reserved passes threshold x capacity, release cached large-pool blocks
 * that are whole segments (or free pages of expandable segments) and whose age is at least the mean age,
 * repeating until reserved is back under the threshold or nothing more can go. */
static void garbage_collect(pl_alloc_t *a) {
    size_t threshold = (size_t)(a->cfg.garbage_collection_threshold * (double)a->capacity_bytes);
    if (a->reserved_bytes <= threshold) return;
    size_t target = a->reserved_bytes - threshold, reclaimed = 0;
    size_t n = 0, cap = 0;
    pl_block_t **cand = NULL;
    uint64_t total_age = 0;
    for (pl_segment_t *s = a->segments; s; s = s->next_seg) {
        if (s->pool != PL_POOL_LARGE) continue;
        for (pl_block_t *b = s->first; b; b = b->next) {
            if (b->state != PL_BLOCK_FREE) continue;
            if (s->expandable ? !pl_expandable_releasable(a, b) : b != s->first || b->next) continue;
            if (pl_grow_first((void **)&cand, &cap, n + 1, sizeof *cand, 32)) goto out;
            cand[n++] = b;
            total_age += a->lookups[PL_POOL_LARGE] - b->gc_base;
        }
    }
    size_t left = n;
    bool freed = true;
    while (reclaimed < target && freed && left > 0) {
        double mean = (double)total_age / (double)left;
        freed = false;
        for (size_t i = 0; i < n; i++) {
            pl_block_t *b = cand[i];
            if (!b) continue;
            uint64_t age = a->lookups[PL_POOL_LARGE] - b->gc_base;
            if ((double)age < mean) continue;
            cand[i] = NULL;
            left--;
            total_age -= age;
            freed = true;
            if (b->seg->expandable) {
                /* b's neighbours are not FREE (no two FREE blocks touch), so no other candidate changes */
                pl_segment_t *seg = b->seg;
                reclaimed += pl_expandable_release_block(a, b, NULL, NULL);
                if (seg->mapped_bytes == 0) pl_expandable_destroy(a, seg);
            } else {
                reclaimed += b->seg->size_bytes;
                release_plain(a, b->seg);
            }
        }
    }
out:
    free(cand);
}

/* sizes as PyTorch's OOM message prints them ("40.00 MiB", "512 bytes") */
static void format_size(char *buf, size_t len, size_t bytes) {
    pl_units_format((double)bytes, PL_UNITS_TORCH, buf, len);
}

static void oom(pl_alloc_t *a, size_t requested, size_t rounded, pl_stream_t stream, int pool) {
    size_t dev_free = 0, dev_total = 0;
    a->be->ops->mem_info(a->be, &dev_free, &dev_total);
    size_t allocated = (size_t)pl_stats_current(a->stats.allocated_bytes);
    size_t unalloc = a->reserved_bytes - allocated;
    /* what this allocator may still take, as the device sees it */
    size_t limit_free = a->capacity_bytes - a->reserved_bytes;
    if (limit_free < dev_free) dev_free = limit_free;
    char s_req[32], s_cap[32], s_free[32], s_alloc[32], s_unalloc[32];
    format_size(s_req, sizeof s_req, requested);
    format_size(s_cap, sizeof s_cap, a->capacity_bytes);
    format_size(s_free, sizeof s_free, dev_free);
    format_size(s_alloc, sizeof s_alloc, allocated);
    format_size(s_unalloc, sizeof s_unalloc, unalloc);
    const char *hint = "";
    if (unalloc > 0 && unalloc >= rounded / 2 && !a->cfg.expandable_segments)
        hint = " If reserved but unallocated memory is large try setting PLATEAU_ALLOC_CONF=expandable_segments:True"
               " (or PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which plateau also reads) to avoid"
               " fragmentation.";
    else if (unalloc > 0 && unalloc >= rounded / 2)
        hint = " If reserved but unallocated memory is large, call empty_cache() or lower the peak:"
               " expandable segments are already on.";
    set_error("plateau: out of memory on device %d. Tried to allocate %s. Device %d has a total capacity of %s of "
              "which %s is free. Of the allocated memory %s is allocated by plateau, and %s is reserved by plateau "
              "but unallocated.%s",
              a->be->device, s_req, a->be->device, s_cap, s_free, s_alloc, s_unalloc, hint);
    a->stats.num_ooms++;
    pl_alloc_emit(a, PL_ALLOC_EV_OOM, 0, dev_free, requested, stream, pool);
}

/* A device error that is not out of memory (a lost device, a driver failure): no cache release, no retry, not
 * counted as an OOM. The message names the failed driver call when the backend knows it. */
static void device_error(pl_alloc_t *a, size_t requested, int rc) {
    char s_req[32], why[64];
    format_size(s_req, sizeof s_req, requested);
    switch (-rc) {
    case EIO: snprintf(why, sizeof why, "device error (EIO)"); break;
    case ENODEV: snprintf(why, sizeof why, "device unavailable (ENODEV)"); break;
    case EINVAL: snprintf(why, sizeof why, "invalid request (EINVAL)"); break;
    case EDEADLK: snprintf(why, sizeof why, "stream can never complete (EDEADLK)"); break;
    default: snprintf(why, sizeof why, "error %d", -rc); break;
    }
    char call[512];
    a->be->ops->last_error(a->be, call, sizeof call);
    set_error("plateau: device error on device %d while allocating %s: the %s backend failed with %s, which is not "
              "out of memory%s%s",
              a->be->device, s_req, a->be->ops->name, why, *call ? ": " : "", call);
}

/* ---- public API ---- */

PL_API int pl_alloc_create(pl_backend_t *backend, const pl_alloc_config_t *cfg, pl_alloc_t **out, char *err,
                           size_t err_len) {
    if (err && err_len) err[0] = 0;
    if (!backend || !out) return -EINVAL;
    pl_alloc_config_t c;
    if (cfg) {
        c = *cfg;
    } else {
        int rc = pl_alloc_config_from_env(&c, err, err_len);
        if (rc) {
            if (err) set_error("%s", err);
            return rc;
        }
    }
    size_t gran = 0, dev_free = 0, dev_total = 0;
    if (backend->ops->granularity(backend, &gran) || !gran || (gran & (gran - 1)) ||
        backend->ops->mem_info(backend, &dev_free, &dev_total)) {
        if (err && err_len) snprintf(err, err_len, "backend %s: cannot query granularity or memory info", backend->ops->name);
        return -EINVAL;
    }
    pl_alloc_t *a = calloc(1, sizeof *a);
    if (!a) return -ENOMEM;
    if (pl_blockmap_init(&a->map)) {
        free(a);
        return -ENOMEM;
    }
    pthread_mutex_init(&a->mu, NULL);
    a->be = backend;
    a->cfg = c;
    a->gran_bytes = gran;
    a->capacity_bytes = (size_t)((double)dev_total * c.per_process_memory_fraction);
    if (c.per_process_memory_fraction >= 1.0) a->capacity_bytes = dev_total;
    a->gc_on = c.garbage_collection_threshold > 0.0;
    a->stats.capacity_bytes = a->capacity_bytes;
    /* The observer (e.g. the preloaded tracer) gets every allocator; see alloc.h. */
    void *sym = dlsym(RTLD_DEFAULT, PL_ALLOC_OBSERVER_SYMBOL);
    if (sym) {
        pl_alloc_observer_fn fn;
        memcpy(&fn, &sym, sizeof fn);
        a->observer = fn;
        fn(a, true);
    }
    *out = a;
    return 0;
}

PL_API void pl_alloc_destroy(pl_alloc_t *a) {
    if (!a) return;
    if (a->observer) a->observer(a, false);
    pthread_mutex_lock(&a->mu);
    /* Events first: their blocks are about to go. */
    while (a->pending) {
        pl_pending_event_t *e = a->pending;
        a->pending = e->next;
        a->be->ops->event_destroy(a->be, e->ev);
        free(e);
    }
    while (a->free_pending) {
        pl_pending_event_t *e = a->free_pending;
        a->free_pending = e->next;
        free(e);
    }
    while (a->segments) {
        pl_segment_t *s = a->segments;
        if (s->expandable) {
            pl_expandable_destroy(a, s);
            continue;
        }
        a->be->ops->mem_free(a->be, s->addr, s->size_bytes);
        for (pl_block_t *b = s->first; b;) {
            pl_block_t *n = b->next;
            free(b->uses);
            b = n;
        }
        pl_alloc_segment_unlink(a, s);
        free(s);
    }
    for (int p = 0; p < PL_POOL_N; p++)
        while (a->binsets[p]) {
            pl_binset_t *bs = a->binsets[p];
            a->binsets[p] = bs->next;
            free(bs);
        }
    pl_blockmap_fini(&a->map);
    pl_slab_fini(a);
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* No cached block fits: device memory (after GC when on); only out of memory goes through cache release and
 * retry, any other device error fails at once. NULL on failure with the message set. Out of line: it is rare, and
 * inlined it would cost the cached path registers. */
static __attribute__((noinline)) pl_block_t *malloc_device(pl_alloc_t *a, pl_binset_t *bs, size_t size, size_t rounded,
                                                           pl_stream_t stream, int pool) {
    if (a->gc_on) garbage_collect(a);
    int rc = -ENOMEM;
    pl_block_t *b = alloc_device(a, bs, rounded, false, &rc);
    if (!b && rc == -ENOMEM && release_available(a, pool, rounded)) b = alloc_device(a, bs, rounded, false, &rc);
    if (!b && rc == -ENOMEM) {
        release_cached(a, true);
        b = alloc_device(a, bs, rounded, true, &rc);
    }
    if (b) return b;
    if (rc != -ENOMEM)
        device_error(a, size, rc);
    else
        oom(a, size, rounded, stream, pool);
    return NULL;
}

/* malloc proper, a->mu held (or the handle API's single owner). in_map: record the block in the ptr map (the public
 * API); the handle API skips the map. NULL on failure with the message set. */
static inline pl_block_t *malloc_block(pl_alloc_t *a, size_t size, pl_stream_t stream, bool in_map) {
    if (a->pending) process_events(a, false);
    size_t rounded = pl_rounding_round(&a->cfg, size);
    int pool = pl_rounding_pool(rounded);
    pl_binset_t *bs = get_bins(a, pool, stream);
    if (!bs) {
        set_error("plateau: out of host memory for allocator metadata");
        return NULL;
    }
    pl_block_t *b = get_free_block(a, bs, rounded);
    if (!b && !(b = malloc_device(a, bs, size, rounded, stream, pool))) {
        expensive_check(a); /* the OOM path may have released cache */
        return NULL;
    }
    b = take_block(a, b, rounded);
    if (in_map && pl_blockmap_insert(&a->map, b)) {
        cache_block(a, b); /* give it back: the program never saw it */
        set_error("plateau: out of host memory for allocator metadata");
        expensive_check(a);
        return NULL;
    }
    if (!in_map) b->by_handle = true; /* cleared by pl_alloc_free_block: FREE blocks never carry it */
    b->requested_bytes = size;
    pl_stats_inc(a->stats.allocation, pool, 1);
    pl_stats_inc(a->stats.allocated_bytes, pool, (int64_t)b->size_bytes);
    if (a->active_tracked) {
        pl_stats_inc(a->stats.active, pool, 1);
        pl_stats_inc(a->stats.active_bytes, pool, (int64_t)b->size_bytes);
    }
    pl_stats_inc(a->stats.requested_bytes, pool, (int64_t)size);
    pl_alloc_emit(a, PL_ALLOC_EV_ALLOC, b->addr, b->size_bytes, size, stream, pool);
    expensive_check(a);
    return b;
}

/* free of an ALLOCATED block already out of the ptr map (or never in it), a->mu held. */
static inline void free_allocated(pl_alloc_t *a, pl_block_t *b) {
    if (b->n_uses) pl_stats_track_active(a); /* b stays active after this: active != allocation from here on */
    pl_stats_dec(a->stats.allocation, b->pool, 1);
    pl_stats_dec(a->stats.allocated_bytes, b->pool, (int64_t)b->size_bytes);
    pl_alloc_emit(a, PL_ALLOC_EV_FREE, b->addr, b->size_bytes, b->requested_bytes, b->seg->stream, b->pool);
    if (b->n_uses)
        insert_events(a, b);
    else
        free_block(a, b);
    expensive_check(a);
}

PL_API void *pl_alloc_malloc(pl_alloc_t *a, size_t size, pl_stream_t stream) {
    pthread_mutex_lock(&a->mu);
    pl_block_t *b = malloc_block(a, size, stream, true);
    void *p = b ? (void *)b->addr : NULL;
    pthread_mutex_unlock(&a->mu);
    return p;
}

PL_API void pl_alloc_free(pl_alloc_t *a, void *ptr) {
    if (!ptr) return;
    pthread_mutex_lock(&a->mu);
    pl_block_t *b = pl_blockmap_remove(&a->map, (uintptr_t)ptr);
    if (!b) pthread_mutex_unlock(&a->mu);
    PL_REQUIRE(b, "free of a pointer this allocator does not own (or double free):", ptr);
    free_allocated(a, b);
    pthread_mutex_unlock(&a->mu);
}

pl_block_t *pl_alloc_malloc_block(pl_alloc_t *a, size_t size, pl_stream_t stream) {
    return malloc_block(a, size, stream, false);
}

static inline void free_handle(pl_alloc_t *a, pl_block_t *b) {
    PL_REQUIRE(b->state == PL_BLOCK_ALLOCATED && b->by_handle, "free_block of a block that is not a live handle block:",
               b);
    b->by_handle = false;
    free_allocated(a, b);
}

void pl_alloc_free_block(pl_alloc_t *a, pl_block_t *b) {
    if (b) free_handle(a, b);
}

PL_API size_t pl_alloc_run_batch(pl_alloc_t *a, pl_alloc_batch_t *bt, size_t pos, size_t end) {
    const pl_alloc_op_t *ops = bt->ops;
    pl_block_t **slots = bt->slots;
    int64_t peak = bt->peak_reserved;
    size_t i = pos;
    for (; i < end; i++) {
        const pl_alloc_op_t *e = &ops[i];
        if (e->kind == PL_ALLOC_OP_FREE) {
            pl_block_t *b = slots[e->slot];
            if (b) {
                slots[e->slot] = NULL;
                free_handle(a, b);
            }
            continue; /* a free never raises reserved */
        }
        pl_block_t *b = malloc_block(a, (size_t)e->size_bytes, (pl_stream_t)bt->streams[e->stream], false);
        if (e->kind == PL_ALLOC_OP_ALLOC)
            slots[e->slot] = b;
        else if (b)
            free_handle(a, b);
        int64_t resv = pl_stats_current(a->stats.reserved_bytes);
        if (resv > peak) {
            peak = resv;
            bt->unallocated_at_peak = resv - pl_stats_current(a->stats.allocated_bytes);
        }
        if (!b) break;
    }
    bt->peak_reserved = peak;
    bt->n_map_events = a->n_map_events;
    bt->n_unmap_events = a->n_unmap_events;
    return i;
}

PL_API int pl_alloc_record_stream(pl_alloc_t *a, void *ptr, pl_stream_t stream) {
    pthread_mutex_lock(&a->mu);
    pl_block_t *b = pl_blockmap_find(&a->map, (uintptr_t)ptr);
    int rc = 0;
    if (!b) {
        rc = -EINVAL;
        goto out;
    }
    if (stream == b->seg->stream) goto out; /* uses on the allocation stream need no event */
    for (uint32_t i = 0; i < b->n_uses; i++)
        if (b->uses[i] == stream) goto out;
    if (b->n_uses == b->cap_uses) {
        uint32_t cap = b->cap_uses ? 2 * b->cap_uses : 4;
        pl_stream_t *u = realloc(b->uses, cap * sizeof *u);
        if (!u) {
            rc = -ENOMEM;
            goto out;
        }
        b->uses = u;
        b->cap_uses = cap;
    }
    b->uses[b->n_uses++] = stream;
out:
    pthread_mutex_unlock(&a->mu);
    return rc;
}

PL_API void pl_alloc_empty_cache(pl_alloc_t *a) {
    pthread_mutex_lock(&a->mu);
    release_cached(a, true);
    expensive_check(a);
    pthread_mutex_unlock(&a->mu);
}

PL_API size_t pl_alloc_block_size(pl_alloc_t *a, const void *ptr) {
    pthread_mutex_lock(&a->mu);
    pl_block_t *b = pl_blockmap_find(&a->map, (uintptr_t)ptr);
    size_t n = b ? b->size_bytes : 0;
    pthread_mutex_unlock(&a->mu);
    return n;
}

PL_API void pl_alloc_set_hook(pl_alloc_t *a, pl_alloc_hook_fn fn, void *ctx) {
    pthread_mutex_lock(&a->mu);
    a->hook = fn;
    a->hook_ctx = ctx;
    pthread_mutex_unlock(&a->mu);
}
