/* reports/series: the per-step series model every verdict works on.
 *
 * Raw samples (step, time, value) become one point per step whose value is the step's *baseline* (the minimum of
 * the samples recorded within it), so spikes inside a step (evaluation, gc sawtooth, transient activations) do not
 * read as growth; each point also keeps the step's peak, and the series keeps the overall peak. Samples without a
 * step fall back to fixed-width time buckets. Points are sorted by step, steps are unique and increasing.
 * Data flow: trace reader (later) or a series file -> pl_series_build -> verdict. Not thread-safe per object;
 * distinct objects are independent. See docs/verdict.md.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Samples with a larger step are dropped (counted in n_dropped): see pl_series_build. */
#define PL_SERIES_MAX_STEP (INT64_C(1) << 53)

typedef struct pl_sample {
    int64_t step;  /* step index, < 0 when unknown */
    int64_t t_ns;  /* time since run start, < 0 when unknown */
    double value;  /* bytes or count; must be finite */
} pl_sample_t;

typedef struct pl_point {
    int64_t step;       /* step index, or time-bucket index when the series is by time */
    int64_t t_ns;       /* time of the step's first sample, -1 when unknown */
    double base;        /* minimum of the step's samples: the value verdicts use */
    double peak;        /* maximum of the step's samples */
    uint32_t n_samples; /* samples merged into this point (saturates) */
} pl_point_t;

typedef struct pl_series {
    pl_point_t *points;  /* n_points, owned, sorted by strictly increasing step */
    size_t n_points;
    bool by_time;        /* no step markers: points are time buckets of bucket_ns */
    int64_t bucket_ns;   /* bucket width when by_time, else 0 */
    double peak;         /* largest sample value */
    int64_t peak_step;   /* step (or bucket) of that sample */
    double step_ns;      /* median duration of one step from sample times, 0 when unknown */
    size_t n_dropped;    /* samples ignored (no step in a stepped series, non-finite value) */
} pl_series_t;

typedef struct pl_series_opts {
    int64_t bucket_ns;   /* time-bucket width for step-less series (default 10 s); widened to keep <= max_buckets */
    size_t max_buckets;  /* default 4096 */
} pl_series_opts_t;

#define PL_SERIES_DEFAULT_BUCKET_NS (10LL * 1000 * 1000 * 1000)
#define PL_SERIES_DEFAULT_MAX_BUCKETS 4096

/* Build *out from n samples (any order). With at least one sample carrying a step, samples without one are dropped
 * (counted in n_dropped); with none, samples with times fall into time buckets; with neither, sample order is the
 * step. opts may be NULL. Returns 0, -EINVAL (NULL args), or -ENOMEM; *out is written only on success and owns its
 * points (pl_series_free). n == 0 gives an empty series. */
int pl_series_build(const pl_sample_t *samples, size_t n, const pl_series_opts_t *opts, pl_series_t *out);

/* A copy of in with at most max_points points (>= 2): consecutive steps merge into bins of equal count; a bin's
 * step and time are its first point's, base the minimum of bases, peak the maximum. Returns 0, -EINVAL, -ENOMEM. */
int pl_series_compact(const pl_series_t *in, size_t max_points, pl_series_t *out);

/* A sawtooth across steps (docs/verdict.md, section 1): memory climbs over about `period` steps and falls back, again
 * and again (periodic cleanup: `gc.collect()` or `empty_cache()` every N steps). Found when at least 4 falls, each
 * at least half the 98th percentile of the step-to-step changes and 6 noise widths, come at steps whose gaps agree
 * with their median (>= 3 steps) within a fifth for 3 in 4 of them, and the climbs between are spread over the
 * period (the largest one-step rise is under 3/4 of a period's climb, in the median period; a one-step spike such as
 * an evaluation step is not a sawtooth). Then *out is the series of each period's low (the point with the smallest
 * baseline from one fall to the next: its step, time and baseline; the period's peak), and *period the median gap.
 * Otherwise *period is 0 and *out is not written. Returns 0, -EINVAL, -ENOMEM. */
int pl_series_sawtooth(const pl_series_t *in, pl_series_t *out, int64_t *period);

/* Release the points; safe on a zeroed or already freed series. */
void pl_series_free(pl_series_t *s);
