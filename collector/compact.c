/* The collector's compaction (compact.h; docs/long-runs.md). Invariants:
 * - Kept records reach the sink in the order they were fed, but for folded totals (below, "folding"), which come at
 *   the end of their window carrying their step; an aggregate record is written after every record it counts.
 * - A pair is elided only within one block of held records, and a block never holds a step record but as its last
 *   record: both halves of an elided pair belong to the same step, and no site's live bytes at a step boundary
 *   change (reports/extract.c keys a sampled allocation by the step in progress).
 * - `live` holds the addresses whose host_alloc the file holds without their host_free: an allocation at such an
 *   address displaces that one in the report, so it is never elided (nor is one at an address held live in the
 *   same block). When `live` is full, elision stops for the trace: what it cannot track is written whole.
 * - Bytes that are not whole records stop all compaction for the trace (`broken`): the rest goes as it came. */
#include "compact.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <plateau/trace.h>

#include "event.h"
#include "grow.h"
#include "table.h"

#define HOLD_BYTES_DEFAULT ((size_t)4 << 20)
#define HOLD_NS_DEFAULT 10000000000LL
#define AGG_STEPS_DEFAULT 65536u
#define OUT_NS_DEFAULT 250000000LL
#define AGG_MAX_NS 3600000000000LL      /* aggregates written at least every hour of a stepping trace */
#define LIVE_MAX ((size_t)1 << 19)      /* addresses tracked live in the file (the report's own bound) */
#define OUT_CHUNK ((size_t)256 << 10)   /* payload of the chunks handed to the sink */
#define AGG_OUT ((size_t)64 << 10)      /* aggregate records are written in chunks of at most this */

/* host_alloc / host_free / step field offsets (docs/trace-format.md: a 12-byte header, then the fields) */
#define OFF_ADDR 12
#define OFF_SIZE 20
#define OFF_STACK 28
#define OFF_KIND 36
#define OFF_STEP 12

typedef struct held { uint32_t off, len; uint16_t type; bool drop; } held_t;

typedef struct fold_slot { uint64_t key, seq; uint16_t len; bool used; uint8_t rec[128]; } fold_slot_t;
typedef struct fold {
    uint64_t b, wid, end;        /* window width (steps), its number (step / b), the step after the last window */
    bool open;
    int64_t since_ns;            /* when the open window's first total arrived */
    uint64_t n_added;            /* totals put into the open window */
    double lo[5], hi[5];         /* each derived metric's lowest and highest in the window (N_DERIVED) */
    fold_slot_t slot[12];        /* FOLD_SLOTS: first, last, then each metric's lowest and highest */
} fold_t;

typedef struct agg {
    uint32_t what, stack_id;      /* PL_AGG_* */
    uint64_t step_first, step_last, n, bytes, n_sized, n_8mod16;
} agg_t;

struct pl_compact {
    pl_compact_opts_t o;
    pl_compact_sink_fn sink;
    void *ctx;
    uint8_t *buf;                 /* held records, back to back */
    size_t len, cap;
    held_t *recs;
    size_t n_recs, cap_recs;
    int64_t held_since_ns;        /* when the first held record arrived */
    bool stepping;                /* a step record was seen: the trace is reported by step */
    bool broken;                  /* bytes that were not whole records: nothing more is compacted */
    bool live_full;               /* `live` is full (or out of memory): no more elision */
    uint64_t steps;               /* steps completed (the largest step record) */
    pl_table_t live;              /* set: addresses live in the file */
    pl_table_t pending;           /* per block: address -> index of its latest held host_alloc (+1) */
    pl_table_t aggs;              /* stack id + 1 -> agg_t */
    uint64_t agg_first_step;      /* steps completed when the open aggregates began */
    int64_t agg_since_ns;
    bool agg_open;
    uint64_t thin_n, thin_first, thin_last; /* periodic samples left out (thin()), and the steps they came from */
    uint8_t *out;                 /* OUT_CHUNK bytes: kept records not handed to the sink yet */
    size_t out_len;
    uint32_t out_n;
    int64_t out_since_ns;         /* when the first of them was kept */
    int64_t now_ns;               /* the caller's clock at the current call */
    fold_t fold[2];               /* heap, rss: the open windows of folded totals */
    uint64_t fold_seq;            /* arrival order of folded totals */
    uint64_t file_bytes;          /* what the sink put in the file: packed payloads and their chunk headers */
    bool capped;                  /* the trace reached max_bytes: only its end and its counts are written */
    uint64_t cap_step, cap_n, cap_bytes; /* steps completed then; records and bytes not written since */
    uint8_t *agg_out;             /* AGG_OUT bytes, the aggregate records' encoding buffer (malloc'd on first use) */
    pl_compact_stats_t st;
};

