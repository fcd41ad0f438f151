/* Device interception: CUDA driver and runtime allocations seen from LD_PRELOAD (built only with CUDA headers).
 *
 * Three routes lead a program to the driver's allocation entry points, and all three are covered:
 *  - dlsym: the runtime dlopens libcuda.so.1 and asks dlsym(handle, "cuGetProcAddress_v2"). `dlsym` is interposed
 *    by a small trampoline (dlsym_trampoline.h: x86-64 and aarch64) that asks pl_cuda_dlsym_hot whether the name
 *    is one we wrap; if not it jumps (tail call, return address untouched) to the real dlsym, so RTLD_NEXT keeps
 *    meaning "after the caller". Other architectures export no dlsym: that route is not seen there.
 *  - cuGetProcAddress / cuGetProcAddress_v2 (and the pointer to themselves that they hand out): every look-up of an
 *    allocation entry point is answered with our wrapper for that exact name, ABI version and stream variant.
 *  - plain interposition: the preload exports the driver names (cuMemAlloc_v2 ...) and the runtime's cudaMalloc
 *    family, resolving the real ones with dlsym(RTLD_NEXT), else in the calling object's own scope (a plugin
 *    loaded RTLD_LOCAL that links libcudart / libcuda).
 * Invariants: one slot per exported symbol (name + ABI + _ptsz variant) holding the real pointer; a pointer inside
 * this library's own code is never stored as real (no recursion); a slot's first real pointer wins. A thread-local
 * depth makes a cudaMalloc and the cuMemAlloc it makes count once (runtime record only).
 * Records: plain allocations -> PL_REC_DEVICE_ALLOC/FREE, cuMemMap/cuMemUnmap -> DEVICE_MAP/UNMAP, a failure with
 * OUT_OF_MEMORY -> DEVICE_OOM; cuMemCreate/Release/AddressReserve are wrapped and counted only (no address-visible
 * memory of their own). Device used memory: read with cuMemGetInfo_v2 on the program's thread right after each of
 * its successful device calls (never before the program initialised the driver; we never call cuInit), copied into
 * every RSS record by pl_cuda_sample.
 * cuInit is wrapped for one reason: once the program's cuInit succeeded, the CUPTI source may start (cupti.c).
 * Failure policy: one line on stderr and the feature off; the calls are always forwarded. */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "cuda_hooks.h"
#include "preload.h"
#include "ring.h"
#if PL_HAVE_CUPTI
#include "cupti_record.h"
#endif

#define PL_HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------------ slots */

enum { PL_CUDA_DRIVER_HOOKS(PL_CUDA_DRV_ENUM_) S_N };

typedef struct slot_info {
    const char *sym;   /* exported symbol of this ABI */
    const char *base;  /* name given to cuGetProcAddress */
    int min_version;   /* oldest cudaVersion returning this ABI */
    int max_version;   /* newest cudaVersion we know returns it */
    bool ptsz;         /* the per-thread-default-stream variant */
} slot_info_t;

static const slot_info_t slot_info[S_N] = {PL_CUDA_DRIVER_HOOKS(PL_CUDA_DRV_INFO_)};

/* The real functions' types (FN_fn) and the wrappers' prototypes, bound to the exported symbols. */
PL_CUDA_DRIVER_HOOKS(PL_CUDA_DRV_TYPE_)
PL_CUDA_DRIVER_HOOKS(PL_CUDA_DRV_PROTO_)

typedef void *(*dlsym_fn)(void *, const char *);
typedef CUresult (*mem_get_info_fn)(size_t *, size_t *);
typedef CUresult (*ctx_get_fn)(CUcontext *);
typedef CUresult (*ctx_device_fn)(CUdevice *);

/* Read by the trampoline: hidden, so the asm reaches them without the GOT. */
PL_HIDDEN dlsym_fn pl_cuda_real_dlsym;

static struct {
    _Atomic(void *) real[S_N];
    atomic_uint_fast64_t n_wrapped[S_N];   /* pointers to our wrapper handed out, per slot */
    atomic_uint_fast64_t n_dlsym_hooked;   /* dlsym calls for a wrapped name */
    atomic_uint_fast64_t n_gpa_lookups;    /* look-ups through our cuGetProcAddress wrappers */
    atomic_uint_fast64_t n_refused;        /* real pointers not stored (our own code, or a second distinct one) */
    atomic_uint_fast64_t n_records;
    atomic_uint_fast64_t n_samples;
    int debug;                             /* PLATEAU_DEBUG_CUDA: 1 summary at exit, 2 also every look-up */
    /* device memory sampling */
    atomic_int sample_state;               /* 0 not tried, 1 resolving, 2 ready, -1 off */
    mem_get_info_fn mem_get_info;
    ctx_get_fn ctx_get;
    ctx_device_fn ctx_device;              /* optional */
    atomic_uint_fast64_t dev_used, dev_total; /* latest sample; total 0 = none yet */
} cu;

