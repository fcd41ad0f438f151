/* plateau step and mark API.
 *
 * A training program calls plateau_step() once per optimizer step so reports can build per-step series.
 * The functions are defined by the preloaded tracer (libplateau_preload.so). A program links them from an install
 * with `pkg-config --cflags --libs plateau` (or CMake: find_package(plateau), plateau::plateau): libplateau's
 * definitions do nothing, and under `plateau run` the preloaded tracer's come first and record. Or, with nothing
 * to link, look them up at run time:
 *
 *     void (*step)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "plateau_step");
 *     if (step) step();
 *
 * From Python: `import plateau; plateau.step()` (python/, docs/python.md), or ctypes.CDLL(None).plateau_step()
 *
 * Thread safety: both are safe from any thread; they never allocate from the traced heap, never block on
 * I/O (records go to an in-memory buffer that a writer thread flushes), and never fail (when recording is
 * off, or no tracer is preloaded and the program resolved them at run time, they do nothing). They take short
 * internal locks, so they are NOT async-signal-safe: to mark steps from a signal, run with
 * PLATEAU_STEP_SIGNAL=1 (or `plateau run --steps-signal`) and send SIGUSR2 instead.
 * What a step records: a step record, the exact host heap totals at that moment, one statistics snapshot per
 * plateau caching allocator, and (from the sampler thread, right after) an RSS/PSS sample.
 * Compiles as C11 and as C++.
 */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PL_STEP_API __attribute__((visibility("default")))
#else
#define PL_STEP_API
#endif

/* End of one training step (after the optimizer update). Steps are numbered from 1 in the trace. */
PL_STEP_API void plateau_step(void);

/* End of one training step, found automatically: what the Python bootstrap calls after each optimizer step
 * (docs/python.md). Explicit steps win: once the program has called plateau_step(), this records nothing; and the
 * first plateau_step() that follows an automatic step directly (no other step between them) is taken as that same
 * boundary and records nothing, so `optimizer.step(); plateau_step()` counts once per iteration. Auto steps
 * recorded before the first explicit call stay in the trace (step source 3). Same thread safety as plateau_step(). */
PL_STEP_API void plateau_step_auto(void);

/* A named point in time (e.g. "eval-begin", "epoch 3"). label is copied (truncated to 63 bytes); NULL = "". */
PL_STEP_API void plateau_mark(const char *label);

/* Sources of plateau_alloc_stats(). */
#define PLATEAU_STATS_TORCH_CUDA 1    /* torch's CUDA caching allocator: torch.cuda.memory_stats(device) */
#define PLATEAU_STATS_TORCH_TENSORS 2 /* live torch.Tensor objects counted by the Python bootstrap; device -1 = CPU;
                                       * the host record also carries the autograd graphs they hold: N_SEGMENTS =
                                       * nodes, RESERVED_BYTES = flags, ALLOCATED_BYTES / ACTIVE_BYTES = bytes and
                                       * number of the storages those nodes save (docs/trace-format.md) */
#define PLATEAU_STATS_NVML 3          /* reserved: plateau attach's NVML readings (a program's are dropped) */

/* Indexes into plateau_alloc_stats()'s vals (torch.cuda.memory_stats() keys in brackets, ".all" pool). */
enum plateau_stat {
    PLATEAU_STAT_ALLOCATED_BYTES = 0,  /* allocated_bytes.all.current */
    PLATEAU_STAT_RESERVED_BYTES,       /* reserved_bytes.all.current */
    PLATEAU_STAT_ACTIVE_BYTES,         /* active_bytes.all.current */
    PLATEAU_STAT_INACTIVE_SPLIT_BYTES, /* inactive_split_bytes.all.current */
    PLATEAU_STAT_NUM_ALLOC_RETRIES,    /* num_alloc_retries (cumulative) */
    PLATEAU_STAT_NUM_OOMS,             /* num_ooms (cumulative) */
    PLATEAU_STAT_N_ALLOCATIONS,        /* allocation.all.current: live blocks; for TORCH_TENSORS, live tensors */
    PLATEAU_STAT_N_SEGMENTS,           /* segment.all.current */
    PLATEAU_STAT_ALLOCATED_BYTES_PEAK, /* allocated_bytes.all.peak */
    PLATEAU_STAT_RESERVED_BYTES_PEAK,  /* reserved_bytes.all.peak */
    PLATEAU_STAT_REQUESTED_BYTES,      /* requested_bytes.all.current (torch >= 2.1) */
    PLATEAU_STAT_CAPACITY_BYTES,       /* the device's total memory (torch.cuda.get_device_properties) */
    PLATEAU_STAT__COUNT
};

/* Allocator statistics of one device, taken by the program or its framework at the end of the step just recorded:
 * what the Python bootstrap calls after each optimizer step with torch's counters (docs/python.md). Records one
 * alloc_stats record (docs/trace-format.md) tagged with the steps completed so far and allocator id
 * 0x10000 + source, so the report judges the counters per step like plateau's own allocator's.
 * source: PLATEAU_STATS_*; device: CUDA device index, -1 = host; vals: n values in enum plateau_stat order, read
 * before the call returns (the caller keeps ownership); UINT64_MAX = not available, and so is every index >= n.
 * Values are clamped to INT64_MAX. n < 0 or vals NULL with n > 0 records nothing. Same thread safety as
 * plateau_step(); never fails. */
PL_STEP_API void plateau_alloc_stats(int source, int device, const uint64_t *vals, int n);

/* Who keeps it (docs/retention.md): what the Python bootstrap's census calls for one census (path "") and for each
 * holder it reports. Records one retention record (docs/trace-format.md) tagged with the steps completed so far.
 * census: the census number (from 1) the values were measured at (a holder's first report carries its earlier
 * censuses too); flags: PL_RETENTION_* (plateau/trace.h); vals: n values, items, nodes, bytes in that order
 * (UINT64_MAX = not available, and so is every index >= n), then (since trace 1.9) vals[3] = k, the number of
 * storages reachable from the holder that follow as k (data pointer, bytes) pairs (at most PL_RETENTION_MAX_RANGES
 * kept; UINT64_MAX = none); strings are copied and cut (path, what, fix at 255
 * bytes, kind at 31, file at 1023); NULL = "". line: in file, 0 unknown. Same thread safety as plateau_step();
 * never fails. */
PL_STEP_API void plateau_retention(unsigned census, unsigned flags, const uint64_t *vals, int n, const char *path,
                                   const char *what, const char *kind, const char *file, int line, const char *fix);

#ifdef __cplusplus
}
#endif
