/* Host heap interposers: malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc, the C++ operators new and delete (all 20 forms; each allocation counted once, at the outermost
 * call, see "C++ operators"), and anonymous mmap/mmap64/munmap/mremap (partial unmaps and moves kept exact).
 *
 * Exact totals: every call updates the calling thread's counter slot (owner-only plain atomic stores, no
 * locked instruction on the hot path); totals are the sum over slots. Sizes are usable sizes
 * (malloc_usable_size of the real allocator), identical at allocation and at free, so no pointer map is
 * needed for exact live bytes.
 * Sampling: Poisson by bytes (docs/trace-format.md). A sampled pointer goes into a set; free checks a small
 * counting filter first (one cached byte: almost every free stops there), then the set lock-free (seqlock over a
 * table that is only rebuilt, never resized in place; pset.c) and emits host_free.
 * Anonymous mappings: a sorted range table (exact under partial munmap, mremap and MAP_FIXED replacement;
 * mranges.c), updated under mr.mu held across the real call.
 * Re-entrancy: dlsym during bootstrap may allocate: served from a static buffer. While pl_tl_guard is raised
 * (inside the tracer, or in its own threads) calls are still counted but never sampled, and the tracer's own
 * mmaps are not counted. All tracer memory here is static or mmap'd.
 * Allocator-internal mappings: while a thread is inside the real malloc-family function called from one of our
 * interposers (tl_in_alloc > 0: one TLS load, a store before and one after the call), its mmap/mremap/munmap
 * calls are the allocator's own (jemalloc maps its extents through the public mmap; glibc uses an internal __mmap
 * we never see): they are forwarded but not tracked, so the live heap (malloc bytes + the program's anonymous
 * mappings) does not count the same memory twice. A signal handler that maps memory while its thread is inside
 * malloc is therefore not counted either (rare; documented in docs/trace-format.md). */
/* Both mmap and mmap64 are defined here: without this, glibc's headers rename mmap to mmap64. */
#undef _FILE_OFFSET_BITS
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mranges.h"
#include "preload.h"
#include "pset.h"

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
    void *(*mremap)(void *, size_t, size_t, int, ...); /* may be NULL: then the raw system call */
} real;

static atomic_int resolve_state; /* 0 none, 1 in progress, 2 done */
static PL_TLS int tl_resolving;
static PL_TLS int tl_in_alloc; /* > 0 inside a real malloc-family call made by an interposer (see the header) */
enum { CXX_NEW = 1, CXX_DELETE = 2 };
static PL_TLS int tl_cxx; /* inside the next C++ operator new (CXX_NEW) or delete called by ours, else 0 */

/* Bracket a real allocator call: a counter, not a flag, so nested calls (a signal handler calling malloc while
 * its thread is inside malloc) restore the outer value. The signal fences only keep the compiler from moving
 * the stores across the call; the cost is one TLS load and two stores. */
static inline int alloc_enter(void) {
    int depth = tl_in_alloc;
    tl_in_alloc = depth + 1;
    atomic_signal_fence(memory_order_seq_cst);
    return depth;
}
static inline void alloc_leave(int depth) {
    atomic_signal_fence(memory_order_seq_cst);
    tl_in_alloc = depth;
}
#define IN_ALLOC(type, var, expr)                                                                                 \
    type var;                                                                                                    \
    do {                                                                                                         \
        int pl_depth_ = alloc_enter();                                                                           \
        var = (expr);                                                                                            \
        alloc_leave(pl_depth_);                                                                                  \
    } while (0)

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
    RESOLVE(mremap);
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

/* ------------------------------------------------------------------ loaded objects' own definitions */

/* What an object itself defines, read from its dynamic symbol table (GNU or SysV hash; no allocation, no dlerror
 * string). dlsym cannot answer this: a non-PIE executable that takes the address of malloc carries `malloc` as an
 * undefined symbol whose value is its canonical PLT entry, and dlsym(RTLD_DEFAULT) returns that entry (a stub that
 * jumps through the executable's GOT to whoever serves malloc), named by dladdr as the executable. Here an
 * undefined symbol, a hidden version or a non-function is no definition. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *o, ElfW(Addr) v) {
    /* glibc relocates the pointers of a writable .dynamic in place; a read-only one (the vDSO's) keeps offsets */
    return v < o->dlpi_addr ? o->dlpi_addr + v : v;
}

static uint32_t gnu_hash(const char *s) {
    uint32_t h = 5381;
    for (; *s; s++) h = h * 33 + (unsigned char)*s;
    return h;
}

