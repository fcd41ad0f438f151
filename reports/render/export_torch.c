/* reports/export_torch: one process's device allocations as a PyTorch memory snapshot pickle (export.h), the
 * layout of torch.cuda.memory._snapshot() that PyTorch's memory_viz and its web viewer read (and that plateau tune
 * reads back: tune/torch_snapshot.c).
 *
 * The report keeps only the device series, so the records are read again here, one trace at a time; the process
 * with the most device allocations is kept. Two sources, never mixed (they would count one allocation twice):
 * - plateau's caching allocator (its event hook): blocks are 'alloc' / 'free_completed', segments from the driver
 *   'segment_alloc' / 'segment_free'; blocks sit inside segments as PyTorch's do.
 * - otherwise the CUDA runtime and driver hooks: a cudaMalloc'd range is a segment holding one block (what
 *   PyTorch shows without its caching allocator), cuMemMap / cuMemUnmap are 'segment_map' / 'segment_unmap'.
 * A runtime call and the driver call under it name one address: the second is skipped as a duplicate.
 * Memory: at most PL_EXPORT_TORCH_MAX_EVENTS trace entries (the latest, as PyTorch's ring keeps them) and one
 * table entry per live block and segment.
 *
 * Frames come from the trace's stack, frame, module and Python frame records of the same process (bounded tables).
 *
 * The pickle is protocol 2, written by hand: EMPTY_DICT/EMPTY_LIST, MARK ... SETITEMS/APPENDS, BININT/LONG1,
 * BINUNICODE, NEWFALSE, TUPLE, BINPUT/BINGET for the repeated key strings and LONG_BINPUT/LONG_BINGET for a stack's
 * frames list, written once; STOP (Python's pickletools documents each opcode).
 */
#include "export.h"
#include "grow.h"
#include "ingest.h"
#include "table.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <plateau/trace.h>

enum { A_ALLOC, A_FREE, A_SEG_ALLOC, A_SEG_FREE, A_SEG_MAP, A_SEG_UNMAP, A_OOM, A__N };
static const char *const action_names[A__N] = {"alloc",       "free_completed", "segment_alloc", "segment_free",
                                               "segment_map", "segment_unmap",  "oom"};

typedef struct ev {
    int64_t t_ns;             /* CLOCK_REALTIME when known, else CLOCK_MONOTONIC */
    uint64_t addr, size, requested, stream;
    int32_t device;
    uint32_t stack_id;        /* the allocation's stack (alloc, oom), 0 none */
    uint8_t action;
} ev_t;

typedef struct live {         /* a live block or segment, the value of its address in a table (addr 0 and
                               * UINT64_MAX are never stored) */
    uint64_t addr, size, requested, stream;
    int32_t device;
    uint32_t pool;            /* allocator pool: 1 small, 2 large; 0 unknown */
    uint32_t stack_id;        /* a block's allocation stack, 0 none */
} live_t;

/* ---- the trace's stacks, for the snapshot's 'frames' ----
 * A stack with Python frames is written as its Python frames (what PyTorch's snapshots show by default), else as
 * its native frames without the tracer's own (module libplateau*): innermost first, {'filename', 'line', 'name'}.
 * The stacks are ingest's table (reports/ingest), bounded there: what does not fit is left out, and its
 * allocations get fewer or no frames. */

/* one source's view of one process */
typedef struct side {
    ev_t *ring;
    size_t cap, n, head;      /* head: index of the oldest entry once the ring is full */
    uint64_t n_total, n_allocs, n_skipped;
    pl_table_t blocks, segs;  /* address -> live_t (common/table.h) */
    int32_t max_device;
} side_t;

struct pl_export_torch {
    side_t s;
    bool allocator;           /* blocks from plateau's allocator (else the CUDA hooks) */
    pl_ingest_t *in;          /* the trace's stacks */
};

#define DELETED UINT64_MAX     /* an address the tables refuse (kept as before they shared common/table.h) */

/* 0 or -ENOMEM (the tables are unbounded and never see address 0) */
static int table_put(pl_table_t *t, const live_t *v) {
    void *p;
    int rc = pl_table_put(t, v->addr, &p);
    if (rc) return rc < 0 ? rc : 0;
    *(live_t *)p = *v;
    return 0;
}

static bool table_take(pl_table_t *t, uint64_t addr, live_t *out) {
    live_t *f = pl_table_get(t, addr);
    if (!f) return false;
    *out = *f;
    pl_table_del(t, f);
    return true;
}

