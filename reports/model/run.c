/* reports/run: the run model and the assembly of a run from its processes (see run.h for the contract).
 *
 * Invariants: every ext->procs[i].proc is its process image's row in report (owned by the report); pool and
 * generation rows come after the process images' rows and have no ext entry. Roles and cut-short are recomputed
 * from the whole process table each time, never patched per trace.
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* Processes are keyed by (node, pid): the nodes of a merged multi-node run reuse each other's pids. */
static bool same_node(const pl_extract_proc_t *a, const pl_extract_proc_t *b) { return !strcmp(a->node, b->node); }

/* Is up an image of p's parent process? (A pid that exec'd has several images.) */
static bool parent_image(const pl_extract_proc_t *up, const pl_extract_proc_t *p) {
    return up != p && up->pid == p->ppid && same_node(up, p);
}

/* Is p the run's root (no other process image read is its parent)? Children of a traced process commonly end
 * without an end record (_exit in fork servers and dataloader workers, killed at shutdown), so only a root without
 * one, or any damaged trace, makes the run "cut short". */
static bool is_root(const pl_extract_t *x, const pl_extract_proc_t *p) {
    for (size_t i = 0; i < x->n_procs; i++)
        if (parent_image(&x->procs[i], p)) return false;
    return true;
}

/* Roles (docs/verdict.md §8): the processes that step are the main ones (but a worker whose own loop period
 * detection found: loop_of_worker); when none steps, those that live at least half as long as the longest-lived
 * one. Every other process (DataLoader workers, helpers, shims) is a worker, judged as a group and folded into one
 * line when nothing of it grows. */
static int64_t span_of(const pl_report_process_t *p) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        const pl_series_t *s = &p->metrics[m].series;
        if (!p->metrics[m].present || !s->n_points) continue;
        int64_t a = s->points[0].t_ns, b = s->points[s->n_points - 1].t_ns;
        if (s->by_time) {
            a = s->points[0].step * s->bucket_ns;
            b = (s->points[s->n_points - 1].step + 1) * s->bucket_ns;
        }
        if (a >= 0 && a < lo) lo = a;
        if (b >= 0 && b > hi) hi = b;
    }
    return hi > lo ? hi - lo : 0;
}

/* The peak RSS that tells a short helper from a worker (docs/verdict.md, "Short helpers"): p's own, or, when p has
 * no RSS sample and is a fork of its parent that never exec'd (the same command line: a DataLoader worker that ended
 * with os._exit before the sampler's first read), its parent's, whose pages it was made of; NAN when unknown. */
static double helper_rss_peak(const pl_extract_t *x, const pl_extract_proc_t *p) {
    const pl_report_metric_t *rss = &p->proc->metrics[PL_METRIC_RSS];
    if (rss->present && rss->series.n_points) return rss->series.peak;
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *up = &x->procs[i];
        if (!parent_image(up, p) || strcmp(up->cmdline, p->cmdline)) continue;
        const pl_report_metric_t *ur = &up->proc->metrics[PL_METRIC_RSS];
        if (ur->present && ur->series.n_points) return ur->series.peak;
    }
    return NAN;
}

/* The live heap a worker forked from a process of the run without exec (the same command line: a DataLoader worker)
 * started with: the tracer's counts are inherited at fork, so its first heap.bytes point is its parent's heap, the
 * pages it may copy as it reads them (copy-on-access, reports/diagnosis.c). 0 when p is no such fork, or when its PSS
 * can move for another reason (below). */
static double forked_heap(const pl_extract_t *x, const pl_extract_proc_t *p) {
    const pl_report_metric_t *h = &p->proc->metrics[PL_METRIC_HEAP_BYTES];
    if (!h->present || !h->series.n_points) return 0;
    /* A sibling (another child of the same parent: a validation loader's worker) that starts or ends while p lives
     * shared the parent's pages with p too, so p's PSS moves when it comes and goes, copy or not: no such claim then.
     * Siblings forked with p (within 1 s) and ending with it (persistent workers of one loader) do not. */
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *q = &x->procs[i];
        if (q == p || q->ppid != p->ppid || !same_node(q, p)) continue;
        bool starts = q->t0_ns > p->t0_ns + 1000000000LL && q->t0_ns < p->last_ns;
        bool ends = q->last_ns > p->t0_ns && q->last_ns < p->last_ns - 1000000000LL;
        if (starts || ends) return 0;
    }
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *up = &x->procs[i];
        if (parent_image(up, p) && !strcmp(up->cmdline, p->cmdline))
            return h->series.points[0].base > 0 ? h->series.points[0].base : 0;
    }
    return 0;
}

