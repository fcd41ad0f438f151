/* reports/render_html: the HTML report (render_html.h). Every string from the trace is escaped (it may be hostile:
 * argv, symbols, file names); numbers that are not finite are drawn as nothing. Charts are 720x200 SVG in user
 * units: x = step from first to last step, y = min(baseline)..max(peak) of the compacted series, padded. No JavaScript, so a browser
 * has nothing to log on the console. */
#include "render_html.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "config.h"
#include "export.h"
#include "format.h"
#include "retention_render.h"
#include "window.h"
#include "ending.h"

#define CHART_W 720.0
#define CHART_H 200.0
#define PAD_L 70.0
#define PAD_R 10.0
#define PAD_T 10.0
#define PAD_B 24.0
#define CHART_POINTS 360

static void esc(FILE *o, const char *s) {
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", o); break;
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '"': fputs("&quot;", o); break;
        case '\'': fputs("&#39;", o); break;
        default:
            if (*p < 0x20 && *p != '\n' && *p != '\t') fputc('?', o);
            else fputc(*p, o);
        }
    }
}

static const char *css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}"
    "h1{font-size:20px}h2{font-size:17px;margin-top:28px}h3{font-size:14px;margin:14px 0 4px}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;"
    "vertical-align:top}th{background:#f3f3f3}.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".leak{color:#b00;font-weight:bold}.plateau{color:#06c}.flat{color:#080}.inconclusive{color:#a60}"
    ".cut{background:#fee;border:1px solid #b00;padding:8px;margin:8px 0}"
    ".dx li{margin:4px 0}code{font-size:12px}svg{display:block;margin:4px 0 12px;border:1px solid #ddd}"
    ".legend{font-size:12px;color:#555}";

static double xs(double step, double s0, double s1) {
    double span = s1 > s0 ? s1 - s0 : 1;
    return PAD_L + (step - s0) / span * (CHART_W - PAD_L - PAD_R);
}

static double ys(double v, double lo, double hi) {
    double span = hi > lo ? hi - lo : 1;
    double y = CHART_H - PAD_B - (v - lo) / span * (CHART_H - PAD_T - PAD_B);
    if (y < 0) y = 0;
    if (y > CHART_H) y = CHART_H;
    return y;
}

/* The process's plateau_mark() points inside the chart's range [s0, s1] (steps, or time buckets): a purple dotted
 * vertical line each with its label (escaped) as a tooltip, and as text at the top in the first of MARK_ROWS rows
 * where it does not overlap the label before it (cut to MARK_TEXT_CHARS characters; none when every row is taken:
 * the tooltip still names it). Widths are estimated at 5.5 user units a character (font-size 10). */
#define MARK_ROWS 3
#define MARK_TEXT_CHARS 18
static void chart_marks(FILE *o, const pl_report_process_t *p, const pl_series_t *s, double s0, double s1) {
    double row_end[MARK_ROWS];
    for (int i = 0; i < MARK_ROWS; i++) row_end[i] = -HUGE_VAL;
    for (size_t i = 0; i < p->n_marks; i++) {
        const pl_report_mark_t *k = &p->marks[i];
        double at = s->by_time ? (s->bucket_ns > 0 ? (double)k->t_ns / (double)s->bucket_ns : NAN) : (double)k->step;
        if (!(at >= s0 && at <= s1)) continue;
        double x = xs(at, s0, s1);
        char label[3 * sizeof k->label];
        pl_export_utf8(k->label, label, sizeof label); /* a label cut inside a character */
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#84c\" stroke-width=\"1\" "
                   "stroke-dasharray=\"2,2\"><title>mark ", x, PAD_T, x, CHART_H - PAD_B);
        esc(o, label);
        fputs("</title></line>\n", o);
        size_t n_chars = 0, cut = 0; /* cut: bytes of the first MARK_TEXT_CHARS characters */
        for (const unsigned char *c = (const unsigned char *)label; *c; c++)
            if ((*c & 0xc0) != 0x80 && n_chars++ == MARK_TEXT_CHARS) cut = (size_t)((const char *)c - label);
        if (cut) memcpy(label + cut, "\xe2\x80\xa6", 4); /* ... */
        double width = 5.5 * (double)(n_chars > MARK_TEXT_CHARS ? MARK_TEXT_CHARS + 1 : n_chars);
        bool left = x + 2 + width > CHART_W - PAD_R; /* at the right edge: the text ends at the line */
        double x0 = left ? x - 2 - width : x + 2;
        int row = 0;
        while (row < MARK_ROWS && x0 < row_end[row] + 4) row++;
        if (row == MARK_ROWS) continue;
        row_end[row] = x0 + width;
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#84c\"%s>", left ? x - 2 : x + 2,
                PAD_T + 9 + 10.0 * row, left ? " text-anchor=\"end\"" : "");
        esc(o, label);
        fputs("</text>\n", o);
    }
}

