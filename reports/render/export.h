/* reports/export: what other tools read (docs/export.md).
 *
 * - CSV (export_csv.c): every process's per-step series, one row per process and step, for notebooks and
 *   spreadsheets. Values are the report's: each step's baseline (the minimum of its samples, series.h).
 * - Chrome / Perfetto trace-event JSON (export_trace.c): a counter track per metric, instant events for steps and
 *   plateau_mark() points, one track per process (named with its rank), on the wall clock, so a run opens in
 *   ui.perfetto.dev or chrome://tracing beside a PyTorch profiler trace.
 * - PyTorch memory snapshot pickle (export_torch.c): one process's device allocation events as
 *   torch.cuda.memory._snapshot() lays them out ('segments' + 'device_traces'), for PyTorch's memory_viz.
 *
 * All write to a caller-owned FILE, never modify the report, and give the same bytes for the same input. Strings
 * from the trace (process names, mark labels) are written as valid UTF-8 (a byte that is not is written as
 * U+FFFD) and escaped as each format needs. Return 0, -EINVAL, -ENOMEM, or -EIO when the stream reports an error.
 * Data flow: the run model (run.h), analysed -> here. Not thread-safe per run.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "run.h"

/* Header "pid,exec,rank,process,by,step,t_seconds,<metric>...,marks": the metrics present in any process, in
 * pl_metric_t order. exec: the process image's exec count (0 for the first image of a pid, 1 after its first
 * exec, ...; from run->ext, empty when it is NULL or for a pool row), so (pid, exec, step) keys a row. Rows by process
 * (report order), then step (or time bucket, by = "time"). A cell is empty where that process has no point of
 * that metric at that step; marks holds the labels of the marks in that step, joined by "; ". Quoting per RFC 4180.
 * t_seconds: the step's first sample, since the process's trace started. */
int pl_export_csv(const pl_run_t *run, FILE *out);

/* {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}: per process with a trace (run->ext->procs),
 * process_name / process_sort_index / thread_name metadata, "C" events per metric point (args {"bytes"} or
 * {"count"}: the step's baseline at the step's first sample), "i" events "step N" at each step's first sample and
 * one per mark (category "plateau.mark", args {"step"}). Timestamps in microseconds on CLOCK_REALTIME when the
 * trace recorded its start there (as PyTorch's profiler traces are), else on CLOCK_MONOTONIC. */
int pl_export_trace_events(const pl_run_t *run, FILE *out);

/* ---- PyTorch memory snapshot (export_torch.c) ---- */

#define PL_EXPORT_TORCH_MAX_EVENTS (1u << 19) /* trace entries kept per process: the latest, as PyTorch's ring */
#define PL_EXPORT_TORCH_MAX_DEVICES 64        /* device ordinals 0..63 (-1, unknown, is shown as 0); records
                                               * naming others are skipped */

typedef struct pl_export_torch pl_export_torch_t;

typedef struct pl_export_torch_info {
    uint32_t pid;             /* process exported */
    char file[256];           /* its trace */
    const char *source;       /* "allocator" (plateau's caching allocator: blocks in segments) or "cuda" (runtime
                               * and driver hooks: each allocation is a segment of one block) */
    uint64_t n_events;        /* device trace entries written */
    uint64_t n_dropped;       /* older entries past PL_EXPORT_TORCH_MAX_EVENTS */
    uint64_t n_skipped;       /* records left out: device ordinal out of range, duplicate or unknown address */
    size_t n_segments;        /* segments live at the end */
    size_t n_devices;         /* device_traces lists */
    size_t n_other_procs;     /* other processes of the run that had device events too (not exported) */
} pl_export_torch_info_t;

/* Read the device records of the run's traces (run->ext->procs[].file, listed when the run was read) and keep those
 * of the process with the most device allocation events. *out is NULL when no process has any (nothing to export:
 * returns 0). CUPTI activity records are left out (they repeat what the hooks saw). Returns 0, -ENOMEM, or the
 * trace open error. */
int pl_export_torch_collect(const pl_run_t *run, pl_export_torch_t **out, pl_export_torch_info_t *info);

/* The same over one trace in memory (fuzzing, tests): *out NULL when it has no device allocations. */
int pl_export_torch_collect_mem(const void *data, size_t len, pl_export_torch_t **out);

/* Write the pickle (protocol 2: dicts, lists, str, int, bool, None):
 *   {'segments': [{'device', 'address', 'total_size', 'allocated_size', 'active_size', 'requested_size',
 *                  'stream', 'segment_type', 'segment_pool_id', 'is_expandable', 'frames',
 *                  'blocks': [{'address', 'size', 'requested_size', 'state', 'frames', 'history'}]}],
 *    'device_traces': [[{'action', 'addr', 'size', 'stream', 'time_us', 'frames'}], ...],
 *    'allocator_settings': {}}
 * frames: [{'filename', 'line', 'name'}], innermost first, from the trace's stack of the allocation: its Python
 * frames when it has some, else its native frames (module path, line 0, symbol) without the tracer's own; empty
 * for frees and segment events. An allocated block's 'history' is [{'addr', 'real_size', 'frames'}] (older
 * viewers read frames there). */
int pl_export_torch_write(const pl_export_torch_t *t, FILE *out);
void pl_export_torch_free(pl_export_torch_t *t);

/* s as valid UTF-8 into buf (NUL-terminated, cut at a whole character): each byte that does not start a valid
 * sequence becomes U+FFFD. Returns buf. Shared by the exporters. */
char *pl_export_utf8(const char *s, char *buf, size_t size);
