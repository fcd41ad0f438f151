/* reports/analyze/between: what grew between two steps (plateau report --between A B, docs/window.md), judged once
 * by the analysis from the window the extraction measured: how each process stands to the window (its fit) and the
 * change of each of its metrics over it, written into the model (facts.h: pl_extract_window_t), which the renderers
 * read (reports/render: window.h). Not thread-safe per object.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "run.h"

/* The change of p's metric m over the steps from..to (from < to). false when m has no series by step or no point at
 * or before to. */
bool pl_window_metric(const pl_report_process_t *p, pl_metric_t m, int64_t from, int64_t to, pl_window_metric_t *out);

/* Judge the window of every process image of x that has one: its fit and its metrics' change from the window's
 * start to where it was measured to (x may be NULL). */
void pl_window_judge(pl_extract_t *x);
