/* reports/extract: ingest, one streaming pass of record handlers per trace -> a process row of the report and its
 * extras (see extract.h for the contract); listing a run directory; the run they make is assembled by run.c.
 *
 * Invariants: per metric, bins are sorted by key and at most max_points; a key is a step (records with a step field
 * use it, periodic samples belong to the step in progress = last step record + 1) or, for a process without step
 * records, a time bucket of BUCKET_NS since the trace started. When the bins are full the bin width doubles and
 * neighbours merge (min of minima, max of maxima). Address maps (sampled host allocations, device blocks, device
 * segments, and the device sites' blocks and mappings by stack; common/table.h) and the stack/frame/module tables
 * are bounded; what does not fit is counted, never allocated.
 */
#include "extract.h"
#include "alive.h"
#include "grow.h"
#include "period.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pysites.h"
#include "run.h"
#include "ingest.h"
#include "table.h"

#define BUCKET_NS 1000000000LL       /* time bucket for processes without steps, before widening */
#define MAX_KEY (INT64_MAX / 4)
#define MAP_MAX_ENTRIES (1u << 19)    /* per address map: at most 2^20 slots of 24 B */
#define MAX_STACKS 16384u
#define MAX_DEV_STACKS 4096u           /* stacks that allocated device memory (the device sites) */
#define STACK_PCS 16u                  /* native frames read per stack (innermost first) */
#define STACK_HIST 32u
#define STACK_PY 32u                  /* Python frames kept per stack (innermost first) */
#define MAX_ALLOCATORS 16u
#define MAX_TENSOR_DEVICES 64 /* CUDA devices whose live tensor counts are kept (allocator/pluggable.c's bound) */
#define MAX_BLOCK_BYTES (1ull << 40)

/* ---- bounded per-metric bins ---- */

typedef struct bin {
    int64_t bin;      /* key / stride * stride: what bins are sorted and matched by */
    int64_t key;      /* smallest key merged into the bin (the point's step) */
    int64_t t_ns;     /* time of the bin's first sample */
    double lo, hi;
} bin_t;

typedef struct agg {
    bin_t *b;
    size_t n, cap, max;
    int64_t stride;   /* keys per bin */
} agg_t;

/* Fold samples ranging lo..hi, the earliest at key / t_ns, into bin d: min/max, and the earliest key with its time. */
static void bin_fold(bin_t *d, int64_t key, int64_t t_ns, double lo, double hi) {
    if (lo < d->lo) d->lo = lo;
    if (hi > d->hi) d->hi = hi;
    if (key < d->key) {
        d->key = key;
        d->t_ns = t_ns;
    }
}

static void agg_halve(agg_t *a) {
    a->stride = a->stride > MAX_KEY / 2 ? MAX_KEY : a->stride * 2;
    size_t w = 0;
    for (size_t i = 0; i < a->n; i++) {
        int64_t k = a->b[i].bin / a->stride * a->stride;
        if (w && a->b[w - 1].bin == k) {
            bin_fold(&a->b[w - 1], a->b[i].key, a->b[i].t_ns, a->b[i].lo, a->b[i].hi);
        } else {
            a->b[w] = a->b[i];
            a->b[w].bin = k;
            w++;
        }
    }
    a->n = w;
}

static int agg_add(agg_t *a, int64_t key, int64_t t_ns, double v) {
    if (!isfinite(v)) return 0;
    if (key < 0) key = 0;
    if (key > MAX_KEY) key = MAX_KEY;
    if (a->stride < 1) a->stride = 1;
    int64_t k = key / a->stride * a->stride;
    /* mostly in order: the last bin first, then binary search */
    size_t pos = a->n;
    if (a->n && a->b[a->n - 1].bin == k) {
        bin_fold(&a->b[a->n - 1], key, t_ns, v, v);
        return 0;
    }
    if (a->n && a->b[a->n - 1].bin > k) {
        size_t lo = 0, hi = a->n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (a->b[mid].bin < k) lo = mid + 1;
            else hi = mid;
        }
        pos = lo;
        if (pos < a->n && a->b[pos].bin == k) {
            bin_fold(&a->b[pos], key, t_ns, v, v);
            return 0;
        }
    }
    if (a->n == a->max) {
        while (a->n == a->max) agg_halve(a);
        return agg_add(a, key, t_ns, v);
    }
    if (a->n == a->cap) {
        size_t nc = pl_grow_cap(a->cap, a->n + 1, 64, sizeof *a->b);
        if (nc > a->max) nc = a->max; /* never past the bound: a->n < a->max here */
        bin_t *nb = nc ? realloc(a->b, nc * sizeof *nb) : NULL;
        if (!nb) return -ENOMEM;
        a->b = nb;
        a->cap = nc;
    }
    memmove(a->b + pos + 1, a->b + pos, (a->n - pos) * sizeof *a->b);
    a->b[pos] = (bin_t){k, key, t_ns, v, v};
    a->n++;
    return 0;
}

/* ---- bounded address and id maps: common/table.h, a value of (u64, u32) per key; key 0 is never stored ---- */

typedef struct slot { uint64_t val; uint32_t aux; } slot_t;

static void map_init(pl_table_t *m) { pl_table_init(m, sizeof(slot_t), MAP_MAX_ENTRIES); }

/* 0 stored/updated, 1 full (not stored), -ENOMEM */
static int map_put(pl_table_t *m, uint64_t key, uint64_t val, uint32_t aux) {
    void *p;
    int rc = pl_table_put(m, key, &p);
    if (rc) return rc;
    slot_t *v = p;
    v->val = val;
    v->aux = aux;
    return 0;
}

/* Remove key, its value into *out; false when absent. */
static bool map_take(pl_table_t *m, uint64_t key, slot_t *out) {
    slot_t *f = pl_table_get(m, key);
    if (!f) return false;
    *out = *f;
    pl_table_del(m, f);
    return true;
}

/* ---- stacks, frames, modules ---- */

/* live bytes of one stack over a key (step or time): at most STACK_HIST points, each the exact value at its key
 * (after every change with that key); points but the last are at least `gap` keys apart, and the last slides
 * forward to the newest key within its gap. So "value at key K" (hist_at) may be a little early, never late: a change
 * after K (a program's teardown freeing what its loop kept, after the last step) never leaks into the value at K. */
typedef struct hist { int64_t key[STACK_HIST]; double live[STACK_HIST]; uint32_t n; int64_t gap; } hist_t;

static void hist_add(hist_t *h, int64_t key, double live) {
    if (h->gap < 1) h->gap = 1;
    if (h->n && key <= h->key[h->n - 1]) { /* the same key, or out of order: the last point takes the value */
        h->live[h->n - 1] = live;
        return;
    }
    if (h->n >= 2 && key - h->key[h->n - 2] < h->gap) { /* the last point slides forward within its gap */
        h->key[h->n - 1] = key;
        h->live[h->n - 1] = live;
        return;
    }
    if (h->n == STACK_HIST) { /* keep every other point (the later of each pair, whole), widen the gap */
        uint32_t w = 0;
        for (uint32_t i = 1; i < h->n; i += 2, w++) {
            h->key[w] = h->key[i];
            h->live[w] = h->live[i];
        }
        h->n = w;
        h->gap = h->gap > MAX_KEY / 2 ? MAX_KEY : h->gap * 2;
    }
    h->key[h->n] = key;
    h->live[h->n] = live;
    h->n++;
}

/* live bytes at the end of key k: the last point at or before k (0 before the first) */
static double hist_at(const hist_t *h, int64_t k) {
    double v = 0;
    for (uint32_t i = 0; i < h->n && h->key[i] <= k; i++) v = h->live[i];
    return v;
}

/* live bytes of one stack after the changes of each of its last RING_KEYS distinct step keys: exact values at the
 * end of any of the last RING_KEYS - 1 steps (the end-of-run view's "last steps": PL_EXTRACT_END_STEPS < it). */
#define RING_KEYS 16u
typedef struct ring { int64_t key[RING_KEYS]; double live[RING_KEYS]; uint32_t head, n; bool wrapped; } ring_t;

static void ring_add(ring_t *g, int64_t key, double live) {
    uint32_t last = (g->head + RING_KEYS - 1) % RING_KEYS;
    if (g->n && key <= g->key[last]) { /* keys never decrease (steps only advance): the same key */
        g->live[last] = live;
        return;
    }
    g->key[g->head] = key;
    g->live[g->head] = live;
    g->head = (g->head + 1) % RING_KEYS;
    if (g->n < RING_KEYS) g->n++;
    else g->wrapped = true;
}

/* live bytes at the end of step k: after the last change keyed <= k; 0 before the first change; NAN when that
 * change fell out of the ring */
static double ring_at(const ring_t *g, int64_t k) {
    for (uint32_t i = 0; i < g->n; i++) {
        uint32_t j = (g->head + RING_KEYS - 1 - i) % RING_KEYS;
        if (g->key[j] <= k) return g->live[j];
    }
    return g->wrapped ? NAN : 0;
}

typedef struct stack {
    uint32_t id;           /* its frames are ingest's (stack_frames) */
    double live_bytes;     /* weighted */
    uint64_t n_live;
    hist_t by_step, by_time; /* time keys in BUCKET_NS */
    ring_t last;             /* by step key */
    double win_from, win_to; /* exact live bytes at the end of the window's steps (opts.window): changes keyed <= */
    double at_uncaught;      /* live bytes when the bootstrap recorded an uncaught exception (state.uncaught_step) */
} stack_t_;

/* ---- per-trace state ---- */

enum { A_RSS, A_ANON, A_FILE, A_SHMEM, A_PSS, A_HEAP, A_HEAPN, A_CGROUP, A_DEVUSED,
       A_ST_ALLOC, A_ST_RES, A_ST_TENS, A_EV_ALLOC, A_EV_TENS, A_EV_RES, A_EV_DRV, A_OTHER,
       A_PY_TENS, A_ST_ACTIVE, A_ST_SPLIT, A_PY_TENS_CUDA, A_PY_AUTOGRAD, A__N };

typedef struct side { agg_t a[A__N]; } side_t; /* one set keyed by step, one by time bucket */

/* the last snapshot of one allocator on one device; active/split/retries/ooms -1 when not recorded */
typedef struct astat { uint32_t id; int32_t dev; int64_t alloc, res, tens, active, split, retries, ooms; } astat_t;

