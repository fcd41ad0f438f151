/* reports/logjudge: the memory a training log already holds, as series to judge (plateau judge FILE, docs/judge.md).
 *
 * Reads three shapes, recognised without help:
 *   free text   a step (or iteration) number and memory values with their units on one line:
 *               "Step 10: 5,552 MB (baseline)", "iter 120 | loss 2.31 | allocated 3.1 GiB reserved 4.0 GiB"
 *   CSV / TSV   a header row naming a step column (step, global_step, iteration, iter, ...) and memory columns
 *               (their names hold mem, rss, ram, allocated, reserved, vram, ...; the unit from the header, "(MB)",
 *               "[MiB]", "_gb", or from the cells, "1234 MiB"); without a step column, rows in order (nvidia-smi's
 *               `--query-gpu=timestamp,memory.used --format=csv`)
 *   JSON lines  one object per line, keys as CSV headers
 * A step that goes back (a restart) starts a new run; each run becomes one process of the report, each memory
 * column one metric (named words map to rss, dev.allocated or dev.reserved; what was guessed is said).
 * Pure: no I/O, no global state; thread-safe per object. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report.h"

#define PL_LOG_MAX_COLUMNS 8  /* memory columns kept per file */
#define PL_LOG_MAX_RUNS 64    /* runs kept per file (restarts) */

typedef enum { PL_LOG_TEXT, PL_LOG_CSV, PL_LOG_JSONL } pl_log_format_t;

typedef struct pl_log_column {
    char name[48];        /* the log's own name ("memory" when the text names none) */
    pl_metric_t metric;   /* judged as */
    bool guessed;         /* metric guessed from a name that says neither host nor device */
} pl_log_column_t;

typedef struct pl_log_run {
    pl_sample_t *samples[PL_LOG_MAX_COLUMNS]; /* per column: (step, -1, bytes), owned */
    size_t n[PL_LOG_MAX_COLUMNS], cap[PL_LOG_MAX_COLUMNS];
    size_t first_line, last_line;              /* 1-based lines of the file */
    int64_t first_step, last_step;
} pl_log_run_t;

typedef struct pl_log {
    pl_log_format_t format;
    bool by_order;                   /* no step column: rows in order are the steps */
    char step_name[48];              /* the step's word or column */
    pl_log_column_t cols[PL_LOG_MAX_COLUMNS];
    size_t n_cols;
    pl_log_run_t runs[PL_LOG_MAX_RUNS];
    size_t n_runs;
    size_t n_lines, n_used;          /* lines read, lines that gave a sample */
    size_t n_runs_dropped;           /* restarts past PL_LOG_MAX_RUNS (their samples are in the last run) */
} pl_log_t;

typedef struct pl_log_opts {
    const char *metric;   /* NULL, or every column judged as this metric name ("rss", "dev.reserved", ...) */
    const char *column;   /* NULL, or only the column of this name */
    double unit_bytes;    /* bytes per unit of CSV / JSON values whose cell and header name no unit (0: bytes) */
} pl_log_opts_t;

/* Bytes per unit for a unit name as the logs write it ("MB", "MiB", "GB", "bytes", any case), 0 if it is none. */
double pl_log_unit(const char *name);

/* Parse text[0..len) into *out (zeroed first; free with pl_log_free). Returns 0; -EINVAL (bad arguments, or a
 * metric option naming no metric); -ENODATA when no line holds a step and a memory value, with a one-line reason
 * in err; -ENOMEM. */
int pl_log_parse(const char *text, size_t len, const pl_log_opts_t *opts, pl_log_t *out, char *err, size_t err_size);
void pl_log_free(pl_log_t *log);

/* The step number of one line of free text, as the text reader finds it (a step word, any case: step, iteration,
 * iter, it, global_step, batch; then spaces, ':', '=', '#' or '['; then digits): plateau attach --steps-from reads
 * a job's log with it. Returns false when the line names none. */
bool pl_log_text_step(const char *s, size_t len, int64_t *step);

/* "text", "CSV", "JSON lines" */
const char *pl_log_format_name(pl_log_format_t f);
