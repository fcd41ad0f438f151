/* plateau caching device allocator: public API.
 *
 * A caching allocator with PyTorch's CUDA caching allocator semantics (512 B rounding, small/large pools,
 * best fit per (pool, stream), split and merge rules, max_split_size_mb, garbage_collection_threshold,
 * expandable segments, record_stream) over a backend: a simulated device in host memory (`sim`) or the
 * CUDA driver API (`cuda`, when built with CUDA and a driver is present).
 *
 * Ownership: every object returned by a *_create function is owned by the caller and released by the
 * matching *_destroy. An allocator does not own its backend: destroy the allocator first.
 * Thread safety: all pl_alloc_* functions on one allocator are thread-safe (one mutex per allocator);
 * pl_alloc_config_* functions are pure and reentrant. Hooks are called with the allocator's lock held:
 * a hook must not call back into the same allocator.
 * Errors: functions returning int return 0 or a negative errno; allocation functions return NULL.
 * Out-parameters are written only on success.
 *
 * Compiles as C11 and as C++.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PL_API __attribute__((visibility("default")))
#else
#define PL_API
#endif

typedef struct pl_alloc pl_alloc_t;       /* opaque: one caching allocator */
typedef struct pl_backend pl_backend_t;   /* opaque: one device backend (sim or cuda) */
typedef uintptr_t pl_stream_t;            /* stream handle; 0 is the default stream (a CUstream on cuda) */

/* ---------------------------------------------------------------------------------------------------------
 * Configuration: PLATEAU_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF, same syntax: `key:value,key:value`.
 * Keys: max_split_size_mb, max_non_split_rounding_mb, garbage_collection_threshold, roundup_power2_divisions,
 * expandable_segments, per_process_memory_fraction, and PyTorch's host/backend keys that are accepted and
 * validated but have no effect here (release_lock_on_cudamalloc, pinned_use_cuda_host_register,
 * pinned_num_register_threads, pinned_use_background_threads, backend:native).
 * ------------------------------------------------------------------------------------------------------- */

#define PL_ROUNDUP_N_INTERVALS 64 /* one division count per power-of-two size interval, 1 B .. 2^63 B */

typedef struct pl_alloc_config {
    size_t max_split_size_bytes;          /* SIZE_MAX = unlimited (default); else >= 20 MiB */
    size_t max_non_split_rounding_bytes;  /* default 20 MiB */
    double garbage_collection_threshold;  /* 0 = off (default); else in (0, 1) */
    double per_process_memory_fraction;   /* 1.0 = whole device (default); in (0, 1] */
    bool expandable_segments;             /* default false */
    /* roundup_power2_divisions: divisions[i] applies to sizes in [2^i, 2^(i+1)); 0 = plain 512 B rounding.
     * Set by either form: `roundup_power2_divisions:4` or `roundup_power2_divisions:[256:1,512:2,>:8]`. */
    unsigned roundup_power2_divisions[PL_ROUNDUP_N_INTERVALS];
} pl_alloc_config_t;

/* Fill *cfg with the defaults above. Never fails. */
PL_API void pl_alloc_config_default(pl_alloc_config_t *cfg);

/* Parse `text` (may be NULL or empty: defaults) into *cfg. On error returns -EINVAL and writes a message that
 * names the offending key and lists the valid keys into err (NUL-terminated, truncated to err_len). */
PL_API int pl_alloc_config_parse(const char *text, pl_alloc_config_t *cfg, char *err, size_t err_len);

/* Parse PLATEAU_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF, else defaults. Same errors as parse; the message
 * also names which variable was read. */
PL_API int pl_alloc_config_from_env(pl_alloc_config_t *cfg, char *err, size_t err_len);

/* Render *cfg in the env-var syntax (only non-default keys; "" for all defaults). Returns the length that
 * the full string needs, like snprintf. */
PL_API int pl_alloc_config_format(const pl_alloc_config_t *cfg, char *buf, size_t buf_len);

/* ---------------------------------------------------------------------------------------------------------
 * Backends.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct pl_sim_options {
    size_t capacity_bytes;     /* device memory; default 80 GiB */
    size_t granularity_bytes;  /* physical page size for expandable segments; default 2 MiB */
    uint64_t fail_alloc_at;    /* 0 = never; else the Nth device allocation (1-based) fails */
    uint64_t fail_map_at;      /* 0 = never; else the Nth physical map fails */
    bool touch;                /* back allocations with real host memory (mmap) so bytes can be written;
                                  default true. false = address space only (fast replay, no writes allowed) */
    uint64_t va_base;          /* touch = false: where the backend's own device address space starts (0 =
                                  PL_SIM_VA_BASE). Addresses are handed out lowest first and reused after a free,
                                  from a space private to the backend: they never depend on the process's other
                                  mappings or threads, and a sequence of calls gets the same addresses every time.
                                  touch = true uses the addresses of real host mappings (mmap) instead. */
} pl_sim_options_t;

