/* Device events from plateau's caching allocator. The allocator calls `plateau_alloc_observer` (found with
 * dlsym(RTLD_DEFAULT)) when an allocator is created or destroyed; we install its event hook and record
 * every block alloc/free and segment map/unmap as PL_REC_DEVICE_* (source allocator), and at each step one
 * PL_REC_ALLOC_STATS per live allocator. The preload does not link the allocator: pl_alloc_set_hook and
 * pl_alloc_get_stats are looked up when the observer fires (so they exist, the caller being the allocator).
 * Locking: `mu` guards the table; pl_alloc_get_stats is called with mu held, which is safe because the
 * allocator calls the observer before taking its own lock in pl_alloc_destroy. The hook runs under the
 * allocator's lock and touches only its ctx (the id) and the writer. */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include <plateau/alloc.h>

#include "preload.h"

#define MAX_ALLOCATORS 64

typedef void (*set_hook_fn)(pl_alloc_t *, pl_alloc_hook_fn, void *);
typedef void (*get_stats_fn)(pl_alloc_t *, pl_alloc_stats_t *);

static struct {
    pthread_mutex_t mu;
    pl_alloc_t *live[MAX_ALLOCATORS]; /* index = id - 1; NULL when destroyed or free */
    uint32_t n_ids;
    set_hook_fn set_hook;
    get_stats_fn get_stats;
} dev = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void on_event(void *ctx, const pl_alloc_event_t *ev) {
    if (!atomic_load_explicit(&pl_g.active, memory_order_relaxed)) return;
    pl_rec_type_t type;
    switch (ev->kind) {
    case PL_ALLOC_EV_ALLOC: type = PL_REC_DEVICE_ALLOC; break;
    case PL_ALLOC_EV_FREE: type = PL_REC_DEVICE_FREE; break;
    case PL_ALLOC_EV_SEGMENT_MAP: type = PL_REC_DEVICE_MAP; break;
    case PL_ALLOC_EV_SEGMENT_UNMAP: type = PL_REC_DEVICE_UNMAP; break;
    case PL_ALLOC_EV_OOM: type = PL_REC_DEVICE_OOM; break;
    default: return;
    }
    PL_GUARD_SCOPE();
    pl_trace_record_t r = {.type = type, .t_ns = pl_now_ns()};
    r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_ALLOCATOR, .device = ev->device, .pool = (uint32_t)ev->pool,
                                   .allocator_id = (uint32_t)(uintptr_t)ctx, .addr = ev->addr,
                                   .size = ev->size_bytes, .requested = ev->requested_bytes,
                                   .stream = (uint64_t)ev->stream, .tid = pl_tid()};
    if ((type == PL_REC_DEVICE_ALLOC || type == PL_REC_DEVICE_OOM) && pl_g.opt.device_stacks)
        r.u.device.stack_id = pl_stack_capture();
    pl_emit(&r);
}

/* One PL_REC_ALLOC_STATS for allocator id (index + 1); mu held. */
static void emit_stats_locked(uint32_t i, uint64_t step) {
    pl_alloc_t *a = dev.live[i];
    if (!a || !dev.get_stats) return;
    pl_alloc_stats_t s;
    memset(&s, 0, sizeof s);
    dev.get_stats(a, &s);
    pl_trace_record_t r = {.type = PL_REC_ALLOC_STATS, .t_ns = pl_now_ns()};
    r.u.alloc_stats = (pl_rec_alloc_stats_t){
        .allocator_id = i + 1, .device = 0, .step = step,
        .allocated_bytes = s.allocated_bytes[PL_POOL_ALL].current,
        .allocated_bytes_peak = s.allocated_bytes[PL_POOL_ALL].peak,
        .reserved_bytes = s.reserved_bytes[PL_POOL_ALL].current,
        .reserved_bytes_peak = s.reserved_bytes[PL_POOL_ALL].peak,
        .active_bytes = s.active_bytes[PL_POOL_ALL].current,
        .inactive_split_bytes = s.inactive_split_bytes[PL_POOL_ALL].current,
        .requested_bytes = s.requested_bytes[PL_POOL_ALL].current,
        .n_allocations = s.allocation[PL_POOL_ALL].current, .n_segments = s.segment[PL_POOL_ALL].current,
        .num_alloc_retries = s.num_alloc_retries, .num_ooms = s.num_ooms,
        .num_device_alloc = s.num_device_alloc, .num_device_free = s.num_device_free,
        .largest_free_bytes = s.largest_free_bytes, .capacity_bytes = s.capacity_bytes,
        .fragmentation = s.fragmentation};
    pl_emit(&r);
}

PL_EXPORT void plateau_alloc_observer(pl_alloc_t *a, bool created) {
    PL_GUARD_SCOPE();
    pthread_mutex_lock(&dev.mu);
    if (created) {
        if (!dev.set_hook) {
            void *h = dlsym(RTLD_DEFAULT, PL_ALLOC_SET_HOOK_SYMBOL);
            void *g = dlsym(RTLD_DEFAULT, PL_ALLOC_GET_STATS_SYMBOL);
            memcpy(&dev.set_hook, &h, sizeof h);
            memcpy(&dev.get_stats, &g, sizeof g);
        }
        if (dev.n_ids >= MAX_ALLOCATORS) {
            PL_WARN_ONCE("plateau: more than 64 allocators: device events of the rest are not recorded");
        } else if (!dev.set_hook) {
            PL_WARN_ONCE("plateau: pl_alloc_set_hook not found: device events are not recorded");
        } else {
            uint32_t id = ++dev.n_ids; /* ids are never reused within a trace */
            dev.live[id - 1] = a;
            dev.set_hook(a, on_event, (void *)(uintptr_t)id);
        }
    } else {
        for (uint32_t i = 0; i < dev.n_ids; i++)
            if (dev.live[i] == a) {
                /* step 0 = "between markers": the final snapshot belongs to the partial step after the last
                 * marker, not to the last completed step (whose per-step minimum it would otherwise drag to 0) */
                if (atomic_load(&pl_g.active)) emit_stats_locked(i, 0);
                dev.live[i] = NULL;
            }
    }
    pthread_mutex_unlock(&dev.mu);
}

void pl_device_emit_stats(uint64_t step) {
    pthread_mutex_lock(&dev.mu);
    for (uint32_t i = 0; i < dev.n_ids; i++) emit_stats_locked(i, step);
    pthread_mutex_unlock(&dev.mu);
}

void pl_device_fork_prepare(void) { pthread_mutex_lock(&dev.mu); }
void pl_device_fork_parent(void) { pthread_mutex_unlock(&dev.mu); }
void pl_device_fork_child(void) { pthread_mutex_init(&dev.mu, NULL); }
