/* reports/render/compare_render: the comparison of two runs (reports/model: comparison.h, written by the analysis's
 * pl_compare_runs), rendered: the text view of `plateau report A B` and its JSON (docs/report-schema.md). They read
 * the comparison and the two reports' metrics; they judge nothing. Thread-safe (they write only to out).
 */
#pragma once

#include <stdio.h>

#include "comparison.h"

/* Text: a table of the deciding metrics (verdict and slope per run) and the conclusion. Returns 0 or -EIO. */
int pl_compare_render_text(const pl_compare_t *c, FILE *out);
/* JSON object "plateau.compare" version 1 (docs/report-schema.md). Returns 0 or -EIO. */
int pl_compare_render_json(const pl_compare_t *c, FILE *out);
