/* reports/render_html: one self-contained HTML page for an analysed run (run.h) (no network, no scripts: inline CSS
 * and inline SVG). First the run's verdict with the line to change (holder, allocation line or top call site), the
 * rate and the projected OOM, and the deciding process's call sites and holders; a process tree for multi-process
 * runs (quiet workers folded, ranks side by side). Per process: the diagnosis, a metric table, a chart per judged
 * metric (per-step baseline and peaks scaled to the data, the baseline at the tail's start, warmup and tail shaded,
 * marks and validation passes on the step axis, the fitted tail on to the projected OOM against the limit), flat
 * metrics collapsed, metrics with too few points as one line. Writes to a caller-owned FILE; byte-identical output
 * for identical input. Returns 0, -EINVAL, -ENOMEM, -EIO.
 */
#pragma once

#include <stdio.h>

#include "run.h"

/* run->ext may be NULL (no processes table, no sites). */
int pl_render_html(const pl_run_t *run, FILE *out);

/* One call site's frames as the content of a table cell (escaped): a Python site's line, source and Python stack with
 * its native frames collapsed, else the native frames. */
void pl_render_site_html(FILE *out, const pl_extract_site_t *site);
