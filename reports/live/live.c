/* reports/live: follow a run directory while it is written, and say per metric where the run stands (live.h).
 * Invariants: each trace is read once, chunk by chunk, from the offset its reader kept (no re-reading); per process
 * and metric at most PL_LIVE_MAX_BINS step bins (2 x for by-time bins), so held memory is O(processes), and a
 * process that ended without stepping keeps only its file entry. Samples are keyed like reports/extract.c: a sample
 * taken inside step s belongs to s, a periodic one to the step in progress (last step + 1).
 * The labels from the classifier's verdict are in docs/live.md. */
#include "live.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <plateau/trace.h>

#include "format.h"
#include "grow.h"
#include "ingest.h"
#include "series.h"
#include "retention.h"
#include "verdict.h"

#define MAX_FILES 4096
/* Points a live classification works on (the report's is 512): the classifier's cost grows steeply with the points
 * (measured: ~265 ms at 512, ~16 ms at 128 per series on the 2-CPU test machine), and the watcher classifies up to
 * three series every poll. docs/live.md. */
#define CLASSIFY_POINTS 128
#define TIME_BUCKET_NS 1000000000LL /* by-time bins start at 1 s */
#define HEADER_BYTES 64      /* a trace header (tracer/core/event.h HEADER_BYTES): shorter is not written yet */

typedef struct bins {
    pl_point_t *p;   /* n, sorted by step (the bin's first key) */
    size_t n, cap;
    int64_t width;   /* keys per bin, doubles when the bins merge */
} bins_t;

typedef struct proc {
    char file[256];
    pl_trace_reader_t *rd;   /* NULL once ended (or failed) */
    uint64_t read_off;       /* file offset read up to (whole chunks) */
    bool ended, failed, started;
    bool earlier;            /* a process of an earlier run (opts since_realtime_ns): read no further, never shown */
    uint32_t pid;
    int32_t rank;            /* from process_start: RANK, -1 none */
    char name[64];
    char node[64];           /* from process_start: the host name, "" unknown */
    int64_t start_realtime_ns; /* from process_start */
    char *exe;               /* from process_start (malloc'd; freed with the series of a helper) */
    int64_t t0;              /* first record time */
    int64_t cur_step;        /* last step record, 0 none */
    uint64_t n_steps;
    double host_limit, dev_limit;
    double last_rss, last_dev;
    bool dev_from_stats;     /* alloc_stats seen: device used is not the allocated metric */
    bins_t step[PL_LIVE__COUNT], time[PL_LIVE__COUNT];
    pl_retention_t *ret;     /* who keeps it (reports/retention.c): the census's holders, NULL without a census */
} proc_t;

struct pl_live {
    char dir[4096];
    pl_live_opts_t o;
    proc_t *procs;
    size_t n, cap;
    uint64_t bytes_read;
    bool status_file;        /* run.status seen (grown past status_size0) */
    int64_t status_size0;    /* run.status's size at open with opts status_from_now, else -1 */
    const volatile int *cancel; /* pl_live_set_cancel */
};

void pl_live_set_cancel(pl_live_t *l, const volatile int *flag) { l->cancel = flag; }

