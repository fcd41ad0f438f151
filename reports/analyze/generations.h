/* reports/generations: short-lived workers judged generation against generation (docs/verdict.md §8, "Validation
 * workers, generation by generation").
 *
 * A validation DataLoader starts N workers every K steps of its trainer, and they exit after the pass: each lives a
 * second or two, far too short for the per-series rules (verdict.c needs 8 points and a 40-step tail). What a user
 * cares about is whether each pass's workers hold more memory than the last pass's. reports/extract.c groups the
 * workers of one parent that start together into generations and writes one point per generation (the trainer's
 * step at the generation's start, the memory its workers added over what they inherited) into a report row with
 * n_gen > 0; this module judges that short series with a rule made for a handful of points: Mann-Kendall's exact
 * distribution (no normal approximation, no autocorrelation correction: generations are separate processes), a
 * band below which two generations count as equal, and a visible total rise.
 * Pure functions; thread-safe.
 */
#pragma once

#include <stddef.h>

#include "report.h"
#include "series.h"
#include "verdict.h"

#define PL_GEN_MIN_GENERATIONS 3       /* fewer: no-data */
#define PL_GEN_MAX_GENERATIONS 64      /* the most recent ones are judged (exact distribution table size) */
#define PL_GEN_BAND_BYTES (256.0 * 1024) /* two generations closer than the band are equal ... */
#define PL_GEN_BAND_REL 0.02           /* ... or closer than 2 % of the median generation */

/* P(S >= s) for Mann-Kendall's S over n exchangeable values without ties (exact: permutations by inversions), n in
 * [2, PL_GEN_MAX_GENERATIONS]; 1 when s is below the smallest S, NAN for a bad n. */
double pl_generations_mk_p(size_t n, double s);

/* Classify a series of generations (one point per generation, step = the trainer's step at its start, base = its
 * memory). alpha: one-sided level (0.01). The verdict's fields mean what they mean for verdict.c, over generations:
 * slope_per_step is the Theil-Sen slope per trainer step, noise the band, tail the judged generations; more_steps is
 * in trainer steps. Returns 0, -EINVAL, -ENOMEM. */
int pl_generations_classify(const pl_series_t *s, double alpha, pl_verdict_t *out);

/* Judge a generations row (p->n_gen > 0): classify its heap.bytes series, then p's process verdict and one finding
 * (leak when the growth is practically significant, pl_diagnosis_practical; slow growth; no leak; undecided; no
 * data). Returns 0, -EINVAL, -ENOMEM. */
int pl_generations_judge(const pl_report_t *r, pl_report_process_t *p);