static uint32_t sysv_hash(const char *s) {
    uint32_t h = 0;
    for (; *s; s++) {
        h = (h << 4) + (unsigned char)*s;
        uint32_t g = h & 0xf0000000u;
        if (g) h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

static void *obj_defines(const struct dl_phdr_info *o, const char *name) {
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < o->dlpi_phnum; i++)
        if (o->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const void *)(o->dlpi_addr + o->dlpi_phdr[i].p_vaddr);
    if (!dyn) return NULL;
    const ElfW(Sym) *sym = NULL;
    const char *str = NULL;
    const uint32_t *gh = NULL, *sh = NULL;
    const uint16_t *versym = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t p = dyn_ptr(o, dyn->d_un.d_ptr);
        if (dyn->d_tag == DT_SYMTAB) sym = (const void *)p;
        else if (dyn->d_tag == DT_STRTAB) str = (const void *)p;
        else if (dyn->d_tag == DT_GNU_HASH) gh = (const void *)p;
        else if (dyn->d_tag == DT_HASH) sh = (const void *)p;
        else if (dyn->d_tag == DT_VERSYM) versym = (const void *)p;
    }
    if (!sym || !str || (!gh && !sh)) return NULL;
    uint32_t hit = 0;
    if (gh) {
        uint32_t n_buckets = gh[0], sym_off = gh[1], n_bloom = gh[2];
        const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gh + 4) + n_bloom);
        const uint32_t *chain = buckets + n_buckets, h = gnu_hash(name);
        for (uint32_t i = n_buckets ? buckets[h % n_buckets] : 0; i >= sym_off && i; i++) {
            uint32_t c = chain[i - sym_off];
            if ((c | 1) == (h | 1) && !strcmp(str + sym[i].st_name, name) && !(versym && (versym[i] & 0x8000))) {
                hit = i;
                break;
            }
            if (c & 1) break;
        }
    } else {
        uint32_t n_buckets = sh[0];
        const uint32_t *buckets = sh + 2, *chain = buckets + n_buckets;
        for (uint32_t i = n_buckets ? buckets[sysv_hash(name) % n_buckets] : 0; i; i = chain[i])
            if (!strcmp(str + sym[i].st_name, name) && !(versym && (versym[i] & 0x8000))) {
                hit = i;
                break;
            }
    }
    const ElfW(Sym) *s = &sym[hit];
    if (!hit || s->st_shndx == SHN_UNDEF || !s->st_value || ELF64_ST_TYPE(s->st_info) != STT_FUNC) return NULL;
    return (void *)(o->dlpi_addr + s->st_value);
}

static bool obj_contains(const struct dl_phdr_info *o, uintptr_t pc) {
    for (int i = 0; i < o->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &o->dlpi_phdr[i];
        uintptr_t lo = o->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && pc >= lo && pc - lo < ph->p_memsz) return true;
    }
    return false;
}

/* The C++ allocation operators (size_t is unsigned long, `m`; align_val_t is passed as a size_t; nothrow_t const&
 * as a pointer). Allocators (jemalloc, tcmalloc, mimalloc) define their own, which never call malloc: a program on
 * jemalloc allocates with them unseen by malloc, while jemalloc's operator delete(void *) frees through the public
 * free, so a counting of malloc and free alone sees the deletes and not the news. */