static uint64_t rd_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t rd_u16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

pl_compact_t *pl_compact_new(const pl_compact_opts_t *opts, pl_compact_sink_fn sink, void *ctx) {
    pl_compact_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (opts) c->o = *opts;
    if (!c->o.hold_bytes) c->o.hold_bytes = HOLD_BYTES_DEFAULT;
    if (c->o.hold_ns <= 0) c->o.hold_ns = HOLD_NS_DEFAULT;
    if (!c->o.agg_steps) c->o.agg_steps = AGG_STEPS_DEFAULT;
    if (c->o.out_ns <= 0) c->o.out_ns = OUT_NS_DEFAULT;
    if (!c->o.fold_points) c->o.fold_points = 8192;
    c->sink = sink;
    c->ctx = ctx;
    pl_table_init(&c->live, 0, LIVE_MAX);
    pl_table_init(&c->pending, sizeof(uint64_t), 0);
    pl_table_init(&c->aggs, sizeof(agg_t), 0);
    return c;
}

void pl_compact_free(pl_compact_t *c) {
    if (!c) return;
    pl_table_free(&c->live);
    pl_table_free(&c->pending);
    pl_table_free(&c->aggs);
    free(c->buf);
    free(c->recs);
    free(c->agg_out);
    free(c->out);
    free(c);
}

void pl_compact_get_stats(const pl_compact_t *c, pl_compact_stats_t *out) { *out = c->st; }

/* Kept records wait in `out` until OUT_CHUNK bytes are there or out_ns have passed since the first of them (a
 * chunk per step would cost a 24-byte header a step), then reach the sink as one chunk. */
static int drain_out(pl_compact_t *c) {
    if (!c->out_len) return 0;
    int rc = c->sink(c->ctx, c->out, (uint32_t)c->out_len, c->out_n);
    c->file_bytes += rc > 0 ? (uint64_t)rc : c->out_len + PL_CHUNK_HEADER_BYTES; /* the file's bytes: packed (2.0) */
    c->out_len = 0;
    c->out_n = 0;
    return rc < 0 ? rc : 0;
}

/* The sink on bytes that do not wait in `out`. Returns 0 or -errno. */
static int sink_now(pl_compact_t *c, const uint8_t *p, uint32_t len, uint32_t n) {
    int rc = c->sink(c->ctx, p, len, n);
    c->file_bytes += rc > 0 ? (uint64_t)rc : len + PL_CHUNK_HEADER_BYTES;
    return rc < 0 ? rc : 0;
}

/* The size limit (max_bytes): once the file would pass it, records are counted instead of written, but for the
 * trace's end (process_end, exec) and, at the end, the aggregates, which stay within max_bytes / 64 of it. */
static bool over_limit(pl_compact_t *c, const uint8_t *p, size_t len, uint32_t n) {
    if (!c->o.max_bytes || n != 1) return false; /* aggregate chunks (n > 1 or the last ones) are the counts */
    uint16_t type = rd_u16(p);
    if (type == PL_REC_PROCESS_END || type == PL_REC_EXEC || type == PL_REC_AGGREGATE) return false;
    if (!c->capped && c->file_bytes + c->out_len + len + PL_CHUNK_HEADER_BYTES <= c->o.max_bytes - c->o.max_bytes / 64)
        return false;
    if (!c->capped) {
        c->capped = true;
        c->cap_step = c->steps;
    }
    c->cap_n++;
    c->cap_bytes += len;
    return true;
}

