/* reports/render: text and JSON renderers over an analysed pl_report_t (report.h).
 *
 * Both write to a caller-owned FILE (library code never picks stdout itself), never modify the report, and produce
 * byte-identical output for identical input (golden tests rely on it). The JSON schema is docs/report-schema.md,
 * versioned by PL_REPORT_SCHEMA_VERSION. Return 0, -EINVAL, or -EIO when the stream reports an error.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "report.h"

typedef struct pl_render_text_opts {
    bool ascii;        /* sparklines from " .:-=+*#" instead of U+2581..U+2588 */
    int spark_width;   /* characters per sparkline (default 24, 4..80) */
    bool all_processes; /* every process in full: no folding of quiet workers and short helpers */
} pl_render_text_opts_t;

int pl_render_text(const pl_report_t *r, FILE *out, const pl_render_text_opts_t *opts);

/* max_points: series points per metric in the JSON (compacted by per-bin minimum; default 256 when 0). */
int pl_render_json(const pl_report_t *r, FILE *out, size_t max_points);

/* The report's top-level fields, "schema" to "processes", into the top-level block object j holds open (common/json.h):
 * how pl_extract_render_json writes them and its "run" as one document. 0 or -ENOMEM; stream errors and misuse
 * are pl_json_done's to report. */
struct pl_json;
int pl_render_json_fields(const pl_report_t *r, struct pl_json *j, size_t max_points);