static bool descends(const pl_extract_t *x, const pl_extract_proc_t *w, uint32_t pid) {
    uint32_t pp = w->ppid;
    for (size_t hops = 0; hops < x->n_procs; hops++) {
        if (pp == pid) return true;
        const pl_extract_proc_t *up = NULL;
        for (size_t i = 0; i < x->n_procs && !up; i++)
            if (x->procs[i].pid == pp && same_node(&x->procs[i], w)) up = &x->procs[i];
        if (!up) return false;
        pp = up->ppid;
    }
    return false;
}

/* Steps that period detection found in a descendant of a process that steps are a DataLoader worker's loop (it
 * makes its trainer's batches, one per trainer step): the process stays a worker, judged with its siblings in its
 * trainer's pool on the trainer's steps (docs/verdict.md §8). Whether such a loop is found depends on timing (on
 * tests/targets/torch_cow.py --leak, in some runs and not in others); the verdict must not. */
static bool loop_of_worker(const pl_extract_t *x, const pl_extract_proc_t *p) {
    if (!p->steps_auto) return false;
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *q = &x->procs[i];
        if (q != p && q->n_steps && same_node(q, p) && descends(x, p, q->pid)) return true;
    }
    return false;
}

static void update_roles(pl_extract_t *x) {
    bool any_steps = false;
    int64_t longest = 0;
    for (size_t i = 0; i < x->n_procs; i++) {
        any_steps |= x->procs[i].n_steps > 0;
        int64_t sp = span_of(x->procs[i].proc);
        if (sp > longest) longest = sp;
    }
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *p = &x->procs[i];
        bool main_proc = any_steps ? p->n_steps > 0 && !loop_of_worker(x, p) : 2 * span_of(p->proc) >= longest;
        p->proc->role = main_proc ? PL_ROLE_MAIN : PL_ROLE_WORKER;
        p->proc->helper = !main_proc && !p->n_steps && p->last_ns - p->t0_ns < PL_EXTRACT_HELPER_NS &&
                          !(helper_rss_peak(x, p) >= PL_EXTRACT_HELPER_RSS_BYTES);
        p->proc->forked_heap_bytes = main_proc ? 0 : forked_heap(x, p);
        p->proc->pool_pid = 0; /* set again by build_pools */
    }
}

static int cmp_proc(const void *a, const void *b) {
    const pl_extract_proc_t *p = a, *q = b;
    int nc = strcmp(p->node, q->node); /* CLOCK_MONOTONIC of different hosts cannot be compared: node by node */
    if (nc) return nc < 0 ? -1 : 1;
    if (p->t0_ns != q->t0_ns) return p->t0_ns < q->t0_ns ? -1 : 1; /* started first (pids wrap around) */
    if (p->pid != q->pid) return p->pid < q->pid ? -1 : 1;
    return p->exec_seq < q->exec_seq ? -1 : p->exec_seq > q->exec_seq;
}

/* Processes in the order they started (trace start time), then by pid numerically (file names sort 10000 before
 * 9999, and pids wrap around: the trainer must come first), the report's rows in the same order. A merged multi-node
 * run is ordered node by node (by host name): start times of different hosts' monotonic clocks do not compare. */
static void sort_procs(pl_report_t *r, pl_extract_t *x) {
    if (x->n_procs < 2 || x->n_procs != r->n_procs) return; /* other front ends' rows: keep their order */
    qsort(x->procs, x->n_procs, sizeof *x->procs, cmp_proc);
    for (size_t i = 0; i < x->n_procs; i++) r->procs[i] = x->procs[i].proc;
}

/* DIR/run.status into x: one line per run ("pid P signal N" / "pid P exit N", cli/run.c); malformed lines are
 * skipped, the last PL_EXTRACT_MAX_STATUS kept. Only a regular file is read, opened without following a link or
 * waiting on a FIFO planted there (a FIFO would block the report for good). */