static int emit(pl_compact_t *c, const uint8_t *p, size_t len, uint32_t n) {
    if (c->o.max_bytes && !c->capped && c->out_len &&
        c->file_bytes + c->out_len + len + PL_CHUNK_HEADER_BYTES > c->o.max_bytes - c->o.max_bytes / 64) {
        int rc = drain_out(c); /* what waits in `out` takes less in the file (packed, 2.0): learn how much */
        if (rc) return rc;
    }
    if (!len || over_limit(c, p, len, n)) return 0;
    c->st.n_out += n;
    c->st.bytes_out += len;
    if (c->out_len + len > OUT_CHUNK) {
        int rc = drain_out(c);
        if (rc) return rc;
    }
    if (!c->out && !(c->out = malloc(OUT_CHUNK))) return sink_now(c, p, (uint32_t)len, n);
    if (!c->out_len) c->out_since_ns = c->now_ns;
    memcpy(c->out + c->out_len, p, len);
    c->out_len += len;
    c->out_n += n;
    return 0;
}

/* ---- aggregates ---- */

static void agg_count(pl_compact_t *c, const uint8_t *alloc) {
    uint32_t stack = rd_u32(alloc + OFF_STACK), kind = rd_u32(alloc + OFF_KIND);
    uint64_t size = rd_u64(alloc + OFF_SIZE);
    void *v;
    if (pl_table_get(&c->aggs, (uint64_t)stack + 1) == NULL) {
        if (pl_table_put(&c->aggs, (uint64_t)stack + 1, &v) != 0) return; /* out of memory: goes uncounted */
        *(agg_t *)v = (agg_t){.what = PL_AGG_HOST_PAIRS, .stack_id = stack, .step_first = c->steps};
    }
    agg_t *a = pl_table_get(&c->aggs, (uint64_t)stack + 1);
    a->step_last = c->steps;
    a->n++;
    a->bytes += size;
    if (kind != PL_HOST_MMAP && size > 16) { /* what the report reads of usable sizes (reports/compare.h) */
        a->n_sized++;
        a->n_8mod16 += size % 16 == 8;
    }
    if (!c->agg_open) {
        c->agg_open = true;
        c->agg_first_step = c->steps;
    }
}

static int write_aggs(pl_compact_t *c, int64_t now_ns) {
    if (c->capped && c->cap_n) { /* one record: where the trace stopped, what was not written */
        void *v;
        if (pl_table_put(&c->aggs, UINT64_MAX - 1, &v) == 0)
            *(agg_t *)v = (agg_t){.what = PL_AGG_LIMIT, .step_first = c->cap_step, .step_last = c->steps,
                                  .n = c->cap_n, .bytes = c->cap_bytes};
        c->cap_n = c->cap_bytes = 0;
        c->agg_open = true;
    }
    if (!c->agg_open) return 0;
    if (c->thin_n) { /* one record for the samples: stack 0 */
        void *v;
        if (pl_table_put(&c->aggs, UINT64_MAX, &v) == 0)
            *(agg_t *)v = (agg_t){.what = PL_AGG_SAMPLES, .step_first = c->thin_first, .step_last = c->thin_last,
                                  .n = c->thin_n};
        c->thin_n = 0;
    }
    if (!c->agg_out && !(c->agg_out = malloc(AGG_OUT))) return -ENOMEM; /* not on the ring thread's small stack */
    uint8_t *out = c->agg_out;
    size_t len = 0;
    uint32_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < c->aggs.cap && !rc; i++) {
        const agg_t *a = pl_table_slot(&c->aggs, i);
        if (!a) continue;
        pl_trace_record_t r = {.type = PL_REC_AGGREGATE, .t_ns = now_ns};
        r.u.aggregate = (pl_rec_aggregate_t){.what = a->what, .stack_id = a->stack_id,
                                             .step_first = a->step_first, .step_last = a->step_last, .n = a->n,
                                             .bytes = a->bytes, .n_sized = a->n_sized, .n_8mod16 = a->n_8mod16};
        size_t m = pl_event_encode(&r, out + len, AGG_OUT - len);
        if (!m) { /* the chunk is full */
            rc = emit(c, out, len, n);
            len = n = 0;
            m = pl_event_encode(&r, out, AGG_OUT);
        }
        len += m;
        n++;
        c->st.n_aggregates++;
    }
    if (!rc) rc = emit(c, out, len, n);
    pl_table_free(&c->aggs);
    c->agg_open = false;
    return rc;
}

/* ---- one block ---- */

/* Decide which held pairs to drop (see the invariants above). `pending` maps an address to the index + 1 of its
 * latest held host_alloc that may go, to KEEP for one that must stay (it displaces a live allocation), or to FREED
 * once a held host_free made the address free. */