static PL_TLS int tl_depth;     /* > 0 inside a runtime wrapper: its driver calls are not recorded again */
static PL_TLS int32_t tl_device; /* device of this thread's current context at its last device call, -1 unknown */

typedef void (*any_fn)(void);
static const any_fn wrapper_fns[S_N] = {PL_CUDA_DRIVER_HOOKS(PL_CUDA_DRV_WRAPPER_)};

static void *wrapper(int s) {
    void *p;
    memcpy(&p, &wrapper_fns[s], sizeof p);
    return p;
}

static void *real_of(int s) { return atomic_load_explicit(&cu.real[s], memory_order_acquire); }

/* A warning is a note (plateau's own channel, note.c); PLATEAU_DEBUG_CUDA's lines, asked for, go to stderr. */
static void warn_line(const char *msg) { pl_note(msg); }

static void debug_line(const char *msg) {
    (void)!write(2, msg, strlen(msg));
    (void)!write(2, "\n", 1);
}

static bool in_self(const void *p) {
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (a >= pl_g.text_lo && a < pl_g.text_hi) return true;
    for (int i = 0; i < S_N; i++)
        if (p == wrapper(i)) return true;
    return false;
}

static void resolve_dlsym(void) {
    if (pl_cuda_real_dlsym) return;
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    memcpy(&pl_cuda_real_dlsym, &p, sizeof p);
}

/* Store p as the real function of slot s. False when p is ours or differs from the one already stored. */
static bool set_real(int s, void *p) {
    if (!p) return false;
    if (in_self(p)) {
        atomic_fetch_add(&cu.n_refused, 1);
        return false;
    }
    void *expected = NULL;
    if (atomic_compare_exchange_strong(&cu.real[s], &expected, p) || expected == p) return true;
    atomic_fetch_add(&cu.n_refused, 1);
    return false;
}

/* `name` as the calling object sees it without us: a library loaded with RTLD_LOCAL (a Python extension linking
 * libcudart or libcuda) binds its reference to our export, while the real definition sits in its own local scope,
 * which RTLD_NEXT from here does not search. A glibc handle is the object's link_map: dlsym on it searches the
 * object and its dependencies only. NULL when not found or when the answer is our own code. */
static void *lookup_from_caller(const void *caller, const char *name) {
    Dl_info info;
    void *lm = NULL;
    if (!caller || !pl_cuda_real_dlsym || !dladdr1(caller, &info, &lm, RTLD_DL_LINKMAP) || !lm) return NULL;
    void *p = pl_cuda_real_dlsym(lm, name);
    return p && !in_self(p) ? p : NULL;
}

/* Real function of slot s for our exported symbol called from `caller` (plain interposition): after this
 * library in the global scope, else in the caller's own scope. */
static void *get_real(int s, const void *caller) {
    void *p = atomic_load_explicit(&cu.real[s], memory_order_acquire);
    if (p) return p;
    resolve_dlsym();
    if (pl_cuda_real_dlsym) set_real(s, pl_cuda_real_dlsym(RTLD_NEXT, slot_info[s].sym));
    if (!atomic_load(&cu.real[s])) set_real(s, lookup_from_caller(caller, slot_info[s].sym));
    p = atomic_load(&cu.real[s]);
    if (!p) PL_WARN_ONCE("plateau: a CUDA driver entry point was called but the real one cannot be found");
    return p;
}

static int slot_by_sym(const char *name) {
    if (!name || name[0] != 'c' || name[1] != 'u' || (name[2] != 'M' && name[2] != 'G' && name[2] != 'I')) return -1;
    for (int i = 0; i < S_N; i++)
        if (!strcmp(slot_info[i].sym, name)) return i;
    return -1;
}

static int slot_by_proc(const char *base, int version, cuuint64_t flags) {
    if (!base || base[0] != 'c' || base[1] != 'u') return -1;
    bool ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int found = -1;
    for (int i = 0; i < S_N; i++) {
        const slot_info_t *si = &slot_info[i];
        if (strcmp(si->base, base) || version < si->min_version || version > si->max_version) continue;
        if (si->ptsz == ptsz) return i;
        if (!si->ptsz) found = i; /* no _ptsz variant of this name: the driver returns the legacy one */
    }
    return found;
}

/* A pointer the driver handed out for (base, version, flags): our wrapper when we know its ABI. */
static void *wrap_proc(const char *base, void *real, int version, cuuint64_t flags) {
    atomic_fetch_add(&cu.n_gpa_lookups, 1);
    int s = slot_by_proc(base, version, flags);
    bool wrapped = s >= 0 && set_real(s, real);
    if (cu.debug > 1) {
        char line[256];
        snprintf(line, sizeof line, "plateau cuda: cuGetProcAddress(%s, %d, %#llx) -> %s", base, version,
                 (unsigned long long)flags, wrapped ? slot_info[s].sym : "not wrapped");
        debug_line(line);
    }
    if (!wrapped) return real;
    atomic_fetch_add(&cu.n_wrapped[s], 1);
    return wrapper(s);
}

