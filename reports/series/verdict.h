/* reports/verdict: one series -> plateau / leak / inconclusive / flat, with the numbers that back it.
 *
 * Method (docs/verdict.md): compact the per-step baseline series, locate the current regime (warmup.h), fit the
 * tail with Theil-Sen + Hamed-Rao Mann-Kendall (trend.h), then decide against a practical threshold of
 * flat_rel_per_step of the tail level: leak = significant, visible growth at or above it (unless it is settling);
 * plateau/flat = the slope's upper confidence bound below it; anything else, a tail shorter than min_tail_steps,
 * or growth since the first step that has not outlasted warmup_allow_steps, is inconclusive with the number of
 * steps that would decide.
 * Pure functions; thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "series.h"

typedef enum pl_verdict_kind {
    PL_VERDICT_FLAT = 0,     /* no growth phase, tail flat within the threshold */
    PL_VERDICT_PLATEAU,      /* grew, then stopped: warmup, not a leak */
    PL_VERDICT_LEAK,         /* the tail keeps growing */
    PL_VERDICT_INCONCLUSIVE, /* not decidable yet: see more_steps */
} pl_verdict_kind_t;

typedef enum pl_undecided {
    PL_UNDECIDED_NONE = 0,
    PL_UNDECIDED_NO_DATA,     /* fewer points than min_tail_points */
    PL_UNDECIDED_TAIL_SHORT,  /* regime found but its tail is shorter than min_tail_steps */
    PL_UNDECIDED_WARMUP,      /* growing since the first step, for less than warmup_allow_steps + min_tail_steps */
    PL_UNDECIDED_NOISY,       /* tail long enough but the slope interval straddles the threshold */
    PL_UNDECIDED_SETTLING,    /* grows, but its rate decays geometrically: an approach to a plateau */
} pl_undecided_t;

typedef struct pl_verdict_params {
    double alpha;              /* one-sided Mann-Kendall level for "growing" (0.01) */
    double ci_level;           /* two-sided level of the Sen slope interval (0.90) */
    double flat_rel_per_step;  /* practical threshold: slope / tail level per step (1e-4 = 0.01 %/step) */
    double min_slope_abs;      /* absolute floor of the threshold, series units per step (0) */
    int64_t min_tail_steps;    /* shortest tail that may be judged (40) */
    size_t min_tail_points;    /* and its fewest points (8) */
    int64_t warmup_allow_steps;/* growth since the first step is presumed warmup this long (100) */
    size_t max_points;         /* compaction bound before the O(n^2) fits (512) */
    double limit;              /* OOM limit in series units, 0 = none */
} pl_verdict_params_t;

typedef struct pl_verdict {
    pl_verdict_kind_t kind;
    pl_undecided_t undecided;   /* why inconclusive */
    size_t n_points;            /* after compaction */
    int64_t first_step, last_step;
    /* warmup (plateau, and leak after a warmup) */
    bool has_warmup;
    int64_t warmup_end_step;    /* first step at the tail's level */
    int64_t warmup_steps;       /* warmup_end_step - first_step */
    double warmup_size;         /* tail level at its start - first baseline (may be < 0) */
    /* tail */
    int64_t tail_start_step;
    int64_t tail_steps;
    size_t tail_points;
    double level;               /* median tail baseline */
    double last_value;          /* last baseline */
    double slope_per_step;      /* Theil-Sen */
    double slope_lo, slope_hi;  /* ci_level interval (may be +-inf when the tail is tiny) */
    double p_up;                /* Mann-Kendall one-sided p for growth (Hamed-Rao corrected) */
    double var_factor;          /* Hamed-Rao variance inflation */
    double threshold_per_step;  /* the practical threshold used */
    double noise;               /* robust sigma of the tail around its line */
    double per_hour;            /* slope per hour; NAN when step times are unknown */
    /* inconclusive */
    int64_t more_steps;         /* steps to run before a verdict is expected (0 when decided) */
    /* leak impact */
    bool has_oom;
    double limit;               /* the limit projected against */
    double spike;               /* largest peak - baseline in the tail: OOM comes at a peak */
    int64_t oom_step;           /* projected step at which baseline + spike reaches limit */
    double oom_seconds;         /* from the last sample; NAN when step times are unknown */
    int64_t sawtooth_period;    /* > 0: a sawtooth of this many steps was found, and the verdict judged each period's
                                 * low (pl_series_sawtooth); 0: none */
    /* whole series */
    double peak;
    int64_t peak_step;
} pl_verdict_t;

void pl_verdict_params_default(pl_verdict_params_t *p);

/* Classify s. p may be NULL (defaults). Returns 0, -EINVAL, -ENOMEM. An empty or tiny series is a valid input
 * (inconclusive, NO_DATA). */
int pl_verdict_classify(const pl_series_t *s, const pl_verdict_params_t *p, pl_verdict_t *out);

/* "flat", "plateau", "leak", "inconclusive"; "?" for out-of-range values. */
const char *pl_verdict_name(pl_verdict_kind_t k);
/* "", "no-data", "tail-short", "warmup", "noisy", "settling". */
const char *pl_verdict_undecided_name(pl_undecided_t u);
