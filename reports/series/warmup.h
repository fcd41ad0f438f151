/* reports/warmup: where the current regime of a series begins, and whether growth before it was a warmup.
 *
 * The tail start comes from MSER-L, the linear variant of the Marginal Standard Error Rule used to truncate
 * warm-up in simulation output: pick the truncation d that minimises SSE_linear(d) / ((n-d)(n-d-2)), i.e. the
 * squared standard error of a straight line fitted to what remains. A regime change is then confirmed when the points
 * before d sit off the tail's (Theil-Sen) line by more than the noise and grow at a clearly different rate; the
 * warmup end is refined to the first point inside the tail's band. docs/verdict.md §2. Pure functions; thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct pl_warmup {
    bool found;           /* the points before the tail follow another regime (warmup, or flat before a leak) */
    size_t mser_index;    /* MSER-L truncation point */
    size_t end_index;     /* first point of the tail's regime (== 0 when !found) */
    double tail_slope;    /* Theil-Sen slope of the tail from end_index */
    double tail_sigma;    /* robust noise of the tail around that line */
    double band;          /* half-width of the band used to place end_index */
    double pre_offset;    /* median offset of the pre-tail points from the tail line (sign: below < 0) */
    double pre_slope;     /* slope of the points before the MSER point (NAN when fewer than 2) */
} pl_warmup_t;

/* x strictly increasing, n <= PL_TREND_MAX_N; the tail keeps at least min_tail_points (>= 3) points and, when the
 * series is long enough, spans at least min_tail_steps (MSER truncates too late when it may keep only a few points:
 * a staircase would look flat between two of its stairs). rel_band is
 * the smallest band as a fraction of the tail level (e.g. 0.002) so noiseless series still have one.
 * Returns 0, -EINVAL (n < min_tail_points or bad args), -ENOMEM. */
int pl_warmup_detect(const double *x, const double *y, size_t n, size_t min_tail_points, double min_tail_steps,
                     double rel_band, pl_warmup_t *out);
