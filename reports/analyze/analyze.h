/* reports/analyze: what judges a run. pl_report_analyze classifies every series of the report (reports/series:
 * verdict.c), runs the diagnosis of each process (diagnosis.c; generations.c for a row of worker generations) and the
 * run verdict, and writes all of it into the model (reports/model: report.h's verdicts and findings). The renderers
 * read what it wrote and never call it. Not thread-safe per report.
 */
#pragma once

#include "report.h"
#include "run.h"

/* Classify every present series, run the diagnosis of every process (findings and process verdict), then the run
 * verdict. Returns 0 or the first error. */
int pl_report_analyze(pl_report_t *r);

/* Classify every series and judge processes and run (pl_report_analyze), after writing each process row's sentences
 * from its trace's facts (sentences.h: site_line, holder_line, each holder's fix_line), which the verdict
 * line, the diagnosis and the renderers quote. Returns 0, -EINVAL, or its error. */
int pl_run_analyze(pl_run_t *run);

/* The run verdict from the processes' verdicts (called by pl_report_analyze; exposed for the tests). */
void pl_report_run_verdict(pl_report_t *r);
