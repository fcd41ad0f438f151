/* reports/model/comparison: two runs of one program side by side, as the analysis judged them (reports/analyze:
 * compare.h, pl_compare_runs writes it) and the renderers read it (reports/render: compare_render.h): each run's
 * allocator, states and name in the comparison, the conclusion's code and its sentences. Plain data; thread-safe.
 */
#pragma once

#include "report.h"

#define PL_COMPARE_SCHEMA_VERSION 1
#define PL_COMPARE_TEXT 512

typedef enum pl_compare_kind {
    PL_COMPARE_INCONCLUSIVE = 0, /* a deciding series is not decided (or missing) in a run */
    PL_COMPARE_RETENTION,        /* RSS grows under glibc only, live heap flat in both: allocator retention */
    PL_COMPARE_LEAK,             /* the live heap grows under both allocators: a real leak */
    PL_COMPARE_OUTSIDE_HEAP,     /* RSS grows under both, live heap flat in both: memory outside malloc */
    PL_COMPARE_NO_GROWTH,        /* neither RSS nor the live heap grows in either run */
} pl_compare_kind_t;

/* What one run's process says, per deciding quantity. */
typedef enum pl_compare_state { PL_CMP_UNKNOWN = 0, PL_CMP_FLAT, PL_CMP_GROWS } pl_compare_state_t;

typedef struct pl_compare_run {
    char source[256];            /* run directory or trace */
    char allocator[16];          /* "glibc", "jemalloc", "unknown" */
    char allocator_from[16];     /* "given" (command line), "recorded" (the tracer's process_start record),
                                  * "requested" (plateau run --host-allocator, run-id file), "guessed" (usable sizes,
                                  * traces before 1.2), "" when unknown */
    long long pid;
    char name[64];
    pl_compare_state_t heap, rss; /* live heap (heap.bytes, heap.count), RSS (rss.anon, else rss) */
    char label[48];              /* how the comparison names it: "glibc" / "jemalloc" when the two runs are on
                                  * different known allocators, else "run A (glibc)" / "run B" */
    const pl_report_process_t *proc; /* borrowed, for the metric table */
} pl_compare_run_t;

typedef struct pl_compare {
    pl_compare_run_t run[2];
    pl_compare_kind_t kind;
    int growing_run;             /* RETENTION: index of the run whose RSS grows; -1 otherwise */
    char text[PL_COMPARE_TEXT];  /* the conclusion, one or two sentences */
} pl_compare_t;

/* "allocator-retention", "leak", "outside-heap", "no-growth", "inconclusive". */
const char *pl_compare_kind_name(pl_compare_kind_t k);
