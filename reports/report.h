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

#include "diagnosis.h"
#include "series.h"
#include "verdict.h"

#define PL_REPORT_SCHEMA_VERSION 1
#define PL_REPORT_MAX_FINDINGS 8

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
} pl_report_metric_t;

typedef struct pl_report_process {
    int64_t pid;
    int32_t rank;               /* -1 when not a distributed rank */
    char name[64];
    pl_report_metric_t metrics[PL_METRIC__COUNT];
    pl_finding_t findings[PL_REPORT_MAX_FINDINGS];
    size_t n_findings;
    bool heap_filtered;         /* live heap bytes were recorded but left out of this report (report --metric) */
    /* torch's caching allocator (torch.cuda.memory_stats through the Python bootstrap): cumulative counters at the
     * last snapshot, summed over devices; -1 = not recorded. Set before pl_report_analyze. */
    int64_t dev_alloc_retries, dev_ooms;
} pl_report_process_t;

typedef struct pl_report {
    char source[256];           /* trace or run directory the report is about */
    bool cut_short;             /* the trace ended abruptly (SIGKILL, OOM kill) */
    char cut_reason[256];       /* whole, or cut with a visible "..." (pl_report_set_cut_short) */
    pl_report_limits_t limits;
    pl_verdict_params_t params; /* defaults from pl_verdict_params_default; limit is set per metric */
    pl_report_process_t **procs;
    size_t n_procs, cap_procs;
} pl_report_t;

/* NULL on allocation failure. source may be NULL. */
pl_report_t *pl_report_create(const char *source);
void pl_report_destroy(pl_report_t *r);

/* Mark the run as cut short; reason is copied (truncated). */
void pl_report_set_cut_short(pl_report_t *r, const char *reason);

/* A new process row, owned by r, stable until pl_report_destroy. NULL on allocation failure. */
pl_report_process_t *pl_report_add_process(pl_report_t *r, int64_t pid, int32_t rank, const char *name);

/* Build the metric's series from samples (replacing any previous one). Returns 0, -EINVAL, -ENOMEM. */
int pl_report_set_samples(pl_report_process_t *p, pl_metric_t m, const pl_sample_t *samples, size_t n,
                          const pl_series_opts_t *opts);

/* Classify every present series and run the diagnosis of every process. Returns 0 or the first error. */
int pl_report_analyze(pl_report_t *r);

/* "rss", "rss.anon", "rss.file", "rss.shmem", "pss", "heap.bytes", "heap.count", "dev.allocated", "dev.reserved",
 * "dev.tensors", "dev.other", "cgroup", "tensors", "dev.active", "dev.inactive_split"; "?" out of range. */
const char *pl_metric_name(pl_metric_t m);
/* false for counts (heap.count, dev.tensors). */
bool pl_metric_is_bytes(pl_metric_t m);
