/* reports/ingest: the one reader of traces and the one table of their stacks (see ingest.h). */
#include "ingest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

typedef struct stk { uint32_t off_pc, off_py, n_pcs, n_py; } stk_t;

struct pl_ingest {
    pl_table_t stack_ix, frame_ix, module_ix, pyf_ix; /* key (id + 1, or the pc) -> uint32_t index */
    stk_t *stacks;
    uint64_t *pcs;
    uint32_t *py;
    pl_ingest_frame_t *frames;
    pl_sym_module_t *modules;
    pl_ingest_pyframe_t *pyfs;
    size_t n_stacks, n_pcs, n_py, n_frames, n_modules, n_pyfs;
    size_t symbol_bytes;       /* held by frames[].symbol */
};

pl_ingest_t *pl_ingest_new(void) {
    pl_ingest_t *in = calloc(1, sizeof *in);
    if (!in) return NULL;
    pl_table_init(&in->stack_ix, sizeof(uint32_t), PL_INGEST_MAX_STACKS);
    pl_table_init(&in->frame_ix, sizeof(uint32_t), PL_INGEST_MAX_FRAMES);
    pl_table_init(&in->module_ix, sizeof(uint32_t), PL_INGEST_MAX_MODULES);
    pl_table_init(&in->pyf_ix, sizeof(uint32_t), PL_INGEST_MAX_FRAMES);
    return in;
}

void pl_ingest_free(pl_ingest_t *in) {
    if (!in) return;
    for (size_t i = 0; i < in->n_frames; i++) free((char *)in->frames[i].symbol);
    for (size_t i = 0; i < in->n_modules; i++) {
        free((char *)in->modules[i].path);
        free((char *)in->modules[i].build_id);
    }
    for (size_t i = 0; i < in->n_pyfs; i++) {
        free((char *)in->pyfs[i].file);
        free((char *)in->pyfs[i].function);
    }
    free(in->stacks);
    free(in->pcs);
    free(in->py);
    free(in->frames);
    free(in->modules);
    free(in->pyfs);
    pl_table_free(&in->stack_ix);
    pl_table_free(&in->frame_ix);
    pl_table_free(&in->module_ix);
    pl_table_free(&in->pyf_ix);
    free(in);
}

/* *arr (elem bytes each) allocated whole, for max elements, on first use: traces without stacks cost nothing */
static int whole(void *arr, size_t elem, size_t max) {
    void **a = arr;
    if (*a) return 0;
    *a = malloc(elem * max);
    return *a ? 0 : -ENOMEM;
}

/* at most cap bytes of s (NULL: ""), malloc'd */
static char *dup_cut(const char *s, size_t cap) {
    size_t n = s ? strlen(s) : 0;
    if (n > cap) n = cap;
    char *c = malloc(n + 1);
    if (!c) return NULL;
    memcpy(c, s ? s : "", n);
    c[n] = 0;
    return c;
}

/* key -> the next index n; 1 stored, 0 present already or the table full, -ENOMEM */
static int index_put(pl_table_t *t, uint64_t key, size_t n) {
    void *v;
    int rc = pl_table_put(t, key, &v);
    if (rc) return rc < 0 ? rc : 0; /* present, or full */
    *(uint32_t *)v = (uint32_t)n;
    return 1;
}

static int take_stack(pl_ingest_t *in, const pl_rec_stack_t *q) {
    uint32_t n_pcs = q->n_frames < PL_TRACE_MAX_FRAMES ? q->n_frames : PL_TRACE_MAX_FRAMES;
    uint32_t n_py = q->n_py <= PL_TRACE_MAX_FRAMES - n_pcs ? q->n_py : PL_TRACE_MAX_FRAMES - n_pcs;
    if (in->n_stacks >= PL_INGEST_MAX_STACKS || in->n_pcs + n_pcs > PL_INGEST_MAX_POOL ||
        in->n_py + n_py > PL_INGEST_MAX_POOL || pl_table_get(&in->stack_ix, (uint64_t)q->stack_id + 1))
        return 0;
    int rc;
    if ((rc = whole(&in->stacks, sizeof *in->stacks, PL_INGEST_MAX_STACKS)) ||
        (rc = whole(&in->pcs, sizeof *in->pcs, PL_INGEST_MAX_POOL)) ||
        (rc = whole(&in->py, sizeof *in->py, PL_INGEST_MAX_POOL)))
        return rc;
    if ((rc = index_put(&in->stack_ix, (uint64_t)q->stack_id + 1, in->n_stacks)) <= 0) return rc;
    in->stacks[in->n_stacks++] = (stk_t){(uint32_t)in->n_pcs, (uint32_t)in->n_py, n_pcs, n_py};
    memcpy(in->pcs + in->n_pcs, q->pcs, n_pcs * sizeof *in->pcs);
    memcpy(in->py + in->n_py, q->py, n_py * sizeof *in->py);
    in->n_pcs += n_pcs;
    in->n_py += n_py;
    return 0;
}

