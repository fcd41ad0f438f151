/* reports/render_text: the terminal report: one line per metric (name, sparkline of the per-step baseline, last
 * value, verdict, the numbers behind it), then the diagnosis. Fits 120 columns for typical numbers. */
#include "render.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ending.h"
#include "format.h"
#include "retention_render.h"
#include "words.h"

static const char *blocks_utf8[8] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
static const char blocks_ascii[8] = {' ', '.', ':', '-', '=', '+', '*', '#'};

/* The sparkline of the per-step baseline, drawn over the whole series and scaled to the judged window: for a series
 * whose verdict judged a tail after a warmup (a leak or an undecided growth after a jump), the tail's lowest and
 * highest points are the bottom and top rows, and earlier points outside that range sit on the bottom or top row. So
 * a 136 KiB/step climb on a 360 MiB baseline reads as the climb it is, not as the first step's jump to 360 MiB
 * (which drew `\u2581\u2588\u2588\u2588...`). A plateau (warmup, then flat) and a flat series are scaled to the
 * whole series: their warmup is what they show. docs/verdict.md section 1, "sparklines". */
static void sparkline(FILE *out, const pl_series_t *s, const pl_verdict_t *v, int width, bool ascii) {
    pl_series_t c;
    if (s->n_points == 0 || pl_series_compact(s, (size_t)width, &c)) {
        fprintf(out, "%*s", width, "");
        return;
    }
    bool tail_only = v && v->kind != PL_VERDICT_PLATEAU && v->kind != PL_VERDICT_FLAT && v->tail_points >= 2 &&
                     v->tail_start_step > v->first_step;
    size_t n_in = 0;
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (size_t i = 0; i < c.n_points; i++) {
        if (tail_only && c.points[i].step < v->tail_start_step) continue;
        n_in++;
        if (c.points[i].base < lo) lo = c.points[i].base;
        if (c.points[i].base > hi) hi = c.points[i].base;
    }
    if (n_in < 2) { /* the tail is less than two characters wide: the whole series */
        lo = HUGE_VAL, hi = -HUGE_VAL;
        for (size_t i = 0; i < c.n_points; i++) {
            if (c.points[i].base < lo) lo = c.points[i].base;
            if (c.points[i].base > hi) hi = c.points[i].base;
        }
    }
    /* a range under 2 % of the level is drawn as what it is, nearly flat, instead of being stretched to full
     * height (noise on a flat series would otherwise look like a mountain range) */
    double range = hi - lo;
    if (range < 0.02 * fabs(hi)) range = 0.02 * fabs(hi);
    for (size_t i = 0; i < c.n_points; i++) {
        double f = range > 0 ? (c.points[i].base - lo) / range * 7.999 : 0;
        int k = f >= 7 ? 7 : f > 0 ? (int)f : 0; /* NaN, overflow and points outside the window land at the ends */
        if (ascii) fputc(blocks_ascii[k], out);
        else fputs(blocks_utf8[k], out);
    }
    for (size_t i = c.n_points; i < (size_t)width; i++) fputc(' ', out);
    pl_series_free(&c);
}

/* A rate per step, or per second for a series by time buckets (a bucket is not a step). */
static const char *rate(const pl_series_t *s, double per_step, bool bytes, char *buf, size_t size) {
    char a[32];
    if (s->by_time && s->bucket_ns > 0)
        snprintf(buf, size, "%s/s", pl_format_value(per_step * 1e9 / (double)s->bucket_ns, bytes, a, sizeof a));
    else
        snprintf(buf, size, "%s/step", pl_format_value(per_step, bytes, a, sizeof a));
    return buf;
}

/* "120 steps" or "2.0 min" for a count of steps (or time buckets) */
static const char *span(const pl_series_t *s, int64_t steps, char *buf, size_t size) {
    if (s->by_time && s->bucket_ns > 0) return pl_format_duration((double)steps * (double)s->bucket_ns / 1e9, buf, size);
    snprintf(buf, size, "%lld step%s", (long long)steps, steps == 1 ? "" : "s");
    return buf;
}

