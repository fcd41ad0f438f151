/* reports/trend: Theil-Sen + Mann-Kendall with the Hamed-Rao autocorrelation correction (docs/verdict.md §3).
 *
 * Memory: one n(n-1)/2 array of pairwise slopes plus O(n) scratch, freed before returning. Of the slopes only three
 * order statistics are read (the median and the interval's two ranks): they are selected (select_kth, O(N) on
 * average), not sorted (O(N log N): two thirds of a 64-rank report's time went to sorting them).
 * Hamed-Rao: detrend with the Sen slope, rank the residuals, take the lag-k autocorrelations of the ranks that are
 * significant at 5 %, and inflate Var(S) by n/n* = 1 + 2/(n(n-1)(n-2)) * sum (n-k)(n-k-1)(n-k-2) rho_k, bounded
 * below by the AR(1) factor (1+r1)/(1-r1) (see hamed_rao_factor). We never
 * let the factor drop below 1 (negative autocorrelation would otherwise shrink the variance and make leaks out of
 * alternating noise): a conservative choice for a detector whose worst error is a false "leak".
 */
#include "trend.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Total order with NaN last: qsort needs a consistent comparator even on hostile input (overflowing values
 * can produce inf - inf). */
static int dbl_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x)) return isnan(y) ? 0 : 1;
    if (isnan(y)) return -1;
    return x < y ? -1 : (x > y);
}

/* dbl_cmp's order as a predicate: x before y. */
static inline bool dbl_lt(double x, double y) { return isnan(y) ? !isnan(x) : x < y; }

/* Reorder v[0..n) so that v[k] is what it would be sorted by dbl_cmp, nothing before it after it and nothing after
 * it before it (Hoare's FIND with a median-of-three pivot). Past a budget of rounds (inputs built to defeat the
 * pivot) the rest is sorted, so the worst case stays O(N log N). */
static void select_kth(double *v, size_t n, size_t k) {
    if (n < 2 || k >= n) return;
    ptrdiff_t l = 0, r = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    int budget = 16;
    for (size_t m = n; m; m >>= 1) budget += 2;
    while (l < r) {
        if (budget-- == 0) {
            qsort(v + l, (size_t)(r - l + 1), sizeof *v, dbl_cmp);
            return;
        }
        double a = v[l], b = v[l + (r - l) / 2], c = v[r]; /* the pivot: their median, a value of the range */
        double x = dbl_lt(a, b) ? (dbl_lt(b, c) ? b : (dbl_lt(a, c) ? c : a)) : (dbl_lt(a, c) ? a : (dbl_lt(b, c) ? c : b));
        ptrdiff_t i = l, j = r;
        do {
            if (!isnan(x)) { /* dbl_lt(v, x) is then v < x, and dbl_lt(x, v) is !(v <= x) (NaN last) */
                while (v[i] < x) i++;
                while (!(v[j] <= x)) j--;
            } else {
                while (dbl_lt(v[i], x)) i++;
                while (dbl_lt(x, v[j])) j--;
            }
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        } while (i <= j);
        /* v[l..j] <= x <= v[i..r], and v[j+1..i-1] == x */
        if (j < kk) l = i;
        if (kk < i) r = j;
    }
}