#define KEEP 0
#define FREED UINT64_MAX
static void elide(pl_compact_t *c) {
    if (!c->stepping || c->broken || c->live_full) return;
    pl_table_free(&c->pending);
    for (size_t i = 0; i < c->n_recs; i++) {
        held_t *h = &c->recs[i];
        const uint8_t *p = c->buf + h->off;
        if (h->type != PL_REC_HOST_ALLOC && h->type != PL_REC_HOST_FREE) continue;
        if (h->len < OFF_ADDR + 8 || (h->type == PL_REC_HOST_ALLOC && h->len < OFF_KIND + 4)) continue;
        uint64_t addr = rd_u64(p + OFF_ADDR);
        if (!addr) continue;
        uint64_t *pend = pl_table_get(&c->pending, addr);
        bool live = pend ? *pend != FREED : pl_table_get(&c->live, addr) != NULL;
        if (!pend) {
            void *v;
            if (pl_table_put(&c->pending, addr, &v) != 0) continue; /* out of memory: both halves stay */
            pend = v;
        }
        if (h->type == PL_REC_HOST_ALLOC) {
            *pend = live ? KEEP : i + 1;
            continue;
        }
        if (*pend != KEEP && *pend != FREED) { /* the free of an allocation that may go: both go */
            c->recs[*pend - 1].drop = h->drop = true;
            agg_count(c, c->buf + c->recs[*pend - 1].off);
            c->st.n_pairs++;
            c->st.pair_bytes += rd_u64(c->buf + c->recs[*pend - 1].off + OFF_SIZE);
        }
        *pend = FREED;
    }
    pl_table_free(&c->pending);
}

/* Periodic totals (heap and rss records with step 0) of a stepping trace: the report keys them by the step in
 * progress and keeps, per step, the first sample's time and each metric's lowest and highest value
 * (reports/extract.c, agg_add). So within a block (one step, or part of one) only these go to the file: the first
 * and the last periodic sample of each kind (the last heap sample holds the latest call counts, the exit's
 * totals), and for each metric the lowest and the highest; a sample with PSS or device memory is always kept (PSS
 * is rare and judged on its own points; device memory joins the allocator's reserved bytes, which depend on the
 * order). Step-tagged samples are never touched. */
#define N_DERIVED 5
static bool derived(const uint8_t *p, uint16_t type, double v[N_DERIVED], bool has[N_DERIVED]) {
    uint64_t f[7];
    for (int k = 0; k < 7; k++) f[k] = rd_u64(p + 20 + 8 * k);
    memset(has, 0, N_DERIVED * sizeof *has);
    if (type == PL_REC_HEAP) { /* live_bytes, live_count, n_alloc, n_free, alloc_bytes, mmap bytes, mmap count */
        v[0] = (double)(int64_t)f[0] + (double)(int64_t)f[5];
        v[1] = (double)(int64_t)f[1] + (double)(int64_t)f[6];
        has[0] = has[1] = true;
        return true;
    }
    /* rss_anon, rss_file, rss_shmem, pss, cgroup_current, device_used, device_total */
    if (f[3] != PL_TRACE_NA || f[5] != PL_TRACE_NA) return false; /* always kept */
    for (int k = 0; k < 3; k++) {
        has[k + 1] = f[k] != PL_TRACE_NA;
        v[k + 1] = (double)f[k];
    }
    has[0] = has[1] && has[2] && has[3];
    v[0] = (double)f[0] + (double)f[1] + (double)f[2];
    has[4] = f[4] != PL_TRACE_NA;
    v[4] = (double)f[4];
    return true;
}