/* oom: say the projected OOM of a growing series (not for PSS, which moves with other processes, nor for a growth
 * too slow to matter: its time to the limit is said as such) */
static void details(FILE *out, const pl_report_metric_t *m, bool bytes, bool oom, bool slow) {
    const pl_verdict_t *v = &m->verdict;
    const pl_series_t *s = &m->series;
    char a[48], b[48], c[32];
    switch (v->kind) {
    case PL_VERDICT_PLATEAU:
        fprintf(out, "warmup %s (+%s), ", span(s, v->warmup_steps, c, sizeof c),
                pl_format_value(v->warmup_size, bytes, a, sizeof a));
        fprintf(out, "tail flat (%s over %s)", rate(s, v->slope_per_step, bytes, b, sizeof b),
                span(s, v->tail_steps, c, sizeof c));
        break;
    case PL_VERDICT_FLAT:
        fprintf(out, "flat (%s over %s)", rate(s, v->slope_per_step, bytes, a, sizeof a),
                span(s, v->tail_steps, c, sizeof c));
        break;
    case PL_VERDICT_LEAK:
        fprintf(out, "+%s", rate(s, v->slope_per_step, bytes, a, sizeof a));
        if (isfinite(v->per_hour)) fprintf(out, " (%s/h)", pl_format_value(v->per_hour, bytes, b, sizeof b));
        if (s->by_time) fprintf(out, " since %s", span(s, v->tail_start_step, c, sizeof c));
        else fprintf(out, " since step %lld", (long long)v->tail_start_step);
        if (v->has_oom && slow && isfinite(v->oom_seconds)) {
            fprintf(out, ", limit in ~%s: too slow to matter", pl_format_duration(v->oom_seconds, c, sizeof c));
        } else if (v->has_oom && oom) {
            if (s->by_time) fprintf(out, ", OOM");
            else fprintf(out, ", OOM at step %lld", (long long)v->oom_step);
            if (isfinite(v->oom_seconds)) fprintf(out, " (~%s)", pl_format_duration(v->oom_seconds, c, sizeof c));
        }
        break;
    case PL_VERDICT_INCONCLUSIVE:
        switch (v->undecided) {
        case PL_UNDECIDED_NO_DATA: fprintf(out, "too few points"); break;
        case PL_UNDECIDED_WARMUP: fprintf(out, "growing since the start (%s), may be warmup",
                                          rate(s, v->slope_per_step, bytes, a, sizeof a)); break;
        case PL_UNDECIDED_TAIL_SHORT: fprintf(out, "tail too short (%s)", span(s, v->tail_steps, c, sizeof c)); break;
        case PL_UNDECIDED_SETTLING: fprintf(out, "still settling (%s, slowing down)",
                                            rate(s, v->slope_per_step, bytes, a, sizeof a)); break;
        default: fprintf(out, "noisy (%s, not significant)", rate(s, v->slope_per_step, bytes, a, sizeof a)); break;
        }
        if (s->by_time) fprintf(out, "; ~%s longer", span(s, v->more_steps, c, sizeof c));
        else fprintf(out, "; ~%lld more steps", (long long)v->more_steps);
        break;
    }
    if (v->sawtooth_period > 0)
        fprintf(out, "; a sawtooth: memory freed every %s, judged on each period's low",
                span(s, v->sawtooth_period, c, sizeof c));
}

/* "  marks: step 3 eval-begin, step 9 \"epoch 2\"" under the metric lines: the first MARKS_SHOWN of them (the
 * JSON and the exports have all), by time ("at 12 s") for a process without steps. */
