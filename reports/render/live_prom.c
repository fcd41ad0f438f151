/* reports/live_prom: the live verdict in the Prometheus text exposition format (live_prom.h). Each family is written
 * once with its HELP and TYPE lines and then every process's samples, as the format wants (a family's samples
 * together). Which processes: those with steps (a trainer, each rank of a job), else the shown one; helpers and
 * workers without steps are the report's business. Names and labels: docs/live.md, "Prometheus". */
#include "live_prom.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"

/* Label values: valid UTF-8 (a process name is the program's argv, any bytes), then the format's three escapes. */
static void label(FILE *out, const char *name, const char *value) {
    char u[512];
    pl_export_utf8(value ? value : "", u, sizeof u);
    fprintf(out, "%s=\"", name);
    for (const char *c = u; *c; c++) {
        if (*c == '\\') fputs("\\\\", out);
        else if (*c == '"') fputs("\\\"", out);
        else if (*c == '\n') fputs("\\n", out);
        else fputc(*c, out);
    }
    fputc('"', out);
}

static void proc_labels(FILE *out, const char *run, const pl_live_status_t *s) {
    char n[16];
    label(out, "run", run);
    snprintf(n, sizeof n, "%u", s->pid);
    fputc(',', out);
    label(out, "pid", n);
    if (s->rank >= 0) snprintf(n, sizeof n, "%d", s->rank);
    else n[0] = 0; /* an empty value is the same series as no label: a process without a rank */
    fputc(',', out);
    label(out, "rank", n);
    fputc(',', out);
    label(out, "process", s->name);
    fputc(',', out);
    label(out, "node", s->node);
}

/* Exposition values: Go's float syntax, Inf and NaN spelled as the format does. */
static void value(FILE *out, double v) {
    if (isnan(v)) fputs(" NaN\n", out);
    else if (isinf(v)) fputs(v > 0 ? " +Inf\n" : " -Inf\n", out);
    else {
        char b[40];
        snprintf(b, sizeof b, "%.15g", v); /* shortest that reads back exactly, as far as 15 digits do */
        if (strtod(b, NULL) != v) snprintf(b, sizeof b, "%.17g", v);
        fprintf(out, " %s\n", b);
    }
}

static const char *const metric_names[PL_LIVE__COUNT] = {"heap", "rss", "dev"};

/* the label of a state: Prometheus label values are free text, but alert rules are easier on identifiers */
static const char *state_label(pl_live_state_t s) {
    switch (s) {
    case PL_LIVE_WARMING: return "warming_up";
    case PL_LIVE_FLAT: return "flat";
    case PL_LIVE_UNDECIDED: return "undecided";
    case PL_LIVE_SUSPECTED: return "leak_suspected";
    case PL_LIVE_SLOW: return "slow_growth";
    case PL_LIVE_LEAK: return "leak";
    case PL_LIVE_NONE:
    default: return "no_data";
    }
}

static const pl_live_state_t all_states[] = {PL_LIVE_NONE,      PL_LIVE_WARMING, PL_LIVE_FLAT, PL_LIVE_UNDECIDED,
                                             PL_LIVE_SUSPECTED, PL_LIVE_SLOW,    PL_LIVE_LEAK};

typedef enum family {
    F_VERDICT, F_STEP, F_STEPS_PER_S, F_MEMORY, F_GROWTH_STEP, F_GROWTH_S, F_OOM_S, F_OOM_STEP, F_MORE_STEPS, F__COUNT
} family_t;

static const struct {
    const char *name, *help;
} families[F__COUNT] = {
    [F_VERDICT] = {"plateau_verdict", "The live verdict on the process's own memory: 1 for its state "
                                      "(no_data, warming_up, flat, undecided, leak_suspected, slow_growth, leak), "
                                      "0 for the others"},
    [F_STEP] = {"plateau_step", "The last training step the process recorded"},
    [F_STEPS_PER_S] = {"plateau_steps_per_second", "The process's step rate over its last 16 steps"},
    [F_MEMORY] = {"plateau_memory_bytes", "The last per-step baseline (minimum) of a metric: heap (live heap), "
                                          "rss, dev (device allocated)"},
    [F_GROWTH_STEP] = {"plateau_growth_bytes_per_step", "The judged tail's slope (Theil-Sen) of a metric, bytes per "
                                                        "step (per second for a process without steps)"},
    [F_GROWTH_S] = {"plateau_growth_bytes_per_second", "The judged tail's slope of a metric, bytes per second"},
    [F_OOM_S] = {"plateau_oom_seconds", "Projected seconds until a growing metric reaches its limit (leak and slow "
                                        "growth, when step times are known)"},
    [F_OOM_STEP] = {"plateau_oom_step", "Projected step at which a growing metric reaches its limit"},
    [F_MORE_STEPS] = {"plateau_more_steps", "Steps (seconds without steps) to run before a metric's verdict is "
                                            "expected, while it is warming up or undecided"},
};

