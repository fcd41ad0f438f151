/* reports/analyze/between: what grew between two steps, judged once (see between.h, docs/window.md). */
#include "between.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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

size_t pl_window_usable(const pl_extract_t *x, char *why, size_t n) {
    size_t usable = 0, n_after = 0, n_none = 0;
    int64_t last = -1, from = 0;
    for (size_t i = 0; x && i < x->n_procs; i++) {
        pl_window_fit_t f = pl_window_fit(&x->procs[i]);
        if (f == PL_WINDOW_WHOLE || f == PL_WINDOW_CUT) usable++;
        if (f == PL_WINDOW_AFTER_END) {
            n_after++;
            from = x->procs[i].window->from_step;
            if (x->procs[i].window->last_step > last) last = x->procs[i].window->last_step;
        }
        n_none += f == PL_WINDOW_NO_STEPS;
    }
    if (why && n) {
        why[0] = 0;
        if (!usable && n_after)
            snprintf(why, n, "the run's processes ended before step %lld (the last completed step: %lld); choose "
                     "steps below it", (long long)from + 1, (long long)last);
        else if (!usable && n_none)
            snprintf(why, n, "no process of the run recorded steps (a window is counted in optimizer steps: the "
                     "run is reported by time, `plateau report` without --between)");
        else if (!usable)
            snprintf(why, n, "no process to measure");
    }
    return usable;
}

/* the holder's size (items, or nodes for a tensor) and bytes at the last census at or before step `at` */
static bool holder_at(const pl_retention_t *rt, const pl_retention_holder_t *h, int64_t at, bool first_if_none,
                      double *size, double *bytes) {
    const pl_retention_point_t *pt = NULL;
    for (size_t i = 0; i < h->n_points; i++) {
        uint32_t c = h->points[i].census;
        uint64_t st = c < rt->cap_census ? rt->census_step[c] : PL_TRACE_NA;
        if (st == PL_TRACE_NA || (int64_t)st > at) continue;
        pt = &h->points[i];
    }
    if (!pt && first_if_none && h->n_points) pt = &h->points[0]; /* first reported after the window's start: the
                                                                  * census sends a holder's size before its first
                                                                  * growth with it */
    if (!pt) return false;
    uint64_t sz = h->by_nodes ? pt->nodes : pt->items;
    if (sz == PL_TRACE_NA) return false;
    *size = (double)sz;
    *bytes = pt->bytes == PL_TRACE_NA ? NAN : (double)pt->bytes;
    return true;
}

size_t pl_window_holders(const pl_retention_t *rt, int64_t from, int64_t to, size_t *out, double *grow,
                         double *bytes_grow, size_t max) {
    size_t n = 0;
    for (size_t i = 0; rt && i < rt->n_holders; i++) {
        const pl_retention_holder_t *h = &rt->holders[i];
        double s0, b0, s1, b1;
        if (!holder_at(rt, h, to, false, &s1, &b1) || !holder_at(rt, h, from, true, &s0, &b0)) continue;
        double g = s1 - s0;
        if (!(g > 0)) continue;
        size_t k = n;
        while (k > 0 && grow[k - 1] < g) k--;
        if (k >= max) continue;
        size_t last = n < max ? n : max - 1;
        memmove(&out[k + 1], &out[k], (last - k) * sizeof *out);
        memmove(&grow[k + 1], &grow[k], (last - k) * sizeof *grow);
        memmove(&bytes_grow[k + 1], &bytes_grow[k], (last - k) * sizeof *bytes_grow);
        out[k] = i;
        grow[k] = g;
        bytes_grow[k] = b1 - b0;
        if (n < max) n++;
    }
    return n;
}

void pl_window_judge(pl_extract_t *x) {
    for (size_t i = 0; x && i < x->n_procs; i++) {
        pl_extract_proc_t *p = &x->procs[i];
        pl_extract_window_t *w = p->window;
        if (!w) continue;
        w->fit = fit_of(p);
        for (int m = 0; m < PL_METRIC__COUNT; m++)
            w->has_metric[m] = pl_window_metric(p->proc, (pl_metric_t)m, w->from_step, w->end_step, &w->metric[m]);
        w->n_holders = pl_window_holders(p->retention, w->from_step, w->end_step, w->holder, w->holder_grow,
                                         w->holder_bytes_grow, PL_WINDOW_HOLDERS);
    }
}
