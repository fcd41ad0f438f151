/* Host heap interposers: malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc, and anonymous mmap/mmap64/munmap.
 *
 * Exact totals: every call updates the calling thread's counter slot (owner-only plain atomic stores, no
 * locked instruction on the hot path); totals are the sum over slots. Sizes are usable sizes
 * (malloc_usable_size of the real allocator), identical at allocation and at free, so no pointer map is
 * needed for exact live bytes.
 * Sampling: Poisson by bytes (docs/trace-format.md). A sampled pointer goes into a set; free checks the set
 * lock-free (seqlock over a table that is only rebuilt, never resized in place) and emits host_free.
 * Re-entrancy: dlsym during bootstrap may allocate: served from a static buffer. While pl_tl_guard is raised
 * (inside the tracer, or in its own threads) calls are still counted but never sampled, and the tracer's own
 * mmaps are not counted. All tracer memory here is static or mmap'd. */
/* Both mmap and mmap64 are defined here: without this, glibc's headers rename mmap to mmap64. */
#undef _FILE_OFFSET_BITS
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

/* ------------------------------------------------------------------ real functions and bootstrap */

static struct {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*usable)(void *);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
} real;

static atomic_int resolve_state; /* 0 none, 1 in progress, 2 done */
static PL_TLS int tl_resolving;

static _Alignas(16) unsigned char boot_buf[256 * 1024];
static atomic_size_t boot_used;

static bool is_boot(const void *p) {
    return (const unsigned char *)p >= boot_buf && (const unsigned char *)p < boot_buf + sizeof boot_buf;
}

/* Bump allocation for dlsym's needs before the real allocator is known; never freed. Header = size. */
static void *boot_alloc(size_t n, size_t align) {
    if (align < 16) align = 16;
    size_t need = n + align + 16;
    size_t off = atomic_fetch_add(&boot_used, need);
    if (off + need > sizeof boot_buf) return NULL;
    uintptr_t p = ((uintptr_t)(boot_buf + off + 16) + align - 1) & ~(uintptr_t)(align - 1);
    memcpy((void *)(p - sizeof(size_t)), &n, sizeof n);
    return (void *)p;
}

static size_t boot_size(const void *p) {
    size_t n;
    memcpy(&n, (const unsigned char *)p - sizeof(size_t), sizeof n);
    return n;
}

/* dlsym returns an object pointer; copy it into the function pointer (ISO C has no cast between them). */
static void resolve_one(void *fn_ptr_out, const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    memcpy(fn_ptr_out, &p, sizeof p);
}
#define RESOLVE(name) resolve_one(&real.name, #name)

void pl_heap_resolve(void) {
    if (atomic_load_explicit(&resolve_state, memory_order_acquire) == 2) return;
    if (tl_resolving) return;
    int expect = 0;
    if (!atomic_compare_exchange_strong(&resolve_state, &expect, 1)) {
        while (atomic_load_explicit(&resolve_state, memory_order_acquire) != 2) sched_yield();
        return;
    }
    tl_resolving = 1;
    RESOLVE(malloc);
    RESOLVE(free);
    RESOLVE(calloc);
    RESOLVE(realloc);
    RESOLVE(posix_memalign);
    RESOLVE(aligned_alloc);
    RESOLVE(memalign);
    RESOLVE(valloc);
    RESOLVE(pvalloc);
    resolve_one(&real.usable, "malloc_usable_size");
    RESOLVE(mmap);
    RESOLVE(munmap);
    tl_resolving = 0;
    if (!real.malloc || !real.free || !real.calloc || !real.realloc || !real.usable || !real.mmap ||
        !real.munmap) {
        static const char msg[] = "plateau: cannot find the real allocator functions (dlsym); aborting\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(127); /* nothing could run without them */
    }
    atomic_store_explicit(&resolve_state, 2, memory_order_release);
}

static inline bool ready(void) {
    if (__builtin_expect(atomic_load_explicit(&resolve_state, memory_order_acquire) == 2, 1)) return true;
    pl_heap_resolve();
    return atomic_load_explicit(&resolve_state, memory_order_acquire) == 2;
}

/* ------------------------------------------------------------------ per-thread counter slots */

typedef struct {
    _Alignas(64) _Atomic int64_t live_bytes; /* own cache line per slot: no false sharing */
    _Atomic int64_t live_count, mmap_bytes, mmap_count;
    _Atomic uint64_t n_alloc, n_free, alloc_bytes;
    atomic_int in_use;
    int shared; /* the overflow slot: updated with atomic RMW */
} slot_t;

