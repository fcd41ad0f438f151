/* reports/report: the in-memory report model every renderer reads and the trace front end fills.
 *
 * A report has processes; a process has up to one series per metric (pl_metric_t), each with its verdict, and the
 * diagnosis findings. Fill it with pl_report_add_process + pl_report_set_samples, then pl_report_analyze classifies
 * every series (limits per metric: device capacity for device metrics, the cgroup limit for cgroup memory, the
 * smaller of cgroup limit and host memory for host metrics) and runs the diagnosis. The report owns everything it
 * points to. Not thread-safe; one report per thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dx.h"
#include "series.h"
#include "verdict.h"

#define PL_REPORT_SCHEMA_VERSION 1
#define PL_REPORT_MAX_FINDINGS 8
#define PL_REPORT_MAX_MARKS 1024 /* plateau_mark() points kept per process; later ones are counted */

typedef enum pl_metric {
    PL_METRIC_RSS = 0,        /* host resident set, bytes */
    PL_METRIC_RSS_ANON,       /* RssAnon */
    PL_METRIC_RSS_FILE,       /* RssFile */
    PL_METRIC_RSS_SHMEM,      /* RssShmem */
    PL_METRIC_PSS,            /* proportional set size: shared pages split between processes */
    PL_METRIC_HEAP_BYTES,     /* host live heap bytes (malloc family, exact) */
    PL_METRIC_HEAP_COUNT,     /* host live allocation count */
    PL_METRIC_DEV_ALLOCATED,  /* device bytes allocated to tensors */
    PL_METRIC_DEV_RESERVED,   /* device bytes reserved by the caching allocator */
    PL_METRIC_DEV_TENSORS,    /* live tensor (block) count */
    PL_METRIC_DEV_OTHER,      /* device bytes outside the allocator (driver, libraries) */
    PL_METRIC_CGROUP,         /* cgroup memory.current */
    PL_METRIC_TENSORS,        /* live torch.Tensor objects on the host (Python bootstrap, counted every few steps) */
    PL_METRIC_DEV_ACTIVE,     /* device bytes in active blocks (torch's caching allocator) */
    PL_METRIC_DEV_INACTIVE_SPLIT, /* device bytes in inactive parts of split blocks: fragmentation */
    PL_METRIC_TENSORS_CUDA,   /* live torch.Tensor objects on CUDA devices, summed over the process's devices */
    PL_METRIC_AUTOGRAD,       /* autograd graph nodes the live torch.Tensor objects hold (with the host count) */
    PL_METRIC__COUNT
} pl_metric_t;

typedef struct pl_report_limits {
    double device_bytes;  /* device capacity, 0 = unknown */
    double cgroup_bytes;  /* cgroup memory.max, 0 = none */
    double host_bytes;    /* host MemTotal, 0 = unknown */
} pl_report_limits_t;

typedef struct pl_report_metric {
    bool present;
    pl_series_t series;         /* owned */
    pl_verdict_t verdict;       /* valid after pl_report_analyze */
    const char *limit_source;   /* static string naming the limit projected against, or NULL */
    bool matters;               /* a leak that matters in practice (dx.h, pl_diagnosis_matters): set by
                                 * pl_report_analyze, read by the renderers' labels */
} pl_report_metric_t;

/* A process's (and the run's) verdict, from the diagnosis (docs/verdict.md §5-6), never from "any metric": only the
 * program's own memory (live heap bytes/count, device allocated, live tensors; RSS only when the live heap was not
 * recorded) can make a leak; allocator retention, file pages and PSS are findings of their own. Ordered by
 * severity: a run takes the most severe verdict of its processes. */
typedef enum pl_pverdict {
    PL_PV_NO_DATA = 0,   /* no program-memory series with enough points to judge */
    PL_PV_NO_LEAK,       /* every program-memory series is flat or a plateau */
    PL_PV_SLOW_GROWTH,   /* grows for real, but too slowly to matter within slow_hours / horizon_steps */
    PL_PV_UNDECIDED,     /* nothing leaks, something is not decided yet (more_steps): may still be a leak */
    PL_PV_LEAK,          /* the program's own memory grows, fast enough to matter */
    PL_PV__COUNT
} pl_pverdict_t;