typedef struct state {
    side_t by_step, by_time;
    int64_t cur_step;        /* last step record */
    int64_t t0;              /* CLOCK_MONOTONIC at trace start */
    int64_t start_realtime_ns; /* CLOCK_REALTIME at process start (0 unknown): source files changed later are not quoted */
    uint64_t sample_bytes;
    uint64_t w_size[64];     /* weight()'s cache, direct-mapped by size: the size (+1, 0 = empty) ... */
    double w_val[64];        /* ... and its weight (sites allocate the same sizes again and again) */
    pl_table_t host, blocks, segs, stack_ix;
    stack_t_ *stacks;        /* what each stack holds; its frames are in the ingest's table */
    size_t n_stacks;
    /* the device sites: the hooks' blocks and mappings that came with a stack (address -> size, stack id) and what
     * each such stack holds on the device (its own table: a stack's host bytes are another account) */
    pl_table_t dev_blocks, dev_segs, dstack_ix;
    stack_t_ *dstacks;
    size_t n_dstacks;
    pl_ingest_t *in;         /* the one reader's tables: stacks, frames, modules, Python frames */
    astat_t astats[MAX_ALLOCATORS];
    size_t n_astats;
    bool seen_stats, seen_alloc_src, seen_map, seen_drv, seen_active, seen_split, seen_py_tensors;
    bool seen_stats_alloc;   /* a stats record with allocated bytes and blocks (not NVML's, which has reserved only) */
    /* live torch.Tensor objects per CUDA device in the bootstrap's latest count (on_tensor_count) */
    int64_t cuda_tensors[MAX_TENSOR_DEVICES];
    bool cuda_pending, seen_cuda_tensors;
    bool seen_autograd;      /* a host count with its autograd figures (n_segments: nodes) */
    bool seen_saved;         /* one of them read the saved tensors */
    int64_t autograd_bytes, autograd_n, autograd_flags; /* the last such count's saved bytes, storages, flags */
    uint64_t cuda_step;      /* step and time of the pending count */
    int64_t cuda_t;
    int64_t ev_alloc, ev_tens, ev_res, ev_drv;  /* running device totals from events */
    double last_reserved;    /* latest reserved bytes (stats or events), NAN unknown */
    int64_t uncaught_step;   /* steps completed when the uncaught exception was recorded, -1 none */
    pl_extract_proc_t *xp;
    pl_report_t *r;
    const pl_extract_opts_t *o;
} state_t;

static int64_t clamp_key(uint64_t v) { return v > (uint64_t)MAX_KEY ? MAX_KEY : (int64_t)v; }

static int64_t rel_t(const state_t *s, int64_t t) {
    if (t <= s->t0) return 0;
    uint64_t d = (uint64_t)t - (uint64_t)s->t0; /* no signed overflow on hostile clocks */
    return d > (uint64_t)MAX_KEY ? MAX_KEY : (int64_t)d;
}

/* Add a sample: step `step` (0 = in progress) at time t. since_step filters the step side only: a trace without
 * step records is reported by time, whole. */
static int put(state_t *s, int which, uint64_t step, int64_t t, double v) {
    int64_t k = step ? clamp_key(step) : (s->cur_step < MAX_KEY ? s->cur_step + 1 : MAX_KEY);
    int64_t rt = rel_t(s, t);
    if (s->o->since_step <= 0 || k >= s->o->since_step) {
        int rc = agg_add(&s->by_step.a[which], k, rt, v);
        if (rc) return rc;
    }
    return agg_add(&s->by_time.a[which], rt / BUCKET_NS, rt, v);
}

static bool na(uint64_t v) { return v == PL_TRACE_NA; }

static double weight(state_t *s, uint64_t size) {
    if (!s->sample_bytes) return (double)size;
    unsigned h = (unsigned)((size >> 4) ^ (size >> 10) ^ (size >> 16)) & 63;
    if (s->w_size[h] == size + 1) return s->w_val[h];
    double p = -expm1(-(double)size / (double)s->sample_bytes);
    double w = p > 0 ? (double)size / p : (double)size;
    s->w_size[h] = size + 1;
    s->w_val[h] = w;
    return w;
}

/* The account of stack id in a set of stacks (ix: id + 1 -> index into *v, at most max), made when create. */
static stack_t_ *set_get(pl_table_t *ix, stack_t_ **v, size_t *n, size_t max, uint32_t id, bool create) {
    slot_t *f = pl_table_get(ix, (uint64_t)id + 1);
    if (f) return &(*v)[f->val];
    if (!create || *n >= max) return NULL;
    if (!*v) {
        *v = calloc(max, sizeof **v); /* lazily, only for traces with stacks */
        if (!*v) return NULL;
    }
    if (map_put(ix, (uint64_t)id + 1, *n, 0)) return NULL;
    stack_t_ *st = &(*v)[(*n)++];
    memset(st, 0, sizeof *st);
    st->id = id;
    return st;
}

static stack_t_ *stack_get(state_t *s, uint32_t id, bool create) {
    return set_get(&s->stack_ix, &s->stacks, &s->n_stacks, MAX_STACKS, id, create);
}

/* what a stack holds on the device (the device sites) */
static stack_t_ *dstack_get(state_t *s, uint32_t id, bool create) {
    return set_get(&s->dstack_ix, &s->dstacks, &s->n_dstacks, MAX_DEV_STACKS, id, create);
}

static void stack_note(state_t *s, stack_t_ *st, int64_t t) {
    int64_t k = s->cur_step < MAX_KEY ? s->cur_step + 1 : MAX_KEY; /* the step in progress */
    hist_add(&st->by_step, k, st->live_bytes);
    hist_add(&st->by_time, rel_t(s, t) / BUCKET_NS, st->live_bytes);
    ring_add(&st->last, k, st->live_bytes);
    if (s->o->window) {
        if (k <= s->o->window_from) st->win_from = st->live_bytes;
        if (k <= s->o->window_to) st->win_to = st->live_bytes;
    }
}

static void copy_str(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }

/* The argv index naming an interpreter's program, 0 when none: argv[1], or for Python the word after option flags
 * that take no value ("python3 -u train.py": torchrun starts its workers so) or after -m (the module). */
static uint32_t script_arg(const pl_rec_process_t *p, bool python) {
    for (uint32_t i = 1; i < p->n_argv && i < PL_TRACE_MAX_ARGV && p->argv[i]; i++) {
        const char *a = p->argv[i];
        if (a[0] != '-') return a[0] ? i : 0;
        if (!python) return 0;
        if (!strcmp(a, "-m")) return i + 1 < p->n_argv && p->argv[i + 1] && p->argv[i + 1][0] ? i + 1 : 0;
        if (a[1] == 0 || strspn(a + 1, "bBdEiIOqsSuvR") != strlen(a + 1)) return 0; /* -c, -X opt, -W arg, ... */
    }
    return 0;
}

static void on_process(state_t *s, const pl_rec_process_t *p) {
    pl_extract_proc_t *xp = s->xp;
    xp->pid = p->pid;
    xp->ppid = p->ppid;
    xp->exec_seq = p->exec_seq;
    xp->rank = p->rank;
    xp->local_rank = p->local_rank >= 0 ? p->local_rank : -1;
    copy_str(xp->node, sizeof xp->node, p->node);
    if (s->sample_bytes != p->sample_bytes) memset(s->w_size, 0, sizeof s->w_size); /* weights of the old rate */
    s->sample_bytes = p->sample_bytes;
    s->start_realtime_ns = p->start_realtime_ns > 0 ? p->start_realtime_ns : 0;
    copy_str(xp->exe, sizeof xp->exe, p->exe);
    size_t off = 0;
    xp->cmdline[0] = 0;
    for (uint32_t i = 0; i < p->n_argv && i < PL_TRACE_MAX_ARGV; i++) {
        int w = snprintf(xp->cmdline + off, sizeof xp->cmdline - off, "%s%s", i ? " " : "", p->argv[i] ? p->argv[i] : "");
        if (w < 0 || (size_t)w >= sizeof xp->cmdline - off) {
            off = sizeof xp->cmdline - 1;
            break;
        }
        off += (size_t)w;
    }
    /* the row's name: program basename, plus the script for interpreters ("python3 train.py") */
    const char *a0 = p->n_argv ? p->argv[0] : p->exe;
    const char *b = a0 ? strrchr(a0, '/') : NULL;
    b = b ? b + 1 : (a0 ? a0 : "");
    char name[64];
    uint32_t ai = script_arg(p, !strncmp(b, "python", 6));
    if (ai && (!strncmp(b, "python", 6) || !strcmp(b, "node"))) {
        const char *b1 = strrchr(p->argv[ai], '/');
        snprintf(name, sizeof name, "%s %s%s", b, ai > 1 && !strcmp(p->argv[ai - 1], "-m") ? "-m " : "",
                 b1 ? b1 + 1 : p->argv[ai]);
    } else {
        snprintf(name, sizeof name, "%s", b);
    }
    pl_report_process_t *row = xp->proc;
    row->pid = p->pid;
    row->rank = p->rank;
    row->local_rank = xp->local_rank;
    copy_str(row->node, sizeof row->node, xp->node);
    copy_str(row->name, sizeof row->name, name);
    pl_report_limits_t *l = &s->r->limits;
    if (p->host_mem_bytes && !na(p->host_mem_bytes) && (double)p->host_mem_bytes > l->host_bytes)
        l->host_bytes = (double)p->host_mem_bytes;
    if (p->cgroup_max_bytes && !na(p->cgroup_max_bytes) &&
        (l->cgroup_bytes <= 0 || (double)p->cgroup_max_bytes < l->cgroup_bytes))
        l->cgroup_bytes = (double)p->cgroup_max_bytes;
}

static int on_rss(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    const pl_rec_rss_t *q = &rec->u.rss;
    int rc = 0;
    if (!na(q->rss_anon) && !na(q->rss_file) && !na(q->rss_shmem))
        rc |= put(s, A_RSS, q->step, rec->t_ns, (double)q->rss_anon + (double)q->rss_file + (double)q->rss_shmem);
    if (!na(q->rss_anon)) rc |= put(s, A_ANON, q->step, rec->t_ns, (double)q->rss_anon);
    if (!na(q->rss_file)) rc |= put(s, A_FILE, q->step, rec->t_ns, (double)q->rss_file);
    if (!na(q->rss_shmem)) rc |= put(s, A_SHMEM, q->step, rec->t_ns, (double)q->rss_shmem);
    if (!na(q->pss)) rc |= put(s, A_PSS, q->step, rec->t_ns, (double)q->pss);
    if (!na(q->cgroup_current)) rc |= put(s, A_CGROUP, q->step, rec->t_ns, (double)q->cgroup_current);
    if (!na(q->device_used)) {
        rc |= put(s, A_DEVUSED, q->step, rec->t_ns, (double)q->device_used);
        if (isfinite(s->last_reserved))
            rc |= put(s, A_OTHER, q->step, rec->t_ns, fmax(0, (double)q->device_used - s->last_reserved));
    }
    if (!na(q->device_total) && q->device_total && (double)q->device_total > s->r->limits.device_bytes)
        s->r->limits.device_bytes = (double)q->device_total;
    return rc ? -ENOMEM : 0;
}