enum {
    CX_NEW, CX_NEW_A, CX_NEW_NT, CX_NEW_A_NT, CX_NEW_AL, CX_NEW_A_AL, CX_NEW_AL_NT, CX_NEW_A_AL_NT,
    CX_DEL, CX_DEL_A, CX_DEL_SZ, CX_DEL_A_SZ, CX_DEL_NT, CX_DEL_A_NT, CX_DEL_AL, CX_DEL_A_AL,
    CX_DEL_SZ_AL, CX_DEL_A_SZ_AL, CX_DEL_AL_NT, CX_DEL_A_AL_NT, N_CX
};
static const char *const cx_names[N_CX] = {
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t"};
static _Atomic(void *) cx_next[N_CX]; /* the definition after ours, found on first use (NULL: not yet) */

/* One pass over the loaded objects in load order (the executable, the vDSO, LD_PRELOAD's objects in order, then
 * the rest): the first object ahead of this library that defines malloc (an allocator preloaded before us: what
 * the program calls), and for each C++ operator the first definition after us (what the program would call
 * without us: the host allocator's when one is preloaded after us, else libstdc++'s, even one loaded RTLD_LOCAL,
 * which dlsym(RTLD_NEXT) does not search). */
typedef struct {
    uintptr_t self_pc;
    bool seen_self;
    void *ahead_malloc;
    void *cx[N_CX];
} walk_t;

static int walk_one(struct dl_phdr_info *o, size_t size, void *ctx) {
    (void)size;
    walk_t *w = ctx;
    if (!w->seen_self) {
        if (obj_contains(o, w->self_pc)) w->seen_self = true;
        else if (!w->ahead_malloc) w->ahead_malloc = obj_defines(o, "malloc");
        return 0;
    }
    for (int k = 0; k < N_CX; k++)
        if (!w->cx[k]) w->cx[k] = obj_defines(o, cx_names[k]);
    return 0;
}

static void walk_objects(walk_t *w) {
    memset(w, 0, sizeof *w);
    w->self_pc = (uintptr_t)&walk_objects;
    dl_iterate_phdr(walk_one, w);
}

/* Which allocator serves malloc: the object that defines the malloc we forward to (RTLD_NEXT after us), named
 * by dladdr (no allocation). jemalloc's version comes from its mallctl("version"), read-only and allocation-free
 * once jemalloc is initialised (it is: it already served the loader's mallocs); glibc's from
 * gnu_get_libc_version. dlsym is only asked for a symbol the found object is known to export, so no dlerror
 * string is allocated. */
void pl_heap_allocator(char *name, size_t name_n, char *version, size_t version_n) {
    snprintf(name, name_n, "unknown");
    snprintf(version, version_n, "%s", "");
    if (!ready()) return;
    void *fn;
    memcpy(&fn, &real.malloc, sizeof fn);
    /* An allocator preloaded ahead of us (LD_PRELOAD=libjemalloc.so:libplateau_preload.so) is what the program
     * calls, even though our RTLD_NEXT malloc is the C library's. Only a definition counts: not the canonical PLT
     * entry of a non-PIE executable (see obj_defines). */
    walk_t w;
    walk_objects(&w);
    bool ahead = w.ahead_malloc != NULL;
    if (ahead) fn = w.ahead_malloc;
    Dl_info di;
    if (!fn || !dladdr(fn, &di) || !di.dli_fname) return;
    const char *base = strrchr(di.dli_fname, '/');
    base = base ? base + 1 : di.dli_fname;
    if (strstr(base, "jemalloc")) {
        snprintf(name, name_n, "jemalloc");
        /* the object that defines this malloc defines it (so no failed look-up allocates a dlerror string) */
        void *sym = dlsym(ahead ? RTLD_DEFAULT : RTLD_NEXT, "mallctl");
        int (*ctl)(const char *, void *, size_t *, void *, size_t);
        memcpy(&ctl, &sym, sizeof ctl);
        const char *v = NULL;
        size_t vn = sizeof v;
        if (ctl && ctl("version", &v, &vn, NULL, 0) == 0 && v) snprintf(version, version_n, "%s", v);
    } else if (!strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5)) {
        snprintf(name, name_n, "glibc");
        snprintf(version, version_n, "%s", gnu_get_libc_version());
    } else if (strstr(base, "tcmalloc")) {
        snprintf(name, name_n, "tcmalloc");
    } else if (strstr(base, "mimalloc")) {
        snprintf(name, name_n, "mimalloc");
    } else {
        snprintf(name, name_n, "other:%s", base);
    }
}

/* ------------------------------------------------------------------ per-thread counter slots */

typedef struct {
    _Alignas(64) _Atomic int64_t live_bytes; /* own cache line per slot: no false sharing */
    _Atomic int64_t mmap_bytes, mmap_count;  /* (live block count = n_alloc - n_free, summed at read time) */
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
        h.n_alloc += atomic_load_explicit(&s->n_alloc, memory_order_relaxed);
        h.n_free += atomic_load_explicit(&s->n_free, memory_order_relaxed);
        h.alloc_bytes += atomic_load_explicit(&s->alloc_bytes, memory_order_relaxed);
        h.mmap_live_bytes += atomic_load_explicit(&s->mmap_bytes, memory_order_relaxed);
        h.mmap_live_count += atomic_load_explicit(&s->mmap_count, memory_order_relaxed);
    }
    h.live_count = (int64_t)(h.n_alloc - h.n_free);
    *out = h;
}

/* ------------------------------------------------------------------ set of sampled live pointers (pset.c) */