static int chart(FILE *o, const pl_report_process_t *p, pl_metric_t m, const pl_report_metric_t *mt) {
    const pl_series_t *s = &mt->series;
    const pl_verdict_t *v = &mt->verdict;
    if (s->n_points == 0) {
        fputs("<p>(no data)</p>\n", o);
        return 0;
    }
    pl_series_t c;
    if (pl_series_compact(s, CHART_POINTS, &c)) return -ENOMEM;
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (size_t i = 0; i < c.n_points; i++) {
        if (isfinite(c.points[i].base) && c.points[i].base < lo) lo = c.points[i].base;
        if (isfinite(c.points[i].peak) && c.points[i].peak > hi) hi = c.points[i].peak;
    }
    if (!(lo <= hi)) lo = hi = 0;
    /* zoom on the data (growth of 1 % must be visible) but never stretch a range under 2 % of the level to full
     * height: noise on a flat series would look like a mountain range (as the text sparkline does) */
    double range = hi - lo, floor_range = 0.02 * fmax(fabs(hi), fabs(lo));
    if (range < floor_range) {
        lo -= (floor_range - range) / 2;
        range = floor_range;
    }
    if (range <= 0) range = 1;
    double data_lo = lo;
    lo -= 0.05 * range;
    if (data_lo >= 0 && lo < 0) lo = 0; /* bytes and counts never go below zero */
    hi = lo + 1.1 * range;
    double s0 = (double)c.points[0].step, s1 = (double)c.points[c.n_points - 1].step;
    bool bytes = pl_metric_is_bytes(m);
    char a[32], b[32];
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "role=\"img\" aria-label=\"%s\">\n", CHART_W, CHART_H, CHART_W, CHART_H, pl_metric_name(m));
    double top = PAD_T, bot = CHART_H - PAD_B;
    if (v->has_warmup && v->warmup_end_step > (int64_t)s0) {
        double x0 = xs(s0, s0, s1), x1 = xs((double)v->warmup_end_step, s0, s1);
        if (x1 > x0)
            fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fff3c4\">"
                       "<title>warmup</title></rect>\n", x0, top, x1 - x0, bot - top);
    }
    if (v->tail_steps > 0 && v->undecided != PL_UNDECIDED_NO_DATA) {
        double x0 = xs((double)v->tail_start_step, s0, s1), x1 = xs(s1, s0, s1);
        if (x1 > x0)
            fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#e3efff\">"
                       "<title>tail</title></rect>\n", x0, top, x1 - x0, bot - top);
    }
    /* axes and labels */
    fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", PAD_L, bot, CHART_W - PAD_R,
            bot);
    fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", PAD_L, top, PAD_L, bot);
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n", PAD_L - 4, top + 10,
            pl_format_value(hi, bytes, a, sizeof a));
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n", PAD_L - 4, bot,
            pl_format_value(lo, bytes, b, sizeof b));
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s %lld</text>\n", PAD_L, CHART_H - 6,
            s->by_time ? "bucket" : "step", (long long)c.points[0].step);
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%lld</text>\n", CHART_W - PAD_R,
            CHART_H - 6, (long long)c.points[c.n_points - 1].step);
    /* peaks, then baselines */
    fputs("<polyline fill=\"none\" stroke=\"#c9c9c9\" stroke-width=\"1\" points=\"", o);
    for (size_t i = 0; i < c.n_points; i++)
        if (isfinite(c.points[i].peak))
            fprintf(o, "%.1f,%.1f ", xs((double)c.points[i].step, s0, s1), ys(c.points[i].peak, lo, hi));
    fputs("\"><title>peak per step</title></polyline>\n", o);
    fputs("<polyline fill=\"none\" stroke=\"#2a6\" stroke-width=\"1.6\" points=\"", o);
    for (size_t i = 0; i < c.n_points; i++)
        if (isfinite(c.points[i].base))
            fprintf(o, "%.1f,%.1f ", xs((double)c.points[i].step, s0, s1), ys(c.points[i].base, lo, hi));
    fputs("\"><title>baseline per step</title></polyline>\n", o);
    chart_marks(o, p, s, s0, s1);
    /* the tail's Theil-Sen line, through the tail's median level at the tail's middle step */
    if (v->tail_steps > 0 && isfinite(v->slope_per_step) && isfinite(v->level) &&
        v->undecided != PL_UNDECIDED_NO_DATA) {
        double t0 = (double)v->tail_start_step, t1 = (double)v->last_step, mid = (t0 + t1) / 2;
        double y0 = v->level + v->slope_per_step * (t0 - mid), y1 = v->level + v->slope_per_step * (t1 - mid);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d22\" stroke-width=\"1.5\" "
                   "stroke-dasharray=\"5,3\"><title>fitted tail</title></line>\n",
                xs(t0, s0, s1), ys(y0, lo, hi), xs(t1, s0, s1), ys(y1, lo, hi));
    }
    fputs("</svg>\n", o);
    pl_series_free(&c);
    return 0;
}

