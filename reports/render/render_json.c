/* reports/render_json: the versioned JSON report (schema in docs/report-schema.md), written through the common/json
 * emitter (numbers %.10g, non-finite ones null, strings escaped per RFC 8259). Key order and layout are fixed
 * (golden tests). render_fields writes the report's top-level fields, and pl_render_run_json the run's "run" object
 * after them, in one document. */
#include "render.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "export.h"
#include "json.h"
#include "retention_render.h"
#include "window.h"
#include "ending.h"

static void verdict_json(pl_json_t *j, const pl_report_metric_t *m) {
    const pl_verdict_t *v = &m->verdict;
    pl_json_kstr(j, "verdict", pl_verdict_name(v->kind));
    pl_json_key(j, "warmup");
    if (v->has_warmup) {
        pl_json_object(j);
        pl_json_kint(j, "end_step", v->warmup_end_step);
        pl_json_kint(j, "steps", v->warmup_steps);
        pl_json_knum(j, "size", v->warmup_size);
        pl_json_end(j);
    } else {
        pl_json_null(j);
    }
    pl_json_key(j, "tail");
    pl_json_object(j);
    pl_json_kint(j, "start_step", v->tail_start_step);
    pl_json_kint(j, "steps", v->tail_steps);
    pl_json_kuint(j, "points", v->tail_points);
    pl_json_knum(j, "level", v->level);
    pl_json_knum(j, "slope_per_step", v->slope_per_step);
    pl_json_key(j, "slope_ci");
    pl_json_array(j);
    pl_json_num(j, v->slope_lo);
    pl_json_num(j, v->slope_hi);
    pl_json_end(j);
    pl_json_knum(j, "p_value", v->p_up);
    pl_json_knum(j, "variance_factor", v->var_factor);
    pl_json_knum(j, "noise", v->noise);
    pl_json_knum(j, "threshold_per_step", v->threshold_per_step);
    pl_json_key(j, "sawtooth_period_steps"); /* the tail was judged on each period's low (pl_series_sawtooth) */
    if (v->sawtooth_period > 0) pl_json_int(j, v->sawtooth_period);
    else pl_json_null(j);
    pl_json_end(j);
    pl_json_key(j, "leak");
    if (v->kind == PL_VERDICT_LEAK) {
        pl_json_object(j);
        pl_json_knum(j, "per_step", v->slope_per_step);
        pl_json_knum(j, "per_hour", v->per_hour);
        pl_json_key(j, "oom");
        if (v->has_oom) {
            pl_json_object(j);
            pl_json_knum(j, "limit", v->limit);
            pl_json_key(j, "limit_source");
            pl_json_str_or_null(j, m->limit_source);
            pl_json_knum(j, "spike", v->spike);
            pl_json_kint(j, "step", v->oom_step);
            pl_json_knum(j, "seconds", v->oom_seconds);
            pl_json_end(j);
        } else {
            pl_json_null(j);
        }
        pl_json_end(j);
    } else {
        pl_json_null(j);
    }
    pl_json_key(j, "inconclusive");
    if (v->kind == PL_VERDICT_INCONCLUSIVE) {
        pl_json_object(j);
        pl_json_kstr(j, "reason", pl_verdict_undecided_name(v->undecided));
        pl_json_kint(j, "more_steps", v->more_steps);
        pl_json_end(j);
    } else {
        pl_json_null(j);
    }
}

/* one entry of "metrics": a block object, its series compacted to max_points */
static int metric_json(pl_json_t *j, pl_metric_t k, const pl_report_metric_t *m, size_t max_points) {
    const pl_series_t *s = &m->series;
    const pl_verdict_t *v = &m->verdict;
    pl_series_t c;
    if (pl_series_compact(s, max_points, &c)) return -ENOMEM;
    pl_json_object_block(j);
    pl_json_kstr(j, "name", pl_metric_name(k));
    pl_json_kstr(j, "unit", pl_metric_is_bytes(k) ? "bytes" : "count");
    pl_json_kstr(j, "by", s->by_time ? "time" : "step");
    pl_json_knum(j, "bucket_seconds", s->by_time ? (double)s->bucket_ns / 1e9 : NAN);
    pl_json_knum(j, "step_seconds", s->step_ns > 0 ? s->step_ns / 1e9 : NAN);
    pl_json_kint(j, "first_step", v->first_step);
    pl_json_kint(j, "last_step", v->last_step);
    pl_json_knum(j, "last_value", v->last_value);
    pl_json_key(j, "peak");
    pl_json_object(j);
    pl_json_knum(j, "value", v->peak);
    pl_json_kint(j, "step", v->peak_step);
    pl_json_end(j);
    verdict_json(j, m);
    pl_json_key(j, "series");
    pl_json_array(j);
    for (size_t i = 0; i < c.n_points; i++) {
        pl_json_array(j);
        pl_json_int(j, c.points[i].step);
        pl_json_num(j, c.points[i].base);
        pl_json_num(j, c.points[i].peak);
        pl_json_end(j);
    }
    pl_json_end(j);
    pl_json_end(j);
    pl_series_free(&c);
    return 0;
}