#define PS_SLOTS_MAX (1u << 21)  /* 16 MiB of address space per table, touched lazily; fewer under RLIMIT_AS */

static pl_pset_t ps = PL_PSET_INITIALIZER;

static bool ps_insert(uintptr_t p) {
    int rc = pl_pset_insert(&ps, p, PS_SLOTS_MAX >> pl_mem_shift());
    if (rc < 0) PL_WARN_ONCE("plateau: cannot map the sampled-pointer table: stack sampling is off");
    return rc > 0;
}

static inline bool ps_take(uintptr_t p) { return pl_pset_take(&ps, p); }

void pl_heap_reset_sampling(void) { pl_pset_reset(&ps); }

/* ------------------------------------------------------------------ live anonymous mappings (mranges.c) */

#define MR_MAX (1u << 17) /* ranges: twice the kernel's default vm.max_map_count; fewer under RLIMIT_AS */
static struct {
    pthread_mutex_t mu; /* held across the real mmap/munmap/mremap call and the table update */
    pl_mranges_t t;     /* guarded by mu */
} mr = {.mu = PTHREAD_MUTEX_INITIALIZER};
typedef pl_mranges_delta_t mr_delta_t;

static inline uintptr_t page_up(uintptr_t n) { return (n + 4095) & ~(uintptr_t)4095; }

/* Set while this thread holds mr.mu: a signal handler that maps memory in that window is forwarded untracked
 * instead of deadlocking on the lock its own thread holds. */
static PL_TLS int tl_in_mr;

static inline void mr_lock(void) {
    tl_in_mr = 1; /* before the lock: a signal between taking it and setting the flag would deadlock */
    atomic_signal_fence(memory_order_seq_cst);
    pthread_mutex_lock(&mr.mu);
}

static inline void mr_unlock(void) {
    pthread_mutex_unlock(&mr.mu);
    atomic_signal_fence(memory_order_seq_cst);
    tl_in_mr = 0;
}

static void mr_cut_locked(uintptr_t lo, uintptr_t hi, mr_delta_t *d) { pl_mranges_cut(&mr.t, lo, hi, d); }

static void mr_add_locked(uintptr_t lo, uintptr_t hi, mr_delta_t *d) {
    pl_mranges_map(&mr.t, MR_MAX >> pl_mem_shift()); /* storage on first use; the table size is fixed after */
    pl_mranges_add(&mr.t, lo, hi, d);
}

static uintptr_t mr_overlap_locked(uintptr_t lo, uintptr_t hi) { return pl_mranges_overlap(&mr.t, lo, hi); }

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
    PL_GUARD_SCOPE();
    if (!tl_countdown_ready) {
        /* A thread's first crossing: draw its first interval, counting the bytes it already allocated. */
        tl_countdown_ready = true;
        tl_countdown += next_interval();
        if (tl_countdown > 0) return;
    }
    tl_countdown = next_interval();
    if (atomic_load_explicit(&pl_g.active, memory_order_relaxed) && ps_insert((uintptr_t)p)) {
        uint32_t stack_id = pl_stack_capture();
        pl_trace_record_t r = {.type = PL_REC_HOST_ALLOC, .t_ns = pl_now_ns()};
        /* The thread's own slot counts exactly its calls (this one included, count_alloc ran first); a slot
         * reused by a later thread keeps counting up, which leaves differences within a tid exact. The shared
         * overflow slot mixes threads: no ordinal. */
        const slot_t *s = tl_slot;
        uint64_t ordinal = s && !s->shared ? atomic_load_explicit(&s->n_alloc, memory_order_relaxed) : PL_TRACE_NA;
        r.u.host_alloc = (pl_rec_host_alloc_t){.addr = (uintptr_t)p, .size = size, .stack_id = stack_id,
                                               .tid = pl_tid(), .kind = kind, .call_ordinal = ordinal};
        pl_emit(&r);
    }
}

__attribute__((noinline)) static void sample_free(void *p) {
    PL_GUARD_SCOPE();
    pl_trace_record_t r = {.type = PL_REC_HOST_FREE, .t_ns = pl_now_ns()};
    r.u.host_free = (pl_rec_host_free_t){.addr = (uintptr_t)p, .tid = pl_tid()};
    pl_emit(&r);
}

