/* reports/extract: trace files -> the report model (report.h), streaming.
 *
 * One trace file is one process image (docs/trace-format.md) and becomes one process row of the report. Records are
 * folded as they arrive: every metric keeps at most max_points per-step (or per-time-bucket) minimum/maximum pairs
 * (neighbouring bins merge when the bound is reached), sampled host allocations and device blocks are tracked in
 * bounded address maps, stacks and frames in bounded tables. Memory therefore does not grow with the file size.
 * After the last record the per-process series go into the report, the heap series is classified once to find
 * its tail, and the call sites whose sampled live bytes grew most over that tail are kept (module + symbol frames);
 * with device allocations that carried stacks, also the device sites: the live device bytes per stack of the CUDA
 * hooks' allocations and mappings, grown over each device metric's tail (facts.h, pl_extract_dev_sites_t).
 * A truncated or corrupted file yields everything read before the damage and marks the report cut short with the
 * reader's "FILE: offset N: ..." message; so does a missing process_end record in the run's root process (children
 * often end through _exit without one: they are flagged per process, clean_end = false, not as a cut-short run).
 * Reading a run directory lists it once (tracer/read/rundir.c) and reads each trace in one pass of record handlers (a
 * second only when its loop period must be detected first: reports/extract/period.c); the run-level facts are
 * assembled by reports/model/run.c (run.h), which owns the run model the renderers read; the types it fills are
 * reports/model/facts.h.
 * Data flow: tracer reader -> pl_extract_* (ingest) -> pl_run_assemble -> pl_run_analyze -> renderers.
 * Not thread-safe per object.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

#include "facts.h"
#include "report.h"

typedef struct pl_extract_opts {
    int64_t since_step;         /* ignore samples of steps before this one (0 = keep all; no effect by time) */
    size_t max_points;          /* per-metric bins kept while streaming (default 8192, at least 16) */
    bool only_metric;           /* keep only `metric` */
    pl_metric_t metric;
    bool window;                /* measure the sites of the window window_from..window_to (report --between) */
    int64_t window_from, window_to; /* steps, 0 <= from < to */
} pl_extract_opts_t;

/* Read every record of rd into a new process row of r (and its extras into x). `file` names the source in
 * messages (may be NULL). A reader cannot be rewound, so no period detection here: a trace without step records
 * read this way is reported by time buckets (pl_extract_file / _mem / _path detect the period first).
 * Returns 0 when a row was added (also for a damaged or cut-short trace), -ENOMEM. */
int pl_extract_reader(pl_report_t *r, pl_extract_t *x, pl_trace_reader_t *rd, const char *file,
                      const pl_extract_opts_t *opts);

/* Same over a file, or a memory buffer. Returns 0, -ENOMEM, or the open error (-ENOENT, -EBADMSG for a file that
 * is not a trace: pl_trace_open_error() has the message; it is also copied into x->first_error). */
int pl_extract_file(pl_report_t *r, pl_extract_t *x, const char *path, const pl_extract_opts_t *opts);
int pl_extract_mem(pl_report_t *r, pl_extract_t *x, const void *data, size_t len, const char *name,
                   const pl_extract_opts_t *opts);

/* A trace file, or a run directory: every regular file in it named *.pltrace (sorted by name) is read; files
 * that fail to open are counted and skipped. Returns 0 when at least one process row was added, -ENOENT when the
 * directory holds no readable trace, or the error of a single file. Sets r->limits from the traces. */
int pl_extract_path(pl_report_t *r, pl_extract_t *x, const char *path, const pl_extract_opts_t *opts);

/* Several paths (run directories or traces) of one job into one report: the run directories of the nodes of a
 * multi-node run (`plateau report --merge`). Processes are keyed by (node, pid): equal pids of different nodes stay
 * apart. How the command ended (run.status) comes from the first directory. Returns as pl_extract_path; with one
 * path it is pl_extract_path. */
int pl_extract_paths(pl_report_t *r, pl_extract_t *x, const char *const *paths, size_t n_paths,
                     const pl_extract_opts_t *opts);

/* The ranks of the traces at path (a run directory or one trace), from each trace's first record only (cheap):
 * plateau report's choice between merging several run directories and comparing two. *ranks is malloc'd (caller
 * frees), in file order, duplicates kept (workers inherit their rank's environment); *n_unranked counts traces
 * without a rank; files that are not traces are left out. Returns 0 or -errno. */
int pl_extract_scan_ranks(const char *path, int32_t **ranks, size_t *n_ranks, size_t *n_unranked);
