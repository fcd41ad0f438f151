/* reports/trend: robust slope and an autocorrelation-tolerant trend test for one series window.
 *
 * Theil-Sen slope (median of pairwise slopes) with Sen's distribution-free confidence interval, and the
 * Mann-Kendall trend test with the Hamed-Rao (1998) variance correction for autocorrelated samples; the same
 * corrected variance widens Sen's interval. Both are rank-based: a few spikes cannot move them. The maths and why
 * these were chosen are in docs/verdict.md. Pure functions; thread-safe.
 */
#pragma once

#include <stddef.h>

#define PL_TREND_MAX_N 2048 /* pairwise slopes are O(n^2) memory: compact longer series first */

typedef struct pl_trend {
    size_t n;            /* points used */
    double slope;        /* Theil-Sen slope, y units per x unit */
    double slope_lo;     /* lower bound of the ci_level confidence interval */
    double slope_hi;     /* upper bound */
    double intercept;    /* median of y - slope * x */
    double resid_sigma;  /* 1.4826 * MAD of the residuals around the Theil-Sen line: a robust noise level */
    double mk_s;         /* Mann-Kendall S */
    double var_s;        /* Var(S) after tie and autocorrelation corrections */
    double var_factor;   /* Hamed-Rao n/n*: >= 1, how much autocorrelation inflated the variance */
    double z;            /* standardised S (continuity-corrected) */
    double p_up;         /* one-sided p-value for an increasing trend */
    double p_down;       /* one-sided p-value for a decreasing trend */
} pl_trend_t;

/* Fit x (strictly increasing) and y (finite), n in [3, PL_TREND_MAX_N]. ci_level in (0,1), e.g. 0.90.
 * min_var_factor (>= 1) floors the autocorrelation factor: a sub-window can inherit the factor estimated on the
 * longer window it came from, since short windows underestimate autocorrelation.
 * Returns 0, -EINVAL (bad arguments, x not increasing, non-finite values), -E2BIG (n too large), -ENOMEM. */
int pl_trend_fit(const double *x, const double *y, size_t n, double ci_level, double min_var_factor,
                 pl_trend_t *out);

/* Median of n values (n >= 1; NAN for 0); sorts v in place. */
double pl_trend_median(double *v, size_t n);

/* Standard normal upper-tail probability P(Z > z), and its inverse for p in (0, 1). */
double pl_trend_norm_sf(double z);
double pl_trend_norm_isf(double p);
