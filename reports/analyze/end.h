/* reports/analyze/end: how each process ended (docs/end-of-run.md), judged once by the analysis from what the run
 * left (run.status's exit status or signal, the OOM killer's counts, the trace's end record, an uncaught exception)
 * and written into the model (facts.h: pl_extract_proc_t.ended), which the renderers read (reports/render:
 * ending.h). A verdict is never stronger than its data: a SIGKILL is "the OOM killer" only when an OOM kill was
 * counted. Not thread-safe per object.
 */
#pragma once

#include "run.h"

/* How process p of x ended, into *out (which may be &p->ended). */
void pl_end_of(const pl_extract_t *x, const pl_extract_proc_t *p, pl_end_t *out);
