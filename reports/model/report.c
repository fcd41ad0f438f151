/* reports/model/report: the report model (see report.h): ownership, metric names, what a process's verdict means
 * for a series' label, and which worker rows are quiet or said by their pool. The analysis that fills the verdicts is
 * reports/analyze/report.c. */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "grow.h"

static const char *metric_names[PL_METRIC__COUNT] = {
    "rss", "rss.anon", "rss.file", "rss.shmem", "pss", "heap.bytes", "heap.count",
    "dev.allocated", "dev.reserved", "dev.tensors", "dev.other", "cgroup", "tensors", "dev.active",
    "dev.inactive_split", "tensors.cuda", "autograd",
};

const char *pl_metric_name(pl_metric_t m) { return (unsigned)m < PL_METRIC__COUNT ? metric_names[m] : "?"; }

bool pl_metric_is_bytes(pl_metric_t m) {
    return m != PL_METRIC_HEAP_COUNT && m != PL_METRIC_DEV_TENSORS && m != PL_METRIC_TENSORS &&
           m != PL_METRIC_TENSORS_CUDA && m != PL_METRIC_AUTOGRAD;
}

static const char *pverdict_names[PL_PV__COUNT] = {"no-data", "no-leak", "slow-growth", "undecided", "leak"};

const char *pl_pverdict_name(pl_pverdict_t k) { return (unsigned)k < PL_PV__COUNT ? pverdict_names[k] : "?"; }

bool pl_pverdict_grows(pl_pverdict_t k) { return k == PL_PV_LEAK || k == PL_PV_SLOW_GROWTH; }

pl_report_t *pl_report_create(const char *source) {
    pl_report_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    snprintf(r->source, sizeof r->source, "%s", source ? source : "");
    pl_verdict_params_default(&r->params);
    r->practical.slow_hours = 24;
    r->practical.horizon_steps = 10000;
    r->verdict.proc = -1;
    return r;
}

void pl_report_destroy(pl_report_t *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_procs; i++) {
        for (int m = 0; m < PL_METRIC__COUNT; m++) pl_series_free(&r->procs[i]->metrics[m].series);
        free(r->procs[i]->marks);
        free(r->procs[i]);
    }
    free(r->procs);
    free(r);
}

void pl_report_set_cut_short(pl_report_t *r, const char *reason) {
    if (!r) return;
    r->cut_short = true;
    if (!reason) reason = ""; /* the sentence is the analysis' (pl_run_cut_reason) */
    size_t n = strlen(reason);
    if (n < sizeof r->cut_reason) {
        memcpy(r->cut_reason, reason, n + 1);
    } else { /* never cut silently */
        n = sizeof r->cut_reason - 4;
        while (n && ((unsigned char)reason[n] & 0xc0) == 0x80) n--; /* not inside a UTF-8 character */
        memcpy(r->cut_reason, reason, n);
        memcpy(r->cut_reason + n, "...", 4);
    }
}

pl_report_process_t *pl_report_add_process(pl_report_t *r, int64_t pid, int32_t rank, const char *name) {
    if (!r) return NULL;
    if (pl_grow_first((void **)&r->procs, &r->cap_procs, r->n_procs + 1, sizeof *r->procs, 4)) return NULL;
    pl_report_process_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->pid = pid;
    p->rank = rank;
    p->local_rank = -1;
    snprintf(p->name, sizeof p->name, "%s", name ? name : "");
    p->dev_alloc_retries = p->dev_ooms = -1;
    p->autograd_saved_bytes = p->autograd_saved_n = -1;
    r->procs[r->n_procs++] = p;
    return p;
}

