/* reports/analyze/report: the analysis driver (see analyze.h): per-metric limits, every series classified, the
 * diagnosis of every process, the run verdict and the ranks' sentence. The model it writes into is reports/model. */
#include "analyze.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "between.h"
#include "diagnosis.h"
#include "end.h"
#include "format.h"
#include "generations.h"
#include "sentences.h"

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
    case PL_METRIC_TENSORS_CUDA:
    case PL_METRIC_AUTOGRAD:
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

/* The cgroup counts every process in it, so the pages forked workers copy as they read their parent's objects
 * (copy-on-access, diagnosis.c) raise it while no process's own metric grows: a growth of the cgroup that fits
 * (its slope over its tail) within what those workers can copy (their ceilings summed) is said as theirs,
 * instead of "no finer metric explains it". */
static void cow_cgroup(pl_report_t *r) {
    double room = 0, rise = 0;
    for (size_t i = 0; i < r->n_procs; i++) {
        const pl_proc_verdict_t *v = &r->procs[i]->verdict;
        if (r->procs[i]->role == PL_ROLE_WORKER && v->cow_rise > 0) {
            rise += v->cow_rise;
            room += v->cow_ceiling;
        }
    }
    if (!(rise > 0)) return;
    for (size_t i = 0; i < r->n_procs; i++) {
        pl_report_process_t *p = r->procs[i];
        const pl_report_metric_t *cg = &p->metrics[PL_METRIC_CGROUP];
        if (!cg->present || cg->verdict.kind != PL_VERDICT_LEAK || cg->verdict.tail_steps <= 0) continue;
        double grew = cg->verdict.slope_per_step * (double)cg->verdict.tail_steps; /* over its growing tail */
        if (grew > room) continue;
        for (size_t k = 0; k < p->n_findings; k++) {
            pl_finding_t *f = &p->findings[k];
            if (f->code != PL_DX_RSS_UNEXPLAINED || strncmp(f->text, "cgroup grows", 12)) continue;
            char a[32], b[32], c[32];
            f->code = PL_DX_COPY_ON_ACCESS;
            snprintf(f->text, sizeof f->text, "cgroup grows (+%s over its tail) within what the forked workers can "
                     "copy of their parent's pages (copy-on-access: PSS +%s in all, ceiling %s in all): the cgroup is "
                     "charged for the pages they copy; not a leak.", pl_format_bytes(grew, a, sizeof a),
                     pl_format_bytes(rise, b, sizeof b), pl_format_bytes(room, c, sizeof c));
        }
    }
}

int pl_report_analyze(pl_report_t *r) {
    if (!r) return -EINVAL;
    for (size_t i = 0; i < r->n_procs; i++) {
        pl_report_process_t *p = r->procs[i];
        if (p->n_gen) { /* generations of short-lived workers: a rule of their own (docs/verdict.md §8) */
            int rc = pl_generations_judge(r, p);
            if (rc) return rc;
            continue;
        }
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            pl_report_metric_t *mt = &p->metrics[m];
            if (!mt->present) continue;
            pl_verdict_params_t vp = r->params;
            vp.limit = metric_limit(r, (pl_metric_t)m, &mt->limit_source);
            int rc = pl_verdict_classify(&mt->series, &vp, &mt->verdict);
            if (rc) return rc;
        }
        int rc = pl_diagnosis_run(p, r->cut_short ? r->cut_reason : NULL, &r->practical, p->findings,
                                  PL_REPORT_MAX_FINDINGS, &p->n_findings, &p->verdict);
        if (rc) return rc;
    }
    cow_cgroup(r);
    pl_report_run_verdict(r);
    for (size_t i = 0; i < r->n_procs; i++) /* the one test of practical significance, once: the labels read it */
        for (int m = 0; m < PL_METRIC__COUNT; m++)
            r->procs[i]->metrics[m].matters = pl_diagnosis_matters(r->procs[i], m, &r->practical);
    return 0;
}

