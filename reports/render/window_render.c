/* reports/window_render: what grew between two steps (window.h), in text (what `plateau report --between` prints)
 * and as the JSON report's "between" field (docs/report-schema.md); the HTML report's section is render_html.c's.
 * Byte-identical output for identical input. */
#include "window.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "render.h"
#include "retention.h"

/* "+1.25 MiB" / "-3" / "0" */
const char *pl_window_signed(double v, bool bytes, char *buf, size_t size) {
    char a[32];
    if (!isfinite(v)) snprintf(buf, size, "?");
    else if (v == 0) snprintf(buf, size, "0");
    else snprintf(buf, size, "%s%s", v > 0 ? "+" : "-", pl_format_value(fabs(v), bytes, a, sizeof a));
    return buf;
}

/* "pid 4242 (python3 train.py)", "rank 1 (pid 4242, node gpu-3)" in a run of ranks */
const char *pl_window_who(const pl_run_t *run, const pl_extract_proc_t *p, char *buf, size_t size) {
    if (pl_report_is_rank(p->proc) && run->report->verdict.n_ranks >= 2)
        snprintf(buf, size, "rank %d (pid %u%s%s)", p->rank, p->pid, p->node[0] ? ", node " : "",
                 pl_format_esc(p->node));
    else
        snprintf(buf, size, "pid %u (%s)", p->pid, pl_format_esc(p->proc->name));
    return buf;
}

static bool shown(const pl_extract_proc_t *p) {
    pl_window_fit_t f = pl_window_fit(p);
    return f == PL_WINDOW_WHOLE || f == PL_WINDOW_CUT;
}

const pl_extract_window_t *pl_window_first(const pl_extract_t *x) {
    for (size_t i = 0; x && i < x->n_procs; i++)
        if (x->procs[i].window) return x->procs[i].window;
    return NULL;
}

/* ---- text ---- */

static void metrics_text(FILE *o, const pl_extract_proc_t *p, const pl_extract_window_t *w) {
    bool head = false;
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        if (!w->has_metric[m]) continue; /* judged by the analysis (pl_run_analyze) */
        const pl_window_metric_t v = w->metric[m];
        bool bytes = pl_metric_is_bytes((pl_metric_t)m);
        char a[32], b[32], c[32], d[32], e[48];
        if (!head) {
            fprintf(o, "  %-20s %12s %12s %12s %14s\n", "metric", "from", "to", "change", "per step");
            head = true;
        }
        snprintf(e, sizeof e, "%s/step", pl_window_signed(v.per_step, bytes, d, sizeof d));
        fprintf(o, "  %-20s %12s %12s %12s %14s", pl_metric_name((pl_metric_t)m), pl_format_value(v.from, bytes, a, sizeof a),
                pl_format_value(v.to, bytes, b, sizeof b), pl_window_signed(v.change, bytes, c, sizeof c),
                v.to_step > v.from_step ? e : "-");
        if (v.from_step != w->from_step || v.to_step != w->end_step) /* the series' points are not the window's ends */
            fprintf(o, "  (steps %lld..%lld)", (long long)v.from_step, (long long)v.to_step);
        if (pl_report_program_metric(p->proc, (pl_metric_t)m)) fputs("  [program memory]", o);
        fputc('\n', o);
    }
    if (!head) fputs("  no metric has samples by step in this window\n", o);
}