static void side_init(side_t *s) {
    memset(s, 0, sizeof *s);
    s->max_device = -1;
    pl_table_init(&s->blocks, sizeof(live_t), 0);
    pl_table_init(&s->segs, sizeof(live_t), 0);
}

static void side_free(side_t *s) {
    free(s->ring);
    pl_table_free(&s->blocks);
    pl_table_free(&s->segs);
    memset(s, 0, sizeof *s);
}

static int side_event(side_t *s, int action, const pl_rec_device_t *q, int64_t t_ns) {
    if (s->cap < PL_EXPORT_TORCH_MAX_EVENTS && s->n == s->cap) {
        size_t nc = pl_grow_cap(s->cap, s->n + 1, 1024, sizeof *s->ring);
        if (nc > PL_EXPORT_TORCH_MAX_EVENTS) nc = PL_EXPORT_TORCH_MAX_EVENTS;
        ev_t *nr = nc ? realloc(s->ring, nc * sizeof *nr) : NULL;
        if (!nr) return -ENOMEM;
        s->ring = nr;
        s->cap = nc;
    }
    uint32_t stack = action == A_ALLOC || action == A_OOM ? q->stack_id : 0;
    ev_t e = {t_ns, action == A_OOM ? 0 : q->addr, q->size, q->requested, q->stream, q->device, stack, (uint8_t)action};
    if (s->n < s->cap) {
        s->ring[s->n++] = e;
    } else { /* full: the oldest entry goes */
        s->ring[s->head] = e;
        s->head = (s->head + 1) % s->cap;
    }
    s->n_total++;
    if (q->device > s->max_device) s->max_device = q->device;
    return 0;
}

/* One device record into its side, by kind; each returns 0 or -ENOMEM. q's device is a shown one (side_device). */
typedef int (*side_fn)(side_t *s, bool allocator, const pl_rec_device_t *q, int64_t t_ns);

static live_t live_of(const pl_rec_device_t *q) {
    uint64_t requested = q->requested ? q->requested : q->size;
    return (live_t){q->addr, q->size, requested, q->stream, q->device, q->pool, q->stack_id};
}

/* a duplicate (runtime call and the driver call under it) or an address never seen */
static int skipped(side_t *s) {
    s->n_skipped++;
    return 0;
}

static int kind_alloc(side_t *s, bool allocator, const pl_rec_device_t *q, int64_t t_ns) {
    if (!q->addr || q->addr == DELETED || !q->size || pl_table_get(&s->blocks, q->addr)) return skipped(s);
    live_t v = live_of(q);
    int rc;
    if ((rc = table_put(&s->blocks, &v))) return rc;
    s->n_allocs++;
    if (!allocator && (rc = side_event(s, A_SEG_ALLOC, q, t_ns))) return rc;
    return side_event(s, A_ALLOC, q, t_ns);
}

static int kind_free(side_t *s, bool allocator, const pl_rec_device_t *q, int64_t t_ns) {
    live_t old;
    if (!table_take(&s->blocks, q->addr, &old)) return skipped(s);
    pl_rec_device_t f = *q;
    f.size = old.size; /* a free record may not carry the size */
    f.device = old.device;
    f.stream = old.stream;
    int rc = side_event(s, A_FREE, &f, t_ns);
    if (rc) return rc;
    return allocator ? 0 : side_event(s, A_SEG_FREE, &f, t_ns);
}

static int kind_map(side_t *s, bool allocator, const pl_rec_device_t *q, int64_t t_ns) {
    if (!q->addr || q->addr == DELETED || !q->size || pl_table_get(&s->segs, q->addr)) return skipped(s);
    live_t v = live_of(q);
    int rc = table_put(&s->segs, &v);
    if (rc) return rc;
    return side_event(s, allocator ? A_SEG_ALLOC : A_SEG_MAP, q, t_ns);
}

static int kind_unmap(side_t *s, bool allocator, const pl_rec_device_t *q, int64_t t_ns) {
    live_t old;
    if (!table_take(&s->segs, q->addr, &old)) return skipped(s);
    pl_rec_device_t f = *q;
    f.size = old.size;
    f.device = old.device;
    return side_event(s, allocator ? A_SEG_FREE : A_SEG_UNMAP, &f, t_ns);
}

