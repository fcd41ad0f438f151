/* reports/generations: the generation rule (generations.h, docs/verdict.md §8). Invariants: a generation series is
 * never called growing on fewer than 5 generations (the exact Mann-Kendall p of a perfectly increasing series of n
 * values is 1/n!, and 1/4! = 0.042 is above alpha = 0.01), nor on a rise smaller than two bands; a verdict is never
 * stronger than its data: 3 generations may be flat, never a leak. */
#include "generations.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnosis.h"
#include "format.h"
#include "trend.h"

double pl_generations_mk_p(size_t n, double s) {
    if (n < 2 || n > PL_GEN_MAX_GENERATIONS || !isfinite(s)) return NAN;
    size_t pairs = n * (n - 1) / 2;
    /* S = pairs - 2 D with D the inversions; P(S >= s) = P(D <= (pairs - s) / 2). Permutations of k items by their
     * inversions (Mahonian numbers) as probabilities: P_k(d) = 1/k sum_{j < k} P_{k-1}(d - j). */
    double dmax = floor(((double)pairs - s) / 2 + 1e-9);
    if (dmax < 0) return 0;
    if (dmax >= (double)pairs) return 1;
    double *p = calloc(pairs + 1, sizeof *p), *q = calloc(pairs + 1, sizeof *q);
    if (!p || !q) {
        free(p);
        free(q);
        return NAN;
    }
    p[0] = 1;
    for (size_t k = 2; k <= n; k++) {
        size_t top = k * (k - 1) / 2;
        double run = 0; /* sliding sum of the last k entries of p */
        for (size_t d = 0; d <= top; d++) {
            run += p[d];
            if (d >= k) run -= p[d - k];
            q[d] = run / (double)k;
        }
        double *t = p;
        p = q;
        q = t;
    }
    double sum = 0;
    for (size_t d = 0; d <= (size_t)dmax; d++) sum += p[d];
    free(p);
    free(q);
    return sum > 1 ? 1 : sum;
}

/* steps from a to b, in double: steps come from traces and may be anything an int64 holds */
static double dsteps(int64_t a, int64_t b) { return (double)b - (double)a; }

static int64_t clamp_i64(double v) { return v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v; }

static int sign_band(double a, double b, double band) { return b - a > band ? 1 : a - b > band ? -1 : 0; }

/* Theil-Sen slope per step, median and median absolute deviation of m generations. Returns 0 or -ENOMEM. */
static int recent_fit(const pl_point_t *pt, size_t m, double *slope, double *level, double *mad) {
    double *a = malloc((m * (m - 1) / 2 + 1) * sizeof *a), *b = malloc(m * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = i + 1; j < m; j++)
            if (pt[j].step > pt[i].step) a[k++] = (pt[j].base - pt[i].base) / dsteps(pt[i].step, pt[j].step);
    *slope = k ? pl_trend_median(a, k) : 0;
    for (size_t i = 0; i < m; i++) b[i] = pt[i].base;
    *level = pl_trend_median(b, m);
    for (size_t i = 0; i < m; i++) b[i] = fabs(pt[i].base - *level);
    *mad = pl_trend_median(b, m);
    free(a);
    free(b);
    return 0;
}

