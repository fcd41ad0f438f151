/* Control API of the CUDA driver test double (tests/cuda_double/cuda_double.c, built as libcuda.so.1).
 *
 * The double implements a slice of the CUDA driver API over host memory and checks its contract (docs/cuda-double.md).
 * These extra exports let a test configure it, read its counters, and read an ordered log of every allocation-related
 * driver call, so that a trace recorded by the preload can be compared against what the "driver" really did.
 *
 * Reach them the same way as the driver itself: dlopen the double, then dlsym("pl_cuda_double_reset") etc.; the
 * typedefs below name the function types. Every function is thread-safe (one lock inside the double). Nothing here
 * needs CUDA's headers, so a test or a tool can include this file alone, from C11 or C++.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Allocation-related driver calls that the double logs, in the order they happened. */
typedef enum pl_cuda_double_call {
  PL_CUDA_DOUBLE_MEM_ALLOC = 1,      /* cuMemAlloc_v2(ptr out, size) */
  PL_CUDA_DOUBLE_MEM_FREE,           /* cuMemFree_v2(ptr) */
  PL_CUDA_DOUBLE_MEM_ALLOC_ASYNC,    /* cuMemAllocAsync[_ptsz](ptr out, size, stream) */
  PL_CUDA_DOUBLE_MEM_FREE_ASYNC,     /* cuMemFreeAsync[_ptsz](ptr, stream) */
  PL_CUDA_DOUBLE_MEM_ALLOC_MANAGED,  /* cuMemAllocManaged(ptr out, size, arg = flags) */
  PL_CUDA_DOUBLE_MEM_ADDRESS_RESERVE,/* cuMemAddressReserve(ptr out, size, arg = alignment, hint not logged) */
  PL_CUDA_DOUBLE_MEM_ADDRESS_FREE,   /* cuMemAddressFree(ptr, size) */
  PL_CUDA_DOUBLE_MEM_CREATE,         /* cuMemCreate(handle out, size, device from prop) */
  PL_CUDA_DOUBLE_MEM_RELEASE,        /* cuMemRelease(handle) */
  PL_CUDA_DOUBLE_MEM_MAP,            /* cuMemMap(ptr, size, arg = offset, handle) */
  PL_CUDA_DOUBLE_MEM_UNMAP,          /* cuMemUnmap(ptr, size) */
  PL_CUDA_DOUBLE_MEM_SET_ACCESS,     /* cuMemSetAccess(ptr, size, arg = access flags of the first descriptor) */
  PL_CUDA_DOUBLE_MEM_ALLOC_PITCH,    /* cuMemAllocPitch_v2(ptr out, size = pitch * height, arg = pitch) */
  PL_CUDA_DOUBLE_MEM_HOST_ALLOC,     /* cuMemHostAlloc(ptr out, size, arg = flags): pinned host memory */
  PL_CUDA_DOUBLE_MEM_ALLOC_HOST,     /* cuMemAllocHost_v2(ptr out, size): pinned host memory */
  PL_CUDA_DOUBLE_MEM_FREE_HOST,      /* cuMemFreeHost(ptr) */
} pl_cuda_double_call_t;

/* One logged call. Fields a call does not have are 0 (device: -1). On failure, out-parameters are logged as 0. */
typedef struct pl_cuda_double_rec {
  uint64_t seq;         /* 0-based position in the log */
  uint32_t call;        /* pl_cuda_double_call_t */
  uint32_t ptsz;        /* 1 when the per-thread-default-stream (_ptsz) entry point was called */
  int32_t result;       /* CUresult returned to the caller */
  int32_t device;       /* device the call acted on, -1 when none is known */
  uint64_t ptr;         /* device address returned or passed */
  uint64_t size_bytes;  /* size passed (for frees of plain allocations: the size that was allocated) */
  uint64_t handle;      /* CUmemGenericAllocationHandle returned or passed */
  uint64_t stream;      /* CUstream passed, as an integer */
  uint64_t arg;         /* call-specific, see pl_cuda_double_call_t */
} pl_cuda_double_rec_t;

