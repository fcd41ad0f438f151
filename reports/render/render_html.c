/* reports/render_html: the HTML report (render_html.h), in the order a user reads it: the verdict with the line to
 * change, the rate and the projected OOM; the sites and holders of the process that decided it; the processes as a
 * tree; then each process with its judged charts. Every string from the trace is escaped (it may be hostile: argv,
 * symbols, file names); numbers that are not finite are drawn as nothing. Charts are 720x200 SVG in user units
 * (190 more for the projection to the limit): x = step from first to last step, y = min(baseline)..max(peak) of the
 * compacted series, padded, labelled on a grid. No JavaScript, so a browser has nothing to log on the console. */
#include "render_html.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "export.h"
#include "format.h"
#include "retention_render.h"
#include "window.h"
#include "words.h"
#include "ending.h"

#define CHART_W 720.0
#define CHART_H 200.0
#define PAD_L 70.0
#define PAD_R 10.0
#define PAD_T 10.0
#define PAD_B 24.0
#define CHART_POINTS 360
#define PROJ_W 190.0 /* the projection panel right of the data (last step to projected OOM) */

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
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff;max-width:1240px}"
    "h1{font-size:20px}h2{font-size:17px;margin-top:28px}h3{font-size:14px;margin:14px 0 4px}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;"
    "vertical-align:top}th{background:#f3f3f3}.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".leak{color:#b00;font-weight:bold}.plateau{color:#06c}.flat{color:#080}.inconclusive{color:#a60}"
    ".cut{background:#fee;border:1px solid #b00;padding:8px;margin:8px 0}"
    ".dx li{margin:4px 0}code{font-size:12px;overflow-wrap:anywhere}"
    "svg{display:block;margin:4px 0 12px;border:1px solid #ddd;max-width:100%;height:auto}"
    ".legend,.few,.file{font-size:12px;color:#555}"
    ".head{border:2px solid #080;border-radius:6px;padding:10px 14px;margin:12px 0}.head-leak{border-color:#b00}"
    ".head-open{border-color:#a60}.head .verdict{font-size:17px;margin:0 0 6px;font-weight:bold}"
    ".head-leak .verdict{color:#b00}.head-ok .verdict{color:#080}.head-open .verdict{color:#a60}"
    ".facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}.facts dt{font-weight:bold}"
    ".facts dd{margin:0;overflow-wrap:anywhere}"
    ".tree{list-style:none;padding-left:18px;margin:4px 0}.tree li{margin:3px 0}"
    ".tree.side{display:flex;flex-wrap:wrap;gap:4px 24px}"
    ".side{display:flex;flex-wrap:wrap;gap:0 24px}.side>.col{flex:1 1 560px;min-width:0}"
    "table{max-width:100%;overflow-x:auto;display:block}"
    ".chart{overflow-x:auto}"
    "@media (max-width:600px){body{margin:10px}.facts{grid-template-columns:1fr}.chart svg{min-width:600px}}";

static double xs(double step, double s0, double s1) {
    double span = s1 > s0 ? s1 - s0 : 1;
    return PAD_L + (step - s0) / span * (CHART_W - PAD_L - PAD_R);
}

static double ys(double v, double lo, double hi) {
    double span = hi > lo ? hi - lo : 1;
    double y = CHART_H - PAD_B - (v - lo) / span * (CHART_H - PAD_T - PAD_B);
    if (!(y >= PAD_T)) y = PAD_T; /* off the scale (a chart scaled to its judged tail) or NaN: on the plot's edge */
    if (y > CHART_H - PAD_B) y = CHART_H - PAD_B;
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

/* The passes of the validation loader of process p (a generations row of its workers, reports/generations.h): one
 * point per generation at the trainer's step it started at. NULL when p has none. */
static const pl_series_t *validation_passes(const pl_report_t *r, const pl_report_process_t *p) {
    for (size_t i = 0; r && i < r->n_procs; i++) {
        const pl_report_process_t *g = r->procs[i];
        if (g != p && g->n_gen && g->pid == p->pid && g->metrics[PL_METRIC_HEAP_BYTES].present)
            return &g->metrics[PL_METRIC_HEAP_BYTES].series;
    }
    return NULL;
}

/* The fitted tail line's value at step t (through the tail's median level at the tail's middle step). */
static double fit_at(const pl_verdict_t *v, double t) {
    return v->level + v->slope_per_step * (t - ((double)v->tail_start_step + (double)v->last_step) / 2);
}

static bool has_fit(const pl_verdict_t *v) {
    return v->tail_steps > 0 && isfinite(v->slope_per_step) && isfinite(v->level) &&
           v->undecided != PL_UNDECIDED_NO_DATA;
}

/* A projection panel right of the data when the verdict projects the limit past the data's top: the fitted line
 * from the last step on to the projected OOM step, against the limit line (its own scale: the data's bottom to the
 * limit). A projection the verdict does not make (no limit, flat, slow growth's "too slow to matter" included: the
 * label says so) is not drawn. */
static bool projects(const pl_report_t *r, const pl_report_process_t *p, pl_metric_t m, const pl_verdict_t *v,
                     double hi, const pl_series_t *s) {
    const char *label = pl_report_metric_label(p, m);
    return v->kind == PL_VERDICT_LEAK && v->has_oom && !s->by_time && m != PL_METRIC_PSS &&
           strcmp(label, "slow growth") && has_fit(v) && isfinite(v->limit) && v->limit > hi &&
           v->oom_step > v->last_step;
}

static void path_begin(FILE *o, const char *stroke, double width, const char *dash) {
    fprintf(o, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s%s%s d=\"", stroke, width,
            dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
}

/* The series as one path: M at the first finite point, L after it (peak or base per point). */
static void series_path(FILE *o, const pl_series_t *c, bool peak, double s0, double s1, double lo, double hi) {
    bool first = true;
    for (size_t i = 0; i < c->n_points; i++) {
        double v = peak ? c->points[i].peak : c->points[i].base;
        if (!isfinite(v)) continue;
        fprintf(o, "%s%.1f,%.1f", first ? "M" : " L", xs((double)c->points[i].step, s0, s1), ys(v, lo, hi));
        first = false;
    }
}

static void projection(FILE *o, const pl_report_metric_t *mt, bool bytes, double lo, double x0, double x1) {
    const pl_verdict_t *v = &mt->verdict;
    char a[32], b[32];
    double top = PAD_T, bot = CHART_H - PAD_B, hi = v->limit * 1.04;
    double from = fit_at(v, (double)v->last_step), to = v->limit - (isfinite(v->spike) && v->spike > 0 ? v->spike : 0);
    fprintf(o, "<g class=\"projection\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#bbb\" "
               "stroke-dasharray=\"1,3\"/>\n", x0 - 6, top, x0 - 6, bot);
    double yl = ys(v->limit, lo, hi);
    fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#b00\" stroke-width=\"1.5\">"
               "<title>limit: ", x0, yl, x1, yl);
    esc(o, mt->limit_source ? mt->limit_source : "the memory limit");
    fprintf(o, "</title></line>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#b00\">limit %s</text>\n", x0,
            yl - 3, pl_format_value(v->limit, bytes, a, sizeof a));
    double ya = ys(from, lo, hi), yb = ys(to, lo, hi);
    path_begin(o, "#d22", 1.5, "5,3");
    fprintf(o, "M%.1f,%.1f L%.1f,%.1f\"><title>fitted tail, projected</title></path>\n", x0, ya, x1, yb);
    fprintf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#b00\"/>\n", x1, yb);
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#b00\">OOM at step %lld</text>\n", x0 + 2,
            yl + 12, (long long)v->oom_step);
    if (isfinite(v->oom_seconds))
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#b00\">in ~%s</text>\n", x0 + 2, yl + 23,
                pl_format_duration(v->oom_seconds, b, sizeof b));
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">projected</text></g>\n", x0, CHART_H - 6);
}