static void read_status(pl_extract_t *x, const char *dir) {
    char path[4096];
    x->n_status = 0;
    if (snprintf(path, sizeof path, "%s/run.status", dir) >= (int)sizeof path) return;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    struct stat sb;
    FILE *f = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? fdopen(fd, "r") : NULL;
    if (!f) {
        close(fd);
        return;
    }
    char line[128];
    while (fgets(line, sizeof line, f)) {
        unsigned pid;
        char what[16];
        int v;
        if (sscanf(line, "pid %u %15s %d", &pid, what, &v) != 3 || v < 0 || v >= 256 ||
            (strcmp(what, "signal") && strcmp(what, "exit")))
            continue;
        if (x->n_status == PL_EXTRACT_MAX_STATUS) { /* keep the last ones */
            memmove(&x->status[0], &x->status[1], sizeof x->status[0] * (PL_EXTRACT_MAX_STATUS - 1));
            x->n_status--;
        }
        pl_extract_status_t *st = &x->status[x->n_status];
        st->pid = pid;
        st->signal = !strcmp(what, "signal") ? v : 0;
        st->exit = !strcmp(what, "exit") ? v : 0;
        st->oom_kill = st->host_oom_kill = -1; /* " oom_kill N host_oom_kill M" follow when plateau run read them */
        const char *o = strstr(line, " oom_kill ");
        long n;
        if (o && sscanf(o, " oom_kill %ld", &n) == 1 && n >= 0) st->oom_kill = n;
        if ((o = strstr(line, " host_oom_kill ")) && sscanf(o, " host_oom_kill %ld", &n) == 1 && n >= 0)
            st->host_oom_kill = n;
        x->n_status++;
    }
    fclose(f);
}

const pl_extract_status_t *pl_run_status_of(const pl_extract_t *x, uint32_t pid) {
    for (size_t i = x->n_status; i-- > 0;)
        if (x->status[i].pid == pid) return &x->status[i];
    return NULL;
}

/* ---- worker pools (docs/verdict.md §8) ----
 * The long-lived workers of a stepping process (DataLoader workers with persistent_workers) are judged together on
 * that process's steps: their live heaps (time buckets, or the steps of a worker's own loop) are summed at each of
 * its steps (the traces share CLOCK_MONOTONIC) into one more row, role worker, n_pool = how many; each member's
 * pool_pid names the trainer. Only workers alive over at least 80 % of the trainer's steps (from the end
 * of its first step: that point also holds the start-up before its loop) take part,
 * and only the steps at which all of them are alive are used: short-lived workers (validation loaders) would add and
 * remove whole processes, a sawtooth wider than a step; they are judged one by one. */

/* absolute [lo, hi) of a series by time, or of a series by step (first/last point times) */
static void abs_span(const pl_extract_proc_t *p, const pl_series_t *s, int64_t *lo, int64_t *hi) {
    if (s->by_time) {
        *lo = p->t0_ns + s->points[0].step * s->bucket_ns;
        *hi = p->t0_ns + (s->points[s->n_points - 1].step + 1) * s->bucket_ns;
    } else {
        *lo = p->t0_ns + s->points[0].t_ns;
        *hi = p->t0_ns + s->points[s->n_points - 1].t_ns + 1;
    }
}

/* The absolute span of a worker's live heap: a series by step (its own loop, found by period detection) runs from
 * its first step to the worker's last record, its last step's point standing for the rest of its life. */
static void member_span(const pl_extract_proc_t *w, const pl_series_t *s, int64_t *lo, int64_t *hi) {
    abs_span(w, s, lo, hi);
    if (!s->by_time && w->last_ns >= *hi) *hi = w->last_ns + 1;
}

/* baseline of a worker's series at absolute time t: the time bucket, or the step in progress (the last one that
 * started at or before t), holding it; NAN outside the series */
static double value_at(const pl_extract_proc_t *p, const pl_series_t *s, int64_t t) {
    int64_t lo, hi;
    member_span(p, s, &lo, &hi);
    if (t < lo || t >= hi) return NAN;
    size_t a = 0, z = s->n_points; /* last point with key <= b */
    int64_t b = s->by_time ? (t - p->t0_ns) / s->bucket_ns : t - p->t0_ns;
    while (z - a > 1) {
        size_t m = (a + z) / 2;
        if ((s->by_time ? s->points[m].step : s->points[m].t_ns) <= b) a = m;
        else z = m;
    }
    return s->points[a].base;
}

/* A process that steps, with its live heap by step: a trainer whose workers can be judged on its steps. */
static bool heap_trainer(const pl_extract_proc_t *tr) {
    const pl_report_metric_t *m = &tr->proc->metrics[PL_METRIC_HEAP_BYTES];
    return tr->n_steps && m->present && !m->series.by_time && m->series.n_points >= 2;
}

