/* Stack table (see stack.h). Open addressing with linear probing over power-of-two slot arrays; a slot
 * holds a stack id (0 = empty), and the stack's frames live in one append-only frame region indexed by
 * id. Nothing is ever deleted, so lookups need no tombstones. Publication: `n_stacks` is stored with
 * release after the entry is complete, so pl_stack_get on ids <= pl_stack_count is safe without the lock. */
#include "stack.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include <plateau/trace.h>

#include "hash.h"

typedef struct {
    uint64_t hash;
    uint64_t frame_off;   /* index into frames[] */
    uint32_t n_frames;
    uint32_t pad;
} entry_t;

struct pl_stack_table {
    pthread_mutex_t mu;       /* guards slots, entries, frames appends */
    uint32_t max_stacks;
    uint32_t slot_mask;       /* slots has slot_mask + 1 entries (2x max_stacks, power of two) */
    uint32_t *slots;          /* stack ids */
    entry_t *entries;         /* [max_stacks + 1], index = id */
    uint64_t *frames;
    uint64_t frame_cap, frame_used;
    _Atomic uint32_t n_stacks;
    uint32_t pc_mask;         /* PC set (writer thread only) */
    uint64_t *pcs;
    uint32_t n_pcs;
    uint64_t mod_base[256];   /* module set (writer thread only); id = index + 1 */
    uint32_t n_mods;
    size_t bytes_slots, bytes_entries, bytes_frames, bytes_pcs;
};

static void *map_lazy(size_t n) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t p = 1;
    while (p < n && p < (1u << 30)) p <<= 1;
    return p;
}

int pl_stack_create(uint32_t max_stacks, uint32_t max_pcs, pl_stack_table_t **out) {
    if (!max_stacks) max_stacks = 1u << 18;
    if (!max_pcs) max_pcs = 1u << 20;
    pl_stack_table_t *t = map_lazy(sizeof *t);
    if (!t) return -ENOMEM;
    t->max_stacks = max_stacks;
    uint32_t n_slots = pow2_at_least((uint64_t)max_stacks * 2);
    t->slot_mask = n_slots - 1;
    t->bytes_slots = (size_t)n_slots * sizeof(uint32_t);
    t->bytes_entries = (size_t)(max_stacks + 1) * sizeof(entry_t);
    t->frame_cap = (uint64_t)max_stacks * 32; /* average 32 frames per stack */
    t->bytes_frames = t->frame_cap * sizeof(uint64_t);
    uint32_t n_pc_slots = pow2_at_least((uint64_t)max_pcs * 2);
    t->pc_mask = n_pc_slots - 1;
    t->bytes_pcs = (size_t)n_pc_slots * sizeof(uint64_t);
    t->slots = map_lazy(t->bytes_slots);
    t->entries = map_lazy(t->bytes_entries);
    t->frames = map_lazy(t->bytes_frames);
    t->pcs = map_lazy(t->bytes_pcs);
    if (!t->slots || !t->entries || !t->frames || !t->pcs) {
        pl_stack_destroy(t);
        return -ENOMEM;
    }
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return 0;
}

void pl_stack_destroy(pl_stack_table_t *t) {
    if (!t) return;
    if (t->slots) munmap(t->slots, t->bytes_slots);
    if (t->entries) munmap(t->entries, t->bytes_entries);
    if (t->frames) munmap(t->frames, t->bytes_frames);
    if (t->pcs) munmap(t->pcs, t->bytes_pcs);
    munmap(t, sizeof *t);
}

uint32_t pl_stack_intern(pl_stack_table_t *t, const uint64_t *pcs, uint32_t n, bool *is_new) {
    *is_new = false;
    if (n == 0 || n > PL_TRACE_MAX_FRAMES) return 0;
    uint64_t h = pl_hash_pcs(pcs, n);
    pthread_mutex_lock(&t->mu);
    uint32_t id = 0;
    for (uint32_t s = (uint32_t)h & t->slot_mask;; s = (s + 1) & t->slot_mask) {
        uint32_t cand = t->slots[s];
        if (cand == 0) {
            uint32_t count = atomic_load_explicit(&t->n_stacks, memory_order_relaxed);
            if (count >= t->max_stacks || t->frame_used + n > t->frame_cap) break;
            id = count + 1;
            entry_t *e = &t->entries[id];
            e->hash = h;
            e->n_frames = n;
            e->frame_off = t->frame_used;
            memcpy(t->frames + t->frame_used, pcs, n * sizeof(uint64_t));
            t->frame_used += n;
            t->slots[s] = id;
            atomic_store_explicit(&t->n_stacks, id, memory_order_release);
            *is_new = true;
            break;
        }
        entry_t *e = &t->entries[cand];
        if (e->hash == h && e->n_frames == n && !memcmp(t->frames + e->frame_off, pcs, n * sizeof(uint64_t))) {
            id = cand;
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return id;
}

uint32_t pl_stack_count(pl_stack_table_t *t) { return atomic_load_explicit(&t->n_stacks, memory_order_acquire); }

uint32_t pl_stack_get(pl_stack_table_t *t, uint32_t id, const uint64_t **pcs) {
    if (id == 0 || id > pl_stack_count(t)) return 0;
    *pcs = t->frames + t->entries[id].frame_off;
    return t->entries[id].n_frames;
}

bool pl_stack_pc_insert(pl_stack_table_t *t, uint64_t pc) {
    if (pc == 0) return false; /* 0 marks an empty slot */
    if ((uint64_t)t->n_pcs * 2 >= (uint64_t)t->pc_mask + 1) return false;
    for (uint32_t s = (uint32_t)pl_hash_mix64(pc) & t->pc_mask;; s = (s + 1) & t->pc_mask) {
        if (t->pcs[s] == pc) return false;
        if (t->pcs[s] == 0) {
            t->pcs[s] = pc;
            t->n_pcs++;
            return true;
        }
    }
}

uint32_t pl_stack_module_id(pl_stack_table_t *t, uint64_t base, bool *is_new) {
    *is_new = false;
    for (uint32_t i = 0; i < t->n_mods; i++)
        if (t->mod_base[i] == base) return i + 1;
    if (t->n_mods >= sizeof t->mod_base / sizeof t->mod_base[0]) return 0;
    t->mod_base[t->n_mods++] = base;
    *is_new = true;
    return t->n_mods;
}

/* Zero a region by mapping fresh pages over it: memset would touch every page of the lazy tables. */
static void rezero(void *p, size_t n) {
    if (mmap(p, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
        MAP_FAILED)
        memset(p, 0, n);
}

void pl_stack_reset(pl_stack_table_t *t) {
    pthread_mutex_init(&t->mu, NULL);
    rezero(t->slots, t->bytes_slots);
    rezero(t->pcs, t->bytes_pcs);
    t->frame_used = 0;
    t->n_pcs = 0;
    t->n_mods = 0;
    atomic_store(&t->n_stacks, 0);
}

void pl_stack_lock(pl_stack_table_t *t) { pthread_mutex_lock(&t->mu); }
void pl_stack_unlock(pl_stack_table_t *t) { pthread_mutex_unlock(&t->mu); }