/* Horizontal grid lines with their values at the left (the axis does not start at zero: say where it is). */
static void y_grid(FILE *o, double lo, double hi, bool bytes, double x1) {
    char a[32];
    for (int k = 0; k <= 4; k++) {
        double v = lo + (hi - lo) * k / 4, y = ys(v, lo, hi);
        if (k) fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", PAD_L, y, x1, y);
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\" fill=\"#555\">%s</text>\n",
                PAD_L - 4, y + (k == 4 ? 8 : 3), pl_format_value(v, bytes, a, sizeof a));
    }
}

/* The validation loader's passes as small orange ticks under the time axis (steps only). */
static void passes(FILE *o, const pl_series_t *g, double s0, double s1) {
    for (size_t i = 0; g && i < g->n_points; i++) {
        double at = (double)g->points[i].step;
        if (!(at >= s0 && at <= s1)) continue;
        double x = xs(at, s0, s1), y = CHART_H - PAD_B;
        fprintf(o, "<path fill=\"#e80\" d=\"M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f Z\"><title>validation pass at step %lld"
                   "</title></path>\n", x, y, x - 4, y + 7, x + 4, y + 7, (long long)g->points[i].step);
    }
}

/* One judged series: the data scaled to itself (the axis labelled, not from zero), the baseline at the tail's start
 * marked, warmup and tail shaded, marks and validation passes on the step axis, the fitted tail, and the projection
 * to the limit when the verdict makes one. */