static int kind_oom(side_t *s, bool allocator, const pl_rec_device_t *q, int64_t t_ns) {
    (void)allocator;
    return side_event(s, A_OOM, q, t_ns);
}

/* One trace read through ingest: its device records into the allocator's side and the hooks' side, its stacks into
 * ingest's table. */
typedef struct reading {
    side_t *as, *cs;
    int64_t shift;            /* CLOCK_MONOTONIC -> CLOCK_REALTIME, 0 unknown */
} reading_t;

/* one device record into side s by fn, its device checked: -1 (the hooks could not tell the calling thread's device,
 * or pinned host memory, which the report's device series counts too) is shown on device 0, as the report counts it
 * with the rest; a hostile ordinal is skipped */
static int side_device(side_t *s, bool allocator, side_fn fn, const pl_trace_record_t *rec, int64_t shift) {
    const pl_rec_device_t *q = &rec->u.device;
    if (q->device < -1 || q->device >= PL_EXPORT_TORCH_MAX_DEVICES) return skipped(s);
    pl_rec_device_t d0 = *q;
    if (d0.device < 0) d0.device = 0;
    return fn(s, allocator, &d0, rec->t_ns + shift);
}

static int route(void *ctx, const pl_trace_record_t *rec, side_fn fn) {
    const reading_t *r = ctx;
    uint32_t source = rec->u.device.source;
    if (source == PL_DEV_SRC_CUPTI) return 0; /* repeats what the hooks saw */
    bool allocator = source == PL_DEV_SRC_ALLOCATOR;
    return side_device(allocator ? r->as : r->cs, allocator, fn, rec, r->shift);
}

static int on_alloc(void *ctx, const pl_trace_record_t *rec) { return route(ctx, rec, kind_alloc); }
static int on_free(void *ctx, const pl_trace_record_t *rec) { return route(ctx, rec, kind_free); }
static int on_map(void *ctx, const pl_trace_record_t *rec) { return route(ctx, rec, kind_map); }
static int on_unmap(void *ctx, const pl_trace_record_t *rec) { return route(ctx, rec, kind_unmap); }

/* OOM records come from the driver hook even under plateau's allocator: both sides keep them */
static int on_oom(void *ctx, const pl_trace_record_t *rec) {
    const reading_t *r = ctx;
    if (rec->u.device.source == PL_DEV_SRC_CUPTI) return 0;
    int rc = side_device(r->as, true, kind_oom, rec, r->shift);
    return rc ? rc : route(ctx, rec, kind_oom);
}

/* Read one trace into *as (allocator source), *cs (CUDA hooks) and in's tables; closes rd. */
static int read_trace(pl_trace_reader_t *rd, side_t *as, side_t *cs, pl_ingest_t *in) {
    const pl_trace_header_t *h = pl_trace_header(rd);
    reading_t r = {as, cs, h && h->start_realtime_ns > 0 ? h->start_realtime_ns - h->start_mono_ns : 0};
    static const pl_ingest_handlers_t handlers = {.device_alloc = on_alloc, .device_free = on_free,
                                                  .device_map = on_map, .device_unmap = on_unmap, .device_oom = on_oom};
    int rc = pl_ingest_read(in, rd, &handlers, &r, NULL);
    pl_trace_close(rd);
    return rc; /* a damaged trace gives what was read before the damage, as the report does */
}

/* One trace's device records (rd is closed): *out gets its allocator's view when it has one, else the hooks', and
 * stays NULL without any device allocation. Returns 0, -ENOMEM, or the reader's error. */
static int collect_reader(pl_trace_reader_t *rd, pl_export_torch_t **out) {
    *out = NULL;
    side_t as, cs;
    side_init(&as);
    side_init(&cs);
    pl_ingest_t *in = pl_ingest_new();
    int rc = in ? read_trace(rd, &as, &cs, in) : -ENOMEM;
    if (!in) pl_trace_close(rd);
    bool use_alloc = as.n_allocs > 0;
    side_t *keep = use_alloc ? &as : &cs;
    if (!rc && keep->n_allocs) {
        pl_export_torch_t *t = calloc(1, sizeof *t);
        if (!t) rc = -ENOMEM;
        else {
            t->s = *keep;
            t->allocator = use_alloc;
            t->in = in;
            in = NULL;
            memset(keep, 0, sizeof *keep);
            *out = t;
        }
    }
    side_free(&as);
    side_free(&cs);
    pl_ingest_free(in);
    return rc;
}

