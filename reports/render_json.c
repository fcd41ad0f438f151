/* reports/render_json: the versioned JSON report (schema in docs/report-schema.md). Numbers are printed with %.10g;
 * non-finite numbers become null; strings are escaped per RFC 8259. Key order is fixed (golden tests). */
#include "render.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "config.h"
#include "export.h"
#include "format.h"

static void jkey(FILE *o, int indent, const char *k) {
    fprintf(o, "%*s", indent, "");
    pl_format_json_str(o, k);
    fputs(": ", o);
}

static void verdict_json(FILE *o, const pl_report_metric_t *m, int in) {
    const pl_verdict_t *v = &m->verdict;
    jkey(o, in, "verdict");
    pl_format_json_str(o, pl_verdict_name(v->kind));
    fputs(",\n", o);
    jkey(o, in, "warmup");
    if (v->has_warmup) {
        fprintf(o, "{\"end_step\": %lld, \"steps\": %lld, \"size\": ", (long long)v->warmup_end_step,
                (long long)v->warmup_steps);
        pl_format_json_num(o, v->warmup_size);
        fputs("},\n", o);
    } else {
        fputs("null,\n", o);
    }
    jkey(o, in, "tail");
    fprintf(o, "{\"start_step\": %lld, \"steps\": %lld, \"points\": %zu, \"level\": ", (long long)v->tail_start_step,
            (long long)v->tail_steps, v->tail_points);
    pl_format_json_num(o, v->level);
    fputs(", \"slope_per_step\": ", o);
    pl_format_json_num(o, v->slope_per_step);
    fputs(", \"slope_ci\": [", o);
    pl_format_json_num(o, v->slope_lo);
    fputs(", ", o);
    pl_format_json_num(o, v->slope_hi);
    fputs("], \"p_value\": ", o);
    pl_format_json_num(o, v->p_up);
    fputs(", \"variance_factor\": ", o);
    pl_format_json_num(o, v->var_factor);
    fputs(", \"noise\": ", o);
    pl_format_json_num(o, v->noise);
    fputs(", \"threshold_per_step\": ", o);
    pl_format_json_num(o, v->threshold_per_step);
    fputs("},\n", o);
    jkey(o, in, "leak");
    if (v->kind == PL_VERDICT_LEAK) {
        fputs("{\"per_step\": ", o);
        pl_format_json_num(o, v->slope_per_step);
        fputs(", \"per_hour\": ", o);
        pl_format_json_num(o, v->per_hour);
        fputs(", \"oom\": ", o);
        if (v->has_oom) {
            fputs("{\"limit\": ", o);
            pl_format_json_num(o, v->limit);
            fputs(", \"limit_source\": ", o);
            if (m->limit_source) pl_format_json_str(o, m->limit_source);
            else fputs("null", o);
            fputs(", \"spike\": ", o);
            pl_format_json_num(o, v->spike);
            fprintf(o, ", \"step\": %lld, \"seconds\": ", (long long)v->oom_step);
            pl_format_json_num(o, v->oom_seconds);
            fputs("}", o);
        } else {
            fputs("null", o);
        }
        fputs("},\n", o);
    } else {
        fputs("null,\n", o);
    }
    jkey(o, in, "inconclusive");
    if (v->kind == PL_VERDICT_INCONCLUSIVE) {
        fputs("{\"reason\": ", o);
        pl_format_json_str(o, pl_verdict_undecided_name(v->undecided));
        fprintf(o, ", \"more_steps\": %lld},\n", (long long)v->more_steps);
    } else {
        fputs("null,\n", o);
    }
}