/* a counter of an alloc_stats record: NA (framework counters, include/plateau/step.h) reads as -1 */
static int64_t stat_or(int64_t v) { return v == (int64_t)PL_TRACE_NA || v < 0 ? -1 : v; }

/* The pending count's CUDA tensors, summed over devices, as one tensors.cuda point. */
static int flush_cuda_tensors(state_t *s) {
    if (!s->cuda_pending) return 0;
    s->cuda_pending = false;
    double sum = 0;
    for (int d = 0; d < MAX_TENSOR_DEVICES; d++) sum += (double)s->cuda_tensors[d];
    return put(s, A_PY_TENS_CUDA, s->cuda_step, s->cuda_t, sum) ? -ENOMEM : 0;
}

/* A new count at step/t: the devices it does not name hold no tensors. */
static void start_cuda_count(state_t *s, uint64_t step, int64_t t) {
    memset(s->cuda_tensors, 0, sizeof s->cuda_tensors);
    s->cuda_pending = true;
    s->cuda_step = step;
    s->cuda_t = t;
}

/* Live tensors the bootstrap counted (docs/python.md "Live tensors"): a count sends device -1 (the host's, the
 * `tensors` metric) first, then the CUDA devices holding tensors (tensors.cuda, their sum: one point per count,
 * put when the next count starts or the trace ends). */
static int on_tensor_count(state_t *s, const pl_trace_record_t *rec) {
    const pl_rec_alloc_stats_t *q = &rec->u.alloc_stats;
    if (stat_or(q->n_allocations) < 0) return 0;
    if (q->device == -1) {
        int rc = flush_cuda_tensors(s);
        if (s->seen_cuda_tensors) start_cuda_count(s, q->step, rec->t_ns); /* 0 unless devices follow */
        s->seen_py_tensors = true;
        if (stat_or(q->n_segments) >= 0) { /* what autograd keeps (docs/python.md, "What autograd keeps") */
            s->seen_autograd = true;
            if (stat_or(q->allocated_bytes) >= 0) { /* saved tensors read at this count (NA: not read) */
                s->seen_saved = true;
                s->autograd_bytes = stat_or(q->allocated_bytes);
                s->autograd_n = stat_or(q->active_bytes);
                s->autograd_flags = stat_or(q->reserved_bytes);
            }
            if (put(s, A_PY_AUTOGRAD, q->step, rec->t_ns, (double)q->n_segments)) return -ENOMEM;
        }
        return rc | (put(s, A_PY_TENS, q->step, rec->t_ns, (double)q->n_allocations) ? -ENOMEM : 0);
    }
    if (q->device < 0 || q->device >= MAX_TENSOR_DEVICES) return 0;
    if (!s->cuda_pending || q->step != s->cuda_step) { /* a count without its host record */
        int rc = flush_cuda_tensors(s);
        if (rc) return rc;
        start_cuda_count(s, q->step, rec->t_ns);
    }
    s->seen_cuda_tensors = true;
    s->cuda_tensors[q->device] = q->n_allocations;
    return 0;
}

static int on_stats(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    const pl_rec_alloc_stats_t *q = &rec->u.alloc_stats;
    if (q->allocator_id == PL_ALLOC_ID_TORCH_TENSORS) return on_tensor_count(s, rec);
    astat_t *a = NULL;
    for (size_t i = 0; i < s->n_astats; i++)
        if (s->astats[i].id == q->allocator_id && s->astats[i].dev == q->device) a = &s->astats[i];
    if (!a) {
        if (s->n_astats == MAX_ALLOCATORS) return 0;
        a = &s->astats[s->n_astats++];
        a->id = q->allocator_id;
        a->dev = q->device;
    }
    a->alloc = stat_or(q->allocated_bytes) < 0 ? 0 : q->allocated_bytes;
    a->res = stat_or(q->reserved_bytes) < 0 ? 0 : q->reserved_bytes;
    a->tens = stat_or(q->n_allocations) < 0 ? 0 : q->n_allocations;
    /* dev.active and dev.inactive_split: series of torch's allocator (plateau's own are judged through tune) */
    bool ext = q->allocator_id >= PL_ALLOC_ID_EXTERNAL;
    a->active = ext ? stat_or(q->active_bytes) : -1;
    a->split = ext ? stat_or(q->inactive_split_bytes) : -1;
    a->retries = stat_or(q->num_alloc_retries);
    a->ooms = stat_or(q->num_ooms);
    double sa = 0, sr = 0, st = 0, sact = 0, ssp = 0;
    for (size_t i = 0; i < s->n_astats; i++) {
        sa += (double)s->astats[i].alloc;
        sr += (double)s->astats[i].res;
        st += (double)s->astats[i].tens;
        if (s->astats[i].active >= 0) sact += (double)s->astats[i].active;
        if (s->astats[i].split >= 0) ssp += (double)s->astats[i].split;
    }
    s->seen_stats = true;
    if (q->allocator_id != PL_ALLOC_ID_NVML) s->seen_stats_alloc = true;
    s->last_reserved = sr;
    if (ext) { /* torch's allocator at its latest snapshot: the end-of-run view's numbers at a CUDA OOM */
        s->xp->dev_last_allocated = (int64_t)sa;
        s->xp->dev_last_reserved = (int64_t)sr;
        s->xp->dev_last_inactive_split = s->seen_split || a->split >= 0 ? (int64_t)ssp : -1;
        s->xp->dev_last_step = s->cur_step;
    }
    if (q->capacity_bytes && !na(q->capacity_bytes) && (double)q->capacity_bytes > s->r->limits.device_bytes)
        s->r->limits.device_bytes = (double)q->capacity_bytes;
    int rc = put(s, A_ST_ALLOC, q->step, rec->t_ns, sa);
    rc |= put(s, A_ST_RES, q->step, rec->t_ns, sr);
    rc |= put(s, A_ST_TENS, q->step, rec->t_ns, st);
    if (a->active >= 0) {
        s->seen_active = true;
        rc |= put(s, A_ST_ACTIVE, q->step, rec->t_ns, sact);
    }
    if (a->split >= 0) {
        s->seen_split = true;
        rc |= put(s, A_ST_SPLIT, q->step, rec->t_ns, ssp);
    }
    return rc ? -ENOMEM : 0;
}


/* A device record of a source the report counts, its size capped: at most 1 TiB per block, so with at most
 * MAP_MAX_ENTRIES live the running sums cannot overflow. CUPTI memory activity duplicates what the hooks saw: counted
 * for the cross-check only (false). */
static bool dev_counted(state_t *s, const pl_trace_record_t *rec, uint64_t *sz) {
    const pl_rec_device_t *q = &rec->u.device;
    if (rec->type == PL_REC_DEVICE_ALLOC && q->source != PL_DEV_SRC_ALLOCATOR) {
        bool cupti = q->source == PL_DEV_SRC_CUPTI;
        *(cupti ? &s->xp->n_cupti_dev_allocs : &s->xp->n_hook_dev_allocs) += 1;
        *(cupti ? &s->xp->cupti_dev_alloc_bytes : &s->xp->hook_dev_alloc_bytes) += q->size;
    }
    *sz = q->size > MAX_BLOCK_BYTES ? MAX_BLOCK_BYTES : q->size;
    return q->source != PL_DEV_SRC_CUPTI;
}

/* the device totals from events, after each event that changed them */
static int dev_totals(state_t *s, int64_t t_ns) {
    if (!s->seen_stats) s->last_reserved = s->seen_map ? (double)s->ev_res : (double)s->ev_drv;
    int rc = put(s, A_EV_ALLOC, 0, t_ns, (double)s->ev_alloc);
    rc |= put(s, A_EV_TENS, 0, t_ns, (double)s->ev_tens);
    if (s->seen_map) rc |= put(s, A_EV_RES, 0, t_ns, (double)s->ev_res);
    rc |= put(s, A_EV_DRV, 0, t_ns, (double)s->ev_drv);
    return rc ? -ENOMEM : 0;
}

/* The device sites' accounts: a hook's block or mapping at addr ends (a free or unmap, or its address reused
 * without one we saw): its bytes leave the stack that allocated it. Frees of addresses never seen allocated with a
 * stack change nothing. */
static void dev_site_end(state_t *s, pl_table_t *m, const pl_trace_record_t *rec) {
    slot_t old;
    if (rec->u.device.source == PL_DEV_SRC_ALLOCATOR || !map_take(m, rec->u.device.addr, &old)) return;
    stack_t_ *st = dstack_get(s, old.aux, false);
    if (!st) return;
    st->live_bytes -= (double)old.val;
    if (st->n_live) st->n_live--;
    stack_note(s, st, rec->t_ns);
}

/* A hook's block or mapping of sz bytes: its stack's account grows (plateau's own allocator's blocks are tensors
 * inside such blocks, not memory taken from the driver: left out). */
static int dev_site_start(state_t *s, pl_table_t *m, const pl_trace_record_t *rec, uint64_t sz) {
    const pl_rec_device_t *q = &rec->u.device;
    if (q->source == PL_DEV_SRC_ALLOCATOR) return 0;
    dev_site_end(s, m, rec);
    if (!q->stack_id) return 0;
    stack_t_ *st = dstack_get(s, q->stack_id, true);
    int rc = st ? map_put(m, q->addr, sz, q->stack_id) : 1;
    if (rc) {
        if (rc > 0) s->xp->n_untracked++;
        return rc < 0 ? rc : 0;
    }
    st->live_bytes += (double)sz;
    st->n_live++;
    stack_note(s, st, rec->t_ns);
    return 0;
}