/* "+2.00 MiB/step" (or "/s" by time) of a process verdict's metric */
static const char *pv_rate(const pl_proc_verdict_t *v, char *buf, size_t size) {
    char a[32];
    bool bytes = v->metric < 0 || pl_metric_is_bytes((pl_metric_t)v->metric);
    if (v->by_time && v->bucket_s > 0) snprintf(buf, size, "+%s/s", pl_format_value(v->per_step / v->bucket_s, bytes, a, sizeof a));
    else snprintf(buf, size, "+%s/step", pl_format_value(v->per_step, bytes, a, sizeof a));
    return buf;
}

static const char *pv_more(const pl_proc_verdict_t *v, char *buf, size_t size) {
    char d[24];
    if (v->by_time) snprintf(buf, size, "run ~%s longer", pl_format_duration((double)v->more_steps * (v->bucket_s > 0 ? v->bucket_s : 1), d, sizeof d));
    else snprintf(buf, size, "run ~%lld more steps", (long long)v->more_steps);
    return buf;
}

/* Severity order (pl_pverdict_t), then: leaks by the nearest OOM, undecided by the most steps still needed. */
static bool worse(const pl_proc_verdict_t *a, const pl_proc_verdict_t *b) {
    if (a->kind != b->kind) return a->kind > b->kind;
    if (pl_pverdict_grows(a->kind)) {
        if (a->has_oom != b->has_oom) return a->has_oom;
        return a->has_oom && a->steps_to_oom < b->steps_to_oom;
    }
    if (a->kind == PL_PV_UNDECIDED) return a->more_steps > b->more_steps;
    if (a->kind == PL_PV_NO_LEAK) return a->warmup_steps > b->warmup_steps;
    return false;
}

/* ---- ranks (docs/verdict.md §9) ---- */

static int cmp_rank(const void *a, const void *b) {
    const pl_report_process_t *p = *(const pl_report_process_t *const *)a, *q = *(const pl_report_process_t *const *)b;
    if (p->rank != q->rank) return p->rank < q->rank ? -1 : 1;
    return strcmp(p->node, q->node);
}

typedef enum { RK_LEAK, RK_FLAT, RK_SLOW, RK_UNDECIDED, RK_NO_DATA } rank_class_t;

static rank_class_t rank_class(const pl_report_process_t *p) {
    switch (p->verdict.kind) {
    case PL_PV_LEAK: return RK_LEAK;
    case PL_PV_NO_LEAK: return RK_FLAT;
    case PL_PV_SLOW_GROWTH: return RK_SLOW;
    case PL_PV_UNDECIDED: return RK_UNDECIDED;
    default: return RK_NO_DATA;
    }
}

/* "rank 1" / "ranks 0, 2 and 3" of the ranks in class k (at most 8 named, then "and N more"); returns how many */
static size_t rank_list(pl_report_process_t *const *rk, size_t n, rank_class_t k, char *buf, size_t size) {
    size_t m = 0, off = 0;
    for (size_t i = 0; i < n; i++) m += rank_class(rk[i]) == k;
    buf[0] = 0;
    if (!m) return 0;
    int w = snprintf(buf, size, "rank%s", m > 1 ? "s" : "");
    off = w > 0 && (size_t)w < size ? (size_t)w : size - 1;
    size_t j = 0;
    for (size_t i = 0; i < n && off + 1 < size; i++) {
        if (rank_class(rk[i]) != k) continue;
        j++;
        if (j > 8) {
            w = snprintf(buf + off, size - off, " and %zu more", m - 8);
            break;
        }
        w = snprintf(buf + off, size - off, "%s %d", j == 1 ? "" : j == m ? " and" : ",", rk[i]->rank);
        off += w > 0 && (size_t)w < size - off ? (size_t)w : size - off - 1;
    }
    return m;
}

static const char *pv_rate(const pl_proc_verdict_t *v, char *buf, size_t size);

