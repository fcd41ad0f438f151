/* reports/diagnosis: cross-metric rules -> findings (see diagnosis.h, docs/verdict.md §5).
 *
 * Priority: device first (tensor retention, then allocator fragmentation), then host judged on the live heap, then
 * RSS-only growth explained by which part of RSS grows (only once the live heap is decided flat: an undecided live
 * heap is never read as flat), then impact (OOM projection from the metric nearest its limit), and only when
 * nothing leaks: "slow growth", "not decided yet", "no data" or "no leak". Sentences name the numbers they rest on.
 * The process verdict (report.h) is read off the same rules: only program memory (live heap, device allocated, live
 * tensors; RSS when the live heap was not recorded) growing fast enough to matter (pl_diagnosis_practical) leaks.
 */
#include "diagnosis.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "report.h"

typedef struct {
    const pl_report_process_t *p;
    const pl_practical_params_t *pp;
    pl_finding_t *out;
    size_t max, n;
} ctx_t;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void say(ctx_t *c, pl_dx_t code, const char *fmt, ...) {
    if (c->n >= c->max) return;
    pl_finding_t *f = &c->out[c->n++];
    f->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
}

static const pl_report_metric_t *M(const ctx_t *c, pl_metric_t m) {
    return c->p->metrics[m].present ? &c->p->metrics[m] : NULL;
}
/* a statistically clear growth (verdict leak), whatever its size: RSS, reserved and file-page findings use it */
static bool grows(const ctx_t *c, pl_metric_t m) { return M(c, m) && M(c, m)->verdict.kind == PL_VERDICT_LEAK; }
/* a leak that matters: grows and is practically significant (pl_diagnosis_matters) */
static bool leak(const ctx_t *c, pl_metric_t m) { return M(c, m) && pl_diagnosis_matters(c->p, m, c->pp); }
static bool slow(const ctx_t *c, pl_metric_t m) { return grows(c, m) && !leak(c, m); }
static bool undecided(const ctx_t *c, pl_metric_t m) {
    return M(c, m) && M(c, m)->verdict.kind == PL_VERDICT_INCONCLUSIVE && M(c, m)->verdict.undecided != PL_UNDECIDED_NO_DATA;
}
static bool judged(const ctx_t *c, pl_metric_t m) { /* present with enough points */
    return M(c, m) && !(M(c, m)->verdict.kind == PL_VERDICT_INCONCLUSIVE && M(c, m)->verdict.undecided == PL_UNDECIDED_NO_DATA);
}

/* Program memory: what a leak is judged on. RSS only when the live heap was not recorded. */
static size_t program_metrics(const ctx_t *c, pl_metric_t *out) {
    /* in this order; which of them count is pl_report_program_metric's one rule */
    static const pl_metric_t order[] = {PL_METRIC_DEV_TENSORS, PL_METRIC_DEV_ALLOCATED, PL_METRIC_HEAP_BYTES,
                                        PL_METRIC_HEAP_COUNT, PL_METRIC_RSS_ANON, PL_METRIC_RSS,
                                        PL_METRIC_DEV_RESERVED, PL_METRIC_AUTOGRAD};
    size_t n = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (M(c, order[i]) && pl_report_program_metric(c->p, order[i]) &&
            (order[i] != PL_METRIC_AUTOGRAD || leak(c, order[i])))
            out[n++] = order[i]; /* a sparse count of graph nodes joins when it leaks: its "not decided" (a few
                                  * counts in a short run) does not hold back the live heap's verdict */
    return n;
}
static bool settled(const ctx_t *c, pl_metric_t m) {
    return M(c, m) && (M(c, m)->verdict.kind == PL_VERDICT_FLAT || M(c, m)->verdict.kind == PL_VERDICT_PLATEAU);
}
static double slope(const ctx_t *c, pl_metric_t m) { return M(c, m) ? M(c, m)->verdict.slope_per_step : NAN; }

/* "1.20 MiB/step" or "3/step" into buf; "/s" for a series by time buckets (a bucket is not a step) */
static const char *rate(const ctx_t *c, pl_metric_t m, char *buf, size_t size) {
    char v[32];
    const pl_series_t *s = M(c, m) ? &M(c, m)->series : NULL;
    double k = s && s->by_time && s->bucket_ns > 0 ? 1e9 / (double)s->bucket_ns : 1;
    pl_format_value(slope(c, m) * k, pl_metric_is_bytes(m), v, sizeof v);
    snprintf(buf, size, "%s/%s", v, s && s->by_time ? "s" : "step");
    return buf;
}

static bool by_time(const ctx_t *c) {
    for (int m = 0; m < PL_METRIC__COUNT; m++)
        if (M(c, (pl_metric_t)m)) return M(c, (pl_metric_t)m)->series.by_time;
    return false;
}

