/* allocator/internal.h: the allocator's data structures, shared by its modules (not installed).
 *
 * Ownership: an allocator owns its segments, blocks, binsets and pending events; blocks come from a slab
 * (slab.c), never from malloc in steady state. Every field below is guarded by pl_alloc.mu.
 * Block states: ALLOCATED (handed out, in the ptr->block map unless handed out by the handle API), PENDING (freed by the program, waiting for
 * record_stream events), FREE (cached, in exactly one binset's tree), UNMAPPED (address space of an expandable
 * segment with no physical pages; in no tree).
 * Invariants (checked by pl_alloc_check): blocks of a segment tile it in address order; no two FREE blocks
 * are adjacent; sum(ALLOCATED + PENDING + FREE sizes) == reserved; unmapped ranges are page aligned.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <plateau/alloc.h>

#include "backend.h"
#include "debug.h"

#define PL_MIN_BLOCK ((size_t)512)            /* all sizes round up to this */
#define PL_SMALL_SIZE ((size_t)1 << 20)       /* largest request served by the small pool */
#define PL_SMALL_BUFFER ((size_t)2 << 20)     /* small-pool segment size */
#define PL_LARGE_BUFFER ((size_t)20 << 20)    /* large-pool segment size for requests < PL_MIN_LARGE_ALLOC */
#define PL_MIN_LARGE_ALLOC ((size_t)10 << 20) /* from here on, segments are the request rounded to 2 MiB */
#define PL_ROUND_LARGE ((size_t)2 << 20)

enum { PL_BLOCK_ALLOCATED = 1, PL_BLOCK_PENDING = 2, PL_BLOCK_FREE = 3, PL_BLOCK_UNMAPPED = 4 };

typedef struct pl_segment pl_segment_t;
typedef struct pl_binset pl_binset_t;

/* Laid out for the hot paths: the first cache line holds everything a treap walk, a neighbour check and a bins
 * insert / remove read; the second what only the block's own malloc / free, record_stream and GC touch. Slab
 * chunks are cache-line aligned, so a block is exactly two lines. */
typedef struct pl_block {
    _Alignas(64) size_t size_bytes;
    uintptr_t addr;
    struct pl_block *left, *right;  /* treap children while FREE; `left` links the slab free list otherwise */
    struct pl_block *prev, *next;   /* address neighbours inside seg */
    pl_segment_t *seg;
    /* whole bytes, not bit-fields: the hot path writes them on every malloc and free */
    uint16_t prio;                  /* treap priority: pl_bins_prio(addr), set at insertion */
    uint16_t bin;                   /* FREE: size class of its treap (bins.c) */
    uint8_t state;                  /* PL_BLOCK_* */
    uint8_t pool;                   /* PL_POOL_SMALL or PL_POOL_LARGE */
    bool counted_split;             /* FREE and counted in inactive_split stats */
    bool in_expandable;             /* == seg->expandable (set with seg: the hot path need not load seg) */
    /* second line */
    size_t requested_bytes;         /* ALLOCATED/PENDING: size the program asked for */
    uint32_t event_count;           /* PENDING: outstanding stream events */
    bool by_handle;                 /* ALLOCATED by pl_alloc_malloc_block: not in the ptr map */
    uint32_t n_uses, cap_uses;
    pl_stream_t *uses;              /* record_stream streams (malloc'd, rare) */
    uint64_t gc_base;               /* pool lookup counter when cached (age = counter - gc_base); kept only with
                                       garbage_collection_threshold on (its only reader) */
} pl_block_t;
_Static_assert(offsetof(pl_block_t, requested_bytes) == 64, "a block's hot fields fill its first cache line");

struct pl_segment {
    uintptr_t addr;
    size_t size_bytes;      /* plain: device allocation size; expandable: reserved address space */
    size_t mapped_bytes;    /* plain: == size_bytes; expandable: bytes with physical pages */
    pl_stream_t stream;
    uint8_t pool;
    bool expandable;
    pl_block_t *first;      /* lowest-address block */
    pl_phys_t *pages;       /* expandable: one handle per granularity page, 0 when unmapped */
    size_t n_pages;
    pl_binset_t *bins;      /* the (pool, stream) binset this segment's free blocks go to */
    pl_segment_t *prev_seg, *next_seg; /* allocator's list of segments */
};

/* Size classes (bins.c): 16 linear classes of 512 B below 8 KiB, then 16 per power of two. */
#define PL_BIN_N 848
#define PL_BIN_WORDS ((PL_BIN_N + 63) / 64)