static int on_dev_alloc(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    uint64_t sz;
    if (!dev_counted(s, rec, &sz)) return 0;
    int drc = dev_site_start(s, &s->dev_blocks, rec, sz);
    if (drc < 0) return drc;
    bool alloc_src = rec->u.device.source == PL_DEV_SRC_ALLOCATOR;
    int rc = map_put(&s->blocks, rec->u.device.addr, sz, alloc_src);
    if (rc < 0) return rc;
    if (rc > 0) {
        s->xp->n_untracked++;
        return 0;
    }
    if (alloc_src) {
        s->seen_alloc_src = true;
        s->ev_alloc += (int64_t)sz;
        s->ev_tens++;
    } else {
        s->ev_drv += (int64_t)sz;
    }
    return dev_totals(s, rec->t_ns);
}

static int on_dev_free(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    uint64_t sz;
    slot_t old;
    if (!dev_counted(s, rec, &sz)) return 0;
    dev_site_end(s, &s->dev_blocks, rec);
    if (!map_take(&s->blocks, rec->u.device.addr, &old)) return 0;
    if (old.aux) {
        s->ev_alloc -= (int64_t)old.val;
        s->ev_tens--;
    } else {
        s->ev_drv -= (int64_t)old.val;
    }
    return dev_totals(s, rec->t_ns);
}

static int on_dev_map(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    uint64_t sz;
    if (!dev_counted(s, rec, &sz)) return 0;
    int drc = dev_site_start(s, &s->dev_segs, rec, sz);
    if (drc < 0) return drc;
    int rc = map_put(&s->segs, rec->u.device.addr, sz, 0);
    if (rc < 0) return rc;
    if (rc > 0) {
        s->xp->n_untracked++;
        return 0;
    }
    s->seen_map = true;
    s->ev_res += (int64_t)sz;
    return dev_totals(s, rec->t_ns);
}

static int on_dev_unmap(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    uint64_t sz;
    slot_t old;
    if (!dev_counted(s, rec, &sz)) return 0;
    dev_site_end(s, &s->dev_segs, rec);
    if (!map_take(&s->segs, rec->u.device.addr, &old)) return 0;
    s->ev_res -= (int64_t)old.val;
    return dev_totals(s, rec->t_ns);
}

static int on_host_alloc(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    const pl_rec_host_alloc_t *q = &rec->u.host_alloc;
    if (q->kind != PL_HOST_MMAP && q->size > 16) { /* the usable sizes the host allocator is told by (compare.h) */
        s->xp->n_usable_sizes++;
        s->xp->n_usable_8mod16 += q->size % 16 == 8;
    }
    stack_t_ *st = stack_get(s, q->stack_id, true);
    if (!st) { s->xp->n_untracked++; return 0; }
    double w = weight(s, q->size);
    slot_t old;
    if (map_take(&s->host, q->addr, &old)) { /* the address was reused without a free we saw */
        stack_t_ *o = stack_get(s, old.aux, false);
        if (o) {
            o->live_bytes -= weight(s, old.val);
            if (o->n_live) o->n_live--;
            stack_note(s, o, rec->t_ns);
        }
    }
    int rc = map_put(&s->host, q->addr, q->size, q->stack_id);
    if (rc < 0) return rc;
    if (rc > 0) { s->xp->n_untracked++; return 0; }
    st->live_bytes += w;
    st->n_live++;
    stack_note(s, st, rec->t_ns);
    return 0;
}

static int on_host_free(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    slot_t old;
    if (!map_take(&s->host, rec->u.host_free.addr, &old)) return 0;
    stack_t_ *st = stack_get(s, old.aux, false);
    if (!st) return 0;
    st->live_bytes -= weight(s, old.val);
    if (st->n_live) st->n_live--;
    stack_note(s, st, rec->t_ns);
    return 0;
}

/* Who keeps it (reports/retention.c); and, from the storages a holder's record carries (trace 1.9), which sampled
 * host allocations live at that moment they begin at: what ties the holder to an allocation site (match_holders). */
static int on_retention(state_t *s, const pl_rec_retention_t *q) {
    if (!s->xp->retention && !(s->xp->retention = calloc(1, sizeof *s->xp->retention))) return -ENOMEM;
    int rc = pl_retention_add(s->xp->retention, q);
    if (rc || !q->n_ranges) return rc;
    pl_retention_holder_t *h = pl_retention_find(s->xp->retention, q->path);
    if (!h || q->census < h->match_census) return 0;
    h->match_census = q->census;
    h->n_ranges = q->n_ranges < PL_RETENTION_MAX_RANGES ? q->n_ranges : PL_RETENTION_MAX_RANGES;
    h->n_match = 0;
    for (uint32_t i = 0; i < h->n_ranges; i++) {
        const slot_t *sl = pl_table_get(&s->host, q->range_addr[i]);
        if (!sl) continue;
        h->match_stack[h->n_match] = sl->aux;
        h->match_bytes[h->n_match++] = weight(s, sl->val);
    }
    return 0;
}

/* a stack gets its place in stacks[] when its record is read (the order sites tie by), its frames in the tables */
static int on_stack(void *ctx, const pl_trace_record_t *rec) {
    stack_get(ctx, rec->u.stack.stack_id, true);
    return 0;
}

/* A stack's frames, as many as a site names: at most STACK_PCS native and STACK_PY Python frames. */
static bool stack_frames(const state_t *s, const stack_t_ *st, pl_ingest_stack_t *k) {
    if (!pl_ingest_stack(s->in, st->id, k)) {
        *k = (pl_ingest_stack_t){0};
        return false;
    }
    if (k->n_pcs > STACK_PCS) k->n_pcs = STACK_PCS;
    if (k->n_py > STACK_PY) k->n_py = STACK_PY;
    return true;
}

/* The Python bootstrap's record of an exception that ended the program (docs/end-of-run.md): its type, and what every
 * stack held at that moment (the interpreter's exit path comes after it). The first one counts. */
static void on_uncaught(state_t *s, const char *type) {
    if (s->uncaught_step >= 0) return;
    copy_str(s->xp->uncaught, sizeof s->xp->uncaught, type);
    s->uncaught_step = s->cur_step;
    for (size_t i = 0; i < s->n_stacks; i++) s->stacks[i].at_uncaught = s->stacks[i].live_bytes;
}

/* Host allocations the collector counted instead of writing (docs/long-runs.md): each was freed within the step that
 * made it, so no site's live bytes at a step boundary miss them; their usable sizes still tell the host allocator
 * apart (compare.h), as the records would have. */
static void on_aggregate(pl_extract_proc_t *xp, const pl_rec_aggregate_t *q) {
    if (q->what == PL_AGG_LIMIT) { /* the trace stopped at its size limit: the report covers what came before */
        xp->capped = true;
        xp->cap_step = q->step_first;
        xp->cap_last_step = q->step_last;
        xp->cap_records += q->n;
        xp->cap_bytes += q->bytes;
        return;
    }
    if (q->what == PL_AGG_SAMPLES) { /* periodic samples that were no step's first, last, lowest or highest */
        xp->n_agg_samples += q->n;
        return;
    }
    if (q->what != PL_AGG_HOST_PAIRS) return;
    if (!xp->n_agg_pairs || q->step_first < xp->agg_step_first) xp->agg_step_first = q->step_first;
    if (q->step_last > xp->agg_step_last) xp->agg_step_last = q->step_last;
    xp->n_agg_pairs += q->n;
    xp->agg_pair_bytes += q->bytes;
    xp->n_usable_sizes += q->n_sized;
    xp->n_usable_8mod16 += q->n_8mod16 <= q->n_sized ? q->n_8mod16 : q->n_sized;
}

static int on_start(void *ctx, const pl_trace_record_t *rec) {
    on_process(ctx, &rec->u.process);
    return 0;
}

static int on_end(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    s->xp->clean_end = true;
    if (rec->type == PL_REC_EXEC) s->xp->exec_end = true;
    return 0;
}

static int on_step(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    int64_t k = clamp_key(rec->u.step.step);
    if (k > s->cur_step) s->cur_step = k;
    s->xp->n_steps++;
    return 0;
}

/* in the step in progress, as put() keys a sample without a step; --since-step alike */
static int on_mark(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    if (!strncmp(rec->u.mark.label ? rec->u.mark.label : "", PL_EXTRACT_UNCAUGHT_MARK,
                 strlen(PL_EXTRACT_UNCAUGHT_MARK))) { /* plateau's own, not the user's: how the process ended */
        on_uncaught(s, rec->u.mark.label + strlen(PL_EXTRACT_UNCAUGHT_MARK));
        return 0;
    }
    int64_t k = s->cur_step < MAX_KEY ? s->cur_step + 1 : MAX_KEY;
    if (s->o->since_step > 0 && k < s->o->since_step) return 0;
    return pl_report_add_mark(s->xp->proc, k, rel_t(s, rec->t_ns), rec->u.mark.label);
}

static int on_heap(void *ctx, const pl_trace_record_t *rec) {
    state_t *s = ctx;
    const pl_rec_heap_t *q = &rec->u.heap;
    if (q->n_alloc + q->n_free > s->xp->n_host_events) s->xp->n_host_events = q->n_alloc + q->n_free;
    /* the host live heap is the malloc family plus anonymous mmap (Python's arenas, a simulated device, and
     * allocators that map directly): the tracer counts them apart, the report judges them together */
    int rc = put(s, A_HEAP, q->step, rec->t_ns, (double)q->live_bytes + (double)q->mmap_live_bytes);
    rc |= put(s, A_HEAPN, q->step, rec->t_ns, (double)q->live_count + (double)q->mmap_live_count);
    return rc ? -ENOMEM : 0;
}

static int on_lost(void *ctx, const pl_trace_record_t *rec) {
    ((state_t *)ctx)->xp->n_lost_records += rec->u.lost.n_records;
    return 0;
}

static int on_aggregate_rec(void *ctx, const pl_trace_record_t *rec) {
    on_aggregate(((state_t *)ctx)->xp, &rec->u.aggregate);
    return 0;
}

static int on_retention_rec(void *ctx, const pl_trace_record_t *rec) { return on_retention(ctx, &rec->u.retention); }

/* what extraction reads of each record kind (reports/ingest hands them on; its tables keep the frames) */
static const pl_ingest_handlers_t handlers = {
    .process = on_start, .end = on_end, .step = on_step, .mark = on_mark, .rss = on_rss, .heap = on_heap,
    .alloc_stats = on_stats, .device_alloc = on_dev_alloc, .device_free = on_dev_free, .device_map = on_dev_map,
    .device_unmap = on_dev_unmap, .host_alloc = on_host_alloc, .host_free = on_host_free,
    .stack = on_stack, .lost = on_lost, .aggregate = on_aggregate_rec, .retention = on_retention_rec,
};

