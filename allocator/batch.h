/* allocator/batch.h: a sequence of mallocs and frees run inside the allocator (not installed): the only allocator
 * entry point below the public API that code outside allocator/ uses (tune/replay.c's fast replay).
 *
 * A replay driving the allocator once per recorded event across the library boundary paid a call, a return and the
 * callee's register saves per event, as much as a cached malloc itself. A batch runs the loop here instead, on the
 * allocator's own unlocked handle path (internal.h: malloc_block / free_allocated, no lock, no ptr map), so the
 * compiler inlines the per-event work into it. The op layout is the replay's event array (tune/replay.h defines
 * pl_replay_event_t as pl_alloc_op_t), so nothing is copied. Slots hold blocks, opaque to the caller: it gives a
 * zeroed table of n_slots entries and frees it; blocks left in it at the end go with pl_alloc_destroy.
 * The caller owns the allocator on one thread: no other call may use it during a batch (a replay creates its own
 * allocator and never shares it).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <plateau/alloc.h>

typedef enum pl_alloc_op_kind {
    PL_ALLOC_OP_ALLOC = 0, /* malloc size_bytes on streams[stream] into slots[slot] */
    PL_ALLOC_OP_FREE = 1,  /* free slots[slot] (nothing when it is NULL: its malloc failed) */
    PL_ALLOC_OP_PROBE = 2, /* malloc size_bytes on streams[stream], and free at once if it succeeds */
} pl_alloc_op_kind_t;

typedef struct pl_alloc_op {
    uint64_t size_bytes;  /* ALLOC, PROBE */
    uint32_t slot;        /* ALLOC, FREE: index into the slot table */
    uint16_t stream;      /* ALLOC, PROBE: index into streams[] */
    uint8_t kind;         /* pl_alloc_op_kind_t */
    uint8_t reserved;
} pl_alloc_op_t;          /* 16 bytes */

struct pl_block;

typedef struct pl_alloc_batch {
    const pl_alloc_op_t *ops;
    struct pl_block **slots;    /* caller's table, one entry per slot, NULL when free */
    const uint64_t *streams;    /* stream handles by index */
    int64_t peak_reserved;      /* in/out: the highest reserved bytes seen after any op (start at -1) */
    int64_t unallocated_at_peak; /* out: reserved - allocated after the op that first reached peak_reserved */
    int64_t n_map_events, n_unmap_events; /* out: SEGMENT_MAP / SEGMENT_UNMAP events the allocator emitted since it
                                             was created (hook or not), as of the return of the last batch */
} pl_alloc_batch_t;

/* Runs ops[pos..end). Stops after the first malloc that fails (an ALLOC leaves its slot NULL; a PROBE frees
 * nothing) and returns that op's index; returns end when every malloc succeeded. A FREE of a slot holding a block
 * that is not a live handle block is a PL_REQUIRE failure. */
PL_API size_t pl_alloc_run_batch(pl_alloc_t *a, pl_alloc_batch_t *bt, size_t pos, size_t end);
