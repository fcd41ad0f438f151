/* allocator/backend_sim.c: a simulated device in host memory, behind the backend contract of backend.h.
 *
 * Plain segments are anonymous mmaps. Expandable segments run for real: addr_reserve maps PROT_NONE address
 * space, map() replaces a page range of it with fresh anonymous pages (still PROT_NONE, like cuMemMap) and
 * set_access() makes them read-write; unmap() puts PROT_NONE address space back (contents are discarded, as on
 * a GPU after cuMemUnmap + cuMemRelease). With touch = false nothing is ever made accessible (address space
 * only, for fast replays of traces that never write) and no host mapping is made at all: addresses come from a
 * device address space private to the backend, [va_base, 2^64), handed out first fit from the lowest address and
 * reused after a free (granularity-aligned ranges). Best fit breaks ties between equal blocks by address, so with
 * host mappings a replay's results depended on where mmap put its segments, which other threads' mappings change
 * (plateau tune --jobs 2 ranked differently from run to run); in the private space the same calls get the same
 * addresses, whatever else the process does, and the order of addresses is the order inside the simulated device.
 * Invariants: used_bytes = sum of live plain segments + live physical handles <= capacity_bytes.
 * Streams: events recorded on a held stream stay pending until the stream is released (record_stream tests);
 * stream_synchronize of a held stream returns -EDEADLK (it would never return).
 * Fault injection: the Nth mem_alloc / phys_create (fail_alloc_at) or the Nth map (fail_map_at) fails.
 * last_error names the failures the sim decides itself (injected faults, capacity, held streams) with their
 * arguments; misuse (-EINVAL) leaves it as it was.
 * Thread-safe: one mutex guards the counters, handles and stream table.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend.h"
#include "grow.h"

typedef struct sim_phys {
    size_t size_bytes;
    uintptr_t mapped_at; /* where map() put it (a handle is mapped at most once) */
} sim_phys_t;

typedef struct sim_stream {
    pl_stream_t stream;
    bool held;
    uint64_t n_recorded;  /* events recorded so far (sequence numbers 1..n) */
    uint64_t n_completed; /* events with seq <= this have completed */
} sim_stream_t;

typedef struct sim_event {
    uint32_t stream_idx;
    uint64_t seq;
} sim_event_t;

typedef struct sim_backend {
    pl_backend_t base;
    pl_sim_options_t opt;
    pthread_mutex_t mu;
    size_t used_bytes;   /* guarded by mu */
    uint64_t n_allocs;   /* mem_alloc + phys_create calls so far (fault injection), guarded by mu */
    uint64_t n_maps;     /* map calls so far, guarded by mu */
    sim_stream_t *streams; /* guarded by mu */
    uint32_t n_streams, cap_streams;
    /* touch = false: the free ranges of the private address space, sorted by address, never adjacent (merged);
     * guarded by mu */
    struct va_range { uint64_t lo, hi; } *va; /* [lo, hi) */
    size_t n_va, cap_va;
    char last_error[192]; /* the last failure the sim decided (see top), guarded by mu */
} sim_backend_t;

static sim_backend_t *sim_of(pl_backend_t *b) { return (sim_backend_t *)b; }

static int reserve_space(size_t size, uintptr_t *out) {
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return -ENOMEM;
    *out = (uintptr_t)p;
    return 0;
}

/* ---- the private address space (touch = false) ---- */

static uint64_t va_span(const sim_backend_t *s, size_t size) {
    uint64_t g = s->opt.granularity_bytes;
    return ((uint64_t)size + g - 1) / g * g;
}

/* First fit from the lowest address; mu held. */
static int va_take(sim_backend_t *s, size_t size, uintptr_t *out) {
    uint64_t span = va_span(s, size);
    if (span < size) return -ENOMEM;
    for (size_t i = 0; i < s->n_va; i++) {
        struct va_range *r = &s->va[i];
        if (r->hi - r->lo < span) continue;
        *out = (uintptr_t)r->lo;
        r->lo += span;
        if (r->lo == r->hi) {
            memmove(r, r + 1, (s->n_va - i - 1) * sizeof *r);
            s->n_va--;
        }
        return 0;
    }
    return -ENOMEM;
}