static int on_record(state_t *s, const pl_trace_record_t *rec) { return pl_ingest_record(s->in, rec, &handlers, s); }

/* ---- finishing one trace ---- */

static bool is_alloc_frame(const state_t *s, const pl_ingest_frame_t *f) {
    static const char *const alloc_syms[] = {"malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc",
                                             "memalign", "valloc", "pvalloc", "mmap", "mmap64", "_Znwm", "_Znam",
                                             "_ZnwmRKSt9nothrow_t", "_ZnwmSt11align_val_t", "reallocarray"};
    for (size_t i = 0; i < sizeof alloc_syms / sizeof alloc_syms[0]; i++)
        if (!strcmp(f->symbol, alloc_syms[i])) return true;
    return pl_ingest_module_own(pl_ingest_module(s->in, f->module_id));
}

/* Text of one frame, malloc'd (NULL on failure): the function named by the module file itself (symbols.c:
 * static functions, demangled C++, never cut), else the trace's dladdr name (demangled), else module+offset;
 * ", changed since the run" when the file on disk was rebuilt. */
static char *format_frame(const state_t *s, pl_symbols_t *sy, uint64_t pc) {
    char *out = NULL;
    int w;
    const pl_ingest_frame_t *f;
    const pl_sym_module_t *md;
    const char *name = NULL;
    uint64_t off = 0;
    pl_sym_status_t st = pl_ingest_lookup(s->in, sy, pc, &f, &md, &name, &off);
    if (!f) {
        w = asprintf(&out, "0x%llx", (unsigned long long)pc);
        return w < 0 ? NULL : out;
    }
    const char *mod = pl_ingest_module_base(md);
    if (st != PL_SYM_OK && f->symbol[0]) {
        name = pl_symbols_demangle(sy, f->symbol);
        off = f->symbol_offset;
    }
    const char *note = st == PL_SYM_CHANGED ? ", changed since the run" : "";
    if (st == PL_SYM_OK || name)
        w = asprintf(&out, "%s+0x%llx (%s%s)", name, (unsigned long long)off, mod, note);
    else
        w = asprintf(&out, "%s+0x%llx%s%s%s", mod, (unsigned long long)f->module_offset, *note ? " (" : "",
                     *note ? note + 2 : "", *note ? ")" : "");
    return w < 0 ? NULL : out;
}

/* The last step the series report: a process that ended cleanly spends the time after its last step marker tearing
 * down (the model and its tensors are freed), which is not part of the training loop and whose minima would read as
 * a final drop. A process cut short keeps its partial step: those are its last recorded moments. */
/* The last key a series reports. By step: the last step marked (the samples after it are the program's teardown).
 * By time, after a clean end: the last bucket is partial and holds the teardown (interpreter exit, freed arenas):
 * it is left out when at least 3 buckets remain, so "last" is the value the process ran at. */
static int64_t last_reported_key(const state_t *s, bool by_step) {
    if (by_step) return s->xp->clean_end && s->cur_step >= 2 ? s->cur_step : INT64_MAX;
    if (!s->xp->clean_end) return INT64_MAX;
    int64_t last = -1;
    for (int i = 0; i < A__N; i++) {
        const agg_t *a = &s->by_time.a[i];
        if (a->n && a->b[a->n - 1].key > last) last = a->b[a->n - 1].key;
    }
    int64_t first = INT64_MAX;
    for (int i = 0; i < A__N; i++) {
        const agg_t *a = &s->by_time.a[i];
        if (a->n && a->b[0].key < first) first = a->b[0].key;
    }
    return last >= 0 && last - first >= 3 ? last : INT64_MAX; /* keys < last are reported */
}

/* The Python frame naming a stack: its innermost frame in the user's own code (pysites.h), else its innermost
 * Python frame; NULL for a stack without Python frames. *id: its pyframe id. */
static const pl_ingest_pyframe_t *naming_frame(const state_t *s, const stack_t_ *st, uint32_t *id) {
    const pl_ingest_pyframe_t *first = NULL;
    pl_ingest_stack_t k;
    stack_frames(s, st, &k);
    for (uint32_t i = 0; i < k.n_py; i++) {
        const pl_ingest_pyframe_t *p = pl_ingest_pyframe(s->in, k.py[i]);
        if (!p) continue;
        if (pl_pysite_is_user(p->file)) {
            *id = k.py[i];
            return p;
        }
        if (!first) {
            first = p;
            *id = k.py[i];
        }
    }
    return first;
}

/* A site's Python name, source line and Python frames, from its representative stack (nothing when it has none). */
static void name_python_site(const state_t *s, const stack_t_ *st, pl_extract_site_t *site) {
    uint32_t id;
    const pl_ingest_pyframe_t *nf = naming_frame(s, st, &id);
    if (!nf) return;
    if (asprintf(&site->py_name, "%s:%d in %s", pl_pysite_short(nf->file), (int)nf->line, nf->function) < 0)
        site->py_name = NULL;
    site->py_file = strdup(nf->file);
    site->py_line = nf->line;
    site->py_source = pl_pysite_source(nf->file, nf->line, s->start_realtime_ns);
    pl_ingest_stack_t k;
    stack_frames(s, st, &k);
    for (uint32_t i = 0; i < k.n_py && site->n_py < PL_EXTRACT_SITE_PY_FRAMES; i++) {
        const pl_ingest_pyframe_t *p = pl_ingest_pyframe(s->in, k.py[i]);
        char *t = NULL, *u = NULL;
        if (p) {
            if (asprintf(&t, "%s:%d in %s", p->file, (int)p->line, p->function) < 0) t = NULL;
            if (asprintf(&u, "%s:%d in %s", pl_pysite_short(p->file), (int)p->line, p->function) < 0) u = NULL;
        } else {
            if (asprintf(&t, "pyframe %u (no pyframe record)", k.py[i]) < 0) t = NULL;
            u = t ? strdup(t) : NULL;
        }
        if (t && u) {
            site->py_frames[site->n_py] = t;
            site->py_short[site->n_py++] = u;
        } else {
            free(t);
            free(u);
        }
    }
}

/* the key stacks merge into sites by (group_sites): the naming Python frame, else the stack alone */
static uint64_t site_key(const state_t *s, const stack_t_ *st) {
    uint32_t id;
    return naming_frame(s, st, &id) ? (1ull << 40) + (uint64_t)id : (uint64_t)st->id + 1;
}

/* A named holder's matched storages (on_retention) tie it to the growing site most of them were allocated at: "the
 * memory allocated at train.py:42 is held by `outputs`". Only the sites find_sites kept; none when no storage
 * matched (the census's storages are its largest; sampling picks allocations by size, so small ones rarely match). */
static void match_holders(state_t *s) {
    pl_retention_t *rt = s->xp->retention;
    pl_extract_proc_t *xp = s->xp;
    for (size_t i = 0; rt && i < rt->n_holders; i++) {
        pl_retention_holder_t *h = &rt->holders[i];
        h->alloc_at[0] = 0;
        h->alloc_hits = 0;
        h->alloc_bytes = 0;
        if (!h->named || !h->n_match) continue;
        for (size_t k = 0; k < xp->n_sites; k++) {
            const pl_extract_site_t *site = &xp->sites[k];
            const stack_t_ *ss = stack_get(s, site->stack_id, false);
            if (!ss) continue;
            uint64_t key = site_key(s, ss);
            uint32_t hits = 0;
            double bytes = 0;
            for (uint32_t m = 0; m < h->n_match; m++) {
                const stack_t_ *ms = stack_get(s, h->match_stack[m], false);
                if (ms && site_key(s, ms) == key) {
                    hits++;
                    bytes += h->match_bytes[m];
                }
            }
            if (hits > h->alloc_hits) {
                h->alloc_hits = hits;
                h->alloc_bytes = bytes;
                const char *name = site->py_name ? site->py_name : site->n_frames ? site->frames[0] : "";
                snprintf(h->alloc_at, sizeof h->alloc_at, "%s", name);
            }
        }
    }
}

/* Per-stack values a site list is ranked by: g the live bytes gained over the window measured, end the live bytes at
 * its end; false leaves the stack out (its value is unknown). */
typedef bool (*stack_val_fn)(const state_t *s, const stack_t_ *st, const void *ctx, double *g, double *end);

/* Stacks merge into sites: a stack whose thread ran Python by its naming frame (the same Python line reached through
 * different native paths is one site), any other stack alone, as before Python frames existed. The sites whose
 * ranking value (growth, or with by_live the live bytes at the end) is at least one byte (weights are fractional:
 * less is nothing) are counted in *n_counted and summed in *total; the largest `max` are kept in out, largest first,
 * ties by stack id for determinism, each with the stack that contributed most as its representative. Returns how
 * many were kept; their frames are named by name_sites. */
static size_t group_sites_of(state_t *s, stack_t_ *set, size_t n_set, stack_val_fn val, const void *ctx,
                             bool by_live, pl_extract_site_t *out, size_t max, double *total, size_t *n_counted) {
    typedef struct group { uint64_t key; double g, end, best_g; uint64_t n_live; uint32_t best_id, n; } group_t;
    *total = 0;
    *n_counted = 0;
    group_t *groups = calloc(n_set ? n_set : 1, sizeof *groups);
    if (!groups) return 0;
    pl_table_t gix;
    map_init(&gix);
    size_t n_groups = 0, n_out = 0;
    for (size_t i = 0; i < n_set; i++) {
        stack_t_ *st = &set[i];
        double g, end;
        if (!val(s, st, ctx, &g, &end)) continue;
        double rank = by_live ? end : g;
        uint64_t key = site_key(s, st);
        slot_t *f = pl_table_get(&gix, key);
        group_t *gr;
        if (f) {
            gr = &groups[f->val];
        } else {
            if (map_put(&gix, key, n_groups, 0)) continue;
            gr = &groups[n_groups++];
            *gr = (group_t){.key = key, .best_g = -INFINITY};
        }
        gr->g += g;
        gr->end += end;
        gr->n_live += st->n_live;
        gr->n++;
        if (rank > gr->best_g || (rank == gr->best_g && st->id < gr->best_id)) {
            gr->best_g = rank;
            gr->best_id = st->id;
        }
    }
    for (size_t i = 0; i < n_groups; i++) {
        const group_t *gr = &groups[i];
        double v = by_live ? gr->end : gr->g;
        if (!(v >= 1)) continue;
        *total += v;
        ++*n_counted;
        /* insertion into the top list, largest first; ties by stack id for determinism */
        size_t k = n_out;
        while (k > 0) {
            double w = by_live ? out[k - 1].live_bytes : out[k - 1].growth_bytes;
            if (!(w < v || (w == v && out[k - 1].stack_id > gr->best_id))) break;
            k--;
        }
        if (k >= max) continue;
        size_t last = n_out < max ? n_out : max - 1;
        memmove(&out[k + 1], &out[k], (last - k) * sizeof out[0]);
        if (n_out < max) n_out++;
        pl_extract_site_t *site = &out[k];
        memset(site, 0, sizeof *site);
        site->stack_id = gr->best_id;
        site->growth_bytes = gr->g;
        site->live_bytes = gr->end;
        site->n_live = gr->n_live;
        site->n_stacks = gr->n;
    }
    pl_table_free(&gix);
    free(groups);
    return n_out;
}

