/* reports/analyze/between: what grew between two steps, judged once (see between.h, docs/window.md). */
#include "between.h"

#include <math.h>

bool pl_window_metric(const pl_report_process_t *p, pl_metric_t m, int64_t from, int64_t to, pl_window_metric_t *out) {
    if (!p || (unsigned)m >= PL_METRIC__COUNT || !p->metrics[m].present) return false;
    const pl_series_t *s = &p->metrics[m].series;
    if (s->by_time || !s->n_points || s->points[0].step > to) return false;
    size_t ia = 0, ib = 0; /* the last point at or before each end (points are sorted by step) */
    for (size_t i = 0; i < s->n_points && s->points[i].step <= to; i++) {
        if (s->points[i].step <= from) ia = i;
        ib = i;
    }
    pl_window_metric_t w = {.from_step = s->points[ia].step, .to_step = s->points[ib].step,
                            .from = s->points[ia].base, .to = s->points[ib].base, .peak = NAN};
    w.change = w.to - w.from;
    w.per_step = w.to_step > w.from_step ? w.change / (double)(w.to_step - w.from_step) : 0;
    for (size_t i = ia + 1; i <= ib; i++)
        if (!(s->points[i].peak <= w.peak)) w.peak = s->points[i].peak;
    *out = w;
    return true;
}

/* the fit of p's window from its facts */
static pl_window_fit_t fit_of(const pl_extract_proc_t *p) {
    const pl_extract_window_t *w = p ? p->window : NULL;
    if (!w) return PL_WINDOW_NONE;
    if (w->no_steps) return PL_WINDOW_NO_STEPS;
    if (!w->reached) return PL_WINDOW_AFTER_END;
    return w->end_step < w->to_step ? PL_WINDOW_CUT : PL_WINDOW_WHOLE;
}

void pl_window_judge(pl_extract_t *x) {
    for (size_t i = 0; x && i < x->n_procs; i++) {
        pl_extract_proc_t *p = &x->procs[i];
        pl_extract_window_t *w = p->window;
        if (!w) continue;
        w->fit = fit_of(p);
        for (int m = 0; m < PL_METRIC__COUNT; m++)
            w->has_metric[m] = pl_window_metric(p->proc, (pl_metric_t)m, w->from_step, w->end_step, &w->metric[m]);
    }
}
