/* Record codecs. Every record is framed as u16 type, u16 total length (header included), i64 t_ns, then the
 * type's fields in a fixed order, little endian, unaligned: u32/u64/i32/i64/f64 and strings (u16 length, the
 * bytes, a NUL). The same walker encodes and decodes (codec_t.writing), so the layout is written once.
 * Decoding trusts nothing: every read is bounds-checked, counts are capped, strings must end in NUL. */
#include "event.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "crc.h"

typedef struct {
    uint8_t *p, *end;
    bool writing;
    bool bad; /* overflow (writing) or malformed (reading) */
} codec_t;

static inline __attribute__((always_inline)) void c_bytes(codec_t *c, void *v, size_t n) {
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        return;
    }
    if (c->writing) memcpy(c->p, v, n);
    else memcpy(v, c->p, n);
    c->p += n;
}
static void c_u64(codec_t *c, uint64_t *v) { c_bytes(c, v, 8); }
/* Reading: a signed field (a time, a byte count) beyond +-(2^62 - 1) is malformed, as a record's t_ns is: the writer
 * never produces one, and every reader may then add or subtract two without overflow. */
static void c_i64(codec_t *c, int64_t *v) {
    c_bytes(c, v, 8);
    if (!c->writing && !c->bad && (*v > PL_TRACE_MAX_T_NS || *v < -PL_TRACE_MAX_T_NS)) c->bad = true;
}
static void c_u32(codec_t *c, uint32_t *v) { c_bytes(c, v, 4); }
static void c_i32(codec_t *c, int32_t *v) { c_bytes(c, v, 4); }
static void c_f64(codec_t *c, double *v) { c_bytes(c, v, 8); }

static void c_str(codec_t *c, const char **s, size_t max) {
    if (c->bad) return;
    if (c->writing) {
        const char *v = *s ? *s : "";
        size_t n = strnlen(v, max);
        uint16_t n16 = (uint16_t)n;
        c_bytes(c, &n16, 2);
        c_bytes(c, (void *)v, n);
        uint8_t nul = 0;
        c_bytes(c, &nul, 1);
    } else {
        uint16_t n16 = 0;
        c_bytes(c, &n16, 2);
        if (c->bad || (size_t)(c->end - c->p) < (size_t)n16 + 1 || c->p[n16] != 0) {
            c->bad = true;
            return;
        }
        *s = (const char *)c->p;
        c->p += n16 + 1;
    }
}

/* Decoding: true while the record has bytes left. Fields appended in a later minor version are read only
 * when present, so older records decode with their defaults. Writing: always true. */
static bool c_more(const codec_t *c) { return c->writing || (!c->bad && c->p < c->end); }

static void c_device(codec_t *c, pl_rec_device_t *d) {
    c_u32(c, &d->source);
    c_i32(c, &d->device);
    c_u32(c, &d->pool);
    c_u32(c, &d->allocator_id);
    c_u64(c, &d->addr);
    c_u64(c, &d->size);
    c_u64(c, &d->requested);
    c_u64(c, &d->stream);
    c_u32(c, &d->stack_id);
    c_u32(c, &d->tid);
}

/* The fields of each record kind, in their wire order. A "1.N" comment marks fields appended in that minor version. */
static void c_process(codec_t *c, pl_rec_process_t *p) {
    c_u32(c, &p->pid);
    c_u32(c, &p->ppid);
    c_u32(c, &p->exec_seq);
    c_i32(c, &p->rank);
    c_i32(c, &p->local_rank);
    c_u64(c, &p->sample_bytes);
    c_u64(c, &p->interval_ns);
    c_u64(c, &p->host_mem_bytes);
    c_u64(c, &p->cgroup_max_bytes);
    c_i64(c, &p->start_realtime_ns);
    c_str(c, &p->exe, PL_STR_MAX_BYTES);
    c_u32(c, &p->argc);
    c_u32(c, &p->n_argv);
    if (p->n_argv > PL_TRACE_MAX_ARGV) {
        if (!c->writing) c->bad = true;
        return;
    }
    for (uint32_t i = 0; i < p->n_argv; i++) c_str(c, &p->argv[i], 1024);
    if (c_more(c)) { /* 1.2 */
        c_str(c, &p->host_allocator, 63);
        c_str(c, &p->host_allocator_version, 127);
    } else {
        p->host_allocator = "";
        p->host_allocator_version = "";
    }
    if (c_more(c)) c_str(c, &p->node, 63); /* 1.7 */
    else p->node = "";
}

static void c_rss(codec_t *c, pl_rec_rss_t *s) {
    c_u64(c, &s->step);
    c_u64(c, &s->rss_anon);
    c_u64(c, &s->rss_file);
    c_u64(c, &s->rss_shmem);
    c_u64(c, &s->pss);
    c_u64(c, &s->cgroup_current);
    c_u64(c, &s->device_used);
    c_u64(c, &s->device_total);
}

