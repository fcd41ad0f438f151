/* reports/ending: how a process ended (docs/end-of-run.md), and what was live then.
 *
 * From what the run left: the exit status or signal plateau run saw for its command (run.status), the OOM killer's
 * counts over the run (memory.events of plateau run's cgroup, /proc/vmstat: when plateau run could read them), the
 * trace's end (an end record, or none: a signal), the Python bootstrap's record of an uncaught MemoryError or torch
 * OutOfMemoryError, and the trace's last records: sites by live bytes at the end, their growth over the last steps
 * (extract.h, pl_extract_proc_t.end), torch's allocator at its last snapshot (for a CUDA OOM, taken when it was
 * raised). A verdict is never stronger than its data: a SIGKILL is "the OOM killer" only when an OOM kill was counted.
 * Data flow: extract + run.status (run.c) -> pl_end_of (reports/analyze: end.c, from pl_run_analyze) writes each
 * process image's `ended` (facts.h) -> the renderers read it (text and JSON here, HTML in render_html.c).
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "json.h"
#include "run.h"

/* Renderers: the text report's end-of-run lines of every process that did not end cleanly (after the run's lines),
 * and the JSON "end" object of one process (docs/report-schema.md). */
void pl_end_text(const pl_run_t *run, FILE *out);
void pl_end_json(pl_json_t *j, const pl_extract_proc_t *p);
