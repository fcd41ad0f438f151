/* reports/render/words: the sentences only the renderers say (see words.h). */
#include "words.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "pysites.h"

/* append to a NUL-terminated buffer, cut at its size */
static void cat(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cat(char *buf, size_t size, const char *fmt, ...) {
    size_t len = strnlen(buf, size);
    if (len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

size_t pl_report_cow_line(const pl_report_t *r, char *buf, size_t size) {
    if (!size) return 0;
    buf[0] = 0;
    size_t n = 0;
    double rise = 0, ceiling = 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; r && i < r->n_procs; i++) {
        const pl_report_process_t *p = r->procs[i];
        if (p->role != PL_ROLE_WORKER || !(p->verdict.cow_rise > 0)) continue;
        n++;
        rise += p->verdict.cow_rise;
        ceiling += p->verdict.cow_ceiling;
        if (p->pid < lo) lo = p->pid;
        if (p->pid > hi) hi = p->pid;
    }
    if (!n) return 0;
    char a[32], b[32];
    cat(buf, size, "copy-on-access in %zu forked worker%s (", n, n > 1 ? "s" : "");
    if (lo == hi) cat(buf, size, "pid %lld", (long long)lo);
    else cat(buf, size, "pids %lld..%lld", (long long)lo, (long long)hi);
    cat(buf, size, "): PSS +%s%s while %s RSS and live heap stay flat, ceiling %s%s; not a leak: %s the "
        "parent's pages as %s its Python objects (keep the data in numpy arrays or tensors, or use fewer workers)",
        pl_format_bytes(rise, a, sizeof a), n > 1 ? " in all" : "", n > 1 ? "their" : "its",
        pl_format_bytes(ceiling, b, sizeof b), n > 1 ? " in all" : "", n > 1 ? "they copy" : "it copies",
        n > 1 ? "they read" : "it reads");
    return n;
}

int pl_run_totals_phrase(const pl_run_totals_t *t, char *buf, size_t n) {
    char a[32], b[32];
    pl_format_bytes(t->pss_bytes, a, sizeof a);
    pl_format_bytes(t->rss_bytes, b, sizeof b);
    switch (t->kind) {
    case PL_TOTALS_PSS: return snprintf(buf, n, "total PSS %s (RSS %s, shared pages counted once per process)", a, b);
    case PL_TOTALS_RSS:
        return snprintf(buf, n, "total RSS %s; no PSS sample (a process's first comes 5 s after it starts; "
                                "PLATEAU_PSS=0 turns them off)", b);
    default:
        return snprintf(buf, n, "total PSS %s over the %zu with a PSS sample (a process's first comes 5 s after it "
                                "starts; RSS %s, shared pages counted once per process)", a, t->n_pss, b);
    }
}

size_t pl_run_view_workers_line(const pl_run_view_t *v, char *buf, size_t size) {
    if (!size) return 0;
    buf[0] = 0;
    size_t n = v->n_workers, n_loop = v->n_workers_looped, n_never = n - n_loop;
    if (!n) return 0;
    /* a worker whose loop was found steps (on synthetic steps): "never step" is said only of those that do not */
    if (!n_loop) cat(buf, size, "workers (%zu process%s that never step", n, n > 1 ? "es" : "");
    else if (!n_never)
        cat(buf, size, "workers (%zu process%s whose loop%s period detection found", n, n > 1 ? "es" : "",
            n > 1 ? "s" : "");
    else
        cat(buf, size, "workers (%zu processes: %zu whose loop%s period detection found, %zu that never step%s", n,
            n_loop, n_loop > 1 ? "s" : "", n_never, n_never > 1 ? "" : "s");
    if (v->workers_pid_lo == v->workers_pid_hi) cat(buf, size, ", pid %lld", (long long)v->workers_pid_lo);
    else cat(buf, size, ", pids %lld..%lld", (long long)v->workers_pid_lo, (long long)v->workers_pid_hi);
    cat(buf, size, "): none leaks; %zu flat", n - v->n_workers_undecided - v->n_workers_nodata);
    if (v->n_workers_undecided)
        cat(buf, size, ", %zu not decided on their own (short-lived or noisy)", v->n_workers_undecided);
    if (v->n_workers_nodata) cat(buf, size, ", %zu too brief to judge", v->n_workers_nodata);
    return n;
}

static const char *bytes_text(double v, char *buf, size_t n) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double a = fabs(v);
    while (a >= 1024 && u < 4) {
        a /= 1024;
        v /= 1024;
        u++;
    }
    if (u == 0) snprintf(buf, n, "%.0f B", v);
    else snprintf(buf, n, "%.1f %s", v, unit[u]);
    return buf;
}

size_t pl_retention_holder_phrase(const pl_retention_holder_t *h, char *buf, size_t n) {
    char growth[160], kept[64] = "", a[32], b[32];
    double per = h->size_per_step;
    const char *unit = h->by_nodes ? (per == 1 ? "node" : "nodes") : (per == 1 ? "item" : "items");
    if (h->by_nodes)
        snprintf(growth, sizeof growth, "a tensor whose autograd graph grows %.3g %s/step", per, unit);
    else if (!isnan(h->nodes_per_step) && h->nodes_per_step > 0) /* the items' graphs are kept too */
        snprintf(growth, sizeof growth, "%s, +%.3g %s/step, holding autograd graphs (+%.3g nodes/step)", h->kind,
                 per, unit, h->nodes_per_step);
    else
        snprintf(growth, sizeof growth, "%s, +%.3g %s/step", h->kind, per, unit);
    if (h->bytes_last != PL_TRACE_NA && h->bytes_last > 0) {
        snprintf(kept, sizeof kept, ", %s%s of tensors%s", h->flags & PL_RETENTION_ESTIMATED ? "~" : "",
                 bytes_text((double)h->bytes_last, a, sizeof a),
                 !isnan(h->bytes_per_step) && h->bytes_per_step > 0 ? "" : "");
        if (!isnan(h->bytes_per_step) && h->bytes_per_step > 0) {
            size_t k = strlen(kept);
            snprintf(kept + k, sizeof kept - k, " (+%s/step)", bytes_text(h->bytes_per_step, b, sizeof b));
        }
    }
    char at[400] = "";
    if (h->alloc_at[0])
        snprintf(at, sizeof at, "; it holds memory allocated at %.256s (%u of its %u largest storages are sampled "
                 "allocations there)", h->alloc_at, h->alloc_hits, h->n_ranges);
    int len = snprintf(buf, n, "`%s` (%s): %s%s%.400s%s", h->path, h->what, growth, kept, h->fix_line, at);
    return len < 0 ? 0 : (size_t)len >= n ? n - 1 : (size_t)len;
}

const char *pl_report_metric_label(const pl_report_process_t *p, pl_metric_t m) {
    const pl_verdict_t *v = &p->metrics[m].verdict;
    if (v->kind != PL_VERDICT_LEAK) return pl_verdict_name(v->kind);
    if (!p->metrics[m].matters) return "slow growth"; /* as the analysis judged it (pl_report_analyze) */
    return pl_report_program_metric(p, m) ? "leak" : "grows";
}

size_t pl_run_dev_site_sentence(const pl_run_sites_t *v, bool by_step, char *buf, size_t n) {
    if (!n) return 0;
    buf[0] = 0;
    if (!v->device || !v->n) return 0;
    const pl_extract_site_t *top = &v->sites[0];
    char at[200];
    if (top->py_name)
        snprintf(at, sizeof at, "%s:%d%s%s%s", pl_pysite_short(top->py_file), top->py_line,
                 top->py_source ? " (`" : "", top->py_source ? top->py_source : "", top->py_source ? "`)" : "");
    else
        snprintf(at, sizeof at, "%s", top->n_frames ? top->frames[0] : "an unnamed stack");
    /* No Python frame: the request came from a thread running no Python (on an H200 with torch 2.11, the autograd
     * engine's thread during backward took the segments a leak of the main thread's tensors filled): the request
     * that makes the allocator take a segment need not be the line that keeps the memory. */
    int w = snprintf(buf, n, "%.0f%% of the device memory taken from the driver since %s %lld was requested at %s%s",
                     100 * top->share, by_step ? "step" : "second", (long long)v->since, at,
                     top->py_name || !v->python ? "" : " on a thread running no Python (e.g. torch's autograd engine): a segment "
                                         "is taken by whichever request finds no free block, not necessarily by "
                                         "the line that keeps it");
    if (w < 0) {
        buf[0] = 0;
        return 0;
    }
    return (size_t)w < n ? (size_t)w : n - 1;
}