typedef enum pl_proc_role {
    PL_ROLE_MAIN = 0,    /* judged on its own: a process that steps (or, when none steps, one that lives as long) */
    PL_ROLE_WORKER,      /* never steps: DataLoader workers, helpers; judged as a group, folded when quiet */
} pl_proc_role_t;

typedef struct pl_proc_verdict {
    pl_pverdict_t kind;
    int metric;                 /* pl_metric_t that decided a leak / slow growth / undecided, -1 when none */
    double per_step;            /* its slope per step (per time bucket when by_time) */
    bool by_time;               /* its series is by time buckets: "steps" are bucket_s seconds */
    double bucket_s;            /* bucket width in seconds when by_time */
    int64_t more_steps;         /* undecided: steps (buckets) to run before a verdict is expected */
    bool has_oom;               /* leak / slow growth: projected limit */
    double oom_seconds;         /* NAN when step times are unknown */
    int64_t steps_to_oom;       /* steps (buckets) from the last one to the projected OOM */
    int oom_metric;             /* pl_metric_t whose projection that is (the earliest to its limit), -1 unknown */
    int64_t warmup_steps;       /* no leak: longest warmup among the program-memory series (0: none) */
    int metric_warmup;          /* that series, -1 when none */
    /* a growth that is not a leak but still runs into the limit soon (allocator retention, file pages, RSS beside
     * an undecided heap): said beside the verdict, never as "leak" */
    int other_dx;               /* pl_dx_t of that finding, -1 when none */
    int other_metric;           /* pl_metric_t that grows */
    double other_per_step;
    double other_oom_seconds;   /* NAN when unknown */
    /* copy-on-access (a forked worker copying its parent's pages as it reads them, PL_DX_COPY_ON_ACCESS): how much
     * its PSS climbed, and the most it can reach (bytes); 0 when not said */
    double cow_rise, cow_ceiling;
} pl_proc_verdict_t;

/* A plateau_mark(label) point: where it falls in the process's series (step key, as series.h numbers steps: the
 * step in progress when it was marked, steps completed + 1) and when (since the process's trace started). */
typedef struct pl_report_mark {
    int64_t step;               /* series step key; by time: unused, t_ns places it */
    int64_t t_ns;               /* since the trace start (the time origin of the series) */
    char label[64];             /* as recorded (<= 63 bytes, may hold any byte: escape when rendering) */
} pl_report_mark_t;

