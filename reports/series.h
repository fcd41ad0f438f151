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

/* Release the points; safe on a zeroed or already freed series. */
void pl_series_free(pl_series_t *s);