/* group_sites_of over the host stacks */
static size_t group_sites(state_t *s, stack_val_fn val, const void *ctx, bool by_live, pl_extract_site_t *out,
                          size_t max, double *total, size_t *n_counted) {
    return group_sites_of(s, s->stacks, s->n_stacks, val, ctx, by_live, out, max, total, n_counted);
}

/* The frames of the kept sites (symbol files are opened for these alone), and each one's share of total; dev: the
 * sites are device stacks'. */
static void name_sites_of(state_t *s, pl_extract_site_t *sites, size_t n, double total, bool by_live, bool dev) {
    pl_symbols_t *sy = n ? pl_symbols_new() : NULL;
    for (size_t k = 0; k < n; k++) {
        pl_extract_site_t *site = &sites[k];
        site->share = total > 0 ? (by_live ? site->live_bytes : site->growth_bytes) / total : 0;
        stack_t_ *st = dev ? dstack_get(s, site->stack_id, false) : stack_get(s, site->stack_id, false);
        if (!st) continue;
        name_python_site(s, st, site);
        /* pcs: the frames, innermost first; skip the allocator's own frames at the top */
        pl_ingest_stack_t fr;
        stack_frames(s, st, &fr);
        uint32_t j = 0;
        while (j < fr.n_pcs) {
            const pl_ingest_frame_t *f = pl_ingest_frame(s->in, fr.pcs[j]);
            if (!f || !is_alloc_frame(s, f)) break;
            j++;
        }
        size_t max_frames = site->py_name ? PL_EXTRACT_SITE_FRAMES : 6;
        for (; j < fr.n_pcs && site->n_frames < max_frames; j++) {
            char *t = format_frame(s, sy, fr.pcs[j]);
            if (t) site->frames[site->n_frames++] = t;
        }
    }
    pl_symbols_free(sy);
}

static void name_sites(state_t *s, pl_extract_site_t *sites, size_t n, double total, bool by_live) {
    name_sites_of(s, sites, n, total, by_live, false);
}

/* the tail's sites: growth from the tail's start to the last reported key, from the per-stack histories */
typedef struct tail_ctx { bool by_step; int64_t tail, last_key; } tail_ctx_t;

static bool tail_val(const state_t *s, const stack_t_ *st, const void *ctx, double *g, double *end) {
    (void)s;
    const tail_ctx_t *c = ctx;
    const hist_t *h = c->by_step ? &st->by_step : &st->by_time;
    *end = c->last_key == INT64_MAX ? st->live_bytes : hist_at(h, c->last_key);
    *g = *end - hist_at(h, c->tail - 1);
    return true;
}

/* Where a series' tail starts in the stack histories' keys: its verdict's tail (its first point when it cannot be
 * judged), a series by time's buckets in BUCKET_NS keys. mt has points. */
static int64_t tail_key(const state_t *s, const pl_report_metric_t *mt, bool by_step) {
    int64_t tail;
    pl_verdict_t v;
    if (!pl_verdict_classify(&mt->series, &s->r->params, &v) && v.undecided != PL_UNDECIDED_NO_DATA)
        tail = v.tail_start_step;
    else
        tail = mt->series.points[0].step;
    if (!by_step && mt->series.by_time) { /* series buckets -> BUCKET_NS keys of the stack histories */
        int64_t f = mt->series.bucket_ns / BUCKET_NS;
        if (f < 1) f = 1;
        tail = tail > MAX_KEY / f ? MAX_KEY : tail * f;
    }
    return tail;
}

/* Growth from the tail's start to the last reported key. Auto-detected steps (period detection) may close their
 * last step after the interpreter's teardown began, and the teardown frees everything a leak kept (a Python program
 * frees its globals at exit): the sites' end is then the step before, the last one the loop certainly ran. */
static tail_ctx_t tail_window(const state_t *s, bool by_step, int64_t tail) {
    tail_ctx_t c = {by_step, tail, last_reported_key(s, by_step)};
    if (s->xp->steps_auto && c.last_key != INT64_MAX && c.last_key > tail + 1) c.last_key--;
    return c;
}

static void find_sites(state_t *s, pl_report_process_t *row, bool by_step) {
    pl_extract_proc_t *xp = s->xp;
    xp->site_tail_step = -1;
    if (!s->n_stacks) return;
    static const pl_metric_t pref[] = {PL_METRIC_HEAP_BYTES, PL_METRIC_RSS_ANON, PL_METRIC_RSS};
    const pl_report_metric_t *mt = NULL;
    for (size_t i = 0; i < 3 && !mt; i++)
        if (row->metrics[pref[i]].present) {
            mt = &row->metrics[pref[i]];
            xp->site_metric = pl_metric_name(pref[i]);
        }
    int64_t tail = 0;  /* whole run when no series judges the tail */
    if (mt && mt->series.n_points) tail = tail_key(s, mt, by_step);
    else xp->site_metric = NULL;
    xp->site_tail_step = tail;
    tail_ctx_t c = tail_window(s, by_step, tail);
    double total;
    size_t n_counted;
    xp->n_sites = group_sites(s, tail_val, &c, false, xp->sites, PL_EXTRACT_MAX_SITES, &total, &n_counted);
    name_sites(s, xp->sites, xp->n_sites, total, false);
}

/* The device sites (facts.h, pl_extract_dev_sites_t): for each device metric a process verdict can name, growth over
 * its tail, one list per distinct tail. Only for a trace whose hooks' device allocations carried stacks. */
static int find_dev_sites(state_t *s, const pl_report_process_t *row, bool by_step) {
    if (!s->n_dstacks) return 0;
    pl_extract_dev_sites_t *d = calloc(1, sizeof *d);
    if (!d) return -ENOMEM;
    s->xp->dev_sites = d;
    d->n_stacks = s->n_dstacks;
    static const pl_metric_t dev[] = {PL_METRIC_DEV_TENSORS, PL_METRIC_DEV_ALLOCATED, PL_METRIC_DEV_RESERVED};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        const pl_report_metric_t *mt = &row->metrics[dev[i]];
        if (!mt->present || !mt->series.n_points) continue;
        int64_t tail = tail_key(s, mt, by_step);
        size_t k = 0;
        while (k < d->n_lists && d->lists[k].since != tail) k++;
        if (k == d->n_lists) { /* a new tail: its sites */
            pl_extract_dev_list_t *l = &d->lists[d->n_lists++];
            l->since = tail;
            tail_ctx_t c = tail_window(s, by_step, tail);
            l->n_sites = group_sites_of(s, s->dstacks, s->n_dstacks, tail_val, &c, false, l->sites,
                                        PL_EXTRACT_MAX_SITES, &l->growth_bytes, &l->n_grew);
            name_sites_of(s, l->sites, l->n_sites, l->growth_bytes, false, true);
        }
        d->lists[k].metrics |= 1u << dev[i];
    }
    return 0;
}

/* ---- windows of steps: report --between, and the end-of-run view (docs/window.md, docs/end-of-run.md) ---- */

/* report --between: growth from the end of window_from to the end of end_step (window_to, or the last step when the
 * run ended before it: then from the ring, window_to's value holding the teardown after the last step) */
static bool between_val(const state_t *s, const stack_t_ *st, const void *ctx, double *g, double *end) {
    const pl_extract_window_t *w = ctx;
    double to = w->end_step == s->o->window_to ? st->win_to : ring_at(&st->last, w->end_step);
    if (!isfinite(to)) return false;
    *end = to;
    *g = to - st->win_from;
    return true;
}

static int find_window(state_t *s) {
    pl_extract_window_t *w = calloc(1, sizeof *w);
    if (!w) return -ENOMEM;
    s->xp->window = w;
    w->from_step = s->o->window_from;
    w->to_step = s->o->window_to;
    w->no_steps = s->xp->n_steps == 0;
    w->last_step = s->cur_step;
    w->end_step = w->to_step < s->cur_step ? w->to_step : s->cur_step;
    w->reached = !w->no_steps && s->cur_step > w->from_step;
    if (!w->reached || !s->n_stacks) return 0;
    w->n_sites = group_sites(s, between_val, w, false, w->sites, PL_EXTRACT_WINDOW_SITES, &w->growth_bytes, &w->n_grew);
    name_sites(s, w->sites, w->n_sites, w->growth_bytes, false);
    return 0;
}

/* The end-of-run view: live bytes at the end (the uncaught exception's record, else the last record) by site, and
 * their growth over the last PL_EXTRACT_END_STEPS steps before it (from the ring: exact). */
typedef struct end_ctx { int64_t from; bool at_uncaught; } end_ctx_t;

static bool end_val(const state_t *s, const stack_t_ *st, const void *ctx, double *g, double *end) {
    (void)s;
    const end_ctx_t *c = ctx;
    *end = c->at_uncaught ? st->at_uncaught : st->live_bytes;
    double from = c->from < 0 ? 0 : ring_at(&st->last, c->from);
    if (!isfinite(from)) return false;
    *g = *end - from;
    return true;
}

static int find_end(state_t *s) {
    if (!s->n_stacks) return 0;
    pl_extract_window_t *w = calloc(1, sizeof *w);
    if (!w) return -ENOMEM;
    s->xp->end = w;
    bool at_uncaught = s->uncaught_step >= 0;
    int64_t last = at_uncaught ? s->uncaught_step : s->cur_step;
    w->no_steps = s->xp->n_steps == 0;
    w->last_step = w->end_step = w->to_step = last;
    w->from_step = last > PL_EXTRACT_END_STEPS ? last - PL_EXTRACT_END_STEPS : 0;
    w->reached = !w->no_steps;
    end_ctx_t c = {w->no_steps ? -1 : w->from_step, at_uncaught};
    double total;
    size_t n;
    w->n_live = group_sites(s, end_val, &c, true, w->live, PL_EXTRACT_WINDOW_SITES, &total, &n);
    w->live_bytes = total;
    name_sites(s, w->live, w->n_live, total, true);
    if (!w->no_steps) {
        w->n_sites = group_sites(s, end_val, &c, false, w->sites, PL_EXTRACT_WINDOW_SITES, &w->growth_bytes, &w->n_grew);
        name_sites(s, w->sites, w->n_sites, w->growth_bytes, false);
    }
    return 0;
}