#define PL_SIM_VA_BASE ((uint64_t)0x7f0000000000) /* default va_base (looks like a CUDA device address) */

/* Defaults for the sim backend. */
PL_API void pl_sim_options_default(pl_sim_options_t *opt);

/* Parse PLATEAU_SIM_DEVICE syntax: `capacity:80GiB,granularity:2MiB,fail_alloc_at:N,fail_map_at:N,touch:0|1`.
 * Sizes take B, KiB, MiB, GiB, TiB (and KB/MB/GB as powers of 1000). Errors as pl_alloc_config_parse. */
PL_API int pl_sim_options_parse(const char *text, pl_sim_options_t *opt, char *err, size_t err_len);

/* Create a simulated device. Returns 0 or -ENOMEM / -EINVAL. */
PL_API int pl_backend_sim_create(const pl_sim_options_t *opt, pl_backend_t **out);

/* Sim streams run asynchronously only when held: while stream `s` is held, events recorded on it stay
 * pending (as if kernels were still running); releasing completes them. Used to test record_stream. */
PL_API void pl_backend_sim_hold_stream(pl_backend_t *b, pl_stream_t s, bool held);

/* Create a CUDA driver backend for `device` (dlopen of libcuda.so.1 or $PLATEAU_LIBCUDA). Returns -ENOTSUP
 * when built without CUDA, -ENODEV when no driver or device is present; *err gets a message naming the
 * failed call. */
PL_API int pl_backend_cuda_create(int device, pl_backend_t **out, char *err, size_t err_len);

/* Message of the last failed driver call on a cuda backend (the call, its arguments, the CUresult name); "" for
 * other backends or none yet. Thread-local copy, valid until the next call on this thread. */
PL_API const char *pl_backend_cuda_last_error(pl_backend_t *b);

PL_API void pl_backend_destroy(pl_backend_t *b);

/* ---------------------------------------------------------------------------------------------------------
 * The allocator.
 * ------------------------------------------------------------------------------------------------------- */

/* Create an allocator over `backend` with `cfg` (NULL = pl_alloc_config_from_env; on a malformed env var
 * this fails with -EINVAL and *err holds the message). */
PL_API int pl_alloc_create(pl_backend_t *backend, const pl_alloc_config_t *cfg, pl_alloc_t **out, char *err,
                           size_t err_len);

/* Releases every segment (live blocks included) back to the backend. */
PL_API void pl_alloc_destroy(pl_alloc_t *a);

/* Allocate `size` bytes for use on `stream`. size 0 returns a unique non-NULL pointer of a 512 B block.
 * Returns NULL on OOM after releasing cache and retrying once; pl_alloc_last_error() then holds the message
 * (requested, capacity, free, allocated, reserved-but-unallocated, and the setting to try). A backend error that
 * is not out-of-memory (e.g. a lost device) returns NULL at once, without retry and without counting an OOM;
 * the message then names the failed driver call. */
PL_API void *pl_alloc_malloc(pl_alloc_t *a, size_t size, pl_stream_t stream);

/* Free a pointer returned by pl_alloc_malloc. NULL is a no-op. An unknown pointer is a PL_REQUIRE failure. */
PL_API void pl_alloc_free(pl_alloc_t *a, void *ptr);

/* Mark that `ptr` is used on `stream` too: on free, the block is reused only once the work queued on every
 * recorded stream at the time of free has completed. Returns -EINVAL for an unknown pointer. */
PL_API int pl_alloc_record_stream(pl_alloc_t *a, void *ptr, pl_stream_t stream);

/* Release every cached block that is wholly free (and unmap free tail pages of expandable segments). */
PL_API void pl_alloc_empty_cache(pl_alloc_t *a);

/* Usable size of the block behind ptr (the rounded size), or 0 if ptr is unknown. */
PL_API size_t pl_alloc_block_size(pl_alloc_t *a, const void *ptr);

/* Message of the last failure on this thread (OOM, config); "" if none. Valid until the next call. */
PL_API const char *pl_alloc_last_error(void);

/* Statistics, PyTorch's names. Index [PL_POOL_ALL|PL_POOL_SMALL|PL_POOL_LARGE]. */
enum { PL_POOL_ALL = 0, PL_POOL_SMALL = 1, PL_POOL_LARGE = 2, PL_POOL_N = 3 };

typedef struct pl_stat {
    int64_t current, peak, allocated, freed;
} pl_stat_t;

