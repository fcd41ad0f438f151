/* reports/window: what grew between two steps (plateau report --between A B, docs/window.md).
 *
 * The question is "what grew between step 1000 and step 2000", not "what is live". Per process that steps: the change
 * of every metric over the window (the per-step baselines at its two ends, series.h) and the call sites whose
 * sampled live bytes grew in it, largest first (measured exactly at the window's ends while the trace is read:
 * extract.h, pl_extract_window_t); the Python census's holders that grew in it when the trace has them. A process
 * whose run ended before the window's end is measured to its last step (said); one that never completed a step after
 * the window's start, or never stepped, is left out (said).
 * Data flow: extract (opts.window) -> the analysis (reports/analyze: between.h, from pl_run_analyze) writes each
 * window's fit, metrics' change and holders that grew into the model (facts.h) -> the renderers here
 * (window_render.c) read them.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "run.h"

/* Renderers (window_render.c): the text view (what `plateau report --between` prints) and the JSON report's "between"
 * field (docs/report-schema.md: null without a window); the HTML section is render_html.c's, with these helpers. */
int pl_window_text(const pl_run_t *run, FILE *out);
void pl_window_json(pl_json_t *j, const pl_run_t *run);
/* The first process's window, NULL when the run was read without one. */
const pl_extract_window_t *pl_window_first(const pl_extract_t *x);
/* "pid 4242 (python3 train.py)", or "rank 1 (pid 4242, node gpu-3)" in a run of ranks. Returns buf. */
const char *pl_window_who(const pl_run_t *run, const pl_extract_proc_t *p, char *buf, size_t size);
/* "+1.25 MiB", "-3", "0", "?" (not finite). Returns buf. */
const char *pl_window_signed(double v, bool bytes, char *buf, size_t size);