/* "120 more steps" / "2 min longer" for a count of steps (or time buckets) */
static const char *more(const ctx_t *c, int64_t steps, char *buf, size_t size) {
    if (!by_time(c)) {
        snprintf(buf, size, "about %lld more steps", (long long)steps);
        return buf;
    }
    double bs = 1;
    for (int m = 0; m < PL_METRIC__COUNT; m++)
        if (M(c, (pl_metric_t)m) && M(c, (pl_metric_t)m)->series.bucket_ns > 0) {
            bs = (double)M(c, (pl_metric_t)m)->series.bucket_ns / 1e9;
            break;
        }
    char d[24];
    snprintf(buf, size, "about %s longer", pl_format_duration((double)steps * bs, d, sizeof d));
    return buf;
}

static void device_rules(ctx_t *c) {
    char a[48], b[48];
    if (leak(c, PL_METRIC_DEV_TENSORS) && (leak(c, PL_METRIC_DEV_ALLOCATED) || !M(c, PL_METRIC_DEV_ALLOCATED))) {
        say(c, PL_DX_RETAINED_TENSORS,
            "Retained tensors: the live tensor count grows %s%s%s, so tensors outlive their step (likely a graph "
            "kept alive, e.g. a loss accumulated without .item()/.detach(), or outputs appended to a list).",
            rate(c, PL_METRIC_DEV_TENSORS, a, sizeof a),
            M(c, PL_METRIC_DEV_ALLOCATED) ? " and device allocated " : "",
            M(c, PL_METRIC_DEV_ALLOCATED) ? rate(c, PL_METRIC_DEV_ALLOCATED, b, sizeof b) : "");
    } else if (leak(c, PL_METRIC_DEV_ALLOCATED)) {
        say(c, PL_DX_DEVICE_GROWTH,
            "Device leak: allocated grows %s while the live tensor count %s: existing tensors or caches grow (a "
            "buffer or statistic re-created larger each step, a per-step cache).",
            rate(c, PL_METRIC_DEV_ALLOCATED, a, sizeof a),
            M(c, PL_METRIC_DEV_TENSORS) ? "does not" : "was not recorded");
    }
    if (leak(c, PL_METRIC_DEV_RESERVED) && pl_report_program_metric(c->p, PL_METRIC_DEV_RESERVED)) {
        say(c, PL_DX_DEVICE_GROWTH,
            "Device leak: device memory (reserved, or in use as nvidia-smi shows it) grows %s. What is allocated to "
            "tensors was not recorded, so the caching allocator's fragmentation cannot be told apart from a leak "
            "here; either way it runs into the device's limit. `plateau run` on the script tells them apart.",
            rate(c, PL_METRIC_DEV_RESERVED, a, sizeof a));
    }
    if (grows(c, PL_METRIC_DEV_RESERVED) && settled(c, PL_METRIC_DEV_ALLOCATED)) {
        say(c, PL_DX_FRAGMENTATION,
            "Allocator fragmentation, not a leak: reserved grows %s while allocated is flat. Run `plateau tune` on "
            "this trace, or try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb:128).",
            rate(c, PL_METRIC_DEV_RESERVED, a, sizeof a));
    } else if (leak(c, PL_METRIC_DEV_INACTIVE_SPLIT) && settled(c, PL_METRIC_DEV_ALLOCATED)) {
        say(c, PL_DX_FRAGMENTATION,
            "Allocator fragmentation, not a leak: inactive parts of split blocks grow %s while allocated is flat. "
            "Run `plateau tune` on this trace, or try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or "
            "max_split_size_mb:128).",
            rate(c, PL_METRIC_DEV_INACTIVE_SPLIT, a, sizeof a));
    }
    if (leak(c, PL_METRIC_AUTOGRAD) && !leak(c, PL_METRIC_DEV_TENSORS)) {
        char saved[160] = "", sz[32], t[80] = "";
        const pl_report_process_t *p = c->p;
        if (p->autograd_saved_bytes > 0)
            snprintf(saved, sizeof saved, "; at the last count that read them, their nodes saved %s%s in %lld tensors (parameters left out)",
                     p->autograd_lower ? "at least " : "", pl_format_value((double)p->autograd_saved_bytes, true, sz,
                     sizeof sz), (long long)p->autograd_saved_n);
        else if (p->autograd_saved_bytes == 0)
            snprintf(saved, sizeof saved, "; %s saved tensors were found in them (backward frees what it used), so "
                     "what is kept is the nodes themselves", p->autograd_lower ? "no readable" : "no");
        if (leak(c, PL_METRIC_TENSORS)) snprintf(t, sizeof t, ", and live tensors grow %s",
                                                  rate(c, PL_METRIC_TENSORS, a, sizeof a));
        say(c, PL_DX_RETAINED_TENSORS,
            "Retained autograd graphs: the autograd nodes that live tensors hold grow %s%s%s. Each step's graph "
            "outlives its step: a loss accumulated without .item()/.detach() (`total_loss += loss`), or outputs "
            "kept with their graphs.",
            rate(c, PL_METRIC_AUTOGRAD, b, sizeof b), t, saved);
    } else if (leak(c, PL_METRIC_TENSORS) && !leak(c, PL_METRIC_DEV_TENSORS)) {
        say(c, PL_DX_RETAINED_TENSORS,
            "Retained tensors: the live torch.Tensor count grows %s, so tensors outlive their step (outputs or "
            "losses appended to a list, a graph kept alive by a loss accumulated without .item()/.detach()).",
            rate(c, PL_METRIC_TENSORS, a, sizeof a));
    }
    const pl_report_process_t *p = c->p;
    if (p->dev_ooms > 0 || p->dev_alloc_retries > 0) {
        say(c, PL_DX_ALLOC_RETRIES,
            "torch's caching allocator ran out of device memory: %lld out-of-memory error%s and %lld allocation "
            "retr%s (each retry frees every cached block and waits for the device). The device is at its limit%s.",
            (long long)(p->dev_ooms > 0 ? p->dev_ooms : 0), p->dev_ooms == 1 ? "" : "s",
            (long long)(p->dev_alloc_retries > 0 ? p->dev_alloc_retries : 0),
            p->dev_alloc_retries == 1 ? "y" : "ies",
            leak(c, PL_METRIC_DEV_ALLOCATED) ? "" : "; with allocated flat, `plateau tune` or "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True can make room");
    }
    if (grows(c, PL_METRIC_DEV_OTHER)) {
        say(c, PL_DX_DEVICE_OTHER,
            "Device memory outside the allocator grows %s (driver or libraries: cuDNN/cuBLAS workspaces, NCCL "
            "buffers, another allocator).",
            rate(c, PL_METRIC_DEV_OTHER, a, sizeof a));
    }
}

/* Memory outside malloc's churn (docs/verdict.md §5, "First touch"): the live heap counts the program's anonymous
 * mappings whole when they are made (preload/heap.c), but the kernel makes a page resident only when it is first
 * written. A mapping made at its full size and filled as the program goes (an arena, a library's cache, a
 * preallocated buffer) raises RssAnon step after step while the live heap stays flat, and it is not allocator
 * retention: retention keeps freed memory, so RssAnon then exceeds the live heap. Said when RssAnon grows beside a
 * flat live heap whose level is above RssAnon's last value by at least the growth RssAnon showed over its tail (room
 * left to fill): bounded by what is allocated, so no OOM is projected from it. A guess, labelled: a large mapping
 * left untouched elsewhere would hide retention the same way. */
static bool first_touch(ctx_t *c) {
    const pl_report_metric_t *ra = M(c, PL_METRIC_RSS_ANON), *hb = M(c, PL_METRIC_HEAP_BYTES);
    if (!ra || !hb || !settled(c, PL_METRIC_HEAP_BYTES) || ra->series.n_points < 2) return false;
    double last = ra->series.points[ra->series.n_points - 1].base, heap = hb->verdict.level;
    double tail_rise = ra->verdict.slope_per_step * (double)ra->verdict.tail_steps;
    if (!(tail_rise > 0) || !(heap - last >= tail_rise)) return false;
    char a[48], h[32], l[32], room[32];
    say(c, PL_DX_FIRST_TOUCH,
        "RssAnon grows %s beside a flat live heap larger than it (%s vs %s): allocated or mapped memory touched for "
        "the first time (an arena, cache or buffer mapped whole and filled as it goes; a guess). Bounded: %s more "
        "at most while the live heap stays flat. Not a leak of the program's objects.",
        rate(c, PL_METRIC_RSS_ANON, a, sizeof a), pl_format_bytes(heap, h, sizeof h),
        pl_format_bytes(last, l, sizeof l),
        pl_format_bytes(heap - last, room, sizeof room));
    return true;
}

static void host_rules(ctx_t *c) {
    char a[48], b[48], d[48], e[48];
    bool heap_rec = M(c, PL_METRIC_HEAP_BYTES) || M(c, PL_METRIC_HEAP_COUNT);
    bool heap_leak = leak(c, PL_METRIC_HEAP_BYTES) || leak(c, PL_METRIC_HEAP_COUNT);
    bool heap_flat = (!M(c, PL_METRIC_HEAP_BYTES) || settled(c, PL_METRIC_HEAP_BYTES)) &&
                     (!M(c, PL_METRIC_HEAP_COUNT) || settled(c, PL_METRIC_HEAP_COUNT));
    bool rss_rec = M(c, PL_METRIC_RSS) || M(c, PL_METRIC_RSS_ANON) || M(c, PL_METRIC_RSS_FILE);
    bool rss_leak = grows(c, PL_METRIC_RSS) || grows(c, PL_METRIC_RSS_ANON) || grows(c, PL_METRIC_RSS_FILE);
    pl_metric_t rss_m = grows(c, PL_METRIC_RSS) ? PL_METRIC_RSS
                        : grows(c, PL_METRIC_RSS_ANON) ? PL_METRIC_RSS_ANON : PL_METRIC_RSS_FILE;

    if (heap_leak) {
        char amp[256] = "";
        if (rss_leak && leak(c, PL_METRIC_HEAP_BYTES) && slope(c, PL_METRIC_HEAP_BYTES) > 0) {
            double ratio = slope(c, rss_m) / slope(c, PL_METRIC_HEAP_BYTES);
            if (ratio >= 3)
                snprintf(amp, sizeof amp,
                         " RSS grows %.0fx faster (%s): the heap fragments around the leaked blocks; size the "
                         "problem by RSS, find it by the live heap.",
                         ratio, rate(c, rss_m, d, sizeof d));
        }
        /* the Python line it was allocated at, when the sites name one: "..., 93% of it allocated at train.py:42" */
        const char *sep = c->p->site_line[0] ? ", " : "", *site = c->p->site_line;
        if (leak(c, PL_METRIC_HEAP_BYTES) && leak(c, PL_METRIC_HEAP_COUNT))
            say(c, PL_DX_HOST_LEAK, "Host leak: the live heap grows %s (%s allocations)%s%s.%s",
                rate(c, PL_METRIC_HEAP_BYTES, a, sizeof a), rate(c, PL_METRIC_HEAP_COUNT, b, sizeof b), sep, site,
                amp);
        else if (leak(c, PL_METRIC_HEAP_BYTES))
            say(c, PL_DX_HOST_LEAK, "Host leak: the live heap grows %s%s%s.%s",
                rate(c, PL_METRIC_HEAP_BYTES, a, sizeof a), sep, site, amp);
        else
            say(c, PL_DX_HOST_LEAK, "Host leak: live allocations grow %s%s.",
                rate(c, PL_METRIC_HEAP_COUNT, a, sizeof a),
                c->p->heap_filtered ? "" : " (bytes stay flat: many small blocks)");
        if (rss_rec && !rss_leak)
            say(c, PL_DX_HEAP_NOT_RSS,
                "RSS and the live heap disagree: the live heap grows but RSS does not (yet); the allocator is "
                "absorbing the leak in memory it already holds. The leak is real and RSS will follow.");
        return;
    }
    if (!rss_leak) return;
    if (!heap_rec && c->p->heap_filtered) {
        say(c, PL_DX_RSS_UNEXPLAINED,
            "RSS grows %s; the live heap, which tells a program leak from allocator retention or file-backed pages, "
            "was recorded but --metric leaves it out of this report: report without --metric to decide.",
            rate(c, rss_m, a, sizeof a));
        return;
    }
    if (!heap_rec) {
        say(c, PL_DX_RSS_UNEXPLAINED,
            "RSS grows %s, but the live heap was not recorded, so a program leak cannot be told from allocator "
            "retention or file-backed pages: record the run with `plateau run` to decide.",
            rate(c, rss_m, a, sizeof a));
        return;
    }
    if (!heap_flat && !slow(c, PL_METRIC_HEAP_BYTES) && !slow(c, PL_METRIC_HEAP_COUNT)) {
        /* an undecided live heap is not a flat one: RSS growth cannot be blamed on the allocator yet */
        pl_metric_t hm = M(c, PL_METRIC_HEAP_BYTES) && !settled(c, PL_METRIC_HEAP_BYTES) ? PL_METRIC_HEAP_BYTES
                                                                                         : PL_METRIC_HEAP_COUNT;
        const pl_verdict_t *hv = &M(c, hm)->verdict;
        say(c, PL_DX_UNDECIDED,
            "RSS grows %s, and the live heap is not decided yet (%s %s, %s): a program leak cannot be told from "
            "allocator retention yet; run %s.",
            rate(c, rss_m, a, sizeof a), pl_metric_name(hm), pl_verdict_undecided_name(hv->undecided),
            rate(c, hm, b, sizeof b), more(c, hv->more_steps, e, sizeof e));
        return;
    }
    bool anon = grows(c, PL_METRIC_RSS_ANON), file = grows(c, PL_METRIC_RSS_FILE);
    if (anon && first_touch(c)) return;
    if (file && !anon) {
        say(c, PL_DX_FILE_PAGES,
            "RSS and the live heap disagree: RSS grows %s in file-backed pages (RssFile) while the live heap is "
            "flat: mapped files or page cache (datasets, checkpoints, mmap'd weights), not a program leak; the "
            "kernel can reclaim them.",
            rate(c, PL_METRIC_RSS_FILE, a, sizeof a));
    } else {
        say(c, PL_DX_HOST_RETENTION,
            "RSS and the live heap disagree: RSS grows %s%s while the live heap is flat, so no object of the program "
            "is kept. A guess: the host allocator keeps freed memory (glibc arenas, fragmentation). What helps: "
            "MALLOC_ARENA_MAX=2, MALLOC_TRIM_THRESHOLD_=131072, malloc_trim(0) after each step, or jemalloc "
            "(`plateau run --host-allocator jemalloc`).%s",
            rate(c, anon ? PL_METRIC_RSS_ANON : rss_m, a, sizeof a), anon ? " in anonymous memory (RssAnon)" : "",
            anon || M(c, PL_METRIC_RSS_ANON) ? "" : " (RssAnon/RssFile were not recorded: file-backed pages are "
                                                    "also possible.)");
    }
}

/* first and last per-step baselines of m, and the time between them in seconds (NAN when unknown) */
static bool ends(const ctx_t *c, pl_metric_t m, double *first, double *last, double *span_s) {
    const pl_series_t *s = M(c, m) ? &M(c, m)->series : NULL;
    if (!s || s->n_points < 2) return false;
    const pl_point_t *a = &s->points[0], *b = &s->points[s->n_points - 1];
    *first = a->base;
    *last = b->base;
    if (s->by_time && s->bucket_ns > 0) *span_s = (double)(b->step - a->step) * (double)s->bucket_ns / 1e9;
    else *span_s = a->t_ns >= 0 && b->t_ns >= a->t_ns ? (double)(b->t_ns - a->t_ns) / 1e9 : NAN;
    return true;
}

/* last baseline at or before step hi minus the first at or after step lo; NAN when none lies between */
static double rise_between(const pl_series_t *s, int64_t lo, int64_t hi) {
    size_t a = 0, b = s->n_points;
    while (a < s->n_points && s->points[a].step < lo) a++;
    while (b > 0 && s->points[b - 1].step > hi) b--;
    return a < s->n_points && b > a ? s->points[b - 1].base - s->points[a].base : NAN;
}

/* Copy-on-access (docs/verdict.md, "Copy-on-access workers"): a worker forked from its parent without exec (a
 * DataLoader worker) shares the parent's pages until either writes them. Reading a Python object writes its
 * reference count, so a worker that reads its parent's lists of objects copies, page by page, the part of the
 * parent's heap it reads: its PSS climbs towards its RSS while RSS itself and its live heap stay flat (the pages
 * were already mapped and counted, and nothing was allocated). The climb is bounded by the heap it inherited, and
 * PSS never exceeds RSS. Needs PSS at 3 samples or more, a climb of at least 8 MiB and 5 % of where it started, and
 * RSS and the live heap each rising less than a quarter of it: a worker that allocates what it keeps (a leak) raises
 * its heap and RSS with it, and is judged on its heap as any process. Fills pv's cow fields; true when said. */
#define COW_MIN_RISE_BYTES (8.0 * 1024 * 1024)
static bool cow_rule(ctx_t *c, pl_proc_verdict_t *pv) {
    if (!(c->p->forked_heap_bytes > 0) || !M(c, PL_METRIC_PSS) || M(c, PL_METRIC_PSS)->series.n_points < 3)
        return false;
    double p0, p1, ps, r0, r1, rs;
    pl_metric_t rss_m = M(c, PL_METRIC_RSS_ANON) ? PL_METRIC_RSS_ANON : PL_METRIC_RSS;
    if (!ends(c, PL_METRIC_PSS, &p0, &p1, &ps) || !ends(c, rss_m, &r0, &r1, &rs) || !M(c, PL_METRIC_HEAP_BYTES))
        return false;
    double rise = p1 - p0;
    if (!(rise >= COW_MIN_RISE_BYTES && rise >= 0.05 * p0)) return false;
    /* RSS and the heap over the same steps as PSS (its first sample comes 5 s in, after the worker's start-up) */
    const pl_series_t *pss = &M(c, PL_METRIC_PSS)->series;
    int64_t lo = pss->points[0].step, hi = pss->points[pss->n_points - 1].step;
    double r_rise = rise_between(&M(c, rss_m)->series, lo, hi);
    double h_rise = rise_between(&M(c, PL_METRIC_HEAP_BYTES)->series, lo, hi);
    if (!(r_rise <= rise / 4) || !(h_rise <= rise / 4) || grows(c, PL_METRIC_HEAP_BYTES)) return false;
    double rss_last = r1, t0, t1, ts; /* total RSS when recorded: PSS counts file pages too */
    if (rss_m != PL_METRIC_RSS && ends(c, PL_METRIC_RSS, &t0, &t1, &ts)) rss_last = t1;
    double ceiling = p0 + c->p->forked_heap_bytes; /* it can copy at most what it inherited ... */
    if (rss_last > 0 && rss_last < ceiling) ceiling = rss_last; /* ... and PSS never exceeds RSS */
    if (ceiling < p1) ceiling = p1;
    pv->cow_rise = rise;
    pv->cow_ceiling = ceiling;
    char a[32], b[32], d[24], h[32], e[32];
    pl_format_bytes(rise, a, sizeof a);
    pl_format_bytes(p1, b, sizeof b);
    pl_format_bytes(c->p->forked_heap_bytes, h, sizeof h);
    pl_format_bytes(ceiling, e, sizeof e);
    say(c, PL_DX_COPY_ON_ACCESS,
        "Copy-on-access, not a leak: PSS +%s%s%s (to %s) while RSS and the live heap stay flat: this forked worker "
        "copies its parent's pages as it reads its Python objects (a read writes the reference count). Ceiling "
        "%s: it can copy at most the %s heap it inherited, and PSS never exceeds RSS. Keep the data in numpy arrays "
        "or tensors, not Python lists, or use fewer workers.",
        a, isfinite(ps) ? " over " : "", isfinite(ps) ? pl_format_duration(ps, d, sizeof d) : "", b, e, h);
    return true;
}

/* Growth of a metric no rule above explains: PSS (shared pages changing hands), shmem, the cgroup. Findings, never
 * a process verdict. */
static void other_rules(ctx_t *c) {
    char a[48];
    bool rss_grows = grows(c, PL_METRIC_RSS) || grows(c, PL_METRIC_RSS_ANON) || grows(c, PL_METRIC_RSS_FILE);
    if (grows(c, PL_METRIC_PSS) && !rss_grows) {
        say(c, PL_DX_PSS_SHARING,
            "PSS grows %s while RSS does not: pages this process shares (libraries, forked memory) are split between "
            "fewer processes as others exit or unmap them; a share moved, not this process's memory.",
            rate(c, PL_METRIC_PSS, a, sizeof a));
        return;
    }
    static const pl_metric_t rest[] = {PL_METRIC_RSS_SHMEM, PL_METRIC_CGROUP};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++)
        if (grows(c, rest[i])) {
            say(c, PL_DX_RSS_UNEXPLAINED, "%s grows %s and no finer metric explains it.", pl_metric_name(rest[i]),
                rate(c, rest[i], a, sizeof a));
            return;
        }
}