static int chart(FILE *o, const pl_report_t *r, const pl_report_process_t *p, pl_metric_t m,
                 const pl_report_metric_t *mt) {
    const pl_series_t *s = &mt->series;
    const pl_verdict_t *v = &mt->verdict;
    pl_series_t c;
    if (pl_series_compact(s, CHART_POINTS, &c)) return -ENOMEM;
    /* scaled to the judged window, as the text report's sparkline: a leak or an undecided growth judged on a tail
     * after a jump is scaled to that tail, so a climb of 136 KiB/step on a 360 MiB baseline shows as the climb it
     * is, not as the first step's jump (earlier points off the scale sit on the plot's edge, and the chart says so);
     * a plateau and a flat series are scaled to the whole series: their warmup is what they show */
    bool tail_only = v->kind != PL_VERDICT_PLATEAU && v->kind != PL_VERDICT_FLAT && v->tail_points >= 2 &&
                     v->tail_start_step > v->first_step;
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (int pass = 0; pass < 2 && !(lo <= hi); pass++) { /* pass 1: the whole series (a tail under two points) */
        size_t n_in = 0;
        for (size_t i = 0; i < c.n_points; i++) {
            if (pass == 0 && tail_only && c.points[i].step < v->tail_start_step) continue;
            n_in++;
            if (isfinite(c.points[i].base) && c.points[i].base < lo) lo = c.points[i].base;
            if (isfinite(c.points[i].peak) && c.points[i].peak > hi) hi = c.points[i].peak;
        }
        if (n_in < 2) lo = HUGE_VAL, hi = -HUGE_VAL;
        else if (pass == 0 && !tail_only) break;
    }
    if (!(lo <= hi)) lo = hi = 0;
    bool off_scale = false; /* a point of the whole series outside the range: the chart says so */
    /* zoom on the data (growth of 1 % must be visible) but never stretch a range under 2 % of the level to full
     * height: noise on a flat series would look like a mountain range */
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
    for (size_t i = 0; tail_only && i < c.n_points; i++)
        off_scale |= c.points[i].base < lo || c.points[i].peak > hi;
    double s0 = (double)c.points[0].step, s1 = (double)c.points[c.n_points - 1].step;
    bool bytes = pl_metric_is_bytes(m), proj = projects(r, p, m, v, hi, s);
    double w = CHART_W + (proj ? PROJ_W : 0), x_end = CHART_W - PAD_R;
    char a[32];
    fprintf(o, "<div class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"%s\">\n", w, CHART_H, w, CHART_H,
            pl_metric_name(m));
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
    y_grid(o, lo, hi, bytes, x_end);
    fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", PAD_L, bot, x_end, bot);
    fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", PAD_L, top, PAD_L, bot);
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s %lld</text>\n", PAD_L, CHART_H - 6,
            s->by_time ? "bucket" : "step", (long long)c.points[0].step);
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%lld</text>\n", x_end, CHART_H - 6,
            (long long)c.points[c.n_points - 1].step);
    if (has_fit(v)) { /* the baseline where the judged tail starts: what the growth is measured from */
        double base = fit_at(v, (double)v->tail_start_step), y = ys(base, lo, hi);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#2a6\" stroke-dasharray=\"1,3\">"
                   "<title>baseline at %s %lld: %s</title></line>\n", PAD_L, y, x_end, y,
                s->by_time ? "bucket" : "step", (long long)v->tail_start_step,
                pl_format_value(base, bytes, a, sizeof a));
    }
    /* peaks, then baselines */
    path_begin(o, "#c9c9c9", 1, NULL);
    series_path(o, &c, true, s0, s1, lo, hi);
    fputs("\"><title>peak per step</title></path>\n", o);
    path_begin(o, "#2a6", 1.6, NULL);
    series_path(o, &c, false, s0, s1, lo, hi);
    fputs("\"><title>baseline per step</title></path>\n", o);
    if (off_scale)
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#555\" text-anchor=\"middle\">y scaled to "
                   "the judged tail: earlier points off the scale sit on its edge</text>\n", (PAD_L + x_end) / 2,
                CHART_H - 6);
    chart_marks(o, p, s, s0, s1);
    if (!s->by_time) passes(o, validation_passes(r, p), s0, s1);
    if (has_fit(v)) {
        double t0 = (double)v->tail_start_step, t1 = (double)v->last_step;
        path_begin(o, "#d22", 1.5, "5,3");
        fprintf(o, "M%.1f,%.1f L%.1f,%.1f\"><title>fitted tail</title></path>\n", xs(t0, s0, s1),
                ys(fit_at(v, t0), lo, hi), xs(t1, s0, s1), ys(fit_at(v, t1), lo, hi));
    }
    if (proj) projection(o, mt, bytes, lo, CHART_W + 14, w - PAD_R - 4);
    fputs("</svg></div>\n", o);
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
    const char *label = pl_report_metric_label(p, m);
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