#define MARKS_SHOWN 8
static void marks_line(FILE *out, const pl_report_process_t *p) {
    if (!p->n_marks) return;
    bool by_time = true;
    for (int m = 0; m < PL_METRIC__COUNT; m++)
        if (p->metrics[m].present && !p->metrics[m].series.by_time) by_time = false;
    fputs("  marks:", out);
    for (size_t i = 0; i < p->n_marks && i < MARKS_SHOWN; i++) {
        const pl_report_mark_t *k = &p->marks[i];
        char d[32];
        if (by_time) fprintf(out, "%s at %s ", i ? "," : "", pl_format_duration((double)k->t_ns / 1e9, d, sizeof d));
        else fprintf(out, "%s step %lld ", i ? "," : "", (long long)k->step);
        fputs(k->label[0] ? pl_format_esc(k->label) : "(no label)", out);
    }
    uint64_t more = (uint64_t)(p->n_marks > MARKS_SHOWN ? p->n_marks - MARKS_SHOWN : 0) + p->n_marks_dropped;
    if (more) fprintf(out, ", and %llu more", (unsigned long long)more);
    fputc('\n', out);
}

/* "78 short helper processes: bash 61, env 9, readlink 8; none leaks": counts by name, most frequent first (ties by
 * name), the first 8 names, then "N others". */
static void helpers_line(const pl_report_t *r, const pl_run_view_t *v, FILE *out) {
    size_t n_helpers = v->n_helpers;
    typedef struct { const char *name; size_t n; } count_t;
    count_t c[32];
    size_t n_c = 0, n_other = 0;
    for (size_t i = 0; i < r->n_procs; i++) {
        const pl_report_process_t *p = r->procs[i];
        if (v->fold[i] != PL_FOLD_HELPER) continue;
        size_t k = 0;
        while (k < n_c && strcmp(c[k].name, p->name)) k++;
        if (k < n_c) c[k].n++;
        else if (n_c < sizeof c / sizeof c[0]) c[n_c++] = (count_t){p->name, 1};
        else n_other++;
    }
    for (size_t i = 1; i < n_c; i++) /* insertion sort: n_c <= 32 */
        for (size_t j = i; j > 0 && (c[j].n > c[j - 1].n || (c[j].n == c[j - 1].n && strcmp(c[j].name, c[j - 1].name) < 0));
             j--) {
            count_t t = c[j];
            c[j] = c[j - 1];
            c[j - 1] = t;
        }
    fprintf(out, "%zu short helper process%s:", n_helpers, n_helpers > 1 ? "es" : "");
    for (size_t k = 0; k < n_c; k++) {
        if (k == 8) {
            for (size_t m = 8; m < n_c; m++) n_other += c[m].n;
            break;
        }
        fprintf(out, "%s %s %zu", k ? "," : "", c[k].name[0] ? c[k].name : "?", c[k].n);
    }
    if (n_other) fprintf(out, ", %zu other%s", n_other, n_other > 1 ? "s" : "");
    fprintf(out, "; none leaks (no steps, under 1 s, under 64 MiB RSS; --all-processes shows them)\n");
}