/* The projected OOM of a leaking process: the earliest among the leaking metrics that have a limit (PSS is left
 * out: it moves with other processes' mappings). Fills the verdict's OOM fields. */
static void impact(ctx_t *c, pl_proc_verdict_t *pv) {
    static const pl_metric_t order[] = {PL_METRIC_CGROUP, PL_METRIC_DEV_RESERVED, PL_METRIC_DEV_ALLOCATED,
                                        PL_METRIC_RSS, PL_METRIC_RSS_ANON, PL_METRIC_HEAP_BYTES};
    const pl_report_metric_t *best = NULL;
    pl_metric_t bm = PL_METRIC_RSS;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const pl_report_metric_t *m = M(c, order[i]);
        if (!m || m->verdict.kind != PL_VERDICT_LEAK || !m->verdict.has_oom) continue;
        if (!best || m->verdict.oom_step < best->verdict.oom_step) {
            best = m;
            bm = order[i];
        }
    }
    if (!best) return;
    pv->has_oom = true;
    pv->oom_metric = (int)bm;
    pv->oom_seconds = best->verdict.oom_seconds;
    pv->steps_to_oom = best->verdict.oom_step - best->verdict.last_step;
    char lim[32], when[48] = "";
    pl_format_bytes(best->verdict.limit, lim, sizeof lim);
    if (isfinite(best->verdict.oom_seconds)) {
        char d[24];
        snprintf(when, sizeof when, ", in about %s", pl_format_duration(best->verdict.oom_seconds, d, sizeof d));
    }
    if (best->series.by_time)
        say(c, PL_DX_OOM, "At this rate %s reaches the %s (%s)%s.", pl_metric_name(bm),
            best->limit_source ? best->limit_source : "limit", lim, when);
    else
        say(c, PL_DX_OOM, "At this rate %s reaches the %s (%s) at step %lld%s.", pl_metric_name(bm),
            best->limit_source ? best->limit_source : "limit", lim, (long long)best->verdict.oom_step, when);
}