/* last_key: the last step to report (INT64_MAX = all). */
static int agg_to_series(pl_report_process_t *row, pl_metric_t m, const agg_t *a, bool by_step, int64_t last_key) {
    if (!a->n) return 0;
    pl_sample_t *smp = malloc(a->n * 2 * sizeof *smp);
    if (!smp) return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < a->n; i++, n++) {
        const bin_t *b = &a->b[i];
        if (by_step && b->key > last_key) break; /* bins are in key order */
        if (!by_step && last_key != INT64_MAX && b->key >= last_key) break;
        int64_t step = by_step ? b->key : -1;
        int64_t t = by_step ? b->t_ns : (b->key > INT64_MAX / BUCKET_NS ? INT64_MAX : b->key * BUCKET_NS);
        smp[2 * i] = (pl_sample_t){step, t, b->lo};
        smp[2 * i + 1] = (pl_sample_t){step, t, b->hi};
    }
    pl_series_opts_t so = {.bucket_ns = by_step ? 0 : BUCKET_NS * (a->stride < 1 << 20 ? a->stride : 1 << 20),
                           .max_buckets = 0};
    if (n == 0) { /* nothing but the trailing partial step: keep it rather than report nothing */
        free(smp);
        return agg_to_series(row, m, a, by_step, INT64_MAX);
    }
    int rc = pl_report_set_samples(row, m, smp, n * 2, by_step ? NULL : &so);
    free(smp);
    return rc;
}

static int finish(state_t *s, pl_report_process_t *row) {
    if (flush_cuda_tensors(s)) return -ENOMEM;
    bool by_step = s->xp->n_steps > 0;
    side_t *sd = by_step ? &s->by_step : &s->by_time;
    int src[PL_METRIC__COUNT];
    for (int m = 0; m < PL_METRIC__COUNT; m++) src[m] = -1;
    src[PL_METRIC_RSS] = A_RSS;
    src[PL_METRIC_RSS_ANON] = A_ANON;
    src[PL_METRIC_RSS_FILE] = A_FILE;
    src[PL_METRIC_RSS_SHMEM] = A_SHMEM;
    src[PL_METRIC_PSS] = A_PSS;
    src[PL_METRIC_HEAP_BYTES] = A_HEAP;
    src[PL_METRIC_HEAP_COUNT] = A_HEAPN;
    src[PL_METRIC_CGROUP] = A_CGROUP;
    src[PL_METRIC_DEV_OTHER] = A_OTHER;
    if (s->seen_stats) {
        if (s->seen_stats_alloc) { /* NVML alone (plateau attach) gives the used memory: dev.reserved only */
            src[PL_METRIC_DEV_ALLOCATED] = A_ST_ALLOC;
            src[PL_METRIC_DEV_TENSORS] = A_ST_TENS;
        }
        src[PL_METRIC_DEV_RESERVED] = A_ST_RES;
    } else {
        if (s->seen_alloc_src) {
            src[PL_METRIC_DEV_ALLOCATED] = A_EV_ALLOC;
            src[PL_METRIC_DEV_TENSORS] = A_EV_TENS;
        } else if (s->seen_drv) {
            src[PL_METRIC_DEV_ALLOCATED] = A_EV_DRV; /* cudaMalloc'd memory is what the program holds */
        }
        if (s->seen_map) src[PL_METRIC_DEV_RESERVED] = A_EV_RES;
    }
    if (s->seen_stats && s->seen_active) src[PL_METRIC_DEV_ACTIVE] = A_ST_ACTIVE;
    if (s->seen_stats && s->seen_split) src[PL_METRIC_DEV_INACTIVE_SPLIT] = A_ST_SPLIT;
    if (s->seen_py_tensors) src[PL_METRIC_TENSORS] = A_PY_TENS;
    if (s->seen_cuda_tensors) src[PL_METRIC_TENSORS_CUDA] = A_PY_TENS_CUDA;
    if (s->seen_autograd) {
        src[PL_METRIC_AUTOGRAD] = A_PY_AUTOGRAD;
        if (s->seen_saved) {
            row->autograd_saved_bytes = s->autograd_bytes;
            row->autograd_saved_n = s->autograd_n;
            row->autograd_lower = s->autograd_flags > 0; /* nodes capped or saved tensors left unread */
        }
    }
    for (size_t i = 0; i < s->n_astats; i++) {
        const astat_t *a = &s->astats[i];
        if (a->retries >= 0) row->dev_alloc_retries = (row->dev_alloc_retries < 0 ? 0 : row->dev_alloc_retries) +
                                                      a->retries;
        if (a->ooms >= 0) row->dev_ooms = (row->dev_ooms < 0 ? 0 : row->dev_ooms) + a->ooms;
    }
    int64_t last_key = last_reported_key(s, by_step);
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        if (src[m] < 0) continue;
        if (s->o->only_metric && (pl_metric_t)m != s->o->metric && m != PL_METRIC_HEAP_BYTES) continue;
        int rc = agg_to_series(row, (pl_metric_t)m, &sd->a[src[m]], by_step, last_key);
        if (rc) return rc;
    }
    find_sites(s, row, by_step);
    if (find_dev_sites(s, row, by_step)) return -ENOMEM;
    if (s->o->window && find_window(s)) return -ENOMEM;
    /* how it ended: only a process that did not end cleanly, or ended by an uncaught exception, is looked at */
    if ((!s->xp->clean_end || s->uncaught_step >= 0) && !s->xp->running && find_end(s)) return -ENOMEM;
    if (s->xp->retention) { /* who keeps it (reports/retention.c): pl_run_analyze says it in the verdict line */
        pl_retention_judge(s->xp->retention);
        match_holders(s);
    }
    if (s->o->only_metric && s->o->metric != PL_METRIC_HEAP_BYTES && row->metrics[PL_METRIC_HEAP_BYTES].present) {
        pl_series_free(&row->metrics[PL_METRIC_HEAP_BYTES].series);
        row->metrics[PL_METRIC_HEAP_BYTES].present = false;
        row->heap_filtered = true; /* recorded: the diagnosis must not say otherwise */
    }
    return 0;
}

static void state_free(state_t *s) {
    for (int i = 0; i < A__N; i++) {
        free(s->by_step.a[i].b);
        free(s->by_time.a[i].b);
    }
    pl_table_free(&s->host);
    pl_table_free(&s->blocks);
    pl_table_free(&s->segs);
    pl_table_free(&s->stack_ix);
    free(s->stacks);
    pl_table_free(&s->dev_blocks);
    pl_table_free(&s->dev_segs);
    pl_table_free(&s->dstack_ix);
    free(s->dstacks);
    pl_ingest_free(s->in);
}

/* ---- one trace: a new process row and its extras ---- */

static pl_extract_proc_t *new_proc(pl_extract_t *x) {
    if (pl_grow_first((void **)&x->procs, &x->cap_procs, x->n_procs + 1, sizeof *x->procs, 4)) return NULL;
    pl_extract_proc_t *p = &x->procs[x->n_procs++];
    memset(p, 0, sizeof *p);
    p->rank = p->local_rank = -1;
    p->site_tail_step = -1;
    p->dev_last_allocated = p->dev_last_reserved = p->dev_last_inactive_split = p->dev_last_step = -1;
    return p;
}


/* A process that ran on another host cannot be looked up in this one's /proc. */
static bool on_this_node(const pl_extract_proc_t *p) {
    char host[64];
    if (!p->node[0] || gethostname(host, sizeof host - 1)) return true;
    host[sizeof host - 1] = 0;
    return !strcmp(host, p->node);
}

/* One pass over a trace, its records through extraction's handlers (on_record), into a new row. auto_steps (not
 * NULL): the period detection found in an unmarked trace (pl_period_steps, a pass of its own before this one): its
 * step ends are delivered as step records. Returns 0 or -errno. */
static int extract_reader(pl_report_t *r, pl_extract_t *x, pl_trace_reader_t *rd, const char *file,
                          const pl_extract_opts_t *opts, const pl_period_t *auto_steps) {
    pl_extract_opts_t o = {0};
    if (opts) o = *opts;
    if (o.max_points == 0) o.max_points = 8192;
    if (o.max_points < 16) o.max_points = 16;
    const pl_trace_header_t *h = pl_trace_header(rd);
    pl_report_process_t *row = pl_report_add_process(r, h ? h->pid : 0, -1, "");
    if (!row) return -ENOMEM;
    pl_extract_proc_t *xp = new_proc(x);
    if (!xp) return -ENOMEM;
    xp->proc = row;
    copy_str(xp->file, sizeof xp->file, file);
    if (h) {
        xp->pid = h->pid;
        xp->ppid = h->ppid;
        xp->exec_seq = h->exec_seq;
        xp->start_realtime_ns = h->start_realtime_ns;
        xp->t0_ns = h->start_mono_ns;
    }
    state_t *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->t0 = h ? h->start_mono_ns : 0;
    pl_table_t *maps[] = {&s->host, &s->blocks, &s->segs, &s->stack_ix, &s->dev_blocks, &s->dev_segs, &s->dstack_ix};
    for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++) map_init(maps[i]);
    if (!(s->in = pl_ingest_new())) {
        free(s);
        return -ENOMEM;
    }
    s->r = r;
    s->o = &o;
    s->xp = xp;
    s->last_reserved = NAN;
    s->uncaught_step = -1;
    for (int i = 0; i < A__N; i++) {
        s->by_step.a[i].max = s->by_time.a[i].max = o.max_points;
        s->by_step.a[i].stride = s->by_time.a[i].stride = 1;
    }
    pl_trace_record_t rec;
    int rc, nrc;
    size_t next_bound = 0; /* synthetic step records of auto_steps not yet delivered */
    while ((nrc = pl_trace_next(rd, &rec)) > 0) {
        if (!xp->n_records && rec.type == PL_REC_PROCESS_START) /* the host allocator, as recorded (compare.h) */
            copy_str(xp->host_allocator, sizeof xp->host_allocator, rec.u.process.host_allocator);
        xp->n_records++;
        if (rec.t_ns > xp->last_ns) xp->last_ns = rec.t_ns;
        /* a step record at each step end period detection found (reports/period.c) */
        while (auto_steps && next_bound < auto_steps->n_bounds && rec.t_ns >= auto_steps->bounds_ns[next_bound]) {
            pl_trace_record_t sr = {.type = PL_REC_STEP, .t_ns = auto_steps->bounds_ns[next_bound]};
            sr.u.step.step = ++next_bound;
            sr.u.step.source = PL_STEP_AUTO;
            if ((rc = on_record(s, &sr)) < 0) goto out;
        }
        if (rec.type == PL_REC_DEVICE_ALLOC && rec.u.device.source != PL_DEV_SRC_ALLOCATOR &&
            rec.u.device.source != PL_DEV_SRC_CUPTI)
            s->seen_drv = true;
        rc = on_record(s, &rec);
        if (rc < 0) goto out;
    }
    if (nrc < 0) {
        xp->damaged = true;
        const char *msg = pl_trace_error(rd);
        if (msg && msg[0]) copy_str(xp->error, sizeof xp->error, msg);
        else snprintf(xp->error, sizeof xp->error, "%s: offset %llu: %s", file ? file : "trace",
                      (unsigned long long)pl_trace_offset(rd), strerror(-nrc));
    }
    xp->running = !xp->clean_end && on_this_node(xp) && pl_alive_same_process(xp->pid, xp->start_realtime_ns, xp->exe);
    if (auto_steps && xp->n_steps) {
        xp->steps_auto = true;
        xp->auto_period_allocs = auto_steps->period_allocs;
        xp->auto_period_ms = auto_steps->period_ns / 1e6;
        xp->auto_confidence = auto_steps->confidence;
    }
    rc = finish(s, row);
    if (rc) goto out;