double pl_trend_median(double *v, size_t n) {
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, dbl_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double pl_trend_norm_sf(double z) { return 0.5 * erfc(z / sqrt(2.0)); }

double pl_trend_norm_isf(double p) {
    if (!(p > 0 && p < 1)) return NAN;
    double lo = -40, hi = 40;
    for (int i = 0; i < 200; i++) { /* bisection: sf is monotone decreasing */
        double mid = 0.5 * (lo + hi);
        if (pl_trend_norm_sf(mid) > p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Average ranks (1-based, ties share their mean rank) of y into r. */
static int ranks(const double *y, size_t n, double *r) {
    size_t *idx = malloc(n * sizeof *idx);
    if (!idx) return -ENOMEM;
    for (size_t i = 0; i < n; i++) idx[i] = i;
    /* insertion sort by value is O(n^2) worst case but n <= PL_TREND_MAX_N and it is already O(n^2) elsewhere */
    for (size_t i = 1; i < n; i++) {
        size_t t = idx[i], j = i;
        while (j > 0 && y[idx[j - 1]] > y[t]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = t;
    }
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && y[idx[j + 1]] == y[idx[i]]) j++;
        double rank = 0.5 * ((double)i + (double)j) + 1.0;
        for (size_t k = i; k <= j; k++) r[idx[k]] = rank;
        i = j + 1;
    }
    free(idx);
    return 0;
}

/* Hamed-Rao n/n* from the ranks of the detrended series. */
static double hamed_rao_factor(const double *r, size_t n) {
    if (n < 4) return 1.0;
    double mean = 0, c0 = 0;
    for (size_t i = 0; i < n; i++) mean += r[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++) c0 += (r[i] - mean) * (r[i] - mean);
    if (c0 <= 0) return 1.0;
    double crit = 1.959963984540054 / sqrt((double)n);
    double dn = (double)n, sum = 0;
    for (size_t k = 1; k < n - 2; k++) {
        double ck = 0;
        for (size_t i = 0; i + k < n; i++) ck += (r[i] - mean) * (r[i + k] - mean);
        double rho = ck / c0;
        if (fabs(rho) <= crit) continue;
        double dk = (double)k;
        sum += (dn - dk) * (dn - dk - 1) * (dn - dk - 2) * rho;
    }
    double f = 1.0 + 2.0 / (dn * (dn - 1) * (dn - 2)) * sum;
    /* Hamed-Rao under-corrects on short, strongly autocorrelated windows (the sample ACF is biased low and the 5 %
     * filter drops real lags). Bound it below by the AR(1) effective-sample-size factor (1+r1)/(1-r1) of the lag-1
     * rank autocorrelation (Yue & Wang 2004 style), r1 capped at 0.98. */
    double c1 = 0;
    for (size_t i = 0; i + 1 < n; i++) c1 += (r[i] - mean) * (r[i + 1] - mean);
    double r1 = c1 / c0;
    if (r1 > 0.98) r1 = 0.98;
    if (r1 > 0) {
        double ar = (1 + r1) / (1 - r1);
        if (ar > f) f = ar;
    }
    return f < 1.0 ? 1.0 : f;
}

/* The k-th of v[0..n) as sorted, once select_kth put the mid-th in place: selected on the side of mid it lies on
 * (the two sides stay apart, so the lower and the upper bound do not disturb each other). */
static double kth_around(double *v, size_t n, size_t mid, size_t k) {
    if (k == mid) return v[mid];
    if (k < mid) {
        select_kth(v, mid, k);
        return v[k];
    }
    select_kth(v + mid + 1, n - mid - 1, k - mid - 1);
    return v[k];
}

int pl_trend_fit(const double *x, const double *y, size_t n, double ci_level, double min_var_factor,
                 pl_trend_t *out) {
    if (!x || !y || !out || n < 3 || !(ci_level > 0 && ci_level < 1)) return -EINVAL;
    if (n > PL_TREND_MAX_N) return -E2BIG;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) return -EINVAL;
        if (i && !(x[i] > x[i - 1])) return -EINVAL;
    }
    size_t n_pairs = n * (n - 1) / 2;
    double *slopes = malloc(n_pairs * sizeof *slopes);
    double *scratch = malloc(n * sizeof *scratch);
    double *rk = malloc(n * sizeof *rk);
    int rc = -ENOMEM;
    if (!slopes || !scratch || !rk) goto out;

    /* Pairwise slopes and Mann-Kendall S in one pass. */
    double s = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            double dy = y[j] - y[i];
            double sl = dy / (x[j] - x[i]);
            if (!isfinite(sl)) sl = dy > 0 ? HUGE_VAL : -HUGE_VAL; /* huge values over a tiny step: keep the sign */
            slopes[k++] = sl;
            s += (dy > 0) - (dy < 0);
        }
    /* The median: slopes[mid] as sorted, everything before it no larger (the lower middle is their largest). */
    size_t mid = n_pairs / 2;
    select_kth(slopes, n_pairs, mid);
    double below = -HUGE_VAL;
    for (size_t i = 0; i < mid; i++)
        if (dbl_lt(below, slopes[i])) below = slopes[i];
    double slope = n_pairs % 2 ? slopes[mid] : 0.5 * (below + slopes[mid]);
    if (!isfinite(slope)) slope = slopes[mid];

    /* Var(S) with the tie correction. */
    double dn = (double)n;
    double var = dn * (dn - 1) * (2 * dn + 5);
    memcpy(scratch, y, n * sizeof *scratch);
    qsort(scratch, n, sizeof *scratch, dbl_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && scratch[j + 1] == scratch[i]) j++;
        double t = (double)(j - i + 1);
        if (t > 1) var -= t * (t - 1) * (2 * t + 5);
        i = j + 1;
    }
    var /= 18.0;

    /* Residuals around the Sen line: intercept, robust sigma, and the ranks Hamed-Rao needs. */
    for (size_t i = 0; i < n; i++) scratch[i] = y[i] - slope * x[i];
    rc = ranks(scratch, n, rk);
    if (rc) goto out;
    double factor = hamed_rao_factor(rk, n);
    if (min_var_factor > factor && isfinite(min_var_factor)) factor = min_var_factor;
    double intercept = pl_trend_median(scratch, n);
    for (size_t i = 0; i < n; i++) scratch[i] = fabs(y[i] - slope * x[i] - intercept);
    double sigma = 1.4826 * pl_trend_median(scratch, n);

    double var_c = var * factor;
    double z = 0;
    if (var_c > 0) {
        if (s > 0) z = (s - 1) / sqrt(var_c);
        else if (s < 0) z = (s + 1) / sqrt(var_c);
    }

    /* Sen's interval: ranks (N -+ C)/2 of the sorted slopes, C = z_{(1+ci)/2} sqrt(Var*(S)). */
    double c = pl_trend_norm_isf(0.5 * (1 - ci_level)) * sqrt(var_c);
    double m1 = 0.5 * ((double)n_pairs - c), m2 = 0.5 * ((double)n_pairs + c);
    double lo_i = floor(m1) - 1, hi_i = ceil(m2);
    if (lo_i < 0) lo_i = 0;
    if (hi_i > (double)n_pairs - 1) hi_i = (double)n_pairs - 1;
    double lo = m1 < 1 ? -HUGE_VAL : kth_around(slopes, n_pairs, mid, (size_t)lo_i);
    double hi = m2 >= (double)n_pairs ? HUGE_VAL : kth_around(slopes, n_pairs, mid, (size_t)hi_i);

    pl_trend_t t = {
        .n = n,
        .slope = slope,
        .slope_lo = lo,
        .slope_hi = hi,
        .intercept = intercept,
        .resid_sigma = sigma,
        .mk_s = s,
        .var_s = var_c,
        .var_factor = factor,
        .z = z,
        .p_up = pl_trend_norm_sf(z),
        .p_down = pl_trend_norm_sf(-z),
    };
    *out = t;
    rc = 0;
out:
    free(slopes);
    free(scratch);
    free(rk);
    return rc;
}