/* One branch on the slot kind, then plain owner-only updates (the common case) or atomic RMW (shared slot). */
static inline void count_alloc(slot_t *s, size_t n) {
    if (__builtin_expect(!s->shared, 1)) {
        add_i64(&s->live_bytes, (int64_t)n, 0);
        add_u64(&s->n_alloc, 1, 0);
        add_u64(&s->alloc_bytes, n, 0);
    } else {
        add_i64(&s->live_bytes, (int64_t)n, 1);
        add_u64(&s->n_alloc, 1, 1);
        add_u64(&s->alloc_bytes, n, 1);
    }
}

static inline void count_free(slot_t *s, size_t n) {
    if (__builtin_expect(!s->shared, 1)) {
        add_i64(&s->live_bytes, -(int64_t)n, 0);
        add_u64(&s->n_free, 1, 0);
    } else {
        add_i64(&s->live_bytes, -(int64_t)n, 1);
        add_u64(&s->n_free, 1, 1);
    }
}

static inline void on_alloc(void *p, pl_host_kind_t kind) {
    if (__builtin_expect(tl_cxx == CXX_NEW, 0)) return; /* the operator new we are inside counts it */
    size_t n = real.usable(p);
    count_alloc(my_slot(), n);
    tl_countdown -= (int64_t)n;
    if (__builtin_expect(tl_countdown <= 0, 0) && !pl_tl_guard &&
        atomic_load_explicit(&pl_g.active, memory_order_relaxed))
        sample_alloc(p, n, kind);
    if (!pl_tl_guard) pl_ring_poll(); /* ring mode: heap totals or SIGUSR2 steps the collector is waiting for */
}

static inline void on_free(void *p) {
    if (__builtin_expect(tl_cxx == CXX_DELETE, 0)) return; /* the operator delete we are inside counted it */
    count_free(my_slot(), real.usable(p));
    /* the filter alone (no shared counter read): all zero while nothing sampled is live */
    if (__builtin_expect(pl_pset_maybe(&ps, (uintptr_t)p), 0) && ps_take((uintptr_t)p) &&
        atomic_load_explicit(&pl_g.active, memory_order_relaxed))
        sample_free(p);
}

/* ------------------------------------------------------------------ interposers */

PL_EXPORT void *malloc(size_t n) {
    if (__builtin_expect(!ready(), 0)) return boot_alloc(n, 16);
    IN_ALLOC(void *, p, real.malloc(n));
    if (p) on_alloc(p, PL_HOST_MALLOC);
    return p;
}

PL_EXPORT void free(void *p) {
    if (!p || is_boot(p)) return;
    if (__builtin_expect(!ready(), 0)) return; /* cannot happen: only boot memory exists before */
    on_free(p);
    int depth = alloc_enter();
    real.free(p);
    alloc_leave(depth);
}

PL_EXPORT void *calloc(size_t n, size_t size) {
    if (__builtin_expect(!ready(), 0)) {
        if (size && n > SIZE_MAX / size) return NULL;
        return boot_alloc(n * size, 16); /* static memory is zeroed */
    }
    IN_ALLOC(void *, p, real.calloc(n, size));
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
    bool was_sampled = pl_pset_maybe(&ps, (uintptr_t)old) && ps_take((uintptr_t)old);
    IN_ALLOC(void *, p, real.realloc(old, n));
    if (!p && n != 0) {
        /* Failed: the old block is intact. Put it back in the sample set if it was there. */
        if (was_sampled) ps_insert((uintptr_t)old);
        return NULL;
    }
    count_free(my_slot(), old_n);
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
    IN_ALLOC(int, rc, real.posix_memalign(out, align, n));
    if (rc == 0 && *out) on_alloc(*out, PL_HOST_MEMALIGN);
    return rc;
}

PL_EXPORT void *aligned_alloc(size_t align, size_t n) {
    if (__builtin_expect(!ready(), 0)) return boot_alloc(n, align);
    IN_ALLOC(void *, p, real.aligned_alloc(align, n));
    if (p) on_alloc(p, PL_HOST_MEMALIGN);
    return p;
}

PL_EXPORT void *memalign(size_t align, size_t n) {
    if (__builtin_expect(!ready(), 0)) return boot_alloc(n, align);
    IN_ALLOC(void *, p, real.memalign ? real.memalign(align, n) : real.aligned_alloc(align, n));
    if (p) on_alloc(p, PL_HOST_MEMALIGN);
    return p;
}

PL_EXPORT void *valloc(size_t n) {
    if (__builtin_expect(!ready(), 0)) return boot_alloc(n, 4096);
    IN_ALLOC(void *, p, real.valloc(n));
    if (p) on_alloc(p, PL_HOST_MEMALIGN);
    return p;
}

