/* reports/render_text: the terminal report: one line per metric (name, sparkline of the per-step baseline, last
 * value, verdict, the numbers behind it), then the diagnosis. Fits 120 columns for typical numbers. */
#include "render.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "format.h"

static const char *blocks_utf8[8] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
static const char blocks_ascii[8] = {' ', '.', ':', '-', '=', '+', '*', '#'};

static void sparkline(FILE *out, const pl_series_t *s, int width, bool ascii) {
    pl_series_t c;
    if (s->n_points == 0 || pl_series_compact(s, (size_t)width, &c)) {
        fprintf(out, "%*s", width, "");
        return;
    }
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (size_t i = 0; i < c.n_points; i++) {
        if (c.points[i].base < lo) lo = c.points[i].base;
        if (c.points[i].base > hi) hi = c.points[i].base;
    }
    /* a range under 2 % of the level is drawn as what it is, nearly flat, instead of being stretched to full
     * height (noise on a flat series would otherwise look like a mountain range) */
    double range = hi - lo;
    if (range < 0.02 * fabs(hi)) range = 0.02 * fabs(hi);
    for (size_t i = 0; i < c.n_points; i++) {
        double f = range > 0 ? (c.points[i].base - lo) / range * 7.999 : 0;
        int k = f >= 7 ? 7 : f > 0 ? (int)f : 0; /* NaN and overflow land at the ends, never in a cast */
        if (ascii) fputc(blocks_ascii[k], out);
        else fputs(blocks_utf8[k], out);
    }
    for (size_t i = c.n_points; i < (size_t)width; i++) fputc(' ', out);
    pl_series_free(&c);
}

static void details(FILE *out, const pl_report_metric_t *m, bool bytes) {
    const pl_verdict_t *v = &m->verdict;
    char a[32], b[32], c[32];
    switch (v->kind) {
    case PL_VERDICT_PLATEAU:
        fprintf(out, "warmup %lld steps (+%s), tail flat (%s/step over %lld steps)", (long long)v->warmup_steps,
                pl_format_value(v->warmup_size, bytes, a, sizeof a),
                pl_format_value(v->slope_per_step, bytes, b, sizeof b),
                (long long)v->tail_steps);
        break;
    case PL_VERDICT_FLAT:
        fprintf(out, "flat (%s/step over %lld steps)", pl_format_value(v->slope_per_step, bytes, a, sizeof a),
                (long long)v->tail_steps);
        break;
    case PL_VERDICT_LEAK:
        fprintf(out, "+%s/step", pl_format_value(v->slope_per_step, bytes, a, sizeof a));
        if (isfinite(v->per_hour)) fprintf(out, " (%s/h)", pl_format_value(v->per_hour, bytes, b, sizeof b));
        fprintf(out, " since step %lld", (long long)v->tail_start_step);
        if (v->has_oom) {
            fprintf(out, ", OOM at step %lld", (long long)v->oom_step);
            if (isfinite(v->oom_seconds)) fprintf(out, " (~%s)", pl_format_duration(v->oom_seconds, c, sizeof c));
        }
        break;
    case PL_VERDICT_INCONCLUSIVE:
        switch (v->undecided) {
        case PL_UNDECIDED_NO_DATA: fprintf(out, "too few points"); break;
        case PL_UNDECIDED_WARMUP: fprintf(out, "growing since the start (%s/step), may be warmup",
                                          pl_format_value(v->slope_per_step, bytes, a, sizeof a)); break;
        case PL_UNDECIDED_TAIL_SHORT: fprintf(out, "tail too short (%lld steps)", (long long)v->tail_steps); break;
        case PL_UNDECIDED_SETTLING: fprintf(out, "still settling (%s/step, slowing down)",
                                            pl_format_value(v->slope_per_step, bytes, a, sizeof a)); break;
        default: fprintf(out, "noisy (%s/step, not significant)",
                         pl_format_value(v->slope_per_step, bytes, a, sizeof a)); break;
        }
        fprintf(out, "; ~%lld more steps", (long long)v->more_steps);
        break;
    }
}

int pl_render_text(const pl_report_t *r, FILE *out, const pl_render_text_opts_t *opts) {
    if (!r || !out) return -EINVAL;
    int width = opts && opts->spark_width ? opts->spark_width : 24;
    if (width < 4) width = 4;
    if (width > 80) width = 80;
    bool ascii = opts && opts->ascii;
    fprintf(out, "plateau report: %s\n", r->source[0] ? pl_format_esc(r->source) : "(in-memory)");
    if (r->cut_short) fprintf(out, "run cut short: %s\n", pl_format_esc(r->cut_reason));
    for (size_t i = 0; i < r->n_procs; i++) {
        const pl_report_process_t *p = r->procs[i];
        fprintf(out, "process %lld", (long long)p->pid);
        if (p->name[0]) fprintf(out, " %s", pl_format_esc(p->name));
        if (p->rank >= 0) fprintf(out, " (rank %d)", p->rank);
        fputc('\n', out);
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            const pl_report_metric_t *mt = &p->metrics[m];
            if (!mt->present) continue;
            bool bytes = pl_metric_is_bytes((pl_metric_t)m);
            char last[32];
            fprintf(out, "  %-13s ", pl_metric_name((pl_metric_t)m));
            sparkline(out, &mt->series, width, ascii);
            fprintf(out, " %10s  %-12s ", pl_format_value(mt->verdict.last_value, bytes, last, sizeof last),
                    pl_verdict_name(mt->verdict.kind));
            details(out, mt, bytes);
            fputc('\n', out);
        }
        if (p->n_findings) fprintf(out, "diagnosis:\n");
        for (size_t k = 0; k < p->n_findings; k++) fprintf(out, "  - %s\n", pl_format_esc(p->findings[k].text));
    }
    return ferror(out) ? -EIO : 0;
}