static int metric_json(FILE *o, pl_metric_t k, const pl_report_metric_t *m, size_t max_points, bool last) {
    const pl_series_t *s = &m->series;
    const pl_verdict_t *v = &m->verdict;
    int in = 8;
    fprintf(o, "      {\n");
    jkey(o, in, "name");
    pl_format_json_str(o, pl_metric_name(k));
    fputs(",\n", o);
    jkey(o, in, "unit");
    pl_format_json_str(o, pl_metric_is_bytes(k) ? "bytes" : "count");
    fputs(",\n", o);
    jkey(o, in, "by");
    pl_format_json_str(o, s->by_time ? "time" : "step");
    fputs(",\n", o);
    jkey(o, in, "bucket_seconds");
    if (s->by_time) pl_format_json_num(o, (double)s->bucket_ns / 1e9);
    else fputs("null", o);
    fputs(",\n", o);
    jkey(o, in, "step_seconds");
    if (s->step_ns > 0) pl_format_json_num(o, s->step_ns / 1e9);
    else fputs("null", o);
    fprintf(o, ",\n");
    jkey(o, in, "first_step");
    fprintf(o, "%lld,\n", (long long)v->first_step);
    jkey(o, in, "last_step");
    fprintf(o, "%lld,\n", (long long)v->last_step);
    jkey(o, in, "last_value");
    pl_format_json_num(o, v->last_value);
    fputs(",\n", o);
    jkey(o, in, "peak");
    fputs("{\"value\": ", o);
    pl_format_json_num(o, v->peak);
    fprintf(o, ", \"step\": %lld},\n", (long long)v->peak_step);
    verdict_json(o, m, in);
    pl_series_t c;
    if (pl_series_compact(s, max_points, &c)) return -ENOMEM;
    jkey(o, in, "series");
    fputs("[", o);
    for (size_t i = 0; i < c.n_points; i++) {
        fprintf(o, "%s[%lld, ", i ? ", " : "", (long long)c.points[i].step);
        pl_format_json_num(o, c.points[i].base);
        fputs(", ", o);
        pl_format_json_num(o, c.points[i].peak);
        fputs("]", o);
    }
    fputs("]\n", o);
    pl_series_free(&c);
    fprintf(o, "      }%s\n", last ? "" : ",");
    return 0;
}

static void proc_verdict_json(FILE *o, const pl_proc_verdict_t *v) {
    fputs("{\"kind\": ", o);
    pl_format_json_str(o, pl_pverdict_name(v->kind));
    fputs(", \"metric\": ", o);
    if (v->metric >= 0) pl_format_json_str(o, pl_metric_name((pl_metric_t)v->metric));
    else fputs("null", o);
    fputs(", \"by\": ", o);
    pl_format_json_str(o, v->by_time ? "time" : "step");
    fputs(", \"per_step\": ", o);
    pl_format_json_num(o, v->kind == PL_PV_LEAK || v->kind == PL_PV_SLOW_GROWTH ? v->per_step : NAN);
    fputs(", \"oom_seconds\": ", o);
    pl_format_json_num(o, v->has_oom ? v->oom_seconds : NAN);
    fputs(", \"more_steps\": ", o);
    if (v->kind == PL_PV_UNDECIDED) fprintf(o, "%lld", (long long)v->more_steps);
    else fputs("null", o);
    fprintf(o, ", \"warmup_steps\": %lld}", (long long)v->warmup_steps);
}

static void run_verdict_json(FILE *o, const pl_report_t *r) {
    const pl_run_verdict_t *v = &r->verdict;
    fputs("{\"kind\": ", o);
    pl_format_json_str(o, pl_pverdict_name(v->kind));
    fputs(", \"line\": ", o);
    pl_format_json_str(o, v->line);
    fputs(", \"pid\": ", o);
    if (v->proc >= 0) fprintf(o, "%lld", (long long)r->procs[v->proc]->pid);
    else fputs("null", o);
    fprintf(o, ", \"leaking\": %zu, \"slow_growth\": %zu, \"workers\": %zu, \"workers_quiet\": %zu,\n    \"practical\": "
            "{\"slow_hours\": ", v->n_leaking, v->n_slow, v->n_workers, v->n_workers_quiet);
    pl_format_json_num(o, r->practical.slow_hours);
    fprintf(o, ", \"horizon_steps\": %lld}}", (long long)r->practical.horizon_steps);
}

/* ",\n      \"marks\": [...]" for a process with plateau_mark() points; nothing without (older reports unchanged). */
static void marks_json(FILE *o, const pl_report_process_t *pr) {
    if (!pr->n_marks && !pr->n_marks_dropped) return;
    fputs(",\n      \"marks\": [", o);
    for (size_t k = 0; k < pr->n_marks; k++) {
        const pl_report_mark_t *m = &pr->marks[k];
        fprintf(o, "%s\n        {\"step\": %lld, \"t_seconds\": ", k ? "," : "", (long long)m->step);
        pl_format_json_num(o, (double)m->t_ns / 1e9);
        fputs(", \"label\": ", o);
        char u[3 * sizeof m->label];
        pl_format_json_str(o, pl_export_utf8(m->label, u, sizeof u)); /* a label cut inside a character */
        fputs("}", o);
    }
    fprintf(o, "%s]", pr->n_marks ? "\n      " : "");
    if (pr->n_marks_dropped) fprintf(o, ",\n      \"marks_dropped\": %llu", (unsigned long long)pr->n_marks_dropped);
}

