/* reports/ending: how a process ended (docs/end-of-run.md), and what was live then.
 *
 * From what the run left: the exit status or signal plateau run saw for its command (run.status), the OOM killer's
 * counts over the run (memory.events of plateau run's cgroup, /proc/vmstat: when plateau run could read them), the
 * trace's end (an end record, or none: a signal), the Python bootstrap's record of an uncaught MemoryError or torch
 * OutOfMemoryError, and the trace's last records: sites by live bytes at the end, their growth over the last steps
 * (extract.h, pl_extract_proc_t.end), torch's allocator at its last snapshot (for a CUDA OOM, taken when it was
 * raised). A verdict is never stronger than its data: a SIGKILL is "the OOM killer" only when an OOM kill was counted.
 * Data flow: extract + run.status (run.c) -> pl_end_of -> the renderers (text and JSON here, HTML in render_html.c).
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "json.h"
#include "run.h"

typedef enum pl_end_kind {
    PL_END_CLEAN = 0,     /* exit or exec (an end record), status 0 or unknown */
    PL_END_EXIT_STATUS,   /* the command exited with another status (run.status), no uncaught exception recorded */
    PL_END_MEMORY_ERROR,  /* an uncaught Python MemoryError (the bootstrap's record) */
    PL_END_CUDA_OOM,      /* an uncaught torch OutOfMemoryError (the bootstrap's record) */
    PL_END_OOM_KILL,      /* SIGKILL, or no end record, while the OOM killer killed in plateau run's cgroup */
    PL_END_SIGKILL,       /* SIGKILL (run.status), no OOM kill counted where it could be read */
    PL_END_CRASH,         /* SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT (run.status) */
    PL_END_SIGNAL,        /* another signal (run.status): SIGTERM, SIGINT, ... */
    PL_END_NO_RECORD,     /* no end record and no status: a signal (a crash, SIGKILL, the OOM killer) */
    PL_END_RUNNING,       /* no end record yet: still running */
    PL_END__COUNT
} pl_end_kind_t;

typedef struct pl_end {
    pl_end_kind_t kind;
    int signal;               /* run.status's signal, 0 none */
    int exit_status;          /* run.status's exit status, -1 unknown */
    long oom_kill;            /* OOM kills in plateau run's cgroup during the run, -1 unknown */
    long host_oom_kill;       /* on the host, -1 unknown */
    char line[384];           /* "killed by SIGKILL while the OOM killer killed 1 process in the run's cgroup (memory.events):
                               * out of memory" */
} pl_end_t;

/* How process p of x ended. */
void pl_end_of(const pl_extract_t *x, const pl_extract_proc_t *p, pl_end_t *out);

/* "clean", "exit-status", "memory-error", "cuda-oom", "oom-kill", "sigkill", "crash", "signal", "no-end-record",
 * "running"; "?" out of range. */
const char *pl_end_kind_name(pl_end_kind_t k);

/* Renderers: the text report's end-of-run lines of every process that did not end cleanly (after the run's lines),
 * and the JSON "end" object of one process (docs/report-schema.md). */
void pl_end_text(const pl_run_t *run, FILE *out);
void pl_end_json(pl_json_t *j, const pl_extract_t *x, const pl_extract_proc_t *p);