static void bins_free(bins_t *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Add v at key k (time t). Bins merge pairwise when the bound is reached. */
static int bins_add(bins_t *b, int64_t k, int64_t t, double v) {
    if (!b->width) b->width = 1;
    if (b->n) {
        pl_point_t *last = &b->p[b->n - 1];
        if (k / b->width <= last->step / b->width) { /* same bin (or late: fold into the last one) */
            if (v < last->base) last->base = v;
            if (v > last->peak) last->peak = v;
            if (last->n_samples < UINT32_MAX) last->n_samples++;
            return 0;
        }
    }
    if (b->n == PL_LIVE_MAX_BINS) {
        size_t j = 0;
        b->width *= 2;
        for (size_t i = 0; i < b->n; i++) {
            pl_point_t q = b->p[i];
            if (j && b->p[j - 1].step / b->width == q.step / b->width) {
                pl_point_t *m = &b->p[j - 1];
                m->base = fmin(m->base, q.base);
                m->peak = fmax(m->peak, q.peak);
                m->n_samples += q.n_samples;
            } else {
                b->p[j++] = q;
            }
        }
        b->n = j;
        return bins_add(b, k, t, v);
    }
    if (b->n == b->cap) {
        size_t cap = pl_grow_cap(b->cap, b->n + 1, 16, sizeof *b->p);
        if (cap > PL_LIVE_MAX_BINS) cap = PL_LIVE_MAX_BINS;
        pl_point_t *p = cap ? realloc(b->p, cap * sizeof *p) : NULL;
        if (!p) return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    b->p[b->n++] = (pl_point_t){.step = k, .t_ns = t, .base = v, .peak = v, .n_samples = 1};
    return 0;
}

static int put(proc_t *p, int m, uint64_t step, int64_t t, double v) {
    if (!isfinite(v)) return 0;
    int64_t k = step ? (int64_t)(step > INT64_MAX / 2 ? INT64_MAX / 2 : step) : p->cur_step + 1;
    int64_t rt = t > p->t0 ? t - p->t0 : 0;
    int rc = bins_add(&p->step[m], k, rt, v);
    return rc ? rc : bins_add(&p->time[m], rt / TIME_BUCKET_NS, rt, v);
}

static bool na(uint64_t v) { return v == PL_TRACE_NA; }

static void on_process(proc_t *p, const pl_rec_process_t *q) {
    p->pid = q->pid;
    p->rank = q->rank;
    snprintf(p->node, sizeof p->node, "%s", q->node ? q->node : "");
    p->start_realtime_ns = q->start_realtime_ns;
    free(p->exe);
    p->exe = q->exe && q->exe[0] ? strdup(q->exe) : NULL; /* NULL on failure too: "unknown", never a wrong one */
    const char *a0 = q->n_argv ? q->argv[0] : q->exe;
    const char *b = a0 ? strrchr(a0, '/') : NULL;
    b = b ? b + 1 : (a0 ? a0 : "");
    if (q->n_argv > 1 && q->argv[1] && q->argv[1][0] != '-' && !strncmp(b, "python", 6)) {
        const char *b1 = strrchr(q->argv[1], '/');
        snprintf(p->name, sizeof p->name, "%s %s", b, b1 ? b1 + 1 : q->argv[1]);
    } else {
        snprintf(p->name, sizeof p->name, "%s", b);
    }
    double host = q->host_mem_bytes && !na(q->host_mem_bytes) ? (double)q->host_mem_bytes : 0;
    double cg = q->cgroup_max_bytes && !na(q->cgroup_max_bytes) ? (double)q->cgroup_max_bytes : 0;
    p->host_limit = cg > 0 && (host <= 0 || cg < host) ? cg : host;
}

static int on_start(void *ctx, const pl_trace_record_t *rec) {
    on_process(ctx, &rec->u.process);
    return 0;
}

static int on_end(void *ctx, const pl_trace_record_t *rec) {
    (void)rec;
    ((proc_t *)ctx)->ended = true;
    return 0;
}

static int on_step(void *ctx, const pl_trace_record_t *rec) {
    proc_t *p = ctx;
    if ((int64_t)rec->u.step.step > p->cur_step) p->cur_step = (int64_t)rec->u.step.step;
    p->n_steps++;
    return 0;
}

static int on_heap(void *ctx, const pl_trace_record_t *rec) {
    const pl_rec_heap_t *q = &rec->u.heap;
    return put(ctx, PL_LIVE_HEAP, q->step, rec->t_ns, (double)q->live_bytes + (double)q->mmap_live_bytes);
}

static int on_rss(void *ctx, const pl_trace_record_t *rec) {
    proc_t *p = ctx;
    const pl_rec_rss_t *q = &rec->u.rss;
    int rc = 0;
    if (!na(q->rss_anon) && !na(q->rss_file) && !na(q->rss_shmem)) {
        p->last_rss = (double)q->rss_anon + (double)q->rss_file + (double)q->rss_shmem;
        rc = put(p, PL_LIVE_RSS, q->step, rec->t_ns, p->last_rss);
    }
    if (!na(q->device_total) && q->device_total) p->dev_limit = (double)q->device_total;
    if (!na(q->device_used) && !p->dev_from_stats) {
        p->last_dev = (double)q->device_used;
        rc |= put(p, PL_LIVE_DEV, q->step, rec->t_ns, p->last_dev);
    }
    return rc;
}

static int on_stats(void *ctx, const pl_trace_record_t *rec) {
    proc_t *p = ctx;
    const pl_rec_alloc_stats_t *q = &rec->u.alloc_stats;
    if (!p->dev_from_stats) { /* the allocator's own count replaces the device-used fallback */
        p->dev_from_stats = true;
        bins_free(&p->step[PL_LIVE_DEV]);
        bins_free(&p->time[PL_LIVE_DEV]);
    }
    if (q->capacity_bytes && !na(q->capacity_bytes)) p->dev_limit = (double)q->capacity_bytes;
    /* NVML's reading (plateau attach) is the process's used memory, in reserved_bytes; allocated is NA */
    p->last_dev = (double)(q->allocator_id == PL_ALLOC_ID_NVML ? q->reserved_bytes : q->allocated_bytes);
    return put(p, PL_LIVE_DEV, q->step, rec->t_ns, p->last_dev);
}

static int on_retention(void *ctx, const pl_trace_record_t *rec) {
    proc_t *p = ctx;
    if (!p->ret && !(p->ret = calloc(1, sizeof *p->ret))) return -ENOMEM;
    return pl_retention_add(p->ret, &rec->u.retention);
}

static const pl_ingest_handlers_t handlers = {
    .process = on_start, .end = on_end, .step = on_step, .heap = on_heap, .rss = on_rss, .alloc_stats = on_stats,
    .retention = on_retention,
};

static int on_record(proc_t *p, const pl_trace_record_t *rec) {
    if (!p->started) {
        p->started = true;
        p->t0 = rec->t_ns;
    }
    return pl_ingest_record(NULL, rec, &handlers, p);
}

static void proc_drop_series(proc_t *p) {
    free(p->exe);
    p->exe = NULL;
    for (int m = 0; m < PL_LIVE__COUNT; m++) {
        bins_free(&p->step[m]);
        bins_free(&p->time[m]);
    }
    pl_retention_free(p->ret);
    free(p->ret);
    p->ret = NULL;
}

pl_live_t *pl_live_open(const char *dir, const pl_live_opts_t *opts) {
    pl_live_t *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    snprintf(l->dir, sizeof l->dir, "%s", dir);
    l->o.slow_hours = opts && opts->slow_hours > 0 ? opts->slow_hours : 24;
    l->o.horizon_steps = opts && opts->horizon_steps > 0 ? opts->horizon_steps : 10000;
    l->o.warmup_steps = opts && opts->warmup_steps > 0 ? opts->warmup_steps : 0;
    l->o.status_from_now = opts && opts->status_from_now;
    l->o.since_realtime_ns = opts && opts->since_realtime_ns > 0 ? opts->since_realtime_ns : 0;
    l->status_size0 = -1;
    if (opts && opts->status_from_now) {
        char status[sizeof l->dir + 16];
        struct stat sb;
        l->status_size0 = 0;
        if (snprintf(status, sizeof status, "%s/run.status", l->dir) < (int)sizeof status && !lstat(status, &sb) &&
            S_ISREG(sb.st_mode))
            l->status_size0 = (int64_t)sb.st_size;
    }
    return l;
}

void pl_live_close(pl_live_t *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) {
        pl_trace_close(l->procs[i].rd);
        proc_drop_series(&l->procs[i]);
    }
    free(l->procs);
    free(l);
}

static proc_t *find_or_add(pl_live_t *l, const char *name) {
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->procs[i].file, name)) return &l->procs[i];
    if (l->n >= MAX_FILES) return NULL;
    if (pl_grow_first((void **)&l->procs, &l->cap, l->n + 1, sizeof *l->procs, 16)) return NULL;
    proc_t *p = &l->procs[l->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->file, sizeof p->file, "%s", name);
    p->last_rss = p->last_dev = NAN;
    p->rank = -1;
    return p;
}