/* Give [addr, addr + span) back, merging with its neighbours; mu held. -EINVAL when it is not a taken range. */
static int va_give(sim_backend_t *s, uintptr_t addr, size_t size) {
    uint64_t lo = addr, hi = lo + va_span(s, size);
    if (lo < s->opt.va_base || hi < lo) return -EINVAL;
    size_t i = 0; /* first free range above lo */
    while (i < s->n_va && s->va[i].lo <= lo) i++;
    if ((i > 0 && s->va[i - 1].hi > lo) || (i < s->n_va && s->va[i].lo < hi)) return -EINVAL; /* overlaps free */
    bool left = i > 0 && s->va[i - 1].hi == lo, right = i < s->n_va && s->va[i].lo == hi;
    if (left && right) {
        s->va[i - 1].hi = s->va[i].hi;
        memmove(&s->va[i], &s->va[i + 1], (s->n_va - i - 1) * sizeof *s->va);
        s->n_va--;
    } else if (left) {
        s->va[i - 1].hi = hi;
    } else if (right) {
        s->va[i].lo = lo;
    } else {
        if (pl_grow((void **)&s->va, &s->cap_va, s->n_va + 1, sizeof *s->va)) return -ENOMEM;
        memmove(&s->va[i + 1], &s->va[i], (s->n_va - i) * sizeof *s->va);
        s->va[i] = (struct va_range){lo, hi};
        s->n_va++;
    }
    return 0;
}

