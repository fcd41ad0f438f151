/* reports/model/facts: what a run's traces said beyond the series, per process image (its file, process tree, argv,
 * clean end, damage, call sites, auto-steps, CUPTI cross-check, retention holders, windows) and per run (how each
 * command ended, the files left out): the half of the run model (run.h) that is not the report (report.h).
 * Extraction (reports/extract: extract.h) fills it, the analysis and the renderers read it. pl_extract_init and
 * pl_extract_free are the model's (reports/model/run.c). Not thread-safe per object.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report.h"
#include "retention.h"

/* How a process ended (docs/end-of-run.md): written by the analysis (reports/analyze: end.h), read by the
 * renderers. */
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

/* "clean", "exit-status", "memory-error", "cuda-oom", "oom-kill", "sigkill", "crash", "signal", "no-end-record",
 * "running"; "?" out of range. */
const char *pl_end_kind_name(pl_end_kind_t k);

#define PL_EXTRACT_MAX_SITES 5     /* call sites kept per process */
#define PL_EXTRACT_SITE_FRAMES 16  /* native frames kept per site, innermost first (allocator frames skipped); 6 for
                                    * a site without Python frames */
#define PL_EXTRACT_SITE_PY_FRAMES 16 /* Python frames kept per site, innermost first */

typedef struct pl_extract_site {
    uint32_t stack_id;      /* the stack that grew most among those merged into this site */
    double growth_bytes;    /* estimated live bytes gained over the tail (sampling weights applied) */
    double live_bytes;      /* estimated live bytes at the end of the trace */
    uint64_t n_live;        /* sampled allocations still live at the end */
    size_t n_frames;
    /* "symbol+0x1c (libx.so)", whole (C++ names demangled, static functions from the module's .symtab:
     * reports/ingest/symbols.c); malloc'd, freed by pl_extract_free */
    char *frames[PL_EXTRACT_SITE_FRAMES];
    /* Python sites (docs/python-frames.md): stacks whose allocating thread ran Python merge by their naming frame,
     * the innermost frame in the user's own code (else the innermost Python frame). All malloc'd or NULL. */
    char *py_name;          /* "train.py:42 in train_epoch" (short file name), NULL for a native-only site */
    char *py_file;          /* the naming frame's file as recorded, and its line */
    int py_line;
    char *py_source;        /* that line's text, stripped, when the file is readable at report time */
    size_t n_py;
    char *py_frames[PL_EXTRACT_SITE_PY_FRAMES]; /* "/abs/train.py:42 in train_epoch", innermost first */
    char *py_short[PL_EXTRACT_SITE_PY_FRAMES];  /* the same with short file names (text) */
    uint32_t n_stacks;      /* stacks merged into this site */
    double share;           /* growth_bytes / the growth of every growing site of the process (0..1) */
} pl_extract_site_t;

/* A mark whose label starts so is the Python bootstrap's record of the exception that ended the program (the
 * exception's type follows: "MemoryError", "torch.cuda.OutOfMemoryError"); it is not a user's mark. */
#define PL_EXTRACT_UNCAUGHT_MARK "plateau:uncaught "
/* The device call sites (docs/cuda-interception.md "Device call sites"): per stack, the live device bytes the CUDA hooks saw
 * allocated (cudaMalloc/cuMemAlloc and their frees, cuMemMap/cuMemUnmap; CUPTI's copies and plateau's own
 * allocator's blocks left out), merged by Python line as the host sites are. A framework's caching allocator takes
 * memory from the driver a segment at a time, so these are segments, named by the request that made it take one:
 * segment granularity, not tensors. Their growth is measured over the tail of each device metric a process
 * verdict can name (dev.tensors, dev.allocated, dev.reserved): one list per distinct tail, the metrics it serves in
 * `metrics` (a bit per pl_metric_t). */
