/* reports/verdict: the decision rules of docs/verdict.md §4 over one compacted series.
 *
 * Order of the rules matters and encodes the product's priorities: a false "leak" on a warmup is the worst error
 * (it sends users chasing ghosts: corpus series seed003_*, a real run that grew for 90 steps, then stayed flat),
 * so "leak" needs a confirmed regime, a long enough tail, a significant Mann-Kendall test, a Sen interval above
 * zero, a slope above the practical threshold and a rise clear of the noise. Growth since the first step (or since
 * a jump at the first steps) is warmup until it has lasted warmup_allow_steps; geometrically decelerating growth is
 * "settling", not a leak.
 */
#include "verdict.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "trend.h"
#include "warmup.h"

#define MAX_MORE_STEPS 1000000000LL
#define RISE_SIGMAS 3.0              /* growth out of a flat regime must clear 3 noise widths */
#define RISE_SIGMAS_AFTER_WARMUP 2.0 /* growth after a warmup (a different regime): 2 */
#define RISE_SIGMAS_CERTAIN 100.0   /* a rise this large is a trend whatever the p-value (see fit_tail) */

void pl_verdict_params_default(pl_verdict_params_t *p) {
    if (!p) return;
    *p = (pl_verdict_params_t){
        .alpha = 0.01,
        .ci_level = 0.90,
        .flat_rel_per_step = 1e-4,
        .min_slope_abs = 0,
        .min_tail_steps = 40,
        .min_tail_points = 8,
        .warmup_allow_steps = 100,
        .max_points = 512,
        .limit = 0,
    };
}

const char *pl_verdict_name(pl_verdict_kind_t k) {
    switch (k) {
    case PL_VERDICT_FLAT: return "flat";
    case PL_VERDICT_PLATEAU: return "plateau";
    case PL_VERDICT_LEAK: return "leak";
    case PL_VERDICT_INCONCLUSIVE: return "inconclusive";
    }
    return "?";
}

const char *pl_verdict_undecided_name(pl_undecided_t u) {
    switch (u) {
    case PL_UNDECIDED_NONE: return "";
    case PL_UNDECIDED_NO_DATA: return "no-data";
    case PL_UNDECIDED_TAIL_SHORT: return "tail-short";
    case PL_UNDECIDED_WARMUP: return "warmup";
    case PL_UNDECIDED_NOISY: return "noisy";
    case PL_UNDECIDED_SETTLING: return "settling";
    }
    return "?";
}