/* CSS class of a label: only a leak that counts is red */
static const char *label_class(const char *label) {
    return !strcmp(label, "grows") || !strcmp(label, "slow growth") ? "inconclusive" : label;
}

static void verdict_cell(FILE *o, const pl_report_t *r, const pl_report_process_t *p, pl_metric_t m, bool bytes) {
    const pl_report_metric_t *mt = &p->metrics[m];
    const pl_verdict_t *v = &mt->verdict;
    char a[32], b[32];
    const char *label = pl_report_metric_label(r, p, m);
    fprintf(o, "<td class=\"%s\">%s</td><td>", label_class(label), label);
    /* a series by time buckets says seconds, not steps (a bucket is not a step) */
    const pl_series_t *s = &mt->series;
    double bs = s->by_time && s->bucket_ns > 0 ? (double)s->bucket_ns / 1e9 : 0;
    const char *u = bs > 0 ? "s" : "steps", *per = bs > 0 ? "s" : "step";
    double k = bs > 0 ? bs : 1;
    switch (v->kind) {
    case PL_VERDICT_PLATEAU:
        fprintf(o, "warmup %.0f %s (+%s), tail flat over %.0f %s", (double)v->warmup_steps * k, u,
                pl_format_value(v->warmup_size, bytes, a, sizeof a), (double)v->tail_steps * k, u);
        break;
    case PL_VERDICT_FLAT: fprintf(o, "flat over %.0f %s", (double)v->tail_steps * k, u); break;
    case PL_VERDICT_LEAK:
        fprintf(o, "+%s/%s since %s %.0f", pl_format_value(v->slope_per_step / k, bytes, a, sizeof a), per,
                bs > 0 ? "second" : "step", (double)v->tail_start_step * k);
        if (isfinite(v->per_hour)) fprintf(o, ", %s/h", pl_format_value(v->per_hour, bytes, b, sizeof b));
        if (v->has_oom && m != PL_METRIC_PSS && strcmp(label, "slow growth")) {
            if (bs > 0 && isfinite(v->oom_seconds))
                fprintf(o, "; OOM projected in ~%s", pl_format_duration(v->oom_seconds, b, sizeof b));
            else if (bs == 0)
                fprintf(o, "; OOM projected at step %lld", (long long)v->oom_step);
        }
        break;
    case PL_VERDICT_INCONCLUSIVE:
        fprintf(o, "%s; about %.0f more %s would decide", pl_verdict_undecided_name(v->undecided),
                (double)v->more_steps * k, bs > 0 ? "seconds" : "steps");
        break;
    }
    fputs("</td>", o);
}