/* The report's own section, folding the rows the view folds (all processes in full with --all-processes). */
static int text_report(const pl_report_t *r, const pl_run_view_t *v, FILE *out, const pl_render_text_opts_t *opts) {
    int width = opts && opts->spark_width ? opts->spark_width : 24;
    if (width < 4) width = 4;
    if (width > 80) width = 80;
    bool ascii = opts && opts->ascii;
    fprintf(out, "%s\n", pl_format_esc(r->verdict.line));
    fprintf(out, "plateau report: %s\n", r->source[0] ? pl_format_esc(r->source) : "(in-memory)");
    if (r->cut_short) fprintf(out, "run cut short: %s\n", pl_format_esc(r->cut_reason));
    bool all = opts && opts->all_processes;
#define folded(i) (!all && v->fold[i] != PL_FOLD_NONE)
    for (size_t i = 0; i < r->n_procs; i++) {
        const pl_report_process_t *p = r->procs[i];
        if (folded(i)) continue; /* said on the workers', helpers', pools' and generations' lines */
        fprintf(out, "process %lld", (long long)p->pid);
        if (p->name[0]) fprintf(out, " %s", pl_format_esc(p->name));
        if (p->rank >= 0 && p->node[0]) fprintf(out, " (rank %d, node %s)", p->rank, pl_format_esc(p->node));
        else if (p->rank >= 0) fprintf(out, " (rank %d)", p->rank);
        fputc('\n', out);
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            const pl_report_metric_t *mt = &p->metrics[m];
            if (!mt->present) continue;
            bool bytes = pl_metric_is_bytes((pl_metric_t)m);
            char last[32];
            fprintf(out, "  %-13s ", pl_metric_name((pl_metric_t)m));
            sparkline(out, &mt->series, &mt->verdict, width, ascii);
            fprintf(out, " %10s  %-12s ", pl_format_value(mt->verdict.last_value, bytes, last, sizeof last),
                    pl_report_metric_label(p, (pl_metric_t)m));
            const char *label = pl_report_metric_label(p, (pl_metric_t)m);
            details(out, mt, bytes, m != PL_METRIC_PSS, !strcmp(label, "slow growth"));
            fputc('\n', out);
        }
        marks_line(out, p);
        if (p->n_findings) fprintf(out, "diagnosis:\n");
        for (size_t k = 0; k < p->n_findings; k++) fprintf(out, "  - %s\n", pl_format_esc(p->findings[k].text));
    }
    char line[400];
    if (!all && pl_run_view_workers_line(v, line, sizeof line)) fprintf(out, "%s\n", line);
    if (!all && v->n_helpers) helpers_line(r, v, out);
    if (pl_report_cow_line(r, line, sizeof line)) fprintf(out, "%s\n", line);
    for (size_t i = 0; i < r->n_procs; i++) { /* quiet pools: one line each */
        const pl_report_process_t *p = r->procs[i];
        const pl_report_metric_t *mt = &p->metrics[PL_METRIC_HEAP_BYTES];
        if (!folded(i) || v->fold[i] != PL_FOLD_POOL || !mt->present) continue;
        fprintf(out, "workers of pid %lld as a pool (%zu that live through its steps), heap.bytes summed per step: ",
                (long long)p->pid, p->n_pool);
        details(out, mt, true, true, false);
        fputs("\n", out);
    }
    for (size_t i = 0; i < r->n_procs; i++) /* quiet generations of short-lived workers: their one finding */
        if (folded(i) && v->fold[i] == PL_FOLD_GENERATIONS && r->procs[i]->n_findings)
            fprintf(out, "generations: %s\n", pl_format_esc(r->procs[i]->findings[0].text));
#undef folded
    return ferror(out) ? -EIO : 0;
}

int pl_render_text(const pl_report_t *r, FILE *out, const pl_render_text_opts_t *opts) {
    if (!r || !out) return -EINVAL;
    pl_run_view_t v;
    if (pl_run_view_make(r, NULL, &v)) return -ENOMEM;
    int rc = text_report(r, &v, out, opts);
    pl_run_view_free(&v);
    return rc;
}

/* ---- the run's lines: processes, ranks, sites, damage ---- */

/* "+1.00 MiB/step heap.bytes" of a leaking / slowly growing process, "-" otherwise */
static const char *growth_text(const pl_report_process_t *p, char *buf, size_t size) {
    const pl_proc_verdict_t *v = &p->verdict;
    if (!pl_pverdict_grows(v->kind) || v->metric < 0) return "-";
    char a[32];
    bool bytes = pl_metric_is_bytes((pl_metric_t)v->metric);
    if (v->by_time && v->bucket_s > 0)
        snprintf(buf, size, "+%s/s %s", pl_format_value(v->per_step / v->bucket_s, bytes, a, sizeof a),
                 pl_metric_name((pl_metric_t)v->metric));
    else
        snprintf(buf, size, "+%s/step %s", pl_format_value(v->per_step, bytes, a, sizeof a),
                 pl_metric_name((pl_metric_t)v->metric));
    return buf;
}

