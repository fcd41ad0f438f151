/* reports/analyze/between: what grew between two steps (plateau report --between A B, docs/window.md), judged once
 * by the analysis from the window the extraction measured: how each process stands to the window (its fit) and the
 * change of each of its metrics over it, written into the model (facts.h: pl_extract_window_t), which the renderers
 * read (reports/render: window.h). Not thread-safe per object.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "run.h"

/* The change of p's metric m over the steps from..to (from < to). false when m has no series by step or no point at
 * or before to. */
bool pl_window_metric(const pl_report_process_t *p, pl_metric_t m, int64_t from, int64_t to, pl_window_metric_t *out);

/* Processes of x the window can say something about (WHOLE or CUT). When none, why (one line, no newline, e.g. "the
 * run's processes ended before step 5000 (the last one at step 2000)") into why. */
size_t pl_window_usable(const pl_extract_t *x, char *why, size_t n);

/* The holders the census sized at both ends of the window whose size grew in it: *out gets up to max indexes into
 * rt->holders, largest growth first; returns how many. grow[i] gets that growth (items, or autograd nodes for a
 * tensor); bytes_grow[i] the bytes' growth, NAN unknown. */
size_t pl_window_holders(const pl_retention_t *rt, int64_t from, int64_t to, size_t *out, double *grow,
                         double *bytes_grow, size_t max);

/* Judge the window of every process image of x that has one: its fit, its metrics' change from the window's start
 * to where it was measured to, and the census holders that grew in it (x may be NULL). */
void pl_window_judge(pl_extract_t *x);