static void proc_verdict_json(pl_json_t *j, const pl_proc_verdict_t *v) {
    pl_json_object(j);
    pl_json_kstr(j, "kind", pl_pverdict_name(v->kind));
    pl_json_key(j, "metric");
    pl_json_str_or_null(j, v->metric >= 0 ? pl_metric_name((pl_metric_t)v->metric) : NULL);
    pl_json_kstr(j, "by", v->by_time ? "time" : "step");
    pl_json_knum(j, "per_step", pl_pverdict_grows(v->kind) ? v->per_step : NAN);
    pl_json_knum(j, "oom_seconds", v->has_oom ? v->oom_seconds : NAN);
    pl_json_key(j, "more_steps");
    if (v->kind == PL_PV_UNDECIDED) pl_json_int(j, v->more_steps);
    else pl_json_null(j);
    pl_json_kint(j, "warmup_steps", v->warmup_steps);
    if (v->cow_rise > 0) { /* only with the copy-on-access finding: reports without it are unchanged */
        pl_json_key(j, "copy_on_access");
        pl_json_object(j);
        pl_json_knum(j, "pss_rise_bytes", v->cow_rise);
        pl_json_knum(j, "ceiling_bytes", v->cow_ceiling);
        pl_json_end(j);
    }
    pl_json_end(j);
}

static void run_verdict_json(pl_json_t *j, const pl_report_t *r, const pl_run_view_t *view) {
    const pl_run_verdict_t *v = &r->verdict;
    pl_json_object(j);
    pl_json_kstr(j, "kind", pl_pverdict_name(v->kind));
    pl_json_kstr(j, "line", v->line);
    pl_json_key(j, "pid");
    if (v->proc >= 0) pl_json_int(j, r->procs[v->proc]->pid);
    else pl_json_null(j);
    pl_json_kuint(j, "leaking", v->n_leaking);
    pl_json_kuint(j, "slow_growth", v->n_slow);
    pl_json_kuint(j, "workers", v->n_workers);
    pl_json_kuint(j, "workers_quiet", view->n_quiet); /* the folded rows (the view), but a growing pool's members */
    pl_json_break(j, 4);
    pl_json_key(j, "practical");
    pl_json_object(j);
    pl_json_knum(j, "slow_hours", r->practical.slow_hours);
    pl_json_kint(j, "horizon_steps", r->practical.horizon_steps);
    pl_json_end(j);
    pl_json_end(j);
}

/* "marks": [...] for a process with plateau_mark() points; nothing without (older reports unchanged). */
static void marks_json(pl_json_t *j, const pl_report_process_t *pr) {
    if (!pr->n_marks && !pr->n_marks_dropped) return;
    pl_json_key(j, "marks");
    pl_json_array_block(j);
    for (size_t k = 0; k < pr->n_marks; k++) {
        const pl_report_mark_t *m = &pr->marks[k];
        char u[3 * sizeof m->label];
        pl_json_object(j);
        pl_json_kint(j, "step", m->step);
        pl_json_knum(j, "t_seconds", (double)m->t_ns / 1e9);
        pl_json_kstr(j, "label", pl_export_utf8(m->label, u, sizeof u)); /* a label cut inside a character */
        pl_json_end(j);
    }
    pl_json_end(j);
    if (pr->n_marks_dropped) pl_json_kuint(j, "marks_dropped", pr->n_marks_dropped);
}