/* Does a worker's series say when each point began: time buckets, or steps (its loop) whose times are all known? */
static bool timed(const pl_series_t *s) {
    if (s->by_time) return s->bucket_ns > 0;
    for (size_t i = 0; i < s->n_points; i++)
        if (s->points[i].t_ns < 0 || (i && s->points[i].t_ns < s->points[i - 1].t_ns)) return false;
    return true;
}

/* A worker of trainer tr with a timed live heap (time buckets, or its own loop's steps) that descends from it and is
 * not a helper. */
static bool heap_worker_of(const pl_extract_t *x, const pl_extract_proc_t *tr, const pl_extract_proc_t *w) {
    const pl_report_metric_t *wm = &w->proc->metrics[PL_METRIC_HEAP_BYTES];
    return w->proc->role == PL_ROLE_WORKER && !w->proc->helper && wm->present && wm->series.n_points &&
           timed(&wm->series) && same_node(w, tr) && descends(x, w, tr->pid);
}

/* A member of tr's pool: a worker alive over at least 80 % of [tlo, thi), the trainer's steps. */
static bool pool_member(const pl_extract_t *x, const pl_extract_proc_t *tr, int64_t tlo, int64_t thi,
                        const pl_extract_proc_t *w) {
    if (!heap_worker_of(x, tr, w)) return false;
    int64_t lo, hi;
    member_span(w, &w->proc->metrics[PL_METRIC_HEAP_BYTES].series, &lo, &hi);
    int64_t lo2 = lo > tlo ? lo : tlo, hi2 = hi < thi ? hi : thi;
    return hi2 > lo2 && (double)(hi2 - lo2) >= 0.8 * (double)(thi - tlo);
}

static int build_pools(pl_report_t *r, pl_extract_t *x) {
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *tr = &x->procs[i];
        const pl_series_t *ts = &tr->proc->metrics[PL_METRIC_HEAP_BYTES].series;
        if (!heap_trainer(tr)) continue;
        int64_t tlo, thi;
        abs_span(tr, ts, &tlo, &thi);
        /* its steps: from the end of the first one, whose point also spans the start-up before the loop (imports,
         * a dataset built in Python), which persistent workers forked when the loop starts do not live through */
        if (ts->n_points > 2 && ts->points[1].t_ns >= 0) tlo = tr->t0_ns + ts->points[1].t_ns;
        const pl_extract_proc_t *mem[64];
        size_t n = 0;
        for (size_t j = 0; j < x->n_procs && n < 64; j++)
            if (pool_member(x, tr, tlo, thi, &x->procs[j])) mem[n++] = &x->procs[j];
        if (!n) continue;
        pl_sample_t *smp = malloc(ts->n_points * sizeof *smp);
        if (!smp) return -ENOMEM;
        size_t k = 0;
        for (size_t q = 0; q < ts->n_points; q++) {
            if (ts->points[q].t_ns < 0) continue;
            int64_t t = tr->t0_ns + ts->points[q].t_ns;
            double sum = 0;
            for (size_t j = 0; j < n && isfinite(sum); j++)
                sum += value_at(mem[j], &mem[j]->proc->metrics[PL_METRIC_HEAP_BYTES].series, t);
            if (isfinite(sum)) smp[k++] = (pl_sample_t){ts->points[q].step, ts->points[q].t_ns, sum};
        }
        /* its name is the analysis's (pl_run_name_rows): the model writes no English */
        pl_report_process_t *row = k ? pl_report_add_process(r, tr->pid, -1, NULL) : NULL;
        int rc = k && !row ? -ENOMEM : 0;
        if (row) {
            row->role = PL_ROLE_WORKER;
            row->n_pool = n;
            snprintf(row->node, sizeof row->node, "%s", tr->proc->node);
            for (size_t j = 0; j < n; j++) mem[j]->proc->pool_pid = tr->pid;
            rc = pl_report_set_samples(row, PL_METRIC_HEAP_BYTES, smp, k, NULL);
        }
        free(smp);
        if (rc) return rc;
    }
    return 0;
}

/* ---- generations of short-lived workers (docs/verdict.md §8) ----
 * The workers of one trainer that are not in its pool (a validation loader's, started at each pass and gone after
 * it) are grouped into generations: children of the trainer that start within GEN_WINDOW_NS of the generation's
 * first one and before any of its members ended. Generations of equal size are one loader's: each such series of at
 * least 2 generations becomes one more row (role worker, n_gen > 0), one point per generation at the trainer's step
 * when it started, valued at the live heap its workers added over what they inherited; reports/generations.c judges
 * it. The workers keep their own rows (folded when quiet). */