/* Free blocks of one (pool, stream): TLSF-style segregated size classes with a bitmap of non-empty classes;
 * each class is a small treap ordered by (size, addr), so best fit is exact: a lookup in the request's class,
 * else the smallest block of the next non-empty class (bitmap scan). */
struct pl_binset {
    pl_stream_t stream;
    uint8_t pool;
    pl_block_t *roots[PL_BIN_N];
    uint64_t bitmap[PL_BIN_WORDS]; /* bit c set iff roots[c] */
    size_t n_blocks;
    pl_segment_t *expandable;  /* the expandable segment of this (pool, stream), if any */
    pl_binset_t *next;
};

typedef struct pl_pending_event {
    pl_event_t ev;
    pl_block_t *block;
    struct pl_pending_event *next;
} pl_pending_event_t;

typedef struct pl_slab_chunk {
    struct pl_slab_chunk *next;
} pl_slab_chunk_t;

typedef struct pl_blockmap_slot {
    uintptr_t addr;         /* key inline: probing never touches the blocks */
    pl_block_t *block;      /* NULL = empty */
} pl_blockmap_slot_t;

typedef struct pl_blockmap {
    pl_blockmap_slot_t *slots; /* open addressing, linear probing, keyed by block addr */
    size_t mask;            /* capacity - 1 (power of two) */
    size_t n;
} pl_blockmap_t;

struct pl_alloc {
    pthread_mutex_t mu;
    pl_backend_t *be;
    pl_alloc_config_t cfg;
    size_t gran_bytes;            /* backend page size for expandable segments */
    size_t capacity_bytes;        /* backend total x per_process_memory_fraction */
    size_t reserved_bytes;        /* plain segments + mapped pages */
    pl_binset_t *binsets[PL_POOL_N];   /* [PL_POOL_SMALL], [PL_POOL_LARGE] lists */
    pl_binset_t *last_bins[PL_POOL_N]; /* lookup cache */
    pl_segment_t *segments;
    size_t n_segments;
    pl_blockmap_t map;
    pl_block_t *free_blocks;      /* slab free list, linked through `left` */
    pl_slab_chunk_t *chunks;
    pl_pending_event_t *pending;  /* outstanding record_stream events */
    pl_pending_event_t *free_pending;
    uint64_t lookups[PL_POOL_N];  /* get_free_block calls per pool (GC ages) */
    bool gc_on;                   /* cfg.garbage_collection_threshold > 0 */
    pl_alloc_stats_t stats;
    bool active_tracked;          /* false until the first free of a block with record_stream uses: before it,
                                     active / active_bytes equal allocation / allocated_bytes field for field, so
                                     only the latter are updated (stats.c copies them on read and when tracking
                                     starts) */
    pl_alloc_hook_fn hook;
    void *hook_ctx;
    int64_t n_map_events, n_unmap_events; /* SEGMENT_MAP / SEGMENT_UNMAP events emitted (hook or not) */
    pl_alloc_observer_fn observer;
};

/* rounding.c */
size_t pl_rounding_round_slow(const pl_alloc_config_t *cfg, size_t size);
/* Request rounding (rounding.c describes the rules): the plain 512-byte case inline, the rest out of line. */
static inline size_t pl_rounding_round(const pl_alloc_config_t *cfg, size_t size) {
    if (size >= PL_MIN_BLOCK && size <= SIZE_MAX - PL_ROUND_LARGE &&
        cfg->roundup_power2_divisions[63u - (unsigned)__builtin_clzll((unsigned long long)size)] <= 1)
        return (size + PL_MIN_BLOCK - 1) & ~(PL_MIN_BLOCK - 1);
    return pl_rounding_round_slow(cfg, size);
}
size_t pl_rounding_segment_size(size_t rounded);
static inline int pl_rounding_pool(size_t rounded) { return rounded <= PL_SMALL_SIZE ? PL_POOL_SMALL : PL_POOL_LARGE; }

/* bins.c, bins.h: the best-fit bins (included where used). */

/* blockmap.c */
int pl_blockmap_init(pl_blockmap_t *m);
void pl_blockmap_fini(pl_blockmap_t *m);
int pl_blockmap_insert(pl_blockmap_t *m, pl_block_t *b);
pl_block_t *pl_blockmap_find(const pl_blockmap_t *m, uintptr_t addr);
pl_block_t *pl_blockmap_remove(pl_blockmap_t *m, uintptr_t addr);

