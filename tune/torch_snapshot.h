/* tune/torch_snapshot: a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot(), a pickle) as a replay
 * sequence (docs/tune.md, "PyTorch memory snapshots").
 *
 * What is read: snapshot['device_traces'][device], the caching allocator's own event history, in order:
 * alloc -> ALLOC (addr, size = the requested bytes, stream); free_completed -> FREE (when the block really returns
 * to the cache, after the streams that used it are done), or free_requested (and the legacy 'free') when the trace
 * holds no free_completed at all (older PyTorch); oom -> PROBE (size, stream). segment_alloc/free/map/unmap are
 * the device calls the recorded run made: counted as reference numbers (map/unmap also into seq->n_map_records /
 * n_unmap_records, as a plateau trace does), with their bytes giving the recorded reserved memory over the trace.
 * snapshot['segments'] gives the reserved and allocated bytes at the moment of the snapshot (so, with the trace's
 * segment events, reserved at any entry), and an 'oom' entry's 'device_free' the device's free bytes when it failed:
 * reserved + device_free at the first OOM is the capacity the run had (s->capacity_bytes; none is recorded otherwise),
 * and
 * snapshot['allocator_settings']['PYTORCH_CUDA_ALLOC_CONF'] the recorded config. Everything else (frames,
 * user_metadata, compile contexts, external annotations) is ignored, whatever its type.
 * The trace is a ring buffer (_record_memory_history(max_entries=N)): when it wrapped, its first entries are frees of
 * blocks allocated before it; the builder counts those as n_unmatched_frees and the summary says why.
 * Work is linear in the pickle: every trace entry and segment dict is scanned once; a pickle that shares one dict
 * between many entries (memo references) is refused past 2x the document's size in scanned items.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pickle.h"
#include "replay.h"

typedef struct pl_torch_snapshot_opts {
    size_t max_events;          /* 0 = PL_REPLAY_DEFAULT_MAX_EVENTS */
    int device;                 /* trace to replay; -1 = the device with the most alloc actions (lowest on ties) */
    pl_pickle_limits_t limits;  /* zeros = defaults */
} pl_torch_snapshot_opts_t;

typedef struct pl_torch_snapshot_info {
    int protocol;               /* pickle protocol */
    int n_devices;              /* len(device_traces) */
    int device;                 /* the trace replayed */
    size_t n_entries;           /* entries of that trace */
    size_t n_alloc, n_free_requested, n_free_completed, n_free_legacy, n_oom;
    size_t n_segment_alloc, n_segment_free, n_segment_map, n_segment_unmap, n_snapshot, n_other_actions;
    bool frees_from_requested;  /* no free_completed in the trace: frees are free_requested */
    bool have_segments;         /* 'segments' present: the next three are the device's state at the snapshot */
    size_t n_segments;
    uint64_t reserved_bytes, allocated_bytes;
    bool have_reserved_peak;    /* reserved at the trace's start could be derived (segments minus trace deltas) */
    uint64_t reserved_peak_bytes; /* recorded peak reserved over the trace (segment events, anchored at the end) */
    bool have_oom_capacity;     /* an 'oom' entry has 'device_free' and reserved is anchored (have_reserved_peak):
                                   s->capacity_bytes = oom_reserved_bytes + oom_device_free_bytes (the first such oom) */
    uint64_t oom_reserved_bytes, oom_device_free_bytes;
    char alloc_conf[256];       /* allocator_settings['PYTORCH_CUDA_ALLOC_CONF'], "" when absent */
    bool have_expandable;       /* allocator_settings['expandable_segments'] present */
    bool expandable;
} pl_torch_snapshot_info_t;

/* Read a snapshot held in data[0..len) (name: for s->file and messages). Returns 0 with *s initialised (owned by
 * the caller) and *info filled; -EBADMSG / -ENOTSUP (not a readable pickle or not a snapshot: err says where),
 * -ENODATA (no allocation history: err says how to record one), -ENODEV (opts->device out of range), -E2BIG (a
 * pickle limit, max_events or too much sharing), -ENOMEM. err is meant for the user and starts with name. */
int pl_torch_snapshot_read(const void *data, size_t len, const char *name, const pl_torch_snapshot_opts_t *opts,
                           pl_replay_seq_t *s, pl_torch_snapshot_info_t *info, char *err, size_t err_len);

/* One paragraph on what was read, for the CLI (uses s->n_unmatched_frees to explain a wrapped ring buffer). */
void pl_torch_snapshot_summary(const pl_torch_snapshot_info_t *info, const pl_replay_seq_t *s, char *buf,
                               size_t buf_len);