int pl_generations_classify(const pl_series_t *s, double alpha, pl_verdict_t *out) {
    if (!s || !out || !(alpha > 0 && alpha < 1)) return -EINVAL;
    pl_verdict_t v;
    memset(&v, 0, sizeof v);
    v.kind = PL_VERDICT_INCONCLUSIVE;
    v.undecided = PL_UNDECIDED_NO_DATA;
    v.slope_per_step = v.slope_lo = v.slope_hi = v.level = v.last_value = v.per_hour = NAN;
    v.oom_seconds = NAN;
    v.p_up = 1;
    v.var_factor = 1;
    v.peak = s->n_points ? s->peak : NAN;
    v.peak_step = s->peak_step;
    size_t n = s->n_points, off = n > PL_GEN_MAX_GENERATIONS ? n - PL_GEN_MAX_GENERATIONS : 0;
    const pl_point_t *pt = n ? s->points + off : NULL; /* an empty series may have no points array */
    n -= off;
    v.n_points = n;
    /* generations start every `every` trainer steps (median gap): more_steps is said in those */
    double every = 0;
    if (n >= 2) {
        double *gap = malloc((n - 1) * sizeof *gap);
        if (!gap) return -ENOMEM;
        for (size_t i = 0; i + 1 < n; i++) gap[i] = dsteps(pt[i].step, pt[i + 1].step);
        every = pl_trend_median(gap, n - 1);
        free(gap);
    }
    if (n) {
        v.first_step = pt[0].step;
        v.last_step = pt[n - 1].step;
        v.last_value = pt[n - 1].base;
    }
    if (n < PL_GEN_MIN_GENERATIONS) {
        v.more_steps = clamp_i64((double)(PL_GEN_MIN_GENERATIONS - n) * (every > 0 ? every : 1));
        *out = v;
        return 0;
    }
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *sl = malloc(n * (n - 1) / 2 * sizeof *sl);
    if (!x || !y || !sl) {
        free(x);
        free(y);
        free(sl);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)pt[i].step;
        y[i] = pt[i].base;
    }
    v.level = pl_trend_median(y, n); /* sorts y: values are read from pt below */
    double band = fmax(PL_GEN_BAND_BYTES, PL_GEN_BAND_REL * fabs(v.level));
    v.noise = band;
    /* Mann-Kendall with the band as ties, and Theil-Sen per trainer step */
    double S = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            S += sign_band(pt[i].base, pt[j].base, band);
            if (x[j] > x[i]) sl[k++] = (pt[j].base - pt[i].base) / (x[j] - x[i]);
        }
    v.slope_per_step = k ? pl_trend_median(sl, k) : 0;
    free(x);
    free(y);
    free(sl);
    v.p_up = pl_generations_mk_p(n, S);
    if (!isfinite(v.p_up)) return -ENOMEM;
    v.tail_start_step = v.first_step;
    v.tail_steps = clamp_i64(dsteps(v.first_step, v.last_step));
    v.tail_points = n;
    v.threshold_per_step = v.tail_steps > 0 ? 2 * band / (double)v.tail_steps : 0;
    if (s->step_ns > 0 && isfinite(v.slope_per_step)) v.per_hour = v.slope_per_step * 3600e9 / s->step_ns;
    /* flat: over the most recent two thirds (at least 3 generations) no visible trend (Theil-Sen rise within one
     * band: an odd generation cannot tilt it) and most generations within a band of their median (MAD); a plateau
     * when earlier generations sat more than two bands lower (the first passes warmed something up) */
    size_t m = (2 * n + 2) / 3 > PL_GEN_MIN_GENERATIONS ? (2 * n + 2) / 3 : PL_GEN_MIN_GENERATIONS;
    const pl_point_t *rec = pt + (n - m);
    double rec_slope, rec_level, rec_mad;
    int rc = recent_fit(rec, m, &rec_slope, &rec_level, &rec_mad);
    if (rc) return rc;
    if (fabs(rec_slope) * dsteps(rec[0].step, rec[m - 1].step) <= band && rec_mad <= band) {
        v.undecided = PL_UNDECIDED_NONE;
        v.tail_start_step = rec[0].step;
        v.tail_steps = clamp_i64(dsteps(rec[0].step, v.last_step));
        v.tail_points = m;
        v.slope_per_step = rec_slope;
        double lo = HUGE_VAL;
        for (size_t i = 0; i + m < n; i++) lo = fmin(lo, pt[i].base);
        if (rec_level - lo > 2 * band) {
            v.kind = PL_VERDICT_PLATEAU;
            v.has_warmup = true;
            v.warmup_end_step = rec[0].step;
            v.warmup_steps = clamp_i64(dsteps(v.first_step, rec[0].step));
            v.warmup_size = rec_level - pt[0].base;
        } else {
            v.kind = PL_VERDICT_FLAT;
        }
        *out = v;
        return 0;
    }
    /* growth, unless the recent generations are flat (above): never call a warmup a leak */
    double rise = v.slope_per_step * dsteps(v.first_step, v.last_step);
    if (v.p_up < alpha && v.slope_per_step > 0 && rise >= 2 * band &&
        sign_band(pt[0].base, pt[n - 1].base, band) > 0) {
        v.kind = PL_VERDICT_LEAK;
        v.undecided = PL_UNDECIDED_NONE;
        *out = v;
        return 0;
    }
    /* neither: two more generations at least, and five in all (the fewest that can be significant) */
    size_t more = n < 5 ? 5 - n : 2;
    v.undecided = PL_UNDECIDED_NOISY;
    v.more_steps = clamp_i64((double)more * (every > 0 ? every : 1));
    *out = v;
    return 0;
}

