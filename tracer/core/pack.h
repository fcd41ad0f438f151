/* Packed records (trace format 2.0, docs/trace-format.md "Packed records"): the records a long run writes every
 * step (step, rss, heap, host_alloc, host_free) in a short form: varints, each value a difference from the same
 * field of the previous record of its kind (addresses and call ordinals: of its thread) in the same chunk.
 *
 * The writer packs a chunk's payload just before it reaches the file (pl_pack_chunk, called by the writer thread
 * and by pl_writer_chunk_write); the reader decodes every chunk through pl_pack_decode, which reads packed and
 * ordinary records alike and yields the ordinary record (its own type, every field as the writer had it). The
 * state a chunk's records are differences against (pl_pack_ctx_t) starts from zero at every chunk, so a chunk
 * still decodes alone. Pure functions, thread-safe on distinct contexts, no allocation. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

#define PL_PACK_TYPE_BASE 64u /* a packed record of type T is written as type PL_PACK_TYPE_BASE + T */
#define PL_PACK_THREADS 16u   /* threads whose last address and call ordinal a chunk's context holds */

/* What the next record of a chunk is a difference against. Zeroed (pl_pack_reset) at the start of each chunk;
 * updated by every record of a known type, packed or not, identically on both sides. */
typedef struct pl_pack_ctx {
    int64_t t_ns;             /* the previous record's time */
    uint64_t step;            /* the last non-zero step field of a step, heap or rss record */
    uint64_t step_rec;        /* the previous step record's step */
    pl_rec_heap_t heap;       /* the previous heap record */
    pl_rec_rss_t rss;         /* the previous rss record */
    uint32_t tid;             /* the previous host_alloc or host_free record's thread */
    uint32_t n_thr;           /* threads seen (slots used: min(n_thr, PL_PACK_THREADS)) */
    uint32_t last;            /* the slot of the previous host record's thread: looked at first (speed only) */
    struct {
        uint32_t tid;
        uint64_t addr;        /* the thread's last host_alloc or host_free address */
        uint64_t ordinal;     /* the thread's last host_alloc call_ordinal */
    } thr[PL_PACK_THREADS];
} pl_pack_ctx_t;

void pl_pack_reset(pl_pack_ctx_t *x);

/* Decode the record at buf (len bytes available), packed or not, against *x, and update *x. Returns 0 and sets
 * *used (strings in *rec point into buf), 1 for a well-framed record of an unknown type (skip *used bytes;
 * *x unchanged), -EBADMSG if malformed (*x unchanged). */
int pl_pack_decode(pl_pack_ctx_t *x, const uint8_t *buf, size_t len, pl_trace_record_t *rec, size_t *used);

/* Encode rec packed against *x (not updating it). Returns the length, or 0 when rec's type has no packed form,
 * the packed form would not be shorter than the ordinary one, or it does not fit in cap. */
size_t pl_pack_encode(const pl_pack_ctx_t *x, const pl_trace_record_t *rec, uint8_t *buf, size_t cap);

/* Rewrite a chunk payload of ordinary records (len bytes) in place into the 2.0 form: each record of a packed
 * kind packed when that is shorter, the others as they were, in their order; a record that does not decode and
 * every byte after it are kept as they came (a reader stops there, as it would have). The record count does not
 * change. Returns the new length (<= len). */
size_t pl_pack_chunk(uint8_t *payload, size_t len);

/* The inverse, for tools that read a chunk's payload themselves (and feed it to code that takes ordinary
 * records): decode the records of `in` (len bytes, packed or not) and write them in the ordinary form to out (cap
 * bytes). Stops at the first record that does not decode or does not fit. Sets *n_records to the records written;
 * returns their bytes. */
size_t pl_pack_unpack(const uint8_t *in, size_t len, uint8_t *out, size_t cap, uint32_t *n_records);

/* False when every record of the payload is framed as an ordinary one of a type outside 64..127 (a chunk written
 * before 2.0): pl_event_decode then decodes each record exactly as pl_pack_decode would, without keeping a context
 * (the reader's fast path for older traces). True otherwise, and for bytes that do not frame. */
bool pl_pack_any(const uint8_t *payload, size_t len);
