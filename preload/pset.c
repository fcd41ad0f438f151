/* Sampled-pointer set (pset.h): open addressing with linear probing and tombstones, at most half full; a rebuild
 * into the other table drops the tombstones. Lock-free readers (pl_pset_take's first probe) see the sequence
 * number odd or changed and retry; only a probe that finds p takes the mutex to remove it. */
#include "pset.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PS_TOMB ((uintptr_t)1)

/* The raw system call: in the preload, mmap is interposed and would count these pages as the program's. */
static void *map_noreserve(size_t n) {
    void *p = (void *)syscall(SYS_mmap, NULL, n, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return (intptr_t)p < 0 && (intptr_t)p > -4096 ? NULL : p;
}

/* Fresh zero pages in place of t (falls back to memset when the kernel refuses). */
static void zero_table(uintptr_t *t, uint32_t slots) {
    if (syscall(SYS_mmap, t, slots * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == -1)
        memset(t, 0, slots * sizeof(uintptr_t));
}

static void filter_add_locked(pl_pset_t *s, uintptr_t p, int d) {
    _Atomic uint8_t *c = &s->filter[pl_pset_filter_hash(p)];
    uint8_t v = atomic_load_explicit(c, memory_order_relaxed);
    if (v == 255 || (d < 0 && v == 0)) return;
    atomic_store_explicit(c, (uint8_t)(v + d), memory_order_relaxed);
}

static inline uint32_t slot_hash(const pl_pset_t *s, uintptr_t p) {
    uint64_t h = (uint64_t)p >> 4;
    h *= 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 40) & (s->slots - 1);
}

static bool init_locked(pl_pset_t *s, uint32_t slots) {
    if (s->tabs[0]) return true;
    if (atomic_load(&s->failed)) return false;
    uint32_t n = PL_PSET_MIN_SLOTS;
    while (n < slots && n < (1u << 31)) n <<= 1;
    s->slots = n;
    s->tabs[0] = map_noreserve(n * sizeof(uintptr_t));
    s->tabs[1] = map_noreserve(n * sizeof(uintptr_t));
    if (!s->tabs[0] || !s->tabs[1]) {
        for (int i = 0; i < 2; i++)
            if (s->tabs[i]) syscall(SYS_munmap, s->tabs[i], n * sizeof(uintptr_t));
        s->tabs[0] = s->tabs[1] = NULL;
        atomic_store(&s->failed, true);
        return false;
    }
    atomic_store(&s->cur, s->tabs[0]);
    return true;
}

static bool probe(const pl_pset_t *s, const uintptr_t *t, uintptr_t p) {
    for (uint32_t i = slot_hash(s, p), n = 0; n < s->slots; i = (i + 1) & (s->slots - 1), n++) {
        uintptr_t k = __atomic_load_n(&t[i], __ATOMIC_RELAXED);
        if (k == p) return true;
        if (k == 0) return false;
    }
    return false;
}

/* Rebuild into the other table without tombstones; lock-free readers see seq change and retry. */
static void rebuild_locked(pl_pset_t *s) {
    uintptr_t *from = atomic_load(&s->cur), *to = from == s->tabs[0] ? s->tabs[1] : s->tabs[0];
    atomic_fetch_add(&s->seq, 1);
    zero_table(to, s->slots);
    uint32_t used = 0;
    for (uint32_t i = 0; i < s->slots; i++) {
        uintptr_t k = from[i];
        if (k <= PS_TOMB) continue;
        uint32_t j = slot_hash(s, k);
        while (to[j]) j = (j + 1) & (s->slots - 1);
        to[j] = k;
        used++;
    }
    atomic_store(&s->cur, to);
    s->used = used;
    s->tombs = 0;
    atomic_fetch_add(&s->seq, 1);
}

int pl_pset_insert(pl_pset_t *s, uintptr_t p, uint32_t slots) {
    pthread_mutex_lock(&s->mu);
    int rc = init_locked(s, slots) ? 1 : -ENOMEM;
    if (rc == 1 && (s->used + s->tombs + 1) * 2 > s->slots) rebuild_locked(s);
    if (rc == 1 && (s->used + 1) * 2 > s->slots) rc = 0; /* full of live samples: do not sample */
    if (rc == 1) {
        uintptr_t *t = atomic_load(&s->cur);
        uint32_t i = slot_hash(s, p);
        while (t[i] > PS_TOMB && t[i] != p) i = (i + 1) & (s->slots - 1);
        if (t[i] == PS_TOMB) s->tombs--;
        if (t[i] != p) {
            s->used++;
            atomic_fetch_add(&s->live, 1);
            filter_add_locked(s, p, +1);
        }
        __atomic_store_n(&t[i], p, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

bool pl_pset_take(pl_pset_t *s, uintptr_t p) {
    if (atomic_load_explicit(&s->live, memory_order_relaxed) == 0 || !pl_pset_maybe(s, p)) return false;
    bool maybe;
    for (;;) {
        unsigned s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (s1 & 1) {
            maybe = true;
            break;
        }
        uintptr_t *t = atomic_load_explicit(&s->cur, memory_order_acquire);
        maybe = t && probe(s, t, p);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) == s1) break;
    }
    if (!maybe) return false;
    bool found = false;
    pthread_mutex_lock(&s->mu);
    uintptr_t *t = atomic_load(&s->cur);
    if (t) {
        for (uint32_t i = slot_hash(s, p), n = 0; n < s->slots; i = (i + 1) & (s->slots - 1), n++) {
            if (t[i] == 0) break;
            if (t[i] == p) {
                __atomic_store_n(&t[i], PS_TOMB, __ATOMIC_RELEASE);
                s->used--;
                s->tombs++;
                atomic_fetch_sub(&s->live, 1);
                filter_add_locked(s, p, -1);
                found = true;
                break;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    return found;
}

long pl_pset_live(const pl_pset_t *s) { return atomic_load_explicit(&s->live, memory_order_relaxed); }

void pl_pset_reset(pl_pset_t *s) {
    pthread_mutex_init(&s->mu, NULL);
    if (!s->tabs[0]) return;
    for (int i = 0; i < 2; i++) zero_table(s->tabs[i], s->slots);
    atomic_store(&s->cur, s->tabs[0]);
    memset((void *)s->filter, 0, sizeof s->filter);
    s->used = s->tombs = 0;
    atomic_store(&s->live, 0);
    atomic_store(&s->seq, 0);
}
