/* allocator/snapshot.c: the machine-readable view of segments and blocks (JSON, common/json.h), and the invariant walk
 * the stress tests run after every operation.
 *
 * Snapshot shape: see pl_alloc_snapshot_json in alloc.h. Expandable segments list only mapped blocks; their
 * total_size is the mapped byte count and reserved_address_space the virtual range.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bins.h"
#include "internal.h"
#include "json.h"

static const char *state_name(const pl_block_t *b) {
    switch (b->state) {
    case PL_BLOCK_ALLOCATED: return "active_allocated";
    case PL_BLOCK_PENDING: return "active_pending_free";
    default: return "inactive";
    }
}

/* Written through the common JSON emitter into a memstream (its buffer is malloc'd: the caller frees it). */
PL_API int pl_alloc_snapshot_json(pl_alloc_t *a, char **out, size_t *len) {
    char *buf = NULL;
    size_t n = 0;
    FILE *o = open_memstream(&buf, &n);
    if (!o) return -ENOMEM;
    pl_json_t j;
    pl_json_init(&j, o, PL_JSON_COMPACT | PL_JSON_NO_NEWLINE);
    pthread_mutex_lock(&a->mu);
    pl_json_object(&j);
    pl_json_kint(&j, "device", a->be->device);
    pl_json_kuint(&j, "capacity", a->capacity_bytes);
    pl_json_kuint(&j, "reserved", a->reserved_bytes);
    pl_json_key(&j, "segments");
    pl_json_array(&j);
    for (pl_segment_t *s = a->segments; s; s = s->next_seg) {
        pl_json_object(&j);
        pl_json_kuint(&j, "address", s->addr);
        pl_json_kuint(&j, "total_size", s->mapped_bytes);
        pl_json_kuint(&j, "reserved_address_space", s->size_bytes);
        pl_json_kuint(&j, "stream", s->stream);
        pl_json_kstr(&j, "pool", s->pool == PL_POOL_SMALL ? "small" : "large");
        pl_json_kbool(&j, "expandable", s->expandable);
        pl_json_key(&j, "blocks");
        pl_json_array(&j);
        for (pl_block_t *k = s->first; k; k = k->next) {
            if (k->state == PL_BLOCK_UNMAPPED) continue;
            pl_json_object(&j);
            pl_json_kuint(&j, "address", k->addr);
            pl_json_kuint(&j, "size", k->size_bytes);
            pl_json_kuint(&j, "requested_size", k->requested_bytes);
            pl_json_kstr(&j, "state", state_name(k));
            pl_json_end(&j);
        }
        pl_json_end(&j);
        pl_json_end(&j);
    }
    pl_json_end(&j);
    pl_json_end(&j);
    pthread_mutex_unlock(&a->mu);
    int rc = pl_json_done(&j);
    if (fclose(o) || rc) { /* a memstream fails only for memory */
        free(buf);
        return -ENOMEM;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* CHECK: the invariant holds, or err says which and the walk stops with -EFAULT. */
#define CHECK(cond, ...)                                             \
    do {                                                             \
        if (!(cond)) {                                               \
            if (err && err_len) snprintf(err, err_len, __VA_ARGS__); \
            return -EFAULT;                                          \
        }                                                            \
    } while (0)

static int cmp_seg(const void *x, const void *y) {
    uintptr_t a = (*(pl_segment_t *const *)x)->addr, b = (*(pl_segment_t *const *)y)->addr;
    return a < b ? -1 : a > b;
}

/* What the walk over the blocks counts, per pool, for comparison with the allocator's own stats. */
typedef struct tally {
    int64_t alloc_b[PL_POOL_N], alloc_n[PL_POOL_N], active_b[PL_POOL_N], active_n[PL_POOL_N];
    int64_t free_b[PL_POOL_N], reserved[PL_POOL_N], split_n[PL_POOL_N], split_b[PL_POOL_N];
    int64_t req_b[PL_POOL_N], seg_n[PL_POOL_N];
    size_t n_free_blocks, n_allocated; /* n_allocated: blocks in the map */
} tally_t;

/* One block of segment s by its state; *mapped gains its bytes when they are backed. */
static int check_block_state(pl_alloc_t *a, const pl_segment_t *s, const pl_block_t *b, tally_t *t, size_t *mapped,
                             char *err, size_t err_len) {
    switch (b->state) {
    case PL_BLOCK_ALLOCATED:
        if (b->by_handle) { /* handle API blocks stay out of the map */
            CHECK(pl_blockmap_find(&a->map, b->addr) == NULL, "handle block %#" PRIxPTR " in the map", b->addr);
        } else {
            CHECK(pl_blockmap_find(&a->map, b->addr) == b, "allocated block %#" PRIxPTR " not in the map", b->addr);
            t->n_allocated++;
        }
        t->alloc_b[b->pool] += (int64_t)b->size_bytes;
        t->alloc_n[b->pool]++;
        /* fallthrough */
    case PL_BLOCK_PENDING:
        CHECK(b->state == PL_BLOCK_ALLOCATED || b->event_count > 0, "pending block without events");
        t->active_b[b->pool] += (int64_t)b->size_bytes;
        t->active_n[b->pool]++;
        t->req_b[b->pool] += (int64_t)b->requested_bytes;
        *mapped += b->size_bytes;
        return 0;
    case PL_BLOCK_FREE:
        CHECK(b->counted_split == (!s->expandable && (b->prev || b->next)),
              "free block %#" PRIxPTR ": inactive_split flag wrong", b->addr);
        if (b->counted_split) {
            t->split_n[b->pool]++;
            t->split_b[b->pool] += (int64_t)b->size_bytes;
        }
        CHECK(pl_bins_lower_bound(s->bins, b->size_bytes) != NULL, "free block not findable");
        t->free_b[b->pool] += (int64_t)b->size_bytes;
        *mapped += b->size_bytes;
        t->n_free_blocks++;
        return 0;
    case PL_BLOCK_UNMAPPED:
        CHECK(s->expandable, "unmapped block in a plain segment");
        CHECK(b->addr % a->gran_bytes == 0 && b->size_bytes % a->gran_bytes == 0, "unmapped block unaligned");
        for (size_t i = (b->addr - s->addr) / a->gran_bytes; i < (b->addr + b->size_bytes - s->addr) / a->gran_bytes; i++)
            CHECK(s->pages[i] == 0, "page %zu of an unmapped block is mapped", i);
        return 0;
    default:
        CHECK(0, "block %#" PRIxPTR ": bad state %d", b->addr, b->state);
    }
    return 0;
}

/* One segment: its blocks tile it, link both ways, never two FREE or two UNMAPPED in a row; its mapped bytes and
 * pages agree. */
static int check_segment(pl_alloc_t *a, const pl_segment_t *s, tally_t *t, char *err, size_t err_len) {
    CHECK(s->first && !s->first->prev, "segment %#" PRIxPTR ": bad first block", s->addr);
    uintptr_t at = s->addr;
    size_t mapped = 0;
    int prev_state = 0, rc;
    t->seg_n[s->pool]++;
    for (pl_block_t *b = s->first; b; b = b->next) {
        CHECK(b->addr == at, "segment %#" PRIxPTR ": block %#" PRIxPTR " not contiguous (expected %#" PRIxPTR ")",
              s->addr, b->addr, at);
        CHECK(b->seg == s && b->pool == s->pool && b->in_expandable == s->expandable,
              "block %#" PRIxPTR ": wrong segment, pool or expandable flag", b->addr);
        CHECK(b->size_bytes > 0 && b->size_bytes % PL_MIN_BLOCK == 0, "block %#" PRIxPTR ": size %zu",
              b->addr, b->size_bytes);
        CHECK(!b->next || b->next->prev == b, "block %#" PRIxPTR ": broken links", b->addr);
        CHECK(!(b->state == PL_BLOCK_FREE && prev_state == PL_BLOCK_FREE), "block %#" PRIxPTR ": two FREE blocks touch",
              b->addr);
        CHECK(!(b->state == PL_BLOCK_UNMAPPED && prev_state == PL_BLOCK_UNMAPPED),
              "block %#" PRIxPTR ": two UNMAPPED blocks touch", b->addr);
        if ((rc = check_block_state(a, s, b, t, &mapped, err, err_len))) return rc;
        prev_state = b->state;
        at += b->size_bytes;
    }
    CHECK(at == s->addr + s->size_bytes, "segment %#" PRIxPTR ": blocks cover %zu of %zu bytes", s->addr,
          (size_t)(at - s->addr), s->size_bytes);
    CHECK(mapped == s->mapped_bytes, "segment %#" PRIxPTR ": mapped %zu != %zu", s->addr, mapped, s->mapped_bytes);
    if (s->expandable) {
        size_t pages = 0;
        for (size_t i = 0; i < s->n_pages; i++) pages += s->pages[i] != 0;
        CHECK(pages * a->gran_bytes == s->mapped_bytes, "segment %#" PRIxPTR ": %zu pages for %zu mapped bytes",
              s->addr, pages, s->mapped_bytes);
        CHECK(s->bins->expandable == s, "expandable segment not registered in its binset");
    }
    t->reserved[s->pool] += (int64_t)s->mapped_bytes;
    return 0;
}

/* Every segment, then: no two overlap, the map holds the allocated blocks, the bins the free ones. segs has room
 * for n_segments + 1. */
static int check_segments(pl_alloc_t *a, pl_segment_t **segs, tally_t *t, char *err, size_t err_len) {
    size_t n_segs = 0;
    int rc;
    for (pl_segment_t *s = a->segments; s; s = s->next_seg) {
        CHECK(n_segs < a->n_segments, "segment list longer than n_segments");
        segs[n_segs++] = s;
        if ((rc = check_segment(a, s, t, err, err_len))) return rc;
    }
    CHECK(n_segs == a->n_segments, "n_segments %zu != %zu", a->n_segments, n_segs);
    qsort(segs, n_segs, sizeof *segs, cmp_seg);
    for (size_t i = 1; i < n_segs; i++)
        CHECK(segs[i - 1]->addr + segs[i - 1]->size_bytes <= segs[i]->addr, "segments overlap");
    CHECK(t->n_allocated == a->map.n, "map holds %zu blocks, %zu allocated", a->map.n, t->n_allocated);
    size_t in_bins = 0;
    for (int p = 1; p < PL_POOL_N; p++)
        for (pl_binset_t *bs = a->binsets[p]; bs; bs = bs->next) {
            size_t n;
            CHECK(pl_bins_check(bs, &n) == 0, "treap of pool %d stream %" PRIuPTR " broken", p, bs->stream);
            in_bins += n;
        }
    CHECK(in_bins == t->n_free_blocks, "bins hold %zu blocks, %zu free", in_bins, t->n_free_blocks);
    return 0;
}

/* The allocator's stats against what the walk counted. */
static int check_stats(pl_alloc_t *a, const tally_t *t, char *err, size_t err_len) {
    pl_alloc_stats_t view;
    pl_stats_view(a, &view);
    const pl_alloc_stats_t *st = &view;
    int64_t total_reserved = 0;
    for (int p = 1; p < PL_POOL_N; p++) {
        total_reserved += t->reserved[p];
        CHECK(t->active_b[p] + t->free_b[p] == t->reserved[p],
              "pool %d: active %" PRId64 " + free %" PRId64 " != reserved %" PRId64, p, t->active_b[p], t->free_b[p],
              t->reserved[p]);
        CHECK(st->allocated_bytes[p].current == t->alloc_b[p], "pool %d: allocated_bytes stat %" PRId64 " != %" PRId64,
              p, st->allocated_bytes[p].current, t->alloc_b[p]);
        CHECK(st->allocation[p].current == t->alloc_n[p], "pool %d: allocation stat", p);
        CHECK(st->active_bytes[p].current == t->active_b[p], "pool %d: active_bytes stat", p);
        CHECK(st->active[p].current == t->active_n[p], "pool %d: active stat", p);
        CHECK(st->requested_bytes[p].current == t->req_b[p], "pool %d: requested_bytes stat", p);
        CHECK(st->reserved_bytes[p].current == t->reserved[p], "pool %d: reserved_bytes stat %" PRId64 " != %" PRId64,
              p, st->reserved_bytes[p].current, t->reserved[p]);
        CHECK(st->inactive_split[p].current == t->split_n[p], "pool %d: inactive_split stat", p);
        CHECK(st->inactive_split_bytes[p].current == t->split_b[p], "pool %d: inactive_split_bytes stat", p);
        CHECK(st->segment[p].current == t->seg_n[p], "pool %d: segment stat", p);
    }
    CHECK((int64_t)a->reserved_bytes == total_reserved, "reserved %zu != %" PRId64, a->reserved_bytes, total_reserved);
    CHECK(st->reserved_bytes[PL_POOL_ALL].current == total_reserved, "all-pool reserved stat");
    CHECK(a->reserved_bytes <= a->capacity_bytes, "reserved above capacity");
    return 0;
}

int pl_alloc_check_locked(pl_alloc_t *a, char *err, size_t err_len) {
    pl_segment_t **segs = calloc(a->n_segments + 1, sizeof *segs);
    tally_t t;
    memset(&t, 0, sizeof t);
    int rc;
    if (!segs) {
        if (err && err_len) snprintf(err, err_len, "out of memory");
        return -EFAULT;
    }
    rc = check_segments(a, segs, &t, err, err_len);
    if (!rc) rc = check_stats(a, &t, err, err_len);
    free(segs);
    return rc;
}

int pl_alloc_check(pl_alloc_t *a, char *err, size_t err_len) {
    pthread_mutex_lock(&a->mu);
    int rc = pl_alloc_check_locked(a, err, err_len);
    pthread_mutex_unlock(&a->mu);
    return rc;
}