/* ------------------------------------------------------------------ dlsym */

/* Called by the trampoline: nonzero when the name is one of ours and the slow path must handle it. */
PL_HIDDEN int pl_cuda_dlsym_hot(void *handle, const char *name) {
    (void)handle;
    resolve_dlsym();
    return pl_cuda_real_dlsym ? slot_by_sym(name) >= 0 : 1;
}

/* Reached by a tail jump, so the caller's return address is ours to read (unused: for RTLD_NEXT the search
 * starts after this library, which for the names handled here means the driver). */
PL_HIDDEN void *pl_cuda_dlsym_slow(void *handle, const char *name) {
    resolve_dlsym();
    if (!pl_cuda_real_dlsym) return NULL;
    void *p = pl_cuda_real_dlsym(handle, name);
    int s = slot_by_sym(name);
    if (s < 0 || !p) return p;
    atomic_fetch_add(&cu.n_dlsym_hooked, 1);
    if (!set_real(s, p)) return p;
    atomic_fetch_add(&cu.n_wrapped[s], 1);
    return wrapper(s);
}

#include "dlsym_trampoline.h"

/* ------------------------------------------------------------------ live sizes (frees carry the allocated size) */

#define LIVE_CAP 65536u /* power of two */
static struct {
    pthread_mutex_t mu;
    uint64_t addr[LIVE_CAP], size[LIVE_CAP]; /* addr 0 = empty, 1 = tombstone */
    uint32_t n_used;
    bool full_warned;
} live = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint32_t live_hash(uint64_t a) { return (uint32_t)((a * 0x9E3779B97F4A7C15ull) >> 48) & (LIVE_CAP - 1); }

static void live_put(uint64_t a, uint64_t size) {
    if (a <= 1) return;
    pthread_mutex_lock(&live.mu);
    if (live.n_used < LIVE_CAP / 4 * 3) {
        uint32_t i = live_hash(a), tomb = UINT32_MAX;
        while (live.addr[i] && live.addr[i] != a) {
            if (live.addr[i] == 1 && tomb == UINT32_MAX) tomb = i;
            i = (i + 1) & (LIVE_CAP - 1);
        }
        if (live.addr[i] != a) {
            if (tomb != UINT32_MAX) i = tomb;
            else live.n_used++;
        }
        live.addr[i] = a;
        live.size[i] = size;
    } else if (!live.full_warned) {
        live.full_warned = true;
        warn_line("plateau: more than 49152 live device allocations: later frees are recorded without a size");
    }
    pthread_mutex_unlock(&live.mu);
}

static uint64_t live_take(uint64_t a) {
    if (a <= 1) return 0;
    uint64_t size = 0;
    pthread_mutex_lock(&live.mu);
    for (uint32_t i = live_hash(a), n = 0; live.addr[i] && n < LIVE_CAP; i = (i + 1) & (LIVE_CAP - 1), n++)
        if (live.addr[i] == a) {
            size = live.size[i];
            live.addr[i] = 1;
            break;
        }
    pthread_mutex_unlock(&live.mu);
    return size;
}

/* ------------------------------------------------------------------ records */

static void emit_dev(pl_rec_type_t type, pl_device_source_t source, int32_t device, uint64_t addr, uint64_t size,
                     uint64_t stream) {
    if (pl_tl_guard > 0 || !atomic_load_explicit(&pl_g.active, memory_order_relaxed)) return;
    PL_GUARD_SCOPE();
    pl_trace_record_t r = {.type = type, .t_ns = pl_now_ns()};
    r.u.device = (pl_rec_device_t){.source = source, .device = device, .addr = addr, .size = size,
                                   .requested = size, .stream = stream, .tid = pl_tid()};
    if ((type == PL_REC_DEVICE_ALLOC || type == PL_REC_DEVICE_MAP || type == PL_REC_DEVICE_OOM) &&
        pl_g.opt.device_stacks) /* a mapping is what an expandable segment grows by: the device sites count it */
        r.u.device.stack_id = pl_stack_capture();
    pl_emit(&r);
    atomic_fetch_add(&cu.n_records, 1);
}

/* Device used memory, read on the program's own thread right after one of its driver calls changed it (a
 * successful allocation, free, map or unmap), with the context that thread has current: the sampler thread has
 * none, and borrowing the program's context there could touch a context the program has destroyed. The sampler
 * copies the latest value into each RSS record (so a value is as old as the last device call). cuMemGetInfo_v2 and
 * cuCtxGetCurrent come from the same library as the real allocation function. */