#define N_SLOTS 1024
static slot_t slots[N_SLOTS];
static slot_t shared_slot = {.shared = 1};
static PL_TLS slot_t *tl_slot;
static pthread_key_t slot_key;
static atomic_int slot_key_state; /* 0 none, 1 creating, 2 ready, 3 failed */

static void slot_release(void *p) {
    slot_t *s = p;
    tl_slot = &shared_slot; /* frees later in this thread's exit go to the shared slot */
    atomic_store_explicit(&s->in_use, 0, memory_order_release);
}

static slot_t *slot_acquire(void) {
    tl_slot = &shared_slot; /* anything below that allocates lands here, no recursion */
    int st = atomic_load(&slot_key_state);
    if (st == 0) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&slot_key_state, &expect, 1))
            atomic_store(&slot_key_state, pthread_key_create(&slot_key, slot_release) == 0 ? 2 : 3);
    }
    if (atomic_load(&slot_key_state) != 2) return &shared_slot;
    for (int i = 0; i < N_SLOTS; i++) {
        int expect = 0;
        if (atomic_load_explicit(&slots[i].in_use, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&slots[i].in_use, &expect, 1)) {
            pthread_setspecific(slot_key, &slots[i]);
            tl_slot = &slots[i];
            return &slots[i];
        }
    }
    return &shared_slot;
}

static inline slot_t *my_slot(void) {
    slot_t *s = tl_slot;
    return __builtin_expect(s != NULL, 1) ? s : slot_acquire();
}

static inline void add_i64(_Atomic int64_t *x, int64_t v, int shared) {
    if (shared) atomic_fetch_add_explicit(x, v, memory_order_relaxed);
    else atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + v, memory_order_relaxed);
}
static inline void add_u64(_Atomic uint64_t *x, uint64_t v, int shared) {
    if (shared) atomic_fetch_add_explicit(x, v, memory_order_relaxed);
    else atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + v, memory_order_relaxed);
}

void pl_heap_totals(pl_rec_heap_t *out) {
    pl_rec_heap_t h = {0};
    for (int i = -1; i < N_SLOTS; i++) {
        slot_t *s = i < 0 ? &shared_slot : &slots[i];
        h.live_bytes += atomic_load_explicit(&s->live_bytes, memory_order_relaxed);
        h.live_count += atomic_load_explicit(&s->live_count, memory_order_relaxed);
        h.n_alloc += atomic_load_explicit(&s->n_alloc, memory_order_relaxed);
        h.n_free += atomic_load_explicit(&s->n_free, memory_order_relaxed);
        h.alloc_bytes += atomic_load_explicit(&s->alloc_bytes, memory_order_relaxed);
        h.mmap_live_bytes += atomic_load_explicit(&s->mmap_bytes, memory_order_relaxed);
        h.mmap_live_count += atomic_load_explicit(&s->mmap_count, memory_order_relaxed);
    }
    *out = h;
}

/* ------------------------------------------------------------------ set of sampled live pointers */

#define PS_SLOTS (1u << 21)  /* 16 MiB of address space per table, touched lazily */
#define PS_TOMB ((uintptr_t)1)

static struct {
    pthread_mutex_t mu;               /* guards writers, used, tombs */
    uintptr_t *tabs[2];
    _Atomic(uintptr_t *) cur;
    atomic_uint seq;                  /* odd while the table is being rebuilt */
    uint32_t used, tombs;
    atomic_long live;
    atomic_bool failed;
} ps = {.mu = PTHREAD_MUTEX_INITIALIZER};

static inline uint32_t ps_hash(uintptr_t p) {
    uint64_t h = (uint64_t)p >> 4;
    h *= 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 40) & (PS_SLOTS - 1);
}