typedef struct pl_report_process {
    int64_t pid;
    int32_t rank;               /* -1 when not a distributed rank */
    int32_t local_rank;         /* rank within its node, -1 when unset (set by the front end) */
    char node[64];              /* host name the process ran on, "" unknown (traces before 1.7) */
    char name[64];              /* the command; a pool's or generations' row is named by pl_run_analyze */
    pl_proc_role_t role;        /* set by the front end (reports/extract.c) before pl_report_analyze */
    bool helper;                /* a short helper (role worker): no steps, lived < 1 s, peak RSS < 64 MiB; folded into
                                 * one count-by-name line of the text report (reports/extract.c, docs/verdict.md) */
    size_t n_pool;              /* > 0: not a process but the pool of n_pool long-lived workers of process pid,
                                 * their summed live heap on its steps (role worker) */
    int64_t pool_pid;           /* > 0: a member of the pool of process pool_pid on the same node (set by the front
                                 * end): when that pool leaks, the run verdict says so once, as the pool's */
    size_t n_gen;               /* > 0: not a process but n_gen generations of short-lived workers of process pid
                                 * (a validation loader's: started together, exited after the pass), one point per
                                 * generation on its steps, judged by reports/generations.c (role worker) */
    size_t n_gen_workers;       /* workers in those generations */
    int64_t gen_every_steps;    /* median trainer steps between two generations' starts, 0 unknown */
    double forked_heap_bytes;   /* > 0: a worker forked from a process of the run without exec (same command line:
                                 * a DataLoader worker), and the live heap it started with, its parent's pages it may
                                 * copy (set by the front end before pl_report_analyze); 0 otherwise */
    pl_report_metric_t metrics[PL_METRIC__COUNT];
    pl_finding_t findings[PL_REPORT_MAX_FINDINGS];
    size_t n_findings;
    bool heap_filtered;         /* live heap bytes were recorded but left out of this report (report --metric) */
    char site_line[256];        /* the Python line the live heap's growth was allocated at, written by pl_run_analyze
                                 * (run.h) from the sites before pl_report_analyze: "93% of it allocated at
                                 * train.py:42 (`...`)"; "" none. The diagnosis and the run verdict name it when the
                                 * live heap leaks; the text and HTML reports show it as it is. */
    char holder_line[512];      /* who keeps it, written by pl_run_analyze from the census (reports/retention.c) before
                                 * pl_report_analyze: "kept by `total_loss` (local of train() in main.py): ..."; ""
                                 * none. The run verdict names it when the process leaks or grows slowly. */
    pl_proc_verdict_t verdict;  /* valid after pl_report_analyze */
    /* torch's caching allocator (torch.cuda.memory_stats through the Python bootstrap): cumulative counters at the
     * last snapshot, summed over devices; -1 = not recorded. Set before pl_report_analyze. */
    int64_t dev_alloc_retries, dev_ooms;
    /* what the autograd graphs of the live tensors save (the Python bootstrap's last count with them): bytes and
     * storages held by no live tensor, -1 = not recorded; autograd_lower: the bytes are a lower bound (saved
     * tensors left unread, or the node walk capped). Set before pl_report_analyze. */
    int64_t autograd_saved_bytes, autograd_saved_n;
    bool autograd_lower;
    pl_report_mark_t *marks;    /* n_marks in trace order, owned (pl_report_add_mark) */
    size_t n_marks, cap_marks;
    uint64_t n_marks_dropped;   /* marks past PL_REPORT_MAX_MARKS, counted only */
} pl_report_process_t;

/* The run's verdict: the most severe of its main processes' verdicts, and of its workers' leaks. */
typedef struct pl_run_verdict {
    pl_pverdict_t kind;
    long proc;                  /* index into procs of the process that decided it, -1 when none */
    size_t n_leaking;           /* processes whose verdict is leak */
    size_t n_slow;              /* processes whose verdict is slow growth */
    size_t n_workers;           /* processes judged as workers */
    char line[640];             /* "verdict: LEAK in pid 12210 (python3 train.py): +2.00 MiB/step, OOM in ~49 min";
                                 * for a rank: "verdict: LEAK in rank 1 (pid 12210, node gpu-3): +2.00 MiB/step ..." */
    /* ranks (docs/verdict.md §9): main processes with a rank, one row each */
    size_t n_ranks;             /* main processes with a rank */
    size_t n_ranks_leaking, n_ranks_flat; /* of them: verdict leak; verdict no leak */
    size_t n_nodes;             /* distinct node names among them ("" counts as one) */
    int ranks_agree;            /* with >= 2 ranks: 1 all leak or all flat, 0 some leak while others are flat,
                                 * -1 cannot tell (fewer than 2 ranks, or a rank is undecided / slow / no data) */
    char ranks_line[400];       /* the sentence about the ranks, "" with fewer than 2 ranks */
} pl_run_verdict_t;

/* Practical significance (docs/verdict.md §8): a statistically clear growth is a leak only when it would matter
 * within a training run: it reaches the memory limit within slow_hours, or (no limit or no step times) it reaches
 * the limit, or doubles its level, within horizon_steps. Otherwise it is "slow growth". */
typedef struct pl_practical_params {
    double slow_hours;          /* 24 */
    int64_t horizon_steps;      /* 10000 */
} pl_practical_params_t;

