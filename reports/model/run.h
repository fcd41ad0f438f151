/* reports/run: the run model, and the assembly of a run from its processes.
 *
 * A run is one report (report.h: a row per process with its series, verdicts and findings) and what its traces said
 * beyond the series (extract.h: per process image its file, process tree, argv, clean end, damage, sites, auto-steps,
 * CUPTI cross-check; per run the command's status and the files left out). Ingest (extract.c) fills both, one trace
 * at a time; the assembly here then works on the whole run: processes in start order, roles (main / worker / short
 * helper), worker pools and generations as rows of their own, whether the run was cut short. Ingest records facts;
 * the sentences quoted from them (a site's, a holder's, why the run was cut short, the pools' names) are written
 * once, by pl_run_analyze. Text,
 * JSON, HTML (render.h, render_html.h) and the exports (export.h) render from a pl_run_t only, the first three
 * through one view of it (pl_run_view_t: which rows fold and why, the totals).
 * Data flow: traces -> extract.c (ingest) -> run.c (assembly) -> pl_run_analyze -> view -> renderers.
 * Pure functions over the model (plus run.status, read by pl_run_assemble); not thread-safe per run.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "facts.h"
#include "report.h"

typedef struct pl_run {
    pl_report_t *report;        /* processes, series, verdicts, findings */
    pl_extract_t *ext;          /* the traces' facts beyond the series, one entry per process image (its row in
                                 * report); NULL for a report made from series alone (no process table, no sites) */
} pl_run_t;

/* An empty run named source (may be NULL): a new report and extraction, both owned by run (pl_run_destroy).
 * A caller holding its own report and extraction may instead point a pl_run_t at them to render them (it then
 * frees them itself). Returns 0 or -ENOMEM (run zeroed). */
int pl_run_create(pl_run_t *run, const char *source);
/* Frees what pl_run_create made; safe on a zeroed run. */
void pl_run_destroy(pl_run_t *run);


/* After every trace of a run was read (extract.c): how the command ended, from status_dir/run.status when
 * status_dir is not NULL; processes in start order; roles; whether the run was cut short; pool and generation rows.
 * Returns 0 or -ENOMEM. */
int pl_run_assemble(pl_report_t *r, pl_extract_t *x, const char *status_dir);

/* Roles, then whether the run was cut short (a damaged trace, or a root process without an end record; x->cut_proc
 * the first such process, whose reason pl_run_analyze writes): after each trace read on its own (pl_extract_file,
 * _mem, _reader) and by pl_run_assemble. */
void pl_run_update_cut_short(pl_report_t *r, pl_extract_t *x);

/* After pl_run_analyze: the process whose series leak ("which process leaks"), by index into x->procs, or -1. The
 * first one when several do; n_leaking (may be NULL) gets how many. */
long pl_run_leaking(const pl_extract_t *x, size_t *n_leaking);

/* Sum over processes of the last per-step baseline of metric m (0 when no process has it); n_with (may be NULL)
 * gets how many processes have it. With m = PSS this is the run's total without double-counting shared pages, over
 * the processes that have a PSS sample (the first comes 5 s after a process starts: docs/env.md, PLATEAU_PSS). */
double pl_run_total_last(const pl_extract_t *x, pl_metric_t m, size_t *n_with);

/* The run's memory totals (pl_run_total_last) and which of three things the reports say of them: one rule for the
 * text, HTML and JSON reports (the view holds them, computed once: pl_run_view_make). */
typedef enum pl_totals_kind {
    PL_TOTALS_PSS,      /* every process image has a PSS sample: the total PSS, shared pages counted once */
    PL_TOTALS_PSS_SOME, /* some do: the total PSS over those */
    PL_TOTALS_RSS,      /* none does: the total RSS only */
} pl_totals_kind_t;

typedef struct pl_run_totals {
    double pss_bytes;   /* summed over the n_pss process images with a PSS sample */
    double rss_bytes;   /* summed over those with an RSS sample */
    size_t n_pss;
    size_t n_procs;     /* process images (x->n_procs) */
    pl_totals_kind_t kind;
} pl_run_totals_t;

/* The totals of x (may be NULL: no process, PL_TOTALS_PSS of nothing). */
void pl_run_totals(const pl_extract_t *x, pl_run_totals_t *t);

/* The last per-step baseline of p's metric m, NAN when p has none. */
double pl_run_last_base(const pl_report_process_t *p, pl_metric_t m);

/* The line of DIR/run.status for the command whose pid is pid (the last one), NULL when none: how plateau run saw it
 * end. */
const pl_extract_status_t *pl_run_status_of(const pl_extract_t *x, uint32_t pid);