#define PL_EXTRACT_DEV_TAILS 3
typedef struct pl_extract_dev_list {
    uint32_t metrics;           /* 1u << m for each device metric whose verdict tail this list's growth is over */
    int64_t since;              /* its start: the step (or second) from which growth is measured */
    double growth_bytes;        /* sum of the growth of every device site that grew (share's denominator) */
    size_t n_grew;              /* device sites that grew (at least one byte) */
    size_t n_sites;             /* kept, largest growth first */
    pl_extract_site_t sites[PL_EXTRACT_MAX_SITES];
} pl_extract_dev_list_t;

typedef struct pl_extract_dev_sites {
    size_t n_stacks;            /* stacks that allocated device memory */
    size_t n_lists;
    pl_extract_dev_list_t lists[PL_EXTRACT_DEV_TAILS];
} pl_extract_dev_sites_t;

#define PL_EXTRACT_WINDOW_SITES 10 /* call sites kept per process for a window (what grew between two steps) */
#define PL_EXTRACT_END_STEPS 10    /* "its last steps" of the end-of-run view */
#define PL_WINDOW_HOLDERS 5        /* census holders kept per window (what grew between two steps) */

/* What grew between two steps (docs/window.md): one metric's change over a window, judged by the analysis
 * (reports/analyze: between.h). */
typedef struct pl_window_metric {
    int64_t from_step, to_step; /* the series points read: the last at or before each end (from: the first point
                                 * when the series starts after the window's start) */
    double from, to;            /* their baselines (series.h: the minimum within the step) */
    double change;              /* to - from */
    double per_step;            /* change / (to_step - from_step), 0 when they are equal */
    double peak;                /* the largest sample in from_step < step <= to_step, NAN when none */
} pl_window_metric_t;

/* How one process stands to the window (judged by the analysis). */
typedef enum pl_window_fit {
    PL_WINDOW_WHOLE = 0,        /* it completed the window's last step */
    PL_WINDOW_CUT,              /* it ended inside the window: measured to its last step */
    PL_WINDOW_AFTER_END,        /* it never completed a step after the window's start */
    PL_WINDOW_NO_STEPS,         /* it recorded no step */
    PL_WINDOW_NONE,             /* no window was measured (not asked, or a row without a trace) */
} pl_window_fit_t;

/* Call sites measured over a window of steps, from the live bytes of every stack kept exactly at the window's two
 * ends as the records arrive (not from the thinned per-stack histories the tail's sites use). */
typedef struct pl_extract_window {
    bool no_steps;              /* the process recorded no step: a window of steps says nothing about it */
    int64_t from_step, to_step; /* as asked: live bytes at the end of from_step, and at the end of to_step */
    int64_t last_step;          /* the process's last completed step */
    int64_t end_step;           /* where the window was measured to: min(to_step, last_step) */
    bool reached;               /* the process completed a step after from_step (else nothing was measured) */
    double growth_bytes;        /* sum of the growth of every site that grew in the window */
    size_t n_grew;              /* sites that grew (at least one byte) */
    size_t n_sites;             /* kept, largest growth first (end view: largest live first in live[]) */
    pl_extract_site_t sites[PL_EXTRACT_WINDOW_SITES];
    /* the end-of-run view only: sites by live bytes at the process's end (its last record when cut short, its last
     * step after a clean end), largest first */
    double live_bytes;          /* live bytes of every site then */
    size_t n_live;
    pl_extract_site_t live[PL_EXTRACT_WINDOW_SITES];
    /* a window's judgement (not the end view's), written by the analysis (pl_run_analyze, reports/analyze:
     * between.h) and read by the renderers; all zero before */
    pl_window_fit_t fit;
    bool has_metric[PL_METRIC__COUNT];           /* the metric has a series by step with a point at or before its end */
    pl_window_metric_t metric[PL_METRIC__COUNT]; /* its change from from_step to end_step */
    size_t n_holders;                            /* census holders that grew in the window, largest growth first: */
    size_t holder[PL_WINDOW_HOLDERS];            /* their indexes into the process's retention holders */
    double holder_grow[PL_WINDOW_HOLDERS];       /* their growth (items, or autograd nodes for a tensor) */
    double holder_bytes_grow[PL_WINDOW_HOLDERS]; /* their bytes' growth, NAN unknown */
} pl_extract_window_t;

