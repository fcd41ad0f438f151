/* reports/render_html: one self-contained HTML page for an analysed run (run.h) (no network, no scripts: inline CSS
 * and inline SVG). Per process: a metric table, one chart per metric (per-step baseline, peaks, warmup and tail
 * shaded, the fitted tail line), the diagnosis, the call sites; a process table for multi-process runs.
 * Writes to a caller-owned FILE; byte-identical output for identical input. Returns 0, -EINVAL, -ENOMEM, -EIO.
 */
#pragma once

#include <stdio.h>

#include "run.h"

/* run->ext may be NULL (no processes table, no sites). */
int pl_render_html(const pl_run_t *run, FILE *out);

/* One call site's frames as the content of a table cell (escaped): a Python site's line, source and Python stack with
 * its native frames collapsed, else the native frames. */
void pl_render_site_html(FILE *out, const pl_extract_site_t *site);