void pl_render_site_html(FILE *o, const pl_extract_site_t *s) {
    if (s->py_name) { /* a Python site (docs/python-frames.md): the line, its Python stack, native collapsed */
        fputs("<b><code>", o);
        esc(o, s->py_name);
        fputs("</code></b>", o);
        if (s->py_source) {
            fputs(": <code>", o);
            esc(o, s->py_source);
            fputs("</code>", o);
        }
        for (size_t f = 0; f < s->n_py; f++) {
            fputs("<br><code>", o);
            esc(o, s->py_short[f]);
            fputs("</code>", o);
        }
        fprintf(o, "<details><summary>%zu native frames</summary>", s->n_frames);
    }
    for (size_t f = 0; f < s->n_frames; f++) {
        fputs(f ? "<br>" : "", o);
        fputs("<code>", o);
        esc(o, s->frames[f]);
        fputs("</code>", o);
    }
    if (s->py_name) fputs("</details>", o);
}

static void sites(FILE *o, const pl_extract_proc_t *xp) {
    if (!xp->n_sites) return;
    char a[32], b[32];
    fprintf(o, "<h3>Call sites by live-byte growth (sampled, since %s %lld)</h3>\n<table><tr><th>#</th>"
               "<th>growth</th><th>live</th><th>allocations</th><th>frames (innermost first)</th></tr>\n",
            xp->n_steps ? "step" : "second", (long long)xp->site_tail_step);
    for (size_t j = 0; j < xp->n_sites; j++) {
        const pl_extract_site_t *s = &xp->sites[j];
        fprintf(o, "<tr><td class=\"num\">%zu</td><td class=\"num\">+%s</td><td class=\"num\">%s</td>"
                   "<td class=\"num\">%llu</td><td>", j + 1, pl_format_bytes(s->growth_bytes, a, sizeof a),
                pl_format_bytes(s->live_bytes, b, sizeof b), (unsigned long long)s->n_live);
        pl_render_site_html(o, s);
        fputs("</td></tr>\n", o);
    }
    fputs("</table>\n", o);
}

/* What grew between two steps (reports/window.h): the section of report --between, before the processes' own. */
/* The processes a window leaves out for one reason, in one paragraph. */
static void window_left_out_html(FILE *o, const pl_run_t *run, pl_window_fit_t why) {
    const pl_extract_t *x = run->ext;
    char name[256];
    size_t n = 0;
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *p = &x->procs[i];
        if (pl_window_fit(p) != why) continue;
        if (!n) fputs(why == PL_WINDOW_NO_STEPS ? "<p>Left out, no steps (a window is counted in steps): "
                                                : "<p>Left out, ended before the window: ", o);
        fputs(n++ ? ", " : "", o);
        esc(o, pl_window_who(run, p, name, sizeof name));
        if (why == PL_WINDOW_AFTER_END) fprintf(o, " at step %lld", (long long)p->window->last_step);
    }
    if (n) fputs(".</p>\n", o);
}

static void window_html(FILE *o, const pl_run_t *run) {
    const pl_extract_t *x = run ? run->ext : NULL;
    const pl_extract_window_t *w0 = pl_window_first(x);
    if (!w0) return;
    char name[256], a[32], b[32], c[32], d[32];
    fprintf(o, "<h2>What grew between step %lld and step %lld</h2>\n", (long long)w0->from_step,
            (long long)w0->to_step);
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *p = &x->procs[i];
        const pl_extract_window_t *w = p->window;
        pl_window_fit_t f = pl_window_fit(p);
        if (f == PL_WINDOW_NONE) continue;
        if (f == PL_WINDOW_NO_STEPS || f == PL_WINDOW_AFTER_END) continue; /* listed after the others */
        fputs("<h3>", o);
        esc(o, pl_window_who(run, p, name, sizeof name));
        fprintf(o, ": step %lld &rarr; %lld%s</h3>\n", (long long)w->from_step, (long long)w->end_step,
                f == PL_WINDOW_CUT ? " (its last step: it ended inside the window)" : "");
        fputs("<table><tr><th>metric</th><th>from</th><th>to</th><th>change</th><th>per step</th></tr>\n", o);
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            pl_window_metric_t v;
            if (!pl_window_metric(p->proc, (pl_metric_t)m, w->from_step, w->end_step, &v)) continue;
            bool bytes = pl_metric_is_bytes((pl_metric_t)m);
            fprintf(o, "<tr><td>%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>"
                       "<td class=\"num\">%s</td></tr>\n", pl_metric_name((pl_metric_t)m),
                    pl_format_value(v.from, bytes, a, sizeof a), pl_format_value(v.to, bytes, b, sizeof b),
                    pl_window_signed(v.change, bytes, c, sizeof c), pl_window_signed(v.per_step, bytes, d, sizeof d));
        }
        fputs("</table>\n", o);
        if (!w->n_sites) {
            fputs("<p>No call site's live bytes grew in the window (sampled allocations).</p>\n", o);
            continue;
        }
        fprintf(o, "<p>Call sites whose live bytes grew, largest first (sampled; %zu grew, +%s in all):</p>\n"
                   "<table><tr><th>#</th><th>growth</th><th>live at the end</th><th>frames (innermost first)</th>"
                   "</tr>\n", w->n_grew, pl_format_bytes(w->growth_bytes, a, sizeof a));
        for (size_t k = 0; k < w->n_sites; k++) {
            const pl_extract_site_t *st = &w->sites[k];
            fprintf(o, "<tr><td class=\"num\">%zu</td><td class=\"num\">+%s</td><td class=\"num\">%s</td><td>", k + 1,
                    pl_format_bytes(st->growth_bytes, a, sizeof a), pl_format_bytes(st->live_bytes, b, sizeof b));
            pl_render_site_html(o, st);
            fputs("</td></tr>\n", o);
        }
        fputs("</table>\n", o);
    }
    window_left_out_html(o, run, PL_WINDOW_NO_STEPS);
    window_left_out_html(o, run, PL_WINDOW_AFTER_END);
}

