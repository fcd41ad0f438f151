/* reports/report: the report model (see report.h): ownership, per-metric limits, analysis driver. */
#include "report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *metric_names[PL_METRIC__COUNT] = {
    "rss", "rss.anon", "rss.file", "rss.shmem", "pss", "heap.bytes", "heap.count",
    "dev.allocated", "dev.reserved", "dev.tensors", "dev.other", "cgroup", "tensors", "dev.active",
    "dev.inactive_split",
};

const char *pl_metric_name(pl_metric_t m) { return (unsigned)m < PL_METRIC__COUNT ? metric_names[m] : "?"; }

bool pl_metric_is_bytes(pl_metric_t m) {
    return m != PL_METRIC_HEAP_COUNT && m != PL_METRIC_DEV_TENSORS && m != PL_METRIC_TENSORS;
}

pl_report_t *pl_report_create(const char *source) {
    pl_report_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    snprintf(r->source, sizeof r->source, "%s", source ? source : "");
    pl_verdict_params_default(&r->params);
    return r;
}

void pl_report_destroy(pl_report_t *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_procs; i++) {
        for (int m = 0; m < PL_METRIC__COUNT; m++) pl_series_free(&r->procs[i]->metrics[m].series);
        free(r->procs[i]);
    }
    free(r->procs);
    free(r);
}

void pl_report_set_cut_short(pl_report_t *r, const char *reason) {
    if (!r) return;
    r->cut_short = true;
    if (!reason) reason = "trace ended abruptly";
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
    if (r->n_procs == r->cap_procs) {
        size_t nc = r->cap_procs ? r->cap_procs * 2 : 4;
        pl_report_process_t **np = realloc(r->procs, nc * sizeof *np);
        if (!np) return NULL;
        r->procs = np;
        r->cap_procs = nc;
    }
    pl_report_process_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->pid = pid;
    p->rank = rank;
    snprintf(p->name, sizeof p->name, "%s", name ? name : "");
    p->dev_alloc_retries = p->dev_ooms = -1;
    r->procs[r->n_procs++] = p;
    return p;
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

/* The limit a metric's growth runs into, and its name. */
static double metric_limit(const pl_report_t *r, pl_metric_t m, const char **source) {
    const pl_report_limits_t *l = &r->limits;
    *source = NULL;
    switch (m) {
    case PL_METRIC_DEV_ALLOCATED:
    case PL_METRIC_DEV_RESERVED:
    case PL_METRIC_DEV_OTHER:
    case PL_METRIC_DEV_ACTIVE:
    case PL_METRIC_DEV_INACTIVE_SPLIT:
        if (l->device_bytes > 0) *source = "device capacity";
        return l->device_bytes;
    case PL_METRIC_CGROUP:
        if (l->cgroup_bytes > 0) *source = "cgroup memory.max";
        return l->cgroup_bytes;
    case PL_METRIC_HEAP_COUNT:
    case PL_METRIC_DEV_TENSORS:
    case PL_METRIC_TENSORS:
        return 0;
    default:
        if (l->cgroup_bytes > 0 && (l->host_bytes <= 0 || l->cgroup_bytes < l->host_bytes)) {
            *source = "cgroup memory.max";
            return l->cgroup_bytes;
        }
        if (l->host_bytes > 0) *source = "host memory";
        return l->host_bytes;
    }
}

int pl_report_analyze(pl_report_t *r) {
    if (!r) return -EINVAL;
    for (size_t i = 0; i < r->n_procs; i++) {
        pl_report_process_t *p = r->procs[i];
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            pl_report_metric_t *mt = &p->metrics[m];
            if (!mt->present) continue;
            pl_verdict_params_t vp = r->params;
            vp.limit = metric_limit(r, (pl_metric_t)m, &mt->limit_source);
            int rc = pl_verdict_classify(&mt->series, &vp, &mt->verdict);
            if (rc) return rc;
        }
        int rc = pl_diagnosis_run(p, r->cut_short ? r->cut_reason : NULL, p->findings, PL_REPORT_MAX_FINDINGS,
                                  &p->n_findings);
        if (rc) return rc;
    }
    return 0;
}
