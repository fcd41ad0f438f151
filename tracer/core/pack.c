/* Packed records (trace format 2.0): a short form of the records a long run writes every step, and the
 * per-chunk context both sides keep so that each value is written as a difference from the one before it.
 * Layout and rules: docs/trace-format.md, "Packed records". Invariants this file owns:
 * - encoder and decoder update the context with the same function (note()) from the same decoded record, so they
 *   cannot disagree on what a difference is against;
 * - every value is lossless: differences are taken modulo 2^64 and zigzag-coded, so NA, negative and wrapped
 *   values round-trip, and a packed record decodes to exactly the fields of the ordinary one;
 * - decoding trusts nothing: varints are bounded (10 bytes), reads stay inside the record, and a time or signed
 *   total outside +-(2^62 - 1) is malformed, as in an ordinary record. */
#include "pack.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "event.h"

void pl_pack_reset(pl_pack_ctx_t *x) { memset(x, 0, sizeof *x); }

/* ---- varints: LEB128, 7 bits a byte, low first; signed differences zigzag-coded ---- */

static uint64_t zz(uint64_t diff) { return (diff << 1) ^ (0 - (diff >> 63)); }
static uint64_t unzz(uint64_t z) { return (z >> 1) ^ (0 - (z & 1)); }

static void put_uv(uint8_t *b, size_t *n, uint64_t v) {
    while (v >= 0x80) {
        b[(*n)++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[(*n)++] = (uint8_t)v;
}
static void put_d(uint8_t *b, size_t *n, uint64_t v, uint64_t prev) { put_uv(b, n, zz(v - prev)); }

typedef struct {
    const uint8_t *p, *end;
    bool bad;
} rd_t;

#define HOT static inline __attribute__((always_inline)) /* the reader's per-field path */

static uint64_t get_uv_long(rd_t *r) {
    uint64_t v = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (r->p >= r->end) break;
        uint8_t b = *r->p++;
        if (i == 9 && b > 1) break; /* past 64 bits */
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) return v;
    }
    r->bad = true;
    return 0;
}
/* Most values of a packed record are one or two bytes: read those inline (the reader's hot path). */
HOT uint64_t get_uv(rd_t *r) {
    const uint8_t *p = r->p;
    if (r->end - p >= 2) {
        if (!(p[0] & 0x80)) {
            r->p = p + 1;
            return p[0];
        }
        if (!(p[1] & 0x80)) {
            r->p = p + 2;
            return (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
        }
    }
    return get_uv_long(r);
}
HOT uint64_t get_d(rd_t *r, uint64_t prev) { return prev + unzz(get_uv(r)); }
/* A signed total: the ordinary record's bound applies. */
HOT int64_t get_i64(rd_t *r, int64_t prev) {
    int64_t v = (int64_t)get_d(r, (uint64_t)prev);
    if (v > PL_TRACE_MAX_T_NS || v < -PL_TRACE_MAX_T_NS) r->bad = true;
    return v;
}
HOT uint32_t get_u32(rd_t *r, uint32_t prev, bool diff) {
    uint64_t v = diff ? get_d(r, prev) : get_uv(r);
    if (v > UINT32_MAX) r->bad = true;
    return (uint32_t)v;
}

/* ---- the context ---- */

/* A step field: 0 stays 0 (periodic samples); any other value is 1 + its zigzagged difference from the last
 * non-zero step. Returns false for the one difference that has no code (zigzag all-ones). */
static bool put_step(uint8_t *b, size_t *n, uint64_t v, uint64_t base) {
    if (!v) {
        put_uv(b, n, 0);
        return true;
    }
    uint64_t z = zz(v - base);
    if (z == UINT64_MAX) return false;
    put_uv(b, n, z + 1);
    return true;
}
HOT uint64_t get_step(rd_t *r, uint64_t base) {
    uint64_t c = get_uv(r);
    return c ? base + unzz(c - 1) : 0;
}

static int thr_find(const pl_pack_ctx_t *x, uint32_t tid) {
    unsigned n = x->n_thr < PL_PACK_THREADS ? x->n_thr : PL_PACK_THREADS;
    if (x->last < n && x->thr[x->last].tid == tid) return (int)x->last; /* most records come from one thread */
    for (unsigned i = 0; i < n; i++)
        if (x->thr[i].tid == tid) return (int)i;
    return -1;
}
static uint64_t thr_addr(const pl_pack_ctx_t *x, uint32_t tid) {
    int i = thr_find(x, tid);
    return i < 0 ? 0 : x->thr[i].addr;
}
static uint64_t thr_ordinal(const pl_pack_ctx_t *x, uint32_t tid) {
    int i = thr_find(x, tid);
    return i < 0 ? 0 : x->thr[i].ordinal;
}
/* The thread's slot, taking the oldest-made slot when all are used. */
static int thr_slot(pl_pack_ctx_t *x, uint32_t tid) {
    int i = thr_find(x, tid);
    if (i >= 0) return i;
    i = (int)(x->n_thr % PL_PACK_THREADS);
    x->thr[i].tid = tid;
    x->thr[i].addr = 0;
    x->thr[i].ordinal = 0;
    x->n_thr++;
    return i;
}

/* The context after record r (of a known type, packed or not). */
static void note(pl_pack_ctx_t *x, const pl_trace_record_t *r) {
    x->t_ns = r->t_ns;
    switch (r->type) {
    case PL_REC_STEP:
        x->step_rec = r->u.step.step;
        if (r->u.step.step) x->step = r->u.step.step;
        break;
    case PL_REC_RSS:
        x->rss = r->u.rss;
        if (r->u.rss.step) x->step = r->u.rss.step;
        break;
    case PL_REC_HEAP:
        x->heap = r->u.heap;
        if (r->u.heap.step) x->step = r->u.heap.step;
        break;
    case PL_REC_HOST_ALLOC: {
        int i = thr_slot(x, r->u.host_alloc.tid);
        x->thr[i].addr = r->u.host_alloc.addr;
        x->thr[i].ordinal = r->u.host_alloc.call_ordinal;
        x->tid = r->u.host_alloc.tid;
        x->last = (uint32_t)i;
        break;
    }
    case PL_REC_HOST_FREE: {
        int i = thr_slot(x, r->u.host_free.tid);
        x->thr[i].addr = r->u.host_free.addr;
        x->tid = r->u.host_free.tid;
        x->last = (uint32_t)i;
        break;
    }
    default: break;
    }
}

/* ---- encoding ---- */

/* Bytes of the ordinary (1.9) form of each packed kind: a packed record is written only when shorter. */
static size_t ordinary_bytes(pl_rec_type_t type) {
    switch (type) {
    case PL_REC_STEP: return PL_REC_HEADER_BYTES + 12;
    case PL_REC_RSS:
    case PL_REC_HEAP: return PL_REC_HEADER_BYTES + 64;
    case PL_REC_HOST_ALLOC: return PL_REC_HEADER_BYTES + 36;
    case PL_REC_HOST_FREE: return PL_REC_HEADER_BYTES + 12;
    default: return 0;
    }
}

size_t pl_pack_encode(const pl_pack_ctx_t *x, const pl_trace_record_t *rec, uint8_t *buf, size_t cap) {
    size_t ord = ordinary_bytes(rec->type);
    if (!ord) return 0;
    uint8_t b[128]; /* the longest packed record: 4 + 10 (time) + 10 (step) + 7 x 10 = 94 bytes */
    size_t n = 4;
    put_d(b, &n, (uint64_t)rec->t_ns, (uint64_t)x->t_ns);
    switch (rec->type) {
    case PL_REC_STEP:
        put_d(b, &n, rec->u.step.step, x->step_rec);
        put_uv(b, &n, rec->u.step.source);
        break;
    case PL_REC_RSS: {
        const pl_rec_rss_t *s = &rec->u.rss, *p = &x->rss;
        if (!put_step(b, &n, s->step, x->step)) return 0;
        put_d(b, &n, s->rss_anon, p->rss_anon);
        put_d(b, &n, s->rss_file, p->rss_file);
        put_d(b, &n, s->rss_shmem, p->rss_shmem);
        put_d(b, &n, s->pss, p->pss);
        put_d(b, &n, s->cgroup_current, p->cgroup_current);
        put_d(b, &n, s->device_used, p->device_used);
        put_d(b, &n, s->device_total, p->device_total);
        break;
    }
    case PL_REC_HEAP: {
        const pl_rec_heap_t *h = &rec->u.heap, *p = &x->heap;
        if (!put_step(b, &n, h->step, x->step)) return 0;
        put_d(b, &n, (uint64_t)h->live_bytes, (uint64_t)p->live_bytes);
        put_d(b, &n, (uint64_t)h->live_count, (uint64_t)p->live_count);
        put_d(b, &n, h->n_alloc, p->n_alloc);
        put_d(b, &n, h->n_free, p->n_free);
        put_d(b, &n, h->alloc_bytes, p->alloc_bytes);
        put_d(b, &n, (uint64_t)h->mmap_live_bytes, (uint64_t)p->mmap_live_bytes);
        put_d(b, &n, (uint64_t)h->mmap_live_count, (uint64_t)p->mmap_live_count);
        break;
    }
    case PL_REC_HOST_ALLOC: {
        const pl_rec_host_alloc_t *a = &rec->u.host_alloc;
        put_d(b, &n, a->tid, x->tid);
        put_d(b, &n, a->addr, thr_addr(x, a->tid));
        put_uv(b, &n, a->size);
        put_uv(b, &n, a->stack_id);
        put_uv(b, &n, a->kind);
        put_d(b, &n, a->call_ordinal, thr_ordinal(x, a->tid));
        break;
    }
    case PL_REC_HOST_FREE:
        put_d(b, &n, rec->u.host_free.tid, x->tid);
        put_d(b, &n, rec->u.host_free.addr, thr_addr(x, rec->u.host_free.tid));
        break;
    default: return 0;
    }
    if (n >= ord || n > cap) return 0;
    uint16_t type16 = (uint16_t)(PL_PACK_TYPE_BASE + rec->type), len16 = (uint16_t)n;
    memcpy(b, &type16, 2);
    memcpy(b + 2, &len16, 2);
    memcpy(buf, b, n);
    return n;
}

size_t pl_pack_chunk(uint8_t *payload, size_t len) {
    pl_pack_ctx_t x;
    pl_pack_reset(&x);
    size_t r = 0, w = 0;
    while (r < len) {
        pl_trace_record_t rec;
        size_t used = 0;
        int rc = pl_event_decode(payload + r, len - r, &rec, &used);
        if (rc < 0) break; /* kept as it came, with the rest */
        if (rc == 0) {
            uint8_t b[128];
            size_t n = pl_pack_encode(&x, &rec, b, sizeof b);
            note(&x, &rec);
            if (n && n <= used) { /* w <= r: packing only ever shortens */
                memcpy(payload + w, b, n);
                w += n;
                r += used;
                continue;
            }
        }
        memmove(payload + w, payload + r, used);
        w += used;
        r += used;
    }
    memmove(payload + w, payload + r, len - r);
    return w + (len - r);
}

/* ---- decoding ---- */

static int decode_packed(pl_pack_ctx_t *x, const uint8_t *buf, size_t len16, pl_trace_record_t *rec) {
    rd_t r = {.p = buf + 4, .end = buf + len16};
    pl_rec_type_t type = (pl_rec_type_t)((buf[0] | buf[1] << 8) - (int)PL_PACK_TYPE_BASE);
    if (!ordinary_bytes(type)) return 1; /* a later version's packed kind: its layout is not ours to read */
    int64_t t = (int64_t)get_d(&r, (uint64_t)x->t_ns);
    if (r.bad || t < 0 || t > PL_TRACE_MAX_T_NS) return -EBADMSG;
    switch (type) {
    case PL_REC_STEP: {
        pl_rec_step_t s;
        s.step = get_d(&r, x->step_rec);
        s.source = get_u32(&r, 0, false);
        if (r.bad) return -EBADMSG;
        rec->u.step = s;
        break;
    }
    case PL_REC_RSS: {
        pl_rec_rss_t s;
        const pl_rec_rss_t *p = &x->rss;
        s.step = get_step(&r, x->step);
        s.rss_anon = get_d(&r, p->rss_anon);
        s.rss_file = get_d(&r, p->rss_file);
        s.rss_shmem = get_d(&r, p->rss_shmem);
        s.pss = get_d(&r, p->pss);
        s.cgroup_current = get_d(&r, p->cgroup_current);
        s.device_used = get_d(&r, p->device_used);
        s.device_total = get_d(&r, p->device_total);
        if (r.bad) return -EBADMSG;
        rec->u.rss = s;
        break;
    }
    case PL_REC_HEAP: {
        pl_rec_heap_t h;
        const pl_rec_heap_t *p = &x->heap;
        h.step = get_step(&r, x->step);
        h.live_bytes = get_i64(&r, p->live_bytes);
        h.live_count = get_i64(&r, p->live_count);
        h.n_alloc = get_d(&r, p->n_alloc);
        h.n_free = get_d(&r, p->n_free);
        h.alloc_bytes = get_d(&r, p->alloc_bytes);
        h.mmap_live_bytes = get_i64(&r, p->mmap_live_bytes);
        h.mmap_live_count = get_i64(&r, p->mmap_live_count);
        if (r.bad) return -EBADMSG;
        rec->u.heap = h;
        break;
    }
    case PL_REC_HOST_ALLOC: {
        pl_rec_host_alloc_t a;
        a.tid = get_u32(&r, x->tid, true);
        a.addr = get_d(&r, thr_addr(x, a.tid));
        a.size = get_uv(&r);
        a.stack_id = get_u32(&r, 0, false);
        a.kind = get_u32(&r, 0, false);
        a.call_ordinal = get_d(&r, thr_ordinal(x, a.tid));
        if (r.bad) return -EBADMSG;
        rec->u.host_alloc = a;
        break;
    }
    case PL_REC_HOST_FREE: {
        pl_rec_host_free_t f;
        f.tid = get_u32(&r, x->tid, true);
        f.addr = get_d(&r, thr_addr(x, f.tid));
        if (r.bad) return -EBADMSG;
        rec->u.host_free = f;
        break;
    }
    default: return 1;
    }
    /* Bytes after the fields are allowed, as in an ordinary record: a later version may append fields. */
    rec->type = type;
    rec->t_ns = t;
    return 0;
}

int pl_pack_decode(pl_pack_ctx_t *x, const uint8_t *buf, size_t len, pl_trace_record_t *rec, size_t *used) {
    if (len < 4) return -EBADMSG;
    uint16_t type16, len16;
    memcpy(&type16, buf, 2);
    memcpy(&len16, buf + 2, 2);
    if (type16 < PL_PACK_TYPE_BASE || type16 >= 2 * PL_PACK_TYPE_BASE) {
        int rc = pl_event_decode(buf, len, rec, used);
        if (rc == 0) note(x, rec);
        return rc;
    }
    if (len16 < 4 || len16 > len) return -EBADMSG;
    int rc = decode_packed(x, buf, len16, rec);
    if (rc < 0) return rc;
    *used = len16;
    if (rc == 0) note(x, rec);
    return rc;
}

size_t pl_pack_unpack(const uint8_t *in, size_t len, uint8_t *out, size_t cap, uint32_t *n_records) {
    pl_pack_ctx_t x;
    pl_pack_reset(&x);
    size_t r = 0, w = 0;
    uint32_t n = 0;
    while (r < len) {
        pl_trace_record_t rec;
        size_t used = 0, m;
        int rc = pl_pack_decode(&x, in + r, len - r, &rec, &used);
        if (rc < 0) break;
        if (rc == 0) {
            if (!(m = pl_event_encode(&rec, out + w, cap - w))) break;
        } else { /* an unknown type: as it came */
            if (used > cap - w) break;
            memcpy(out + w, in + r, used);
            m = used;
        }
        w += m;
        r += used;
        n++;
    }
    *n_records = n;
    return w;
}

bool pl_pack_any(const uint8_t *payload, size_t len) {
    for (size_t off = 0; off < len;) {
        if (len - off < PL_REC_HEADER_BYTES) return true;
        uint16_t type16, len16;
        memcpy(&type16, payload + off, 2);
        memcpy(&len16, payload + off + 2, 2);
        if ((type16 >= PL_PACK_TYPE_BASE && type16 < 2 * PL_PACK_TYPE_BASE) || len16 < PL_REC_HEADER_BYTES) return true;
        off += len16;
    }
    return false;
}