static int64_t clamp_steps(double v) {
    if (!(v > 0)) return v == v ? 0 : MAX_MORE_STEPS;
    if (v > (double)MAX_MORE_STEPS) return MAX_MORE_STEPS;
    return (int64_t)ceil(v);
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

typedef struct {
    pl_trend_t t;
    double level, thr;
    bool growing, flat;
} tail_fit_t;

/* What the series did before a tail that follows a flatter regime: the window of twice the tail's width before it.
 * Strongly autocorrelated noise wanders, and a tail chosen because it looks like a line may be one rising excursion
 * whose own residuals look quiet and whose own autocorrelation is underestimated (short windows bias it low).
 * Returns the window's robust noise (around its own Theil-Sen line) and an AR(1) variance factor from the lag-1
 * autocorrelation of the residuals of both the window and the tail, each around its own line, pooled and
 * bias-corrected (r + (1+4r)/m, capped at 0.98). A leak must then rise clear of the earlier wander and stay
 * significant under that factor. */
static void noise_before(const double *x, const double *y, size_t n, size_t from, const pl_verdict_params_t *p,
                         double *noise, double *factor) {
    *noise = 0;
    *factor = 1;
    double span = x[n - 1] - x[from];
    size_t k = from;
    while (k > 0 && x[from] - x[k - 1] <= 2 * span) k--;
    if (from - k < p->min_tail_points || n - from < 3) return;
    /* drop a warmup ramp at the window's start: points far below the window's median level */
    {
        double *tmp = malloc((from - k) * sizeof *tmp);
        if (!tmp) return;
        for (size_t i = k; i < from; i++) tmp[i - k] = y[i];
        double med = pl_trend_median(tmp, from - k);
        for (size_t i = k; i < from; i++) tmp[i - k] = fabs(y[i] - med);
        double mad = 1.4826 * pl_trend_median(tmp, from - k);
        free(tmp);
        while (k < from && y[k] < med - 4 * mad) k++;
        if (from - k < p->min_tail_points) return;
    }
    pl_trend_t a, b;
    if (pl_trend_fit(x + k, y + k, from - k, p->ci_level, 1.0, &a)) return;
    if (pl_trend_fit(x + from, y + from, n - from, p->ci_level, 1.0, &b)) return;
    *noise = a.resid_sigma;
    const pl_trend_t *seg[2] = {&a, &b};
    size_t lo[2] = {k, from}, hi[2] = {from, n};
    double c0 = 0, c1 = 0;
    size_t m = 0;
    for (int j = 0; j < 2; j++) {
        double prev = 0;
        for (size_t i = lo[j]; i < hi[j]; i++) {
            double r = y[i] - (seg[j]->intercept + seg[j]->slope * x[i]);
            c0 += r * r;
            if (i > lo[j]) c1 += r * prev;
            prev = r;
            m++;
        }
    }
    if (!(c0 > 0)) return;
    double r1 = c1 / c0;
    r1 += (1 + 4 * r1) / (double)m;
    if (r1 > 0.98) r1 = 0.98;
    if (r1 > 0) *factor = (1 + r1) / (1 - r1);
}

static int fit_tail(const double *x, const double *y, size_t n, size_t from, const pl_verdict_params_t *p,
                    bool vs_before, double *scratch, tail_fit_t *f) {
    size_t m = n - from;
    double nb = 0, vf = 1;
    if (vs_before) noise_before(x, y, n, from, p, &nb, &vf);
    int rc = pl_trend_fit(x + from, y + from, m, p->ci_level, vf, &f->t);
    if (rc) return rc;
    for (size_t i = 0; i < m; i++) scratch[i] = y[from + i];
    f->level = pl_trend_median(scratch, m);
    f->thr = p->flat_rel_per_step * fabs(f->level);
    if (f->thr < p->min_slope_abs) f->thr = p->min_slope_abs;
    /* growing: significant (autocorrelation-corrected), interval above zero, at or above the practical threshold,
     * and visible: the rise over the tail is at least RISE_SIGMAS noise widths (guards against slow wander of
     * strongly autocorrelated noise that the correction underestimates) */
    double rise = f->t.slope * (x[n - 1] - x[from]);
    double noise = f->t.resid_sigma > nb ? f->t.resid_sigma : nb;
    /* A rise of RISE_SIGMAS_CERTAIN noise widths is a trend whatever the autocorrelation correction says: the
     * correction's AR(1) bound inflates the variance up to 99x when the residuals of a near-perfect line are a
     * regular pattern (one heap sample per step at the same phase), which called a straight 64 KiB/step climb
     * "noisy, not significant"; autocorrelated wander rises a few noise widths over a tail, not hundreds. The same
     * inflation widens Sen's interval, to no lower bound at all on a tail of 100 points (the part after the warmup
     * allowance): the interval's lower bound and the trend test are one piece of evidence, and both yield to it. */
    bool certain = rise > 0 && rise >= RISE_SIGMAS_CERTAIN * noise;
    f->growing = (f->t.p_up < p->alpha || certain) && (f->t.slope_lo > 0 || certain) && f->t.slope >= f->thr &&
                 f->t.slope > 0 &&
                 rise >= (vs_before ? RISE_SIGMAS : RISE_SIGMAS_AFTER_WARMUP) * noise;
    f->flat = f->t.slope_hi < f->thr || (f->thr == 0 && f->t.slope_hi <= 0);
    return 0;
}

/* Steps the tail must grow by before its interval is expected to clear the decision boundary: the half-width of
 * the Sen interval shrinks like span^-1.5 for evenly spaced points. */
static int64_t steps_to_decide(const tail_fit_t *f, int64_t span) {
    double h = 0.5 * (f->t.slope_hi - f->t.slope_lo);
    double margin = f->t.slope >= f->thr ? f->t.slope : f->thr - f->t.slope;
    if (span <= 0) return 1;
    if (!isfinite(h)) return span;
    if (!(margin > 0)) return MAX_MORE_STEPS;
    double grow = pow(h / margin, 2.0 / 3.0);
    return max64(1, clamp_steps((double)span * grow - (double)span));
}

/* Settling: growth whose rate decays geometrically, as in an exponential approach to a plateau (a cache or pool
 * filling up), rather than staying constant (linear leak), decaying slowly (sqrt-like leak) or dropping once at a
 * knee (warmup, then a leak). Three consecutive windows of equal width w = min(tail span, whole span / 3) end at
 * the last step; with Theil-Sen slopes s1, s2, s3 (the run's autocorrelation factor inherited), settling means
 * s1 > s2 > s3 > 0, both ratios q1 = s2/s1 and q2 = s3/s2 at most 0.7, q2 >= q1 / 3 (the same decay twice, not a
 * knee), and s3's interval entirely below s2's. docs/verdict.md §4. */
static int settling(const double *x, const double *y, size_t n, double tail_span, const pl_verdict_params_t *p,
                    double var_factor, bool *out) {
    *out = false;
    double total = x[n - 1] - x[0];
    double w = tail_span < total / 3 ? tail_span : total / 3;
    size_t cut[4];
    cut[3] = n;
    for (int j = 2; j >= 0; j--) {
        double edge = x[n - 1] - (3 - j) * w;
        size_t k = cut[j + 1];
        while (k > 0 && x[k - 1] >= edge) k--;
        cut[j] = k;
    }
    cut[0] = 0;
    pl_trend_t t[3];
    for (int j = 0; j < 3; j++) {
        if (cut[j + 1] - cut[j] < 5) return 0;
        int rc = pl_trend_fit(x + cut[j], y + cut[j], cut[j + 1] - cut[j], p->ci_level, var_factor, &t[j]);
        if (rc) return rc;
    }
    double s1 = t[0].slope, s2 = t[1].slope, s3 = t[2].slope;
    if (!(s1 > s2 && s2 > s3 && s3 > 0)) return 0;
    double q1 = s2 / s1, q2 = s3 / s2;
    *out = q1 <= 0.7 && q2 <= 0.7 && q2 >= q1 / 3 && t[2].slope_hi < t[1].slope_lo;
    return 0;
}

/* A leak that began late in a long flat tail barely moves the tail's Theil-Sen slope, and MSER keeps the long tail
 * because its mean is better estimated. Test the most recent quarter of the tail (at least min_tail_steps) on its
 * own; on growth, refit it as the tail (*f, *from updated) and return true. */
static bool recent_onset(const double *x, const double *y, size_t n, size_t from, const pl_verdict_params_t *p,
                         double *scratch, tail_fit_t *f, size_t *from_out) {
    double span = x[n - 1] - x[from];
    double win = span / 4 > (double)p->min_tail_steps ? span / 4 : (double)p->min_tail_steps;
    if (span < 2 * win) return false;
    size_t k = from;
    while (k < n && x[n - 1] - x[k] > win) k++;
    if (n - k < p->min_tail_points) return false;
    tail_fit_t r;
    if (fit_tail(x, y, n, k, p, true, scratch, &r)) return false;
    if (!r.growing) return false;
    *f = r;
    *from_out = k;
    return true;
}

/* Is the regime change that warmup detection found only a jump at the start (the model's weights at the first
 * step, the first batch at the second: the tail starts within 2 steps of the first point)? A jump is no warmup that
 * ended: a cache that keeps filling after it is still warming up, so growth after the jump gets the allowance of
 * rule 2 like growth since the first step (docs/verdict.md §4). A ramp over more steps (a warmup of 10 steps, then
 * a leak) keeps its own end, and so does a series whose points are wider than a step (a sawtooth's periods, the
 * bins of a long run): there the jump lies within the first point. */
static bool jump_at_start(const double *x, size_t from) { return from > 0 && x[from] - x[0] <= 2; }

static int check_params(const pl_verdict_params_t *pp, pl_verdict_params_t *p) {
    if (pp) *p = *pp;
    else pl_verdict_params_default(p);
    if (p->min_tail_points < 3) p->min_tail_points = 3;
    if (p->max_points < 2 * p->min_tail_points) p->max_points = 2 * p->min_tail_points;
    if (p->max_points > PL_TREND_MAX_N) p->max_points = PL_TREND_MAX_N;
    if (!(p->alpha > 0 && p->alpha < 1) || !(p->ci_level > 0 && p->ci_level < 1) || p->min_tail_steps < 0 ||
        p->warmup_allow_steps < 0)
        return -EINVAL;
    return 0;
}

/* The series the verdict reads: a sawtooth across steps (periodic cleanup) is judged on each period's low, when
 * enough periods remain; then compacted to at most max_points. */
static int judged_series(const pl_series_t *s, const pl_verdict_params_t *p, pl_series_t *c, int64_t *saw) {
    pl_series_t folded = {0};
    *saw = 0;
    int rc = pl_series_sawtooth(s, &folded, saw);
    if (rc) return rc;
    if (*saw && folded.n_points < p->min_tail_points) {
        pl_series_free(&folded);
        *saw = 0;
    }
    rc = pl_series_compact(*saw ? &folded : s, p->max_points, c);
    pl_series_free(&folded);
    return rc;
}

/* Fewer points than a tail needs: no data; or, with at least half of them by steps (a log of every 10th step, a
 * short run), not decided yet; and a series that grows since its first step cannot be decided before the warmup
 * allowance has passed (rule 2), whatever the points. */
static void too_few_points(pl_verdict_t *v, const pl_series_t *s, const pl_series_t *c, const pl_verdict_params_t *p) {
    size_t n = c->n_points;
    v->undecided = PL_UNDECIDED_NO_DATA;
    int64_t spacing = n >= 2 ? max64(1, (v->last_step - v->first_step) / (int64_t)(n - 1)) : 1;
    int64_t span = v->last_step - v->first_step;
    v->more_steps = max64((int64_t)(p->min_tail_points - n) * spacing, p->min_tail_steps - span);
    if (s->by_time || n < 3 || 2 * n < p->min_tail_points) return;
    v->tail_start_step = v->first_step;
    v->tail_steps = span;
    v->tail_points = n;
    v->undecided = PL_UNDECIDED_TAIL_SHORT;
    if (c->points[n - 1].base > c->points[0].base * 1.01 + 1 && span > 0) {
        v->undecided = PL_UNDECIDED_WARMUP;
        v->slope_per_step = (c->points[n - 1].base - c->points[0].base) / (double)span; /* end to end: a guide */
        v->more_steps = max64(v->more_steps, v->first_step + p->warmup_allow_steps + p->min_tail_steps - v->last_step);
    }
}

/* The judged tail of (x, y): its warmup found, the allowance of rule 2 applied, then leak, plateau, flat or why not
 * decided, into v; *from and *f are the tail judged and its fit. */
static int judge_tail(pl_verdict_t *v, const double *x, const double *y, size_t n, const pl_verdict_params_t *p,
                      double *scratch, size_t *from, tail_fit_t *f) {
    pl_warmup_t w;
    int rc = pl_warmup_detect(x, y, n, p->min_tail_points, (double)p->min_tail_steps, 0.002, &w);
    if (rc) return rc;
    *from = w.found ? w.end_index : 0;
    /* growth after a higher/flatter regime (pre-tail above the tail line): compare with the noise before it */
    if ((rc = fit_tail(x, y, n, *from, p, w.found && w.pre_offset > 0, scratch, f))) return rc;
    int64_t span = v->last_step - (int64_t)x[*from];
    if ((!w.found || jump_at_start(x, *from)) && !f->flat) {
        /* One regime since the first step (or since a jump at the first step) and not flat: a warmup cannot be
         * excluded until growth has outlasted warmup_allow_steps; then judge only what came after the allowance. */
        int64_t allow_end = v->first_step + p->warmup_allow_steps;
        if (v->last_step - allow_end < p->min_tail_steps) {
            v->undecided = PL_UNDECIDED_WARMUP;
            v->more_steps = allow_end + p->min_tail_steps - v->last_step;
            return 0;
        }
        size_t k = 0;
        while (k < n && x[k] < (double)allow_end) k++;
        if (n - k < p->min_tail_points) {
            v->undecided = PL_UNDECIDED_TAIL_SHORT;
            v->more_steps = max64(1, (int64_t)(p->min_tail_points - (n - k)) * max64(1, span / (int64_t)n));
            return 0;
        }
        *from = k;
        if ((rc = fit_tail(x, y, n, *from, p, true, scratch, f))) return rc;
        span = v->last_step - (int64_t)x[*from];
        if (f->flat) {
            v->kind = PL_VERDICT_PLATEAU;
            v->has_warmup = true;
            return 0;
        }
    } else if (w.found) {
        v->has_warmup = true;
    }

    if (span < p->min_tail_steps || n - *from < p->min_tail_points) {
        v->undecided = PL_UNDECIDED_TAIL_SHORT;
        v->more_steps = max64(1, p->min_tail_steps - span);
    } else if (f->growing) {
        bool dec = false;
        if ((rc = settling(x, y, n, (double)span, p, f->t.var_factor, &dec))) return rc;
        if (dec) {
            v->undecided = PL_UNDECIDED_SETTLING;
            v->more_steps = max64(1, span);
        } else {
            v->kind = PL_VERDICT_LEAK;
        }
    } else if (recent_onset(x, y, n, *from, p, scratch, f, from)) {
        /* the long tail looks flat or noisy, but its most recent part grows: a leak that started lately */
        v->kind = PL_VERDICT_LEAK;
    } else if (f->flat) {
        v->kind = PL_VERDICT_FLAT;
        /* growth before the tail makes it a plateau; a drop (or a bump within noise) is just flat */
        if (v->has_warmup && f->level - y[0] > w.band) v->kind = PL_VERDICT_PLATEAU;
    } else {
        v->undecided = PL_UNDECIDED_NOISY;
        v->more_steps = steps_to_decide(f, span);
    }
    return 0;
}

/* What the verdict says of its tail: where it starts, its line, warmup, spike, rate per hour and projected OOM. */
static void fill_tail(pl_verdict_t *v, const pl_series_t *s, const pl_series_t *c, const double *x, const double *y,
                      size_t from, const tail_fit_t *f, const pl_verdict_params_t *p) {
    size_t n = c->n_points;
    v->tail_start_step = (int64_t)x[from];
    v->tail_steps = v->last_step - v->tail_start_step;
    v->tail_points = n - from;
    v->level = f->level;
    v->slope_per_step = f->t.slope;
    v->slope_lo = f->t.slope_lo;
    v->slope_hi = f->t.slope_hi;
    v->p_up = f->t.p_up;
    v->var_factor = f->t.var_factor;
    v->threshold_per_step = f->thr;
    v->noise = f->t.resid_sigma;
    if (v->has_warmup) {
        v->warmup_end_step = v->tail_start_step;
        v->warmup_steps = v->warmup_end_step - v->first_step;
        v->warmup_size = (f->t.intercept + f->t.slope * x[from]) - y[0];
    }
    if (v->kind != PL_VERDICT_INCONCLUSIVE) v->more_steps = 0;
    if (s->step_ns > 0) v->per_hour = f->t.slope * 3.6e12 / s->step_ns;
    for (size_t i = from; i < n; i++) {
        double sp = c->points[i].peak - c->points[i].base;
        if (sp > v->spike) v->spike = sp;
    }
    if (v->kind == PL_VERDICT_LEAK && p->limit > 0 && f->t.slope > 0) {
        double now = f->t.intercept + f->t.slope * x[n - 1];
        if (now < v->last_value) now = v->last_value;
        double left = (p->limit - v->spike - now) / f->t.slope;
        v->has_oom = true;
        v->oom_step = left <= 0 ? v->last_step : v->last_step + clamp_steps(left);
        if (s->step_ns > 0) v->oom_seconds = left <= 0 ? 0 : left * s->step_ns / 1e9;
    }
}

int pl_verdict_classify(const pl_series_t *s, const pl_verdict_params_t *pp, pl_verdict_t *out) {
    if (!s || !out || (s->n_points && !s->points)) return -EINVAL;
    pl_verdict_params_t p;
    if (check_params(pp, &p)) return -EINVAL;

    pl_verdict_t v = {0};
    v.kind = PL_VERDICT_INCONCLUSIVE;
    v.per_hour = NAN;
    v.oom_seconds = NAN;
    v.slope_lo = v.slope_hi = NAN;
    v.peak = s->peak;
    v.peak_step = s->peak_step;
    v.warmup_end_step = v.tail_start_step = -1;
    v.oom_step = -1;
    v.limit = p.limit;

    pl_series_t c;
    int rc = judged_series(s, &p, &c, &v.sawtooth_period);
    if (rc) return rc;
    size_t n = c.n_points;
    v.n_points = n;
    if (n) {
        v.first_step = c.points[0].step;
        v.last_step = c.points[n - 1].step;
        v.last_value = c.points[n - 1].base;
    }
    double *x = NULL, *y = NULL, *scratch = NULL;
    if (n < p.min_tail_points) {
        too_few_points(&v, s, &c, &p);
        rc = 0;
        goto done;
    }
    x = malloc(n * sizeof *x);
    y = malloc(n * sizeof *y);
    scratch = malloc(n * sizeof *scratch);
    rc = -ENOMEM;
    if (!x || !y || !scratch) goto done;
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)c.points[i].step;
        y[i] = c.points[i].base;
    }
    size_t from;
    tail_fit_t f;
    if ((rc = judge_tail(&v, x, y, n, &p, scratch, &from, &f))) goto done;
    fill_tail(&v, s, &c, x, y, from, &f, &p);
done:
    free(x);
    free(y);
    free(scratch);
    pl_series_free(&c);
    if (rc == 0) *out = v;
    return rc;
}