static void c_heap(codec_t *c, pl_rec_heap_t *h) {
    c_u64(c, &h->step);
    c_i64(c, &h->live_bytes);
    c_i64(c, &h->live_count);
    c_u64(c, &h->n_alloc);
    c_u64(c, &h->n_free);
    c_u64(c, &h->alloc_bytes);
    c_i64(c, &h->mmap_live_bytes);
    c_i64(c, &h->mmap_live_count);
}

static void c_host_alloc(codec_t *c, pl_rec_host_alloc_t *a) {
    c_u64(c, &a->addr);
    c_u64(c, &a->size);
    c_u32(c, &a->stack_id);
    c_u32(c, &a->tid);
    c_u32(c, &a->kind);
    if (c_more(c)) c_u64(c, &a->call_ordinal); /* 1.3 */
    else a->call_ordinal = PL_TRACE_NA;
}

static void c_alloc_stats(codec_t *c, pl_rec_alloc_stats_t *s) {
    c_u32(c, &s->allocator_id);
    c_i32(c, &s->device);
    c_u64(c, &s->step);
    c_i64(c, &s->allocated_bytes);
    c_i64(c, &s->allocated_bytes_peak);
    c_i64(c, &s->reserved_bytes);
    c_i64(c, &s->reserved_bytes_peak);
    c_i64(c, &s->active_bytes);
    c_i64(c, &s->inactive_split_bytes);
    c_i64(c, &s->requested_bytes);
    c_i64(c, &s->n_allocations);
    c_i64(c, &s->n_segments);
    c_i64(c, &s->num_alloc_retries);
    c_i64(c, &s->num_ooms);
    c_i64(c, &s->num_device_alloc);
    c_i64(c, &s->num_device_free);
    c_u64(c, &s->largest_free_bytes);
    c_u64(c, &s->capacity_bytes);
    c_f64(c, &s->fragmentation);
}

static void c_stack(codec_t *c, pl_rec_stack_t *s) {
    c_u32(c, &s->stack_id);
    c_u32(c, &s->n_frames);
    if (s->n_frames > PL_TRACE_MAX_FRAMES) {
        c->bad = true;
        return;
    }
    c_bytes(c, s->pcs, (size_t)s->n_frames * 8);
    if (c_more(c)) { /* 1.5 */
        c_u32(c, &s->n_py);
        if (s->n_py > PL_TRACE_MAX_FRAMES - s->n_frames) {
            c->bad = true;
            return;
        }
        c_bytes(c, s->py, (size_t)s->n_py * 4);
    }
}

static void c_frame(codec_t *c, pl_rec_frame_t *f) {
    c_u64(c, &f->pc);
    c_u32(c, &f->module_id);
    c_u64(c, &f->module_offset);
    c_str(c, &f->symbol, PL_TRACE_MAX_SYMBOL_BYTES);
    c_u64(c, &f->symbol_offset);
}

static void c_module(codec_t *c, pl_rec_module_t *m) {
    c_u32(c, &m->module_id);
    c_u64(c, &m->base);
    c_str(c, &m->path, PL_STR_MAX_BYTES);
    if (c_more(c)) { /* 1.1 */
        c_str(c, &m->build_id, 128);
        c_u64(c, &m->file_size);
        c_i64(c, &m->file_mtime_ns);
    } else {
        m->build_id = "";
        m->file_size = PL_TRACE_NA;
        m->file_mtime_ns = 0;
    }
}

static void c_pyframe(codec_t *c, pl_rec_pyframe_t *f) {
    c_u32(c, &f->pyframe_id);
    c_i32(c, &f->line);
    c_str(c, &f->file, PL_STR_MAX_BYTES);
    c_str(c, &f->function, PL_STR_MAX_BYTES);
}

static void c_retention(codec_t *c, pl_rec_retention_t *q) {
    c_u32(c, &q->census);
    c_u32(c, &q->flags);
    c_u64(c, &q->step);
    c_u64(c, &q->items);
    c_u64(c, &q->nodes);
    c_u64(c, &q->bytes);
    c_i32(c, &q->line);
    c_str(c, &q->path, 255);
    c_str(c, &q->what, 255);
    c_str(c, &q->kind, 31);
    c_str(c, &q->file, 1023);
    c_str(c, &q->fix, 255);
    if (!c_more(c)) { /* 1.9 */
        q->n_ranges = 0;
        return;
    }
    c_u32(c, &q->n_ranges);
    if (q->n_ranges > PL_RETENTION_MAX_RANGES) {
        c->bad = true;
        return;
    }
    for (uint32_t i = 0; i < q->n_ranges; i++) {
        c_u64(c, &q->range_addr[i]);
        c_u64(c, &q->range_bytes[i]);
    }
}