static void sample_device(const void *real_fn) {
    int st = atomic_load_explicit(&cu.sample_state, memory_order_acquire);
    if (st == 0 && atomic_compare_exchange_strong(&cu.sample_state, &st, 1)) {
        Dl_info info;
        void *h = NULL;
        if (dladdr(real_fn, &info) && info.dli_fname) h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        void *a = h ? dlsym(h, "cuMemGetInfo_v2") : NULL, *b = h ? dlsym(h, "cuCtxGetCurrent") : NULL,
             *c = h ? dlsym(h, "cuCtxGetDevice") : NULL;
        if (a && b) {
            memcpy(&cu.mem_get_info, &a, sizeof a);
            memcpy(&cu.ctx_get, &b, sizeof b);
            memcpy(&cu.ctx_device, &c, sizeof c);
            atomic_store(&cu.sample_state, 2);
        } else {
            warn_line("plateau: cuMemGetInfo_v2 not found in the CUDA driver: device used memory is not sampled");
            atomic_store(&cu.sample_state, -1);
        }
        st = atomic_load(&cu.sample_state);
    }
    tl_device = -1;
    if (st != 2 || pl_tl_guard > 0) return;
    CUcontext ctx = NULL;
    size_t free_bytes = 0, total_bytes = 0;
    if (cu.ctx_get(&ctx) != CUDA_SUCCESS || !ctx) return;
    CUdevice dev = -1;
    if (cu.ctx_device && cu.ctx_device(&dev) == CUDA_SUCCESS) tl_device = (int32_t)dev;
    if (cu.mem_get_info(&free_bytes, &total_bytes) != CUDA_SUCCESS || total_bytes < free_bytes) return;
    atomic_store(&cu.dev_total, (uint64_t)total_bytes);
    atomic_store(&cu.dev_used, (uint64_t)(total_bytes - free_bytes));
    pl_ring_hdr_t *ring = pl_g.ring;
    if (ring) { /* ring mode: the collector copies it into its RSS samples */
        atomic_store(&ring->device_used, (uint64_t)(total_bytes - free_bytes));
        atomic_store(&ring->device_total, (uint64_t)total_bytes);
    }
    atomic_fetch_add(&cu.n_samples, 1);
}

void pl_cuda_sample(pl_rec_rss_t *out) {
    uint64_t total = atomic_load(&cu.dev_total);
    if (!total) return;
    out->device_used = atomic_load(&cu.dev_used);
    out->device_total = total;
}

/* ------------------------------------------------------------------ driver wrappers */

#define REAL(s, type, var)                                                                                     \
    type var;                                                                                                  \
    {                                                                                                          \
        void *p_ = get_real(s, __builtin_return_address(0));                                                   \
        if (!p_) return CUDA_ERROR_NOT_FOUND;                                                                  \
        memcpy(&var, &p_, sizeof p_);                                                                          \
    }


/* host: pinned host memory (cuMemHostAlloc, cuMemAllocHost_v2), recorded with device -1. */
static void after_alloc_at(CUresult rc, const void *real, uint64_t addr, size_t size, CUstream stream, bool host) {
    if (rc == CUDA_SUCCESS && addr) {
        sample_device(real);
        if (tl_depth) return;
        live_put(addr, size);
        emit_dev(PL_REC_DEVICE_ALLOC, PL_DEV_SRC_DRIVER, host ? -1 : tl_device, addr, size,
                 (uint64_t)(uintptr_t)stream);
    } else if (rc == CUDA_ERROR_OUT_OF_MEMORY && !tl_depth) {
        emit_dev(PL_REC_DEVICE_OOM, PL_DEV_SRC_DRIVER, -1, 0, size, (uint64_t)(uintptr_t)stream);
    }
}

static void after_alloc(CUresult rc, const void *real, CUdeviceptr *dptr, size_t size, CUstream stream) {
    after_alloc_at(rc, real, rc == CUDA_SUCCESS && dptr ? (uint64_t)*dptr : 0, size, stream, false);
}

/* Frees. The record of a free must precede the record of the next allocation that reuses the address, and once
 * the real free returns another thread may get the address back and record its allocation first. So a free of a
 * known live block takes its size from the table and is recorded *before* the real call; if the call then fails
 * the block is still live: it goes back into the table with a compensating alloc record. A free of an address we
 * never saw allocated is recorded after a successful call, with size 0. */
typedef struct {
    uint64_t size; /* 0 = not a block we saw allocated */
    uint64_t addr, stream;
    int32_t device;
    pl_device_source_t source;
} pending_free_t;

static pending_free_t before_free(pl_device_source_t source, int32_t device, uint64_t addr, uint64_t stream) {
    pending_free_t f = {.addr = addr, .stream = stream, .device = device, .source = source};
    if (!addr) return f;
    f.size = live_take(addr);
    if (f.size) emit_dev(PL_REC_DEVICE_FREE, source, device, addr, f.size, stream);
    return f;
}

static void after_free_call(bool ok, const pending_free_t *f) {
    if (!f->addr) return;
    if (ok && !f->size) {
        emit_dev(PL_REC_DEVICE_FREE, f->source, f->device, f->addr, 0, f->stream);
    } else if (!ok && f->size) {
        live_put(f->addr, f->size);
        emit_dev(PL_REC_DEVICE_ALLOC, f->source, f->device, f->addr, f->size, f->stream);
    }
}