int pl_export_torch_collect(const pl_run_t *run, pl_export_torch_t **out, pl_export_torch_info_t *info) {
    if (!run || !run->ext || !out || !info) return -EINVAL;
    const pl_extract_t *x = run->ext;
    *out = NULL;
    memset(info, 0, sizeof *info);
    pl_export_torch_t *best = NULL;
    size_t n_with = 0;
    for (size_t i = 0; i < x->n_procs; i++) {
        pl_trace_reader_t *rd;
        pl_export_torch_t *t = NULL;
        int rc = x->procs[i].file[0] ? pl_trace_open(x->procs[i].file, &rd) : -ENOENT;
        if (!rc) rc = collect_reader(rd, &t);
        if (rc) {
            pl_export_torch_free(best);
            return rc;
        }
        if (!t) continue;
        n_with++;
        if (best && t->s.n_allocs <= best->s.n_allocs) {
            pl_export_torch_free(t);
            continue;
        }
        pl_export_torch_free(best);
        best = t;
        info->pid = x->procs[i].pid;
        snprintf(info->file, sizeof info->file, "%s", x->procs[i].file);
    }
    if (!best) return 0;
    info->source = best->allocator ? "allocator" : "cuda";
    info->n_events = best->s.n;
    info->n_dropped = best->s.n_total - best->s.n;
    info->n_skipped = best->s.n_skipped;
    info->n_segments = best->allocator ? best->s.segs.n : best->s.blocks.n;
    info->n_devices = (size_t)(best->s.max_device + 1);
    info->n_other_procs = n_with ? n_with - 1 : 0;
    *out = best;
    return 0;
}

int pl_export_torch_collect_mem(const void *data, size_t len, pl_export_torch_t **out) {
    if (!out) return -EINVAL;
    *out = NULL;
    pl_trace_reader_t *rd;
    int rc = pl_trace_open_mem(data, len, "mem", &rd);
    return rc ? rc : collect_reader(rd, out);
}

void pl_export_torch_free(pl_export_torch_t *t) {
    if (!t) return;
    side_free(&t->s);
    pl_ingest_free(t->in);
    free(t);
}

/* ---- the final state: live segments, each with its blocks ---- */

typedef struct seg {
    live_t s;
    size_t first, n;          /* its blocks: blocks[first .. first + n) */
} seg_t;