static int take_frame(pl_ingest_t *in, const pl_rec_frame_t *q) {
    if (in->n_frames >= PL_INGEST_MAX_FRAMES || pl_table_get(&in->frame_ix, q->pc)) return 0;
    int rc = whole(&in->frames, sizeof *in->frames, PL_INGEST_MAX_FRAMES);
    if (rc) return rc;
    size_t len = q->symbol ? strlen(q->symbol) : 0;
    size_t cap = in->symbol_bytes + len > PL_INGEST_SYMBOLS_BUDGET ? PL_INGEST_SYMBOL_CUT : PL_INGEST_SYMBOL_MAX;
    char *sym = dup_cut(q->symbol, cap);
    if (!sym) return -ENOMEM;
    if ((rc = index_put(&in->frame_ix, q->pc, in->n_frames)) <= 0) {
        free(sym);
        return rc;
    }
    in->symbol_bytes += strlen(sym) + 1;
    in->frames[in->n_frames++] = (pl_ingest_frame_t){q->module_id, q->module_offset, q->symbol_offset, sym};
    return 0;
}

static int take_module(pl_ingest_t *in, const pl_rec_module_t *q) {
    if (in->n_modules >= PL_INGEST_MAX_MODULES || pl_table_get(&in->module_ix, (uint64_t)q->module_id + 1)) return 0;
    int rc = whole(&in->modules, sizeof *in->modules, PL_INGEST_MAX_MODULES);
    if (rc) return rc;
    char *path = dup_cut(q->path, PL_INGEST_MODULE_PATH_MAX), *bid = dup_cut(q->build_id, PL_INGEST_BUILD_ID_MAX);
    if (!path || !bid || (rc = index_put(&in->module_ix, (uint64_t)q->module_id + 1, in->n_modules)) <= 0) {
        free(path);
        free(bid);
        return path && bid ? rc : -ENOMEM;
    }
    in->modules[in->n_modules++] = (pl_sym_module_t){path, bid, q->file_size, q->file_mtime_ns};
    return 0;
}

static int take_pyframe(pl_ingest_t *in, const pl_rec_pyframe_t *q) {
    if (in->n_pyfs >= PL_INGEST_MAX_FRAMES || pl_table_get(&in->pyf_ix, (uint64_t)q->pyframe_id + 1)) return 0;
    int rc = whole(&in->pyfs, sizeof *in->pyfs, PL_INGEST_MAX_FRAMES);
    if (rc) return rc;
    char *file = dup_cut(q->file, SIZE_MAX), *fn = dup_cut(q->function, SIZE_MAX);
    if (!file || !fn || (rc = index_put(&in->pyf_ix, (uint64_t)q->pyframe_id + 1, in->n_pyfs)) <= 0) {
        free(file);
        free(fn);
        return file && fn ? rc : -ENOMEM;
    }
    in->pyfs[in->n_pyfs++] = (pl_ingest_pyframe_t){file, fn, q->line};
    return 0;
}

static int hand(pl_ingest_fn fn, void *ctx, const pl_trace_record_t *rec) { return fn ? fn(ctx, rec) : 0; }

