/* reports/diagnosis: one process's verdicts across metrics -> a few sentences a user can act on.
 *
 * Rules (docs/verdict.md §5): leaks are judged first on live counts and live bytes (tensor count, device allocated,
 * host live heap); RSS serves impact and projections, and a disagreement between RSS and the live heap is said out
 * loud (allocator retention, file-backed pages, or a leak the allocator is still absorbing). Pure; thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef enum pl_dx {
    PL_DX_CUT_SHORT = 0,     /* the trace ended abruptly */
    PL_DX_RETAINED_TENSORS,  /* device allocated and live tensor count grow */
    PL_DX_DEVICE_GROWTH,     /* device allocated grows, tensor count flat or unknown */
    PL_DX_FRAGMENTATION,     /* reserved grows, allocated flat */
    PL_DX_DEVICE_OTHER,      /* device memory outside the allocator grows */
    PL_DX_HOST_LEAK,         /* live heap grows */
    PL_DX_HEAP_NOT_RSS,      /* live heap grows, RSS does not (yet) */
    PL_DX_HOST_RETENTION,    /* RSS (anon) grows, live heap flat */
    PL_DX_FILE_PAGES,        /* RssFile grows, live heap flat */
    PL_DX_RSS_UNEXPLAINED,   /* RSS grows, live heap not recorded */
    PL_DX_OOM,               /* projected out-of-memory */
    PL_DX_UNDECIDED,         /* nothing leaks yet, something still grows */
    PL_DX_NO_LEAK,           /* plateaus and flat series only */
    PL_DX_SLOW_GROWTH,       /* program memory grows, too slowly to matter (practical significance) */
    PL_DX_NO_DATA,           /* no program-memory series long enough to judge */
    PL_DX_PSS_SHARING,       /* PSS grows, RSS does not: shared pages changed hands, not this process's memory */
    PL_DX_ALLOC_RETRIES,     /* torch's caching allocator retried allocations or raised out-of-memory errors */
    PL_DX_COPY_ON_ACCESS,    /* a forked worker's PSS climbs beside a flat RSS and heap: it copies its parent's pages */
    PL_DX_FIRST_TOUCH,       /* RssAnon grows beside a flat live heap larger than it: allocated memory touched at last */
    PL_DX__COUNT
} pl_dx_t;

#define PL_FINDING_TEXT 400

typedef struct pl_finding {
    pl_dx_t code;
    char text[PL_FINDING_TEXT]; /* one or two sentences, NUL-terminated */
} pl_finding_t;

struct pl_report_process;
struct pl_practical_params;
struct pl_proc_verdict;

/* Write up to max findings for proc (its metrics already classified) into out; *n_out = how many. cut_reason may be
 * NULL (run ended normally). pp may be NULL (defaults: 24 h, 10000 steps). verdict (may be NULL) gets the process
 * verdict the findings support (report.h, pl_proc_verdict_t). Returns 0 or -EINVAL. */
int pl_diagnosis_run(const struct pl_report_process *proc, const char *cut_reason,
                     const struct pl_practical_params *pp, pl_finding_t *out, size_t max, size_t *n_out,
                     struct pl_proc_verdict *verdict);

/* Is v (a leak verdict) practically significant under pp (NULL = defaults)? False for other kinds. */
struct pl_verdict;
bool pl_diagnosis_practical(const struct pl_verdict *v, const struct pl_practical_params *pp);

/* Is proc's metric m a leak that matters: a practically significant leak verdict and, for the live-allocation count
 * (heap.count, which has no limit of its own), memory that matters beside it: heap.bytes or RSS a leak that matters,
 * or heap.bytes not recorded or not decided. pp NULL = defaults. The one test behind the process verdict and the
 * series labels. */
bool pl_diagnosis_matters(const struct pl_report_process *proc, int m, const struct pl_practical_params *pp);

/* Stable identifier of a code for JSON: "retained-tensors", "fragmentation", ... */
const char *pl_dx_name(pl_dx_t code);