/* Read what is new in one trace. */
static int follow(pl_live_t *l, proc_t *p) {
    if (p->ended || p->failed) return 0;
    char path[4096 + 300];
    snprintf(path, sizeof path, "%s/%s", l->dir, p->file);
    if (!p->rd) {
        int rc = pl_trace_open(path, &p->rd);
        if (rc == -ENOMEM) return rc;
        if (rc) { /* a header not written yet is retried; anything else is not a trace */
            struct stat sb;
            if (stat(path, &sb) || sb.st_size >= HEADER_BYTES) p->failed = true;
            p->rd = NULL;
            return 0;
        }
        pl_trace_follow(p->rd, 1);
    }
    pl_trace_record_t rec;
    int rc;
    uint32_t n = 0;
    while ((rc = pl_trace_next(p->rd, &rec)) > 0) {
        if (on_record(p, &rec) == -ENOMEM) return -ENOMEM;
        if (rec.type == PL_REC_PROCESS_START && l->o.since_realtime_ns > 0 && p->start_realtime_ns > 0 &&
            p->start_realtime_ns < l->o.since_realtime_ns)
            p->earlier = p->ended = true;
        if (p->ended) break;
        if (++n % 4096 == 0 && l->cancel && *l->cancel) break; /* the rest is read on a next poll, if any */
    }
    uint64_t after = pl_trace_offset(p->rd);
    if (after > p->read_off) {
        l->bytes_read += after - p->read_off;
        p->read_off = after;
    }
    if (rc < 0) p->failed = true; /* damaged: what was read stays */
    if (p->ended || p->failed) {
        pl_trace_close(p->rd);
        p->rd = NULL;
        if (!p->n_steps) proc_drop_series(p); /* a helper: keep its name only */
    }
    return 0;
}