#define GEN_WINDOW_NS 2000000000LL
#define GEN_MAX_WORKERS 4096

typedef struct genw {
    const pl_extract_proc_t *w;
    size_t gen;     /* generation index, in start order */
} genw_t;

typedef struct gen {
    size_t n;       /* workers */
    int64_t step;   /* the trainer's step when the first one started */
    int64_t t_ns;   /* that start, relative to the trainer's trace start */
    double bytes;   /* live heap the workers added over what they inherited, summed */
} gen_t;

static int cmp_genw(const void *a, const void *b) {
    const pl_extract_proc_t *p = ((const genw_t *)a)->w, *q = ((const genw_t *)b)->w;
    if (p->t0_ns != q->t0_ns) return p->t0_ns < q->t0_ns ? -1 : 1;
    return p->pid < q->pid ? -1 : p->pid > q->pid;
}

/* The trainer's baseline and step at absolute time t: its last step that started at or before t (its first step
 * when t is earlier). */
static double trainer_at(const pl_extract_proc_t *tr, const pl_series_t *ts, int64_t t, int64_t *step) {
    size_t k = 0;
    for (size_t i = 0; i < ts->n_points; i++)
        if (ts->points[i].t_ns >= 0 && tr->t0_ns + ts->points[i].t_ns <= t) k = i;
    *step = ts->points[k].step;
    return ts->points[k].base;
}

/* What a worker added over what it inherited: its peak live heap, less its parent's baseline when it started if its
 * first bucket shows that heap (a forked worker inherits its parent's heap and the tracer's counts; a spawned one
 * starts from nothing). A trainer's own leak then stays the trainer's, not its validation workers'. */
static double own_bytes(const pl_extract_proc_t *w, double parent_base) {
    const pl_series_t *s = &w->proc->metrics[PL_METRIC_HEAP_BYTES].series;
    bool inherited = parent_base > 0 && s->points[0].base >= 0.5 * parent_base;
    return s->peak - (inherited ? parent_base : 0);
}

static int gen_row(pl_report_t *r, const pl_extract_proc_t *tr, const gen_t *g, size_t n_g, size_t size) {
    pl_sample_t *smp = malloc(n_g * sizeof *smp);
    int64_t *gap = malloc(n_g * sizeof *gap);
    if (!smp || !gap) {
        free(smp);
        free(gap);
        return -ENOMEM;
    }
    size_t k = 0, n_gap = 0, n_workers = 0;
    for (size_t i = 0; i < n_g; i++) {
        if (g[i].n != size) continue;
        if (k) gap[n_gap++] = g[i].step - smp[k - 1].step;
        smp[k++] = (pl_sample_t){g[i].step, g[i].t_ns, g[i].bytes};
        n_workers += g[i].n;
    }
    int rc = 0;
    if (k >= 2) {
        for (size_t i = 1; i < n_gap; i++) /* insertion sort: the median gap */
            for (size_t j = i; j > 0 && gap[j] < gap[j - 1]; j--) {
                int64_t t = gap[j];
                gap[j] = gap[j - 1];
                gap[j - 1] = t;
            }
        pl_report_process_t *row = pl_report_add_process(r, tr->pid, -1, NULL); /* named by pl_run_name_rows */
        if (!row) rc = -ENOMEM;
        if (row) {
            row->role = PL_ROLE_WORKER;
            row->n_gen = k;
            row->n_gen_workers = n_workers;
            row->gen_every_steps = n_gap ? gap[n_gap / 2] : 0;
            rc = pl_report_set_samples(row, PL_METRIC_HEAP_BYTES, smp, k, NULL);
        }
    }
    free(smp);
    free(gap);
    return rc;
}