static void *map_noreserve(size_t n) {
    void *p = (void *)syscall(SYS_mmap, NULL, n, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return (intptr_t)p < 0 && (intptr_t)p > -4096 ? NULL : p;
}

static bool ps_init_locked(void) {
    if (ps.tabs[0]) return true;
    if (atomic_load(&ps.failed)) return false;
    ps.tabs[0] = map_noreserve(PS_SLOTS * sizeof(uintptr_t));
    ps.tabs[1] = map_noreserve(PS_SLOTS * sizeof(uintptr_t));
    if (!ps.tabs[0] || !ps.tabs[1]) {
        atomic_store(&ps.failed, true);
        pl_warn_once("plateau: cannot map the sampled-pointer table: stack sampling is off");
        return false;
    }
    atomic_store(&ps.cur, ps.tabs[0]);
    return true;
}

static bool ps_probe(const uintptr_t *t, uintptr_t p) {
    for (uint32_t s = ps_hash(p), n = 0; n < PS_SLOTS; s = (s + 1) & (PS_SLOTS - 1), n++) {
        uintptr_t k = __atomic_load_n(&t[s], __ATOMIC_RELAXED);
        if (k == p) return true;
        if (k == 0) return false;
    }
    return false;
}

/* Rebuild into the other table without tombstones; lock-free readers see seq change and retry. */
static void ps_rebuild_locked(void) {
    uintptr_t *from = atomic_load(&ps.cur), *to = from == ps.tabs[0] ? ps.tabs[1] : ps.tabs[0];
    atomic_fetch_add(&ps.seq, 1);
    if (syscall(SYS_mmap, to, PS_SLOTS * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == -1)
        memset(to, 0, PS_SLOTS * sizeof(uintptr_t));
    uint32_t used = 0;
    for (uint32_t i = 0; i < PS_SLOTS; i++) {
        uintptr_t k = from[i];
        if (k <= PS_TOMB) continue;
        uint32_t s = ps_hash(k);
        while (to[s]) s = (s + 1) & (PS_SLOTS - 1);
        to[s] = k;
        used++;
    }
    atomic_store(&ps.cur, to);
    ps.used = used;
    ps.tombs = 0;
    atomic_fetch_add(&ps.seq, 1);
}

static bool ps_insert(uintptr_t p) {
    pthread_mutex_lock(&ps.mu);
    bool ok = ps_init_locked();
    if (ok && (ps.used + ps.tombs + 1) * 2 > PS_SLOTS) ps_rebuild_locked();
    if (ok && (ps.used + 1) * 2 > PS_SLOTS) ok = false; /* full of live samples: do not sample */
    if (ok) {
        uintptr_t *t = atomic_load(&ps.cur);
        uint32_t s = ps_hash(p);
        while (t[s] > PS_TOMB && t[s] != p) s = (s + 1) & (PS_SLOTS - 1);
        if (t[s] == PS_TOMB) ps.tombs--;
        if (t[s] != p) {
            ps.used++;
            atomic_fetch_add(&ps.live, 1);
        }
        __atomic_store_n(&t[s], p, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ps.mu);
    return ok;
}

/* Remove p if it was sampled. The common case (not sampled) takes no lock. */
static bool ps_take(uintptr_t p) {
    if (atomic_load_explicit(&ps.live, memory_order_relaxed) == 0) return false;
    bool maybe;
    for (;;) {
        unsigned s1 = atomic_load_explicit(&ps.seq, memory_order_acquire);
        if (s1 & 1) {
            maybe = true;
            break;
        }
        uintptr_t *t = atomic_load_explicit(&ps.cur, memory_order_acquire);
        maybe = t && ps_probe(t, p);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&ps.seq, memory_order_relaxed) == s1) break;
    }
    if (!maybe) return false;
    bool found = false;
    pthread_mutex_lock(&ps.mu);
    uintptr_t *t = atomic_load(&ps.cur);
    if (t) {
        for (uint32_t s = ps_hash(p), n = 0; n < PS_SLOTS; s = (s + 1) & (PS_SLOTS - 1), n++) {
            if (t[s] == 0) break;
            if (t[s] == p) {
                __atomic_store_n(&t[s], PS_TOMB, __ATOMIC_RELEASE);
                ps.used--;
                ps.tombs++;
                atomic_fetch_sub(&ps.live, 1);
                found = true;
                break;
            }
        }
    }
    pthread_mutex_unlock(&ps.mu);
    return found;
}

void pl_heap_reset_sampling(void) {
    pthread_mutex_init(&ps.mu, NULL);
    if (!ps.tabs[0]) return;
    for (int i = 0; i < 2; i++)
        if (syscall(SYS_mmap, ps.tabs[i], PS_SLOTS * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == -1)
            memset(ps.tabs[i], 0, PS_SLOTS * sizeof(uintptr_t));
    atomic_store(&ps.cur, ps.tabs[0]);
    ps.used = ps.tombs = 0;
    atomic_store(&ps.live, 0);
    atomic_store(&ps.seq, 0);
}

/* ------------------------------------------------------------------ anonymous mmap table */

#define MT_SLOTS (1u << 16)
typedef struct { uintptr_t start; size_t len; } mt_entry_t; /* start 0 empty, 1 tombstone */
static struct {
    pthread_mutex_t mu;
    mt_entry_t *tab;
    uint32_t used, tombs;
    bool failed;
} mt = {.mu = PTHREAD_MUTEX_INITIALIZER};

static inline uint32_t mt_hash(uintptr_t p) { return (uint32_t)(((uint64_t)p >> 12) * 0x9e3779b97f4a7c15ull >> 48) & (MT_SLOTS - 1); }

static void mt_rehash_locked(void) {
    /* In place: collect live entries, clear, reinsert (table is small and only touched under mu). */
    static mt_entry_t tmp[MT_SLOTS / 2];
    uint32_t n = 0;
    for (uint32_t i = 0; i < MT_SLOTS && n < MT_SLOTS / 2; i++)
        if (mt.tab[i].start > 1) tmp[n++] = mt.tab[i];
    memset(mt.tab, 0, MT_SLOTS * sizeof(mt_entry_t));
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = mt_hash(tmp[i].start);
        while (mt.tab[s].start) s = (s + 1) & (MT_SLOTS - 1);
        mt.tab[s] = tmp[i];
    }
    mt.used = n;
    mt.tombs = 0;
}

static bool mt_insert(uintptr_t start, size_t len) {
    pthread_mutex_lock(&mt.mu);
    bool ok = false;
    if (!mt.tab && !mt.failed) {
        mt.tab = map_noreserve(MT_SLOTS * sizeof(mt_entry_t));
        mt.failed = !mt.tab;
    }
    if (mt.tab) {
        if ((mt.used + mt.tombs + 1) * 4 > MT_SLOTS * 3) mt_rehash_locked();
        if ((mt.used + 1) * 2 <= MT_SLOTS) {
            uint32_t s = mt_hash(start);
            while (mt.tab[s].start > 1 && mt.tab[s].start != start) s = (s + 1) & (MT_SLOTS - 1);
            if (mt.tab[s].start == 1) mt.tombs--;
            if (mt.tab[s].start != start) mt.used++;
            mt.tab[s].start = start;
            mt.tab[s].len = len;
            ok = true;
        }
    }
    pthread_mutex_unlock(&mt.mu);
    return ok;
}

/* munmap(start, len): returns the tracked bytes released (whole mapping or its head), 0 if untracked.
 * *whole = the mapping is gone. */
static size_t mt_remove(uintptr_t start, size_t len, bool *whole) {
    *whole = false;
    pthread_mutex_lock(&mt.mu);
    size_t released = 0;
    if (mt.tab) {
        for (uint32_t s = mt_hash(start), n = 0; n < MT_SLOTS; s = (s + 1) & (MT_SLOTS - 1), n++) {
            if (mt.tab[s].start == 0) break;
            if (mt.tab[s].start != start) continue;
            size_t have = mt.tab[s].len;
            mt.tab[s].start = 1;
            mt.used--;
            mt.tombs++;
            if (len >= have) {
                released = have;
                *whole = true;
            } else {
                /* Head unmapped: keep tracking the tail under its new start. */
                released = len;
                pthread_mutex_unlock(&mt.mu);
                mt_insert(start + len, have - len);
                return released;
            }
            break;
        }
    }
    pthread_mutex_unlock(&mt.mu);
    return released;
}

/* ------------------------------------------------------------------ sampling */

static PL_TLS int64_t tl_countdown;     /* bytes left until the next sample; <= 0 = sample */
static PL_TLS uint64_t tl_rng;
static PL_TLS bool tl_rng_ready;
static PL_TLS bool tl_countdown_ready; /* first interval drawn (before it, tl_countdown is -bytes so far) */

static int64_t next_interval(void) {
    uint64_t mean = pl_g.opt.sample_bytes;
    if (mean == 0) return 0;
    if (!tl_rng_ready) {
        tl_rng = (uint64_t)pl_now_ns() ^ ((uint64_t)pl_tid() << 32) ^ 0x2545f4914f6cdd1dull;
        tl_rng_ready = true;
    }
    tl_rng ^= tl_rng >> 12;
    tl_rng ^= tl_rng << 25;
    tl_rng ^= tl_rng >> 27;
    uint64_t r = tl_rng * 0x2545f4914f6cdd1dull;
    double u = ((double)(r >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
    double v = -log(u) * (double)mean;
    return v < 1.0 ? 1 : v > 9e18 ? INT64_MAX : (int64_t)v;
}

__attribute__((noinline)) static void sample_alloc(void *p, size_t size, pl_host_kind_t kind) {
    pl_tl_guard++;
    if (!tl_countdown_ready) {
        /* A thread's first crossing: draw its first interval, counting the bytes it already allocated. */
        tl_countdown_ready = true;
        tl_countdown += next_interval();
        if (tl_countdown > 0) {
            pl_tl_guard--;
            return;
        }
    }
    tl_countdown = next_interval();
    if (atomic_load_explicit(&pl_g.active, memory_order_relaxed) && ps_insert((uintptr_t)p)) {
        uint32_t stack_id = pl_stack_capture();
        pl_trace_record_t r = {.type = PL_REC_HOST_ALLOC, .t_ns = pl_now_ns()};
        r.u.host_alloc = (pl_rec_host_alloc_t){.addr = (uintptr_t)p, .size = size, .stack_id = stack_id,
                                               .tid = pl_tid(), .kind = kind};
        pl_emit(&r);
    }
    pl_tl_guard--;
}

__attribute__((noinline)) static void sample_free(void *p) {
    pl_tl_guard++;
    pl_trace_record_t r = {.type = PL_REC_HOST_FREE, .t_ns = pl_now_ns()};
    r.u.host_free = (pl_rec_host_free_t){.addr = (uintptr_t)p, .tid = pl_tid()};
    pl_emit(&r);
    pl_tl_guard--;
}

static inline void on_alloc(void *p, pl_host_kind_t kind) {
    size_t n = real.usable(p);
    slot_t *s = my_slot();
    add_i64(&s->live_bytes, (int64_t)n, s->shared);
    add_i64(&s->live_count, 1, s->shared);
    add_u64(&s->n_alloc, 1, s->shared);
    add_u64(&s->alloc_bytes, n, s->shared);
    tl_countdown -= (int64_t)n;
    if (__builtin_expect(tl_countdown <= 0, 0) && !pl_tl_guard &&
        atomic_load_explicit(&pl_g.active, memory_order_relaxed))
        sample_alloc(p, n, kind);
}

static inline void on_free(void *p) {
    size_t n = real.usable(p);
    slot_t *s = my_slot();
    add_i64(&s->live_bytes, -(int64_t)n, s->shared);
    add_i64(&s->live_count, -1, s->shared);
    add_u64(&s->n_free, 1, s->shared);
    if (__builtin_expect(atomic_load_explicit(&ps.live, memory_order_relaxed) != 0, 0) && ps_take((uintptr_t)p) &&
        atomic_load_explicit(&pl_g.active, memory_order_relaxed))
        sample_free(p);
}

/* ------------------------------------------------------------------ interposers */

PL_EXPORT void *malloc(size_t n) {
    if (__builtin_expect(!ready(), 0)) return boot_alloc(n, 16);
    void *p = real.malloc(n);
    if (p) on_alloc(p, PL_HOST_MALLOC);
    return p;
}

PL_EXPORT void free(void *p) {
    if (!p || is_boot(p)) return;
    if (__builtin_expect(!ready(), 0)) return; /* cannot happen: only boot memory exists before */
    on_free(p);
    real.free(p);
}

PL_EXPORT void *calloc(size_t n, size_t size) {
    if (__builtin_expect(!ready(), 0)) {
        if (size && n > SIZE_MAX / size) return NULL;
        return boot_alloc(n * size, 16); /* static memory is zeroed */
    }
    void *p = real.calloc(n, size);
    if (p) on_alloc(p, PL_HOST_CALLOC);
    return p;
}

PL_EXPORT void *realloc(void *old, size_t n) {
    if (__builtin_expect(!ready(), 0) || is_boot(old)) {
        void *p = ready() ? malloc(n) : boot_alloc(n, 16);
        if (p && old) {
            size_t have = boot_size(old);
            memcpy(p, old, have < n ? have : n);
        }
        return p;
    }
    if (!old) return malloc(n);
    size_t old_n = real.usable(old);
    bool was_sampled = atomic_load_explicit(&ps.live, memory_order_relaxed) != 0 && ps_take((uintptr_t)old);
    void *p = real.realloc(old, n);
    if (!p && n != 0) {
        /* Failed: the old block is intact. Put it back in the sample set if it was there. */
        if (was_sampled) ps_insert((uintptr_t)old);
        return NULL;
    }
    slot_t *s = my_slot();
    add_i64(&s->live_bytes, -(int64_t)old_n, s->shared);
    add_i64(&s->live_count, -1, s->shared);
    add_u64(&s->n_free, 1, s->shared);
    if (was_sampled && atomic_load_explicit(&pl_g.active, memory_order_relaxed)) sample_free(old);
    if (p) on_alloc(p, PL_HOST_REALLOC);
    return p;
}

PL_EXPORT void *reallocarray(void *old, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(old, n * size);
}

PL_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
    if (__builtin_expect(!ready(), 0)) {
        void *p = boot_alloc(n, align);
        if (!p) return ENOMEM;
        *out = p;
        return 0;
    }
    int rc = real.posix_memalign(out, align, n);
    if (rc == 0 && *out) on_alloc(*out, PL_HOST_MEMALIGN);
    return rc;
}

PL_EXPORT void *aligned_alloc(size_t align, size_t n) {
    if (__builtin_expect(!ready(), 0)) return boot_alloc(n, align);
    void *p = real.aligned_alloc(align, n);
    if (p) on_alloc(p, PL_HOST_MEMALIGN);
    return p;
}

PL_EXPORT void *memalign(size_t align, size_t n) {
    if (__builtin_expect(!ready(), 0)) return boot_alloc(n, align);
    void *p = real.memalign ? real.memalign(align, n) : real.aligned_alloc(align, n);
    if (p) on_alloc(p, PL_HOST_MEMALIGN);
    return p;
}

PL_EXPORT void *valloc(size_t n) {
    if (__builtin_expect(!ready(), 0)) return boot_alloc(n, 4096);
    void *p = real.valloc(n);
    if (p) on_alloc(p, PL_HOST_MEMALIGN);
    return p;
}

PL_EXPORT void *pvalloc(size_t n) {
    if (__builtin_expect(!ready(), 0)) return boot_alloc((n + 4095) & ~(size_t)4095, 4096);
    void *p = real.pvalloc(n);
    if (p) on_alloc(p, PL_HOST_MEMALIGN);
    return p;
}

static void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (__builtin_expect(!ready(), 0))
        return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    void *p = real.mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && !pl_tl_guard && mt_insert((uintptr_t)p, len)) {
        slot_t *s = my_slot();
        add_i64(&s->mmap_bytes, (int64_t)len, s->shared);
        add_i64(&s->mmap_count, 1, s->shared);
        tl_countdown -= (int64_t)len;
        if (tl_countdown <= 0 && atomic_load_explicit(&pl_g.active, memory_order_relaxed))
            sample_alloc(p, len, PL_HOST_MMAP);
    }
    return p;
}