static int process_json(pl_json_t *j, const pl_report_process_t *pr, size_t max_points) {
    pl_json_object_block(j);
    pl_json_kint(j, "pid", pr->pid);
    pl_json_key(j, "rank");
    if (pr->rank >= 0) pl_json_int(j, pr->rank);
    else pl_json_null(j);
    pl_json_kstr(j, "name", pr->name);
    pl_json_kstr(j, "role", pr->n_pool ? "pool" : pr->n_gen ? "generations" : pr->role == PL_ROLE_WORKER ? "worker"
                                                                                                        : "main");
    if (pr->n_pool) pl_json_kuint(j, "pool_workers", pr->n_pool);
    if (pr->n_gen) {
        pl_json_kuint(j, "generations", pr->n_gen);
        pl_json_kuint(j, "generation_workers", pr->n_gen_workers);
        pl_json_kint(j, "generation_every_steps", pr->gen_every_steps);
    }
    pl_json_key(j, "verdict");
    proc_verdict_json(j, &pr->verdict);
    pl_json_key(j, "metrics"); /* one metric object per line at the keys' indent, "]" on its own line */
    pl_json_array(j);
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        if (!pr->metrics[m].present) continue;
        pl_json_break(j, 6);
        int rc = metric_json(j, (pl_metric_t)m, &pr->metrics[m], max_points);
        if (rc) return rc;
    }
    pl_json_break(j, 6);
    pl_json_end(j);
    pl_json_key(j, "diagnosis");
    pl_json_array_block(j);
    for (size_t k = 0; k < pr->n_findings; k++) {
        pl_json_object(j);
        pl_json_kstr(j, "code", pl_dx_name(pr->findings[k].code));
        pl_json_kstr(j, "text", pr->findings[k].text);
        pl_json_end(j);
    }
    pl_json_end(j);
    marks_json(j, pr);
    pl_json_end(j);
    return 0;
}

/* The report's top-level fields, "schema" to "processes", into the top-level object j holds open, with the view of
 * the report (which rows fold: run.h). 0 or -ENOMEM; stream errors and misuse are pl_json_done's to report. */
static int render_fields(const pl_report_t *r, const pl_run_view_t *view, pl_json_t *j, size_t max_points) {
    if (max_points == 0) max_points = 256;
    if (max_points < 2) max_points = 2;
    const pl_verdict_params_t *p = &r->params;
    pl_json_kstr(j, "schema", "plateau.report");
    pl_json_kint(j, "schema_version", PL_REPORT_SCHEMA_VERSION);
    pl_json_kstr(j, "plateau_version", PL_VERSION);
    pl_json_kstr(j, "source", r->source);
    pl_json_key(j, "verdict");
    run_verdict_json(j, r, view);
    pl_json_kbool(j, "cut_short", r->cut_short);
    pl_json_key(j, "cut_reason");
    pl_json_str_or_null(j, r->cut_short ? r->cut_reason : NULL);
    pl_json_key(j, "limits");
    pl_json_object(j);
    pl_json_knum(j, "device_bytes", r->limits.device_bytes > 0 ? r->limits.device_bytes : NAN);
    pl_json_knum(j, "cgroup_bytes", r->limits.cgroup_bytes > 0 ? r->limits.cgroup_bytes : NAN);
    pl_json_knum(j, "host_bytes", r->limits.host_bytes > 0 ? r->limits.host_bytes : NAN);
    pl_json_end(j);
    pl_json_key(j, "parameters");
    pl_json_object(j);
    pl_json_knum(j, "alpha", p->alpha);
    pl_json_knum(j, "ci_level", p->ci_level);
    pl_json_knum(j, "flat_rel_per_step", p->flat_rel_per_step);
    pl_json_kint(j, "min_tail_steps", p->min_tail_steps);
    pl_json_kuint(j, "min_tail_points", p->min_tail_points);
    pl_json_kint(j, "warmup_allow_steps", p->warmup_allow_steps);
    pl_json_end(j);
    pl_json_key(j, "processes"); /* "[" and "]" on lines of their own even when empty */
    pl_json_array(j);
    for (size_t i = 0; i < r->n_procs; i++) {
        pl_json_break(j, 4);
        int rc = process_json(j, r->procs[i], max_points);
        if (rc) return rc;
    }
    pl_json_break(j, 2);
    pl_json_end(j);
    return 0;
}