static int cmp_live(const void *a, const void *b) {
    const live_t *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_seg(const void *a, const void *b) { return cmp_live(&((const seg_t *)a)->s, &((const seg_t *)b)->s); }

static size_t table_list(const pl_table_t *t, live_t *out) {
    size_t n = 0;
    for (size_t i = 0; i < t->cap; i++) {
        const live_t *v = pl_table_slot(t, i);
        if (v) out[n++] = *v;
    }
    return n;
}

/* Segments sorted by (device, address) and their blocks, both malloc'd. A block inside no live segment (its map
 * record was never seen, or the hooks' view where a range is its own segment) becomes a segment of its own; a block
 * overlapping one already placed is left out of the segments. */
static int final_state(const pl_export_torch_t *t, seg_t **segs_out, size_t *n_segs, live_t **blocks_out) {
    const side_t *s = &t->s;
    size_t nb = s->blocks.n, ns = t->allocator ? s->segs.n : 0;
    live_t *blocks = malloc((nb ? nb : 1) * sizeof *blocks);
    seg_t *segs = malloc((ns + nb ? ns + nb : 1) * sizeof *segs);
    live_t *tmp = malloc((ns ? ns : 1) * sizeof *tmp);
    if (!blocks || !segs || !tmp) {
        free(blocks);
        free(segs);
        free(tmp);
        return -ENOMEM;
    }
    nb = table_list(&s->blocks, blocks);
    qsort(blocks, nb, sizeof *blocks, cmp_live);
    if (t->allocator) ns = table_list(&s->segs, tmp);
    qsort(tmp, ns, sizeof *tmp, cmp_live);
    size_t n = 0, b = 0;
    uint64_t placed_end = 0;
    int32_t placed_dev = -1;
    for (size_t i = 0; i <= ns; i++) {
        /* blocks before segment i (or after the last one): segments of their own */
        while (b < nb && (i == ns || cmp_live(&blocks[b], &tmp[i]) < 0)) {
            segs[n++] = (seg_t){blocks[b], b, 1};
            b++;
        }
        if (i == ns) break;
        seg_t g = {tmp[i], b, 0};
        uint64_t end = tmp[i].addr + tmp[i].size;
        if (placed_dev == tmp[i].device && tmp[i].addr < placed_end) continue; /* overlaps the previous segment */
        while (b < nb && blocks[b].device == tmp[i].device && blocks[b].addr < end) {
            if (blocks[b].size > end - blocks[b].addr) blocks[b].size = 0; /* runs past the segment's end: left out */
            g.n++;
            b++;
        }
        placed_end = end;
        placed_dev = tmp[i].device;
        segs[n++] = g;
    }
    free(tmp);
    qsort(segs, n, sizeof *segs, cmp_seg);
    *segs_out = segs;
    *n_segs = n;
    *blocks_out = blocks;
    return 0;
}

/* ---- pickle protocol 2 ---- */

#define MEMO_MAX 64

typedef struct pk {
    FILE *o;
    const char *memo[MEMO_MAX]; /* strings written once and then fetched by memo index (pointer identity) */
    uint8_t memo_ix[MEMO_MAX];  /* their memo indexes */
    size_t n_memo;
    const pl_ingest_t *in;      /* the trace's stacks */
    uint32_t *stack_memo;       /* per stack: memo index + 1 of its frames list once written (0: not yet) */
    pl_symbols_t *sy;           /* offline names of native frames (reports/ingest/symbols.c), opened on first use */
    uint32_t next_memo;         /* the next memo index: numbered in order of use, as picklers do (a reader may
                                 * refuse an index beyond the values read so far: tune/pickle.c does) */
} pk_t;

static void pk_u32le(FILE *o, uint32_t v) {
    for (int i = 0; i < 4; i++) fputc((int)((v >> (8 * i)) & 0xff), o);
}

static void pk_int(pk_t *p, int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
        fputc('J', p->o); /* BININT: 4-byte signed little-endian */
        pk_u32le(p->o, (uint32_t)(int32_t)v);
        return;
    }
    fputc('\x8a', p->o); /* LONG1: n bytes of little-endian two's complement */
    fputc(8, p->o);
    for (int i = 0; i < 8; i++) fputc((int)(((uint64_t)v >> (8 * i)) & 0xff), p->o);
}

static void pk_uint(pk_t *p, uint64_t v) {
    if (v <= INT64_MAX) {
        pk_int(p, (int64_t)v);
        return;
    }
    fputc('\x8a', p->o);
    fputc(9, p->o); /* a ninth byte 0 keeps it positive */
    for (int i = 0; i < 8; i++) fputc((int)((v >> (8 * i)) & 0xff), p->o);
    fputc(0, p->o);
}

/* a str; constant strings (keys, action and state names) are memoized and fetched again by BINGET */
static void pk_str(pk_t *p, const char *s, bool constant) {
    if (constant)
        for (size_t i = 0; i < p->n_memo; i++)
            if (p->memo[i] == s) {
                fputc('h', p->o); /* BINGET */
                fputc(p->memo_ix[i], p->o);
                return;
            }
    size_t n = strlen(s);
    fputc('X', p->o); /* BINUNICODE: 4-byte length, UTF-8 */
    pk_u32le(p->o, (uint32_t)n);
    fwrite(s, 1, n, p->o);
    if (constant && p->n_memo < MEMO_MAX && p->next_memo < 256) {
        fputc('q', p->o); /* BINPUT */
        fputc((int)p->next_memo, p->o);
        p->memo_ix[p->n_memo] = (uint8_t)p->next_memo++;
        p->memo[p->n_memo++] = s;
    }
}

static void pk_key(pk_t *p, const char *k) { pk_str(p, k, true); }
static void pk_dict_open(pk_t *p) { fputs("}(", p->o); }   /* EMPTY_DICT, MARK */
static void pk_dict_close(pk_t *p) { fputc('u', p->o); }   /* SETITEMS */
static void pk_list_open(pk_t *p) { fputs("](", p->o); }   /* EMPTY_LIST, MARK */
static void pk_list_close(pk_t *p) { fputc('e', p->o); }   /* APPENDS */
static void pk_empty_list(pk_t *p) { fputc(']', p->o); }

static void pk_frame(pk_t *p, const char *file, int64_t line, const char *name) {
    char u[1024];
    pk_dict_open(p);
    pk_key(p, "filename");
    pk_str(p, pl_export_utf8(file, u, sizeof u), false);
    pk_key(p, "line");
    pk_int(p, line);
    pk_key(p, "name");
    pk_str(p, pl_export_utf8(name, u, sizeof u), false);
    pk_dict_close(p);
}