/* A device leak's call sites (pl_run_sites): the segments the caching allocator took from the driver. */
static void dev_sites_html(FILE *o, const pl_extract_proc_t *xp, const pl_run_sites_t *v) {
    char a[32], b[32];
    const char *unit = xp->n_steps ? "step" : "second";
    fprintf(o, "<h3>Device call sites by growth of device memory taken from the driver (%s, since %s %lld)</h3>\n"
               "<p>A caching allocator takes device memory a segment at a time: each site is the line whose request "
               "made it take one, not the tensors it keeps.</p>\n", v->metric, unit, (long long)v->since);
    if (!v->n) {
        fprintf(o, "<p>No device memory was taken from the driver since %s %lld: the growth is inside segments "
                   "already taken.</p>\n", unit, (long long)v->since);
        return;
    }
    fputs("<table><tr><th>#</th><th>growth</th><th>live</th><th>allocations</th><th>frames (innermost first)</th>"
          "</tr>\n", o);
    for (size_t j = 0; j < v->n; j++) {
        const pl_extract_site_t *s = &v->sites[j];
        fprintf(o, "<tr><td class=\"num\">%zu</td><td class=\"num\">+%s</td><td class=\"num\">%s</td>"
                   "<td class=\"num\">%llu</td><td>", j + 1, pl_format_bytes(s->growth_bytes, a, sizeof a),
                pl_format_bytes(s->live_bytes, b, sizeof b), (unsigned long long)s->n_live);
        pl_render_site_html(o, s);
        fputs("</td></tr>\n", o);
    }
    fputs("</table>\n", o);
}