/* Growth beside a flat live heap (allocator retention, RSS beside an undecided heap) is no object the program keeps,
 * and it may level off at any time (glibc's arenas stop growing when they hold what the program churns through):
 * its projection to the limit is said only when it reaches no farther than PL_DX_PROJECT_FACTOR times the span the
 * series was observed over. A creep of +1 MiB/step projected 19 h ahead from a 5 min run is not said: the data
 * cannot tell a slope that continues from one that stops. */
#define PL_DX_PROJECT_FACTOR 20
static bool within_data(const ctx_t *c, pl_metric_t m) {
    const pl_report_metric_t *mt = M(c, m);
    if (!mt || !mt->verdict.has_oom || mt->series.n_points < 2) return false;
    const pl_series_t *s = &mt->series;
    const pl_point_t *a = &s->points[0], *b = &s->points[s->n_points - 1];
    double seen_s = s->by_time && s->bucket_ns > 0 ? (double)(b->step - a->step) * (double)s->bucket_ns / 1e9
                    : a->t_ns >= 0 && b->t_ns > a->t_ns ? (double)(b->t_ns - a->t_ns) / 1e9 : NAN;
    if (isfinite(mt->verdict.oom_seconds) && isfinite(seen_s))
        return mt->verdict.oom_seconds <= PL_DX_PROJECT_FACTOR * seen_s;
    return (double)(mt->verdict.oom_step - mt->verdict.last_step) <= PL_DX_PROJECT_FACTOR * (double)(b->step - a->step);
}