static void holders_text(FILE *o, const pl_extract_proc_t *p, const pl_extract_window_t *w) {
    size_t n = w->n_holders; /* judged by the analysis (pl_run_analyze) */
    const size_t *ix = w->holder;
    const double *g = w->holder_grow, *bg = w->holder_bytes_grow;
    if (!n) return;
    fputs("  holders that grew in the window (the Python census):\n", o);
    for (size_t k = 0; k < n; k++) {
        const pl_retention_holder_t *h = &p->retention->holders[ix[k]];
        char a[32];
        fprintf(o, "    `%s` (%s): +%.0f %s", pl_format_esc(h->path), pl_format_esc(h->what), g[k],
                h->by_nodes ? "autograd nodes" : "items");
        if (isfinite(bg[k]) && bg[k] > 0) fprintf(o, ", +%s of tensors", pl_format_bytes(bg[k], a, sizeof a));
        if (h->line > 0 && h->file[0]) {
            const char *b = strrchr(h->file, '/');
            fprintf(o, ", grown at %s:%d", pl_format_esc(b ? b + 1 : h->file), h->line);
        }
        fputc('\n', o);
    }
}

static void sites_text(FILE *o, const pl_extract_window_t *w) {
    char a[32], b[32];
    if (!w->n_sites) {
        fprintf(o, "  no call site's live bytes grew between step %lld and step %lld (sampled allocations)\n",
                (long long)w->from_step, (long long)w->end_step);
        return;
    }
    fprintf(o, "  call sites whose live bytes grew, largest first (sampled; %zu grew, +%s in all):\n", w->n_grew,
            pl_format_bytes(w->growth_bytes, a, sizeof a));
    for (size_t j = 0; j < w->n_sites; j++) {
        const pl_extract_site_t *st = &w->sites[j];
        fprintf(o, "  %zu. +%s (live %s at step %lld)", j + 1, pl_format_bytes(st->growth_bytes, a, sizeof a),
                pl_format_bytes(st->live_bytes, b, sizeof b), (long long)w->end_step);
        pl_render_site_text(o, st);
    }
}

/* One line for the processes left out for one reason: "left out, no steps (DataLoader workers, helpers): pid 9239
 * (python3 torch_lm.py), pid 9245 (...)", at most 8 named, then how many more. */
static void left_out_text(FILE *o, const pl_run_t *run, pl_window_fit_t why) {
    const pl_extract_t *x = run->ext;
    char name[256];
    size_t n = 0;
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *p = &x->procs[i];
        if (pl_window_fit(p) != why) continue;
        if (n == 8) {
            size_t more = 0;
            for (size_t j = i; j < x->n_procs; j++) more += pl_window_fit(&x->procs[j]) == why;
            fprintf(o, " and %zu more", more);
            break;
        }
        if (!n) fputs(why == PL_WINDOW_NO_STEPS ? "left out, no steps (a window is counted in steps): "
                                                : "left out, ended before the window: ", o);
        fprintf(o, "%s%s", n++ ? ", " : "", pl_window_who(run, p, name, sizeof name));
        if (why == PL_WINDOW_AFTER_END) fprintf(o, " at step %lld", (long long)p->window->last_step);
    }
    if (n) fputc('\n', o);
}

int pl_window_text(const pl_run_t *run, FILE *o) {
    if (!run || !run->report || !run->ext || !o) return -EINVAL;
    const pl_extract_t *x = run->ext;
    const pl_extract_window_t *w0 = pl_window_first(x);
    if (!w0) return -EINVAL;
    char name[256];
    fprintf(o, "what grew between step %lld and step %lld: %s\n", (long long)w0->from_step, (long long)w0->to_step,
            pl_format_esc(run->report->source));
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *p = &x->procs[i];
        if (!shown(p)) continue;
        const pl_extract_window_t *w = p->window;
        fprintf(o, "%s: step %lld -> %lld", pl_window_who(run, p, name, sizeof name), (long long)w->from_step,
                (long long)w->end_step);
        if (pl_window_fit(p) == PL_WINDOW_CUT)
            fprintf(o, " (its last step: it ended inside the window%s)", p->clean_end ? "" : ", without an end record");
        if (p->steps_auto) fputs(" (steps auto-detected from the allocation period)", o);
        fputc('\n', o);
        metrics_text(o, p, w);
        sites_text(o, w);
        holders_text(o, p, w);
    }
    left_out_text(o, run, PL_WINDOW_NO_STEPS);
    left_out_text(o, run, PL_WINDOW_AFTER_END);
    return ferror(o) ? -EIO : 0;
}