static void thin(pl_compact_t *c) {
    if (!c->stepping || c->broken) return;
    for (int kind = 0; kind < 2; kind++) {
        uint16_t type = kind ? PL_REC_RSS : PL_REC_HEAP;
        size_t first = SIZE_MAX, last = SIZE_MAX, lo[N_DERIVED], hi[N_DERIVED];
        double vlo[N_DERIVED], vhi[N_DERIVED];
        bool any[N_DERIVED] = {0};
        size_t n = 0;
        for (size_t i = 0; i < c->n_recs; i++) {
            const held_t *h = &c->recs[i];
            const uint8_t *p = c->buf + h->off;
            if (h->type != type || h->len < 76 || rd_u64(p + OFF_STEP) != 0) continue;
            double v[N_DERIVED];
            bool has[N_DERIVED];
            if (!derived(p, type, v, has)) continue;
            n++;
            if (first == SIZE_MAX) first = i;
            last = i;
            for (int k = 0; k < N_DERIVED; k++) {
                if (!has[k]) continue;
                if (!any[k] || v[k] < vlo[k]) vlo[k] = v[k], lo[k] = i;
                if (!any[k] || v[k] > vhi[k]) vhi[k] = v[k], hi[k] = i;
                any[k] = true;
            }
        }
        if (n <= 2) continue;
        for (size_t i = first + 1; i < last; i++) {
            held_t *h = &c->recs[i];
            const uint8_t *p = c->buf + h->off;
            if (h->type != type || h->len < 76 || rd_u64(p + OFF_STEP) != 0) continue;
            double v[N_DERIVED];
            bool has[N_DERIVED];
            if (!derived(p, type, v, has)) continue;
            bool keep = false;
            for (int k = 0; k < N_DERIVED && !keep; k++) keep = any[k] && (lo[k] == i || hi[k] == i);
            if (keep) continue;
            h->drop = true;
            if (!c->thin_n) c->thin_first = c->steps;
            c->thin_last = c->steps;
            c->thin_n++;
            c->st.n_samples++;
            if (!c->agg_open) {
                c->agg_open = true;
                c->agg_first_step = c->steps;
            }
        }
    }
}

/* What the file holds live after the kept records of the block. */
static void track_live(pl_compact_t *c) {
    if (c->broken || c->live_full) return;
    for (size_t i = 0; i < c->n_recs; i++) {
        const held_t *h = &c->recs[i];
        if (h->drop || (h->type != PL_REC_HOST_ALLOC && h->type != PL_REC_HOST_FREE) || h->len < OFF_ADDR + 8)
            continue;
        uint64_t addr = rd_u64(c->buf + h->off + OFF_ADDR);
        if (!addr) continue;
        void *v = pl_table_get(&c->live, addr);
        if (h->type == PL_REC_HOST_FREE) {
            if (v) pl_table_del(&c->live, v);
        } else if (!v && pl_table_put(&c->live, addr, &v) != 0) {
            c->live_full = true; /* full (or out of memory): liveness unknown from here on */
            return;
        }
    }
}

/* ---- folding the totals of long runs ----
 * The report keeps at most 8,192 points per metric (reports/extract.c, agg_add): past that, neighbouring steps merge
 * into bins of a power-of-two width F, each keeping its smallest step with the time of its first sample, and each
 * metric's lowest and highest value. Once a trace has S steps, F is at least S / 8,192, whatever comes later. So the
 * collector may fold the heap and RSS totals (periodic and per step) into windows of B steps, B the largest power
 * of two <= S / (2 * fold_points), aligned to multiples of B: of each window it keeps the record with the smallest
 * step (the earliest such), the last (the latest call counts), and each metric's lowest and highest. A window lies
 * inside one of the report's bins and every bin keeps a record, so the report's bins, its stride, and everything
 * it computes from them are those of the full trace. A periodic sample kept so carries its step (the step in
 * progress, which is how the report keys it): it is written at the window's end, after later step records. Samples
 * with PSS or device memory, and every other record, are never folded. Windows close early after hold_ns (a
 * superset is kept). */
#define FOLD_SLOTS (2 + 2 * N_DERIVED)
#define FOLD_REC_MAX 128

static int fold_kind(const pl_compact_t *c, const held_t *h, const uint8_t *p) {
    if (!c->stepping || c->broken || h->len < 76 || h->len > FOLD_REC_MAX) return -1;
    if (h->type == PL_REC_HEAP) return 0;
    if (h->type != PL_REC_RSS) return -1;
    return rd_u64(p + 44) == PL_TRACE_NA && rd_u64(p + 60) == PL_TRACE_NA ? 1 : -1; /* no PSS, no device memory */
}

static uint64_t fold_width(const pl_compact_t *c) {
    uint64_t target = c->steps / (2 * c->o.fold_points), b = 1;
    while (b * 2 <= target) b *= 2;
    return b;
}