out:
    state_free(s);
    free(s);
    return rc;
}

/* A file left out of the report, with the message saying why. */
static void note_failed(pl_extract_t *x, const char *msg) {
    x->n_files_failed++;
    if (x->n_failed_named < PL_EXTRACT_FAILED_NAMED) {
        char *f = x->failed[x->n_failed_named++];
        size_t n = strnlen(msg, sizeof x->failed[0] - 1);
        memcpy(f, msg, n);
        f[n] = 0;
    }
    if (x->first_error[0]) return;
    size_t n = strnlen(msg, sizeof x->first_error - 1);
    memcpy(x->first_error, msg, n);
    x->first_error[n] = 0;
}

static void note_open_error(pl_extract_t *x, const char *path, int rc) {
    const char *m = pl_trace_open_error();
    char msg[512];
    if (m && m[0]) copy_str(msg, sizeof msg, m);
    else snprintf(msg, sizeof msg, "%s: %s", path, strerror(-rc));
    note_failed(x, msg);
}

int pl_extract_reader(pl_report_t *r, pl_extract_t *x, pl_trace_reader_t *rd, const char *file,
                      const pl_extract_opts_t *opts) {
    if (!r || !x || !rd) return -EINVAL;
    int rc = extract_reader(r, x, rd, file, opts, NULL);
    pl_run_update_cut_short(r, x);
    return rc;
}

/* A trace is read twice: period detection (reports/period.c, docs/period.md) reads it up to its first step record
 * (to its end when it has none), then extraction from its start; reopen() opens the source again for that pass. */
typedef int (*reopen_fn)(const void *src, size_t len, const char *name, pl_trace_reader_t **out);

static int reopen_file(const void *src, size_t len, const char *name, pl_trace_reader_t **out) {
    (void)len;
    (void)name;
    return pl_trace_open(src, out);
}

static int reopen_mem(const void *src, size_t len, const char *name, pl_trace_reader_t **out) {
    return pl_trace_open_mem(src, len, name ? name : "memory", out);
}

/* Extract the trace open in rd (closed here), with period detection. name: the file name given to extract_reader
 * (NULL for an unnamed buffer); src, len: what reopen opens. */
/* A trace read twice: period detection's pass (an unmarked trace gets the steps it finds), then extraction's. */
static int extract_detect(pl_report_t *r, pl_extract_t *x, pl_trace_reader_t *rd, const char *name,
                          const pl_extract_opts_t *opts, reopen_fn reopen, const void *src, size_t len) {
    pl_period_t per;
    int rc = pl_period_steps(rd, NULL, &per);
    pl_trace_close(rd);
    if (rc) return rc;
    rc = reopen(src, len, name, &rd);
    if (rc) {
        pl_period_free(&per);
        if (rc != -ENOMEM) note_open_error(x, name ? name : "memory", rc);
        return rc;
    }
    rc = extract_reader(r, x, rd, name, opts, per.found ? &per : NULL);
    pl_period_free(&per);
    pl_trace_close(rd);
    return rc;
}

static int extract_file(pl_report_t *r, pl_extract_t *x, const char *path, const pl_extract_opts_t *opts) {
    pl_trace_reader_t *rd;
    int rc = pl_trace_open(path, &rd);
    if (rc) {
        note_open_error(x, path, rc);
        return rc;
    }
    return extract_detect(r, x, rd, path, opts, reopen_file, path, 0);
}

int pl_extract_file(pl_report_t *r, pl_extract_t *x, const char *path, const pl_extract_opts_t *opts) {
    if (!r || !x || !path) return -EINVAL;
    int rc = extract_file(r, x, path, opts);
    pl_run_update_cut_short(r, x);
    return rc;
}

int pl_extract_mem(pl_report_t *r, pl_extract_t *x, const void *data, size_t len, const char *name,
                   const pl_extract_opts_t *opts) {
    if (!r || !x || (!data && len)) return -EINVAL;
    pl_trace_reader_t *rd;
    const char *nm = name ? name : "memory";
    int rc = pl_trace_open_mem(data, len, nm, &rd);
    if (rc) {
        note_open_error(x, nm, rc);
        return rc;
    }
    rc = extract_detect(r, x, rd, name, opts, reopen_mem, data, len);
    pl_run_update_cut_short(r, x);
    return rc;
}

/* Read one path's traces into r and x (no finishing pass). *n_listed: *.pltrace names found in a directory (-1 for
 * a file). */
static int add_path(pl_report_t *r, pl_extract_t *x, const char *path, const pl_extract_opts_t *opts, long *n_listed) {
    *n_listed = -1;
    struct stat sb;
    if (stat(path, &sb)) {
        int rc = -errno;
        note_open_error(x, path, rc);
        if (!x->first_error[0] || x->n_files_failed <= 1)
            snprintf(x->first_error, sizeof x->first_error, "%s: %s", path, strerror(-rc));
        return rc;
    }
    if (!S_ISDIR(sb.st_mode)) return extract_file(r, x, path, opts);
    pl_trace_dir_t list; /* regular *.pltrace files only (tracer/read/rundir.c): a FIFO would block the open */
    int rc = pl_trace_dir_list(path, &list);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s: %s", path, strerror(-rc));
        note_failed(x, msg);
        return rc;
    }
    for (size_t i = 0; i < list.n_skipped; i++) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s/%s", path, list.skipped[i]);
        note_failed(x, msg);
    }
    for (size_t i = 0; i < list.n_paths && !rc; i++) {
        int frc = extract_file(r, x, list.paths[i], opts);
        if (frc == -ENOMEM) rc = frc;
    }
    *n_listed = (long)(list.n_paths + list.n_skipped);
    pl_trace_dir_free(&list);
    return rc;
}

int pl_extract_path(pl_report_t *r, pl_extract_t *x, const char *path, const pl_extract_opts_t *opts) {
    struct stat sb;
    if (path && !stat(path, &sb) && !S_ISDIR(sb.st_mode) && r && x) return pl_extract_file(r, x, path, opts);
    return pl_extract_paths(r, x, &path, 1, opts);
}

int pl_extract_paths(pl_report_t *r, pl_extract_t *x, const char *const *paths, size_t n_paths,
                     const pl_extract_opts_t *opts) {
    if (!r || !x || !paths || !n_paths) return -EINVAL;
    size_t before = x->n_procs;
    int rc = 0, last = 0;
    long n_listed = -1;
    for (size_t i = 0; i < n_paths && rc != -ENOMEM; i++) {
        if (!paths[i]) return -EINVAL;
        last = add_path(r, x, paths[i], opts, &n_listed);
        if (last == -ENOMEM) rc = last;
    }
    if (n_paths == 1 && last && last != -ENOMEM && x->n_procs == before) return last; /* one file's own error */
    struct stat sb; /* how the command ended: the first run directory's run.status */
    bool dir = !stat(paths[0], &sb) && S_ISDIR(sb.st_mode);
    int arc = pl_run_assemble(r, x, dir ? paths[0] : NULL);
    if (!rc) rc = arc;
    if (rc) return rc;
    if (x->n_procs == before) {
        if (n_paths == 1 && n_listed == 0)
            snprintf(x->first_error, sizeof x->first_error, "%s: no *.pltrace files in this directory", paths[0]);
        return -ENOENT;
    }
    return 0;
}

int pl_extract_scan_ranks(const char *path, int32_t **ranks, size_t *n_ranks, size_t *n_unranked) {
    *ranks = NULL;
    *n_ranks = *n_unranked = 0;
    pl_trace_dir_t list = {0};
    struct stat sb;
    if (stat(path, &sb)) return -errno;
    int rc = 0;
    const char *one = path;
    const char *const *files = &one;
    size_t n_files = 1;
    if (S_ISDIR(sb.st_mode)) {
        if ((rc = pl_trace_dir_list(path, &list))) return rc;
        files = (const char *const *)list.paths;
        n_files = list.n_paths;
    }
    int32_t *out = malloc((n_files ? n_files : 1) * sizeof *out);
    if (!out) {
        pl_trace_dir_free(&list);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n_files; i++) {
        pl_trace_reader_t *rd;
        if (pl_trace_open(files[i], &rd)) continue; /* not a trace: the report says so */
        pl_trace_record_t rec;
        if (pl_trace_next(rd, &rec) > 0 && rec.type == PL_REC_PROCESS_START && rec.u.process.rank >= 0)
            out[(*n_ranks)++] = rec.u.process.rank;
        else
            (*n_unranked)++;
        pl_trace_close(rd);
    }
    pl_trace_dir_free(&list);
    *ranks = out;
    return 0;
}