PL_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return do_mmap(addr, len, prot, flags, fd, off);
}

PL_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return do_mmap(addr, len, prot, flags, fd, off);
}

PL_EXPORT int munmap(void *addr, size_t len) {
    if (__builtin_expect(!ready(), 0)) return (int)syscall(SYS_munmap, addr, len);
    bool whole = false;
    /* The tracer's own mappings (guard raised) are never in the table. */
    size_t released = mt.tab && !pl_tl_guard ? mt_remove((uintptr_t)addr, len, &whole) : 0;
    if (released) {
        slot_t *s = my_slot();
        add_i64(&s->mmap_bytes, -(int64_t)released, s->shared);
        if (whole) add_i64(&s->mmap_count, -1, s->shared);
        if (ps_take((uintptr_t)addr) && atomic_load_explicit(&pl_g.active, memory_order_relaxed)) sample_free(addr);
    }
    return real.munmap(addr, len);
}

/* ------------------------------------------------------------------ fork */

void pl_heap_fork_prepare(void) {
    pthread_mutex_lock(&mt.mu);
    pthread_mutex_lock(&ps.mu);
}

void pl_heap_fork_parent(void) {
    pthread_mutex_unlock(&ps.mu);
    pthread_mutex_unlock(&mt.mu);
}

void pl_heap_fork_child(void) {
    pthread_mutex_init(&mt.mu, NULL);
    pl_heap_reset_sampling();
    /* Only this thread survives: every other slot is free again (its counts stay, the heap is inherited). */
    for (int i = 0; i < N_SLOTS; i++)
        if (&slots[i] != tl_slot) atomic_store(&slots[i].in_use, 0);
}