int pl_live_poll(pl_live_t *l) {
    /* the run's traces as the report reads them (tracer/read/rundir.c: regular *.pltrace files of the directory's owner
     * and, with a run-id file, of this run), listed again at each poll so that processes started since are followed
     * too; a trace whose header is not written yet is listed, and retried by follow() */
    pl_trace_dir_t list;
    int rc = pl_trace_dir_list(l->dir, &list);
    if (rc == -ENOMEM) return rc;
    if (rc) return 0; /* no directory yet */
    char status[sizeof l->dir + 16];
    struct stat sb;
    if (!l->status_file && snprintf(status, sizeof status, "%s/run.status", l->dir) < (int)sizeof status &&
        !lstat(status, &sb) && S_ISREG(sb.st_mode) && /* a FIFO or link planted there says nothing */
        (int64_t)sb.st_size > l->status_size0)
        l->status_file = true;
    size_t dir_len = strlen(l->dir) + 1; /* the listing's paths are DIR/NAME */
    for (size_t i = 0; i < list.n_paths && !rc; i++) {
        const char *name = list.paths[i] + dir_len;
        if (strlen(name) >= sizeof l->procs[0].file) continue;
        if (!find_or_add(l, name)) rc = l->n >= MAX_FILES ? 0 : -ENOMEM;
    }
    pl_trace_dir_free(&list);
    if (rc) return rc;
    for (size_t i = 0; i < l->n; i++) {
        if ((rc = follow(l, &l->procs[i]))) return rc;
        if (l->cancel && *l->cancel) return -EINTR;
    }
    return 0;
}

