/* tune/replay: device allocation sequence from a trace -> compact event array -> pl_alloc on a sim device.
 *
 * Invariants: every FREE event names a slot whose ALLOC precedes it and that no other event reuses in between;
 * n_slots bounds every slot; the event array never grows past max_events. Extraction keeps one chunk of the trace,
 * the event array and a hash of live addresses in memory. docs/tune.md describes the choices (source priority,
 * probes for recorded OOMs, reserved-but-unallocated at the peak).
 */
#include "replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "grow.h"
#include "ingest.h"
#include "table.h"

#define MAP_EMPTY UINT64_MAX

uint64_t pl_replay_pick_capacity(const pl_replay_seq_t *s, uint64_t given, char *why, size_t why_len) {
    if (given) {
        snprintf(why, why_len, "--capacity");
        return given;
    }
    if (s->capacity_bytes) {
        snprintf(why, why_len, "from %s", s->capacity_from[0] ? s->capacity_from : "the recording");
        return s->capacity_bytes;
    }
    snprintf(why, why_len, "default: not recorded; use --capacity");
    return PL_REPLAY_DEFAULT_CAPACITY_BYTES;
}

const char *pl_replay_source_name(uint32_t source) {
    switch (source) {
    case PL_DEV_SRC_ALLOCATOR: return "allocator";
    case PL_DEV_SRC_RUNTIME: return "cuda-runtime";
    case PL_DEV_SRC_DRIVER: return "cuda-driver";
    case PL_DEV_SRC_CUPTI: return "cupti";
    default: return "unknown";
    }
}

/* ---- builder -------------------------------------------------------------------------------------------- */

void pl_replay_seq_init(pl_replay_seq_t *s, size_t max_events) {
    memset(s, 0, sizeof *s);
    s->max_events = max_events ? max_events : PL_REPLAY_DEFAULT_MAX_EVENTS;
    s->device = -1;
}

void pl_replay_seq_free(pl_replay_seq_t *s) {
    free(s->ev);
    free(s->map_addr);
    free(s->map_slot);
    free(s->free_slots);
    memset(s, 0, sizeof *s);
}