typedef struct pl_alloc_stats {
    pl_stat_t allocation[PL_POOL_N];           /* live blocks handed out (counts) */
    pl_stat_t segment[PL_POOL_N];              /* device segments (counts) */
    pl_stat_t active[PL_POOL_N];               /* blocks in use or awaiting stream events (counts) */
    pl_stat_t inactive_split[PL_POOL_N];       /* free blocks inside partly used segments (counts) */
    pl_stat_t allocated_bytes[PL_POOL_N];
    pl_stat_t reserved_bytes[PL_POOL_N];
    pl_stat_t active_bytes[PL_POOL_N];
    pl_stat_t inactive_split_bytes[PL_POOL_N];
    pl_stat_t requested_bytes[PL_POOL_N];      /* bytes asked for, before rounding */
    int64_t num_alloc_retries;                 /* device allocs that failed and were retried after freeing cache */
    int64_t num_ooms;
    int64_t num_device_alloc, num_device_free; /* segment allocations / frees on the backend */
    int64_t num_device_map, num_device_unmap;  /* physical page maps / unmaps (expandable segments) */
    /* Beyond PyTorch: */
    size_t largest_free_bytes;                 /* largest cached free block */
    size_t releasable_bytes;                   /* what empty_cache would return right now */
    double fragmentation;                      /* 1 - largest_free / total cached free; 0 when nothing is free */
    size_t capacity_bytes;                     /* device capacity (x per_process_memory_fraction) */
} pl_alloc_stats_t;

PL_API void pl_alloc_get_stats(pl_alloc_t *a, pl_alloc_stats_t *out);

/* Reset peak values to current and the allocated/freed counters to 0. */
PL_API void pl_alloc_reset_peak_stats(pl_alloc_t *a);

/* Snapshot of segments and blocks as JSON (one object: {"segments":[{"address","total_size","stream","pool",
 * "expandable","blocks":[{"address","size","requested_size","state":"active_allocated|active_pending_free|
 * inactive"}]}]}), written to *out (malloc'd, caller frees) with its length in *len. */
PL_API int pl_alloc_snapshot_json(pl_alloc_t *a, char **out, size_t *len);

/* ---------------------------------------------------------------------------------------------------------
 * Event hook (the tracer subscribes here; the allocator knows nothing of tracing).
 * ------------------------------------------------------------------------------------------------------- */

typedef enum pl_alloc_event_kind {
    PL_ALLOC_EV_ALLOC = 1,      /* block handed out: addr, size (rounded), requested */
    PL_ALLOC_EV_FREE = 2,       /* block returned by the program: addr, size */
    PL_ALLOC_EV_SEGMENT_MAP = 3,   /* device memory acquired: addr, size (segment alloc or pages mapped) */
    PL_ALLOC_EV_SEGMENT_UNMAP = 4, /* device memory released: addr, size */
    PL_ALLOC_EV_OOM = 5,        /* a request failed: requested; size = free device bytes at the time */
} pl_alloc_event_kind_t;

typedef struct pl_alloc_event {
    pl_alloc_event_kind_t kind;
    uintptr_t addr;
    size_t size_bytes;
    size_t requested_bytes;
    pl_stream_t stream;
    int pool;                   /* PL_POOL_SMALL or PL_POOL_LARGE */
    int device;
} pl_alloc_event_t;

typedef void (*pl_alloc_hook_fn)(void *ctx, const pl_alloc_event_t *ev);

/* Install (or with fn = NULL remove) the allocator's one hook. Called under the allocator's lock, in event
 * order. */
PL_API void pl_alloc_set_hook(pl_alloc_t *a, pl_alloc_hook_fn fn, void *ctx);

/* Process-wide observer: if a symbol named PL_ALLOC_OBSERVER_SYMBOL of type pl_alloc_observer_fn is defined
 * in the process (the preloaded tracer defines it), pl_alloc_create calls it with each new allocator before
 * returning and pl_alloc_destroy calls it with created = false, so an observer can install a hook without
 * the program's cooperation. Looked up with dlsym(RTLD_DEFAULT) once per allocator. */
typedef void (*pl_alloc_observer_fn)(pl_alloc_t *a, bool created);

/* The names the allocator and an observer find each other by, through dlsym(RTLD_DEFAULT) (neither links the
 * other): the observer the allocator looks up, and the two functions an observer that does not link
 * libplateau_alloc looks up when it is first called. */
#define PL_ALLOC_OBSERVER_SYMBOL "plateau_alloc_observer" /* pl_alloc_observer_fn */
#define PL_ALLOC_SET_HOOK_SYMBOL "pl_alloc_set_hook"       /* pl_alloc_set_hook */
#define PL_ALLOC_GET_STATS_SYMBOL "pl_alloc_get_stats"     /* pl_alloc_get_stats */

#ifdef __cplusplus
}
#endif