PL_EXPORT void *pvalloc(size_t n) {
    if (__builtin_expect(!ready(), 0)) return boot_alloc((n + 4095) & ~(size_t)4095, 4096);
    IN_ALLOC(void *, p, real.pvalloc(n));
    if (p) on_alloc(p, PL_HOST_MEMALIGN);
    return p;
}

/* ------------------------------------------------------------------ C++ operators new and delete */

/* Each operator counts once, at the outermost call, and forwards to the definition after ours (cx_next): the host
 * allocator's (jemalloc's news never pass through malloc) or libstdc++'s (whose news call malloc and whose deletes
 * call free). While ours is inside the next one, tl_cxx says which: the malloc-family interposers then forward
 * without counting what the operator counts (on_alloc under CXX_NEW, on_free under CXX_DELETE), and an operator
 * reached from another one (libstdc++'s new[] calls new, its sized delete calls delete) only forwards. Frees
 * made by a new_handler inside new, and a delete it calls, are still counted (they are CXX_NEW's frees). An
 * exception out of the next new (bad_alloc) unwinds through ours: the cleanup restores tl_cxx and tl_in_alloc
 * (the preload is built with -fexceptions for this). */

static void cx_resolve(void) {
    walk_t w;
    walk_objects(&w);
    for (int k = 0; k < N_CX; k++)
        if (w.cx[k]) atomic_store_explicit(&cx_next[k], w.cx[k], memory_order_relaxed);
}

static inline void *cx_fn(int k) {
    void *f = atomic_load_explicit(&cx_next[k], memory_order_relaxed);
    if (__builtin_expect(f != NULL, 1)) return f;
    cx_resolve();
    return atomic_load_explicit(&cx_next[k], memory_order_relaxed);
}

typedef struct {
    int cxx, depth;
} cx_frame_t;

static inline cx_frame_t cx_enter(int kind) {
    cx_frame_t f = {tl_cxx, alloc_enter()};
    tl_cxx = kind;
    atomic_signal_fence(memory_order_seq_cst);
    return f;
}
static inline void cx_leave(cx_frame_t *f) {
    atomic_signal_fence(memory_order_seq_cst);
    tl_cxx = f->cxx;
    alloc_leave(f->depth);
}

/* No operator after ours (cannot happen in a program that calls one: something defines it): the same through our
 * malloc family, counted once like the rest. */
static void *cx_fail(void) {
    static const char msg[] = "plateau: operator new: out of memory and no C++ runtime found to throw; aborting\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
}
static void *fb_new(size_t n) {
    void *p = malloc(n ? n : 1);
    return p ? p : cx_fail();
}
static void *fb_new_nt(size_t n, const void *nt) {
    (void)nt;
    return malloc(n ? n : 1);
}
static void *fb_new_al_nt(size_t n, size_t al, const void *nt) {
    (void)nt;
    void *p = NULL;
    return posix_memalign(&p, al < sizeof(void *) ? sizeof(void *) : al, n ? n : 1) == 0 ? p : NULL;
}
static void *fb_new_al(size_t n, size_t al) {
    void *p = fb_new_al_nt(n, al, NULL);
    return p ? p : cx_fail();
}
static void fb_del(void *p) { free(p); }
static void fb_del_x(void *p, size_t x) {
    (void)x;
    free(p);
}
static void fb_del_nt(void *p, const void *nt) {
    (void)nt;
    free(p);
}
static void fb_del_x2(void *p, size_t x, size_t y) {
    (void)x, (void)y;
    free(p);
}
static void fb_del_x_nt(void *p, size_t x, const void *nt) {
    (void)x, (void)nt;
    free(p);
}

/* NAME: the mangled symbol; K: its cx_names index; FB: the fallback (its type is the operator's); KIND: the
 * record kind; PARAMS/ARGS: the parameter list and the call's arguments. */
#define CX_NEW(NAME, K, FB, KIND, PARAMS, ARGS)                                                                 \
    PL_EXPORT void *cx_##K PARAMS __asm__(NAME);                                                               \
    void *cx_##K PARAMS {                                                                                      \
        __typeof__(&FB) f = &FB;                                                                               \
        void *q = ready() ? cx_fn(K) : NULL;                                                                   \
        if (q) memcpy(&f, &q, sizeof q);                                                                       \
        if (tl_cxx) return f ARGS;                                                                             \
        void *p;                                                                                               \
        {                                                                                                      \
            __attribute__((cleanup(cx_leave), unused)) cx_frame_t fr = cx_enter(CXX_NEW);                             \
            p = f ARGS;                                                                                        \
        }                                                                                                      \
        if (p && !is_boot(p)) on_alloc(p, KIND);                                                               \
        return p;                                                                                              \
    }