/* Driver frees inside a runtime call (tl_depth) are the runtime wrapper's business. */
#define DRIVER_FREE(slot, p, stream, call)                                                                     \
    pending_free_t f_ = {0};                                                                                   \
    if (!tl_depth) f_ = before_free(PL_DEV_SRC_DRIVER, tl_device, (uint64_t)(p), (uint64_t)(uintptr_t)(stream)); \
    CUresult rc = call;                                                                                        \
    if (rc == CUDA_SUCCESS) sample_device(real_of(slot));                                                      \
    if (!tl_depth) after_free_call(rc == CUDA_SUCCESS, &f_);                                                   \
    return rc

#define DRV(name) PL_EXPORT CUresult pl_cu_##name

DRV(alloc)(CUdeviceptr *dptr, size_t size) {
    REAL(S_ALLOC, alloc_fn, real);
    CUresult rc = real(dptr, size);
    after_alloc(rc, real_of(S_ALLOC), dptr, size, NULL);
    return rc;
}

DRV(free)(CUdeviceptr p) {
    REAL(S_FREE, free_fn, real);
    DRIVER_FREE(S_FREE, p, NULL, real(p));
}

DRV(managed)(CUdeviceptr *dptr, size_t size, unsigned int flags) {
    REAL(S_MANAGED, managed_fn, real);
    CUresult rc = real(dptr, size, flags);
    after_alloc(rc, real_of(S_MANAGED), dptr, size, NULL);
    return rc;
}