int pl_render_json(const pl_report_t *r, FILE *o, size_t max_points) {
    if (!r || !o) return -EINVAL;
    pl_json_t j;
    pl_json_init(&j, o, 0);
    pl_json_object_block(&j);
    pl_run_view_t view;
    if (pl_run_view_make(r, NULL, &view)) return -ENOMEM;
    int rc = render_fields(r, &view, &j, max_points);
    pl_run_view_free(&view);
    if (rc) return rc;
    pl_json_end(&j);
    return pl_json_done(&j);
}

/* ---- the run object: what the traces held beyond the series ---- */

static void json_rank(pl_json_t *j, const char *key, int32_t rank) {
    pl_json_key(j, key);
    if (rank >= 0) pl_json_int(j, rank);
    else pl_json_null(j);
}

/* "rank": R, "local_rank": L, "node": N (null when unset) */
static void json_rank_fields(pl_json_t *j, const pl_extract_proc_t *p) {
    json_rank(j, "rank", p->rank);
    json_rank(j, "local_rank", p->local_rank);
    pl_json_key(j, "node");
    pl_json_str_or_null(j, p->node[0] ? p->node : NULL);
}

static void json_rank_list(pl_json_t *j, const char *key, const pl_extract_t *x, const pl_run_view_t *v,
                           pl_pverdict_t kind) {
    pl_json_key(j, key);
    pl_json_array(j);
    for (size_t i = 0; i < v->n_ranks; i++) {
        const pl_extract_proc_t *p = &x->procs[v->ext_of[v->rank_rows[i]]];
        if (p->proc->verdict.kind == kind) pl_json_int(j, p->rank);
    }
    pl_json_end(j);
}

/* "ranks": null without ranks, else the agreement and one row per rank, in the view's order
 * (docs/report-schema.md) */
static void ranks_json(const pl_report_t *r, const pl_extract_t *x, const pl_run_view_t *view, pl_json_t *j) {
    size_t n = view->n_ranks;
    pl_json_key(j, "ranks");
    if (!n) {
        pl_json_null(j);
        return;
    }
    const pl_run_verdict_t *rv = &r->verdict;
    pl_json_object(j);
    pl_json_kuint(j, "n_ranks", n);
    pl_json_kuint(j, "n_nodes", rv->n_nodes);
    pl_json_key(j, "agree");
    if (rv->ranks_agree < 0) pl_json_null(j);
    else pl_json_bool(j, rv->ranks_agree > 0);
    pl_json_key(j, "line");
    pl_json_str_or_null(j, rv->ranks_line[0] ? rv->ranks_line : NULL);
    json_rank_list(j, "leaking", x, view, PL_PV_LEAK);
    json_rank_list(j, "flat", x, view, PL_PV_NO_LEAK);
    pl_json_break(j, 6);
    pl_json_key(j, "rows");
    pl_json_array_block(j);
    for (size_t k = 0; k < n; k++) {
        const pl_extract_proc_t *p = &x->procs[view->ext_of[view->rank_rows[k]]];
        const pl_proc_verdict_t *v = &p->proc->verdict;
        bool grows = pl_pverdict_grows(v->kind);
        pl_json_object(j);
        json_rank_fields(j, p);
        pl_json_kuint(j, "pid", p->pid);
        pl_json_kuint(j, "steps", p->n_steps);
        pl_json_kstr(j, "verdict", pl_pverdict_name(v->kind));
        pl_json_key(j, "metric");
        pl_json_str_or_null(j, grows && v->metric >= 0 ? pl_metric_name((pl_metric_t)v->metric) : NULL);
        pl_json_kstr(j, "by", v->by_time ? "time" : "step");
        pl_json_knum(j, "per_step", grows ? v->per_step : NAN);
        pl_json_end(j);
    }
    pl_json_end(j);
    pl_json_end(j);
}

