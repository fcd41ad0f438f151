/* reports/diagnosis: cross-metric rules -> findings (see diagnosis.h, docs/verdict.md §5).
 *
 * Priority: device first (tensor retention, then allocator fragmentation), then host judged on the live heap, then
 * RSS-only growth explained by which part of RSS grows, then impact (OOM projection from the metric nearest its
 * limit), and only when nothing leaks: "not decided yet" or "no leak". Sentences name the numbers they rest on.
 */
#include "diagnosis.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "report.h"

static const char *dx_names[PL_DX__COUNT] = {
    "cut-short", "retained-tensors", "device-growth", "fragmentation", "device-other", "host-leak", "heap-not-rss",
    "host-retention", "file-pages", "rss-unexplained", "oom", "undecided", "no-leak", "alloc-retries",
};

const char *pl_dx_name(pl_dx_t c) { return (unsigned)c < PL_DX__COUNT ? dx_names[c] : "?"; }

typedef struct {
    const pl_report_process_t *p;
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
static bool leak(const ctx_t *c, pl_metric_t m) { return M(c, m) && M(c, m)->verdict.kind == PL_VERDICT_LEAK; }
static bool settled(const ctx_t *c, pl_metric_t m) {
    return M(c, m) && (M(c, m)->verdict.kind == PL_VERDICT_FLAT || M(c, m)->verdict.kind == PL_VERDICT_PLATEAU);
}
static double slope(const ctx_t *c, pl_metric_t m) { return M(c, m) ? M(c, m)->verdict.slope_per_step : NAN; }

/* "1.20 MiB/step" or "3/step" into buf */
static const char *rate(const ctx_t *c, pl_metric_t m, char *buf, size_t size) {
    char v[32];
    pl_format_value(slope(c, m), pl_metric_is_bytes(m), v, sizeof v);
    snprintf(buf, size, "%s/step", v);
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
    if (leak(c, PL_METRIC_DEV_RESERVED) && settled(c, PL_METRIC_DEV_ALLOCATED)) {
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
    if (leak(c, PL_METRIC_TENSORS) && !leak(c, PL_METRIC_DEV_TENSORS)) {
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
    if (leak(c, PL_METRIC_DEV_OTHER)) {
        say(c, PL_DX_DEVICE_OTHER,
            "Device memory outside the allocator grows %s (driver or libraries: cuDNN/cuBLAS workspaces, NCCL "
            "buffers, another allocator).",
            rate(c, PL_METRIC_DEV_OTHER, a, sizeof a));
    }
}

static void host_rules(ctx_t *c) {
    char a[48], b[48], d[48];
    bool heap_rec = M(c, PL_METRIC_HEAP_BYTES) || M(c, PL_METRIC_HEAP_COUNT);
    bool heap_leak = leak(c, PL_METRIC_HEAP_BYTES) || leak(c, PL_METRIC_HEAP_COUNT);
    bool rss_rec = M(c, PL_METRIC_RSS) || M(c, PL_METRIC_RSS_ANON) || M(c, PL_METRIC_RSS_FILE);
    bool rss_leak = leak(c, PL_METRIC_RSS) || leak(c, PL_METRIC_RSS_ANON) || leak(c, PL_METRIC_RSS_FILE);
    pl_metric_t rss_m = leak(c, PL_METRIC_RSS) ? PL_METRIC_RSS
                        : leak(c, PL_METRIC_RSS_ANON) ? PL_METRIC_RSS_ANON : PL_METRIC_RSS_FILE;

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
        if (leak(c, PL_METRIC_HEAP_BYTES) && leak(c, PL_METRIC_HEAP_COUNT))
            say(c, PL_DX_HOST_LEAK, "Host leak: the live heap grows %s (%s allocations).%s",
                rate(c, PL_METRIC_HEAP_BYTES, a, sizeof a), rate(c, PL_METRIC_HEAP_COUNT, b, sizeof b), amp);
        else if (leak(c, PL_METRIC_HEAP_BYTES))
            say(c, PL_DX_HOST_LEAK, "Host leak: the live heap grows %s.%s", rate(c, PL_METRIC_HEAP_BYTES, a, sizeof a),
                amp);
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
    bool anon = leak(c, PL_METRIC_RSS_ANON), file = leak(c, PL_METRIC_RSS_FILE);
    if (file && !anon) {
        say(c, PL_DX_FILE_PAGES,
            "RSS and the live heap disagree: RSS grows %s in file-backed pages (RssFile) while the live heap is "
            "flat: mapped files or page cache (datasets, checkpoints, mmap'd weights), not a program leak; the "
            "kernel can reclaim them.",
            rate(c, PL_METRIC_RSS_FILE, a, sizeof a));
    } else {
        say(c, PL_DX_HOST_RETENTION,
            "RSS and the live heap disagree: RSS grows %s%s while the live heap is flat: the host allocator keeps "
            "freed memory (glibc arenas), not a program leak. Try `plateau run --host-allocator jemalloc`, "
            "MALLOC_ARENA_MAX=2, or malloc_trim(0) after each step.%s",
            rate(c, anon ? PL_METRIC_RSS_ANON : rss_m, a, sizeof a), anon ? " in anonymous memory (RssAnon)" : "",
            anon || M(c, PL_METRIC_RSS_ANON) ? "" : " (RssAnon/RssFile were not recorded: file-backed pages are "
                                                    "also possible.)");
    }
}

static void impact(ctx_t *c) {
    static const pl_metric_t order[] = {PL_METRIC_CGROUP, PL_METRIC_DEV_RESERVED, PL_METRIC_DEV_ALLOCATED,
                                        PL_METRIC_RSS, PL_METRIC_PSS, PL_METRIC_HEAP_BYTES};
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
    char lim[32], when[48] = "";
    pl_format_bytes(best->verdict.limit, lim, sizeof lim);
    if (isfinite(best->verdict.oom_seconds)) {
        char d[24];
        snprintf(when, sizeof when, ", in about %s", pl_format_duration(best->verdict.oom_seconds, d, sizeof d));
    }
    say(c, PL_DX_OOM, "At this rate %s reaches the %s (%s) at step %lld%s.", pl_metric_name(bm),
        best->limit_source ? best->limit_source : "limit", lim, (long long)best->verdict.oom_step, when);
}

static void quiet(ctx_t *c) {
    char names[160] = "", w[96] = "";
    int64_t more = 0;
    const pl_report_metric_t *plat = NULL;
    pl_metric_t pm = PL_METRIC_RSS;
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        const pl_report_metric_t *mt = M(c, (pl_metric_t)m);
        if (!mt) continue;
        if (mt->verdict.kind == PL_VERDICT_INCONCLUSIVE) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", pl_metric_name((pl_metric_t)m));
            if (mt->verdict.more_steps > more) more = mt->verdict.more_steps;
        }
        bool longer = !plat || mt->verdict.warmup_steps > plat->verdict.warmup_steps;
        if (mt->verdict.kind == PL_VERDICT_PLATEAU && longer) {
            plat = mt;
            pm = (pl_metric_t)m;
        }
    }
    if (names[0]) {
        say(c, PL_DX_UNDECIDED, "Not decided yet: %s %s not settled; run about %lld more steps to tell a warmup from "
            "a leak.", names, strchr(names, ',') ? "have" : "has", (long long)more);
        return;
    }
    if (plat) {
        char sz[32];
        pl_format_value(plat->verdict.warmup_size, pl_metric_is_bytes(pm), sz, sizeof sz);
        snprintf(w, sizeof w, " (%s warms up for %lld steps, +%s, then stays flat)", pl_metric_name(pm),
                 (long long)plat->verdict.warmup_steps, sz);
        say(c, PL_DX_NO_LEAK, "No leak: memory warms up and plateaus%s.", w);
    } else {
        say(c, PL_DX_NO_LEAK, "No leak: memory is flat.");
    }
}

int pl_diagnosis_run(const pl_report_process_t *proc, const char *cut_reason, pl_finding_t *out, size_t max,
                     size_t *n_out) {
    if (!proc || !n_out || (max && !out)) return -EINVAL;
    ctx_t c = {.p = proc, .out = out, .max = max};
    if (cut_reason) {
        int64_t last = -1;
        for (int m = 0; m < PL_METRIC__COUNT; m++)
            if (M(&c, (pl_metric_t)m) && M(&c, (pl_metric_t)m)->verdict.last_step > last)
                last = M(&c, (pl_metric_t)m)->verdict.last_step;
        say(&c, PL_DX_CUT_SHORT, "The run was cut short (%s); the verdicts use what was recorded up to step %lld.",
            cut_reason, (long long)last);
    }
    size_t before = c.n;
    device_rules(&c);
    host_rules(&c);
    bool any_leak = false;
    for (int m = 0; m < PL_METRIC__COUNT; m++) any_leak |= leak(&c, (pl_metric_t)m);
    if (any_leak) {
        if (c.n == before) { /* a leak no rule explains (e.g. cgroup, shmem, pss alone) */
            for (int m = 0; m < PL_METRIC__COUNT; m++)
                if (leak(&c, (pl_metric_t)m)) {
                    char a[48];
                    say(&c, PL_DX_RSS_UNEXPLAINED, "%s grows %s and no finer metric explains it.",
                        pl_metric_name((pl_metric_t)m), rate(&c, (pl_metric_t)m, a, sizeof a));
                    break;
                }
        }
        impact(&c);
    } else {
        quiet(&c);
    }
    *n_out = c.n;
    return 0;
}