/* One native frame of a stack: the function named by the module file itself (the trace names only a stack's
 * innermost frames: preload/frames.c), else the trace's dynamic symbol, else the module offset (the pc when the
 * frame is unknown). */
static void pk_native_frame(pk_t *p, uint64_t pc, const pl_ingest_frame_t *f, const pl_sym_module_t *md) {
    const char *mod = md ? md->path : "";
    const char *fn = NULL;
    uint64_t off;
    if (f && mod[0] && !p->sy) p->sy = pl_symbols_new();
    if (f && mod[0] && p->sy && pl_symbols_lookup(p->sy, md, f->module_offset, &fn, &off) == PL_SYM_OK && fn) {
        pk_frame(p, mod, 0, fn);
        return;
    }
    if (f && f->symbol[0]) {
        pk_frame(p, mod, 0, f->symbol);
        return;
    }
    char name[96];
    snprintf(name, sizeof name, "0x%llx", (unsigned long long)(f ? f->module_offset : pc));
    pk_frame(p, mod, 0, name);
}

/* The frames list of a stack: written once, then fetched from the memo (LONG_BINPUT / LONG_BINGET) */
static void pk_frames(pk_t *p, uint32_t stack_id) {
    pl_ingest_stack_t k;
    if (!p->in || !pl_ingest_stack(p->in, stack_id, &k)) {
        pk_empty_list(p);
        return;
    }
    if (p->stack_memo && p->stack_memo[k.index]) {
        fputc('j', p->o); /* LONG_BINGET */
        pk_u32le(p->o, p->stack_memo[k.index] - 1);
        return;
    }
    pk_list_open(p);
    if (k.n_py) {
        for (uint32_t i = 0; i < k.n_py; i++) {
            const pl_ingest_pyframe_t *f = pl_ingest_pyframe(p->in, k.py[i]);
            if (f) pk_frame(p, f->file, f->line, f->function);
        }
    } else {
        bool inner = true; /* still in the tracer's own innermost frames */
        for (uint32_t i = 0; i < k.n_pcs; i++) {
            const pl_ingest_frame_t *f = pl_ingest_frame(p->in, k.pcs[i]);
            const pl_sym_module_t *md = f ? pl_ingest_module(p->in, f->module_id) : NULL;
            if (inner && pl_ingest_module_own(md)) continue;
            inner = false;
            pk_native_frame(p, k.pcs[i], f, md);
        }
    }
    pk_list_close(p);
    if (p->stack_memo) {
        p->stack_memo[k.index] = ++p->next_memo; /* memo index next_memo - 1 */
        fputc('r', p->o); /* LONG_BINPUT */
        pk_u32le(p->o, p->next_memo - 1);
    }
}

/* A block; an allocated one also carries 'history' (one entry: its allocation), the field older viewers read its
 * frames from (torch 1.13's memory_viz; later ones read it too) */
static void block(pk_t *p, uint64_t addr, uint64_t size, uint64_t requested, const char *state, uint32_t stack_id) {
    pk_dict_open(p);
    pk_key(p, "address");
    pk_uint(p, addr);
    pk_key(p, "size");
    pk_uint(p, size);
    pk_key(p, "requested_size");
    pk_uint(p, requested);
    pk_key(p, "state");
    pk_str(p, state, true);
    pk_key(p, "frames");
    pk_frames(p, stack_id);
    if (stack_id) {
        pk_key(p, "history");
        pk_list_open(p);
        pk_dict_open(p);
        pk_key(p, "addr");
        pk_uint(p, addr);
        pk_key(p, "real_size");
        pk_uint(p, requested);
        pk_key(p, "frames");
        pk_frames(p, stack_id);
        pk_dict_close(p);
        pk_list_close(p);
    }
    pk_dict_close(p);
}

/* a block drawn in its segment: not cut for running past its end, not overlapping the block before (at) */
static bool placed(const live_t *b, uint64_t at) { return b->size && b->addr >= at; }