void pl_render_site_json(pl_json_t *j, const pl_extract_site_t *st) {
    pl_json_object(j);
    pl_json_kuint(j, "stack_id", st->stack_id);
    pl_json_knum(j, "growth_bytes", st->growth_bytes);
    pl_json_knum(j, "live_bytes", st->live_bytes);
    pl_json_kuint(j, "live_allocations", st->n_live);
    pl_json_key(j, "frames");
    pl_json_array(j);
    for (size_t f = 0; f < st->n_frames; f++) pl_json_str(j, st->frames[f]);
    pl_json_end(j);
    if (st->py_name) { /* a Python site (docs/python-frames.md) */
        pl_json_break(j, 10);
        pl_json_key(j, "python");
        pl_json_object(j);
        pl_json_kstr(j, "name", st->py_name);
        pl_json_kstr(j, "file", st->py_file ? st->py_file : "");
        pl_json_kint(j, "line", st->py_line);
        pl_json_key(j, "source");
        pl_json_str_or_null(j, st->py_source);
        pl_json_knum(j, "share", st->share);
        pl_json_kuint(j, "merged_stacks", st->n_stacks);
        pl_json_key(j, "frames");
        pl_json_array(j);
        for (size_t f = 0; f < st->n_py; f++) pl_json_str(j, st->py_frames[f]);
        pl_json_end(j);
        pl_json_end(j);
    }
    pl_json_end(j);
}

/* A device leak's "sites" (pl_run_sites): the device sites, marked as such, with their totals; the host sites follow
 * as "host_sites". */
static void dev_sites_json(pl_json_t *j, const pl_run_sites_t *v) {
    pl_json_key(j, "sites");
    pl_json_object(j);
    pl_json_kstr(j, "metric", v->metric);
    pl_json_kint(j, "since", v->since);
    pl_json_kstr(j, "memory", "device");
    pl_json_kstr(j, "granularity", "segment");
    pl_json_knum(j, "growth_bytes", v->dev->growth_bytes);
    pl_json_kuint(j, "grew", v->dev->n_grew);
    pl_json_key(j, "top");
    pl_json_array_block(j);
    for (size_t i = 0; i < v->n; i++) pl_render_site_json(j, &v->sites[i]);
    pl_json_end(j);
    pl_json_end(j);
}

static void host_sites_json(pl_json_t *j, const char *key, const pl_extract_proc_t *p);

/* one process's "sites": null before a tail, else the growth metric and its top allocation sites */
static void sites_json(pl_json_t *j, const pl_extract_proc_t *p) {
    pl_run_sites_t dv;
    if (pl_run_sites(p, &dv)) {
        dev_sites_json(j, &dv);
        host_sites_json(j, "host_sites", p);
        return;
    }
    host_sites_json(j, "sites", p);
}

static void host_sites_json(pl_json_t *j, const char *key, const pl_extract_proc_t *p) {
    pl_json_key(j, key);
    if (p->site_tail_step < 0) {
        pl_json_null(j);
        return;
    }
    pl_json_object(j);
    pl_json_key(j, "metric");
    pl_json_str_or_null(j, p->site_metric);
    pl_json_kint(j, "since", p->site_tail_step);
    pl_json_key(j, "top");
    pl_json_array_block(j);
    for (size_t i = 0; i < p->n_sites; i++) pl_render_site_json(j, &p->sites[i]);
    pl_json_end(j);
    pl_json_end(j);
}

static void pid_list(pl_json_t *j, const char *key, const pl_extract_t *x, bool slow) {
    pl_json_key(j, key);
    pl_json_array(j);
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_report_process_t *pr = x->procs[i].proc;
        if (slow ? pr->verdict.kind == PL_PV_SLOW_GROWTH : pr->verdict.kind == PL_PV_LEAK) pl_json_int(j, pr->pid);
    }
    pl_json_end(j);
}