#define CX_DEL(NAME, K, FB, PARAMS, ARGS)                                                                       \
    PL_EXPORT void cx_##K PARAMS __asm__(NAME);                                                                \
    void cx_##K PARAMS {                                                                                       \
        if (is_boot(p)) return;                                                                                \
        __typeof__(&FB) f = &FB;                                                                               \
        void *q = ready() ? cx_fn(K) : NULL;                                                                   \
        if (q) memcpy(&f, &q, sizeof q);                                                                       \
        if (tl_cxx || !p || !q) { /* !q: the fallback (free) counts */                                        \
            f ARGS;                                                                                            \
            return;                                                                                            \
        }                                                                                                      \
        on_free(p);                                                                                            \
        __attribute__((cleanup(cx_leave), unused)) cx_frame_t fr = cx_enter(CXX_DELETE);                              \
        f ARGS;                                                                                                \
    }

#if __SIZEOF_SIZE_T__ == 8 && __SIZEOF_LONG__ == 8 /* the names above mangle size_t as unsigned long */
CX_NEW("_Znwm", CX_NEW, fb_new, PL_HOST_MALLOC, (size_t n), (n))
CX_NEW("_Znam", CX_NEW_A, fb_new, PL_HOST_MALLOC, (size_t n), (n))
CX_NEW("_ZnwmRKSt9nothrow_t", CX_NEW_NT, fb_new_nt, PL_HOST_MALLOC, (size_t n, const void *nt), (n, nt))
CX_NEW("_ZnamRKSt9nothrow_t", CX_NEW_A_NT, fb_new_nt, PL_HOST_MALLOC, (size_t n, const void *nt), (n, nt))
CX_NEW("_ZnwmSt11align_val_t", CX_NEW_AL, fb_new_al, PL_HOST_MEMALIGN, (size_t n, size_t al), (n, al))
CX_NEW("_ZnamSt11align_val_t", CX_NEW_A_AL, fb_new_al, PL_HOST_MEMALIGN, (size_t n, size_t al), (n, al))
CX_NEW("_ZnwmSt11align_val_tRKSt9nothrow_t", CX_NEW_AL_NT, fb_new_al_nt, PL_HOST_MEMALIGN,
       (size_t n, size_t al, const void *nt), (n, al, nt))
CX_NEW("_ZnamSt11align_val_tRKSt9nothrow_t", CX_NEW_A_AL_NT, fb_new_al_nt, PL_HOST_MEMALIGN,
       (size_t n, size_t al, const void *nt), (n, al, nt))
CX_DEL("_ZdlPv", CX_DEL, fb_del, (void *p), (p))
CX_DEL("_ZdaPv", CX_DEL_A, fb_del, (void *p), (p))
CX_DEL("_ZdlPvm", CX_DEL_SZ, fb_del_x, (void *p, size_t n), (p, n))
CX_DEL("_ZdaPvm", CX_DEL_A_SZ, fb_del_x, (void *p, size_t n), (p, n))
CX_DEL("_ZdlPvRKSt9nothrow_t", CX_DEL_NT, fb_del_nt, (void *p, const void *nt), (p, nt))
CX_DEL("_ZdaPvRKSt9nothrow_t", CX_DEL_A_NT, fb_del_nt, (void *p, const void *nt), (p, nt))
CX_DEL("_ZdlPvSt11align_val_t", CX_DEL_AL, fb_del_x, (void *p, size_t al), (p, al))
CX_DEL("_ZdaPvSt11align_val_t", CX_DEL_A_AL, fb_del_x, (void *p, size_t al), (p, al))
CX_DEL("_ZdlPvmSt11align_val_t", CX_DEL_SZ_AL, fb_del_x2, (void *p, size_t n, size_t al), (p, n, al))
CX_DEL("_ZdaPvmSt11align_val_t", CX_DEL_A_SZ_AL, fb_del_x2, (void *p, size_t n, size_t al), (p, n, al))
CX_DEL("_ZdlPvSt11align_val_tRKSt9nothrow_t", CX_DEL_AL_NT, fb_del_x_nt, (void *p, size_t al, const void *nt),
       (p, al, nt))