/* slab.c: get a descriptor (fields zero, except that a recycled one keeps no state worth reading: every field
 * the allocator reads before writing is cleared here), put one back. NULL when out of host memory. */
pl_block_t *pl_slab_refill(pl_alloc_t *a);
void pl_slab_fini(pl_alloc_t *a);
static inline pl_block_t *pl_slab_get(pl_alloc_t *a) {
    pl_block_t *b = a->free_blocks;
    if (!b && !(b = pl_slab_refill(a))) return NULL;
    a->free_blocks = b->left;
    /* first line: everything but size, addr and seg (set by every caller) */
    b->left = b->right = b->prev = b->next = NULL;
    b->prio = 0;
    b->bin = 0;
    b->state = 0;
    b->pool = 0;
    b->counted_split = b->in_expandable = false;
    /* second line: put left it clear (uses NULL, counts 0) but for requested_bytes, by_handle and gc_base */
    b->requested_bytes = 0;
    b->by_handle = false;
    b->gc_base = 0;
    return b;
}
static inline void pl_slab_put(pl_alloc_t *a, pl_block_t *b) {
    if (b->uses) {
        free(b->uses);
        b->uses = NULL;
    }
    b->n_uses = b->cap_uses = b->event_count = 0;
    b->state = 0;
    b->left = a->free_blocks;
    a->free_blocks = b;
}
/* The segment a block belongs to (keeps in_expandable in step). */
static inline void pl_block_set_seg(pl_block_t *b, pl_segment_t *seg) {
    b->seg = seg;
    b->in_expandable = seg->expandable;
}

/* The two ways a segment's block list changes shape; every split and merge in alloc.c and expandable.c goes
 * through them (PyTorch's Block::splice and try_merge_blocks), and PL_ASSERT checks the neighbourhood each time.
 *
 * pl_block_splice: link n between address neighbours p and q (p NULL: n becomes seg's first block; q NULL: n is
 * its last). The caller has already set n's and its neighbours' addresses and sizes so that p, n, q tile their
 * range; n belongs to seg. */
static inline void pl_block_splice(pl_segment_t *seg, pl_block_t *p, pl_block_t *n, pl_block_t *q) {
    PL_ASSERT(p ? p->next == q && p->seg == seg : seg->first == q);
    PL_ASSERT(!q || (q->prev == p && q->seg == seg));
    PL_ASSERT(n->seg == seg && n->pool == seg->pool && n->in_expandable == seg->expandable && n->size_bytes > 0);
    PL_ASSERT(!p || p->addr + p->size_bytes == n->addr);
    PL_ASSERT(!q || n->addr + n->size_bytes == q->addr);
    n->prev = p;
    n->next = q;
    if (p)
        p->next = n;
    else
        seg->first = n;
    if (q) q->prev = n;
}

/* pl_block_merge: l absorbs its next neighbour r, whose descriptor goes back to the slab; returns l. Neither block
 * may be in the bins (the caller took a FREE one out first), r carries no stream uses or pending events, and a
 * mapped block never absorbs an unmapped one or the other way round. */
static inline pl_block_t *pl_block_merge(pl_alloc_t *a, pl_block_t *l, pl_block_t *r) {
    PL_ASSERT(l->next == r && r->prev == l);
    PL_ASSERT(l->seg == r->seg && l->pool == r->pool);
    PL_ASSERT(l->addr + l->size_bytes == r->addr);
    PL_ASSERT(l->state != PL_BLOCK_FREE && r->state != PL_BLOCK_FREE);
    PL_ASSERT((l->state == PL_BLOCK_UNMAPPED) == (r->state == PL_BLOCK_UNMAPPED));
    PL_ASSERT(r->event_count == 0 && r->n_uses == 0);
    l->size_bytes += r->size_bytes;
    l->next = r->next;
    if (r->next) r->next->prev = l;
    pl_slab_put(a, r);
    return l;
}

/* stats.c. a->stats holds each counter triple s[PL_POOL_N] in an internal form that the hot path updates cheaply
 * (pl_stats_view gives the public one). Per pool: current, peak and freed as PyTorch's Stat; `allocated` holds the
 * base (current at the last reset), as allocated = current + freed - base. PL_POOL_ALL: only peak is kept (raised
 * after every increase of either pool, so it is PyTorch's all-pool peak); its current, allocated and freed are the
 * pools' sums. */