typedef struct pl_report {
    char source[256];           /* trace or run directory the report is about */
    bool cut_short;             /* the trace ended abruptly (SIGKILL, OOM kill) */
    char cut_reason[256];       /* whole, or cut with a visible "..." (pl_report_set_cut_short) */
    pl_report_limits_t limits;
    pl_verdict_params_t params; /* defaults from pl_verdict_params_default; limit is set per metric */
    pl_practical_params_t practical; /* defaults: 24 h, 10000 steps */
    pl_run_verdict_t verdict;   /* valid after pl_report_analyze */
    pl_report_process_t **procs;
    size_t n_procs, cap_procs;
} pl_report_t;

/* NULL on allocation failure. source may be NULL. */
pl_report_t *pl_report_create(const char *source);
void pl_report_destroy(pl_report_t *r);

/* Mark the run as cut short; reason is copied (cut with a visible "..."), NULL as "". */
void pl_report_set_cut_short(pl_report_t *r, const char *reason);

/* A new process row, owned by r, stable until pl_report_destroy. NULL on allocation failure. */
pl_report_process_t *pl_report_add_process(pl_report_t *r, int64_t pid, int32_t rank, const char *name);

/* Append a mark to p (label copied, cut at 63 bytes; NULL = ""). Past PL_REPORT_MAX_MARKS it is only counted
 * (n_marks_dropped). Returns 0, -EINVAL, -ENOMEM. */
int pl_report_add_mark(pl_report_process_t *p, int64_t step, int64_t t_ns, const char *label);

/* Build the metric's series from samples (replacing any previous one). Returns 0, -EINVAL, -ENOMEM. */
int pl_report_set_samples(pl_report_process_t *p, pl_metric_t m, const pl_sample_t *samples, size_t n,
                          const pl_series_opts_t *opts);


/* "rss", "rss.anon", "rss.file", "rss.shmem", "pss", "heap.bytes", "heap.count", "dev.allocated", "dev.reserved",
 * "dev.tensors", "dev.other", "cgroup", "tensors", "dev.active", "dev.inactive_split", "tensors.cuda",
 * "autograd"; "?" out of
 * range. */
const char *pl_metric_name(pl_metric_t m);
/* false for counts (heap.count, dev.tensors). */
bool pl_metric_is_bytes(pl_metric_t m);

/* "no-data", "no-leak", "slow-growth", "undecided", "leak"; "?" out of range. */
const char *pl_pverdict_name(pl_pverdict_t k);
/* Does a process verdict of kind k say its memory grows (a leak, or slow growth)? Then the reports give its rate,
 * its holders and its OOM or limit; otherwise they do not (the one rule every renderer asks). */
bool pl_pverdict_grows(pl_pverdict_t k);

/* Is m one of p's program-memory metrics (what its verdict is judged on: live heap, device allocated, live tensors;
 * rss.anon, else rss, when the live heap was not recorded; dev.reserved when neither device allocated nor device
 * tensors were)? The one rule: the diagnosis and the labels both ask it. */
bool pl_report_program_metric(const pl_report_process_t *p, pl_metric_t m);


/* p's metric m when it was recorded, else NULL (p may be NULL). */
const pl_report_metric_t *pl_report_metric_of(const pl_report_process_t *p, pl_metric_t m);

/* A metric's fitted slope: "+1.00 MiB/step" (bytes) or "+3/step", "?" when m is NULL, the slope is not finite or
 * there was no data. Returns buf. */
char *pl_report_slope_text(const pl_report_metric_t *m, bool bytes, char *buf, size_t n);

/* Is p one of the run's ranks: a main process (not a pool row) with a rank? */
bool pl_report_is_rank(const pl_report_process_t *p);


/* A worker row (process, pool or generations) whose verdict says nothing grows: the renderers fold it (the view,
 * run.h: pl_run_view_make). */
bool pl_report_quiet_worker(const pl_report_process_t *p);

/* Is p a worker counted in its pool because the pool leaks or grows slowly (its trainer's pool row says it)? */
bool pl_report_said_by_pool(const pl_report_t *r, const pl_report_process_t *p);