static int va_reserve(sim_backend_t *s, size_t size, uintptr_t *out) {
    pthread_mutex_lock(&s->mu);
    int rc = va_take(s, size, out);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int va_release(sim_backend_t *s, uintptr_t addr, size_t size) {
    pthread_mutex_lock(&s->mu);
    int rc = va_give(s, addr, size);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Records the failure of an op in last_error and returns rc; mu held. */
static int note(sim_backend_t *s, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int note(sim_backend_t *s, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->last_error, sizeof s->last_error, fmt, ap);
    va_end(ap);
    return rc;
}

/* Count one device allocation (op names it) against fault injection and capacity; mu held. */
static int charge(sim_backend_t *s, const char *op, size_t size) {
    s->n_allocs++;
    if (s->opt.fail_alloc_at && s->n_allocs == s->opt.fail_alloc_at)
        return note(s, -ENOMEM, "sim %s(%zu bytes): injected failure (fail_alloc_at:%llu)", op, size,
                    (unsigned long long)s->opt.fail_alloc_at);
    if (size > s->opt.capacity_bytes - s->used_bytes)
        return note(s, -ENOMEM, "sim %s(%zu bytes): capacity %zu bytes, %zu in use", op, size,
                    s->opt.capacity_bytes, s->used_bytes);
    s->used_bytes += size;
    return 0;
}

static int sim_mem_alloc(pl_backend_t *b, size_t size, uintptr_t *out) {
    sim_backend_t *s = sim_of(b);
    if (size == 0) return -EINVAL;
    pthread_mutex_lock(&s->mu);
    int rc = charge(s, "mem_alloc", size);
    pthread_mutex_unlock(&s->mu);
    if (rc) return rc;
    if (!s->opt.touch) {
        pthread_mutex_lock(&s->mu);
        rc = va_take(s, size, out);
        if (rc) s->used_bytes -= size;
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        pthread_mutex_lock(&s->mu);
        s->used_bytes -= size;
        pthread_mutex_unlock(&s->mu);
        return -ENOMEM;
    }
    *out = (uintptr_t)p;
    return 0;
}

static int sim_mem_free(pl_backend_t *b, uintptr_t addr, size_t size) {
    sim_backend_t *s = sim_of(b);
    if (!s->opt.touch ? va_release(s, addr, size) != 0 : munmap((void *)addr, size) != 0) return -EINVAL;
    pthread_mutex_lock(&s->mu);
    s->used_bytes -= size;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int sim_granularity(pl_backend_t *b, size_t *out) {
    *out = sim_of(b)->opt.granularity_bytes;
    return 0;
}

static int sim_addr_reserve(pl_backend_t *b, size_t size, uintptr_t *out) {
    sim_backend_t *s = sim_of(b);
    if (size == 0 || size % s->opt.granularity_bytes) return -EINVAL;
    return s->opt.touch ? reserve_space(size, out) : va_reserve(s, size, out);
}

static int sim_addr_free(pl_backend_t *b, uintptr_t addr, size_t size) {
    sim_backend_t *s = sim_of(b);
    if (!s->opt.touch) return va_release(s, addr, size) ? -EINVAL : 0;
    return munmap((void *)addr, size) ? -EINVAL : 0;
}

static int sim_phys_create(pl_backend_t *b, size_t size, pl_phys_t *out) {
    sim_backend_t *s = sim_of(b);
    if (size == 0 || size % s->opt.granularity_bytes) return -EINVAL;
    sim_phys_t *h = calloc(1, sizeof *h);
    if (!h) return -ENOMEM;
    pthread_mutex_lock(&s->mu);
    int rc = charge(s, "phys_create", size);
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        free(h);
        return rc;
    }
    h->size_bytes = size;
    *out = (pl_phys_t)h;
    return 0;
}

static int sim_phys_release(pl_backend_t *b, pl_phys_t handle) {
    sim_backend_t *s = sim_of(b);
    sim_phys_t *h = (sim_phys_t *)handle;
    if (!h) return -EINVAL;
    /* As cuMemRelease: legal while mapped (the memory goes when the last mapping goes); the allocator always
     * unmaps first, so the capacity is returned here. */
    pthread_mutex_lock(&s->mu);
    s->used_bytes -= h->size_bytes;
    pthread_mutex_unlock(&s->mu);
    free(h);
    return 0;
}

static int sim_map(pl_backend_t *b, uintptr_t addr, size_t size, pl_phys_t handle) {
    sim_backend_t *s = sim_of(b);
    sim_phys_t *h = (sim_phys_t *)handle;
    if (!h || h->mapped_at || size != h->size_bytes || addr % s->opt.granularity_bytes) return -EINVAL;
    pthread_mutex_lock(&s->mu);
    s->n_maps++;
    bool fail = s->opt.fail_map_at && s->n_maps == s->opt.fail_map_at;
    if (fail)
        note(s, -ENOMEM, "sim map(0x%jx, %zu bytes): injected failure (fail_map_at:%llu)", (uintmax_t)addr, size,
             (unsigned long long)s->opt.fail_map_at);
    pthread_mutex_unlock(&s->mu);
    if (fail) return -ENOMEM;
    if (s->opt.touch) {
        /* Fresh pages, inaccessible until set_access (as cuMemMap). */
        void *p = mmap((void *)addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return -ENOMEM;
    }
    h->mapped_at = addr;
    return 0;
}

static int sim_unmap(pl_backend_t *b, uintptr_t addr, size_t size) {
    sim_backend_t *s = sim_of(b);
    if (addr % s->opt.granularity_bytes || size % s->opt.granularity_bytes) return -EINVAL;
    if (s->opt.touch) {
        /* Drop the pages, keep the reservation. */
        void *p = mmap((void *)addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return -ENOMEM;
    }
    return 0;
}

static int sim_set_access(pl_backend_t *b, uintptr_t addr, size_t size) {
    if (!sim_of(b)->opt.touch) return 0;
    return mprotect((void *)addr, size, PROT_READ | PROT_WRITE) ? -errno : 0;
}

static int sim_mem_info(pl_backend_t *b, size_t *out_free, size_t *out_total) {
    sim_backend_t *s = sim_of(b);
    pthread_mutex_lock(&s->mu);
    *out_free = s->opt.capacity_bytes - s->used_bytes;
    *out_total = s->opt.capacity_bytes;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* mu held. Returns the index of `stream`, adding it when new, or UINT32_MAX on ENOMEM. */
static uint32_t stream_index(sim_backend_t *s, pl_stream_t stream) {
    for (uint32_t i = 0; i < s->n_streams; i++)
        if (s->streams[i].stream == stream) return i;
    if (s->n_streams == s->cap_streams) {
        uint32_t cap = s->cap_streams ? 2 * s->cap_streams : 8;
        sim_stream_t *n = realloc(s->streams, cap * sizeof *n);
        if (!n) return UINT32_MAX;
        s->streams = n;
        s->cap_streams = cap;
    }
    s->streams[s->n_streams] = (sim_stream_t){.stream = stream};
    return s->n_streams++;
}

static int sim_event_record(pl_backend_t *b, pl_stream_t stream, pl_event_t *out) {
    sim_backend_t *s = sim_of(b);
    sim_event_t *e = malloc(sizeof *e);
    if (!e) return -ENOMEM;
    pthread_mutex_lock(&s->mu);
    uint32_t i = stream_index(s, stream);
    if (i == UINT32_MAX) {
        pthread_mutex_unlock(&s->mu);
        free(e);
        return -ENOMEM;
    }
    sim_stream_t *st = &s->streams[i];
    e->stream_idx = i;
    e->seq = ++st->n_recorded;
    if (!st->held) st->n_completed = st->n_recorded;
    pthread_mutex_unlock(&s->mu);
    *out = (pl_event_t)e;
    return 0;
}

static int sim_event_query(pl_backend_t *b, pl_event_t ev) {
    sim_backend_t *s = sim_of(b);
    sim_event_t *e = (sim_event_t *)ev;
    pthread_mutex_lock(&s->mu);
    bool done = e->seq <= s->streams[e->stream_idx].n_completed;
    pthread_mutex_unlock(&s->mu);
    return done ? 0 : -EBUSY;
}

static int sim_event_synchronize(pl_backend_t *b, pl_event_t ev) {
    /* A held stream only completes when a test releases it: waiting would block forever. */
    if (!sim_event_query(b, ev)) return 0;
    sim_backend_t *s = sim_of(b);
    pthread_mutex_lock(&s->mu);
    note(s, -EDEADLK, "sim event_synchronize: stream 0x%jx is held",
         (uintmax_t)s->streams[((sim_event_t *)ev)->stream_idx].stream);
    pthread_mutex_unlock(&s->mu);
    return -EDEADLK;
}

static int sim_stream_synchronize(pl_backend_t *b, pl_stream_t stream) {
    /* A held stream has work that only completes when a test releases it: waiting would block forever. */
    sim_backend_t *s = sim_of(b);
    bool held = false;
    pthread_mutex_lock(&s->mu);
    for (uint32_t i = 0; i < s->n_streams; i++)
        if (s->streams[i].stream == stream) held = s->streams[i].held;
    if (held) note(s, -EDEADLK, "sim stream_synchronize(stream 0x%jx): the stream is held", (uintmax_t)stream);
    pthread_mutex_unlock(&s->mu);
    return held ? -EDEADLK : 0;
}

static void sim_last_error(pl_backend_t *b, char *buf, size_t len) {
    sim_backend_t *s = sim_of(b);
    if (!len) return;
    pthread_mutex_lock(&s->mu);
    snprintf(buf, len, "%s", s->last_error);
    pthread_mutex_unlock(&s->mu);
}

static void sim_event_destroy(pl_backend_t *b, pl_event_t ev) {
    (void)b;
    free((sim_event_t *)ev);
}

static void sim_destroy(pl_backend_t *b) {
    sim_backend_t *s = sim_of(b);
    pthread_mutex_destroy(&s->mu);
    free(s->streams);
    free(s->va);
    free(s);
}

static const pl_backend_ops_t sim_ops = {
    .name = "sim",
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .granularity = sim_granularity,
    .addr_reserve = sim_addr_reserve,
    .addr_free = sim_addr_free,
    .phys_create = sim_phys_create,
    .phys_release = sim_phys_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .set_access = sim_set_access,
    .mem_info = sim_mem_info,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_synchronize = sim_event_synchronize,
    .event_destroy = sim_event_destroy,
    .stream_synchronize = sim_stream_synchronize,
    .last_error = sim_last_error,
    .destroy = sim_destroy,
};

PL_API void pl_sim_options_default(pl_sim_options_t *opt) {
    memset(opt, 0, sizeof *opt);
    opt->capacity_bytes = (size_t)80 << 30;
    opt->granularity_bytes = (size_t)2 << 20;
    opt->touch = true;
}

PL_API int pl_backend_sim_create(const pl_sim_options_t *opt, pl_backend_t **out) {
    pl_sim_options_t o;
    if (opt)
        o = *opt;
    else
        pl_sim_options_default(&o);
    if (o.granularity_bytes == 0 || (o.granularity_bytes & (o.granularity_bytes - 1)) ||
        o.granularity_bytes % 4096 || o.capacity_bytes == 0)
        return -EINVAL;
    if (!o.va_base) o.va_base = PL_SIM_VA_BASE;
    if (o.va_base % o.granularity_bytes || o.va_base > UINT64_MAX - o.granularity_bytes) return -EINVAL;
    sim_backend_t *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->base.ops = &sim_ops;
    s->base.device = 0;
    s->opt = o;
    if (!o.touch) { /* one free range: the whole space above va_base (granularity-aligned) */
        s->va = malloc(sizeof *s->va);
        if (!s->va) {
            free(s);
            return -ENOMEM;
        }
        s->va[0] = (struct va_range){o.va_base, UINT64_MAX / o.granularity_bytes * o.granularity_bytes};
        s->n_va = s->cap_va = 1;
    }
    pthread_mutex_init(&s->mu, NULL);
    *out = &s->base;
    return 0;
}

PL_API void pl_backend_sim_hold_stream(pl_backend_t *b, pl_stream_t stream, bool held) {
    if (!b || b->ops != &sim_ops) return;
    sim_backend_t *s = sim_of(b);
    pthread_mutex_lock(&s->mu);
    uint32_t i = stream_index(s, stream);
    if (i != UINT32_MAX) {
        s->streams[i].held = held;
        if (!held) s->streams[i].n_completed = s->streams[i].n_recorded;
    }
    pthread_mutex_unlock(&s->mu);
}

PL_API void pl_backend_destroy(pl_backend_t *b) {
    if (b) b->ops->destroy(b);
}