static int fold_close(pl_compact_t *c, int kind) {
    fold_t *f = &c->fold[kind];
    if (!f->open) return 0;
    f->open = false;
    fold_slot_t *pick[FOLD_SLOTS];
    unsigned n = 0;
    for (unsigned i = 0; i < FOLD_SLOTS; i++) { /* distinct records, by (step, arrival) */
        fold_slot_t *sl = &f->slot[i];
        if (!sl->used) continue;
        bool dup = false;
        for (unsigned k = 0; k < n && !dup; k++) dup = pick[k]->seq == sl->seq;
        if (dup) continue;
        unsigned k = n++;
        while (k && (pick[k - 1]->key > sl->key || (pick[k - 1]->key == sl->key && pick[k - 1]->seq > sl->seq))) {
            pick[k] = pick[k - 1];
            k--;
        }
        pick[k] = sl;
    }
    if (!c->thin_n && f->n_added > n) c->thin_first = c->steps;
    c->thin_n += f->n_added - n;
    c->st.n_samples += f->n_added - n;
    if (f->n_added > n) {
        if (!c->agg_open) {
            c->agg_open = true;
            c->agg_first_step = c->steps;
        }
        c->thin_last = c->steps;
    }
    int rc = 0;
    for (unsigned k = 0; k < n && !rc; k++) {
        memcpy(pick[k]->rec + OFF_STEP, &pick[k]->key, 8); /* a periodic sample carries the step it was keyed by */
        rc = emit(c, pick[k]->rec, pick[k]->len, 1);
    }
    for (unsigned i = 0; i < FOLD_SLOTS; i++) f->slot[i].used = false;
    f->n_added = 0;
    return rc;
}

static void fold_put(fold_slot_t *sl, const uint8_t *p, uint16_t len, uint64_t key, uint64_t seq) {
    memcpy(sl->rec, p, len);
    sl->len = len;
    sl->key = key;
    sl->seq = seq;
    sl->used = true;
}

/* A kept heap or RSS total, keyed by its step (the step in progress for a periodic one): into its window. */
static int fold_add(pl_compact_t *c, int kind, const uint8_t *p, uint16_t len, int64_t now_ns) {
    fold_t *f = &c->fold[kind];
    uint64_t step = rd_u64(p + OFF_STEP), key = step ? step : c->steps + 1;
    if (f->open && key / f->b < f->wid) { /* a late total of a closed window: written as it is (a superset) */
        uint8_t rec[FOLD_REC_MAX];
        memcpy(rec, p, len);
        memcpy(rec + OFF_STEP, &key, 8);
        return emit(c, rec, len, 1);
    }
    if (f->open && key / f->b != f->wid) {
        int rc = fold_close(c, kind);
        if (rc) return rc;
    }
    if (!f->open) {
        uint64_t b = fold_width(c);
        if (b < f->b || f->end % b || key < f->end) b = f->b ? f->b : 1; /* widen only at a boundary of the new width */
        if (b == 1) { /* nothing to fold (yet) */
            f->b = 1;
            return emit(c, p, len, 1);
        }
        f->b = b;
        f->wid = key / b;
        f->end = (f->wid + 1) * b;
        f->open = true;
        f->since_ns = now_ns;
    }
    uint64_t seq = ++c->fold_seq;
    double v[N_DERIVED];
    bool has[N_DERIVED];
    derived(p, kind ? PL_REC_RSS : PL_REC_HEAP, v, has);
    f->n_added++;
    fold_slot_t *first = &f->slot[0];
    if (!first->used || key < first->key) fold_put(first, p, len, key, seq);
    fold_put(&f->slot[1], p, len, key, seq);
    for (int k = 0; k < N_DERIVED; k++) {
        if (!has[k]) continue;
        fold_slot_t *lo = &f->slot[2 + 2 * k], *hi = &f->slot[3 + 2 * k];
        if (!lo->used || v[k] < f->lo[k]) {
            fold_put(lo, p, len, key, seq);
            f->lo[k] = v[k];
        }
        if (!hi->used || v[k] > f->hi[k]) {
            fold_put(hi, p, len, key, seq);
            f->hi[k] = v[k];
        }
    }
    return 0;
}

/* Write the held block's kept records (through the folding of totals) and empty it. */
static int write_block(pl_compact_t *c) {
    elide(c);
    thin(c);
    track_live(c);
    int rc = 0;
    for (size_t i = 0; i < c->n_recs && !rc; i++) {
        const held_t *h = &c->recs[i];
        if (h->drop) continue;
        const uint8_t *p = c->buf + h->off;
        int kind = fold_kind(c, h, p);
        rc = kind >= 0 ? fold_add(c, kind, p, (uint16_t)h->len, c->now_ns) : emit(c, p, h->len, 1);
    }
    c->len = 0;
    c->n_recs = 0;
    return rc;
}

