/* tune/replay: a recorded run's device allocation sequence, replayed through plateau's allocator (docs/tune.md).
 *
 * Extraction streams the trace(s) twice: pass 1 counts device_alloc records per (file, source, allocator, device)
 * and picks one stream of requests (plateau's allocator hook first, then CUDA runtime, driver, CUPTI; most records
 * on ties); pass 2 folds that stream into a compact event array. Frees pair with allocations by address (a hash of
 * live addresses -> slots; slots are reused, so a replay needs one pointer per *live* allocation, not per event).
 * Sizes are the requested bytes when recorded, else the size. A device_oom record becomes a probe: try the request,
 * free it at once if it now fits. Memory is bounded by opts.max_events (clear error past it).
 * Replay runs the array through pl_alloc on a sim backend with touch = false (address space only) and collects peak
 * allocated / reserved, device calls, OOMs and reserved-but-unallocated at the peak. Deterministic: same sequence,
 * same config, same capacity -> same result, whatever thread runs it and whatever runs beside it (best fit breaks
 * ties by address, and the sim device's addresses come from its own address space, not from host mmap).
 * Data flow: tracer reader -> pl_replay_extract -> pl_replay_run (x N configs in tune/tune.c) -> cli.
 * Thread safety: a sequence is read-only during pl_replay_run, so many runs may share one.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/alloc.h>
#include <plateau/trace.h>

#include "batch.h" /* the event layout: the fast replay hands the array to the allocator as is */

#define PL_REPLAY_DEFAULT_MAX_EVENTS ((size_t)64 << 20) /* 64 Mi events = 1 GiB of event array */
#define PL_REPLAY_MAX_STREAMS 1024
#define PL_REPLAY_DEFAULT_CAPACITY_BYTES ((uint64_t)80 << 30)

typedef enum pl_replay_kind {
    PL_REPLAY_ALLOC = PL_ALLOC_OP_ALLOC, /* malloc size_bytes on streams[stream] into slot */
    PL_REPLAY_FREE = PL_ALLOC_OP_FREE,   /* free slot */
    PL_REPLAY_PROBE = PL_ALLOC_OP_PROBE, /* a request that failed when recorded: malloc, and free at once if it
                                            succeeds */
} pl_replay_kind_t;

/* size_bytes (ALLOC, PROBE), slot (ALLOC, FREE: index into the replay's pointer table, < n_slots), stream (ALLOC,
 * PROBE: index into streams[]), kind (pl_replay_kind_t): 16 bytes. */
typedef pl_alloc_op_t pl_replay_event_t;

typedef struct pl_replay_seq {
    pl_replay_event_t *ev;      /* n_events, owned */
    size_t n_events, cap_events, max_events;
    uint32_t n_slots;           /* slots ever used = peak number of live allocations */
    uint64_t streams[PL_REPLAY_MAX_STREAMS]; /* recorded stream handles, by first use */
    size_t n_streams;
    size_t n_allocs, n_frees, n_probes;
    size_t n_unmatched_frees;   /* frees of addresses not live in the sequence (allocated before tracing, lost) */
    size_t n_implicit_frees;    /* allocations at an address still live (its free was lost): freed first */
    size_t n_bad_records;       /* allocations at address UINT64_MAX (impossible): skipped */
    /* where the sequence came from */
    char file[256];
    uint32_t source;            /* pl_device_source_t */
    uint32_t allocator_id;
    int32_t device;
    size_t n_other_streams_records; /* device_alloc records of other sources/allocators/devices/files, or pinned
                                       host memory (device -1): not replayed */
    uint64_t capacity_bytes;    /* recorded device capacity (last alloc_stats), 0 when unknown */
    char capacity_from[96];     /* where capacity_bytes came from ("the trace's alloc_stats", "the snapshot: ..."), ""
                                   when it is 0 */
    uint64_t n_map_records, n_unmap_records; /* device_map/unmap of the chosen allocator (what the run really did) */
    bool have_stats;            /* an alloc_stats record of the chosen allocator was read */
    pl_rec_alloc_stats_t last_stats; /* the last one */
    size_t stats_event;         /* n_events when last_stats was read (replay snapshots its stats there) */
    size_t n_skipped_files;     /* *.pltrace names of the directory that are not regular files: never opened */
    char skipped[256];          /* the first of them, "DIR/NAME: why" */
    bool damaged;               /* a reader stopped early (truncated / corrupted); error has its message */
    char error[256];
    /* private: address -> slot while building */
    uint64_t *map_addr;
    uint32_t *map_slot;
    size_t map_cap, map_used;
    uint32_t *free_slots;
    size_t n_free_slots, cap_free_slots;
} pl_replay_seq_t;

typedef struct pl_replay_opts {
    size_t max_events;          /* 0 = PL_REPLAY_DEFAULT_MAX_EVENTS */
} pl_replay_opts_t;

/* Builder (used by extraction and by generated sequences in tests and benchmarks). */
void pl_replay_seq_init(pl_replay_seq_t *s, size_t max_events);
void pl_replay_seq_free(pl_replay_seq_t *s);
/* Append an allocation of size_bytes at recorded address addr on recorded stream. 0, -ENOMEM, -E2BIG (max_events
 * or PL_REPLAY_MAX_STREAMS reached). */