static int build_generations_of(pl_report_t *r, pl_extract_t *x, const pl_extract_proc_t *tr) {
    const pl_series_t *ts = &tr->proc->metrics[PL_METRIC_HEAP_BYTES].series;
    int64_t tlo, thi;
    abs_span(tr, ts, &tlo, &thi);
    genw_t *c = malloc((x->n_procs ? x->n_procs : 1) * sizeof *c);
    gen_t *g = malloc((x->n_procs ? x->n_procs : 1) * sizeof *g);
    if (!c || !g) {
        free(c);
        free(g);
        return -ENOMEM;
    }
    size_t n = 0, n_g = 0;
    for (size_t j = 0; j < x->n_procs && n < GEN_MAX_WORKERS; j++) {
        const pl_extract_proc_t *w = &x->procs[j];
        if (w->ppid == tr->pid && heap_worker_of(x, tr, w) && !pool_member(x, tr, tlo, thi, w) && w->t0_ns >= tlo &&
            (w->t0_ns < thi || w->t0_ns <= tr->last_ns)) /* a pass after the last step is the trainer's too */
            c[n++] = (genw_t){w, 0};
    }
    qsort(c, n, sizeof *c, cmp_genw);
    int64_t first = 0, min_end = 0;
    for (size_t i = 0; i < n; i++) {
        const pl_extract_proc_t *w = c[i].w;
        int64_t end = w->last_ns > w->t0_ns ? w->last_ns : w->t0_ns;
        if (!n_g || w->t0_ns - first > GEN_WINDOW_NS || w->t0_ns >= min_end) { /* a new generation */
            first = w->t0_ns;
            min_end = end;
            g[n_g] = (gen_t){0};
            trainer_at(tr, ts, w->t0_ns, &g[n_g].step);
            g[n_g].t_ns = w->t0_ns - tr->t0_ns;
            n_g++;
        }
        if (end < min_end) min_end = end;
        int64_t st;
        g[n_g - 1].n++;
        g[n_g - 1].bytes += own_bytes(w, trainer_at(tr, ts, w->t0_ns, &st));
        c[i].gen = n_g - 1;
    }
    int rc = 0;
    for (size_t i = 0; i < n_g && !rc; i++) { /* one row per generation size, in order of first appearance */
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = g[j].n == g[i].n;
        if (!seen) rc = gen_row(r, tr, g, n_g, g[i].n);
    }
    free(c);
    free(g);
    return rc;
}

static int build_generations(pl_report_t *r, pl_extract_t *x) {
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *tr = &x->procs[i];
        if (!heap_trainer(tr)) continue;
        int rc = build_generations_of(r, x, tr);
        if (rc) return rc;
    }
    return 0;
}

void pl_run_update_cut_short(pl_report_t *r, pl_extract_t *x) {
    update_roles(x);
    r->cut_short = false;
    r->cut_reason[0] = 0; /* the analysis says why (pl_run_cut_reason) */
    x->n_cut_short = 0;
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *p = &x->procs[i];
        if (!p->damaged && (p->clean_end || !is_root(x, p))) continue;
        x->n_cut_short++;
        if (r->cut_short) continue;
        r->cut_short = true;
        x->cut_proc = i;
    }
}

/* The process verdict (diagnosis.c), not "any metric": allocator retention, file pages and PSS never leak. */
static bool proc_leaks(const pl_report_process_t *p) { return p->verdict.kind == PL_PV_LEAK; }

long pl_run_leaking(const pl_extract_t *x, size_t *n_leaking) {
    long first = -1;
    size_t n = 0;
    for (size_t i = 0; x && i < x->n_procs; i++)
        if (proc_leaks(x->procs[i].proc)) {
            if (first < 0) first = (long)i;
            n++;
        }
    if (n_leaking) *n_leaking = n;
    return first;
}

double pl_run_last_base(const pl_report_process_t *p, pl_metric_t m) {
    const pl_series_t *s = &p->metrics[m].series;
    return p->metrics[m].present && s->n_points ? s->points[s->n_points - 1].base : NAN;
}

double pl_run_total_last(const pl_extract_t *x, pl_metric_t m, size_t *n_with) {
    double t = 0;
    size_t n = 0;
    for (size_t i = 0; x && i < x->n_procs; i++) {
        double v = pl_run_last_base(x->procs[i].proc, m);
        if (isfinite(v)) t += v, n++;
    }
    if (n_with) *n_with = n;
    return t;
}

void pl_run_totals(const pl_extract_t *x, pl_run_totals_t *t) {
    t->pss_bytes = pl_run_total_last(x, PL_METRIC_PSS, &t->n_pss);
    t->rss_bytes = pl_run_total_last(x, PL_METRIC_RSS, NULL);
    t->n_procs = x ? x->n_procs : 0;
    t->kind = t->n_pss == t->n_procs ? PL_TOTALS_PSS : t->n_pss == 0 ? PL_TOTALS_RSS : PL_TOTALS_PSS_SOME;
}

bool pl_run_crosscheck_agrees(const pl_extract_proc_t *p) {
    return p->n_hook_dev_allocs == p->n_cupti_dev_allocs && p->hook_dev_alloc_bytes == p->cupti_dev_alloc_bytes;
}