/* The process to show: the one with most steps; without steps, a running one with the largest RSS. */
static proc_t *shown(pl_live_t *l) {
    proc_t *best = NULL;
    for (size_t i = 0; i < l->n; i++) {
        proc_t *p = &l->procs[i];
        if (!p->started || p->earlier) continue;
        if (!best) {
            best = p;
            continue;
        }
        if (p->n_steps != best->n_steps) {
            if (p->n_steps > best->n_steps) best = p;
            continue;
        }
        if (!p->n_steps) {
            bool pa = !p->ended && !p->failed, ba = !best->ended && !best->failed;
            if (pa != ba) {
                if (pa) best = p;
                continue;
            }
            double pr = isfinite(p->last_rss) ? p->last_rss : 0, br = isfinite(best->last_rss) ? best->last_rss : 0;
            if (pr > br) best = p;
        }
    }
    return best;
}

static void judge(const pl_live_t *l, const bins_t *b, bool by_time, double limit, pl_live_mstatus_t *ms) {
    memset(ms, 0, sizeof *ms);
    ms->oom_seconds = NAN;
    if (!b->n) return;
    ms->present = true;
    ms->last = b->p[b->n - 1].base;
    pl_series_t s = {.points = b->p, .n_points = b->n, .by_time = by_time};
    if (by_time) s.bucket_ns = TIME_BUCKET_NS * b->width;
    s.peak = -INFINITY;
    for (size_t i = 0; i < b->n; i++)
        if (b->p[i].peak > s.peak) {
            s.peak = b->p[i].peak;
            s.peak_step = b->p[i].step;
        }
    /* a warmup the user declared (--warmup-steps N): only the steps after it are judged */
    size_t i0 = 0;
    if (!by_time && l->o.warmup_steps > 0) {
        while (i0 < b->n && b->p[i0].step <= l->o.warmup_steps) i0++;
        if (i0 == b->n) {
            ms->state = PL_LIVE_WARMING;
            ms->more_steps = l->o.warmup_steps - b->p[b->n - 1].step + 1;
            return;
        }
        s.points = b->p + i0;
        s.n_points = b->n - i0;
    }
    const pl_point_t *f = &b->p[i0], *z = &b->p[b->n - 1];
    if (b->n - i0 > 1 && z->step > f->step && z->t_ns > f->t_ns)
        s.step_ns = (double)(z->t_ns - f->t_ns) / (double)(z->step - f->step);
    if (by_time) s.step_ns = 1e9; /* bucket keys are seconds */
    pl_verdict_params_t vp;
    pl_verdict_params_default(&vp);
    vp.limit = limit;
    vp.max_points = CLASSIFY_POINTS;
    if (!by_time && l->o.warmup_steps > 0) vp.warmup_allow_steps = 0; /* the declared warmup replaces the presumed one */
    pl_verdict_t v;
    if (pl_verdict_classify(&s, &vp, &v)) return;
    ms->per_step = v.slope_per_step;
    ms->more_steps = v.more_steps;
    switch (v.kind) {
    case PL_VERDICT_FLAT: ms->state = PL_LIVE_FLAT; break;
    case PL_VERDICT_PLATEAU:
        ms->state = PL_LIVE_FLAT;
        ms->warmup_steps = v.warmup_steps;
        break;
    case PL_VERDICT_LEAK:
        ms->state = PL_LIVE_LEAK;
        ms->has_oom = v.has_oom;
        ms->oom_step = v.oom_step;
        ms->oom_seconds = v.oom_seconds;
        /* practical significance, as the report (docs/verdict.md section 8) */
        if (v.has_oom && isfinite(v.oom_seconds) && v.oom_seconds > l->o.slow_hours * 3600) ms->state = PL_LIVE_SLOW;
        else if (v.has_oom && !isfinite(v.oom_seconds) && v.oom_step - v.last_step > l->o.horizon_steps)
            ms->state = PL_LIVE_SLOW;
        else if (!v.has_oom && v.slope_per_step * (double)l->o.horizon_steps < fabs(v.level))
            ms->state = PL_LIVE_SLOW;
        break;
    case PL_VERDICT_INCONCLUSIVE:
    default:
        switch (v.undecided) {
        case PL_UNDECIDED_NO_DATA:
        case PL_UNDECIDED_WARMUP:
        case PL_UNDECIDED_SETTLING: ms->state = PL_LIVE_WARMING; break;
        default: { /* a short or noisy tail: growing at the threshold is a suspicion, anything else undecided */
            bool grows = v.slope_per_step >= v.threshold_per_step && v.slope_per_step > 0;
            /* growth whose regime began within the warmup allowance may still be the warmup (a real one lasted 90
             * steps: corpus seed003_run2) */
            bool early = v.tail_start_step - v.first_step < vp.warmup_allow_steps;
            ms->state = grows ? (early ? PL_LIVE_WARMING : PL_LIVE_SUSPECTED) : PL_LIVE_UNDECIDED;
            break;
        }
        }
        break;
    }
}