static bool growing(const pl_live_mstatus_t *ms) {
    return ms->state == PL_LIVE_LEAK || ms->state == PL_LIVE_SLOW || ms->state == PL_LIVE_SUSPECTED;
}

/* One family's samples for one process. */
static void samples(FILE *out, family_t f, const char *run, const pl_live_status_t *s) {
    const char *name = families[f].name;
    switch (f) {
    case F_VERDICT:
        for (size_t k = 0; k < sizeof all_states / sizeof all_states[0]; k++) {
            fprintf(out, "%s{", name);
            proc_labels(out, run, s);
            fputc(',', out);
            label(out, "state", state_label(all_states[k]));
            fputc('}', out);
            value(out, s->state == all_states[k] ? 1 : 0);
        }
        return;
    case F_STEP:
    case F_STEPS_PER_S:
        if (s->by_time || (f == F_STEPS_PER_S && !(s->steps_per_s > 0))) return;
        fprintf(out, "%s{", name);
        proc_labels(out, run, s);
        fputc('}', out);
        value(out, f == F_STEP ? (double)s->step : s->steps_per_s);
        return;
    default: break;
    }
    for (int m = 0; m < PL_LIVE__COUNT; m++) {
        const pl_live_mstatus_t *ms = &s->m[m];
        if (!ms->present) continue;
        double v;
        switch (f) {
        case F_MEMORY: v = ms->last; break;
        case F_GROWTH_STEP:
            if (ms->state == PL_LIVE_NONE || ms->state == PL_LIVE_WARMING) continue; /* no tail judged yet */
            v = ms->per_step;
            break;
        case F_GROWTH_S:
            if (ms->state == PL_LIVE_NONE || ms->state == PL_LIVE_WARMING) continue;
            if (s->by_time) v = ms->per_step;
            else if (s->steps_per_s > 0) v = ms->per_step * s->steps_per_s;
            else continue;
            break;
        case F_OOM_S:
            if (!growing(ms) || !ms->has_oom || !isfinite(ms->oom_seconds)) continue;
            v = ms->oom_seconds;
            break;
        case F_OOM_STEP:
            if (!growing(ms) || !ms->has_oom || s->by_time) continue;
            v = (double)ms->oom_step;
            break;
        case F_MORE_STEPS:
            if ((ms->state != PL_LIVE_WARMING && ms->state != PL_LIVE_UNDECIDED) || ms->more_steps <= 0) continue;
            v = (double)ms->more_steps;
            break;
        default: return;
        }
        fprintf(out, "%s{", name);
        proc_labels(out, run, s);
        fputc(',', out);
        label(out, "metric", metric_names[m]);
        fputc('}', out);
        value(out, v);
    }
}

int pl_live_prom_write(pl_live_t *l, const char *run_label, double now_s, FILE *out) {
    /* the processes to say: those with steps, else the shown one */
    size_t n = pl_live_n_procs(l), n_st = 0;
    pl_live_status_t *st = calloc(n + 1, sizeof *st);
    if (!st) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        int rc = pl_live_status_of(l, i, &st[n_st]);
        if (rc == -ENOMEM) {
            free(st);
            return rc;
        }
        if (!rc && !st[n_st].by_time) n_st++;
    }
    pl_live_status_t run;
    pl_live_status(l, &run);
    if (!n_st && run.have_proc) st[n_st++] = run;
    fprintf(out, "# HELP plateau_run_ended 1 once the run has ended (plateau run wrote its status, or every trace "
                 "closed), else 0\n# TYPE plateau_run_ended gauge\nplateau_run_ended{");
    label(out, "run", run_label);
    fputc('}', out);
    value(out, run.ended ? 1 : 0);
    fprintf(out, "# HELP plateau_processes_running Traced processes of the run still running\n"
                 "# TYPE plateau_processes_running gauge\nplateau_processes_running{");
    label(out, "run", run_label);
    fputc('}', out);
    value(out, (double)run.n_alive);
    fprintf(out, "# HELP plateau_last_update_timestamp_seconds When plateau watch wrote this file (Unix time)\n"
                 "# TYPE plateau_last_update_timestamp_seconds gauge\nplateau_last_update_timestamp_seconds{");
    label(out, "run", run_label);
    fputc('}', out);
    value(out, now_s);
    for (int f = 0; f < F__COUNT; f++) {
        fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n", families[f].name, families[f].help, families[f].name);
        for (size_t i = 0; i < n_st; i++) samples(out, (family_t)f, run_label, &st[i]);
    }
    free(st);
    return ferror(out) ? -EIO : 0;
}