int pl_replay_seq_alloc(pl_replay_seq_t *s, uint64_t addr, uint64_t size_bytes, uint64_t stream);
/* Append the free of the live allocation at addr (a free of an unknown address is counted and skipped). */
int pl_replay_seq_free_addr(pl_replay_seq_t *s, uint64_t addr);
int pl_replay_seq_probe(pl_replay_seq_t *s, uint64_t size_bytes, uint64_t stream);

/* Extract from a trace file, or a run directory (every *.pltrace in it; the file with the most records of the best
 * source wins). Returns 0 (also for a damaged trace: s->damaged, s->error), -ENOENT (no such path / no trace in
 * the directory), -EBADMSG (not a trace), -ENODATA (no device allocation records), -E2BIG (past max_events),
 * -ENOMEM. On error err holds a message meant for the user. On success *s is initialised and owned by the caller. */
int pl_replay_extract(const char *path, const pl_replay_opts_t *opts, pl_replay_seq_t *s, char *err, size_t err_len);
/* Same over one in-memory trace. */
int pl_replay_extract_mem(const void *data, size_t len, const char *name, const pl_replay_opts_t *opts,
                          pl_replay_seq_t *s, char *err, size_t err_len);

typedef struct pl_replay_result {
    uint64_t capacity_bytes;
    int64_t peak_allocated_bytes, peak_reserved_bytes, peak_requested_bytes;
    double reserved_per_allocated;     /* peak reserved / peak allocated (0 when nothing was allocated) */
    int64_t unallocated_at_peak_bytes; /* reserved - allocated after the event where reserved first reached its peak */
    int64_t n_device_alloc, n_device_free, n_device_map, n_device_unmap;
    int64_t n_device_calls;            /* n_device_alloc + n_device_map */
    int64_t n_map_events, n_unmap_events; /* allocator SEGMENT_MAP/UNMAP events (compare with seq n_map_records) */
    int64_t n_alloc_retries;
    int64_t n_ooms;                    /* failed requests (probes included) */
    int64_t n_failed_allocs;           /* ALLOC events that failed (their frees are skipped) */
    int64_t first_oom_event;           /* index into ev[] of the first failed request, -1 when none */
    uint64_t first_oom_bytes;
    int64_t end_allocated_bytes, end_reserved_bytes;
    /* the allocator's stats just before event seq->stats_event (where the last recorded alloc_stats was taken) */
    bool have_at_stats;
    int64_t at_stats_allocated_bytes, at_stats_allocated_peak_bytes;
    int64_t at_stats_reserved_bytes, at_stats_reserved_peak_bytes;
    int64_t at_stats_n_device_alloc, at_stats_n_device_free, at_stats_n_ooms;
} pl_replay_result_t;

/* Replay s under cfg on a fresh sim device of capacity_bytes (touch = false). Returns 0, -ENOMEM, -EINVAL (err
 * says why: e.g. the allocator refused the config). OOMs are results, not errors. Thread-safe for distinct out. */
int pl_replay_run(const pl_replay_seq_t *s, const pl_alloc_config_t *cfg, uint64_t capacity_bytes,
                  pl_replay_result_t *out, char *err, size_t err_len);

/* Which allocator entry points a replay drives. FAST (pl_replay_run's): the allocator's batch (allocator/batch.h:
 * its unlocked handle path, no lock, no ptr map, no hook; peaks read from the stats after every event). LOCKED: the
 * public pl_alloc_malloc / pl_alloc_free with a tracking hook, the reference the fast path is tested against
 * (same pl_replay_result_t) and that replay_bench times for comparison. */
typedef enum pl_replay_path { PL_REPLAY_PATH_FAST = 0, PL_REPLAY_PATH_LOCKED = 1 } pl_replay_path_t;
int pl_replay_run_path(const pl_replay_seq_t *s, const pl_alloc_config_t *cfg, uint64_t capacity_bytes,
                       pl_replay_path_t path, pl_replay_result_t *out, char *err, size_t err_len);

/* Same on a sim device of the given options (capacity_bytes, va_base; touch is forced false): how tests check that a
 * replay does not depend on where the device's address space starts. */
int pl_replay_run_sim(const pl_replay_seq_t *s, const pl_alloc_config_t *cfg, const pl_sim_options_t *so,
                      pl_replay_path_t path, pl_replay_result_t *out, char *err, size_t err_len);

/* The first field in which two results differ (its name), NULL when they are equal in every field: how the fast
 * path is checked against the reference (tests, fuzz, bench). */
const char *pl_replay_result_diff(const pl_replay_result_t *a, const pl_replay_result_t *b);

/* The capacity a replay of s uses: given (--capacity) when not 0, else the recorded one, else
 * PL_REPLAY_DEFAULT_CAPACITY_BYTES; why gets the reason as shown after the size: "--capacity", "from the trace's
 * alloc_stats", "default: not recorded; use --capacity". */
uint64_t pl_replay_pick_capacity(const pl_replay_seq_t *s, uint64_t given, char *why, size_t why_len);

/* Name of a device source ("allocator", "cuda-runtime", "cuda-driver", "cupti"). */
const char *pl_replay_source_name(uint32_t source);