static size_t map_hash(uint64_t addr, size_t cap) {
    return (size_t)((addr * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static int map_grow(pl_replay_seq_t *s) {
    return pl_table_grow(&s->map_addr, &s->map_slot, &s->map_cap, 1024, MAP_EMPTY, map_hash);
}

/* Index of addr in the map, or the empty position where it would go. */
static size_t map_find(const pl_replay_seq_t *s, uint64_t addr) {
    size_t i = map_hash(addr, s->map_cap);
    while (s->map_addr[i] != MAP_EMPTY && s->map_addr[i] != addr) i = (i + 1) & (s->map_cap - 1);
    return i;
}

/* Linear-probing delete with backward shift (no tombstones, so lookups stay short). */
static void map_delete_at(pl_replay_seq_t *s, size_t i) {
    size_t mask = s->map_cap - 1, j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (s->map_addr[j] == MAP_EMPTY) break;
        size_t home = map_hash(s->map_addr[j], s->map_cap);
        /* move j back to i if its home is not cyclically within (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            s->map_addr[i] = s->map_addr[j];
            s->map_slot[i] = s->map_slot[j];
            i = j;
        }
    }
    s->map_addr[i] = MAP_EMPTY;
    s->map_used--;
}

static int push(pl_replay_seq_t *s, pl_replay_event_t e) {
    if (s->n_events >= s->max_events) return -E2BIG;
    if (s->n_events == s->cap_events) {
        size_t cap = pl_grow_cap(s->cap_events, s->n_events + 1, 4096, sizeof *s->ev);
        if (cap > s->max_events) cap = s->max_events; /* never past the limit: n_events < max_events here */
        pl_replay_event_t *n = cap ? realloc(s->ev, cap * sizeof *n) : NULL;
        if (!n) return -ENOMEM;
        s->ev = n;
        s->cap_events = cap;
    }
    s->ev[s->n_events++] = e;
    return 0;
}

static int stream_index(pl_replay_seq_t *s, uint64_t stream, uint16_t *out) {
    for (size_t i = 0; i < s->n_streams; i++)
        if (s->streams[i] == stream) {
            *out = (uint16_t)i;
            return 0;
        }
    if (s->n_streams >= PL_REPLAY_MAX_STREAMS) return -E2BIG;
    s->streams[s->n_streams] = stream;
    *out = (uint16_t)s->n_streams++;
    return 0;
}

int pl_replay_seq_free_addr(pl_replay_seq_t *s, uint64_t addr) {
    if (!s->map_cap || addr == MAP_EMPTY) {
        s->n_unmatched_frees++;
        return 0;
    }
    size_t i = map_find(s, addr);
    if (s->map_addr[i] == MAP_EMPTY) {
        s->n_unmatched_frees++;
        return 0;
    }
    uint32_t slot = s->map_slot[i];
    int rc = push(s, (pl_replay_event_t){.slot = slot, .kind = PL_REPLAY_FREE});
    if (rc) return rc;
    if (pl_grow_first((void **)&s->free_slots, &s->cap_free_slots, s->n_free_slots + 1, sizeof *s->free_slots, 1024))
        return -ENOMEM;
    s->free_slots[s->n_free_slots++] = slot;
    map_delete_at(s, i);
    s->n_frees++;
    return 0;
}

int pl_replay_seq_alloc(pl_replay_seq_t *s, uint64_t addr, uint64_t size_bytes, uint64_t stream) {
    int rc;
    if (addr == MAP_EMPTY) { /* all-ones is the map's empty marker and never a real address: skip the record */
        s->n_bad_records++;
        return 0;
    }
    if ((s->map_used + 1) * 4 > s->map_cap * 3 && (rc = map_grow(s))) return rc;
    size_t i = map_find(s, addr);
    if (s->map_addr[i] != MAP_EMPTY) { /* the free of the previous block here was lost: free it first */
        if ((rc = pl_replay_seq_free_addr(s, addr))) return rc;
        s->n_frees--;
        s->n_implicit_frees++;
        i = map_find(s, addr);
    }
    uint16_t st;
    if ((rc = stream_index(s, stream, &st))) return rc;
    uint32_t slot;
    if (s->n_free_slots)
        slot = s->free_slots[s->n_free_slots - 1];
    else if (s->n_slots == UINT32_MAX)
        return -E2BIG;
    else
        slot = s->n_slots;
    if ((rc = push(s, (pl_replay_event_t){.size_bytes = size_bytes, .slot = slot, .stream = st,
                                          .kind = PL_REPLAY_ALLOC})))
        return rc;
    if (s->n_free_slots)
        s->n_free_slots--;
    else
        s->n_slots++;
    s->map_addr[i] = addr;
    s->map_slot[i] = slot;
    s->map_used++;
    s->n_allocs++;
    return 0;
}

int pl_replay_seq_probe(pl_replay_seq_t *s, uint64_t size_bytes, uint64_t stream) {
    uint16_t st;
    int rc = stream_index(s, stream, &st);
    if (rc) return rc;
    if ((rc = push(s, (pl_replay_event_t){.size_bytes = size_bytes, .stream = st, .kind = PL_REPLAY_PROBE})))
        return rc;
    s->n_probes++;
    return 0;
}

/* ---- extraction ----------------------------------------------------------------------------------------- */

typedef struct cand {
    size_t file;
    uint32_t source, allocator_id;
    int32_t device;
    uint64_t n_allocs;
} cand_t;

#define MAX_CANDS 256

typedef struct scan {
    cand_t c[MAX_CANDS];
    size_t n;
    uint64_t n_device_records;
    uint64_t n_alloc_records; /* every device_alloc record, whatever its source */
} scan_t;

static int source_rank(uint32_t src) {
    switch (src) {
    case PL_DEV_SRC_ALLOCATOR: return 0;
    case PL_DEV_SRC_RUNTIME: return 1;
    case PL_DEV_SRC_DRIVER: return 2;
    case PL_DEV_SRC_CUPTI: return 3;
    default: return 4;
    }
}

static void scan_add(scan_t *sc, size_t file, const pl_rec_device_t *d) {
    for (size_t i = 0; i < sc->n; i++) {
        cand_t *c = &sc->c[i];
        if (c->file == file && c->source == d->source && c->allocator_id == d->allocator_id &&
            c->device == d->device) {
            c->n_allocs++;
            return;
        }
    }
    if (sc->n < MAX_CANDS)
        sc->c[sc->n++] = (cand_t){.file = file, .source = d->source, .allocator_id = d->allocator_id,
                                  .device = d->device, .n_allocs = 1};
}

typedef struct scanning { scan_t *sc; size_t file; } scanning_t;

static int scan_device(void *ctx, const pl_trace_record_t *rec) {
    (void)rec;
    ((scanning_t *)ctx)->sc->n_device_records++;
    return 0;
}

static int scan_alloc(void *ctx, const pl_trace_record_t *rec) {
    scanning_t *g = ctx;
    g->sc->n_device_records++;
    g->sc->n_alloc_records++;
    /* device -1 from the CUDA interposers is pinned host memory (cudaMallocHost): not a device sequence */
    if (rec->u.device.device >= 0 || rec->u.device.source == PL_DEV_SRC_ALLOCATOR)
        scan_add(g->sc, g->file, &rec->u.device);
    return 0;
}

/* Pass 1 over one reader: count device_alloc records per candidate. Damage is ignored here (pass 2 reports it). */
static void scan_reader(scan_t *sc, size_t file, pl_trace_reader_t *rd) {
    static const pl_ingest_handlers_t h = {.device_alloc = scan_alloc, .device_free = scan_device,
                                           .device_map = scan_device, .device_unmap = scan_device,
                                           .device_oom = scan_device};
    scanning_t g = {sc, file};
    pl_ingest_read(NULL, rd, &h, &g, NULL);
}

static const cand_t *scan_best(const scan_t *sc) {
    const cand_t *best = NULL;
    for (size_t i = 0; i < sc->n; i++) {
        const cand_t *c = &sc->c[i];
        if (!best || source_rank(c->source) < source_rank(best->source) ||
            (source_rank(c->source) == source_rank(best->source) && c->n_allocs > best->n_allocs))
            best = c;
    }
    return best;
}

static uint64_t request_size(const pl_rec_device_t *d) {
    if (d->source == PL_DEV_SRC_ALLOCATOR) return d->requested;
    return (d->requested && d->requested != PL_TRACE_NA) ? d->requested : d->size;
}

static bool same_cand(const pl_replay_seq_t *s, const pl_rec_device_t *d) {
    return d->source == s->source && d->allocator_id == s->allocator_id && d->device == s->device;
}

/* The CUDA interposers record a failed request with device -1 when the device is unknown at that point. */
static bool same_cand_oom(const pl_replay_seq_t *s, const pl_rec_device_t *d) {
    return d->source == s->source && d->allocator_id == s->allocator_id && (d->device == s->device || d->device < 0);
}

typedef struct folding { pl_replay_seq_t *s; uint64_t device_total; } folding_t;

static int fold_alloc(void *ctx, const pl_trace_record_t *rec) {
    pl_replay_seq_t *s = ((folding_t *)ctx)->s;
    const pl_rec_device_t *d = &rec->u.device;
    if (same_cand(s, d)) return pl_replay_seq_alloc(s, d->addr, request_size(d), d->stream);
    s->n_other_streams_records++;
    return 0;
}

static int fold_free(void *ctx, const pl_trace_record_t *rec) {
    pl_replay_seq_t *s = ((folding_t *)ctx)->s;
    return same_cand(s, &rec->u.device) ? pl_replay_seq_free_addr(s, rec->u.device.addr) : 0;
}

static int fold_oom(void *ctx, const pl_trace_record_t *rec) {
    pl_replay_seq_t *s = ((folding_t *)ctx)->s;
    const pl_rec_device_t *d = &rec->u.device;
    return same_cand_oom(s, d) ? pl_replay_seq_probe(s, request_size(d), d->stream) : 0;
}

static int fold_map(void *ctx, const pl_trace_record_t *rec) {
    pl_replay_seq_t *s = ((folding_t *)ctx)->s;
    if (same_cand(s, &rec->u.device)) s->n_map_records++;
    return 0;
}

static int fold_unmap(void *ctx, const pl_trace_record_t *rec) {
    pl_replay_seq_t *s = ((folding_t *)ctx)->s;
    if (same_cand(s, &rec->u.device)) s->n_unmap_records++;
    return 0;
}

static int fold_stats(void *ctx, const pl_trace_record_t *rec) {
    pl_replay_seq_t *s = ((folding_t *)ctx)->s;
    const pl_rec_alloc_stats_t *q = &rec->u.alloc_stats;
    if (s->source != PL_DEV_SRC_ALLOCATOR || q->allocator_id != s->allocator_id || q->device != s->device) return 0;
    s->have_stats = true;
    s->last_stats = *q;
    s->stats_event = s->n_events;
    if (q->capacity_bytes) {
        s->capacity_bytes = q->capacity_bytes;
        snprintf(s->capacity_from, sizeof s->capacity_from, "the trace's alloc_stats");
    }
    return 0;
}

static int fold_rss(void *ctx, const pl_trace_record_t *rec) {
    folding_t *f = ctx;
    if (rec->u.rss.device_total != PL_TRACE_NA && rec->u.rss.device_total) f->device_total = rec->u.rss.device_total;
    return 0;
}

/* Pass 2: fold the chosen candidate's records into s. */
static int fold_reader(pl_replay_seq_t *s, pl_trace_reader_t *rd, const char *name) {
    static const pl_ingest_handlers_t h = {.device_alloc = fold_alloc, .device_free = fold_free, .device_oom = fold_oom,
                                           .device_map = fold_map, .device_unmap = fold_unmap,
                                           .alloc_stats = fold_stats, .rss = fold_rss};
    folding_t f = {s, 0};
    int n;
    int rc = pl_ingest_read(NULL, rd, &h, &f, &n);
    if (rc) return rc;
    if (!s->capacity_bytes && f.device_total) {
        s->capacity_bytes = f.device_total;
        snprintf(s->capacity_from, sizeof s->capacity_from, "the trace's device total memory");
    }
    if (n < 0) {
        s->damaged = true;
        snprintf(s->error, sizeof s->error, "%s", *pl_trace_error(rd) ? pl_trace_error(rd) : name);
    }
    return 0;
}

/* The trace files of path: itself, or the regular *.pltrace files of a directory (tracer/read/rundir.c; a FIFO or
 * a link there is never opened). Files left out are counted in *n_skipped and the first named in skipped. */
static int list_files(const char *path, char ***out, size_t *n_out, size_t *n_skipped, char *skipped,
                      size_t skipped_len, char *err, size_t err_len) {
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        snprintf(err, err_len, "%s: %s", path, strerror(e));
        return -e;
    }
    if (!S_ISDIR(st.st_mode)) {
        char **files = calloc(1, sizeof *files);
        if (!files || !(files[0] = strdup(path))) {
            free(files);
            return -ENOMEM;
        }
        *out = files;
        *n_out = 1;
        return 0;
    }
    pl_trace_dir_t list;
    int rc = pl_trace_dir_list(path, &list);
    if (rc) {
        snprintf(err, err_len, "%s: %s", path, strerror(-rc));
        return rc;
    }
    *n_skipped = list.n_skipped;
    if (list.n_skipped) snprintf(skipped, skipped_len, "%s/%s", path, list.skipped[0]);
    if (!list.n_paths) {
        if (list.n_skipped)
            snprintf(err, err_len, "%s: no readable *.pltrace file in this directory (skipped %zu: %s)", path,
                     list.n_skipped, skipped);
        else
            snprintf(err, err_len,
                     "%s: no *.pltrace files in this directory (record one with `plateau run -o %s -- CMD`)", path,
                     path);
        pl_trace_dir_free(&list);
        return -ENOENT;
    }
    *out = list.paths; /* taken over: freed one by one by the caller */
    *n_out = list.n_paths;
    list.paths = NULL;
    list.n_paths = 0;
    pl_trace_dir_free(&list);
    return 0;
}

static void no_device_message(const char *path, uint64_t n_device_records, char *err, size_t err_len) {
    snprintf(err, err_len,
             "%s: no device allocation records%s, so there is nothing to replay. Record the program under "
             "`plateau run -o DIR -- CMD` while it allocates device memory through plateau's caching allocator "
             "(libplateau_alloc, e.g. plateau-train: allocator events) or through intercepted CUDA calls "
             "(cudaMalloc/cuMemAlloc/CUPTI records), then run `plateau tune DIR`",
             path, n_device_records ? " that allocate" : "");
}

static int finish(pl_replay_seq_t *s, int rc, const char *path, char *err, size_t err_len) {
    if (rc == -E2BIG)
        snprintf(err, err_len,
                 "%s: the device allocation sequence is longer than the limit of %zu events (or %d streams); "
                 "raise it with --max-events", path, s->max_events, PL_REPLAY_MAX_STREAMS);
    else if (rc == -ENOMEM)
        snprintf(err, err_len, "%s: out of memory while reading the allocation sequence", path);
    else if (rc)
        snprintf(err, err_len, "%s: cannot build the allocation sequence: %s", path, strerror(-rc));
    if (rc) pl_replay_seq_free(s);
    return rc;
}

int pl_replay_extract(const char *path, const pl_replay_opts_t *opts, pl_replay_seq_t *s, char *err, size_t err_len) {
    char **files = NULL;
    size_t n_files = 0;
    if (err_len) err[0] = 0;
    size_t n_skipped = 0;
    char skipped[sizeof s->skipped] = "";
    int rc = list_files(path, &files, &n_files, &n_skipped, skipped, sizeof skipped, err, err_len);
    if (rc) return rc;
    scan_t *sc = calloc(1, sizeof *sc);
    if (!sc) {
        rc = -ENOMEM;
        goto out;
    }
    size_t n_open = 0;
    char first_err[256] = "";
    for (size_t i = 0; i < n_files; i++) {
        pl_trace_reader_t *rd;
        int orc = pl_trace_open(files[i], &rd);
        if (orc) {
            if (!first_err[0])
                snprintf(first_err, sizeof first_err, "%s", pl_trace_open_error()[0] ? pl_trace_open_error() : strerror(-orc));
            if (n_files == 1) rc = orc;
            continue;
        }
        n_open++;
        scan_reader(sc, i, rd);
        pl_trace_close(rd);
    }
    if (!n_open) {
        if (!rc) rc = -EBADMSG;
        if (strstr(first_err, files[0]))
            snprintf(err, err_len, "%s", first_err);
        else
            snprintf(err, err_len, "%s: not a readable plateau trace: %s", files[0], first_err);
        goto out;
    }
    const cand_t *best = scan_best(sc);
    if (!best) {
        no_device_message(path, sc->n_device_records, err, err_len);
        rc = -ENODATA;
        goto out;
    }
    pl_replay_seq_init(s, opts ? opts->max_events : 0);
    s->source = best->source;
    s->allocator_id = best->allocator_id;
    s->device = best->device;
    snprintf(s->file, sizeof s->file, "%s", files[best->file]);
    s->n_skipped_files = n_skipped;
    snprintf(s->skipped, sizeof s->skipped, "%s", skipped);
    size_t other = (size_t)(sc->n_alloc_records - best->n_allocs);
    pl_trace_reader_t *rd;
    rc = pl_trace_open(files[best->file], &rd);
    if (rc) {
        snprintf(err, err_len, "%s: cannot reopen: %s", files[best->file], strerror(-rc));
        pl_replay_seq_free(s);
        goto out;
    }
    rc = fold_reader(s, rd, files[best->file]);
    pl_trace_close(rd);
    s->n_other_streams_records = other; /* fold saw only this file's: the scan counted every file */
    rc = finish(s, rc, files[best->file], err, err_len);
out:
    free(sc);
    for (size_t i = 0; i < n_files; i++) free(files[i]);
    free(files);
    return rc;
}

int pl_replay_extract_mem(const void *data, size_t len, const char *name, const pl_replay_opts_t *opts,
                          pl_replay_seq_t *s, char *err, size_t err_len) {
    if (err_len) err[0] = 0;
    if (!name) name = "(memory)";
    pl_trace_reader_t *rd;
    int rc = pl_trace_open_mem(data, len, name, &rd);
    if (rc) {
        snprintf(err, err_len, "%s", pl_trace_open_error());
        return rc;
    }
    scan_t *sc = calloc(1, sizeof *sc);
    if (!sc) {
        pl_trace_close(rd);
        return -ENOMEM;
    }
    scan_reader(sc, 0, rd);
    pl_trace_close(rd);
    const cand_t *best = scan_best(sc);
    if (!best) {
        no_device_message(name, sc->n_device_records, err, err_len);
        free(sc);
        return -ENODATA;
    }
    pl_replay_seq_init(s, opts ? opts->max_events : 0);
    s->source = best->source;
    s->allocator_id = best->allocator_id;
    s->device = best->device;
    snprintf(s->file, sizeof s->file, "%s", name);
    size_t other = (size_t)(sc->n_alloc_records - best->n_allocs);
    free(sc);
    if ((rc = pl_trace_open_mem(data, len, name, &rd))) {
        pl_replay_seq_free(s);
        return rc;
    }
    rc = fold_reader(s, rd, name);
    pl_trace_close(rd);
    s->n_other_streams_records = other;
    return finish(s, rc, name, err, err_len);
}

/* ---- replay --------------------------------------------------------------------------------------------- */

typedef struct track {
    int64_t allocated, reserved; /* bytes, from the allocator's events (this thread only) */
    int64_t n_map, n_unmap;      /* SEGMENT_MAP / SEGMENT_UNMAP events */
} track_t;

static void track_hook(void *ctx, const pl_alloc_event_t *ev) {
    track_t *t = ctx;
    switch (ev->kind) {
    case PL_ALLOC_EV_ALLOC: t->allocated += (int64_t)ev->size_bytes; break;
    case PL_ALLOC_EV_FREE: t->allocated -= (int64_t)ev->size_bytes; break;
    case PL_ALLOC_EV_SEGMENT_MAP:
        t->reserved += (int64_t)ev->size_bytes;
        t->n_map++;
        break;
    case PL_ALLOC_EV_SEGMENT_UNMAP:
        t->reserved -= (int64_t)ev->size_bytes;
        t->n_unmap++;
        break;
    default: break;
    }
}

static void snap_at(pl_alloc_t *a, pl_replay_result_t *r) {
    pl_alloc_stats_t st;
    pl_alloc_get_stats(a, &st);
    r->have_at_stats = true;
    r->at_stats_allocated_bytes = st.allocated_bytes[PL_POOL_ALL].current;
    r->at_stats_allocated_peak_bytes = st.allocated_bytes[PL_POOL_ALL].peak;
    r->at_stats_reserved_bytes = st.reserved_bytes[PL_POOL_ALL].current;
    r->at_stats_reserved_peak_bytes = st.reserved_bytes[PL_POOL_ALL].peak;
    r->at_stats_n_device_alloc = st.num_device_alloc;
    r->at_stats_n_device_free = st.num_device_free;
    r->at_stats_n_ooms = st.num_ooms;
}

static void note_oom(pl_replay_result_t *r, size_t i, uint64_t size_bytes) {
    if (r->first_oom_event < 0) {
        r->first_oom_event = (int64_t)i;
        r->first_oom_bytes = size_bytes;
    }
}

/* The reference replay: public locked API, ptr table, a hook tracking allocated / reserved bytes. */
static int run_locked(const pl_replay_seq_t *s, pl_alloc_t *a, pl_replay_result_t *r, track_t *t) {
    void **ptrs = calloc(s->n_slots ? s->n_slots : 1, sizeof *ptrs);
    if (!ptrs) return -ENOMEM;
    pl_alloc_set_hook(a, track_hook, t);
    int64_t peak_seen = -1;
    const pl_replay_event_t *ev = s->ev;
    for (size_t i = 0; i < s->n_events; i++) {
        const pl_replay_event_t *e = &ev[i];
        if (i == s->stats_event && s->have_stats) snap_at(a, r);
        void *p;
        switch (e->kind) {
        case PL_REPLAY_ALLOC:
            p = pl_alloc_malloc(a, (size_t)e->size_bytes, (pl_stream_t)s->streams[e->stream]);
            ptrs[e->slot] = p;
            if (!p) {
                r->n_failed_allocs++;
                note_oom(r, i, e->size_bytes);
            }
            break;
        case PL_REPLAY_FREE:
            if (ptrs[e->slot]) {
                pl_alloc_free(a, ptrs[e->slot]);
                ptrs[e->slot] = NULL;
            }
            break;
        default: /* PROBE */
            p = pl_alloc_malloc(a, (size_t)e->size_bytes, (pl_stream_t)s->streams[e->stream]);
            if (p)
                pl_alloc_free(a, p);
            else
                note_oom(r, i, e->size_bytes);
            break;
        }
        if (t->reserved > peak_seen) {
            peak_seen = t->reserved;
            r->unallocated_at_peak_bytes = t->reserved - t->allocated;
        }
    }
    pl_alloc_set_hook(a, NULL, NULL);
    free(ptrs);
    return 0;
}

/* The fast replay: the allocator runs the event array itself (pl_alloc_run_batch, allocator/batch.h: its unlocked
 * handle path, a slot table of opaque blocks instead of pointers, no hook); it stops at each failed request, at the
 * event where the recorded stats were taken, and at the end. Allocated and reserved come from the allocator's stats,
 * map / unmap event counts from the batch. */
static int run_fast(const pl_replay_seq_t *s, pl_alloc_t *a, pl_replay_result_t *r, track_t *t) {
    struct pl_block **blk = calloc(s->n_slots ? s->n_slots : 1, sizeof *blk);
    if (!blk) return -ENOMEM;
    pl_alloc_batch_t bt = {.ops = s->ev, .slots = blk, .streams = s->streams, .peak_reserved = -1};
    size_t stats_event = s->have_stats ? s->stats_event : SIZE_MAX;
    size_t n = s->n_events, i = 0;
    while (i < n) {
        if (i == stats_event) snap_at(a, r);
        size_t stop = stats_event > i && stats_event < n ? stats_event : n;
        i = pl_alloc_run_batch(a, &bt, i, stop);
        if (i < stop) { /* a failed request */
            if (s->ev[i].kind == PL_REPLAY_ALLOC) r->n_failed_allocs++;
            note_oom(r, i, s->ev[i].size_bytes);
            i++;
        }
    }
    r->unallocated_at_peak_bytes = bt.unallocated_at_peak;
    t->n_map = bt.n_map_events;
    t->n_unmap = bt.n_unmap_events;
    free(blk);
    return 0;
}

const char *pl_replay_result_diff(const pl_replay_result_t *a, const pl_replay_result_t *b) {
#define DIFF(f) do { if (a->f != b->f) return #f; } while (0)
    DIFF(capacity_bytes);
    DIFF(peak_allocated_bytes);
    DIFF(peak_reserved_bytes);
    DIFF(peak_requested_bytes);
    DIFF(reserved_per_allocated);
    DIFF(unallocated_at_peak_bytes);
    DIFF(n_device_alloc);
    DIFF(n_device_free);
    DIFF(n_device_map);
    DIFF(n_device_unmap);
    DIFF(n_device_calls);
    DIFF(n_map_events);
    DIFF(n_unmap_events);
    DIFF(n_alloc_retries);
    DIFF(n_ooms);
    DIFF(n_failed_allocs);
    DIFF(first_oom_event);
    DIFF(first_oom_bytes);
    DIFF(end_allocated_bytes);
    DIFF(end_reserved_bytes);
    DIFF(have_at_stats);
    DIFF(at_stats_allocated_bytes);
    DIFF(at_stats_allocated_peak_bytes);
    DIFF(at_stats_reserved_bytes);
    DIFF(at_stats_reserved_peak_bytes);
    DIFF(at_stats_n_device_alloc);
    DIFF(at_stats_n_device_free);
    DIFF(at_stats_n_ooms);
    return NULL;
#undef DIFF
}

int pl_replay_run(const pl_replay_seq_t *s, const pl_alloc_config_t *cfg, uint64_t capacity_bytes,
                  pl_replay_result_t *out, char *err, size_t err_len) {
    return pl_replay_run_path(s, cfg, capacity_bytes, PL_REPLAY_PATH_FAST, out, err, err_len);
}

int pl_replay_run_path(const pl_replay_seq_t *s, const pl_alloc_config_t *cfg, uint64_t capacity_bytes,
                       pl_replay_path_t path, pl_replay_result_t *out, char *err, size_t err_len) {
    pl_sim_options_t so;
    pl_sim_options_default(&so);
    if (capacity_bytes) so.capacity_bytes = (size_t)capacity_bytes;
    return pl_replay_run_sim(s, cfg, &so, path, out, err, err_len);
}

int pl_replay_run_sim(const pl_replay_seq_t *s, const pl_alloc_config_t *cfg, const pl_sim_options_t *sim,
                      pl_replay_path_t path, pl_replay_result_t *out, char *err, size_t err_len) {
    if (err_len) err[0] = 0;
    pl_sim_options_t so = *sim;
    so.touch = false; /* address space only, private to this device: see backend_sim.c */
    pl_backend_t *be = NULL;
    pl_alloc_t *a = NULL;
    pl_replay_result_t r;
    memset(&r, 0, sizeof r);
    r.capacity_bytes = so.capacity_bytes;
    r.first_oom_event = -1;
    int rc = pl_backend_sim_create(&so, &be);
    if (rc) {
        snprintf(err, err_len, "cannot create the sim device: %s", strerror(-rc));
        return rc;
    }
    if ((rc = pl_alloc_create(be, cfg, &a, err, err_len))) goto out;
    track_t t = {0, 0, 0, 0};
    rc = path == PL_REPLAY_PATH_LOCKED ? run_locked(s, a, &r, &t) : run_fast(s, a, &r, &t);
    if (rc) {
        snprintf(err, err_len, "out of memory for %u replay slots", s->n_slots);
        goto out;
    }
    if (s->have_stats && s->stats_event >= s->n_events) snap_at(a, &r);
    pl_alloc_stats_t st;
    pl_alloc_get_stats(a, &st);
    r.n_map_events = t.n_map;
    r.n_unmap_events = t.n_unmap;
    r.peak_allocated_bytes = st.allocated_bytes[PL_POOL_ALL].peak;
    r.peak_reserved_bytes = st.reserved_bytes[PL_POOL_ALL].peak;
    r.peak_requested_bytes = st.requested_bytes[PL_POOL_ALL].peak;
    r.reserved_per_allocated =
        r.peak_allocated_bytes > 0 ? (double)r.peak_reserved_bytes / (double)r.peak_allocated_bytes : 0.0;
    r.n_device_alloc = st.num_device_alloc;
    r.n_device_free = st.num_device_free;
    r.n_device_map = st.num_device_map;
    r.n_device_unmap = st.num_device_unmap;
    r.n_device_calls = st.num_device_alloc + st.num_device_map;
    r.n_alloc_retries = st.num_alloc_retries;
    r.n_ooms = st.num_ooms;
    r.end_allocated_bytes = st.allocated_bytes[PL_POOL_ALL].current;
    r.end_reserved_bytes = st.reserved_bytes[PL_POOL_ALL].current;
    r.capacity_bytes = st.capacity_bytes ? st.capacity_bytes : r.capacity_bytes;
    *out = r;
out:
    if (a) pl_alloc_destroy(a);
    pl_backend_destroy(be);
    return rc;
}