static const char *kind_names[PL_END__COUNT] = {"clean", "exit-status", "memory-error", "cuda-oom", "oom-kill",
                                                "sigkill", "crash", "signal", "no-end-record", "running"};

const char *pl_end_kind_name(pl_end_kind_t k) { return (unsigned)k < PL_END__COUNT ? kind_names[k] : "?"; }

pl_window_fit_t pl_window_fit(const pl_extract_proc_t *p) {
    return p && p->window ? p->window->fit : PL_WINDOW_NONE;
}

static bool dev_metric(int m) {
    return m == PL_METRIC_DEV_TENSORS || m == PL_METRIC_DEV_ALLOCATED || m == PL_METRIC_DEV_RESERVED;
}

/* Did the process run Python: the bootstrap's census, or a host site with Python frames? */
static bool runs_python(const pl_extract_proc_t *p) {
    if (p->retention) return true;
    for (size_t j = 0; j < p->n_sites; j++)
        if (p->sites[j].py_name) return true;
    return false;
}

bool pl_run_sites(const pl_extract_proc_t *p, pl_run_sites_t *v) {
    *v = (pl_run_sites_t){.metric = p->site_metric, .since = p->site_tail_step, .n = p->n_sites, .sites = p->sites};
    const pl_proc_verdict_t *pv = p->proc ? &p->proc->verdict : NULL;
    if (!p->dev_sites || !pv || (pv->kind != PL_PV_LEAK && pv->kind != PL_PV_SLOW_GROWTH) || !dev_metric(pv->metric))
        return false;
    for (size_t i = 0; i < p->dev_sites->n_lists; i++) {
        const pl_extract_dev_list_t *l = &p->dev_sites->lists[i];
        if (!(l->metrics & (1u << pv->metric))) continue;
        *v = (pl_run_sites_t){.device = true, .metric = pl_metric_name((pl_metric_t)pv->metric), .since = l->since,
                              .n = l->n_sites, .sites = l->sites, .dev = l, .python = runs_python(p)};
        return true;
    }
    return false;
}

/* ---- the model's lifecycle (the process table lives here, beside the run, so renderers link without the
 * tracer) ---- */

void pl_extract_init(pl_extract_t *x) { memset(x, 0, sizeof *x); }

static void free_sites(pl_extract_site_t *sites, size_t n) {
    for (size_t j = 0; j < n; j++) {
        pl_extract_site_t *st = &sites[j];
        for (size_t f = 0; f < st->n_frames; f++) free(st->frames[f]);
        for (size_t f = 0; f < st->n_py; f++) {
            free(st->py_frames[f]);
            free(st->py_short[f]);
        }
        free(st->py_name);
        free(st->py_file);
        free(st->py_source);
    }
}

static void free_window(pl_extract_window_t *w) {
    if (!w) return;
    free_sites(w->sites, w->n_sites);
    free_sites(w->live, w->n_live);
    free(w);
}

void pl_extract_free(pl_extract_t *x) {
    if (!x) return;
    for (size_t i = 0; i < x->n_procs; i++) {
        free_sites(x->procs[i].sites, x->procs[i].n_sites);
        for (size_t k = 0; x->procs[i].dev_sites && k < x->procs[i].dev_sites->n_lists; k++)
            free_sites(x->procs[i].dev_sites->lists[k].sites, x->procs[i].dev_sites->lists[k].n_sites);
        free(x->procs[i].dev_sites);
        free_window(x->procs[i].window);
        free_window(x->procs[i].end);
        pl_retention_free(x->procs[i].retention);
        free(x->procs[i].retention);
    }
    free(x->procs);
    memset(x, 0, sizeof *x);
}

int pl_run_create(pl_run_t *run, const char *source) {
    memset(run, 0, sizeof *run);
    run->report = pl_report_create(source);
    run->ext = calloc(1, sizeof *run->ext);
    if (!run->report || !run->ext) {
        pl_run_destroy(run);
        return -ENOMEM;
    }
    return 0;
}

void pl_run_destroy(pl_run_t *run) {
    if (!run) return;
    pl_extract_free(run->ext);
    free(run->ext);
    if (run->report) pl_report_destroy(run->report);
    memset(run, 0, sizeof *run);
}

int pl_run_assemble(pl_report_t *r, pl_extract_t *x, const char *status_dir) {
    if (status_dir) read_status(x, status_dir);
    sort_procs(r, x);
    pl_run_update_cut_short(r, x);
    int rc = build_pools(r, x);
    return rc ? rc : build_generations(r, x);
}