CX_DEL("_ZdaPvSt11align_val_tRKSt9nothrow_t", CX_DEL_A_AL_NT, fb_del_x_nt, (void *p, size_t al, const void *nt),
       (p, al, nt))
#endif

static void mr_apply(const mr_delta_t *d) {
    if (!d->bytes && !d->count) return;
    slot_t *s = my_slot();
    add_i64(&s->mmap_bytes, d->bytes, s->shared);
    add_i64(&s->mmap_count, d->count, s->shared);
}

static void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (__builtin_expect(!ready(), 0))
        return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    /* The tracer's own mappings (guard raised) are never tracked, and never placed over the program's. Only
     * anonymous mappings are tracked; a MAP_FIXED file mapping matters only for what it replaces. */
    if (pl_tl_guard || tl_in_mr || tl_in_alloc || !(flags & (MAP_ANONYMOUS | MAP_FIXED)))
        return real.mmap(addr, len, prot, flags, fd, off);
    mr_delta_t d = {0, 0};
    mr_lock();
    void *p = real.mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED) {
        uintptr_t lo = (uintptr_t)p, hi = lo + page_up(len);
        if (flags & MAP_ANONYMOUS) mr_add_locked(lo, hi, &d);
        else mr_cut_locked(lo, hi, &d);
    }
    mr_unlock();
    mr_apply(&d);
    if (d.bytes > 0) {
        tl_countdown -= d.bytes;
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
    if (pl_tl_guard || tl_in_mr || tl_in_alloc || !mr.t.r) return real.munmap(addr, len);
    mr_delta_t d = {0, 0};
    mr_lock();
    int rc = real.munmap(addr, len);
    if (rc == 0) mr_cut_locked((uintptr_t)addr, (uintptr_t)addr + page_up(len), &d);
    mr_unlock();
    mr_apply(&d);
    if (d.bytes < 0 && ps_take((uintptr_t)addr) && atomic_load_explicit(&pl_g.active, memory_order_relaxed))
        sample_free(addr);
    return rc;
}

/* mremap: grow or shrink in place, or move (MREMAP_MAYMOVE / MREMAP_FIXED). The tracked bytes of the old range go,
 * the new range comes in their place when the old one was tracked; MREMAP_DONTUNMAP leaves the old range mapped;
 * old_len 0 (a second mapping of shared pages) keeps the old one. */
PL_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
    void *new_addr = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    if (__builtin_expect(!ready(), 0) || !real.mremap || pl_tl_guard || tl_in_mr || tl_in_alloc || !mr.t.r) {
        if (real.mremap) return real.mremap(old, old_len, new_len, flags, new_addr);
        return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
    }
    mr_delta_t d = {0, 0};
    mr_lock();
    uintptr_t o_lo = (uintptr_t)old, o_hi = o_lo + page_up(old_len);
    bool tracked = mr_overlap_locked(o_lo, old_len ? o_hi : o_lo + 1) > 0;
    void *p = real.mremap(old, old_len, new_len, flags, new_addr);
    if (p != MAP_FAILED) {
        if (old_len && !(flags & MREMAP_DONTUNMAP)) mr_cut_locked(o_lo, o_hi, &d);
        uintptr_t n_lo = (uintptr_t)p, n_hi = n_lo + page_up(new_len);
        if (tracked) mr_add_locked(n_lo, n_hi, &d);
        else mr_cut_locked(n_lo, n_hi, &d); /* an untracked mapping moved over tracked pages */
    }
    mr_unlock();
    mr_apply(&d);
    if (p != MAP_FAILED && tracked && p != old && ps_take(o_lo) &&
        atomic_load_explicit(&pl_g.active, memory_order_relaxed))
        sample_free(old);
    return p;
}

/* ------------------------------------------------------------------ fork */

void pl_heap_fork_prepare(void) {
    pthread_mutex_lock(&mr.mu);
    pthread_mutex_lock(&ps.mu);
}

void pl_heap_fork_parent(void) {
    pthread_mutex_unlock(&ps.mu);
    pthread_mutex_unlock(&mr.mu);
}

void pl_heap_fork_child(void) {
    pthread_mutex_init(&mr.mu, NULL);
    pl_heap_reset_sampling();
    /* Only this thread survives: every other slot is free again (its counts stay, the heap is inherited). */
    for (int i = 0; i < N_SLOTS; i++)
        if (&slots[i] != tl_slot) atomic_store(&slots[i].in_use, 0);
}