static const pl_extract_proc_t *extras_of(const pl_extract_t *x, const pl_report_process_t *p) {
    for (size_t i = 0; x && i < x->n_procs; i++)
        if (x->procs[i].proc == p) return &x->procs[i];
    return NULL;
}

/* One row per rank, ordered by rank, and whether the ranks agree (docs/verdict.md §9). */
static void ranks_html(FILE *o, const pl_report_t *r) {
    const pl_run_verdict_t *rv = &r->verdict;
    fprintf(o, "<h2>Ranks</h2>\n<p>%zu ranks on %zu node%s: ", rv->n_ranks, rv->n_nodes, rv->n_nodes == 1 ? "" : "s");
    esc(o, rv->ranks_line);
    fputs("</p>\n<table><tr><th>rank</th><th>local rank</th><th>node</th><th>pid</th><th>verdict</th></tr>\n", o);
    for (int32_t last = -1;;) { /* ranks in order without sorting the report's rows: the next larger rank each time */
        int32_t next = -1;
        for (size_t i = 0; i < r->n_procs; i++)
            if (pl_report_is_rank(r->procs[i]) && r->procs[i]->rank > last &&
                (next < 0 || r->procs[i]->rank < next))
                next = r->procs[i]->rank;
        if (next < 0) break;
        for (size_t i = 0; i < r->n_procs; i++) {
            const pl_report_process_t *p = r->procs[i];
            if (!pl_report_is_rank(p) || p->rank != next) continue;
            bool leaks = p->verdict.kind == PL_PV_LEAK;
            fprintf(o, "<tr><td class=\"num\">%d</td><td class=\"num\">", p->rank);
            if (p->local_rank >= 0) fprintf(o, "%d", p->local_rank);
            else fputs("-", o);
            fputs("</td><td>", o);
            esc(o, p->node[0] ? p->node : "-");
            fprintf(o, "</td><td class=\"num\">%lld</td><td class=\"%s\">%s</td></tr>\n", (long long)p->pid,
                    leaks ? "leak" : "flat", pl_pverdict_name(p->verdict.kind));
        }
        last = next;
    }
    fputs("</table>\n", o);
}

static void site_rows(FILE *o, const pl_extract_site_t *s, size_t n, bool live_first) {
    char a[32], b[32];
    fprintf(o, "<table><tr><th>#</th><th>%s</th><th>%s</th><th>frames (innermost first)</th></tr>\n",
            live_first ? "live" : "growth", live_first ? "growth" : "live");
    for (size_t k = 0; k < n; k++) {
        fprintf(o, "<tr><td class=\"num\">%zu</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td>", k + 1,
                live_first ? pl_format_bytes(s[k].live_bytes, a, sizeof a)
                           : pl_window_signed(s[k].growth_bytes, true, a, sizeof a),
                live_first ? pl_window_signed(s[k].growth_bytes, true, b, sizeof b)
                           : pl_format_bytes(s[k].live_bytes, b, sizeof b));
        pl_render_site_html(o, &s[k]);
        fputs("</td></tr>\n", o);
    }
    fputs("</table>\n", o);
}