#define ALLOC_ASYNC(fname, slot)                                                                               \
    DRV(fname)(CUdeviceptr * dptr, size_t size, CUstream stream) {                                             \
        REAL(slot, fname##_fn, real);                                                                      \
        CUresult rc = real(dptr, size, stream);                                                                \
        after_alloc(rc, real_of(slot), dptr, size, stream);                                      \
        return rc;                                                                                             \
    }
ALLOC_ASYNC(alloc_async, S_ALLOC_ASYNC)
ALLOC_ASYNC(alloc_async_ptsz, S_ALLOC_ASYNC_PTSZ)

#define FREE_ASYNC(fname, slot)                                                                                \
    DRV(fname)(CUdeviceptr p, CUstream stream) {                                                               \
        REAL(slot, fname##_fn, real);                                                                       \
        DRIVER_FREE(slot, p, stream, real(p, stream));                                                         \
    }
FREE_ASYNC(free_async, S_FREE_ASYNC)
FREE_ASYNC(free_async_ptsz, S_FREE_ASYNC_PTSZ)

#define POOL_ASYNC(fname, slot)                                                                                \
    DRV(fname)(CUdeviceptr * dptr, size_t size, CUmemoryPool pool, CUstream stream) {                          \
        REAL(slot, fname##_fn, real);                                                                       \
        CUresult rc = real(dptr, size, pool, stream);                                                          \
        after_alloc(rc, real_of(slot), dptr, size, stream);                                      \
        return rc;                                                                                             \
    }
POOL_ASYNC(pool_async, S_POOL_ASYNC)
POOL_ASYNC(pool_async_ptsz, S_POOL_ASYNC_PTSZ)

/* Pitched 2D: the block is pitch * height bytes (the pitch is the driver's answer). */
DRV(alloc_pitch)(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int elem) {
    REAL(S_ALLOC_PITCH, alloc_pitch_fn, real);
    CUresult rc = real(dptr, pitch, width, height, elem);
    size_t size = rc == CUDA_SUCCESS && pitch ? *pitch * height : width * height;
    after_alloc(rc, real_of(S_ALLOC_PITCH), dptr, size, NULL);
    return rc;
}

DRV(host_alloc)(void **pp, size_t size, unsigned int flags) {
    REAL(S_HOST_ALLOC, host_alloc_fn, real);
    CUresult rc = real(pp, size, flags);
    after_alloc_at(rc, real_of(S_HOST_ALLOC), rc == CUDA_SUCCESS && pp ? (uint64_t)(uintptr_t)*pp : 0, size, NULL,
                   true);
    return rc;
}

DRV(alloc_host)(void **pp, size_t size) {
    REAL(S_ALLOC_HOST, alloc_host_fn, real);
    CUresult rc = real(pp, size);
    after_alloc_at(rc, real_of(S_ALLOC_HOST), rc == CUDA_SUCCESS && pp ? (uint64_t)(uintptr_t)*pp : 0, size, NULL,
                   true);
    return rc;
}

DRV(free_host)(void *p) {
    REAL(S_FREE_HOST, free_host_fn, real);
    pending_free_t f_ = {0};
    if (!tl_depth) f_ = before_free(PL_DEV_SRC_DRIVER, -1, (uint64_t)(uintptr_t)p, 0);
    CUresult rc = real(p);
    if (!tl_depth) after_free_call(rc == CUDA_SUCCESS, &f_);
    return rc;
}

DRV(create)(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
            unsigned long long flags) {
    REAL(S_CREATE, create_fn, real);
    CUresult rc = real(h, size, prop, flags);
    if (rc == CUDA_SUCCESS) sample_device(real_of(S_CREATE));
    else if (rc == CUDA_ERROR_OUT_OF_MEMORY && !tl_depth)
        emit_dev(PL_REC_DEVICE_OOM, PL_DEV_SRC_DRIVER, prop ? prop->location.id : -1, 0, size, 0);
    return rc;
}

DRV(release)(CUmemGenericAllocationHandle h) {
    REAL(S_RELEASE, release_fn, real);
    return real(h);
}

DRV(map)(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long flags) {
    REAL(S_MAP, map_fn, real);
    CUresult rc = real(p, size, offset, h, flags);
    if (rc == CUDA_SUCCESS) {
        sample_device(real_of(S_MAP));
        if (!tl_depth) emit_dev(PL_REC_DEVICE_MAP, PL_DEV_SRC_DRIVER, tl_device, (uint64_t)p, size, 0);
    }
    return rc;
}

DRV(unmap)(CUdeviceptr p, size_t size) {
    REAL(S_UNMAP, unmap_fn, real);
    CUresult rc = real(p, size);
    if (rc != CUDA_SUCCESS) return rc;
    sample_device(real_of(S_UNMAP));
    if (!tl_depth) emit_dev(PL_REC_DEVICE_UNMAP, PL_DEV_SRC_DRIVER, tl_device, (uint64_t)p, size, 0);
    return rc;
}

DRV(reserve)(CUdeviceptr *p, size_t size, size_t alignment, CUdeviceptr hint, unsigned long long flags) {
    REAL(S_RESERVE, reserve_fn, real);
    return real(p, size, alignment, hint, flags);
}

/* cuInit: the program has initialised CUDA, the point where the CUPTI source may start (cupti.c). */
DRV(init)(unsigned int flags) {
    REAL(S_INIT, init_fn, real);
    CUresult rc = real(flags);
#if PL_HAVE_CUPTI
    if (rc == CUDA_SUCCESS) pl_cupti_on_cuda_init();
#endif
    return rc;
}

/* cuGetProcAddress: the result is wrapped, including the driver's pointer to cuGetProcAddress itself. */
DRV(gpa)(const char *sym, void **pfn, int version, cuuint64_t flags) {
    REAL(S_GPA, gpa_fn, real);
    CUresult rc = real(sym, pfn, version, flags);
    if (rc == CUDA_SUCCESS && pfn && *pfn) *pfn = wrap_proc(sym, *pfn, version, flags);
    return rc;
}

DRV(gpa_v2)(const char *sym, void **pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
    REAL(S_GPA_V2, gpa_v2_fn, real);
    CUresult rc = real(sym, pfn, version, flags, status);
    if (rc == CUDA_SUCCESS && pfn && *pfn) *pfn = wrap_proc(sym, *pfn, version, flags);
    return rc;
}

/* ------------------------------------------------------------------ runtime wrappers (libcudart linked dynamically) */

/* cudaMalloc3D(struct cudaPitchedPtr *, struct cudaExtent) without the runtime's headers (they would clash with
 * the int-returning declarations below): the same layouts. */
typedef struct { void *ptr; size_t pitch, xsize, ysize; } rt_pitched_ptr_t;
typedef struct { size_t width, height, depth; } rt_extent_t;

enum { PL_CUDA_RUNTIME_HOOKS(PL_CUDA_RT_ENUM_) R_N };
static const char *const rt_names[R_N] = {PL_CUDA_RUNTIME_HOOKS(PL_CUDA_RT_NAME_)};
PL_CUDA_RUNTIME_HOOKS(PL_CUDA_RT_TYPE_)
PL_CUDA_RUNTIME_HOOKS(PL_CUDA_RT_PROTO_)
static _Atomic(void *) rt_real[R_N];        /* found in the global scope: the same for every caller */

/* Found in a caller's local scope (RTLD_LOCAL plugins): per call site, since two plugins may bundle different
 * runtimes. A site is published after its function, so a reader that matches a site sees the function. */
#define RT_SITES 32
static struct {
    _Atomic(const void *) site;
    _Atomic(void *) fn;
} rt_sites[R_N][RT_SITES];

#define CUDA_ERROR_MEMORY_ALLOCATION 2 /* cudaErrorMemoryAllocation */
#define CUDA_ERROR_UNKNOWN_RT 999      /* cudaErrorUnknown */

static void *rt_get(int r, const void *caller) {
    void *p = atomic_load_explicit(&rt_real[r], memory_order_acquire);
    if (p) return p;
    for (int i = 0; i < RT_SITES; i++) {
        const void *site = atomic_load_explicit(&rt_sites[r][i].site, memory_order_acquire);
        if (!site) break;
        if (site == caller) return atomic_load_explicit(&rt_sites[r][i].fn, memory_order_relaxed);
    }
    resolve_dlsym();
    p = pl_cuda_real_dlsym ? pl_cuda_real_dlsym(RTLD_NEXT, rt_names[r]) : NULL;
    if (p && in_self(p)) p = NULL;
    if (p) {
        atomic_store(&rt_real[r], p);
        return p;
    }
    p = lookup_from_caller(caller, rt_names[r]);
    if (!p) {
        PL_WARN_ONCE("plateau: a CUDA runtime function was called but the real one cannot be found");
        return NULL;
    }
    /* Remember it for this call site when a slot is free (else just look it up again next time). */
    for (int i = 0; i < RT_SITES; i++) {
        void *empty_fn = NULL;
        if (atomic_compare_exchange_strong(&rt_sites[r][i].fn, &empty_fn, p)) {
            atomic_store_explicit(&rt_sites[r][i].site, caller, memory_order_release);
            break;
        }
    }
    return p;
}

/* The real `name` for this caller into `var` (its type rt_name_fn), or return cudaErrorUnknown. */
#define RT_REAL(name, var)                                                                                     \
    rt_##name##_fn var;                                                                                        \
    {                                                                                                          \
        void *p_ = rt_get(R_##name, __builtin_return_address(0));                                             \
        if (!p_) return CUDA_ERROR_UNKNOWN_RT;                                                                 \
        memcpy(&var, &p_, sizeof p_);                                                                          \
    }

/* host != 0: pinned host memory (cudaMallocHost / cudaHostAlloc), recorded with device -1; otherwise the device
 * the inner driver call found current (-1 when unknown). */
static void rt_after_alloc(int rc, void **ptr, size_t size, void *stream, int host) {
    int32_t device = host ? -1 : tl_device;
    if (rc == 0 && ptr && *ptr) {
        live_put((uint64_t)(uintptr_t)*ptr, size);
        emit_dev(PL_REC_DEVICE_ALLOC, PL_DEV_SRC_RUNTIME, device, (uint64_t)(uintptr_t)*ptr, size,
                 (uint64_t)(uintptr_t)stream);
    } else if (rc == CUDA_ERROR_MEMORY_ALLOCATION) {
        emit_dev(PL_REC_DEVICE_OOM, PL_DEV_SRC_RUNTIME, device, 0, size, (uint64_t)(uintptr_t)stream);
    }
}


PL_EXPORT int cudaMalloc(void **ptr, size_t size) {
    RT_REAL(cudaMalloc, real);
    tl_device = -1;
    tl_depth++;
    int rc = real(ptr, size);
    tl_depth--;
    rt_after_alloc(rc, ptr, size, NULL, 0);
    return rc;
}

PL_EXPORT int cudaFree(void *p) {
    RT_REAL(cudaFree, real);
    /* the device of this thread's last device call (pinned host memory: -1) */
    pending_free_t f = before_free(PL_DEV_SRC_RUNTIME, tl_device, (uint64_t)(uintptr_t)p, 0);
    tl_depth++;
    int rc = real(p);
    tl_depth--;
    after_free_call(rc == 0, &f);
    return rc;
}

/* cudaMallocAsync / cudaFreeAsync and their per-thread-default-stream variants (nvcc --default-stream
 * per-thread renames the calls to the _ptsz ones), and cudaMallocFromPoolAsync[_ptsz]. */
#define RT_MALLOC_ASYNC(name)                                                                                  \
    PL_EXPORT int name(void **ptr, size_t size, void *stream) {                                                \
        RT_REAL(name, real);                                                                                   \
        tl_device = -1;                                                                                        \
        tl_depth++;                                                                                            \
        int rc = real(ptr, size, stream);                                                                      \
        tl_depth--;                                                                                            \
        rt_after_alloc(rc, ptr, size, stream, 0);                                                              \
        return rc;                                                                                             \
    }
RT_MALLOC_ASYNC(cudaMallocAsync)
RT_MALLOC_ASYNC(cudaMallocAsync_ptsz)

#define RT_FREE_ASYNC(name)                                                                                    \
    PL_EXPORT int name(void *p, void *stream) {                                                                \
        RT_REAL(name, real);                                                                                   \
        pending_free_t f = before_free(PL_DEV_SRC_RUNTIME, tl_device, (uint64_t)(uintptr_t)p,                  \
                                       (uint64_t)(uintptr_t)stream);                                           \
        tl_depth++;                                                                                            \
        int rc = real(p, stream);                                                                              \
        tl_depth--;                                                                                            \
        after_free_call(rc == 0, &f);                                                                          \
        return rc;                                                                                             \
    }
RT_FREE_ASYNC(cudaFreeAsync)
RT_FREE_ASYNC(cudaFreeAsync_ptsz)

#define RT_POOL_ASYNC(name)                                                                                    \
    PL_EXPORT int name(void **ptr, size_t size, void *pool, void *stream) {                                    \
        RT_REAL(name, real);                                                                                   \
        tl_device = -1;                                                                                        \
        tl_depth++;                                                                                            \
        int rc = real(ptr, size, pool, stream);                                                                \
        tl_depth--;                                                                                            \
        rt_after_alloc(rc, ptr, size, stream, 0);                                                              \
        return rc;                                                                                             \
    }
RT_POOL_ASYNC(cudaMallocFromPoolAsync)
RT_POOL_ASYNC(cudaMallocFromPoolAsync_ptsz)

/* Pitched 2D: pitch * height bytes, the pitch being the runtime's answer. */
PL_EXPORT int cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
    RT_REAL(cudaMallocPitch, real);
    tl_device = -1;
    tl_depth++;
    int rc = real(ptr, pitch, width, height);
    tl_depth--;
    rt_after_alloc(rc, ptr, rc == 0 && pitch ? *pitch * height : width * height, NULL, 0);
    return rc;
}

/* cudaMalloc3D: the block is pitch * height * depth bytes. */

PL_EXPORT int cudaMalloc3D(rt_pitched_ptr_t *out, rt_extent_t extent) {
    RT_REAL(cudaMalloc3D, real);
    tl_device = -1;
    tl_depth++;
    int rc = real(out, extent);
    tl_depth--;
    size_t rows = extent.height * (extent.depth ? extent.depth : 1);
    rt_after_alloc(rc, out ? &out->ptr : NULL, rc == 0 && out ? out->pitch * rows : extent.width * rows, NULL, 0);
    return rc;
}

PL_EXPORT int cudaMallocManaged(void **ptr, size_t size, unsigned int flags) {
    RT_REAL(cudaMallocManaged, real);
    tl_device = -1;
    tl_depth++;
    int rc = real(ptr, size, flags);
    tl_depth--;
    rt_after_alloc(rc, ptr, size, NULL, 0);
    return rc;
}

PL_EXPORT int cudaMallocHost(void **ptr, size_t size) {
    RT_REAL(cudaMallocHost, real);
    tl_device = -1;
    tl_depth++;
    int rc = real(ptr, size);
    tl_depth--;
    rt_after_alloc(rc, ptr, size, NULL, 1);
    return rc;
}

PL_EXPORT int cudaHostAlloc(void **ptr, size_t size, unsigned int flags) {
    RT_REAL(cudaHostAlloc, real);
    tl_device = -1;
    tl_depth++;
    int rc = real(ptr, size, flags);
    tl_depth--;
    rt_after_alloc(rc, ptr, size, NULL, 1);
    return rc;
}

PL_EXPORT int cudaFreeHost(void *p) {
    RT_REAL(cudaFreeHost, real);
    pending_free_t f = before_free(PL_DEV_SRC_RUNTIME, -1, /* pinned host memory */ (uint64_t)(uintptr_t)p, 0);
    tl_depth++;
    int rc = real(p);
    tl_depth--;
    after_free_call(rc == 0, &f);
    return rc;
}

/* ------------------------------------------------------------------ start and exit */

/* PLATEAU_DEBUG_CUDA=1: one summary line on stderr at exit (what the hooks saw and wrapped). */
static void cuda_at_exit(void) {
    char buf[2048];
    int n = snprintf(buf, sizeof buf,
                     "plateau cuda: dlsym_hooked=%llu gpa_lookups=%llu refused=%llu records=%llu samples=%llu "
                     "dlsym_trampoline=%d wrapped:",
                     (unsigned long long)cu.n_dlsym_hooked, (unsigned long long)cu.n_gpa_lookups,
                     (unsigned long long)cu.n_refused, (unsigned long long)cu.n_records,
                     (unsigned long long)cu.n_samples, PL_DLSYM_TRAMPOLINE);
    for (int i = 0; i < S_N && n > 0 && (size_t)n < sizeof buf; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " %s=%llu", slot_info[i].sym,
                      (unsigned long long)cu.n_wrapped[i]);
#if PL_HAVE_CUPTI
    if (n > 0 && (size_t)n < sizeof buf) n += pl_cupti_describe(buf + n, sizeof buf - (size_t)n);
#endif
    debug_line(buf);
}

static const char *env_get_const(const char *name) { return pl_env_get(name); }

/* A fork child inherits the table's lock in whatever state another thread left it. */
static void cuda_fork_child(void) { pthread_mutex_init(&live.mu, NULL); }

__attribute__((constructor)) static void pl_cuda_init(void) {
    pthread_atfork(NULL, NULL, cuda_fork_child);
    resolve_dlsym();
    if (!pl_cuda_real_dlsym) warn_line("plateau: the real dlsym cannot be found: CUDA look-ups are not wrapped");
    cu.debug = (int)pl_options_uint(env_get_const, warn_line, "PLATEAU_DEBUG_CUDA", 0, 2, 0);
    if (cu.debug) atexit(cuda_at_exit);
}