/* The run's counts (files, processes alive, ended) into out, cleared first. */
static void run_status(const pl_live_t *l, pl_live_status_t *out) {
    memset(out, 0, sizeof *out);
    out->state_metric = -1;
    out->rss_bytes = out->dev_bytes = NAN;
    out->rank = -1;
    out->n_files = l->n;
    size_t n_ended = 0;
    for (size_t i = 0; i < l->n; i++) {
        const proc_t *p = &l->procs[i];
        if (p->ended || p->failed) n_ended++;
        else if (p->started) out->n_alive++;
    }
    out->ended = l->status_file || (!l->o.status_from_now && l->n && n_ended == l->n);
}

/* Process p's part of the status: its series judged, its program state, its holder. */
static void proc_status(const pl_live_t *l, proc_t *p, pl_live_status_t *out) {
    out->have_proc = true;
    out->pid = p->pid;
    out->rank = p->rank;
    snprintf(out->name, sizeof out->name, "%s", p->name);
    snprintf(out->node, sizeof out->node, "%s", p->node);
    out->start_realtime_ns = p->start_realtime_ns;
    snprintf(out->exe, sizeof out->exe, "%s", p->exe ? p->exe : "");
    out->by_time = p->n_steps == 0;
    out->step = p->cur_step;
    out->rss_bytes = p->last_rss;
    out->dev_bytes = p->last_dev;
    const bins_t *hb = out->by_time ? &p->time[PL_LIVE_HEAP] : &p->step[PL_LIVE_HEAP];
    if (!out->by_time && hb->n > 1) {
        /* rate over the last (up to) 16 bins */
        const pl_point_t *a = &hb->p[hb->n > 16 ? hb->n - 16 : 0], *z = &hb->p[hb->n - 1];
        if (z->t_ns > a->t_ns) out->steps_per_s = (double)(z->step - a->step) * 1e9 / (double)(z->t_ns - a->t_ns);
    }
    for (int m = 0; m < PL_LIVE__COUNT; m++) {
        const bins_t *b = out->by_time ? &p->time[m] : &p->step[m];
        judge(l, b, out->by_time, m == PL_LIVE_DEV ? p->dev_limit : p->host_limit, &out->m[m]);
    }
    /* the program's state: its own memory, as the report's process verdict (RSS only without a live heap) */
    static const pl_live_state_t rank[] = {[PL_LIVE_NONE] = 0,      [PL_LIVE_FLAT] = 1,      [PL_LIVE_WARMING] = 2,
                                           [PL_LIVE_UNDECIDED] = 3, [PL_LIVE_SLOW] = 4,      [PL_LIVE_SUSPECTED] = 5,
                                           [PL_LIVE_LEAK] = 6};
    int prog[] = {PL_LIVE_HEAP, PL_LIVE_DEV, -1};
    if (!out->m[PL_LIVE_HEAP].present) prog[0] = PL_LIVE_RSS;
    for (int i = 0; prog[i] >= 0; i++) {
        pl_live_mstatus_t *ms = &out->m[prog[i]];
        ms->program = true;
        if (!ms->present) continue;
        if (out->state_metric < 0 || rank[ms->state] > rank[out->state]) {
            out->state = ms->state;
            out->state_metric = prog[i];
        }
    }
    /* who keeps it, once the census names a holder and the program's memory grows (never for a flat one) */
    if (p->ret && (out->state == PL_LIVE_LEAK || out->state == PL_LIVE_SLOW || out->state == PL_LIVE_SUSPECTED)) {
        pl_retention_judge(p->ret);
        if (p->ret->n_named) snprintf(out->holder, sizeof out->holder, "%s", p->ret->holders[0].path);
    }
}