typedef struct pl_extract_proc {
    pl_report_process_t *proc;  /* the row in the report (owned by the report) */
    char file[256];             /* trace file it came from */
    uint32_t pid, ppid, exec_seq;
    int64_t t0_ns;              /* CLOCK_MONOTONIC at trace start: series times are relative to it */
    int32_t rank;               /* -1 when unset */
    int32_t local_rank;         /* -1 when unset */
    char node[64];              /* host name (trace 1.7), "" unknown: processes are keyed by (node, pid) */
    char exe[256];
    char cmdline[512];          /* argv joined by spaces (truncated) */
    int64_t last_ns;            /* CLOCK_MONOTONIC of its last record (lifetime: last_ns - t0_ns) */
    bool clean_end;             /* a process_end or exec record was read */
    bool exec_end;              /* it was an exec record: the pid went on as a new image (its own trace) */
    bool running;               /* no end record, and the process is still running here (reports/extract/alive.h) */
    int64_t start_realtime_ns;  /* CLOCK_REALTIME when the trace started, 0 unknown */
    bool damaged;               /* the reader stopped at a bad chunk (error holds its message) */
    char error[256];            /* reader message, "" when clean */
    uint64_t n_records, n_lost_records;
    uint64_t n_host_events;     /* malloc-family calls (allocations + frees) by the tracer's exact heap totals */
    uint64_t n_steps;           /* step records seen */
    int64_t site_tail_step;     /* step (or time bucket) from which site growth is measured, -1 without sites */
    const char *site_metric;    /* metric whose tail was used ("heap.bytes", ...) or NULL */
    size_t n_sites;
    pl_extract_site_t sites[PL_EXTRACT_MAX_SITES];
    pl_extract_dev_sites_t *dev_sites; /* the device call sites (malloc'd), NULL when no device allocation the
                                         * hooks saw carried a stack */
    uint64_t n_untracked;       /* allocations not tracked because a bounded table was full */
    /* what plateau run's collector left out of a bounded trace, counted (trace 1.9 aggregate records,
     * docs/long-runs.md): sampled host allocations freed within their step, their usable bytes, and the steps they
     * came from (steps completed at the first and last of them); all 0 in a full trace */
    uint64_t n_agg_pairs, agg_pair_bytes, agg_step_first, agg_step_last;
    uint64_t n_agg_samples;     /* periodic heap/rss samples left out: no step's first, last, lowest or highest */
    bool capped;                /* the trace reached its size limit (PLATEAU_TRACE_MAX) after cap_step steps: */
    uint64_t cap_step, cap_records, cap_bytes, cap_last_step; /* records and bytes not written, steps it ran to */
    /* the host allocator (reports/analyze/compare.c): as the tracer recorded it in the trace's first record,
     * process_start (trace 1.2+: "glibc", "jemalloc", "other:<file>", "unknown"; "" when absent), and for traces
     * that did not say, the sampled malloc-family allocations over 16 bytes and how many of their usable sizes are
     * 8 mod 16 */
    char host_allocator[64];
    uint64_t n_usable_sizes, n_usable_8mod16;
    /* device allocation records by source, for the hooks-vs-CUPTI cross-check (docs/cuda-interception.md): the
     * runtime/driver hooks' and CUPTI memory activity's (CUPTI records never enter the device series) */
    uint64_t n_hook_dev_allocs, hook_dev_alloc_bytes, n_cupti_dev_allocs, cupti_dev_alloc_bytes;
    /* period detection (reports/extract/period.c, docs/period.md): set when the trace has no step records and its loop
     * period was found; n_steps then counts the synthetic steps */
    bool steps_auto;
    double auto_period_allocs;  /* allocation calls per step */
    double auto_period_ms;
    double auto_confidence;     /* 0..1 */
    /* who keeps it (reports/model/retention.c, docs/retention.md): the Python census's holders, judged when the trace
     * is read; NULL when the trace has no retention record. Owned, freed by pl_extract_free */
    pl_retention_t *retention;
    /* what grew between two steps (reports/render/window.h, docs/window.md): NULL unless the options asked for a
     * window */
    struct pl_extract_window *window;
    /* how it ended (docs/end-of-run.md; `ended` below says how): sites live at its end and grown over its last steps,
     * NULL when the trace holds no stack. Owned, freed by pl_extract_free */
    struct pl_extract_window *end;
    char uncaught[64];          /* the exception that ended the program, as the bootstrap recorded it; "" none */
    /* torch's caching allocator at its last snapshot (for an uncaught CUDA OOM, taken when it was raised), summed
     * over devices; -1 unknown */
    int64_t dev_last_allocated, dev_last_reserved, dev_last_inactive_split;
    int64_t dev_last_step;      /* steps completed at that snapshot */
    pl_end_t ended;             /* how it ended: written by the analysis (pl_run_analyze, reports/analyze: end.h),
                                 * read by the renderers; all zero before */
} pl_extract_proc_t;