/* The process verdict (diagnosis.c), not "any metric": allocator retention, file pages and PSS never leak. */
static bool proc_leaks(const pl_report_process_t *p) { return p->verdict.kind == PL_PV_LEAK; }

/* One row per rank (docs/verdict.md §9), in the view's order, and the sentence on whether the ranks agree, when the
 * run has >= 2 ranks. */
static void ranks_text(const pl_report_t *r, const pl_extract_t *x, const pl_run_view_t *v, FILE *o) {
    size_t n = v->n_ranks;
    if (n >= 2) {
        const pl_run_verdict_t *rv = &r->verdict;
        fprintf(o, "ranks: %zu on %zu node%s: %s\n", n, rv->n_nodes, rv->n_nodes == 1 ? "" : "s",
                pl_format_esc(rv->ranks_line));
        fprintf(o, "  %5s %5s %-16s %8s %7s  %-12s %s\n", "rank", "local", "node", "pid", "steps", "verdict", "growth");
        for (size_t k = 0; k < n; k++) {
            const pl_extract_proc_t *p = &x->procs[v->ext_of[v->rank_rows[k]]];
            char lr[16], g[64];
            if (p->local_rank >= 0) snprintf(lr, sizeof lr, "%d", p->local_rank);
            else snprintf(lr, sizeof lr, "-");
            fprintf(o, "  %5d %5s %-16.64s %8u %7llu  %-12s %s\n", p->rank, lr, p->node[0] ? pl_format_esc(p->node) : "-",
                    p->pid, (unsigned long long)p->n_steps, pl_pverdict_name(p->proc->verdict.kind),
                    growth_text(p->proc, g, sizeof g));
        }
    }
}

void pl_render_site_text(FILE *o, const pl_extract_site_t *st) {
    if (!st->py_name) {
        fputc('\n', o);
        for (size_t f = 0; f < st->n_frames; f++) fprintf(o, "       %s %s\n", f ? "<-" : "at", pl_format_esc(st->frames[f]));
        return;
    }
    /* a Python site: the user's line, its Python stack, then the first native frames (all in --json) */
    fprintf(o, " %s", pl_format_esc(st->py_name));
    if (st->py_source) fprintf(o, ": `%s`", pl_format_esc(st->py_source));
    fputc('\n', o);
    for (size_t f = 0; f < st->n_py; f++) fprintf(o, "       %s %s\n", f ? "<-" : "py", pl_format_esc(st->py_short[f]));
    size_t shown = st->n_frames < 3 ? st->n_frames : 3;
    for (size_t f = 0; f < shown; f++) fprintf(o, "       %s %s\n", f ? "<-" : "c ", pl_format_esc(st->frames[f]));
    if (st->n_frames > shown)
        fprintf(o, "       <- ... (%zu more native frames in --json)\n", st->n_frames - shown);
}

/* The call-site section of a process whose device metric grows (pl_run_sites): the segments its caching allocator
 * took from the driver, by the line whose request made it take one. */
static void dev_sites_text(FILE *o, const pl_report_t *r, const pl_extract_proc_t *p, const pl_run_sites_t *v) {
    char a[32], b[32], rk[128] = "";
    if (pl_report_is_rank(p->proc) && r->verdict.n_ranks >= 2)
        snprintf(rk, sizeof rk, "rank %d%s%s, ", p->rank, p->node[0] ? " on " : "",
                 p->node[0] ? pl_format_esc(p->node) : "");
    const char *unit = p->n_steps ? "step" : "second";
    fprintf(o, "device call sites by growth of device memory taken from the driver (%spid %u, %s, since %s %lld):\n",
            rk, p->pid, v->metric, unit, (long long)v->since);
    fprintf(o, "  (a caching allocator takes device memory a segment at a time: each site is the line whose request "
               "made it take one, not the tensors it keeps)\n");
    if (!v->n) {
        fprintf(o, "  no device memory was taken from the driver since %s %lld: the growth is inside segments "
                   "already taken\n", unit, (long long)v->since);
        return;
    }
    char line[512];
    if (pl_run_dev_site_sentence(v, p->n_steps > 0, line, sizeof line)) fprintf(o, "  %s\n", line);
    for (size_t j = 0; j < v->n; j++) {
        const pl_extract_site_t *st = &v->sites[j];
        fprintf(o, "  %zu. +%s (live %s)", j + 1, pl_format_bytes(st->growth_bytes, a, sizeof a),
                pl_format_bytes(st->live_bytes, b, sizeof b));
        pl_render_site_text(o, st);
    }
}

