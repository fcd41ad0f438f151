/* reports/render: text and JSON renderers over an analysed run (run.h), and over a report alone (report.h).
 *
 * Both write to a caller-owned FILE (library code never picks stdout itself), never modify the report, and produce
 * byte-identical output for identical input (golden tests rely on it). The JSON schema is docs/report-schema.md,
 * versioned by PL_REPORT_SCHEMA_VERSION. Return 0, -EINVAL, or -EIO when the stream reports an error.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "json.h"
#include "report.h"
#include "run.h"

typedef struct pl_render_text_opts {
    bool ascii;        /* sparklines from " .:-=+*#" instead of U+2581..U+2588 */
    int spark_width;   /* characters per sparkline (default 24, 4..80) */
    bool all_processes; /* every process in full: no folding of quiet workers and short helpers */
} pl_render_text_opts_t;

int pl_render_text(const pl_report_t *r, FILE *out, const pl_render_text_opts_t *opts);

/* max_points: series points per metric in the JSON (compacted by per-bin minimum; default 256 when 0). */
int pl_render_json(const pl_report_t *r, FILE *out, size_t max_points);

/* The text report of a run: the report's own section (pl_render_text), then the run's lines (pl_render_run_lines). */
int pl_render_run_text(const pl_run_t *run, FILE *out, const pl_render_text_opts_t *opts);

/* The run's lines after the report's section: processes and totals (when several), ranks, auto-detected steps,
 * the hooks-vs-CUPTI cross-check, damage, lost records, call sites of leaking processes, files left out. Quiet
 * workers and short helpers are summed up in one table row each unless all_processes. run->ext must be set. */
int pl_render_run_lines(const pl_run_t *run, FILE *out, bool all_processes);

/* The JSON report of a run: pl_render_json's fields and one more top-level field, "run" (docs/report-schema.md):
 * per-process file, ppid, argv, clean end, damage, call sites; totals; the leaking process; the ranks. run->ext must
 * be set. Returns 0, -EINVAL, -ENOMEM, -EIO. */
int pl_render_run_json(const pl_run_t *run, FILE *out, size_t max_points);

/* One call site after its heading: a native site's frames on lines of their own; a Python site's name, source line,
 * Python stack and first native frames (the text report's form). Writes the newline that ends the heading. */
void pl_render_site_text(FILE *out, const pl_extract_site_t *site);

/* One call site as the JSON report's object (docs/report-schema.md, "sites"). */
void pl_render_site_json(pl_json_t *j, const pl_extract_site_t *site);