int pl_ingest_record(pl_ingest_t *in, const pl_trace_record_t *rec, const pl_ingest_handlers_t *h, void *ctx) {
    int rc;
    switch (rec->type) {
    case PL_REC_PROCESS_START: return hand(h->process, ctx, rec);
    case PL_REC_PROCESS_END:
    case PL_REC_EXEC: return hand(h->end, ctx, rec);
    case PL_REC_STEP: return hand(h->step, ctx, rec);
    case PL_REC_MARK: return hand(h->mark, ctx, rec);
    case PL_REC_RSS: return hand(h->rss, ctx, rec);
    case PL_REC_HEAP: return hand(h->heap, ctx, rec);
    case PL_REC_HOST_ALLOC: return hand(h->host_alloc, ctx, rec);
    case PL_REC_HOST_FREE: return hand(h->host_free, ctx, rec);
    case PL_REC_DEVICE_ALLOC: return hand(h->device_alloc, ctx, rec);
    case PL_REC_DEVICE_FREE: return hand(h->device_free, ctx, rec);
    case PL_REC_DEVICE_MAP: return hand(h->device_map, ctx, rec);
    case PL_REC_DEVICE_UNMAP: return hand(h->device_unmap, ctx, rec);
    case PL_REC_DEVICE_OOM: return hand(h->device_oom, ctx, rec);
    case PL_REC_ALLOC_STATS: return hand(h->alloc_stats, ctx, rec);
    case PL_REC_STACK:
        if (in && (rc = take_stack(in, &rec->u.stack))) return rc;
        return hand(h->stack, ctx, rec);
    case PL_REC_FRAME:
        if (in && (rc = take_frame(in, &rec->u.frame))) return rc;
        return hand(h->frame, ctx, rec);
    case PL_REC_MODULE:
        if (in && (rc = take_module(in, &rec->u.module))) return rc;
        return hand(h->module, ctx, rec);
    case PL_REC_PYFRAME:
        if (in && (rc = take_pyframe(in, &rec->u.pyframe))) return rc;
        return hand(h->pyframe, ctx, rec);
    case PL_REC_THREAD_NAME: return hand(h->thread_name, ctx, rec);
    case PL_REC_LOST: return hand(h->lost, ctx, rec);
    case PL_REC_RETENTION: return hand(h->retention, ctx, rec);
    case PL_REC_AGGREGATE: return hand(h->aggregate, ctx, rec);
    default: return 0; /* a kind from a newer writer: the reader only delivers kinds it decodes */
    }
}

int pl_ingest_read(pl_ingest_t *in, pl_trace_reader_t *rd, const pl_ingest_handlers_t *h, void *ctx, int *end) {
    pl_trace_record_t rec;
    int nrc, rc = 0;
    while ((nrc = pl_trace_next(rd, &rec)) > 0 && !(rc = pl_ingest_record(in, &rec, h, ctx))) {
    }
    if (end) *end = nrc;
    return rc;
}

static const uint32_t *index_of(const pl_table_t *t, uint64_t key) { return pl_table_get(t, key); }

bool pl_ingest_stack(const pl_ingest_t *in, uint32_t stack_id, pl_ingest_stack_t *out) {
    const uint32_t *ix = stack_id ? index_of(&in->stack_ix, (uint64_t)stack_id + 1) : NULL;
    if (!ix) return false;
    const stk_t *s = &in->stacks[*ix];
    *out = (pl_ingest_stack_t){in->pcs + s->off_pc, in->py + s->off_py, s->n_pcs, s->n_py, *ix};
    return true;
}

const pl_ingest_frame_t *pl_ingest_frame(const pl_ingest_t *in, uint64_t pc) {
    const uint32_t *ix = index_of(&in->frame_ix, pc);
    return ix ? &in->frames[*ix] : NULL;
}

const pl_sym_module_t *pl_ingest_module(const pl_ingest_t *in, uint32_t module_id) {
    const uint32_t *ix = index_of(&in->module_ix, (uint64_t)module_id + 1);
    return ix ? &in->modules[*ix] : NULL;
}

const pl_ingest_pyframe_t *pl_ingest_pyframe(const pl_ingest_t *in, uint32_t pyframe_id) {
    const uint32_t *ix = index_of(&in->pyf_ix, (uint64_t)pyframe_id + 1);
    return ix ? &in->pyfs[*ix] : NULL;
}

size_t pl_ingest_n_stacks(const pl_ingest_t *in) { return in->n_stacks; }

const char *pl_ingest_module_base(const pl_sym_module_t *m) {
    if (!m) return "?";
    const char *b = strrchr(m->path, '/');
    return b ? b + 1 : m->path;
}

bool pl_ingest_module_own(const pl_sym_module_t *m) {
    return m && !strncmp(pl_ingest_module_base(m), "libplateau", 10);
}

pl_sym_status_t pl_ingest_lookup(const pl_ingest_t *in, pl_symbols_t *sy, uint64_t pc, const pl_ingest_frame_t **frame,
                                 const pl_sym_module_t **module, const char **name, uint64_t *offset) {
    *frame = pl_ingest_frame(in, pc);
    *module = *frame ? pl_ingest_module(in, (*frame)->module_id) : NULL;
    if (!*module || !sy) return PL_SYM_NO_FILE;
    return pl_symbols_lookup(sy, *module, (*frame)->module_offset, name, offset);
}
