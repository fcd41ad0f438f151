/* reports/diagnosis: one process's verdicts across metrics -> a few sentences a user can act on.
 *
 * Rules (docs/verdict.md §5): leaks are judged first on live counts and live bytes (tensor count, device allocated,
 * host live heap); RSS serves impact and projections, and a disagreement between RSS and the live heap is said out
 * loud (allocator retention, file-backed pages, or a leak the allocator is still absorbing). Pure; thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "dx.h"

struct pl_report_process;
struct pl_practical_params;
struct pl_proc_verdict;

/* Write up to max findings for proc (its metrics already classified) into out; *n_out = how many. cut_reason may be
 * NULL (run ended normally). pp may be NULL (defaults: 24 h, 10000 steps). verdict (may be NULL) gets the process
 * verdict the findings support (report.h, pl_proc_verdict_t). Returns 0 or -EINVAL. */
int pl_diagnosis_run(const struct pl_report_process *proc, const char *cut_reason,
                     const struct pl_practical_params *pp, pl_finding_t *out, size_t max, size_t *n_out,
                     struct pl_proc_verdict *verdict);