int pl_generations_judge(const pl_report_t *r, pl_report_process_t *p) {
    if (!r || !p || !p->n_gen) return -EINVAL;
    pl_report_metric_t *mt = &p->metrics[PL_METRIC_HEAP_BYTES];
    pl_proc_verdict_t *pv = &p->verdict;
    memset(pv, 0, sizeof *pv);
    pv->metric = pv->metric_warmup = pv->other_dx = pv->other_metric = pv->oom_metric = -1;
    pv->oom_seconds = pv->other_oom_seconds = NAN;
    p->n_findings = 0;
    pv->kind = PL_PV_NO_DATA;
    if (!mt->present) return 0;
    int rc = pl_generations_classify(&mt->series, r->params.alpha, &mt->verdict);
    if (rc) return rc;
    const pl_verdict_t *v = &mt->verdict;
    char a[32], b[32], c[32], d[32];
    size_t per_gen = p->n_gen_workers / p->n_gen;
    char who[112];
    snprintf(who, sizeof who, "%zu worker%s of pid %lld in %zu generation%s (%s%zu each, started every ~%lld steps)",
             p->n_gen_workers, p->n_gen_workers == 1 ? "" : "s", (long long)p->pid, p->n_gen, p->n_gen == 1 ? "" : "s",
             per_gen * p->n_gen == p->n_gen_workers ? "" : "about ", per_gen, (long long)p->gen_every_steps);
    pl_finding_t *f = &p->findings[0];
    switch (v->kind) {
    case PL_VERDICT_LEAK: {
        bool practical = pl_diagnosis_practical(v, &r->practical);
        pv->kind = practical ? PL_PV_LEAK : PL_PV_SLOW_GROWTH;
        pv->metric = PL_METRIC_HEAP_BYTES;
        pv->per_step = v->slope_per_step;
        f->code = practical ? PL_DX_HOST_LEAK : PL_DX_SLOW_GROWTH;
        snprintf(f->text, sizeof f->text,
                 "%s: each generation holds more live heap than the last, +%s per generation "
                 "(+%s/step; %s to %s over %zu)%s",
                 who, pl_format_bytes(v->slope_per_step * (double)(p->gen_every_steps > 0 ? p->gen_every_steps : 1),
                                      a, sizeof a),
                 pl_format_bytes(v->slope_per_step, b, sizeof b),
                 pl_format_bytes(mt->series.points[mt->series.n_points - v->n_points].base, c, sizeof c),
                 pl_format_bytes(v->last_value, d, sizeof d), v->n_points,
                 practical ? ": state that grows with every pass and that each new worker copies or rebuilds "
                             "(a dataset cache, worker_init_fn)"
                           : ", too slowly to matter within the horizon");
        break;
    }
    case PL_VERDICT_FLAT:
    case PL_VERDICT_PLATEAU:
        pv->kind = PL_PV_NO_LEAK;
        pv->warmup_steps = v->has_warmup ? v->warmup_steps : 0;
        pv->metric_warmup = v->has_warmup ? PL_METRIC_HEAP_BYTES : -1;
        f->code = PL_DX_NO_LEAK;
        if (v->has_warmup)
            snprintf(f->text, sizeof f->text, "%s: flat from one generation to the next since step %lld (the last %zu "
                     "within +-%s; earlier ones held up to %s less)", who, (long long)v->warmup_end_step,
                     v->tail_points, pl_format_bytes(v->noise, a, sizeof a), pl_format_bytes(v->warmup_size, b, sizeof b));
        else
            snprintf(f->text, sizeof f->text, "%s: flat from one generation to the next (the last %zu within +-%s)",
                     who, v->tail_points, pl_format_bytes(v->noise, a, sizeof a));
        break;
    default:
        pv->kind = v->undecided == PL_UNDECIDED_NO_DATA ? PL_PV_NO_DATA : PL_PV_UNDECIDED;
        pv->metric = PL_METRIC_HEAP_BYTES;
        pv->more_steps = v->more_steps;
        f->code = v->undecided == PL_UNDECIDED_NO_DATA ? PL_DX_NO_DATA : PL_DX_UNDECIDED;
        if (v->undecided == PL_UNDECIDED_NO_DATA)
            snprintf(f->text, sizeof f->text, "%s: too few generations to compare (%d needed)", who,
                     PL_GEN_MIN_GENERATIONS);
        else
            snprintf(f->text, sizeof f->text,
                     "%s: not decided yet (generations vary by more than %s, no clear trend); ~%lld more steps",
                     who, pl_format_bytes(2 * v->noise, a, sizeof a), (long long)v->more_steps);
        break;
    }
    p->n_findings = 1;
    return 0;
}