int pl_render_json(const pl_report_t *r, FILE *o, size_t max_points) {
    if (!r || !o) return -EINVAL;
    if (max_points == 0) max_points = 256;
    if (max_points < 2) max_points = 2;
    const pl_verdict_params_t *p = &r->params;
    fputs("{\n", o);
    fprintf(o, "  \"schema\": \"plateau.report\",\n  \"schema_version\": %d,\n", PL_REPORT_SCHEMA_VERSION);
    fputs("  \"plateau_version\": ", o);
    pl_format_json_str(o, PL_VERSION);
    fputs(",\n  \"source\": ", o);
    pl_format_json_str(o, r->source);
    fputs(",\n  \"verdict\": ", o);
    run_verdict_json(o, r);
    fprintf(o, ",\n  \"cut_short\": %s,\n  \"cut_reason\": ", r->cut_short ? "true" : "false");
    if (r->cut_short) pl_format_json_str(o, r->cut_reason);
    else fputs("null", o);
    fputs(",\n  \"limits\": {\"device_bytes\": ", o);
    pl_format_json_num(o, r->limits.device_bytes > 0 ? r->limits.device_bytes : NAN);
    fputs(", \"cgroup_bytes\": ", o);
    pl_format_json_num(o, r->limits.cgroup_bytes > 0 ? r->limits.cgroup_bytes : NAN);
    fputs(", \"host_bytes\": ", o);
    pl_format_json_num(o, r->limits.host_bytes > 0 ? r->limits.host_bytes : NAN);
    fputs("},\n  \"parameters\": {\"alpha\": ", o);
    pl_format_json_num(o, p->alpha);
    fputs(", \"ci_level\": ", o);
    pl_format_json_num(o, p->ci_level);
    fputs(", \"flat_rel_per_step\": ", o);
    pl_format_json_num(o, p->flat_rel_per_step);
    fprintf(o, ", \"min_tail_steps\": %lld, \"min_tail_points\": %zu, \"warmup_allow_steps\": %lld},\n",
            (long long)p->min_tail_steps, p->min_tail_points, (long long)p->warmup_allow_steps);
    fputs("  \"processes\": [\n", o);
    for (size_t i = 0; i < r->n_procs; i++) {
        const pl_report_process_t *pr = r->procs[i];
        fprintf(o, "    {\n      \"pid\": %lld,\n      \"rank\": ", (long long)pr->pid);
        if (pr->rank >= 0) fprintf(o, "%d", pr->rank);
        else fputs("null", o);
        fputs(",\n      \"name\": ", o);
        pl_format_json_str(o, pr->name);
        fputs(",\n      \"role\": ", o);
        pl_format_json_str(o, pr->n_pool ? "pool" : pr->n_gen ? "generations" : pr->role == PL_ROLE_WORKER ? "worker"
                                                                                                    : "main");
        if (pr->n_pool) fprintf(o, ",\n      \"pool_workers\": %zu", pr->n_pool);
        if (pr->n_gen)
            fprintf(o, ",\n      \"generations\": %zu,\n      \"generation_workers\": %zu,\n      \"generation_every_steps\": %lld",
                    pr->n_gen, pr->n_gen_workers, (long long)pr->gen_every_steps);
        fputs(",\n      \"verdict\": ", o);
        proc_verdict_json(o, &pr->verdict);
        fputs(",\n      \"metrics\": [\n", o);
        int lastm = -1;
        for (int m = 0; m < PL_METRIC__COUNT; m++)
            if (pr->metrics[m].present) lastm = m;
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            if (!pr->metrics[m].present) continue;
            int rc = metric_json(o, (pl_metric_t)m, &pr->metrics[m], max_points, m == lastm);
            if (rc) return rc;
        }
        fputs("      ],\n      \"diagnosis\": [", o);
        for (size_t k = 0; k < pr->n_findings; k++) {
            fprintf(o, "%s\n        {\"code\": ", k ? "," : "");
            pl_format_json_str(o, pl_dx_name(pr->findings[k].code));
            fputs(", \"text\": ", o);
            pl_format_json_str(o, pr->findings[k].text);
            fputs("}", o);
        }
        fprintf(o, "%s]", pr->n_findings ? "\n      " : "");
        marks_json(o, pr);
        fprintf(o, "\n    }%s\n", i + 1 < r->n_procs ? "," : "");
    }
    fputs("  ]\n}\n", o);
    return ferror(o) ? -EIO : 0;
}
