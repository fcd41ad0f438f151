/* reports/warmup: MSER-L truncation + regime-change confirmation (see warmup.h, docs/verdict.md §2).
 *
 * MSER works on a 3-point running median of the baselines so that a single spiky step (an evaluation step whose
 * minimum is still high) cannot move the truncation point; the confirmation and the band use the raw baselines
 * through rank statistics (Theil-Sen line, MAD noise).
 */
#include "warmup.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "trend.h"

static double med3(double a, double b, double c) {
    if (a > b) {
        double t = a;
        a = b;
        b = t;
    }
    if (b > c) b = c;
    return a > b ? a : b;
}

/* SSE of the least-squares line through (x[d..n), s[d..n)), computed two-pass for numerical stability. */
static double sse_linear(const double *x, const double *s, size_t d, size_t n) {
    double m = (double)(n - d), mx = 0, my = 0;
    for (size_t i = d; i < n; i++) {
        mx += x[i];
        my += s[i];
    }
    mx /= m;
    my /= m;
    double sxx = 0, sxy = 0, syy = 0;
    for (size_t i = d; i < n; i++) {
        double dx = x[i] - mx, dy = s[i] - my;
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    double sse = sxx > 0 ? syy - sxy * sxy / sxx : syy;
    return sse > 0 ? sse : 0;
}

int pl_warmup_detect(const double *x, const double *y, size_t n, size_t min_tail_points, double min_tail_steps,
                     double rel_band, pl_warmup_t *out) {
    if (!x || !y || !out || min_tail_points < 3 || n < min_tail_points || n > PL_TREND_MAX_N) return -EINVAL;
    double *s = malloc(n * sizeof *s);
    double *r = malloc(n * sizeof *r);
    int rc = -ENOMEM;
    if (!s || !r) goto out;
    for (size_t i = 0; i < n; i++)
        s[i] = i == 0 || i + 1 == n ? y[i] : med3(y[i - 1], y[i], y[i + 1]);

    /* MSER-L: argmin over d of SSE/((n-d)(n-d-2)); ties keep the earliest d. The last admissible d keeps
     * min_tail_points points and min_tail_steps steps (or d = 0 when the whole series is shorter). */
    size_t last = n - min_tail_points;
    while (last > 0 && x[n - 1] - x[last] < min_tail_steps) last--;
    if (last == 0) last = n - min_tail_points; /* too short for the step bound: the point bound alone */
    size_t best = 0;
    double best_v = HUGE_VAL;
    for (size_t d = 0; d <= last; d++) {
        double m = (double)(n - d);
        double v = sse_linear(x, s, d, n) / (m * (m - 2));
        if (v < best_v * (1 - 1e-12)) {
            best_v = v;
            best = d;
        }
    }

    pl_trend_t t;
    rc = pl_trend_fit(x + best, y + best, n - best, 0.9, 1.0, &t);
    if (rc) goto out;
    for (size_t i = best; i < n; i++) r[i - best] = y[i];
    double level = fabs(pl_trend_median(r, n - best));
    double band = 3.0 * t.resid_sigma;
    if (band < rel_band * level) band = rel_band * level;

    pl_warmup_t w = {.mser_index = best, .tail_slope = t.slope, .tail_sigma = t.resid_sigma, .band = band};
    if (best > 0) {
        for (size_t i = 0; i < best; i++) r[i] = y[i] - (t.intercept + t.slope * x[i]);
        w.pre_offset = pl_trend_median(r, best);
        /* A regime change needs the pre-tail to sit off the line by more than the band (4/3 of it: a margin over
         * the 3-sigma band keeps noise from faking one) and, when it has a slope, to grow at a clearly different
         * rate (a factor of 2): steady growth that merely accelerates a little is one regime, not a warmup that
         * ended (corpus series seed003_run1_every_step must not become a "leak after warmup"). */
        w.pre_slope = NAN;
        if (best >= 3) {
            pl_trend_t pre;
            rc = pl_trend_fit(x, y, best, 0.9, 1.0, &pre);
            if (rc) goto out;
            w.pre_slope = pre.slope;
        } else if (best == 2) {
            w.pre_slope = (y[1] - y[0]) / (x[1] - x[0]);
        }
        /* or be off the line by more than half the growth the tail line predicts over the pre-tail's span (a jump,
         * such as a tensor count stepping up once, not a slightly slower start) */
        bool jump = fabs(w.pre_offset) > 0.5 * fabs(t.slope * (x[best] - x[0]));
        bool differ = jump || (!isnan(w.pre_slope) &&
                               fabs(w.pre_slope - t.slope) > 0.5 * fmax(fabs(w.pre_slope), fabs(t.slope)));
        w.found = fabs(w.pre_offset) > band * (4.0 / 3.0) && differ;
    }
    if (w.found) {
        size_t i = best;
        while (i > 0 && fabs(y[i - 1] - (t.intercept + t.slope * x[i - 1])) <= band) i--;
        while (i + min_tail_points < n && y[i] - (t.intercept + t.slope * x[i]) < -band) i++;
        w.end_index = i;
        if (i == 0) w.found = false;
    }
    *out = w;
    rc = 0;
out:
    free(s);
    free(r);
    return rc;
}