/* The run's lines (pl_render_run_lines), with the view of the run (which rows fold). */
static int run_lines(const pl_run_t *run, const pl_run_view_t *view, FILE *o, bool all) {
    const pl_report_t *r = run->report;
    const pl_extract_t *x = run->ext;
    char a[32], b[32];
    size_t n_leak;
    pl_run_leaking(x, &n_leak);
    if (x->n_procs > 1) {
        char totals[256];
        pl_run_totals_phrase(&view->totals, totals, sizeof totals);
        fprintf(o, "run: %zu processes, %s\n", x->n_procs, totals);
        fprintf(o, "  %8s %8s %5s %7s %10s  %-12s %s\n", "pid", "ppid", "rank", "steps", "PSS", "verdict", "command");
        /* the PSS column: "-" for a process without a PSS sample (it lived < 5 s, or PSS was off); a folded row
         * sums the PSS of those of its processes that have one */
        size_t n_quiet = 0, n_helpers = 0, n_quiet_pss = 0, n_helper_pss = 0, n_looped = 0;
        unsigned long long quiet_steps = 0; /* steps of folded workers whose loop period detection found */
        double quiet_pss = 0, helper_pss = 0;
        for (size_t i = 0; i < x->n_procs; i++) {
            const pl_extract_proc_t *p = &x->procs[i];
            double v = pl_run_last_base(p->proc, PL_METRIC_PSS);
            if (!all && pl_run_view_hides(view, view->row_of[i])) {
                size_t row = view->row_of[i];
                bool helper = view->fold[row] == PL_FOLD_HELPER;
                if (helper) n_helpers++;
                else n_quiet++;
                if (!helper && view->looped[row]) {
                    n_looped++;
                    quiet_steps += p->n_steps;
                }
                if (isfinite(v)) {
                    *(helper ? &helper_pss : &quiet_pss) += v;
                    ++*(helper ? &n_helper_pss : &n_quiet_pss);
                }
                continue;
            }
            char rank[16];
            if (p->rank >= 0) snprintf(rank, sizeof rank, "%d", p->rank);
            else snprintf(rank, sizeof rank, "-");
            fprintf(o, "  %8u %8u %5s %7llu %10s  %-12s %.60s%s\n", p->pid, p->ppid, rank,
                    (unsigned long long)p->n_steps, isfinite(v) ? pl_format_bytes(v, a, sizeof a) : "-",
                    pl_pverdict_name(p->proc->verdict.kind), pl_format_esc(p->cmdline[0] ? p->cmdline : p->proc->name),
                    p->running ? "  [running]" : p->damaged ? "  [damaged]" : p->clean_end ? "" : "  [no end record]");
        }
        if (n_quiet) {
            char steps[24], what[96];
            snprintf(steps, sizeof steps, "%llu", quiet_steps);
            if (!n_looped) snprintf(what, sizeof what, "that never step");
            else if (n_looped == n_quiet)
                snprintf(what, sizeof what, "whose loop%s period detection found", n_quiet > 1 ? "s" : "");
            else
                snprintf(what, sizeof what, "(%zu whose loop%s period detection found)", n_looped,
                         n_looped > 1 ? "s" : "");
            fprintf(o, "  %8s %8s %5s %7s %10s  %-12s %zu worker process%s %s, none leaks\n", "...", "", "", steps,
                    n_quiet_pss ? pl_format_bytes(quiet_pss, a, sizeof a) : "-", "no-leak", n_quiet,
                    n_quiet > 1 ? "es" : "", what);
        }
        if (n_helpers)
            fprintf(o, "  %8s %8s %5s %7s %10s  %-12s %zu short helper process%s, none leaks (--all-processes)\n",
                    "...", "", "", "0", n_helper_pss ? pl_format_bytes(helper_pss, a, sizeof a) : "-", "no-leak", n_helpers,
                    n_helpers > 1 ? "es" : "");
    }
    if (n_leak) {
        fprintf(o, "leaking: ");
        size_t k = 0;
        for (size_t i = 0; i < x->n_procs; i++)
            if (proc_leaks(x->procs[i].proc) && pl_report_is_rank(x->procs[i].proc) && r->verdict.n_ranks >= 2)
                fprintf(o, "%srank %d (pid %u%s%s)", k++ ? ", " : "", x->procs[i].rank, x->procs[i].pid,
                        x->procs[i].node[0] ? ", node " : "", pl_format_esc(x->procs[i].node));
            else if (proc_leaks(x->procs[i].proc))
                fprintf(o, "%spid %lld (%s)", k++ ? ", " : "", (long long)x->procs[i].proc->pid,
                        pl_format_esc(x->procs[i].proc->name));
        fputc('\n', o);
    }
    ranks_text(r, x, view, o);
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *p = &x->procs[i];
        pl_retention_text(o, p->pid, p->retention, /* who keeps it (reports/retention_render.c) */
                          pl_pverdict_grows(p->proc->verdict.kind));
        if (p->steps_auto) /* period detection */
            fprintf(o, "pid %u: steps auto-detected, period %.0f allocations / %.3g ms, confidence %.2f\n", p->pid,
                    p->auto_period_allocs, p->auto_period_ms, p->auto_confidence);
        if (p->n_cupti_dev_allocs) /* hooks vs CUPTI memory activity */
            fprintf(o, "pid %u: device allocations: hooks %llu (%s), CUPTI %llu (%s): %s\n", p->pid,
                    (unsigned long long)p->n_hook_dev_allocs, pl_format_bytes((double)p->hook_dev_alloc_bytes, a, sizeof a),
                    (unsigned long long)p->n_cupti_dev_allocs,
                    pl_format_bytes((double)p->cupti_dev_alloc_bytes, b, sizeof b),
                    pl_run_crosscheck_agrees(p) ? "agree" : "DIFFER (a hook missed calls, or CUPTI dropped records)");
        if (p->damaged) fprintf(o, "damaged trace, partial report: %s\n", pl_format_esc(p->error));
        if (p->n_lost_records) { /* the writer could not keep up (docs/env.md, PLATEAU_SAMPLE_BYTES) */
            fprintf(o, "pid %u: the trace lost %llu records", p->pid, (unsigned long long)p->n_lost_records);
            if (p->n_host_events)
                fprintf(o, " (%.1f%% of host allocation events)",
                        100.0 * (double)p->n_lost_records / (double)p->n_host_events);
            fprintf(o, ": stacks and counts may be incomplete\n");
        }
        if (p->n_agg_pairs || p->n_agg_samples) { /* a bounded trace (docs/long-runs.md): what was counted instead */
            fprintf(o, "pid %u: bounded trace:", p->pid);
            if (p->n_agg_pairs)
                fprintf(o, " %llu sampled allocations freed within their step (%s, steps %llu-%llu)",
                        (unsigned long long)p->n_agg_pairs, pl_format_bytes((double)p->agg_pair_bytes, a, sizeof a),
                        (unsigned long long)p->agg_step_first + 1, (unsigned long long)p->agg_step_last + 1);
            if (p->n_agg_samples)
                fprintf(o, "%s %llu periodic samples between each step's first, last, lowest and highest",
                        p->n_agg_pairs ? " and" : "", (unsigned long long)p->n_agg_samples);
            fprintf(o, " were counted, not kept; totals, sites and verdicts do not depend on them\n");
        }
        if (p->capped) /* the size limit (docs/long-runs.md): what follows is not in the trace, nor in the verdict */
            fprintf(o, "pid %u: the trace reached its size limit (PLATEAU_TRACE_MAX) at step %llu: %llu records (%s) "
                       "of steps %llu-%llu were not written; this report covers steps up to %llu\n",
                    p->pid, (unsigned long long)p->cap_step, (unsigned long long)p->cap_records,
                    pl_format_bytes((double)p->cap_bytes, a, sizeof a), (unsigned long long)p->cap_step + 1,
                    (unsigned long long)p->cap_last_step + 1, (unsigned long long)p->cap_step);
        pl_run_sites_t dv;
        if (proc_leaks(p->proc) && pl_run_sites(p, &dv)) { /* a device leak: its device sites */
            dev_sites_text(o, r, p, &dv);
            continue;
        }
        if (!p->n_sites || !proc_leaks(p->proc)) continue; /* growth during a warmup is not a finding */
        char rk[128] = ""; /* in a run of ranks, pids of different nodes may be equal */
        if (pl_report_is_rank(p->proc) && r->verdict.n_ranks >= 2)
            snprintf(rk, sizeof rk, "rank %d%s%s, ", p->rank, p->node[0] ? " on " : "",
                     p->node[0] ? pl_format_esc(p->node) : "");
        fprintf(o, "call sites by live-byte growth (%spid %u, sampled, since %s %lld):\n", rk, p->pid,
                p->n_steps ? "step" : "second", (long long)p->site_tail_step);
        if (p->proc->site_line[0]) fprintf(o, "  %s\n", p->proc->site_line); /* the line to look at first */
        for (size_t j = 0; j < p->n_sites; j++) {
            const pl_extract_site_t *st = &p->sites[j];
            fprintf(o, "  %zu. +%s (live %s)", j + 1, pl_format_bytes(st->growth_bytes, a, sizeof a),
                    pl_format_bytes(st->live_bytes, b, sizeof b));
            pl_render_site_text(o, st);
        }
    }
    pl_end_text(run, o); /* how the processes that did not end cleanly ended (reports/ending.c) */
    if (x->n_files_failed) { /* every one named, up to PL_EXTRACT_FAILED_NAMED, then counted */
        fprintf(o, "skipped %zu file%s:", x->n_files_failed, x->n_files_failed == 1 ? "" : "s");
        for (size_t i = 0; i < x->n_failed_named; i++) fprintf(o, "%s %s", i ? ";" : "", pl_format_esc(x->failed[i]));
        if (x->n_files_failed > x->n_failed_named) fprintf(o, "; and %zu more", x->n_files_failed - x->n_failed_named);
        fputc('\n', o);
    }
    return ferror(o) ? -EIO : 0;
}

int pl_render_run_lines(const pl_run_t *run, FILE *o, bool all) {
    if (!run || !run->report || !run->ext || !o) return -EINVAL;
    pl_run_view_t v;
    if (pl_run_view_make(run->report, run->ext, &v)) return -ENOMEM;
    int rc = run_lines(run, &v, o, all);
    pl_run_view_free(&v);
    return rc;
}

int pl_render_run_text(const pl_run_t *run, FILE *o, const pl_render_text_opts_t *opts) {
    if (!run || !run->report || !o) return -EINVAL;
    if (!run->ext) { /* the report's section, then the run's lines refuse */
        int rc = pl_render_text(run->report, o, opts);
        return rc ? rc : -EINVAL;
    }
    pl_run_view_t v; /* one view for both parts */
    if (pl_run_view_make(run->report, run->ext, &v)) return -ENOMEM;
    int rc = text_report(run->report, &v, o, opts);
    if (!rc) rc = run_lines(run, &v, o, opts && opts->all_processes);
    pl_run_view_free(&v);
    return rc;
}