static void sites(FILE *o, const pl_extract_proc_t *xp) {
    pl_run_sites_t dv;
    if (pl_run_sites(xp, &dv)) {
        dev_sites_html(o, xp, &dv);
        return;
    }
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

static const pl_extract_proc_t *extras_of(const pl_extract_t *x, const pl_report_process_t *p) {
    for (size_t i = 0; x && i < x->n_procs; i++)
        if (x->procs[i].proc == p) return &x->procs[i];
    return NULL;
}

/* The process whose verdict is the run's, when the run's verdict says something grows or is not decided yet: its
 * sites and holders come right under the verdict, not in its section. */
static const pl_report_process_t *deciding(const pl_report_t *r) {
    const pl_run_verdict_t *rv = &r->verdict;
    if (rv->proc < 0 || (size_t)rv->proc >= r->n_procs) return NULL;
    return pl_pverdict_grows(rv->kind) || rv->kind == PL_PV_UNDECIDED ? r->procs[rv->proc] : NULL;
}

static bool headlined(const pl_report_t *r, const pl_report_process_t *p) {
    return p && deciding(r) == p;
}

/* Where it grows: the call sites by growth, then who keeps it (reports/retention_render.c). */
static void where_html(FILE *o, const pl_report_process_t *p, const pl_extract_proc_t *xp) {
    sites(o, xp);
    pl_retention_html(o, xp->retention, pl_pverdict_grows(p->verdict.kind));
}

static void fact(FILE *o, const char *term, const char *text) {
    fprintf(o, "<dt>%s</dt><dd>", term);
    esc(o, text);
    fputs("</dd>\n", o);
}

/* What a user reads first: the verdict, the line to change (who keeps it, where it was allocated), the rate and
 * the projected OOM, each only as strong as the verdict that decided it. */
static void headline(FILE *o, const pl_report_t *r, const pl_extract_t *x) {
    const pl_run_verdict_t *rv = &r->verdict;
    char a[32], b[32], c[32], line[256];
    fprintf(o, "<section class=\"head %s\">\n<p class=\"verdict\">",
            rv->kind == PL_PV_LEAK ? "head-leak" : rv->kind == PL_PV_NO_LEAK ? "head-ok" : "head-open");
    esc(o, rv->line);
    fputs("</p>\n", o);
    const pl_report_process_t *p = rv->proc >= 0 && (size_t)rv->proc < r->n_procs ? r->procs[rv->proc] : NULL;
    const pl_proc_verdict_t *pv = p ? &p->verdict : NULL;
    int m = pv ? pv->metric : -1;
    if (!p) {
        fputs("</section>\n", o);
        return;
    }
    const pl_extract_proc_t *xp = extras_of(x, p);
    fputs("<dl class=\"facts\">\n", o);
    bool grows = pl_pverdict_grows(pv->kind);
    if (grows && p->holder_line[0]) /* "kept by `x` (...)": the term says "who keeps it" already */
        fact(o, "Who keeps it", strncmp(p->holder_line, "kept by ", 8) ? p->holder_line : p->holder_line + 8);
    pl_run_sites_t dv;
    if (grows && xp && pl_run_sites(xp, &dv)) { /* a device leak: the live heap's line is not where it grows */
        if (pl_run_dev_site_sentence(&dv, xp->n_steps > 0, line, sizeof line)) fact(o, "Where", line);
    } else if (grows && p->site_line[0]) fact(o, "Where", p->site_line);
    else if (grows && xp && xp->n_sites) { /* the call site that grew most (sampled), as the sites table names it */
        const pl_extract_site_t *st = &xp->sites[0];
        snprintf(line, sizeof line, "%s%s%s, +%s since %s %lld", st->py_name ? st->py_name : st->n_frames ?
                 st->frames[0] : "?", st->py_source ? ": " : "", st->py_source ? st->py_source : "",
                 pl_format_bytes(st->growth_bytes, a, sizeof a), xp->n_steps ? "step" : "second",
                 (long long)xp->site_tail_step);
        fact(o, "Top call site", line);
    }
    if (grows && m >= 0 && m < PL_METRIC__COUNT) {
        const pl_report_metric_t *mt = &p->metrics[m];
        bool bytes = pl_metric_is_bytes((pl_metric_t)m);
        double k = pv->by_time && pv->bucket_s > 0 ? pv->bucket_s : 1;
        int n = snprintf(line, sizeof line, "+%s/%s of %s", pl_format_value(pv->per_step / k, bytes, a, sizeof a),
                         pv->by_time ? "s" : "step", pl_metric_name((pl_metric_t)m));
        if (isfinite(mt->verdict.per_hour) && n > 0 && (size_t)n < sizeof line)
            snprintf(line + n, sizeof line - (size_t)n, " (%s/h)", pl_format_value(mt->verdict.per_hour, bytes, b,
                                                                                   sizeof b));
        fact(o, "Rate", line);
        if (pv->has_oom) {
            /* the projection is the metric's that reaches its limit first, not always the rate's: named when not */
            int om = pv->oom_metric >= 0 && pv->oom_metric < PL_METRIC__COUNT ? pv->oom_metric : m;
            const pl_report_metric_t *ot = &p->metrics[om];
            const char *src = ot->limit_source ? ot->limit_source : "the limit";
            pl_format_value(ot->verdict.limit, pl_metric_is_bytes((pl_metric_t)om), c, sizeof c);
            char whose[64] = "";
            if (om != m) snprintf(whose, sizeof whose, "%s ", pl_metric_name((pl_metric_t)om));
            if (isfinite(pv->oom_seconds) && pv->by_time) /* a bucket is not a step: the time alone */
                snprintf(line, sizeof line, "in ~%s, %sagainst %s (%s)",
                         pl_format_duration(pv->oom_seconds, a, sizeof a), whose, src, c);
            else if (isfinite(pv->oom_seconds))
                snprintf(line, sizeof line, "in ~%s, %lld steps from the last, %sagainst %s (%s)",
                         pl_format_duration(pv->oom_seconds, a, sizeof a), (long long)pv->steps_to_oom, whose, src, c);
            else if (!pv->by_time)
                snprintf(line, sizeof line, "%lld steps from the last, %sagainst %s (%s)", (long long)pv->steps_to_oom,
                         whose, src, c);
            else
                snprintf(line, sizeof line, "%sagainst %s (%s), at a time the trace cannot tell", whose, src, c);
            fact(o, pv->kind == PL_PV_LEAK ? "OOM projected" : "Limit reached", line);
        }
    } else if (pv->kind == PL_PV_UNDECIDED && m >= 0) {
        if (pv->by_time && pv->bucket_s > 0)
            snprintf(line, sizeof line, "about %s more of %s would decide",
                     pl_format_duration((double)pv->more_steps * pv->bucket_s, a, sizeof a),
                     pl_metric_name((pl_metric_t)m));
        else
            snprintf(line, sizeof line, "about %lld more steps of %s would decide", (long long)pv->more_steps,
                     pl_metric_name((pl_metric_t)m));
        fact(o, "Not decided", line);
    } else if (pv->kind == PL_PV_NO_LEAK && pv->warmup_steps > 0 && pv->metric_warmup >= 0) {
        if (pv->by_time && pv->bucket_s > 0)
            snprintf(line, sizeof line, "%s of %s, then flat",
                     pl_format_duration((double)pv->warmup_steps * pv->bucket_s, a, sizeof a),
                     pl_metric_name((pl_metric_t)pv->metric_warmup));
        else
            snprintf(line, sizeof line, "%lld steps of %s, then flat", (long long)pv->warmup_steps,
                     pl_metric_name((pl_metric_t)pv->metric_warmup));
        fact(o, "Warmup", line);
    }
    fputs("</dl>\n</section>\n", o);
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
            if (!w->has_metric[m]) continue; /* judged by the analysis (pl_run_analyze) */
            const pl_window_metric_t v = w->metric[m];
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

/* One row per rank, in the view's order, and whether the ranks agree (docs/verdict.md §9). */
static void ranks_html(FILE *o, const pl_report_t *r, const pl_run_view_t *v) {
    const pl_run_verdict_t *rv = &r->verdict;
    fprintf(o, "<h2>Ranks</h2>\n<p>%zu ranks on %zu node%s: ", rv->n_ranks, rv->n_nodes, rv->n_nodes == 1 ? "" : "s");
    esc(o, rv->ranks_line);
    fputs("</p>\n<table><tr><th>rank</th><th>local rank</th><th>node</th><th>pid</th><th>verdict</th></tr>\n", o);
    for (size_t k = 0; k < v->n_ranks; k++) {
        const pl_report_process_t *p = r->procs[v->rank_rows[k]];
        bool leaks = p->verdict.kind == PL_PV_LEAK;
        fprintf(o, "<tr><td class=\"num\">%d</td><td class=\"num\">", p->rank);
        if (p->local_rank >= 0) fprintf(o, "%d", p->local_rank);
        else fputs("-", o);
        fputs("</td><td>", o);
        esc(o, p->node[0] ? p->node : "-");
        fprintf(o, "</td><td class=\"num\">%lld</td><td class=\"%s\">%s</td></tr>\n", (long long)p->pid,
                leaks ? "leak" : "flat", pl_pverdict_name(p->verdict.kind));
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
    const pl_end_t e = xp->ended; /* written by the analysis (pl_run_analyze) */
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

/* A series with fewer points than a verdict needs (verdict.c's min_tail_points) says too little for a chart. */
static bool chartable(const pl_report_t *r, const pl_report_metric_t *mt) {
    size_t need = r->params.min_tail_points > 2 ? r->params.min_tail_points : 2;
    return mt->present && mt->series.n_points >= need && mt->verdict.undecided != PL_UNDECIDED_NO_DATA;
}

/* The process's charts: the metric that decided its verdict first, then the others that are not flat; flat ones
 * collapsed under one line; series too short to judge as one line, not a chart. */
static int charts(FILE *o, const pl_report_t *r, const pl_report_process_t *p) {
    char a[32];
    int first = p->verdict.metric, order[PL_METRIC__COUNT], n = 0, n_flat = 0, n_few = 0;
    if (first >= 0 && first < PL_METRIC__COUNT && chartable(r, &p->metrics[first])) order[n++] = first;
    for (int m = 0; m < PL_METRIC__COUNT; m++)
        if (!(n && m == order[0])) order[n++] = m;
    bool any = false;
    for (int m = 0; m < PL_METRIC__COUNT; m++) any |= chartable(r, &p->metrics[m]);
    if (any)
        fprintf(o, "<p class=\"legend\">Charts: green = per-step baseline (minimum), dotted green = baseline where the "
               "judged tail starts, grey = per-step peak, yellow = warmup, blue = judged tail, red dashes = fitted "
               "tail slope (Theil-Sen), on to the projected OOM against the limit where one is projected%s%s.</p>\n",
            p->n_marks ? ", purple dotted lines = plateau_mark() points" : "",
            validation_passes(r, p) ? ", orange ticks = validation passes" : "");
    for (int pass = 0; pass < 2; pass++) { /* 0: the charts shown, 1: the flat ones, collapsed */
        for (int i = 0; i < n; i++) {
            pl_metric_t m = (pl_metric_t)order[i];
            const pl_report_metric_t *mt = &p->metrics[m];
            if (!chartable(r, mt)) continue;
            const char *label = pl_report_metric_label(p, m);
            bool flat = !strcmp(label, "flat");
            if (flat != (pass == 1)) continue;
            if (pass == 1 && !n_flat++)
                fputs("<details class=\"flat-charts\"><summary>flat metrics</summary>\n", o);
            fprintf(o, "<h3>%s: <span class=\"%s\">%s</span></h3>\n", pl_metric_name(m), label_class(label), label);
            int rc = chart(o, r, p, m, mt);
            if (rc) return rc;
        }
        if (pass == 1 && n_flat) fputs("</details>\n", o);
    }
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        const pl_report_metric_t *mt = &p->metrics[m];
        if (!mt->present || chartable(r, mt)) continue;
        fputs(n_few++ ? "; " : "<p class=\"few\">Too few points to chart: ", o);
        fprintf(o, "%s %zu point%s", pl_metric_name((pl_metric_t)m), mt->series.n_points,
                mt->series.n_points == 1 ? "" : "s");
        if (mt->series.n_points)
            fprintf(o, ", last %s", pl_format_value(mt->verdict.last_value, pl_metric_is_bytes((pl_metric_t)m), a,
                                                   sizeof a));
    }
    if (n_few) fputs(".</p>\n", o);
    return 0;
}

/* One row's section: heading, damage, diagnosis, the charts, the metric table, the call sites (unless they are the
 * run's, shown under its verdict). */
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
    int rc = charts(o, r, p); /* the charts, then every metric in one table */
    if (rc) return rc;
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
    fputs("</table>\n", o);
    if (xp && !headlined(r, p)) where_html(o, p, xp);
    return 0;
}

/* Folded in the HTML as in the text report's process table: the view's rule (run.h, pl_run_view_hides). Row i is
 * in group k (the plain rows: workers, helpers) when it is hidden and folded for that reason. */
static bool in_group(const pl_run_view_t *v, size_t i, pl_fold_t k) { return pl_run_view_hides(v, i) && v->fold[i] == k; }

/* One collapsed group: <details class="CLS"><summary>SUMMARY</summary> the sections of its rows </details>. */
static int fold_group(FILE *o, const pl_report_t *r, const pl_extract_t *x, const pl_run_view_t *v, pl_fold_t k,
                      const char *cls, const char *summary) {
    fprintf(o, "<details class=\"%s\"><summary>", cls);
    esc(o, summary);
    fputs("</summary>\n", o);
    for (size_t i = 0; i < r->n_procs; i++) {
        if (!in_group(v, i, k)) continue;
        int rc = section(o, r, x, r->procs[i]);
        if (rc) return rc;
    }
    fputs("</details>\n", o);
    return 0;
}

/* Quiet workers, short helpers, pools and generations, each group collapsed under the line the text report says;
 * leaking, slowly growing or damaged workers were shown in full above. */
static int workers_html(FILE *o, const pl_report_t *r, const pl_extract_t *x, const pl_run_view_t *v) {
    size_t n_helpers = 0, n_rows = 0;
    for (size_t i = 0; i < r->n_procs; i++) {
        n_rows += pl_run_view_hides(v, i);
        n_helpers += in_group(v, i, PL_FOLD_HELPER);
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
    if (pl_run_view_workers_line(v, line, sizeof line)) rc = fold_group(o, r, x, v, PL_FOLD_WORKER, "workers", line);
    if (!rc && n_helpers) {
        snprintf(line, sizeof line, "%zu short helper process%s: none leaks (no steps, under 1 s, under 64 MiB RSS)",
                 n_helpers, n_helpers > 1 ? "es" : "");
        rc = fold_group(o, r, x, v, PL_FOLD_HELPER, "helpers", line);
    }
    for (size_t i = 0; i < r->n_procs && !rc; i++) { /* pools and generations: one collapsed section each */
        const pl_report_process_t *p = r->procs[i];
        if (!pl_run_view_hides(v, i) || (v->fold[i] != PL_FOLD_POOL && v->fold[i] != PL_FOLD_GENERATIONS)) continue;
        if (p->n_gen && p->n_findings)
            snprintf(line, sizeof line, "generations: %s", p->findings[0].text);
        else if (p->n_gen)
            snprintf(line, sizeof line, "generations of the workers of pid %lld", (long long)p->pid);
        else
            snprintf(line, sizeof line, "workers of pid %lld as a pool (%zu that live through its steps), heap.bytes "
                     "summed per step: %s", (long long)p->pid, p->n_pool,
                     pl_report_metric_label(p, PL_METRIC_HEAP_BYTES));
        fprintf(o, "<details class=\"%s\"><summary>", p->n_gen ? "generations" : "pool");
        esc(o, line);
        fputs("</summary>\n", o);
        rc = section(o, r, x, p);
        fputs("</details>\n", o);
    }
    return rc;
}

/* The row of trace i's parent in the run: same node, its pid the child's ppid, not an image that exec'd away, and
 * started before the child (trace start, then file order: a reused pid cannot make a cycle); -1 when none (a root). */
static long parent_of(const pl_extract_t *x, size_t i) {
    const pl_extract_proc_t *c = &x->procs[i];
    for (size_t k = 0; k < x->n_procs; k++) {
        const pl_extract_proc_t *q = &x->procs[k];
        if (k == i || q->pid != c->ppid || q->exec_end || strcmp(q->node, c->node)) continue;
        if (q->t0_ns < c->t0_ns || (q->t0_ns == c->t0_ns && k < i)) return (long)k;
    }
    return -1;
}

static void tree_node(FILE *o, const pl_extract_t *x, const pl_run_view_t *v, const long *parent, size_t i);

/* The children of trace `of` (-1: the roots): those shown in full, then the quiet workers folded under one line;
 * ranks side by side. */
static void tree_children(FILE *o, const pl_extract_t *x, const pl_run_view_t *v, const long *parent, long of) {
#define folded(k) pl_run_view_hides(v, v->row_of[k])
    size_t n = 0, n_quiet = 0, n_ranks = 0;
    for (size_t k = 0; k < x->n_procs; k++) {
        if (parent[k] != of) continue;
        n++;
        n_quiet += folded(k);
        n_ranks += x->procs[k].rank >= 0;
    }
    if (!n) return;
    fprintf(o, "<ul class=\"%s\">\n", n_ranks >= 2 ? "tree side" : "tree");
    for (size_t k = 0; k < x->n_procs; k++)
        if (parent[k] == of && (!folded(k) || n_quiet < 2)) tree_node(o, x, v, parent, k);
    if (n_quiet >= 2) {
        fprintf(o, "<li><details><summary>%zu quiet workers</summary>\n<ul class=\"tree\">\n", n_quiet);
        for (size_t k = 0; k < x->n_procs; k++)
            if (parent[k] == of && folded(k)) tree_node(o, x, v, parent, k);
        fputs("</ul></details></li>\n", o);
    }
    fputs("</ul>\n", o);
#undef folded
}

static void tree_node(FILE *o, const pl_extract_t *x, const pl_run_view_t *v, const long *parent, size_t i) {
    const pl_extract_proc_t *p = &x->procs[i];
    pl_pverdict_t k = p->proc->verdict.kind;
    fprintf(o, "<li><span class=\"%s\">%s</span> pid %u",
            k == PL_PV_LEAK ? "leak" : k == PL_PV_NO_LEAK ? "flat" : "inconclusive", pl_pverdict_name(k), p->pid);
    if (p->rank >= 0) fprintf(o, ", rank %d", p->rank);
    if (p->node[0]) {
        fputs(", node ", o);
        esc(o, p->node);
    }
    fprintf(o, ", %llu steps: <code>", (unsigned long long)p->n_steps);
    esc(o, p->cmdline[0] ? p->cmdline : p->proc->name);
    fputs("</code> <span class=\"file\">", o);
    esc(o, p->file);
    fputs(p->damaged ? " (damaged)" : p->clean_end ? "" : " (no end record)", o);
    fputs("</span>\n", o);
    tree_children(o, x, v, parent, (long)i);
    fputs("</li>\n", o);
}

/* Processes as a tree by parent: the trainer at the root, its workers under it (quiet ones folded), ranks side by
 * side. Parents are found once (O(n^2) in processes), each level lists its children (O(n) each). */
static int tree_html(FILE *o, const pl_extract_t *x, const pl_run_view_t *v) {
    long *parent = malloc(x->n_procs * sizeof *parent);
    if (!parent) return -ENOMEM;
    for (size_t i = 0; i < x->n_procs; i++) parent[i] = parent_of(x, i);
    tree_children(o, x, v, parent, -1);
    free(parent);
    return 0;
}

/* The sections shown in full: other processes first, then the ranks side by side (in the view's order, as the rank
 * table). */
static int sections_html(FILE *o, const pl_report_t *r, const pl_extract_t *x, const pl_run_view_t *v) {
    size_t n_ranks = 0;
    for (size_t i = 0; i < r->n_procs; i++) {
        const pl_report_process_t *p = r->procs[i];
        if (pl_run_view_hides(v, i)) continue;
        if (pl_report_is_rank(p)) {
            n_ranks++;
            continue;
        }
        int rc = section(o, r, x, p);
        if (rc) return rc;
    }
    if (!n_ranks) return 0;
    fputs(n_ranks >= 2 ? "<div class=\"side\">\n" : "<div>\n", o);
    for (size_t k = 0; k < v->n_ranks; k++) {
        size_t i = v->rank_rows[k];
        const pl_report_process_t *p = r->procs[i];
        if (pl_run_view_hides(v, i)) continue;
        fputs("<div class=\"col\">\n", o);
        int rc = section(o, r, x, p);
        fputs("</div>\n", o);
        if (rc) return rc;
    }
    fputs("</div>\n", o);
    return 0;
}

/* The page, with the view of the run (which rows fold: run.h). */
static int html_page(const pl_run_t *run, const pl_run_view_t *v, FILE *o) {
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
    headline(o, r, x);
    const pl_report_process_t *dp = deciding(r);
    const pl_extract_proc_t *dxp = dp ? extras_of(x, dp) : NULL;
    if (dxp) where_html(o, dp, dxp);
    if (r->cut_short) {
        fputs("<div class=\"cut\"><b>The run was cut short.</b> ", o);
        esc(o, r->cut_reason);
        fputs("</div>\n", o);
    }
    window_html(o, run); /* report --between: what grew in the window, first */
    if (r->verdict.n_ranks >= 2) ranks_html(o, r, v);
    if (x && x->n_procs > 1) {
        const pl_run_totals_t *t = &v->totals;
        pl_format_bytes(t->rss_bytes, b, sizeof b);
        if (t->kind == PL_TOTALS_PSS)
            fprintf(o, "<h2>Processes</h2>\n<p>Total PSS %s (RSS %s): shared pages are counted once.</p>\n",
                    pl_format_bytes(t->pss_bytes, a, sizeof a), b);
        else if (t->kind == PL_TOTALS_PSS_SOME)
            fprintf(o, "<h2>Processes</h2>\n<p>Total PSS %s over the %zu processes with a PSS sample (RSS %s): shared "
                       "pages are counted once. A process's first PSS sample comes 5 s after it starts.</p>\n",
                    pl_format_bytes(t->pss_bytes, a, sizeof a), t->n_pss, b);
        else
            fprintf(o, "<h2>Processes</h2>\n<p>Total RSS %s. No PSS sample: a process's first comes 5 s after it "
                       "starts, and PLATEAU_PSS=0 turns them off.</p>\n", b);
        int rc = tree_html(o, x, v);
        if (rc) return rc;
    }
    int rc = sections_html(o, r, x, v);
    if (rc) return rc;
    rc = workers_html(o, r, x, v);
    if (rc) return rc;
    fputs("</body></html>\n", o);
    return ferror(o) ? -EIO : 0;
}

int pl_render_html(const pl_run_t *run, FILE *o) {
    if (!run || !run->report || !o) return -EINVAL;
    pl_run_view_t v;
    if (pl_run_view_make(run->report, run->ext, &v)) return -ENOMEM;
    int rc = html_page(run, &v, o);
    pl_run_view_free(&v);
    return rc;
}
