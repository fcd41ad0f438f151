/* tune/torch_snapshot: PyTorch memory snapshot pickle -> replay sequence (see torch_snapshot.h).
 *
 * Schema read (torch/cuda/_memory_viz.py and MemoryViz.js read the same):
 *   {'segments': [{'device', 'address', 'total_size', 'blocks': [{'size', 'requested_size', 'state'}], ...}],
 *    'device_traces': [[{'action', 'addr', 'size', 'stream', 'time_us', 'frames', ...}], ...],   # one list a device
 *                                  ('oom' entries have 'device_free', the free device bytes, instead of 'addr')
 *    'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': str, 'expandable_segments': bool, ...}, ...}
 * Only the keys named here are looked at; unknown keys and actions are skipped (newer PyTorch adds some).
 */
#include "torch_snapshot.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tune.h"

typedef enum { ACT_OTHER, ACT_ALLOC, ACT_FREE_REQ, ACT_FREE_DONE, ACT_FREE_LEGACY, ACT_OOM, ACT_SEG_ALLOC,
               ACT_SEG_FREE, ACT_SEG_MAP, ACT_SEG_UNMAP, ACT_SNAPSHOT } action_t;

enum { KEY_OTHER, KEY_ACTION, KEY_ADDR, KEY_SIZE, KEY_STREAM, KEY_DEVICE_FREE };

typedef struct reader {
    const pl_pickle_doc_t *doc;
    /* PyTorch's keys and action names are the same str objects in every entry, so the pickle memoizes them and
     * they are the same values here: remember which value is which, compare strings only for new ones */
    pl_pickle_ref_t key_ref[8];
    uint8_t key_kind[8];
    pl_pickle_ref_t act_ref[16];
    uint8_t act_kind[16];
    size_t work, max_work; /* dict items scanned: bounded so shared dicts cannot make the walk quadratic */
    const char *name;
    char *err;
    size_t err_len;
} reader_t;