/* How the process ended (reports/ending.h), when not cleanly: the line, what was live by site at its end, what grew
 * in its last steps, torch's allocator then. */
static void end_html(FILE *o, const pl_extract_t *x, const pl_extract_proc_t *xp) {
    pl_end_t e;
    pl_end_of(x, xp, &e);
    if (e.kind == PL_END_CLEAN || e.kind == PL_END_RUNNING) return;
    char a[32], b[32], c[32];
    fputs("<div class=\"cut\"><b>How it ended:</b> ", o);
    esc(o, e.line);
    fputs("</div>\n", o);
    const pl_extract_window_t *w = xp->end;
    if (w && w->n_live) {
        fprintf(o, "<h3>Live by call site at %s (sampled, %s in all)</h3>\n",
                xp->uncaught[0] ? "the exception" : "its last record", pl_format_bytes(w->live_bytes, a, sizeof a));
        site_rows(o, w->live, w->n_live, true);
    }
    if (w && !w->no_steps && w->n_sites) {
        fprintf(o, "<h3>Grew after step %lld (its last steps, sampled, %s in all)</h3>\n", (long long)w->from_step,
                pl_window_signed(w->growth_bytes, true, a, sizeof a));
        site_rows(o, w->sites, w->n_sites, false);
    }
    if (xp->dev_last_reserved >= 0) {
        fprintf(o, "<p>torch's CUDA allocator %s (step %lld): allocated %s, reserved %s",
                e.kind == PL_END_CUDA_OOM ? "when the OOM was raised" : "at its last snapshot",
                (long long)xp->dev_last_step, pl_format_bytes((double)xp->dev_last_allocated, a, sizeof a),
                pl_format_bytes((double)xp->dev_last_reserved, b, sizeof b));
        if (xp->dev_last_inactive_split >= 0)
            fprintf(o, ", inactive in split blocks %s (fragmentation)",
                    pl_format_bytes((double)xp->dev_last_inactive_split, c, sizeof c));
        fputs(".</p>\n", o);
    }
}

/* One row's section: heading, damage, diagnosis, the metric table, a chart per metric, the call sites. */
static int section(FILE *o, const pl_report_t *r, const pl_extract_t *x, const pl_report_process_t *p) {
    char a[32], b[32];
    const pl_extract_proc_t *xp = extras_of(x, p);
    fprintf(o, "<h2>Process %lld ", (long long)p->pid);
    esc(o, p->name);
    if (p->rank >= 0 && p->node[0]) {
        fprintf(o, " (rank %d, node ", p->rank);
        esc(o, p->node);
        fputs(")", o);
    } else if (p->rank >= 0) {
        fprintf(o, " (rank %d)", p->rank);
    }
    fputs("</h2>\n", o);
    if (xp && xp->damaged) {
        fputs("<div class=\"cut\">Partial report: ", o);
        esc(o, xp->error);
        fputs("</div>\n", o);
    }
    if (xp) end_html(o, x, xp);
    if (p->n_findings) {
        fputs("<h3>Diagnosis</h3>\n<ul class=\"dx\">\n", o);
        for (size_t k = 0; k < p->n_findings; k++) {
            fputs("<li>", o);
            esc(o, p->findings[k].text);
            fputs("</li>\n", o);
        }
        fputs("</ul>\n", o);
    }
    fputs("<table><tr><th>metric</th><th>last</th><th>peak</th><th>verdict</th><th>details</th></tr>\n", o);
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        const pl_report_metric_t *mt = &p->metrics[m];
        if (!mt->present) continue;
        bool bytes = pl_metric_is_bytes((pl_metric_t)m);
        fprintf(o, "<tr><td>%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>", pl_metric_name((pl_metric_t)m),
                pl_format_value(mt->verdict.last_value, bytes, a, sizeof a),
                pl_format_value(mt->verdict.peak, bytes, b, sizeof b));
        verdict_cell(o, r, p, (pl_metric_t)m, bytes);
        fputs("</tr>\n", o);
    }
    fprintf(o, "</table>\n<p class=\"legend\">Charts: green = per-step baseline (minimum), grey = per-step peak, "
               "yellow = warmup, blue = judged tail, red dashes = fitted tail slope (Theil-Sen)%s.</p>\n",
            p->n_marks ? ", purple dotted lines = plateau_mark() points" : "");
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        const pl_report_metric_t *mt = &p->metrics[m];
        if (!mt->present) continue;
        const char *label = pl_report_metric_label(r, p, (pl_metric_t)m);
        fprintf(o, "<h3>%s: <span class=\"%s\">%s</span></h3>\n", pl_metric_name((pl_metric_t)m),
                label_class(label), label);
        int rc = chart(o, p, (pl_metric_t)m, mt);
        if (rc) return rc;
    }
    if (xp) sites(o, xp);
    if (xp) /* who keeps it (reports/retention_render.c) */
        pl_retention_html(o, xp->retention, p->verdict.kind == PL_PV_LEAK || p->verdict.kind == PL_PV_SLOW_GROWTH);
    return 0;
}