static void slow_growth(ctx_t *c, const pl_metric_t *pm, size_t n_pm) {
    for (size_t i = 0; i < n_pm; i++) {
        if (!slow(c, pm[i])) continue;
        const pl_verdict_t *v = &M(c, pm[i])->verdict;
        char a[48], when[96];
        if (v->has_oom && isfinite(v->oom_seconds)) {
            char d[24];
            snprintf(when, sizeof when, "it would reach the %s only in about %s",
                     M(c, pm[i])->limit_source ? M(c, pm[i])->limit_source : "limit",
                     pl_format_duration(v->oom_seconds, d, sizeof d));
        } else {
            snprintf(when, sizeof when, "it would not double within %lld steps", (long long)c->pp->horizon_steps);
        }
        say(c, PL_DX_SLOW_GROWTH,
            "Slow growth, not a leak that matters: %s grows %s (%.3g %% of its level per step); %s (thresholds: "
            "--slow-hours %g, --horizon-steps %lld).",
            pl_metric_name(pm[i]), rate(c, pm[i], a, sizeof a), 100 * v->slope_per_step / fabs(v->level), when,
            c->pp->slow_hours, (long long)c->pp->horizon_steps);
        return;
    }
}

static void quiet(ctx_t *c, const pl_metric_t *pm, size_t n_pm, pl_proc_verdict_t *pv) {
    char names[160] = "", w[96] = "", mo[64];
    int64_t more_steps = 0;
    const pl_report_metric_t *plat = NULL;
    pl_metric_t plm = PL_METRIC_RSS;
    int first_undecided = -1;
    for (size_t i = 0; i < n_pm; i++) {
        const pl_report_metric_t *mt = M(c, pm[i]);
        if (undecided(c, pm[i])) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", pl_metric_name(pm[i]));
            if (mt->verdict.more_steps > more_steps) more_steps = mt->verdict.more_steps;
            if (first_undecided < 0) first_undecided = (int)pm[i];
        }
        bool longer = !plat || mt->verdict.warmup_steps > plat->verdict.warmup_steps;
        if (mt->verdict.kind == PL_VERDICT_PLATEAU && longer) {
            plat = mt;
            plm = pm[i];
        }
    }
    if (names[0]) {
        pv->kind = PL_PV_UNDECIDED;
        pv->metric = first_undecided;
        pv->more_steps = more_steps;
        say(c, PL_DX_UNDECIDED, "Not decided yet: %s %s not settled; run %s to tell a warmup from a leak.", names,
            strchr(names, ',') ? "have" : "has", more(c, more_steps, mo, sizeof mo));
        return;
    }
    bool any = false;
    for (size_t i = 0; i < n_pm; i++) any |= judged(c, pm[i]);
    if (!any) {
        pv->kind = PL_PV_NO_DATA;
        size_t pts = 0;
        for (size_t i = 0; i < n_pm; i++)
            if (M(c, pm[i]) && M(c, pm[i])->series.n_points > pts) pts = M(c, pm[i])->series.n_points;
        bool other = false;
        for (int m = 0; m < PL_METRIC__COUNT; m++) other |= M(c, (pl_metric_t)m) != NULL;
        if (!n_pm && other)
            say(c, PL_DX_NO_DATA, "No data on the program's own memory: neither the live heap nor RSS was recorded, "
                "and PSS or the cgroup alone cannot decide a leak (they move with other processes).");
        else if (!n_pm)
            say(c, PL_DX_NO_DATA, "No data: no memory series of the program was recorded (the process ended "
                "before its first flush, or its trace was cut), so nothing can be said about leaks.");
        else
            say(c, PL_DX_NO_DATA, "No data: the program's memory was recorded at %zu %s only, too few to judge.", pts,
                by_time(c) ? "seconds" : "steps");
        return;
    }
    if (pv->kind == PL_PV_SLOW_GROWTH) return; /* said by slow_growth() */
    pv->kind = PL_PV_NO_LEAK;
    /* periodic cleanup (gc.collect() or empty_cache() every N steps) is named: a sawtooth judged on its lows */
    char saw[160] = "";
    for (size_t i = 0; i < n_pm && !saw[0]; i++)
        if (judged(c, pm[i]) && M(c, pm[i])->verdict.sawtooth_period > 0 && !M(c, pm[i])->series.by_time)
            snprintf(saw, sizeof saw, " Memory is freed every %lld steps (%s is a sawtooth: periodic cleanup), so "
                     "each period's low is what was judged.", (long long)M(c, pm[i])->verdict.sawtooth_period,
                     pl_metric_name(pm[i]));
    if (plat) {
        char sz[32];
        pv->warmup_steps = plat->verdict.warmup_steps;
        pv->metric_warmup = (int)plm;
        pl_format_value(plat->verdict.warmup_size, pl_metric_is_bytes(plm), sz, sizeof sz);
        snprintf(w, sizeof w, " (%s warms up for %lld %s, +%s, then stays flat)", pl_metric_name(plm),
                 (long long)plat->verdict.warmup_steps,
                 plat->series.by_time ? "s" : plat->verdict.warmup_steps == 1 ? "step" : "steps", sz);
        say(c, PL_DX_NO_LEAK, "No leak in the program's own memory: it warms up and plateaus%s.%s", w, saw);
    } else {
        say(c, PL_DX_NO_LEAK, "No leak in the program's own memory: it is flat.%s", saw);
    }
}

