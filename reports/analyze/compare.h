/* reports/compare: two runs of one program, on two host allocators (plateau run --host-allocator glibc|jemalloc),
 * side by side, and what the difference says: glibc arena retention/fragmentation, a real leak, growth outside the
 * malloc heap, nothing, or not decided yet (rules: docs/verdict.md, "Comparing two host allocators").
 *
 * Input: one process row of each analysed report (pl_report_analyze done), and each run's host allocator when known
 * ("glibc", "jemalloc", or NULL). pl_compare_proc_allocator takes it from the run model when plateau run did not
 * say: the tracer records it (format 1.2), and extract.c keeps it; for older traces pl_compare_guess_allocator infers
 * it from the malloc_usable_size values of the sampled host_alloc records, which extract.c counts (glibc chunks:
 * 8 mod 16; jemalloc size classes: multiples of 16). Pure functions over the model; no globals; thread-safe.
 * Data flow: extract -> report (analysed) -> pl_compare_runs -> pl_compare_render_text / _json.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "facts.h"
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
    const pl_report_process_t *proc; /* borrowed, for the metric table */
} pl_compare_run_t;

typedef struct pl_compare {
    pl_compare_run_t run[2];
    pl_compare_kind_t kind;
    int growing_run;             /* RETENTION: index of the run whose RSS grows; -1 otherwise */
    char text[PL_COMPARE_TEXT];  /* the conclusion, one or two sentences */
} pl_compare_t;

/* Compare process a of run 0 with process b of run 1. alloc_* may be NULL (unknown), source_* may be NULL.
 * Returns 0 or -EINVAL. */
int pl_compare_runs(const pl_report_process_t *a, const char *alloc_a, const char *source_a,
                    const pl_report_process_t *b, const char *alloc_b, const char *source_b, pl_compare_t *out);

/* Guess the host allocator from the usable sizes of sampled malloc-family allocations over 16 bytes (n_sizes of
 * them, n_8mod16 of those 8 mod 16: extract.h counts both): "glibc", "jemalloc", or NULL with too few samples (20)
 * or mixed evidence. */
const char *pl_compare_guess_allocator(uint64_t n_sizes, uint64_t n_8mod16);

/* The host allocator of a process image: the one the tracer recorded in its trace (format 1.2+; "glibc",
 * "jemalloc", "tcmalloc", "mimalloc" or "other"), *from = "recorded"; for an older trace, or one whose tracer could
 * not tell, pl_compare_guess_allocator's guess, *from = "guessed"; *alloc NULL and *from "" when neither says (or p
 * is NULL). Read from the model: the trace is not opened again. The strings are static. */
void pl_compare_proc_allocator(const pl_extract_proc_t *p, const char **alloc, const char **from);

/* "allocator-retention", "leak", "outside-heap", "no-growth", "inconclusive". */
const char *pl_compare_kind_name(pl_compare_kind_t k);

/* Text: a table of the deciding metrics (verdict and slope per run) and the conclusion. Returns 0 or -EIO. */
int pl_compare_render_text(const pl_compare_t *c, FILE *out);
/* JSON object "plateau.compare" version 1 (docs/report-schema.md). Returns 0 or -EIO. */
int pl_compare_render_json(const pl_compare_t *c, FILE *out);
