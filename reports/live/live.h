/* reports/live: the live verdict of a run still going on (plateau watch, plateau run's status line, --stop-on-leak).
 *
 * Follows every trace of a run directory, as the report lists them (pl_trace_dir_list, tracer/read/rundir.c: listed
 * again at each poll), incrementally: one reader per file keeps its offset and re-polls for
 * new chunks (pl_trace_follow: a chunk not completely written yet is read on a later poll), nothing is read twice.
 * Per process it keeps, per metric (live heap, RSS, device allocated), at most PL_LIVE_MAX_BINS per-step bins
 * (baseline minimum, peak maximum; neighbouring bins merge pairwise when the bound is reached), so memory is bounded
 * by the number of processes, not by the length of the run; a process that ended without a step is dropped to its
 * name. On each status the shown process's series go through the report's classifier (reports/verdict.h).
 * It only reads files: it runs in its own process and never touches the traced program (docs/live.md).
 * Not thread-safe per object.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PL_LIVE_MAX_BINS 512

typedef enum pl_live_metric {
    PL_LIVE_HEAP = 0,  /* heap.bytes: malloc family + anonymous mmap */
    PL_LIVE_RSS,       /* rss */
    PL_LIVE_DEV,       /* dev.allocated (caching allocator stats; plateau attach: NVML used; else device used) */
    PL_LIVE__COUNT
} pl_live_metric_t;

typedef enum pl_live_state {
    PL_LIVE_NONE = 0,    /* no samples yet */
    PL_LIVE_WARMING,     /* growing since the start, not longer than a warmup may last; or too few steps */
    PL_LIVE_FLAT,        /* flat, or a plateau after its warmup */
    PL_LIVE_UNDECIDED,   /* a tail too noisy or too short to say, not growing */
    PL_LIVE_SUSPECTED,   /* grows after its warmup (or noisily), not yet confirmed */
    PL_LIVE_SLOW,        /* a confirmed growth too slow to matter within slow_hours */
    PL_LIVE_LEAK,        /* the classifier's leak: confirmed, fast enough to matter */
} pl_live_state_t;

typedef struct pl_live_mstatus {
    bool present;
    bool program;           /* one of the program's own memory metrics (heap, dev; rss without heap): only these
                             * say LEAK; RSS beside a live heap says "grows" (retention, file pages: docs/verdict.md) */
    pl_live_state_t state;
    double last;            /* last baseline, bytes */
    double per_step;        /* Theil-Sen slope of the tail, bytes per step (per second by time) */
    int64_t more_steps;     /* warming / undecided / suspected: steps before a verdict is expected */
    int64_t warmup_steps;   /* flat after a warmup: its length */
    bool has_oom;           /* leak / slow: projected limit */
    int64_t oom_step;       /* projected step of the OOM */
    double oom_seconds;     /* NAN when step times are unknown */
} pl_live_mstatus_t;

typedef struct pl_live_status {
    bool have_proc;         /* a process to show */
    uint32_t pid;
    int32_t rank;           /* RANK of a distributed job's process, -1 none */
    char name[64];          /* "target_leak", "python3 train.py" (as recorded: escape it before printing) */
    char node[64];          /* its host name, "" unknown (as recorded: escape it before printing) */
    int64_t start_realtime_ns; /* the process's trace start (CLOCK_REALTIME), 0 unknown: with exe, tells the process
                                * from a later one that got its pid (reports/alive.h) */
    char exe[256];          /* its executable, "" unknown */
    bool by_time;           /* the process has no steps: series by seconds */
    int64_t step;           /* last step seen */
    double steps_per_s;     /* over the last bins, 0 unknown */
    double rss_bytes, dev_bytes; /* latest samples, NAN unknown */
    pl_live_mstatus_t m[PL_LIVE__COUNT];
    pl_live_state_t state;  /* the program's: the worst of its program-memory metrics (heap, dev; rss without heap) */
    int state_metric;       /* pl_live_metric_t that decided it, -1 none */
    size_t n_files, n_alive;/* traces in the directory, processes still running (no end record yet) */
    bool ended;             /* run.status exists, or every trace has its end record */
    char holder[256];       /* who keeps it: the path of the first holder the census names (docs/retention.md),
                             * only while the program's state is leak, slow growth or suspected; "" none */
} pl_live_status_t;

typedef struct pl_live_opts {
    double slow_hours;      /* a growth whose OOM is further than this is slow growth (default 24) */
    int64_t horizon_steps;  /* without a limit: a leak doubles within this many steps (default 10000) */
    bool status_from_now;   /* only a run.status line written after pl_live_open says the run ended, and not every
                             * trace closed (plateau run's own watcher: with --append, the earlier runs' lines and
                             * closed traces are there from the start) */
    int64_t since_realtime_ns; /* > 0: processes that started before this (CLOCK_REALTIME) belong to an earlier run
                             * appended to (--append): neither shown nor judged */
    int64_t warmup_steps;   /* > 0: growth up to this step is warmup (plateau run --warmup-steps): the series of a
                             * process with steps are judged on the steps after it only (warming up until then) */
} pl_live_opts_t;

typedef struct pl_live pl_live_t;

/* Follow the run directory dir (it may not hold any trace yet). opts may be NULL. NULL on allocation failure. */
pl_live_t *pl_live_open(const char *dir, const pl_live_opts_t *opts);
void pl_live_close(pl_live_t *l);

/* Make pl_live_poll return early (-EINTR) once *flag is non-zero, checked every few thousand records: a signal
 * handler's flag, so that the watcher ends at once when the run ends. NULL: never. */
void pl_live_set_cancel(pl_live_t *l, const volatile int *flag);

/* Read what was appended since the last poll (new files too). Returns 0, -ENOMEM, or -EINTR when cancelled;
 * unreadable files are skipped. */
int pl_live_poll(pl_live_t *l);

/* The status from what was read so far. Returns 0 or -ENOMEM. */
int pl_live_status(pl_live_t *l, pl_live_status_t *out);

/* The followed processes, numbered 0..pl_live_n_procs()-1 (the order of first sight; it only grows). */
size_t pl_live_n_procs(const pl_live_t *l);

/* The status of process i, judged as pl_live_status judges the shown one (the run's counts included). Returns 0,
 * or -ENOENT when i is not a process of this run with series to judge (not started yet, an earlier run's, a helper
 * that ended without a step). */
int pl_live_status_of(pl_live_t *l, size_t i, pl_live_status_t *out);

/* One line (no newline), in the report's verdict order: who, the program's state on the metric that decided it with
 * its rate and OOM, the holder once the census names one, then the context and the other metrics:
 * "pid 12 python3 train.py  heap: LEAK +64.0 KiB/step, OOM in ~2.2 h  kept by `total_loss`  step 140 (12.5/s)
 * rss 1.20 GiB  dev 3.40 GiB  rss: grows +60.1 KiB/step  dev: flat". Truncated to n. */
void pl_live_format(const pl_live_status_t *s, char *buf, size_t n);

/* "warming up", "flat", "undecided", "leak suspected", "slow growth", "LEAK", "no data". */
const char *pl_live_state_name(pl_live_state_t s);

/* Bytes of trace read so far (benchmarks), and bytes held by the follower's own tables. */
uint64_t pl_live_bytes_read(const pl_live_t *l);
size_t pl_live_bytes_held(const pl_live_t *l);