/* How process p stands to the window the analysis judged (its window's fit), PL_WINDOW_NONE without a window. */
pl_window_fit_t pl_window_fit(const pl_extract_proc_t *p);

#define PL_EXTRACT_FAILED_NAMED 5 /* failed files named one by one; the rest are counted ("and N more") */

#define PL_EXTRACT_MAX_STATUS 16

/* How a command plateau run started ended (a line of DIR/run.status). */
typedef struct pl_extract_status {
    uint32_t pid;               /* the command's pid */
    int signal;                 /* signal that ended it, 0 when it exited */
    int exit;                   /* its exit status when it exited */
    long oom_kill;              /* processes the OOM killer killed in plateau run's cgroup while the command ran
                                 * (memory.events oom_kill), -1 unknown */
    long host_oom_kill;         /* the same on the whole host (/proc/vmstat oom_kill), -1 unknown */
} pl_extract_status_t;

typedef struct pl_extract {
    pl_extract_proc_t *procs;   /* n_procs, owned, in the order files were read */
    size_t n_procs, cap_procs;
    size_t n_files_failed;      /* files that could not be opened as traces, or were skipped (tracer/read/rundir.c) */
    char first_error[256];      /* message of the first failed file, "" if none */
    size_t n_failed_named;      /* messages kept in failed[]: the first PL_EXTRACT_FAILED_NAMED failures */
    char failed[PL_EXTRACT_FAILED_NAMED][320];
    size_t n_cut_short;         /* processes that make the run cut short (damaged, or root without end record) */
    size_t cut_proc;            /* the first of them (procs[cut_proc]), whose reason the analysis writes */
    /* how each command ended, from the run directory's run.status (written by `plateau run`: one line per run,
     * `--append` adds one), when present: the last PL_EXTRACT_MAX_STATUS lines */
    size_t n_status;
    pl_extract_status_t status[PL_EXTRACT_MAX_STATUS];
} pl_extract_t;

/* An empty process table; pl_extract_free releases it and the sites' strings (reports/model/run.c, with the run
 * model). */
void pl_extract_init(pl_extract_t *x);
void pl_extract_free(pl_extract_t *x);


/* The helper rule (docs/verdict.md §8): a process that never steps, whose trace spans less than 1 s and whose RSS
 * never exceeded 64 MiB: shell helpers of a pyenv shim, `bash train.sh`, torchrun's launch. */
#define PL_EXTRACT_HELPER_NS 1000000000LL
#define PL_EXTRACT_HELPER_RSS_BYTES (64.0 * 1024 * 1024)