int pl_live_status(pl_live_t *l, pl_live_status_t *out) {
    run_status(l, out);
    proc_t *p = shown(l);
    if (p) proc_status(l, p, out);
    return 0;
}

size_t pl_live_n_procs(const pl_live_t *l) { return l->n; }

int pl_live_status_of(pl_live_t *l, size_t i, pl_live_status_t *out) {
    if (i >= l->n) return -ENOENT;
    proc_t *p = &l->procs[i];
    /* ended helpers keep no series (proc_drop_series), an earlier run's processes are not this run's */
    if (!p->started || p->earlier || (!p->n_steps && (p->ended || p->failed))) return -ENOENT;
    run_status(l, out);
    proc_status(l, p, out);
    return 0;
}

const char *pl_live_state_name(pl_live_state_t s) {
    switch (s) {
    case PL_LIVE_WARMING: return "warming up";
    case PL_LIVE_FLAT: return "flat";
    case PL_LIVE_UNDECIDED: return "undecided";
    case PL_LIVE_SUSPECTED: return "leak suspected";
    case PL_LIVE_SLOW: return "slow growth";
    case PL_LIVE_LEAK: return "LEAK";
    case PL_LIVE_NONE:
    default: return "no data";
    }
}

static const char *const short_names[PL_LIVE__COUNT] = {"heap", "rss", "dev"};

/* One metric's part of the line: "heap: LEAK +64.0 KiB/step, OOM in ~62 min". */
static void format_metric(const pl_live_status_t *s, int m, char *buf, size_t n) {
    const pl_live_mstatus_t *ms = &s->m[m];
    char a[32], b[32];
    size_t off = 0;
    buf[0] = 0;
#define ADD(...)                                                              \
    do {                                                                      \
        if (off < n) {                                                        \
            int w_ = snprintf(buf + off, n - off, __VA_ARGS__);               \
            off = w_ < 0 ? n : (off + (size_t)w_ >= n ? n : off + (size_t)w_); \
        }                                                                     \
    } while (0)
    /* a growing RSS beside a recorded live heap is not the program's leak: said as the report does */
    bool grows = !ms->program && (ms->state == PL_LIVE_LEAK || ms->state == PL_LIVE_SUSPECTED);
    ADD("%s: %s", short_names[m], grows ? "grows" : pl_live_state_name(ms->state));
    const char *unit = s->by_time ? "s" : "step";
    switch (ms->state) {
    case PL_LIVE_LEAK:
    case PL_LIVE_SLOW:
    case PL_LIVE_SUSPECTED:
        ADD(" %s%s/%s", ms->per_step >= 0 ? "+" : "", pl_format_bytes(ms->per_step, a, sizeof a), unit);
        if (ms->has_oom) {
            if (isfinite(ms->oom_seconds)) ADD(", OOM in ~%s", pl_format_duration(ms->oom_seconds, b, sizeof b));
            else if (s->by_time) ADD(", OOM ~%s into the run", pl_format_duration((double)ms->oom_step, b, sizeof b));
            else ADD(", OOM at step %lld", (long long)ms->oom_step);
        }
        break;
    case PL_LIVE_WARMING:
        /* by time, the series' keys are seconds: "(~40 s more)", never "(40 more ss)" */
        if (ms->more_steps > 0 && s->by_time)
            ADD(" (~%s more)", pl_format_duration((double)ms->more_steps, b, sizeof b));
        else if (ms->more_steps > 0)
            ADD(" (%lld more step%s)", (long long)ms->more_steps, ms->more_steps == 1 ? "" : "s");
        break;
    case PL_LIVE_FLAT:
        if (ms->warmup_steps > 0 && s->by_time)
            ADD(" after %s of warmup", pl_format_duration((double)ms->warmup_steps, b, sizeof b));
        else if (ms->warmup_steps > 0)
            ADD(" after %lld warmup step%s", (long long)ms->warmup_steps, ms->warmup_steps == 1 ? "" : "s");
        break;
    default: break;
    }
#undef ADD
}

