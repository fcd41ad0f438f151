/* allocator/backend.h: the device backend contract, one entry per CUDA driver call the allocator needs.
 *
 * A backend hands out device memory two ways: plain segments (cuMemAlloc/cuMemFree) and the virtual-memory
 * path used by expandable segments (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
 * cuMemRelease, cuMemAddressFree, cuMemGetAllocationGranularity). Stream ordering is expressed with events
 * (cuEventRecord/cuEventQuery/cuEventSynchronize). Implementations: backend_sim.c (host memory through mmap,
 * so expandable segments really run) and backend_cuda.c (the driver API).
 *
 * Contract: every op returns 0 or a negative errno (-ENOMEM when the device is out of memory, -EINVAL for
 * misuse, -EBUSY from event_query while work is pending, -EDEADLK from event_synchronize / stream_synchronize
 * when the work can never complete on its own, e.g. a held sim stream; anything else, e.g. -EIO for a lost
 * device, is a device error that the allocator reports as such and never treats as out of memory). Ops are called with the owning allocator's lock held,
 * but a backend may be shared by several allocators, so a backend must be thread-safe itself.
 * Sizes passed to reserve/create/map/unmap/set_access are multiples of granularity(); addresses of map/unmap
 * lie inside one reservation. The allocator creates one physical handle per granularity page.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <plateau/alloc.h>

typedef uintptr_t pl_phys_t;  /* physical memory handle (CUmemGenericAllocationHandle) */
typedef uintptr_t pl_event_t; /* recorded event (CUevent) */

typedef struct pl_backend_ops {
    const char *name;
    /* cuMemAlloc / cuMemFree: one plain segment. */
    int (*mem_alloc)(pl_backend_t *b, size_t size_bytes, uintptr_t *out_addr);
    int (*mem_free)(pl_backend_t *b, uintptr_t addr, size_t size_bytes);
    /* cuMemGetAllocationGranularity (minimum). */
    int (*granularity)(pl_backend_t *b, size_t *out_bytes);
    /* cuMemAddressReserve / cuMemAddressFree. */
    int (*addr_reserve)(pl_backend_t *b, size_t size_bytes, uintptr_t *out_addr);
    int (*addr_free)(pl_backend_t *b, uintptr_t addr, size_t size_bytes);
    /* cuMemCreate / cuMemRelease: physical memory, counted against capacity. */
    int (*phys_create)(pl_backend_t *b, size_t size_bytes, pl_phys_t *out);
    int (*phys_release)(pl_backend_t *b, pl_phys_t h);
    /* cuMemMap / cuMemUnmap / cuMemSetAccess (read-write for this device). unmap does not wait for queued work:
     * the allocator calls stream_synchronize on the owning stream once before each batch of unmaps. */
    int (*map)(pl_backend_t *b, uintptr_t addr, size_t size_bytes, pl_phys_t h);
    int (*unmap)(pl_backend_t *b, uintptr_t addr, size_t size_bytes);
    int (*set_access)(pl_backend_t *b, uintptr_t addr, size_t size_bytes);
    /* cuMemGetInfo. */
    int (*mem_info)(pl_backend_t *b, size_t *out_free_bytes, size_t *out_total_bytes);
    /* cuEventCreate + cuEventRecord on stream / cuEventQuery / cuEventSynchronize / cuEventDestroy. */
    int (*event_record)(pl_backend_t *b, pl_stream_t stream, pl_event_t *out);
    int (*event_query)(pl_backend_t *b, pl_event_t ev);
    int (*event_synchronize)(pl_backend_t *b, pl_event_t ev);
    void (*event_destroy)(pl_backend_t *b, pl_event_t ev);
    /* cuStreamSynchronize: wait until the work queued on `stream` so far has completed. */
    int (*stream_synchronize)(pl_backend_t *b, pl_stream_t stream);
    /* The backend's own account of its last failed op (cuda: the driver call, its arguments and the CUresult
     * name), copied into buf (NUL-terminated, truncated to len); "" when nothing failed yet. The errno an op
     * returns says what kind of failure it was; this says where, for messages. Never fails. */
    void (*last_error)(pl_backend_t *b, char *buf, size_t len);
    void (*destroy)(pl_backend_t *b);
} pl_backend_ops_t;

/* Every backend struct starts with this header. */
struct pl_backend {
    const pl_backend_ops_t *ops;
    int device; /* device ordinal reported in events */
};