static void c_aggregate(codec_t *c, pl_rec_aggregate_t *q) {
    c_u32(c, &q->what);
    c_u32(c, &q->stack_id);
    c_u64(c, &q->step_first);
    c_u64(c, &q->step_last);
    c_u64(c, &q->n);
    c_u64(c, &q->bytes);
    c_u64(c, &q->n_sized);
    c_u64(c, &q->n_8mod16);
}

/* Fields of each type. Returns false for an unknown type. */
static bool c_fields(codec_t *c, pl_trace_record_t *r) {
    switch (r->type) {
    case PL_REC_PROCESS_START: c_process(c, &r->u.process); return true;
    case PL_REC_PROCESS_END: return true;
    case PL_REC_STEP:
        c_u64(c, &r->u.step.step);
        c_u32(c, &r->u.step.source);
        return true;
    case PL_REC_MARK:
        c_u64(c, &r->u.mark.step);
        c_str(c, &r->u.mark.label, 63);
        return true;
    case PL_REC_RSS: c_rss(c, &r->u.rss); return true;
    case PL_REC_HEAP: c_heap(c, &r->u.heap); return true;
    case PL_REC_HOST_ALLOC: c_host_alloc(c, &r->u.host_alloc); return true;
    case PL_REC_HOST_FREE:
        c_u64(c, &r->u.host_free.addr);
        c_u32(c, &r->u.host_free.tid);
        return true;
    case PL_REC_DEVICE_ALLOC:
    case PL_REC_DEVICE_FREE:
    case PL_REC_DEVICE_MAP:
    case PL_REC_DEVICE_UNMAP:
    case PL_REC_DEVICE_OOM: c_device(c, &r->u.device); return true;
    case PL_REC_ALLOC_STATS: c_alloc_stats(c, &r->u.alloc_stats); return true;
    case PL_REC_STACK: c_stack(c, &r->u.stack); return true;
    case PL_REC_FRAME: c_frame(c, &r->u.frame); return true;
    case PL_REC_MODULE: c_module(c, &r->u.module); return true;
    case PL_REC_THREAD_NAME:
        c_u32(c, &r->u.thread_name.tid);
        c_str(c, &r->u.thread_name.name, 63);
        return true;
    case PL_REC_LOST:
        c_u64(c, &r->u.lost.n_records);
        c_u64(c, &r->u.lost.n_bytes);
        return true;
    case PL_REC_EXEC: c_str(c, &r->u.exec.path, PL_STR_MAX_BYTES); return true;
    case PL_REC_PYFRAME: c_pyframe(c, &r->u.pyframe); return true;
    case PL_REC_RETENTION: c_retention(c, &r->u.retention); return true;
    case PL_REC_AGGREGATE: c_aggregate(c, &r->u.aggregate); return true;
    }
    return false;
}

size_t pl_event_encode(const pl_trace_record_t *rec, uint8_t *buf, size_t cap) {
    if (cap > PL_REC_MAX_BYTES) cap = PL_REC_MAX_BYTES;
    if (cap < PL_REC_HEADER_BYTES) return 0;
    codec_t c = {.p = buf + PL_REC_HEADER_BYTES, .end = buf + cap, .writing = true};
    /* The walker takes non-const pointers for symmetry; writing never modifies *rec. */
    pl_trace_record_t *r = (pl_trace_record_t *)(uintptr_t)rec;
    if (!c_fields(&c, r) || c.bad) return 0;
    size_t len = (size_t)(c.p - buf);
    uint16_t type16 = (uint16_t)rec->type, len16 = (uint16_t)len;
    memcpy(buf, &type16, 2);
    memcpy(buf + 2, &len16, 2);
    memcpy(buf + 4, &rec->t_ns, 8);
    return len;
}

/* Bytes of a pl_trace_record_t that a record of this type fills: the header and its union member. The frequent
 * types are a few dozen bytes of a 1.5 KiB struct (the process record's argv), and zeroing and copying the whole
 * struct per record was a fifth of `plateau report`'s time (bench/ingest_bench.sh); the rest of *rec is left as it
 * was, and no reader looks at another type's member. Rare types keep the whole struct. */