int pl_diagnosis_run(const pl_report_process_t *proc, const char *cut_reason, const pl_practical_params_t *pp,
                     pl_finding_t *out, size_t max, size_t *n_out, pl_proc_verdict_t *verdict) {
    if (!proc || !n_out || (max && !out)) return -EINVAL;
    pl_practical_params_t dpp = {.slow_hours = 24, .horizon_steps = 10000};
    ctx_t c = {.p = proc, .pp = pp ? pp : &dpp, .out = out, .max = max};
    pl_proc_verdict_t pv = {.kind = PL_PV_NO_DATA, .metric = -1, .metric_warmup = -1, .oom_seconds = NAN,
                            .other_dx = -1, .other_metric = -1, .other_oom_seconds = NAN, .cow_rise = 0,
                            .cow_ceiling = 0, .oom_metric = -1};
    pv.by_time = by_time(&c);
    if (cut_reason) {
        int64_t last = -1;
        for (int m = 0; m < PL_METRIC__COUNT; m++)
            if (M(&c, (pl_metric_t)m) && M(&c, (pl_metric_t)m)->verdict.last_step > last)
                last = M(&c, (pl_metric_t)m)->verdict.last_step;
        if (last < 0)
            say(&c, PL_DX_CUT_SHORT, "The run was cut short (%s); nothing of this process was recorded.", cut_reason);
        else
            say(&c, PL_DX_CUT_SHORT, "The run was cut short (%s); the verdicts use what was recorded up to %s %lld.",
                cut_reason, pv.by_time ? "second" : "step", (long long)last);
    }
    pl_metric_t pm[PL_METRIC__COUNT];
    size_t n_pm = program_metrics(&c, pm);
    device_rules(&c);
    size_t before_host = c.n;
    host_rules(&c);
    if (c.n == before_host && !cow_rule(&c, &pv)) other_rules(&c);
    /* the process verdict: the program-memory leak nearest its limit (else the fastest relative growth) */
    const pl_report_metric_t *lk = NULL, *sl = NULL;
    for (size_t i = 0; i < n_pm; i++) {
        const pl_report_metric_t *mt = M(&c, pm[i]);
        double rel = mt->verdict.slope_per_step / fabs(mt->verdict.level);
        if (leak(&c, pm[i])) {
            bool better = !lk || (mt->verdict.has_oom && (!lk->verdict.has_oom ||
                                                          mt->verdict.oom_step < lk->verdict.oom_step)) ||
                          (!lk->verdict.has_oom && rel > lk->verdict.slope_per_step / fabs(lk->verdict.level));
            if (better) {
                lk = mt;
                pv.metric = (int)pm[i];
            }
        } else if (slow(&c, pm[i]) && !sl) {
            sl = mt;
            if (!lk) pv.metric = (int)pm[i];
        }
    }
    if (lk) {
        pv.kind = PL_PV_LEAK;
        pv.per_step = lk->verdict.slope_per_step;
        impact(&c, &pv);
    } else {
        /* RSS growth that is no program leak (retention, beside an undecided heap) can still run into the limit:
         * its projection is said, named as what it is (file pages are not: the kernel reclaims them) */
        static const pl_dx_t named[] = {PL_DX_HOST_RETENTION, PL_DX_UNDECIDED};
        for (size_t k = 0; k < c.n && pv.other_dx < 0; k++)
            for (size_t j = 0; j < 2; j++)
                if (c.out[k].code == named[j]) {
                    static const pl_metric_t rss[] = {PL_METRIC_RSS, PL_METRIC_RSS_ANON, PL_METRIC_RSS_FILE};
                    for (size_t q = 0; q < 3; q++)
                        if (leak(&c, rss[q]) && M(&c, rss[q])->verdict.has_oom && within_data(&c, rss[q])) {
                            pl_proc_verdict_t tmp = pv; /* impact() says the OOM sentence; the verdict stays */
                            impact(&c, &tmp);
                            pv.other_dx = (int)named[j];
                            pv.other_metric = (int)rss[q];
                            pv.other_per_step = M(&c, rss[q])->verdict.slope_per_step;
                            pv.other_oom_seconds = tmp.oom_seconds;
                            break;
                        }
                    break;
                }
        if (sl) {
            pv.kind = PL_PV_SLOW_GROWTH;
            pv.per_step = sl->verdict.slope_per_step;
            pv.has_oom = sl->verdict.has_oom;
            pv.oom_metric = pv.has_oom ? pv.metric : -1;
            pv.oom_seconds = sl->verdict.oom_seconds;
            pv.steps_to_oom = sl->verdict.oom_step - sl->verdict.last_step;
            slow_growth(&c, pm, n_pm);
        }
        quiet(&c, pm, n_pm, &pv);
    }
    if (pv.metric >= 0 && M(&c, (pl_metric_t)pv.metric) && M(&c, (pl_metric_t)pv.metric)->series.by_time)
        pv.bucket_s = (double)M(&c, (pl_metric_t)pv.metric)->series.bucket_ns / 1e9;
    else if (pv.by_time)
        for (int m = 0; m < PL_METRIC__COUNT && pv.bucket_s == 0; m++)
            if (M(&c, (pl_metric_t)m)) pv.bucket_s = (double)M(&c, (pl_metric_t)m)->series.bucket_ns / 1e9;
    *n_out = c.n;
    if (verdict) *verdict = pv;
    return 0;
}