/* The hooks and CUPTI saw the same device allocations (count and bytes). */
bool pl_run_crosscheck_agrees(const pl_extract_proc_t *p);

/* ---- the view: which rows of the report are summed up instead of shown in full, and why ----
 *
 * One rule for every renderer (docs/verdict.md §8): a worker row whose verdict says nothing grows
 * (pl_report_quiet_worker) is folded: a process into the workers' line, a short helper into the helpers' line, a
 * pool or generations row into its one line. The text report's process blocks fold it even when its trace is
 * damaged; the process table and the HTML list a damaged one on its own, where its damage is said
 * (pl_run_view_hides). Computed once per report by each renderer (pl_run_view_make), from the analysed report and,
 * when there is one, the run's extraction; the renderers only read it. */
typedef enum pl_fold {
    PL_FOLD_NONE = 0,     /* shown in full: a main process, or a worker that leaks or grows slowly */
    PL_FOLD_WORKER,       /* a quiet worker process: on the workers' line */
    PL_FOLD_HELPER,       /* a quiet short helper: on the helpers' line */
    PL_FOLD_POOL,         /* a quiet pool of workers: its one line */
    PL_FOLD_GENERATIONS,  /* quiet generations of short-lived workers: their one finding */
} pl_fold_t;

typedef struct pl_run_view {
    size_t n_rows;              /* the report's rows (r->n_procs) */
    pl_fold_t *fold;            /* per row r->procs[i]: why it is folded, PL_FOLD_NONE when shown in full */
    bool *damaged;              /* per row: its trace is damaged (false without extraction) */
    bool *looped;               /* per row: steps period detection found in its trace (steps_auto, n_steps > 0) */
    size_t n_ext;               /* the extraction's process images (x->n_procs; 0 without extraction) */
    size_t *row_of;             /* per process image x->procs[k]: its row i in r (n_rows when it has none) */
    size_t *ext_of;             /* per row i: its process image k in x (n_ext when it has none: a pool or generations
                                 * row, or no extraction) */
    /* the one order of ranks every renderer lists them in (the rank table, the ranks' sections side by side) */
    size_t n_ranks;             /* rows that are ranks (pl_report_is_rank) */
    size_t *rank_rows;          /* [n_ranks] their rows i, by rank, then node (a merged job's nodes share ranks), then
                                 * row */
    /* the workers' line: the PL_FOLD_WORKER rows */
    size_t n_workers;           /* how many */
    size_t n_workers_undecided; /* with the verdict "not decided" */
    size_t n_workers_nodata;    /* with the verdict "no data" */
    size_t n_workers_looped;    /* whose own loop period detection found (steps auto-detected): they step */
    int64_t workers_pid_lo, workers_pid_hi;
    size_t n_helpers;           /* PL_FOLD_HELPER rows */
    size_t n_quiet;             /* folded rows not counted in a pool that grows (the JSON's "workers_quiet") */
    pl_run_totals_t totals;     /* the run's memory totals (of nothing without extraction) */
} pl_run_view_t;

/* The view of report r (analysed) and its extraction x (may be NULL: a report from series alone). Returns 0 or
 * -ENOMEM (view zeroed). Free with pl_run_view_free; safe to free a zeroed view. */
int pl_run_view_make(const pl_report_t *r, const pl_extract_t *x, pl_run_view_t *view);
void pl_run_view_free(pl_run_view_t *view);

/* Is row i left out of the process table and the HTML report's sections (summed up instead)? When it is folded,
 * unless its trace is damaged. */
bool pl_run_view_hides(const pl_run_view_t *view, size_t i);

/* The call sites a report shows for a process: the device sites (facts.h, pl_extract_dev_sites_t) when its verdict
 * grows (leak or slow growth) by a device metric and its trace has device allocations with stacks, else the host
 * sites (sampled live bytes, as measured over the live heap's tail). */
typedef struct pl_run_sites {
    bool device;                      /* the device sites: segments taken from the driver */
    const char *metric;               /* the metric whose tail growth is measured over, or NULL */
    int64_t since;                    /* that tail's start (step or second); -1: no sites measured */
    size_t n;
    const pl_extract_site_t *sites;   /* n of them, largest growth first */
    const pl_extract_dev_list_t *dev; /* device: the list (its n_grew, growth_bytes); NULL for host sites */
    bool python;                      /* device: the process ran Python (its census, or a host site's Python frames) */
} pl_run_sites_t;

/* Fills *v for p (after analysis: it reads p->proc's verdict) and returns v->device. */
bool pl_run_sites(const pl_extract_proc_t *p, pl_run_sites_t *v);