static inline void pl_stats_inc(pl_stat_t s[PL_POOL_N], int pool, int64_t d) {
    int64_t c = s[pool].current + d;
    s[pool].current = c;
    if (c > s[pool].peak) s[pool].peak = c;
    int64_t all = s[PL_POOL_SMALL].current + s[PL_POOL_LARGE].current;
    if (all > s[PL_POOL_ALL].peak) s[PL_POOL_ALL].peak = all;
}
static inline void pl_stats_dec(pl_stat_t s[PL_POOL_N], int pool, int64_t d) {
    s[pool].current -= d;
    s[pool].freed += d;
}
/* Current all-pool value of an internal triple. */
static inline int64_t pl_stats_current(const pl_stat_t s[PL_POOL_N]) {
    return s[PL_POOL_SMALL].current + s[PL_POOL_LARGE].current;
}
void pl_stats_derive(pl_alloc_t *a, pl_alloc_stats_t *out);
/* a->stats in the public form, active / active_bytes filled in (no walk). */
void pl_stats_view(const pl_alloc_t *a, pl_alloc_stats_t *out);
/* Start updating active / active_bytes separately (a block is about to wait for stream events). */
void pl_stats_track_active(pl_alloc_t *a);

/* expandable.c */
/* get / grow: NULL on failure with *rc = the backend's negative errno (-ENOMEM: out of memory). */
pl_segment_t *pl_expandable_get(pl_alloc_t *a, pl_binset_t *bs, int *rc);
pl_block_t *pl_expandable_grow(pl_alloc_t *a, pl_segment_t *seg, size_t size, int *rc);
/* stream_synchronize of the segment's stream (before unmapping pages that were handed out). */
int pl_expandable_sync(pl_alloc_t *a, pl_segment_t *seg);
/* Unmaps the whole pages inside FREE block b; *after (optional) gets the first block past b's old range.
 * Synchronizes the segment's stream first unless *synced (then sets it; synced NULL = always); when that
 * fails nothing is released (returns 0). */
size_t pl_expandable_release_block(pl_alloc_t *a, pl_block_t *b, pl_block_t **after, bool *synced);
size_t pl_expandable_releasable(const pl_alloc_t *a, const pl_block_t *b);
void pl_expandable_destroy(pl_alloc_t *a, pl_segment_t *seg);

/* alloc.c (shared helpers) */
void pl_alloc_bins_insert(pl_alloc_t *a, pl_block_t *b);
void pl_alloc_bins_remove(pl_alloc_t *a, pl_block_t *b);
void pl_alloc_emit(pl_alloc_t *a, pl_alloc_event_kind_t kind, uintptr_t addr, size_t size, size_t requested,
                   pl_stream_t stream, int pool);
void pl_alloc_segment_link(pl_alloc_t *a, pl_segment_t *seg);
void pl_alloc_segment_unlink(pl_alloc_t *a, pl_segment_t *seg);
bool pl_alloc_block_is_split(const pl_block_t *b);

/* The handle API (pl_alloc_run_batch's loop, allocator/batch.h, and the allocator's tests): malloc and free without
 * the lock and without the ptr map. Same decisions, stats, events and OOM path as pl_alloc_malloc / pl_alloc_free;
 * the block's address is b->addr. The caller guarantees that no other thread uses the allocator while it calls these
 * (a replay creates its own allocator and never shares it), and frees only blocks it got from pl_alloc_malloc_block,
 * each once (a block that is not an ALLOCATED handle block is a PL_REQUIRE failure). Such blocks are unknown to
 * pl_alloc_free, record_stream and block_size. Not exported from libplateau_alloc.so: code outside allocator/ uses
 * the batch; tests link plateau_alloc_internal. */
pl_block_t *pl_alloc_malloc_block(pl_alloc_t *a, size_t size, pl_stream_t stream);
void pl_alloc_free_block(pl_alloc_t *a, pl_block_t *b);

/* Walks every structure and checks the invariants above; 0 or -EFAULT with a message in err.
 * Takes the lock. For the allocator's tests (plateau_alloc_internal) and fuzz_alloc_config (the sources compiled
 * in); not exported. */
int pl_alloc_check(pl_alloc_t *a, char *err, size_t err_len);
/* The same walk with a->mu already held (or by the handle API's single owner): the PL_EXPENSIVE check. */
int pl_alloc_check_locked(pl_alloc_t *a, char *err, size_t err_len);
