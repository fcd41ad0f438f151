/* reports/model/dx: the findings a diagnosis writes into the model (report.h: pl_report_process_t.findings), their
 * codes' names, and the one test of practical significance (docs/verdict.md §8) the analysis judges with and the
 * model's series labels ask. The rules that choose the findings are reports/analyze/diagnosis.c. Pure; thread-safe.
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
struct pl_verdict;

/* Is v (a leak verdict) practically significant under pp (NULL = defaults)? False for other kinds. */
bool pl_diagnosis_practical(const struct pl_verdict *v, const struct pl_practical_params *pp);

/* Is proc's metric m a leak that matters: a practically significant leak verdict and, for the live-allocation count
 * (heap.count, which has no limit of its own), memory that matters beside it: heap.bytes or RSS a leak that matters,
 * or heap.bytes not recorded or not decided. pp NULL = defaults. The one test behind the process verdict and the
 * series labels. */
bool pl_diagnosis_matters(const struct pl_report_process *proc, int m, const struct pl_practical_params *pp);

/* Stable identifier of a code for JSON: "retained-tensors", "fragmentation", ... */
const char *pl_dx_name(pl_dx_t code);