/* Folded in the HTML as in the text report: a quiet worker row, unless its trace is damaged. */
static bool folded(const pl_extract_t *x, const pl_report_process_t *p) {
    const pl_extract_proc_t *xp = extras_of(x, p);
    return pl_report_quiet_worker(p) && !(xp && xp->damaged);
}

typedef enum { FOLD_WORKERS, FOLD_HELPERS } fold_kind_t; /* the groups of plain rows (not pools, not generations) */

static bool in_group(const pl_extract_t *x, const pl_report_process_t *p, fold_kind_t k) {
    if (!folded(x, p) || p->n_pool || p->n_gen) return false;
    return k == FOLD_HELPERS ? p->helper : !p->helper;
}

/* One collapsed group: <details class="CLS"><summary>SUMMARY</summary> the sections of its rows </details>. */
static int fold_group(FILE *o, const pl_report_t *r, const pl_extract_t *x, fold_kind_t k, const char *cls,
                      const char *summary) {
    fprintf(o, "<details class=\"%s\"><summary>", cls);
    esc(o, summary);
    fputs("</summary>\n", o);
    for (size_t i = 0; i < r->n_procs; i++) {
        if (!in_group(x, r->procs[i], k)) continue;
        int rc = section(o, r, x, r->procs[i]);
        if (rc) return rc;
    }
    fputs("</details>\n", o);
    return 0;
}

/* Quiet workers, short helpers, pools and generations, each group collapsed under the line the text report says;
 * leaking, slowly growing or damaged workers were shown in full above. */
static int workers_html(FILE *o, const pl_report_t *r, const pl_extract_t *x) {
    size_t n_helpers = 0, n_rows = 0;
    for (size_t i = 0; i < r->n_procs; i++) {
        n_rows += folded(x, r->procs[i]);
        n_helpers += in_group(x, r->procs[i], FOLD_HELPERS);
    }
    if (!n_rows) return 0;
    fputs("<h2>Workers</h2>\n", o);
    char line[480];
    int rc = 0;
    if (pl_report_cow_line(r, line, sizeof line)) {
        fputs("<p class=\"cow\">", o);
        esc(o, line);
        fputs("</p>\n", o);
    }
    if (pl_report_workers_line(r, line, sizeof line)) rc = fold_group(o, r, x, FOLD_WORKERS, "workers", line);
    if (!rc && n_helpers) {
        snprintf(line, sizeof line, "%zu short helper process%s: none leaks (no steps, under 1 s, under 64 MiB RSS)",
                 n_helpers, n_helpers > 1 ? "es" : "");
        rc = fold_group(o, r, x, FOLD_HELPERS, "helpers", line);
    }
    for (size_t i = 0; i < r->n_procs && !rc; i++) { /* pools and generations: one collapsed section each */
        const pl_report_process_t *p = r->procs[i];
        if (!folded(x, p) || (!p->n_pool && !p->n_gen)) continue;
        if (p->n_gen && p->n_findings)
            snprintf(line, sizeof line, "generations: %s", p->findings[0].text);
        else if (p->n_gen)
            snprintf(line, sizeof line, "generations of the workers of pid %lld", (long long)p->pid);
        else
            snprintf(line, sizeof line, "workers of pid %lld as a pool (%zu that live through its steps), heap.bytes "
                     "summed per step: %s", (long long)p->pid, p->n_pool,
                     pl_report_metric_label(r, p, PL_METRIC_HEAP_BYTES));
        fprintf(o, "<details class=\"%s\"><summary>", p->n_gen ? "generations" : "pool");
        esc(o, line);
        fputs("</summary>\n", o);
        rc = section(o, r, x, p);
        fputs("</details>\n", o);
    }
    return rc;
}