int pl_report_add_mark(pl_report_process_t *p, int64_t step, int64_t t_ns, const char *label) {
    if (!p) return -EINVAL;
    if (p->n_marks >= PL_REPORT_MAX_MARKS) {
        p->n_marks_dropped++;
        return 0;
    }
    if (pl_grow_first((void **)&p->marks, &p->cap_marks, p->n_marks + 1, sizeof *p->marks, 8)) return -ENOMEM;
    pl_report_mark_t *k = &p->marks[p->n_marks++];
    k->step = step;
    k->t_ns = t_ns;
    snprintf(k->label, sizeof k->label, "%s", label ? label : "");
    return 0;
}

int pl_report_set_samples(pl_report_process_t *p, pl_metric_t m, const pl_sample_t *samples, size_t n,
                          const pl_series_opts_t *opts) {
    if (!p || (unsigned)m >= PL_METRIC__COUNT) return -EINVAL;
    pl_series_t s;
    int rc = pl_series_build(samples, n, opts, &s);
    if (rc) return rc;
    pl_report_metric_t *mt = &p->metrics[m];
    pl_series_free(&mt->series);
    mt->series = s;
    mt->present = true;
    return 0;
}

bool pl_report_program_metric(const pl_report_process_t *p, pl_metric_t m) {
    switch (m) {
    case PL_METRIC_HEAP_BYTES:
    case PL_METRIC_HEAP_COUNT:
    case PL_METRIC_DEV_ALLOCATED:
    case PL_METRIC_DEV_TENSORS:
    case PL_METRIC_AUTOGRAD: return true;
    case PL_METRIC_RSS_ANON:
    case PL_METRIC_RSS:
        if (p->metrics[PL_METRIC_HEAP_BYTES].present || p->metrics[PL_METRIC_HEAP_COUNT].present) return false;
        return m == PL_METRIC_RSS_ANON || !p->metrics[PL_METRIC_RSS_ANON].present;
    case PL_METRIC_DEV_RESERVED: /* device memory as a whole (a log's nvidia-smi column) when nothing finer was had */
        return !p->metrics[PL_METRIC_DEV_ALLOCATED].present && !p->metrics[PL_METRIC_DEV_TENSORS].present;
    default: return false;
    }
}

const pl_report_metric_t *pl_report_metric_of(const pl_report_process_t *p, pl_metric_t m) {
    return p && p->metrics[m].present ? &p->metrics[m] : NULL;
}


char *pl_report_slope_text(const pl_report_metric_t *m, bool bytes, char *buf, size_t n) {
    if (!m || !isfinite(m->verdict.slope_per_step) || m->verdict.undecided == PL_UNDECIDED_NO_DATA) {
        snprintf(buf, n, "?");
        return buf;
    }
    char v[32];
    pl_format_value(m->verdict.slope_per_step, bytes, v, sizeof v);
    snprintf(buf, n, "%s%s/step", m->verdict.slope_per_step >= 0 ? "+" : "", v);
    return buf;
}


bool pl_report_is_rank(const pl_report_process_t *p) {
    return p && p->role == PL_ROLE_MAIN && p->rank >= 0 && !p->n_pool && !p->n_gen;
}

bool pl_report_quiet_worker(const pl_report_process_t *p) {
    return p && p->role == PL_ROLE_WORKER && !pl_pverdict_grows(p->verdict.kind);
}

/* Is p a member of a pool that leaks or grows slowly (docs/verdict.md §8)? Then the pool says it, on its trainer's
 * steps: the workers of one loader grow together, and which of them a run names on its own must not change between
 * identical runs (a worker whose loop period detection found has steps of its own, one that it did not has time
 * buckets, too few to decide). */
bool pl_report_said_by_pool(const pl_report_t *r, const pl_report_process_t *p) {
    if (p->pool_pid <= 0 || p->n_pool || p->role != PL_ROLE_WORKER) return false;
    for (size_t i = 0; i < r->n_procs; i++) {
        const pl_report_process_t *q = r->procs[i];
        if (q->n_pool && q->pid == p->pool_pid && !strcmp(q->node, p->node) &&
            pl_pverdict_grows(q->verdict.kind))
            return true;
    }
    return false;
}