/* ---- the view: which rows are folded, and why (run.h) ---- */

static pl_fold_t fold_of(const pl_report_process_t *p) {
    if (!pl_report_quiet_worker(p)) return PL_FOLD_NONE;
    if (p->n_pool) return PL_FOLD_POOL;
    if (p->n_gen) return PL_FOLD_GENERATIONS;
    return p->helper ? PL_FOLD_HELPER : PL_FOLD_WORKER;
}

void pl_run_view_free(pl_run_view_t *v) {
    if (!v) return;
    free(v->fold);
    free(v->damaged);
    free(v->looped);
    free(v->row_of);
    free(v->ext_of);
    free(v->rank_rows);
    memset(v, 0, sizeof *v);
}

/* The rank rows by rank, then node, then row (an insertion: ranks are few). */
static void rank_order(const pl_report_t *r, pl_run_view_t *v) {
    for (size_t i = 0; i < v->n_rows; i++) {
        const pl_report_process_t *b = r->procs[i];
        if (!pl_report_is_rank(b)) continue;
        size_t j = v->n_ranks++;
        for (; j > 0; j--) {
            const pl_report_process_t *a = r->procs[v->rank_rows[j - 1]];
            if (a->rank < b->rank || (a->rank == b->rank && strcmp(a->node, b->node) <= 0)) break;
            v->rank_rows[j] = v->rank_rows[j - 1];
        }
        v->rank_rows[j] = i;
    }
}

int pl_run_view_make(const pl_report_t *r, const pl_extract_t *x, pl_run_view_t *v) {
    memset(v, 0, sizeof *v);
    v->n_rows = r ? r->n_procs : 0;
    v->n_ext = x ? x->n_procs : 0;
    v->fold = calloc(v->n_rows ? v->n_rows : 1, sizeof *v->fold);
    v->damaged = calloc(v->n_rows ? v->n_rows : 1, sizeof *v->damaged);
    v->looped = calloc(v->n_rows ? v->n_rows : 1, sizeof *v->looped);
    v->row_of = calloc(v->n_ext ? v->n_ext : 1, sizeof *v->row_of);
    v->ext_of = calloc(v->n_rows ? v->n_rows : 1, sizeof *v->ext_of);
    v->rank_rows = calloc(v->n_rows ? v->n_rows : 1, sizeof *v->rank_rows);
    if (!v->fold || !v->damaged || !v->looped || !v->row_of || !v->ext_of || !v->rank_rows) {
        pl_run_view_free(v);
        return -ENOMEM;
    }
    for (size_t i = 0; i < v->n_rows; i++) v->ext_of[i] = v->n_ext;
    /* each process image's row: the same index when the two tables line up (after pl_run_assemble), else searched */
    for (size_t k = 0; k < v->n_ext; k++) {
        size_t i = k < v->n_rows && r->procs[k] == x->procs[k].proc ? k : 0;
        while (i < v->n_rows && r->procs[i] != x->procs[k].proc) i++;
        v->row_of[k] = i;
        if (i == v->n_rows) continue;
        v->ext_of[i] = k;
        v->damaged[i] = x->procs[k].damaged;
        v->looped[i] = x->procs[k].steps_auto && x->procs[k].n_steps > 0;
    }
    pl_run_totals(x, &v->totals);
    rank_order(r, v);
    v->workers_pid_lo = INT64_MAX;
    v->workers_pid_hi = INT64_MIN;
    for (size_t i = 0; i < v->n_rows; i++) {
        const pl_report_process_t *p = r->procs[i];
        v->fold[i] = fold_of(p);
        if (v->fold[i] != PL_FOLD_NONE && !pl_report_said_by_pool(r, p)) v->n_quiet++;
        v->n_helpers += v->fold[i] == PL_FOLD_HELPER;
        if (v->fold[i] != PL_FOLD_WORKER) continue;
        v->n_workers++;
        v->n_workers_nodata += p->verdict.kind == PL_PV_NO_DATA;
        v->n_workers_undecided += p->verdict.kind == PL_PV_UNDECIDED;
        v->n_workers_looped += v->looped[i];
        if (p->pid < v->workers_pid_lo) v->workers_pid_lo = p->pid;
        if (p->pid > v->workers_pid_hi) v->workers_pid_hi = p->pid;
    }
    return 0;
}

bool pl_run_view_hides(const pl_run_view_t *v, size_t i) {
    return i < v->n_rows && v->fold[i] != PL_FOLD_NONE && !v->damaged[i];
}

