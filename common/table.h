/* common/table: open-addressing tables keyed by 64-bit integers (addresses, ids), offline only (reports/, tune/).
 *
 * pl_table_t is the one map of the report's readers (extract.c's address and id maps, export_torch.c's): a key and
 * its fixed-size value side by side in one slot (one cache line touched per probe on the ingest's hot path), linear
 * probing from a mixed hash, at most half full, deletion by backward shift (no tombstones: lookups stay short on
 * tables that see as many frees as allocations), and an optional bound on the entries (a full table refuses new keys,
 * it never grows past it). Values are read and written in place through the pointer a lookup returns (no copies of
 * a size known only at run time on the hot path). Key 0 is never stored (callers keep ids that may be 0 as id + 1).
 * Iteration order is not part of the contract.
 *
 * pl_table_grow is the cold rehash of the tables that keep their own layout (two parallel arrays, keys[cap] and
 * vals[cap], `empty` marking a free slot): reports/period.c's native-stack identities, tune/replay.c's live-address
 * map. Not thread-safe per table. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct pl_table {
    unsigned char *slots;       /* cap slots of slot_bytes: the key (uint64_t, 0 = free), then the value */
    size_t cap, n;              /* cap a power of two (0 before the first put); n keys stored */
    size_t slot_bytes;          /* 8 + the value's size rounded up to 8 */
    size_t val_bytes;
    size_t max_n;               /* the most keys stored, 0 = no bound */
} pl_table_t;

/* An empty table of values of val_bytes bytes (may be 0: a set), holding at most max_n keys (0: no bound). */
void pl_table_init(pl_table_t *t, size_t val_bytes, size_t max_n);
/* Frees the slots; the table is empty (and usable) again. */
void pl_table_free(pl_table_t *t);

/* The slot where a key's probe starts, in [0, cap) (cap a power of two). */
static inline size_t pl_table_home(uint64_t key, size_t cap) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

/* The value stored for key (writable in place), NULL when absent (or key 0). */
static inline void *pl_table_get(const pl_table_t *t, uint64_t key) {
    if (!t->cap || !key) return NULL;
    for (size_t i = pl_table_home(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
        unsigned char *s = t->slots + i * t->slot_bytes;
        uint64_t k;
        memcpy(&k, s, sizeof k);
        if (k == key) return s + 8;
        if (!k) return NULL;
    }
}

/* The value in slot i (i < cap) when the slot holds a key, else NULL: a walk over every entry, in no set order. */
static inline void *pl_table_slot(const pl_table_t *t, size_t i) {
    uint64_t k;
    memcpy(&k, t->slots + i * t->slot_bytes, sizeof k);
    return k ? t->slots + i * t->slot_bytes + 8 : NULL;
}

/* The value of key, added (zeroed) when absent: *val points at it, to be written in place. Returns 0, 1 when not
 * added (key 0, or a table holding max_n keys; *val NULL), or -ENOMEM (table unchanged, *val NULL). The pointer
 * stays valid until the next put or delete. */
int pl_table_put(pl_table_t *t, uint64_t key, void **val);

/* Remove the entry whose value val points at (from pl_table_get or pl_table_put; read it first). */
void pl_table_del(pl_table_t *t, void *val);

/* The home of a key in a table of cap slots (cap a power of two). */
typedef size_t (*pl_table_home_fn)(uint64_t key, size_t cap);

/* Doubles *cap (first_cap when 0), moving every key and its value to its place in new arrays, in slot order, and
 * frees the old ones. 0, or -ENOMEM with the table unchanged. */
int pl_table_grow(uint64_t **keys, uint32_t **vals, size_t *cap, size_t first_cap, uint64_t empty,
                  pl_table_home_fn home);