/* ---- JSON ---- */

void pl_window_json(pl_json_t *j, const pl_run_t *run) {
    const pl_extract_t *x = run ? run->ext : NULL;
    const pl_extract_window_t *w0 = pl_window_first(x);
    pl_json_key(j, "between");
    if (!w0) {
        pl_json_null(j);
        return;
    }
    static const char *const fits[] = {"whole", "cut", "after-end", "no-steps", "none"};
    pl_json_object_block(j);
    pl_json_kint(j, "from_step", w0->from_step);
    pl_json_kint(j, "to_step", w0->to_step);
    pl_json_key(j, "processes");
    pl_json_array_block(j);
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *p = &x->procs[i];
        const pl_extract_window_t *w = p->window;
        if (!w) continue;
        pl_json_object(j);
        pl_json_kuint(j, "pid", p->pid);
        pl_json_key(j, "node");
        pl_json_str_or_null(j, p->node[0] ? p->node : NULL);
        pl_json_key(j, "rank");
        if (p->rank >= 0) pl_json_int(j, p->rank);
        else pl_json_null(j);
        pl_json_kstr(j, "fit", fits[pl_window_fit(p)]);
        pl_json_key(j, "last_step");
        if (w->no_steps) pl_json_null(j);
        else pl_json_int(j, w->last_step);
        if (!shown(p)) {
            pl_json_end(j);
            continue;
        }
        pl_json_kint(j, "end_step", w->end_step);
        pl_json_break(j, 7);
        pl_json_key(j, "metrics");
        pl_json_array_block(j);
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            if (!w->has_metric[m]) continue; /* judged by the analysis (pl_run_analyze) */
            const pl_window_metric_t v = w->metric[m];
            pl_json_object(j);
            pl_json_kstr(j, "metric", pl_metric_name((pl_metric_t)m));
            pl_json_kbool(j, "program_memory", pl_report_program_metric(p->proc, (pl_metric_t)m));
            pl_json_kint(j, "from_step", v.from_step);
            pl_json_kint(j, "to_step", v.to_step);
            pl_json_knum(j, "from", v.from);
            pl_json_knum(j, "to", v.to);
            pl_json_knum(j, "change", v.change);
            pl_json_knum(j, "per_step", v.per_step);
            pl_json_knum(j, "peak", v.peak);
            pl_json_end(j);
        }
        pl_json_end(j);
        pl_json_key(j, "sites");
        pl_json_object(j);
        pl_json_kuint(j, "grew", w->n_grew);
        pl_json_knum(j, "growth_bytes", w->growth_bytes);
        pl_json_key(j, "top");
        pl_json_array_block(j);
        for (size_t k = 0; k < w->n_sites; k++) pl_render_site_json(j, &w->sites[k]);
        pl_json_end(j);
        pl_json_end(j);
        size_t n = w->n_holders; /* judged by the analysis (pl_run_analyze) */
        const size_t *ix = w->holder;
        const double *g = w->holder_grow, *bg = w->holder_bytes_grow;
        pl_json_key(j, "holders");
        pl_json_array(j);
        for (size_t k = 0; k < n; k++) {
            const pl_retention_holder_t *h = &p->retention->holders[ix[k]];
            pl_json_object(j);
            pl_json_kstr(j, "path", h->path);
            pl_json_kstr(j, "what", h->what);
            pl_json_kstr(j, "unit", h->by_nodes ? "autograd nodes" : "items");
            pl_json_knum(j, "growth", g[k]);
            pl_json_knum(j, "bytes_growth", bg[k]);
            pl_json_end(j);
        }
        pl_json_end(j);
        pl_json_end(j);
    }
    pl_json_end(j);
    pl_json_end(j);
}