int pl_render_html(const pl_run_t *run, FILE *o) {
    if (!run || !run->report || !o) return -EINVAL;
    const pl_report_t *r = run->report;
    const pl_extract_t *x = run->ext;
    char a[32], b[32];
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
          "img-src data:\">\n<title>plateau report: ", o);
    esc(o, r->source);
    fprintf(o, "</title>\n<style>%s</style></head><body>\n<h1>plateau report</h1>\n<p>Source: <code>", css);
    esc(o, r->source);
    fprintf(o, "</code> &middot; plateau %s</p>\n", PL_VERSION);
    fprintf(o, "<p class=\"verdict %s\">", r->verdict.kind == PL_PV_LEAK ? "leak" : "flat");
    esc(o, r->verdict.line);
    fputs("</p>\n", o);
    if (r->cut_short) {
        fputs("<div class=\"cut\"><b>The run was cut short.</b> ", o);
        esc(o, r->cut_reason);
        fputs("</div>\n", o);
    }
    window_html(o, run); /* report --between: what grew in the window, first */
    if (r->verdict.n_ranks >= 2) ranks_html(o, r);
    if (x && x->n_procs > 1) {
        size_t n_pss;
        double pss = pl_run_total_last(x, PL_METRIC_PSS, &n_pss);
        pl_format_bytes(pl_run_total_last(x, PL_METRIC_RSS, NULL), b, sizeof b);
        if (n_pss == x->n_procs)
            fprintf(o, "<h2>Processes</h2>\n<p>Total PSS %s (RSS %s): shared pages are counted once.</p>\n",
                    pl_format_bytes(pss, a, sizeof a), b);
        else if (n_pss)
            fprintf(o, "<h2>Processes</h2>\n<p>Total PSS %s over the %zu processes with a PSS sample (RSS %s): shared "
                       "pages are counted once. A process's first PSS sample comes 5 s after it starts.</p>\n",
                    pl_format_bytes(pss, a, sizeof a), n_pss, b);
        else
            fprintf(o, "<h2>Processes</h2>\n<p>Total RSS %s. No PSS sample: a process's first comes 5 s after it "
                       "starts, and PLATEAU_PSS=0 turns them off.</p>\n", b);
        fputs("<table><tr><th>pid</th><th>ppid</th><th>rank</th><th>steps</th><th>verdict</th><th>command</th>"
              "<th>trace</th></tr>\n", o);
        for (size_t i = 0; i < x->n_procs; i++) {
            const pl_extract_proc_t *p = &x->procs[i];
            bool leaks = p->proc->verdict.kind == PL_PV_LEAK; /* the process verdict, not "any metric" */
            fprintf(o, "<tr><td class=\"num\">%u</td><td class=\"num\">%u</td><td class=\"num\">", p->pid, p->ppid);
            if (p->rank >= 0) fprintf(o, "%d", p->rank);
            else fputs("-", o);
            fprintf(o, "</td><td class=\"num\">%llu</td><td class=\"%s\">%s</td><td><code>",
                    (unsigned long long)p->n_steps, leaks ? "leak" : "flat", pl_pverdict_name(p->proc->verdict.kind));
            esc(o, p->cmdline[0] ? p->cmdline : p->proc->name);
            fputs("</code></td><td><code>", o);
            esc(o, p->file);
            fputs(p->damaged ? "</code> (damaged)" : p->clean_end ? "</code>" : "</code> (no end record)", o);
            fputs("</td></tr>\n", o);
        }
        fputs("</table>\n", o);
    }
    for (size_t i = 0; i < r->n_procs; i++) {
        if (folded(x, r->procs[i])) continue;
        int rc = section(o, r, x, r->procs[i]);
        if (rc) return rc;
    }
    int rc = workers_html(o, r, x);
    if (rc) return rc;
    fputs("</body></html>\n", o);
    return ferror(o) ? -EIO : 0;
}