/* the "run" object: what the files held, per process (docs/report-schema.md) */
static void run_json(const pl_report_t *r, const pl_extract_t *x, const pl_run_view_t *view, pl_json_t *j) {
    pl_json_key(j, "run");
    pl_json_object_block(j);
    pl_json_kuint(j, "n_processes", x->n_procs);
    pl_json_kuint(j, "files_failed", x->n_files_failed);
    pl_json_key(j, "first_error");
    pl_json_str_or_null(j, x->first_error[0] ? x->first_error : NULL);
    pl_json_key(j, "failed_files"); /* the first PL_EXTRACT_FAILED_NAMED, each "FILE: why" */
    pl_json_array(j);
    for (size_t i = 0; i < x->n_failed_named; i++) pl_json_str(j, x->failed[i]);
    pl_json_end(j);
    const pl_run_totals_t *t = &view->totals;
    pl_json_knum(j, "total_pss_bytes", t->n_pss && t->pss_bytes > 0 ? t->pss_bytes : NAN);
    pl_json_knum(j, "total_rss_bytes", t->rss_bytes > 0 ? t->rss_bytes : NAN);
    pid_list(j, "leaking_pids", x, false);
    pid_list(j, "slow_growth_pids", x, true);
    ranks_json(r, x, view, j);
    pl_json_key(j, "processes");
    pl_json_array_block(j);
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *p = &x->procs[i];
        pl_json_object(j);
        pl_json_kuint(j, "pid", p->pid);
        pl_json_kuint(j, "ppid", p->ppid);
        pl_json_kuint(j, "exec_seq", p->exec_seq);
        pl_json_kstr(j, "file", p->file);
        pl_json_kstr(j, "exe", p->exe);
        pl_json_kstr(j, "argv", p->cmdline);
        pl_json_kstr(j, "role", p->proc->role == PL_ROLE_WORKER ? "worker" : "main");
        pl_json_kbool(j, "helper", p->proc->helper);
        json_rank_fields(j, p);
        pl_json_kstr(j, "verdict", pl_pverdict_name(p->proc->verdict.kind));
        pl_json_break(j, 7);
        pl_json_kbool(j, "clean_end", p->clean_end);
        pl_json_kbool(j, "damaged", p->damaged);
        pl_json_key(j, "error");
        pl_json_str_or_null(j, p->damaged ? p->error : NULL);
        pl_json_kuint(j, "records", p->n_records);
        pl_json_kuint(j, "lost_records", p->n_lost_records);
        pl_json_kuint(j, "host_events", p->n_host_events);
        pl_json_knum(j, "lost_share", p->n_host_events ? (double)p->n_lost_records / (double)p->n_host_events : NAN);
        pl_json_kuint(j, "steps", p->n_steps);
        pl_json_kuint(j, "untracked", p->n_untracked);
        if (p->n_agg_pairs || p->n_agg_samples || p->capped) { /* only in bounded traces (docs/long-runs.md) */
            pl_json_break(j, 7);
            pl_json_key(j, "aggregated");
            pl_json_object(j);
            pl_json_kuint(j, "host_pairs", p->n_agg_pairs);
            pl_json_kuint(j, "host_pair_bytes", p->agg_pair_bytes);
            pl_json_kuint(j, "first_step", p->agg_step_first + 1);
            pl_json_kuint(j, "last_step", p->agg_step_last + 1);
            pl_json_kuint(j, "samples", p->n_agg_samples);
            pl_json_key(j, "limit_step"); /* the step at which the trace reached PLATEAU_TRACE_MAX, null if it did not */
            if (p->capped) pl_json_uint(j, p->cap_step);
            else pl_json_null(j);
            pl_json_kuint(j, "not_written_records", p->cap_records);
            pl_json_end(j);
        }
        if (p->n_cupti_dev_allocs) { /* only in traces with CUPTI records */
            pl_json_break(j, 7);
            pl_json_key(j, "device_crosscheck");
            pl_json_object(j);
            pl_json_kuint(j, "hook_allocs", p->n_hook_dev_allocs);
            pl_json_kuint(j, "hook_bytes", p->hook_dev_alloc_bytes);
            pl_json_kuint(j, "cupti_allocs", p->n_cupti_dev_allocs);
            pl_json_kuint(j, "cupti_bytes", p->cupti_dev_alloc_bytes);
            pl_json_kbool(j, "agree", pl_run_crosscheck_agrees(p));
            pl_json_end(j);
        }
        pl_json_break(j, 7);
        sites_json(j, p);
        pl_retention_json(j, p->retention);
        pl_json_break(j, 7);
        pl_end_json(j, p); /* how it ended (reports/ending.c) */
        pl_json_end(j);
    }
    pl_json_end(j);
    pl_json_end(j);
}

int pl_render_run_json(const pl_run_t *run, FILE *out, size_t max_points) {
    if (!run || !run->report || !run->ext || !out) return -EINVAL;
    const pl_report_t *r = run->report;
    pl_json_t j;
    pl_json_init(&j, out, 0);
    pl_json_object_block(&j);
    pl_run_view_t view; /* one view for both parts */
    if (pl_run_view_make(r, run->ext, &view)) return -ENOMEM;
    int rc = render_fields(r, &view, &j, max_points);
    if (!rc) run_json(r, run->ext, &view, &j);
    pl_run_view_free(&view);
    if (rc) return rc;
    pl_window_json(&j, run); /* "between": report --between's window, null without one */
    pl_json_end(&j);
    return pl_json_done(&j);
}