/* append to a NUL-terminated buffer, cut at its size */
static void cat(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cat(char *buf, size_t size, const char *fmt, ...) {
    size_t len = strnlen(buf, size);
    if (len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

/* n_ranks, agreement and the sentence: one rank growing while the others are flat is a finding of its own (a
 * rank-specific code path); all ranks leaking is said once; a rank not decided leaves the agreement open. */
static void rank_summary(pl_report_t *r) {
    pl_run_verdict_t *rv = &r->verdict;
    rv->ranks_agree = -1;
    pl_report_process_t **rk = malloc((r->n_procs ? r->n_procs : 1) * sizeof *rk);
    if (!rk) return;
    size_t n = 0;
    for (size_t i = 0; i < r->n_procs; i++)
        if (pl_report_is_rank(r->procs[i])) rk[n++] = r->procs[i];
    qsort(rk, n, sizeof *rk, cmp_rank);
    rv->n_ranks = n;
    size_t n_cls[RK_NO_DATA + 1] = {0};
    const pl_report_process_t *fastest = NULL; /* the leaking rank with the largest slope */
    for (size_t i = 0; i < n; i++) {
        rank_class_t k = rank_class(rk[i]);
        n_cls[k]++;
        if (k == RK_LEAK && (!fastest || rk[i]->verdict.per_step > fastest->verdict.per_step)) fastest = rk[i];
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = !strcmp(rk[j]->node, rk[i]->node);
        rv->n_nodes += !seen;
    }
    rv->n_ranks_leaking = n_cls[RK_LEAK];
    rv->n_ranks_flat = n_cls[RK_FLAT];
    if (n < 2) {
        free(rk);
        return;
    }
    char leak[160], flat[160], slow[160], und[160], nod[160], rate[48] = "";
    rank_list(rk, n, RK_LEAK, leak, sizeof leak);
    rank_list(rk, n, RK_FLAT, flat, sizeof flat);
    rank_list(rk, n, RK_SLOW, slow, sizeof slow);
    rank_list(rk, n, RK_UNDECIDED, und, sizeof und);
    rank_list(rk, n, RK_NO_DATA, nod, sizeof nod);
    const char *metric = fastest && fastest->verdict.metric >= 0 ? pl_metric_name((pl_metric_t)fastest->verdict.metric)
                                                                 : "?";
    if (fastest) pv_rate(&fastest->verdict, rate, sizeof rate);
    size_t n_open = n_cls[RK_SLOW] + n_cls[RK_UNDECIDED] + n_cls[RK_NO_DATA];
    char *o = rv->ranks_line;
    size_t on = sizeof rv->ranks_line;
    o[0] = 0;
    if (n_cls[RK_LEAK] && n_cls[RK_FLAT]) {
        rv->ranks_agree = 0;
        cat(o, on, "ranks disagree: %s grow%s %s (%s) while %s %s flat: a leak on %s only (a rank-specific code path: "
                   "logging, metrics or evaluation on one rank?)",
            leak, n_cls[RK_LEAK] > 1 ? " up to" : "s", rate, metric, flat, n_cls[RK_FLAT] > 1 ? "are" : "is",
            n_cls[RK_LEAK] > 1 ? "some ranks" : "one rank");
    } else if (n_open) {
        cat(o, on, "cannot tell yet whether the ranks agree");
        if (leak[0]) cat(o, on, "; %s leak%s", leak, n_cls[RK_LEAK] > 1 ? "" : "s");
        if (flat[0]) cat(o, on, "; %s %s flat", flat, n_cls[RK_FLAT] > 1 ? "are" : "is");
    } else if (n_cls[RK_LEAK] == n) {
        rv->ranks_agree = 1;
        cat(o, on, "ranks agree: all %zu ranks leak (up to %s of %s): code every rank runs, not one rank's path", n,
            rate, metric);
    } else {
        rv->ranks_agree = 1;
        cat(o, on, "ranks agree: all %zu ranks are flat", n);
    }
    /* the ranks the agreement cannot count on */
    if (slow[0]) cat(o, on, "; %s grow%s slowly", slow, n_cls[RK_SLOW] > 1 ? "" : "s");
    if (und[0]) cat(o, on, "; %s not decided yet", und);
    if (nod[0]) cat(o, on, "; %s without data to judge", nod);
    free(rk);
}

/* Named by its rank in a run of several ranks (a run of one rank is just its program). */
static bool as_rank(const pl_report_t *r, const pl_report_process_t *p) {
    return pl_report_is_rank(p) && r->verdict.n_ranks >= 2;
}

/* "pid 12210 (python3 train.py)", or for a rank "rank 1 (pid 12210, node gpu-3)" */
static const char *who(const pl_report_t *r, const pl_report_process_t *p, char *buf, size_t size) {
    if (as_rank(r, p))
        snprintf(buf, size, "rank %d (pid %lld%s%s)", p->rank, (long long)p->pid, p->node[0] ? ", node " : "", p->node);
    else
        snprintf(buf, size, "pid %lld (%s)", (long long)p->pid, p->name);
    return buf;
}

void pl_report_run_verdict(pl_report_t *r) {
    pl_run_verdict_t *rv = &r->verdict;
    memset(rv, 0, sizeof *rv);
    rv->proc = -1;
    long slow_proc = -1;
    /* Main processes decide; a worker counts only when it leaks (or grows slowly): a worker that never steps and
     * lives a second cannot be "not decided", and its undecided series are not the run's. A member of a pool that
     * grows is counted in its pool. */
    for (size_t i = 0; i < r->n_procs; i++) {
        const pl_report_process_t *p = r->procs[i];
        const pl_proc_verdict_t *v = &p->verdict;
        if (pl_report_said_by_pool(r, p)) {
            rv->n_workers++;
            continue;
        }
        if (v->kind == PL_PV_LEAK) rv->n_leaking++;
        if (v->kind == PL_PV_SLOW_GROWTH) {
            rv->n_slow++;
            if (slow_proc < 0 || worse(v, &r->procs[slow_proc]->verdict)) slow_proc = (long)i;
        }
        if (p->role == PL_ROLE_WORKER) {
            rv->n_workers++;
            if (pl_report_quiet_worker(p)) continue;
        }
        if (rv->proc < 0 || worse(v, &r->procs[rv->proc]->verdict)) rv->proc = (long)i;
    }
    rv->kind = rv->proc >= 0 ? r->procs[rv->proc]->verdict.kind : PL_PV_NO_DATA;
    rank_summary(r);
    const pl_report_process_t *p = rv->proc >= 0 ? r->procs[rv->proc] : NULL;
    const pl_proc_verdict_t *v = p ? &p->verdict : NULL;
    char a[48], d[32], tail[160] = "";
    long other = -1; /* a main process whose RSS runs into the limit without a program leak */
    for (size_t i = 0; i < r->n_procs; i++) {
        const pl_proc_verdict_t *w = &r->procs[i]->verdict;
        /* the headline names it only when the limit is near (a quarter of slow_hours): a projection from a short
         * run over most of a day would come and go between identical runs; the diagnosis always says it */
        bool soon = isfinite(w->other_oom_seconds) && w->other_oom_seconds <= r->practical.slow_hours * 3600 / 4;
        if (r->procs[i]->role == PL_ROLE_MAIN && w->other_dx >= 0 && soon &&
            (other < 0 || w->other_oom_seconds < r->procs[other]->verdict.other_oom_seconds))
            other = (long)i;
    }
    if (other >= 0 && rv->kind != PL_PV_LEAK) {
        const pl_proc_verdict_t *ov = &r->procs[other]->verdict;
        pl_proc_verdict_t tmp = *ov;
        tmp.metric = ov->other_metric;
        tmp.per_step = ov->other_per_step;
        char oom[48] = "";
        if (isfinite(ov->other_oom_seconds))
            snprintf(oom, sizeof oom, ", OOM in ~%s", pl_format_duration(ov->other_oom_seconds, d, sizeof d));
        snprintf(tail, sizeof tail, "; but %s in pid %lld: %s %s%s",
                 ov->other_dx == PL_DX_HOST_RETENTION ? "host-allocator retention"
                 : ov->other_dx == PL_DX_FILE_PAGES ? "file-backed pages grow" : "RSS grows",
                 (long long)r->procs[other]->pid, pl_metric_name((pl_metric_t)ov->other_metric),
                 pv_rate(&tmp, a, sizeof a), oom);
    } else if (slow_proc >= 0 && !pl_pverdict_grows(rv->kind)) {
        const pl_proc_verdict_t *sv = &r->procs[slow_proc]->verdict;
        snprintf(tail, sizeof tail, "; slow growth in pid %lld: %s (%s)", (long long)r->procs[slow_proc]->pid,
                 pv_rate(sv, a, sizeof a), sv->metric >= 0 ? pl_metric_name((pl_metric_t)sv->metric) : "?");
    }
    switch (rv->kind) {
    case PL_PV_LEAK:
    case PL_PV_SLOW_GROWTH: {
        char oom[64] = "";
        if (v->has_oom && isfinite(v->oom_seconds))
            snprintf(oom, sizeof oom, ", OOM in ~%s", pl_format_duration(v->oom_seconds, d, sizeof d));
        else if (v->has_oom && !v->by_time)
            snprintf(oom, sizeof oom, ", OOM in ~%lld steps", (long long)v->steps_to_oom);
        char more_leaks[48] = "", name[160];
        bool all_ranks = as_rank(r, p) && rv->n_ranks_leaking == rv->n_leaking; /* "(and 1 more rank)" */
        if (rv->kind == PL_PV_LEAK && rv->n_leaking > 1)
            snprintf(more_leaks, sizeof more_leaks, " (and %zu more %s%s)", rv->n_leaking - 1,
                     all_ranks ? "rank" : "process", rv->n_leaking > 2 ? (all_ranks ? "s" : "es") : "");
        /* who keeps it (the census's holder, docs/retention.md), then, for a live-heap leak, the Python line its
         * growth was allocated at (the sites' top line) */
        bool heap = v->metric == PL_METRIC_HEAP_BYTES || v->metric == PL_METRIC_HEAP_COUNT;
        const char *at = heap && p->site_line[0] ? p->site_line : "";
        char site[sizeof p->holder_line + sizeof p->site_line + 2];
        snprintf(site, sizeof site, "%s%s%s", p->holder_line, p->holder_line[0] && at[0] ? "; " : "", at);
        snprintf(rv->line, sizeof rv->line, "verdict: %s in %s%s: %s of %s%s%s%.420s",
                 rv->kind == PL_PV_LEAK ? "LEAK" : "no leak, slow growth", who(r, p, name, sizeof name), more_leaks,
                 pv_rate(v, a, sizeof a), v->metric >= 0 ? pl_metric_name((pl_metric_t)v->metric) : "?", oom,
                 site[0] ? "; " : "", site);
        break;
    }
    case PL_PV_UNDECIDED:
    {
        char rk[24] = "";
        if (as_rank(r, p)) snprintf(rk, sizeof rk, "rank %d, ", p->rank);
        snprintf(rv->line, sizeof rv->line, "verdict: not decided yet: %s (%spid %lld, %s)%s", pv_more(v, a, sizeof a),
                 rk, (long long)p->pid, v->metric >= 0 ? pl_metric_name((pl_metric_t)v->metric) : "?", tail);
    }
        break;
    case PL_PV_NO_LEAK:
        if (v->warmup_steps > 0)
            snprintf(rv->line, sizeof rv->line, "verdict: no leak (warmup %lld %s, then flat)%s",
                     (long long)v->warmup_steps, v->by_time ? "s" : v->warmup_steps == 1 ? "step" : "steps", tail);
        else
            snprintf(rv->line, sizeof rv->line, "verdict: no leak (flat)%s", tail);
        break;
    default:
        snprintf(rv->line, sizeof rv->line, "verdict: no data (%s)",
                 r->n_procs ? "no process recorded enough of its memory to judge" : "no process recorded");
        break;
    }
}

int pl_run_analyze(pl_run_t *run) {
    if (!run || !run->report) return -EINVAL;
    /* The two sentences the verdict line, the diagnosis and the HTML quote (and each holder's line with its fix), written once here from the facts the
     * traces gave (the sites' top Python line, the census's first holder): extraction records facts only. */
    for (size_t i = 0; run->ext && i < run->ext->n_procs; i++) {
        const pl_extract_proc_t *xp = &run->ext->procs[i];
        pl_report_process_t *p = xp->proc;
        pl_run_site_sentence(xp, p->site_line, sizeof p->site_line);
        pl_retention_say(xp->retention);
        pl_retention_sentence(xp->retention, p->holder_line, sizeof p->holder_line);
        pl_end_of(run->ext, xp, &run->ext->procs[i].ended); /* how it ended, once: the renderers read it */
    }
    pl_window_judge(run->ext); /* report --between: each process's fit and its metrics' change, once */
    pl_run_name_rows(run->report); /* the pools' and generations' rows */
    pl_run_cut_reason(run->report, run->ext); /* why the run was cut short, which the diagnosis quotes */
    return pl_report_analyze(run->report);
}