static void segment(pk_t *p, const pl_export_torch_t *t, const seg_t *g, const live_t *blocks) {
    uint64_t allocated = 0, requested = 0, at = g->s.addr, end = g->s.addr + g->s.size;
    for (size_t i = g->first; i < g->first + g->n; i++) {
        if (!placed(&blocks[i], at)) continue;
        allocated += blocks[i].size;
        requested += blocks[i].requested <= blocks[i].size ? blocks[i].requested : blocks[i].size;
        at = blocks[i].addr + blocks[i].size;
    }
    at = g->s.addr;
    pk_dict_open(p);
    pk_key(p, "device");
    pk_int(p, g->s.device);
    pk_key(p, "address");
    pk_uint(p, g->s.addr);
    pk_key(p, "total_size");
    pk_uint(p, g->s.size);
    pk_key(p, "allocated_size");
    pk_uint(p, allocated);
    pk_key(p, "active_size");
    pk_uint(p, allocated);
    pk_key(p, "requested_size");
    pk_uint(p, requested);
    pk_key(p, "stream");
    pk_uint(p, g->s.stream);
    pk_key(p, "segment_type");
    /* PyTorch's small pool holds requests <= 1 MiB in 2 MiB segments (docs/allocator.md) */
    pk_str(p, g->s.pool == 1 || (!g->s.pool && g->s.size <= (2u << 20)) ? "small" : "large", true);
    pk_key(p, "segment_pool_id");
    static const char pool_id[] = {'(', 'K', 0, 'K', 0, 't'}; /* MARK, BININT1 0, BININT1 0, TUPLE: (0, 0) */
    fwrite(pool_id, 1, sizeof pool_id, p->o);                  /* the default pool */
    pk_key(p, "is_expandable");
    fputc('\x89', p->o); /* NEWFALSE */
    pk_key(p, "frames");
    pk_empty_list(p);
    pk_key(p, "blocks");
    pk_list_open(p);
    for (size_t i = g->first; i < g->first + g->n; i++) {
        const live_t *b = &blocks[i];
        if (!placed(b, at)) continue;
        if (b->addr > at) block(p, at, b->addr - at, 0, "inactive", 0);
        block(p, b->addr, b->size, b->requested <= b->size ? b->requested : b->size, "active_allocated", b->stack_id);
        at = b->addr + b->size;
    }
    if (at < end) block(p, at, end - at, 0, "inactive", 0);
    pk_list_close(p);
    pk_dict_close(p);
    (void)t;
}

static void trace_entry(pk_t *p, const ev_t *e) {
    pk_dict_open(p);
    pk_key(p, "action");
    pk_str(p, action_names[e->action], true);
    pk_key(p, "addr");
    pk_uint(p, e->addr);
    pk_key(p, "size");
    pk_uint(p, e->size);
    pk_key(p, "stream");
    pk_uint(p, e->stream);
    pk_key(p, "time_us");
    pk_int(p, e->t_ns / 1000);
    pk_key(p, "frames");
    pk_frames(p, e->stack_id);
    pk_dict_close(p);
}

int pl_export_torch_write(const pl_export_torch_t *t, FILE *o) {
    if (!t || !o) return -EINVAL;
    seg_t *segs;
    live_t *blocks;
    size_t n_segs;
    int rc = final_state(t, &segs, &n_segs, &blocks);
    if (rc) return rc;
    pk_t p = {.o = o, .in = t->in};
    size_t n_stacks = pl_ingest_n_stacks(t->in);
    if (n_stacks && !(p.stack_memo = calloc(n_stacks, sizeof *p.stack_memo))) {
        free(segs);
        free(blocks);
        return -ENOMEM;
    }
    fputs("\x80\x02", o); /* PROTO 2 */
    pk_dict_open(&p);
    pk_key(&p, "segments");
    pk_list_open(&p);
    for (size_t i = 0; i < n_segs; i++) segment(&p, t, &segs[i], blocks);
    pk_list_close(&p);
    pk_key(&p, "device_traces");
    pk_list_open(&p);
    const side_t *s = &t->s;
    for (int32_t d = 0; d <= s->max_device; d++) {
        pk_list_open(&p);
        for (size_t k = 0; k < s->n; k++) {
            const ev_t *e = &s->ring[(s->head + k) % s->n];
            if (e->device == d) trace_entry(&p, e);
        }
        pk_list_close(&p);
    }
    pk_list_close(&p);
    pk_key(&p, "allocator_settings");
    fputc('}', o);
    pk_dict_close(&p);
    fputc('.', o); /* STOP */
    free(p.stack_memo);
    pl_symbols_free(p.sy);
    free(segs);
    free(blocks);
    return ferror(o) ? -EIO : 0;
}