/* In the report's verdict order: who, then the program's state with its rate, OOM and holder (the metric that
 * decided it), then the context (step, rate, memory), then the other metrics. */
void pl_live_format(const pl_live_status_t *s, char *buf, size_t n) {
    if (!n) return;
    buf[0] = 0;
    size_t off = 0;
#define ADD(...)                                                              \
    do {                                                                      \
        if (off < n) {                                                        \
            int w_ = snprintf(buf + off, n - off, __VA_ARGS__);               \
            off = w_ < 0 ? n : (off + (size_t)w_ >= n ? n : off + (size_t)w_); \
        }                                                                     \
    } while (0)
    if (!s->have_proc) {
        ADD("waiting for traces (%zu file%s)", s->n_files, s->n_files == 1 ? "" : "s");
        return;
    }
    char a[32], part[160];
    ADD("pid %u %s", s->pid, pl_format_esc(s->name)); /* argv[0] is the program's to choose: never raw on a tty */
    int first = s->state_metric >= 0 && s->state_metric < PL_LIVE__COUNT && s->m[s->state_metric].present
                    ? s->state_metric : -1;
    if (first >= 0) {
        format_metric(s, first, part, sizeof part);
        ADD("  %s", part);
    }
    if (s->holder[0]) ADD("  kept by `%s`", s->holder);
    if (s->by_time) ADD("  no steps");
    else {
        ADD("  step %lld", (long long)s->step);
        if (s->steps_per_s > 0) ADD(" (%.3g/s)", s->steps_per_s);
    }
    if (isfinite(s->rss_bytes)) ADD("  rss %s", pl_format_bytes(s->rss_bytes, a, sizeof a));
    if (isfinite(s->dev_bytes)) ADD("  dev %s", pl_format_bytes(s->dev_bytes, a, sizeof a));
    for (int m = 0; m < PL_LIVE__COUNT; m++) {
        if (!s->m[m].present || m == first) continue;
        format_metric(s, m, part, sizeof part);
        ADD("  %s", part);
    }
    if (s->ended) ADD("  [run ended]");
#undef ADD
}

uint64_t pl_live_bytes_read(const pl_live_t *l) { return l->bytes_read; }

size_t pl_live_bytes_held(const pl_live_t *l) {
    size_t b = sizeof *l + l->cap * sizeof *l->procs;
    for (size_t i = 0; i < l->n; i++) {
        if (l->procs[i].exe) b += strlen(l->procs[i].exe) + 1;
        for (int m = 0; m < PL_LIVE__COUNT; m++)
            b += (l->procs[i].step[m].cap + l->procs[i].time[m].cap) * sizeof(pl_point_t);
    }
    return b;
}