static size_t rec_bytes(uint16_t type) {
    size_t head = offsetof(pl_trace_record_t, u);
    switch (type) {
    case PL_REC_STEP: return head + sizeof(pl_rec_step_t);
    case PL_REC_RSS: return head + sizeof(pl_rec_rss_t);
    case PL_REC_HEAP: return head + sizeof(pl_rec_heap_t);
    case PL_REC_HOST_ALLOC: return head + sizeof(pl_rec_host_alloc_t);
    case PL_REC_HOST_FREE: return head + sizeof(pl_rec_host_free_t);
    case PL_REC_DEVICE_ALLOC:
    case PL_REC_DEVICE_FREE:
    case PL_REC_DEVICE_MAP:
    case PL_REC_DEVICE_UNMAP:
    case PL_REC_DEVICE_OOM: return head + sizeof(pl_rec_device_t);
    case PL_REC_ALLOC_STATS: return head + sizeof(pl_rec_alloc_stats_t);
    case PL_REC_STACK: return head + sizeof(pl_rec_stack_t);
    case PL_REC_FRAME: return head + sizeof(pl_rec_frame_t);
    case PL_REC_PYFRAME: return head + sizeof(pl_rec_pyframe_t);
    default: return sizeof(pl_trace_record_t);
    }
}

int pl_event_decode(const uint8_t *buf, size_t len, pl_trace_record_t *rec, size_t *used) {
    if (len < PL_REC_HEADER_BYTES) return -EBADMSG;
    uint16_t type16, len16;
    memcpy(&type16, buf, 2);
    memcpy(&len16, buf + 2, 2);
    if (len16 < PL_REC_HEADER_BYTES || len16 > len) return -EBADMSG;
    size_t n = rec_bytes(type16);
    pl_trace_record_t r;
    memset(&r, 0, n);
    r.type = (pl_rec_type_t)type16;
    memcpy(&r.t_ns, buf + 4, 8);
    if (r.t_ns < 0 || r.t_ns > PL_TRACE_MAX_T_NS) return -EBADMSG; /* the writer's clocks never give one */
    codec_t c = {.p = (uint8_t *)(uintptr_t)buf + PL_REC_HEADER_BYTES,
                 .end = (uint8_t *)(uintptr_t)buf + len16, .writing = false};
    if (type16 == 0 || type16 > PL_REC_TYPE_MAX || !c_fields(&c, &r)) {
        *used = len16;
        return 1;
    }
    /* Trailing bytes inside a record are allowed: later versions may append fields. */
    if (c.bad) return -EBADMSG;
    memcpy(rec, &r, n);
    *used = len16;
    return 0;
}

void pl_event_header_encode(const pl_trace_header_t *h, uint8_t out[PL_TRACE_HEADER_BYTES]) {
    memset(out, 0, PL_TRACE_HEADER_BYTES);
    memcpy(out, PL_TRACE_MAGIC, 8);
    uint32_t v32[6] = {h->version, PL_TRACE_HEADER_BYTES, h->pid, h->ppid, h->exec_seq, 0};
    memcpy(out + 8, v32, sizeof v32);
    memcpy(out + 32, &h->start_realtime_ns, 8);
    memcpy(out + 40, &h->start_mono_ns, 8);
    memcpy(out + 48, &h->version_minor, 4);
    memcpy(out + 52, &h->run_id, 8);
    uint32_t crc = pl_crc_update(0, out, 60);
    memcpy(out + 60, &crc, 4);
}

int pl_event_header_decode(const uint8_t in[PL_TRACE_HEADER_BYTES], pl_trace_header_t *out) {
    if (memcmp(in, PL_TRACE_MAGIC, 8) != 0) return -EBADMSG;
    uint32_t crc;
    memcpy(&crc, in + 60, 4);
    if (crc != pl_crc_update(0, in, 60)) return -EBADMSG;
    uint32_t v32[6];
    memcpy(v32, in + 8, sizeof v32);
    if (v32[1] != PL_TRACE_HEADER_BYTES) return -EBADMSG;
    if (v32[0] == 0 || v32[0] > PL_TRACE_VERSION) return -EPROTONOSUPPORT;
    pl_trace_header_t h = {.version = v32[0], .pid = v32[2], .ppid = v32[3], .exec_seq = v32[4]};
    memcpy(&h.start_realtime_ns, in + 32, 8);
    memcpy(&h.start_mono_ns, in + 40, 8);
    memcpy(&h.version_minor, in + 48, 4);
    memcpy(&h.run_id, in + 52, 8); /* reserved and zero before 1.4: no run id */
    if (h.start_mono_ns < 0 || h.start_mono_ns > PL_TRACE_MAX_T_NS || h.start_realtime_ns < 0 ||
        h.start_realtime_ns > PL_TRACE_MAX_T_NS)
        return -EBADMSG;
    *out = h;
    return 0;
}

void pl_event_chunk_header(uint8_t out[PL_CHUNK_HEADER_BYTES], const uint8_t *payload, uint32_t len,
                           uint32_t n_records, uint32_t seq) {
    uint32_t v[6] = {PL_CHUNK_MAGIC, len, n_records, seq, 0, 0};
    memcpy(out, v, sizeof v);
    uint32_t crc = pl_crc_update(pl_crc_update(0, out, 16), payload, len);
    memcpy(out + 16, &crc, 4);
}