/* Counters since the last reset. n_* count successful calls unless named otherwise. */
typedef struct pl_cuda_double_counters {
  uint64_t n_logged;             /* records in the log (including dropped ones) */
  uint64_t n_log_dropped;        /* records not kept because the log reached its limit */
  uint64_t n_alloc;              /* cuMemAlloc_v2 + cuMemAllocAsync* + cuMemAllocManaged */
  uint64_t n_free;               /* cuMemFree_v2 + cuMemFreeAsync* */
  uint64_t n_reserve, n_address_free, n_create, n_release, n_map, n_unmap, n_set_access;
  uint64_t n_live_allocs;        /* plain allocations not yet freed */
  uint64_t n_live_handles;       /* cuMemCreate handles not yet released */
  uint64_t n_live_physical;      /* physical allocations still backed (unreleased, or released but still mapped) */
  uint64_t n_live_reservations;  /* reserved ranges not yet freed */
  uint64_t n_live_mappings;      /* cuMemMap mappings not yet unmapped */
  uint64_t n_live_streams, n_live_events;
  uint64_t n_ctx_active;         /* primary contexts with a non-zero retain count */
  uint64_t used_bytes;           /* device memory in use: allocations + physical + active context overhead */
  uint64_t peak_used_bytes;
  uint64_t capacity_bytes;       /* total device memory (per device) */
  uint64_t granularity_bytes;    /* what cuMemGetAllocationGranularity reports */
  uint64_t n_violations;         /* calls refused because they broke the API contract */
  uint64_t n_ooms;               /* CUDA_ERROR_OUT_OF_MEMORY because the capacity was exhausted */
  uint64_t n_injected;           /* failures injected by fail_*_at */
  uint64_t n_leaks;              /* objects reported as leaked at context destroy */
  uint64_t leaked_bytes;         /* their bytes */
  uint64_t n_stream_sync;        /* successful cuStreamSynchronize[_ptsz] calls */
  uint64_t n_unmap_synced;       /* cuMemUnmap calls where a successful cuStreamSynchronize happened after every
                                    unmapped mapping was made (work is synchronous here: this is what can be
                                    checked of "synchronise before unmap") */
} pl_cuda_double_counters_t;

/* Frees everything the double holds (silently, no leak report), clears counters and the log, and reconfigures it
 * from `config` (same syntax as the PL_CUDA_DOUBLE environment variable; NULL = read the variable again). The
 * double is then uninitialised: call cuInit again. Returns 0, or -EINVAL for a bad config (the double then keeps its
 * defaults and cuInit fails). Must not race with other driver calls on the double. */
int pl_cuda_double_reset(const char *config);
typedef int pl_cuda_double_reset_fn(const char *config);

/* Copies the counters into *out. */
void pl_cuda_double_counters(pl_cuda_double_counters_t *out);
typedef void pl_cuda_double_counters_fn(pl_cuda_double_counters_t *out);

/* Copies up to max_recs log records starting at record `first` into out; returns how many were copied. */
size_t pl_cuda_double_log(size_t first, pl_cuda_double_rec_t *out, size_t max_recs);
typedef size_t pl_cuda_double_log_fn(size_t first, pl_cuda_double_rec_t *out, size_t max_recs);

/* Writes the canonical one-line text form of a record (ending in '\n') into buf, like snprintf; returns the length
 * it needs (excluding the NUL). The same text goes to the log file named by `log:PATH`. The format is:
 *   "<seq> <entry point> <CUresult name> dev=<d> ptr=0x<hex> size=<dec> handle=0x<hex> stream=0x<hex> arg=0x<hex>\n"
 */
int pl_cuda_double_format(const pl_cuda_double_rec_t *rec, char *buf, size_t buf_bytes);
typedef int pl_cuda_double_format_fn(const pl_cuda_double_rec_t *rec, char *buf, size_t buf_bytes);

/* Number of live objects (allocations, handles, physical allocations, reservations, mappings, streams, events)
 * that a leak report would name right now; with report != 0 it also writes that report on stderr. */
size_t pl_cuda_double_live(int report);
typedef size_t pl_cuda_double_live_fn(int report);

/* The message of the last contract violation (thread-local copy; "" if none since the reset). */
const char *pl_cuda_double_last_violation(void);
typedef const char *pl_cuda_double_last_violation_fn(void);

#ifdef __cplusplus
}
#endif