static int fail(reader_t *r, int rc, const char *fmt, ...) {
    if (r->err && r->err_len) {
        int n = snprintf(r->err, r->err_len, "%s: ", r->name);
        if (n >= 0 && (size_t)n < r->err_len) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->err + n, r->err_len - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return rc;
}

static int charge(reader_t *r, size_t n) {
    r->work += n;
    if (r->work > r->max_work)
        return fail(r, -E2BIG, "the pickle shares the same dicts between many entries (more than %zu items to scan "
                    "for a document of %zu members): not a snapshot written by PyTorch", r->max_work,
                    r->doc->n_members);
    return 0;
}


typedef struct entry {
    action_t action;
    bool have_addr, have_size, have_device_free;
    int64_t addr, size, stream;
    int64_t device_free; /* oom: free device bytes (cudaMemGetInfo) when the request failed */
} entry_t;

/* Kind of a key (KEY_*), through a small cache of the key values seen. */
static int key_kind(reader_t *r, pl_pickle_ref_t k) {
    for (int i = 0; i < 8; i++)
        if (r->key_ref[i] == k) return r->key_kind[i];
    const pl_pickle_doc_t *d = r->doc;
    int kind = pl_pickle_str_eq(d, k, "action") ? KEY_ACTION
               : pl_pickle_str_eq(d, k, "addr") ? KEY_ADDR
               : pl_pickle_str_eq(d, k, "size") ? KEY_SIZE
               : pl_pickle_str_eq(d, k, "stream") ? KEY_STREAM
               : pl_pickle_str_eq(d, k, "device_free") ? KEY_DEVICE_FREE
                                                  : KEY_OTHER;
    memmove(r->key_ref + 1, r->key_ref, 7 * sizeof r->key_ref[0]);
    memmove(r->key_kind + 1, r->key_kind, 7);
    r->key_ref[0] = k;
    r->key_kind[0] = (uint8_t)kind;
    return kind;
}

static action_t action_kind(reader_t *r, pl_pickle_ref_t v) {
    for (int i = 0; i < 16; i++)
        if (r->act_ref[i] == v) return (action_t)r->act_kind[i];
    static const struct { const char *s; action_t a; } names[] = {
        {"alloc", ACT_ALLOC}, {"free_requested", ACT_FREE_REQ}, {"free_completed", ACT_FREE_DONE},
        {"free", ACT_FREE_LEGACY}, {"oom", ACT_OOM}, {"segment_alloc", ACT_SEG_ALLOC},
        {"segment_free", ACT_SEG_FREE}, {"segment_map", ACT_SEG_MAP}, {"segment_unmap", ACT_SEG_UNMAP},
        {"snapshot", ACT_SNAPSHOT}};
    action_t a = ACT_OTHER;
    for (size_t j = 0; j < sizeof names / sizeof names[0]; j++)
        if (pl_pickle_str_eq(r->doc, v, names[j].s)) a = names[j].a;
    memmove(r->act_ref + 1, r->act_ref, 15 * sizeof r->act_ref[0]);
    memmove(r->act_kind + 1, r->act_kind, 15);
    r->act_ref[0] = v;
    r->act_kind[0] = (uint8_t)a;
    return a;
}

/* One pass over a trace entry dict. */
static int read_entry(reader_t *r, pl_pickle_ref_t e, size_t idx, entry_t *out) {
    const pl_pickle_doc_t *d = r->doc;
    if (pl_pickle_type(d, e) != PL_PICKLE_DICT)
        return fail(r, -EBADMSG, "device_traces entry %zu is a %s, not a dict", idx,
                    pl_pickle_type_name(pl_pickle_type(d, e)));
    size_t n = pl_pickle_len(d, e);
    int rc = charge(r, n);
    if (rc) return rc;
    entry_t x = {.action = ACT_OTHER};
    bool have_action = false;
    for (size_t i = 0; i < n; i++) {
        pl_pickle_ref_t k = pl_pickle_dict_key(d, e, i), v = pl_pickle_dict_value(d, e, i);
        int kind = key_kind(r, k);
        if (kind == KEY_ACTION) {
            if (pl_pickle_type(d, v) != PL_PICKLE_STR)
                return fail(r, -EBADMSG, "device_traces entry %zu: 'action' is a %s, not a str", idx,
                            pl_pickle_type_name(pl_pickle_type(d, v)));
            have_action = true;
            x.action = action_kind(r, v);
        } else if (kind == KEY_DEVICE_FREE) { /* only a reference number: a value that is not an int is ignored */
            int64_t iv;
            if (pl_pickle_int(d, v, &iv) == 0 && iv >= 0) x.device_free = iv, x.have_device_free = true;
        } else if (kind != KEY_OTHER) {
            static const char *names[] = {"", "action", "addr", "size", "stream"};
            int64_t iv;
            if (pl_pickle_int(d, v, &iv) != 0)
                return fail(r, -EBADMSG, "device_traces entry %zu: '%s' is a %s, not an int", idx, names[kind],
                            pl_pickle_type_name(pl_pickle_type(d, v)));
            if (kind == KEY_ADDR) x.addr = iv, x.have_addr = true;
            else if (kind == KEY_SIZE) x.size = iv, x.have_size = true;
            else x.stream = iv;
        }
    }
    if (!have_action) return fail(r, -EBADMSG, "device_traces entry %zu has no 'action'", idx);
    if (x.action != ACT_OTHER && x.action != ACT_SNAPSHOT) {
        if (!x.have_size) return fail(r, -EBADMSG, "device_traces entry %zu has no 'size'", idx);
        if (x.size < 0) return fail(r, -EBADMSG, "device_traces entry %zu: negative size %" PRId64, idx, x.size);
        if (x.action != ACT_OOM && !x.have_addr)
            return fail(r, -EBADMSG, "device_traces entry %zu has no 'addr'", idx);
    }
    *out = x;
    return 0;
}

/* Count 'alloc' actions of one trace (device choice); malformed entries are reported by the full pass. */
static int count_allocs(reader_t *r, pl_pickle_ref_t trace, size_t *out) {
    const pl_pickle_doc_t *d = r->doc;
    size_t n = pl_pickle_len(d, trace), c = 0;
    for (size_t i = 0; i < n; i++) {
        pl_pickle_ref_t e = pl_pickle_item(d, trace, i);
        int rc = charge(r, pl_pickle_len(d, e));
        if (rc) return rc;
        size_t m = pl_pickle_len(d, e);
        for (size_t k = 0; k < m; k++)
            if (key_kind(r, pl_pickle_dict_key(d, e, k)) == KEY_ACTION) {
                pl_pickle_ref_t v = pl_pickle_dict_value(d, e, k);
                c += pl_pickle_type(d, v) == PL_PICKLE_STR && action_kind(r, v) == ACT_ALLOC;
                break;
            }
    }
    *out = c;
    return 0;
}

static void read_settings(reader_t *r, pl_pickle_ref_t st, pl_torch_snapshot_info_t *info) {
    const pl_pickle_doc_t *d = r->doc;
    size_t n = pl_pickle_len(d, st), len;
    r->work += n;
    for (size_t i = 0; i < n; i++) {
        pl_pickle_ref_t k = pl_pickle_dict_key(d, st, i), v = pl_pickle_dict_value(d, st, i);
        if (pl_pickle_str_eq(d, k, "PYTORCH_CUDA_ALLOC_CONF") && pl_pickle_type(d, v) == PL_PICKLE_STR) {
            const char *s = pl_pickle_str(d, v, &len);
            size_t m = len < sizeof info->alloc_conf - 1 ? len : sizeof info->alloc_conf - 1;
            memcpy(info->alloc_conf, s, m);
            info->alloc_conf[m] = 0;
            for (size_t j = 0; j < m; j++) /* printed in messages: no control characters */
                if ((unsigned char)info->alloc_conf[j] < 0x20) info->alloc_conf[j] = '?';
        } else if (pl_pickle_str_eq(d, k, "expandable_segments") && pl_pickle_type(d, v) == PL_PICKLE_BOOL) {
            int64_t b = 0;
            pl_pickle_int(d, v, &b);
            info->have_expandable = true;
            info->expandable = b != 0;
        }
    }
}

/* Segments of the chosen device (entries without 'device' count for every device: older snapshots). */
static int read_segments(reader_t *r, pl_pickle_ref_t segs, int device, pl_torch_snapshot_info_t *info) {
    const pl_pickle_doc_t *d = r->doc;
    if (pl_pickle_type(d, segs) != PL_PICKLE_LIST)
        return fail(r, -EBADMSG, "'segments' is a %s, not a list", pl_pickle_type_name(pl_pickle_type(d, segs)));
    size_t n = pl_pickle_len(d, segs);
    for (size_t i = 0; i < n; i++) {
        pl_pickle_ref_t sg = pl_pickle_item(d, segs, i);
        if (pl_pickle_type(d, sg) != PL_PICKLE_DICT) return fail(r, -EBADMSG, "segment %zu is not a dict", i);
        size_t m = pl_pickle_len(d, sg);
        int rc = charge(r, m);
        if (rc) return rc;
        int64_t dev = device, total = -1;
        pl_pickle_ref_t blocks = PL_PICKLE_NULL;
        for (size_t j = 0; j < m; j++) {
            pl_pickle_ref_t k = pl_pickle_dict_key(d, sg, j), v = pl_pickle_dict_value(d, sg, j);
            if (pl_pickle_str_eq(d, k, "device")) {
                if (pl_pickle_int(d, v, &dev)) return fail(r, -EBADMSG, "segment %zu: 'device' is not an int", i);
            } else if (pl_pickle_str_eq(d, k, "total_size")) {
                if (pl_pickle_int(d, v, &total) || total < 0)
                    return fail(r, -EBADMSG, "segment %zu: 'total_size' is not a size", i);
            } else if (pl_pickle_str_eq(d, k, "blocks")) {
                blocks = v;
            }
        }
        if (total < 0) return fail(r, -EBADMSG, "segment %zu has no 'total_size'", i);
        if (dev != device) continue;
        info->n_segments++;
        if (__builtin_add_overflow(info->reserved_bytes, (uint64_t)total, &info->reserved_bytes))
            info->reserved_bytes = UINT64_MAX;
        size_t nb = pl_pickle_len(d, blocks);
        if (blocks != PL_PICKLE_NULL && pl_pickle_type(d, blocks) != PL_PICKLE_LIST)
            return fail(r, -EBADMSG, "segment %zu: 'blocks' is not a list", i);
        for (size_t b = 0; b < nb; b++) {
            pl_pickle_ref_t bl = pl_pickle_item(d, blocks, b);
            if ((rc = charge(r, pl_pickle_len(d, bl)))) return rc;
            int64_t size = 0;
            if (pl_pickle_str_eq(d, pl_pickle_dict_get(d, bl, "state"), "active_allocated") &&
                !pl_pickle_int(d, pl_pickle_dict_get(d, bl, "size"), &size) && size > 0 &&
                __builtin_add_overflow(info->allocated_bytes, (uint64_t)size, &info->allocated_bytes))
                info->allocated_bytes = UINT64_MAX;
        }
    }
    info->have_segments = true;
    return 0;
}

/* The root dict's device_traces (a list of lists, or NULL) and segments; fails when neither is there. */
static int find_traces(reader_t *r, pl_pickle_ref_t root, pl_pickle_ref_t *traces, pl_pickle_ref_t *segs) {
    const pl_pickle_doc_t *doc = r->doc;
    if (pl_pickle_type(doc, root) != PL_PICKLE_DICT)
        return fail(r, -EBADMSG, "not a PyTorch memory snapshot: the pickle holds a %s, not a dict",
                    pl_pickle_type_name(pl_pickle_type(doc, root)));
    *traces = pl_pickle_dict_get(doc, root, "device_traces");
    *segs = pl_pickle_dict_get(doc, root, "segments");
    if (*traces == PL_PICKLE_NULL && *segs == PL_PICKLE_NULL)
        return fail(r, -EBADMSG, "not a PyTorch memory snapshot: the dict has neither 'device_traces' nor 'segments'");
    if (*traces != PL_PICKLE_NULL && pl_pickle_type(doc, *traces) != PL_PICKLE_LIST)
        return fail(r, -EBADMSG, "'device_traces' is a %s, not a list",
                    pl_pickle_type_name(pl_pickle_type(doc, *traces)));
    size_t n_dev = pl_pickle_len(doc, *traces);
    for (size_t i = 0; i < n_dev; i++)
        if (pl_pickle_type(doc, pl_pickle_item(doc, *traces, i)) != PL_PICKLE_LIST)
            return fail(r, -EBADMSG, "device_traces[%zu] is not a list", i);
    return 0;
}

/* The device asked for (dev >= 0), or else the one with the most allocations (the first on a tie). */
static int pick_device(reader_t *r, pl_pickle_ref_t traces, size_t n_dev, int *dev) {
    if (*dev >= 0 && (size_t)*dev >= n_dev)
        return fail(r, -ENODEV, "no device %d in the snapshot (device_traces has %zu device%s)", *dev, n_dev,
                    n_dev == 1 ? "" : "s");
    if (*dev >= 0) return 0;
    size_t best = 0;
    *dev = 0;
    for (size_t i = 0; i < n_dev; i++) {
        size_t c = 0;
        int rc = count_allocs(r, pl_pickle_item(r->doc, traces, i), &c);
        if (rc) return rc;
        if (c > best) best = c, *dev = (int)i;
    }
    r->work = 0; /* counting is a separate, bounded pass */
    return 0;
}

/* Pass 1: validate every entry of the trace and count its actions. */
static int count_actions(reader_t *r, pl_pickle_ref_t trace, pl_torch_snapshot_info_t *in) {
    size_t n = pl_pickle_len(r->doc, trace);
    for (size_t i = 0; i < n; i++) {
        entry_t e;
        int rc = read_entry(r, pl_pickle_item(r->doc, trace, i), i, &e);
        if (rc) return rc;
        switch (e.action) {
        case ACT_ALLOC: in->n_alloc++; break;
        case ACT_FREE_REQ: in->n_free_requested++; break;
        case ACT_FREE_DONE: in->n_free_completed++; break;
        case ACT_FREE_LEGACY: in->n_free_legacy++; break;
        case ACT_OOM: in->n_oom++; break;
        case ACT_SEG_ALLOC: in->n_segment_alloc++; break;
        case ACT_SEG_FREE: in->n_segment_free++; break;
        case ACT_SEG_MAP: in->n_segment_map++; break;
        case ACT_SEG_UNMAP: in->n_segment_unmap++; break;
        case ACT_SNAPSHOT: in->n_snapshot++; break;
        case ACT_OTHER: in->n_other_actions++; break;
        }
    }
    return 0;
}

/* Reserved bytes along the trace, relative to its start (segment actions), and at its first OOM. */
typedef struct reserved {
    int64_t resv, resv_max;
    bool have_oom_free;         /* the first oom with device_free: */
    int64_t oom_resv, oom_free; /* reserved then (relative to the start) and the free device bytes */
} reserved_t;

/* Pass 2: the replay sequence (frees come from free_completed when there are any), and the reserved bytes. */
static int build_seq(reader_t *r, pl_pickle_ref_t trace, const pl_torch_snapshot_info_t *in, pl_replay_seq_t *s,
                     reserved_t *rv) {
    size_t n = pl_pickle_len(r->doc, trace);
    for (size_t i = 0; i < n; i++) {
        entry_t e;
        int rc = read_entry(r, pl_pickle_item(r->doc, trace, i), i, &e);
        if (rc) return rc;
        bool is_free = e.action == ACT_FREE_DONE ||
                       (in->frees_from_requested && (e.action == ACT_FREE_REQ || e.action == ACT_FREE_LEGACY));
        if (e.action == ACT_ALLOC)
            rc = pl_replay_seq_alloc(s, (uint64_t)e.addr, (uint64_t)e.size, (uint64_t)e.stream);
        else if (is_free)
            rc = pl_replay_seq_free_addr(s, (uint64_t)e.addr);
        else if (e.action == ACT_OOM) {
            rc = pl_replay_seq_probe(s, (uint64_t)e.size, (uint64_t)e.stream);
            if (e.have_device_free && !rv->have_oom_free) {
                rv->have_oom_free = true;
                rv->oom_resv = rv->resv;
                rv->oom_free = e.device_free;
            }
        }
        else if ((e.action == ACT_SEG_ALLOC || e.action == ACT_SEG_MAP) &&
                 __builtin_add_overflow(rv->resv, e.size, &rv->resv))
            rv->resv = INT64_MAX; /* saturate: only a reference number */
        else if ((e.action == ACT_SEG_FREE || e.action == ACT_SEG_UNMAP) &&
                 __builtin_sub_overflow(rv->resv, e.size, &rv->resv))
            rv->resv = INT64_MIN;
        if (rv->resv > rv->resv_max) rv->resv_max = rv->resv;
        if (rc == -E2BIG)
            return fail(r, -E2BIG, "more than %zu events (or %d streams): raise --max-events", s->max_events,
                        PL_REPLAY_MAX_STREAMS);
        if (rc) return fail(r, rc, "%s", strerror(-rc));
    }
    return 0;
}

/* Reserved at the trace's start = reserved at the snapshot - the trace's net segment bytes; from it the reserved
 * peak and, with the first OOM's free device bytes, the capacity the recorded run had. */
static void reserved_peak(const reserved_t *rv, pl_torch_snapshot_info_t *in, pl_replay_seq_t *s) {
    int64_t start, peak;
    if (!in->have_segments || in->reserved_bytes > INT64_MAX ||
        __builtin_sub_overflow((int64_t)in->reserved_bytes, rv->resv, &start) || start < 0 ||
        __builtin_add_overflow(start, rv->resv_max, &peak))
        return;
    in->have_reserved_peak = true;
    in->reserved_peak_bytes = (uint64_t)peak;
    /* The device's capacity for this allocator, as the recorded run saw it at its first OOM: what it had reserved
     * then plus what the device still had free (cudaMemGetInfo; memory of other processes and the CUDA context is in
     * neither). The replay at this capacity fails where the run failed. */
    int64_t at, cap;
    if (rv->have_oom_free && !__builtin_add_overflow(start, rv->oom_resv, &at) && at >= 0 &&
        !__builtin_add_overflow(at, rv->oom_free, &cap) && cap > 0) {
        in->have_oom_capacity = true;
        in->oom_reserved_bytes = (uint64_t)at;
        in->oom_device_free_bytes = (uint64_t)rv->oom_free;
        s->capacity_bytes = (uint64_t)cap;
        snprintf(s->capacity_from, sizeof s->capacity_from,
                 "the snapshot: reserved + free device memory at its first OOM");
    }
}

/* Everything after parsing: the device's trace into *s, the counts and reference numbers into *in. */
static int read_doc(reader_t *r, const pl_torch_snapshot_opts_t *o, pl_replay_seq_t *s, pl_torch_snapshot_info_t *in) {
    const pl_pickle_doc_t *doc = r->doc;
    pl_pickle_ref_t traces = PL_PICKLE_NULL, segs = PL_PICKLE_NULL;
    int rc;
    if ((rc = find_traces(r, doc->root, &traces, &segs))) return rc;
    size_t n_dev = pl_pickle_len(doc, traces);
    if (n_dev > INT32_MAX) n_dev = INT32_MAX;
    in->n_devices = (int)n_dev;
    int dev = o->device;
    if ((rc = pick_device(r, traces, n_dev, &dev))) return rc;
    in->device = dev;
    s->device = dev;
    pl_pickle_ref_t trace = pl_pickle_item(doc, traces, (size_t)dev);
    in->n_entries = pl_pickle_len(doc, trace);
    if ((rc = count_actions(r, trace, in))) return rc;
    in->frees_from_requested = in->n_free_completed == 0;
    reserved_t rv = {0};
    if ((rc = build_seq(r, trace, in, s, &rv))) return rc;
    s->n_map_records = in->n_segment_map;
    s->n_unmap_records = in->n_segment_unmap;
    if (segs != PL_PICKLE_NULL && (rc = read_segments(r, segs, dev, in))) return rc;
    reserved_peak(&rv, in, s);
    pl_pickle_ref_t st = pl_pickle_dict_get(doc, doc->root, "allocator_settings");
    if (pl_pickle_type(doc, st) == PL_PICKLE_DICT) read_settings(r, st, in);
    if (s->n_allocs == 0 && s->n_probes == 0)
        return fail(r, -ENODATA, "the snapshot has no allocation history for device %d (%zu trace entries), so there "
                    "is nothing to replay. Record one with torch.cuda.memory._record_memory_history(max_entries=...) "
                    "before the code to study, then torch.cuda.memory._dump_snapshot(FILE)", dev, in->n_entries);
    return 0;
}

int pl_torch_snapshot_read(const void *data, size_t len, const char *name, const pl_torch_snapshot_opts_t *opts,
                           pl_replay_seq_t *s, pl_torch_snapshot_info_t *info, char *err, size_t err_len) {
    pl_torch_snapshot_opts_t o = opts ? *opts : (pl_torch_snapshot_opts_t){.device = -1};
    pl_torch_snapshot_info_t in;
    memset(&in, 0, sizeof in);
    pl_pickle_doc_t doc;
    char perr[512];
    reader_t r = {.doc = &doc, .name = name, .err = err, .err_len = err_len};
    for (int i = 0; i < 8; i++) r.key_ref[i] = PL_PICKLE_NULL;
    for (int i = 0; i < 16; i++) r.act_ref[i] = PL_PICKLE_NULL;
    int rc = pl_pickle_parse(data, len, &o.limits, &doc, perr, sizeof perr);
    if (rc) {
        snprintf(err, err_len, "%s: not a readable PyTorch memory snapshot: %s", name, perr);
        return rc;
    }
    r.max_work = 2 * doc.n_members + ((size_t)1 << 20); /* per pass; each pass below resets work */
    pl_replay_seq_init(s, o.max_events);
    snprintf(s->file, sizeof s->file, "%s", name);
    s->source = PL_DEV_SRC_ALLOCATOR; /* the caching allocator's own history */
    in.protocol = doc.protocol;
    rc = read_doc(&r, &o, s, &in);
    pl_pickle_doc_free(&doc);
    if (rc) {
        pl_replay_seq_free(s);
        return rc;
    }
    if (info) *info = in;
    return 0;
}

void pl_torch_snapshot_summary(const pl_torch_snapshot_info_t *in, const pl_replay_seq_t *s, char *buf,
                               size_t buf_len) {
    char a[32], b[32], c[32];
    size_t off = 0;
#define ADD(...)                                                                                                   \
    do {                                                                                                           \
        if (off < buf_len) {                                                                                       \
            int n_ = snprintf(buf + off, buf_len - off, __VA_ARGS__);                                              \
            if (n_ > 0) off += (size_t)n_;                                                                         \
        }                                                                                                          \
    } while (0)
    if (buf_len) buf[0] = 0;
    ADD("format: PyTorch memory snapshot (pickle protocol %d), device %d of %d: %zu trace entries (%zu alloc, "
        "%zu free_requested, %zu free_completed, %zu oom; %zu segment_alloc, %zu segment_free, %zu segment_map, "
        "%zu segment_unmap%s); frees replayed at %s\n",
        in->protocol, in->device, in->n_devices, in->n_entries, in->n_alloc, in->n_free_requested,
        in->n_free_completed, in->n_oom, in->n_segment_alloc, in->n_segment_free, in->n_segment_map,
        in->n_segment_unmap, in->n_other_actions ? ", and actions not read" : "",
        in->frees_from_requested ? "free_requested (the trace has no free_completed)" : "free_completed");
    if (in->have_segments) {
        pl_tune_format_bytes((double)in->reserved_bytes, a, sizeof a);
        pl_tune_format_bytes((double)in->allocated_bytes, b, sizeof b);
        ADD("recorded: at the snapshot %s reserved in %zu segments, %s allocated", a, in->n_segments, b);
        if (in->have_reserved_peak) {
            pl_tune_format_bytes((double)in->reserved_peak_bytes, c, sizeof c);
            ADD("; peak reserved over the trace %s", c);
        }
        ADD("\n");
    }
    if (in->have_oom_capacity) {
        pl_tune_format_bytes((double)in->oom_reserved_bytes, a, sizeof a);
        pl_tune_format_bytes((double)in->oom_device_free_bytes, b, sizeof b);
        pl_tune_format_bytes((double)(in->oom_reserved_bytes + in->oom_device_free_bytes), c, sizeof c);
        ADD("recorded: at the first OOM %s reserved and %s free on the device: capacity %s\n", a, b, c);
    } else if (in->n_oom) {
        ADD("note: the trace has an OOM but the capacity cannot be derived (%s): use --capacity\n",
            !in->have_segments ? "no 'segments' to anchor the reserved bytes" :
            !in->have_reserved_peak ? "the segments do not match the trace's segment events" :
                                      "the oom entries carry no 'device_free'");
    }
    if (in->alloc_conf[0]) ADD("recorded with: PYTORCH_CUDA_ALLOC_CONF=%s\n", in->alloc_conf);
    if (s && s->n_unmatched_frees)
        ADD("note: %zu frees of blocks the trace never allocated: the snapshot's trace ring buffer (max_entries of "
            "_record_memory_history) dropped its earliest events, so blocks allocated before its first entry are "
            "not in the replay\n", s->n_unmatched_frees);
#undef ADD
}
