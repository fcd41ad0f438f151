/* The collector's compaction of a trace (docs/long-runs.md): what keeps a long run's trace small, done in plateau
 * run's collector, outside the program (the program pays nothing for it).
 *
 * Records pass through in their order, held for at most one step: when a step ends (its step record), the
 * sampled host allocations of that step that were freed within it (a host_alloc and its host_free, with no step
 * record between them) are dropped and counted per call stack into `aggregate` records (trace format 1.9): they
 * change no site's live bytes at any step boundary, which is all the report reads of them. Of the step's periodic
 * heap and RSS samples only those the report's per-step points are made of are kept (the first, the last, and each
 * metric's lowest and highest), the others counted. Past 2 x 8,192 steps, the totals fold into windows of steps no
 * wider than half the report's bins (compact.c, "folding"). Everything else is written as it came. Pairs are elided only in a trace that has step records (one without them is reported by
 * time and its allocation stream feeds period detection: it is written whole), and only when the allocation
 * displaces nothing the file holds live at that address.
 *
 * Held records are decided at the end of their step, or when hold_bytes are held, or hold_ns after the first of
 * them arrived (pl_compact_tick), or at pl_compact_flush: a pair split by such a flush is written whole. Kept
 * records then reach the sink in chunks of up to 256 KiB, at the latest out_ns after the first of them (tick).
 * Not thread-safe: one compactor per trace, used by that trace's ring thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where kept records go: a payload of whole records (at most PL_TRACE_MAX_CHUNK_BYTES). Returns the bytes it put in
 * the file (0 when it does not know: the payload and a chunk header are counted), or -errno. */
typedef int (*pl_compact_sink_fn)(void *ctx, const uint8_t *payload, uint32_t len, uint32_t n_records);

typedef struct pl_compact_opts {
    bool enabled;          /* false: every record passes through at once, untouched */
    size_t hold_bytes;     /* most bytes held before a flush; 0 = 4 MiB */
    int64_t hold_ns;       /* longest a record is held; 0 = 10 s */
    uint64_t agg_steps;    /* aggregate records are written at least every agg_steps steps (and every hour); 0 = 65536 */
    int64_t out_ns;        /* kept records wait at most this long to be written in one chunk; 0 = 250 ms */
    uint64_t max_bytes;    /* the most bytes written (PLATEAU_TRACE_MAX): past max_bytes - max_bytes / 64, records
                              are counted, not written, but for the trace's end and, when it ends, the aggregates
                              (one record per call stack, and one saying where it stopped); 0 = no limit */
    uint64_t fold_points;  /* totals fold into windows of B steps, B <= steps / (2 * fold_points): the report's
                              points per metric; 0 = 8192 (reports/extract.c's default) */
} pl_compact_opts_t;

typedef struct pl_compact_stats {
    uint64_t n_in, bytes_in;          /* records and bytes fed */
    uint64_t n_out, bytes_out;        /* records and bytes handed to the sink (aggregates included) */
    uint64_t n_pairs, pair_bytes;     /* host_alloc/host_free pairs elided; their usable bytes */
    uint64_t n_samples;               /* periodic heap/rss samples left out (neither first, last, lowest, highest) */
    uint64_t n_aggregates;            /* aggregate records written */
} pl_compact_stats_t;

typedef struct pl_compact pl_compact_t;

/* A compactor writing to sink(ctx, ...). Returns NULL when out of memory. */
pl_compact_t *pl_compact_new(const pl_compact_opts_t *opts, pl_compact_sink_fn sink, void *ctx);

/* Feed len bytes holding n_records whole records (a published range of the ring, or the collector's own records).
 * Returns 0, -EBADMSG for bytes that are not whole records (they are passed on as they came, and compaction stops
 * for this trace), or the sink's error. */
int pl_compact_feed(pl_compact_t *c, const uint8_t *recs, uint32_t len, uint32_t n_records, int64_t now_ns);

/* Write what has been held longer than hold_ns. Returns 0 or the sink's error. */
int pl_compact_tick(pl_compact_t *c, int64_t now_ns);

/* Write everything held; with `final`, the pending aggregates too (the trace ends). Returns 0 or the sink's error. */
int pl_compact_flush(pl_compact_t *c, bool final, int64_t now_ns);

void pl_compact_get_stats(const pl_compact_t *c, pl_compact_stats_t *out);

void pl_compact_free(pl_compact_t *c);