static int hold(pl_compact_t *c, const uint8_t *p, uint32_t len, uint16_t type, int64_t now_ns) {
    if (pl_grow_first((void **)&c->buf, &c->cap, c->len + len, 1, 64 << 10)) return -ENOMEM;
    if (pl_grow_first((void **)&c->recs, &c->cap_recs, c->n_recs + 1, sizeof *c->recs, 1024)) return -ENOMEM;
    if (!c->n_recs) c->held_since_ns = now_ns;
    memcpy(c->buf + c->len, p, len);
    c->recs[c->n_recs++] = (held_t){(uint32_t)c->len, len, type, false};
    c->len += len;
    return 0;
}

static int end_block(pl_compact_t *c, int64_t now_ns) {
    int rc = write_block(c);
    if (!rc && c->agg_open && !c->capped &&
        (c->steps - c->agg_first_step >= c->o.agg_steps || now_ns - c->agg_since_ns >= AGG_MAX_NS)) {
        rc = write_aggs(c, now_ns);
        c->agg_since_ns = now_ns;
    }
    return rc;
}

int pl_compact_feed(pl_compact_t *c, const uint8_t *recs, uint32_t len, uint32_t n_records, int64_t now_ns) {
    c->now_ns = now_ns;
    c->st.n_in += n_records;
    c->st.bytes_in += len;
    if (!c->o.enabled) {
        c->st.n_out += n_records;
        c->st.bytes_out += len;
        return sink_now(c, recs, len, n_records);
    }
    if (!c->agg_since_ns) c->agg_since_ns = now_ns;
    uint32_t off = 0;
    while (off < len) {
        uint16_t rl = len - off >= PL_REC_HEADER_BYTES ? rd_u16(recs + off + 2) : 0;
        if (rl < PL_REC_HEADER_BYTES || rl > len - off) { /* not whole records: pass the rest on as it came */
            c->broken = true;
            int rc = write_block(c);
            if (!rc) rc = drain_out(c); /* then those bytes, in a chunk of their own, as the ring had them */
            if (!rc) {
                c->st.n_out += n_records;
                c->st.bytes_out += len - off;
                rc = sink_now(c, recs + off, len - off, n_records);
            }
            return rc ? rc : -EBADMSG;
        }
        uint16_t type = rd_u16(recs + off);
        int rc = hold(c, recs + off, rl, type, now_ns);
        if (rc) return rc;
        off += rl;
        if (n_records) n_records--;
        if (type == PL_REC_STEP && rl >= OFF_STEP + 8) { /* the block ends with the step it closes */
            c->stepping = true;
            rc = end_block(c, now_ns);
            uint64_t s = rd_u64(recs + off - rl + OFF_STEP);
            if (s > c->steps) c->steps = s;
        } else if (c->len >= c->o.hold_bytes) {
            rc = end_block(c, now_ns);
        }
        if (rc) return rc;
    }
    /* Until a trace has stepped nothing is left out of it (elide, thin): holding its records would only delay them */
    return c->stepping || !c->n_recs ? 0 : end_block(c, now_ns);
}

int pl_compact_tick(pl_compact_t *c, int64_t now_ns) {
    c->now_ns = now_ns;
    int rc = 0;
    if (c->n_recs && now_ns - c->held_since_ns >= c->o.hold_ns) rc = end_block(c, now_ns);
    for (int k = 0; k < 2 && !rc; k++)
        if (c->fold[k].open && now_ns - c->fold[k].since_ns >= c->o.hold_ns) rc = fold_close(c, k);
    if (!rc && c->out_len && now_ns - c->out_since_ns >= c->o.out_ns) rc = drain_out(c);
    return rc;
}

int pl_compact_flush(pl_compact_t *c, bool final, int64_t now_ns) {
    c->now_ns = now_ns;
    int rc = c->n_recs ? end_block(c, now_ns) : 0;
    for (int k = 0; k < 2 && !rc; k++) rc = fold_close(c, k);
    if (!rc && final) rc = write_aggs(c, now_ns);
    if (!rc) rc = drain_out(c);
    return rc;
}
