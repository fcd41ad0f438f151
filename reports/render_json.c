/* reports/render_json: the versioned JSON report (schema in docs/report-schema.md), written through the common/json
 * emitter (numbers %.10g, non-finite ones null, strings escaped per RFC 8259). Key order and layout are fixed
 * (golden tests). pl_render_json_fields writes the top-level fields so that pl_extract_render_json can add "run" to
 * the same document in one pass. */
#include "render.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "config.h"
#include "export.h"
#include "json.h"

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
    pl_json_knum(j, "per_step", v->kind == PL_PV_LEAK || v->kind == PL_PV_SLOW_GROWTH ? v->per_step : NAN);
    pl_json_knum(j, "oom_seconds", v->has_oom ? v->oom_seconds : NAN);
    pl_json_key(j, "more_steps");
    if (v->kind == PL_PV_UNDECIDED) pl_json_int(j, v->more_steps);
    else pl_json_null(j);
    pl_json_kint(j, "warmup_steps", v->warmup_steps);
    pl_json_end(j);
}

static void run_verdict_json(pl_json_t *j, const pl_report_t *r) {
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
    pl_json_kuint(j, "workers_quiet", v->n_workers_quiet);
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

int pl_render_json_fields(const pl_report_t *r, pl_json_t *j, size_t max_points) {
    if (max_points == 0) max_points = 256;
    if (max_points < 2) max_points = 2;
    const pl_verdict_params_t *p = &r->params;
    pl_json_kstr(j, "schema", "plateau.report");
    pl_json_kint(j, "schema_version", PL_REPORT_SCHEMA_VERSION);
    pl_json_kstr(j, "plateau_version", PL_VERSION);
    pl_json_kstr(j, "source", r->source);
    pl_json_key(j, "verdict");
    run_verdict_json(j, r);
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
    int rc = pl_render_json_fields(r, &j, max_points);
    if (rc) return rc;
    pl_json_end(&j);
    return pl_json_done(&j);
}
