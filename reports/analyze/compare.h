/* reports/compare: two runs of one program, on two host allocators (plateau run --host-allocator glibc|jemalloc),
 * side by side, and what the difference says: glibc arena retention/fragmentation, a real leak, growth outside the
 * malloc heap, nothing, or not decided yet (rules: docs/verdict.md, "Comparing two host allocators").
 *
 * Input: one process row of each analysed report (pl_report_analyze done), and each run's host allocator when known
 * ("glibc", "jemalloc", or NULL). pl_compare_proc_allocator takes it from the run model when plateau run did not
 * say: the tracer records it (format 1.2), and extract.c keeps it; for older traces pl_compare_guess_allocator infers
 * it from the malloc_usable_size values of the sampled host_alloc records, which extract.c counts (glibc chunks:
 * 8 mod 16; jemalloc size classes: multiples of 16). Pure functions over the model; no globals; thread-safe.
 * Data flow: extract -> report (analysed) -> pl_compare_runs writes a pl_compare_t (reports/model: comparison.h) ->
 * the renderers read it (reports/render: compare_render.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comparison.h"
#include "facts.h"
#include "report.h"

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
