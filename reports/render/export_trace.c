/* reports/export_trace: the run as Chrome / Perfetto trace-event JSON (export.h), so its memory opens on a
 * timeline (ui.perfetto.dev, chrome://tracing) beside a PyTorch profiler trace of the same run.
 *
 * Per traced process: metadata naming the process (with its rank) and its one thread track, a counter ("C") event
 * per metric point, an instant ("i") event at each step and at each plateau_mark(). Points are the report's series
 * (each step's baseline at the step's first sample time). Times are microseconds on CLOCK_REALTIME when the trace
 * recorded its start on it (PyTorch's profiler writes wall-clock microseconds too), else CLOCK_MONOTONIC. Event
 * format: the Trace Event Format document (Google, "JSON Object Format"); only documented fields are written.
 */
#include "export.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "config.h"
#include "json.h"

/* a JSON string from trace text: valid UTF-8 first (JSON readers reject anything else) */
static void jstr(pl_json_t *j, const char *key, const char *s) {
    char u[1024];
    pl_json_kstr(j, key, pl_export_utf8(s, u, sizeof u));
}

typedef struct out {
    pl_json_t *j;
    bool realtime;  /* every process has its CLOCK_REALTIME start: the run is on the wall clock */
} out_t;

/* "ts": microseconds of a time since the process's trace start, on the run's clock, with nanosecond digits */
static void ts(out_t *c, const pl_extract_proc_t *xp, int64_t rel_ns) {
    int64_t base = c->realtime ? xp->start_realtime_ns : xp->t0_ns;
    int64_t t = base + (rel_ns > 0 ? rel_ns : 0);
    pl_json_key(c->j, "ts");
    pl_json_numf(c->j, "%lld.%03lld", (long long)(t / 1000), (long long)(t % 1000 < 0 ? -(t % 1000) : t % 1000));
}

/* opens an event on a line of its own: {"ph": PH, "pid": P, "tid": P, then the caller's fields */
static void event_head(out_t *c, const char *ph, const pl_extract_proc_t *xp, const char *name) {
    pl_json_t *j = c->j;
    pl_json_break(j, 0);
    pl_json_object(j);
    pl_json_kstr(j, "ph", ph);
    pl_json_kuint(j, "pid", xp->pid);
    pl_json_kuint(j, "tid", xp->pid);
    if (name) pl_json_kstr(j, "name", name);
}

/* a metadata event: "args": {KEY: VALUE} with a string value, or an integer one when s is NULL */
static void meta(out_t *c, const pl_extract_proc_t *xp, const char *name, const char *key, const char *s,
                 long long v) {
    pl_json_t *j = c->j;
    event_head(c, "M", xp, name);
    pl_json_key(j, "args");
    pl_json_object(j);
    if (s) jstr(j, key, s);
    else pl_json_kint(j, key, v);
    pl_json_end(j);
    pl_json_end(j);
}

static void proc_meta(out_t *c, const pl_extract_proc_t *xp, size_t index) {
    const pl_report_process_t *p = xp->proc;
    char name[320], u[128];
    pl_export_utf8(p->name, u, sizeof u);
    if (p->rank >= 0) snprintf(name, sizeof name, "%s (pid %" PRIu32 ", rank %d)", u[0] ? u : "?", xp->pid, p->rank);
    else snprintf(name, sizeof name, "%s (pid %" PRIu32 ")", u[0] ? u : "?", xp->pid);
    meta(c, xp, "process_name", "name", name, 0);
    /* ranks in rank order, then the other processes in the order they were read */
    long long order = p->rank >= 0 ? (long long)p->rank : 100000LL + (long long)index;
    meta(c, xp, "process_sort_index", "sort_index", NULL, order);
    if (p->rank >= 0) {
        char label[32];
        snprintf(label, sizeof label, "rank %d", p->rank);
        meta(c, xp, "process_labels", "labels", label, 0);
    }
    meta(c, xp, "thread_name", "name", "plateau steps and marks", 0);
}

/* an instant event on the process's thread track: NAME in CAT at t, "args": {"step": STEP} */
static void instant(out_t *c, const pl_extract_proc_t *xp, const char *name, const char *cat, int64_t t,
                    long long step) {
    pl_json_t *j = c->j;
    event_head(c, "i", xp, NULL);
    jstr(j, "name", name);
    pl_json_kstr(j, "cat", cat);
    pl_json_kstr(j, "s", "t");
    ts(c, xp, t);
    pl_json_key(j, "args");
    pl_json_object(j);
    pl_json_kint(j, "step", step);
    pl_json_end(j);
    pl_json_end(j);
}

static void counters(out_t *c, const pl_extract_proc_t *xp) {
    pl_json_t *j = c->j;
    const pl_report_process_t *p = xp->proc;
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        const pl_series_t *s = &p->metrics[m].series;
        if (!p->metrics[m].present) continue;
        for (size_t i = 0; i < s->n_points; i++) {
            const pl_point_t *pt = &s->points[i];
            int64_t t = pt->t_ns >= 0 ? pt->t_ns : s->by_time ? pt->step * s->bucket_ns : -1;
            if (t < 0 || !isfinite(pt->base)) continue;
            event_head(c, "C", xp, pl_metric_name((pl_metric_t)m));
            pl_json_kstr(j, "cat", "plateau.memory");
            ts(c, xp, t);
            pl_json_key(j, "args");
            pl_json_object(j);
            pl_json_knum(j, pl_metric_is_bytes((pl_metric_t)m) ? "bytes" : "count", pt->base);
            pl_json_end(j);
            pl_json_end(j);
        }
    }
}

/* "step N" at each step's first sample (over every metric): not drawn for a process reported by time buckets */
static void steps(out_t *c, const pl_extract_proc_t *xp) {
    const pl_report_process_t *p = xp->proc;
    size_t at[PL_METRIC__COUNT] = {0};
    for (;;) {
        int64_t key = INT64_MAX, t = -1;
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            const pl_series_t *s = &p->metrics[m].series;
            if (p->metrics[m].present && !s->by_time && at[m] < s->n_points && s->points[at[m]].step < key)
                key = s->points[at[m]].step;
        }
        if (key == INT64_MAX) return;
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            const pl_series_t *s = &p->metrics[m].series;
            if (!p->metrics[m].present || s->by_time || at[m] >= s->n_points || s->points[at[m]].step != key)
                continue;
            if (s->points[at[m]].t_ns >= 0 && (t < 0 || s->points[at[m]].t_ns < t)) t = s->points[at[m]].t_ns;
            at[m]++;
        }
        if (t < 0) continue;
        char name[32];
        snprintf(name, sizeof name, "step %lld", (long long)key);
        instant(c, xp, name, "plateau.step", t, key);
    }
}

static void marks(out_t *c, const pl_extract_proc_t *xp) {
    const pl_report_process_t *p = xp->proc;
    for (size_t i = 0; i < p->n_marks; i++) {
        const pl_report_mark_t *k = &p->marks[i];
        instant(c, xp, k->label, "plateau.mark", k->t_ns, k->step);
    }
}

int pl_export_trace_events(const pl_run_t *run, FILE *o) {
    if (!run || !run->report || !run->ext || !o) return -EINVAL;
    const pl_report_t *r = run->report;
    const pl_extract_t *x = run->ext;
    bool realtime = x->n_procs > 0;
    for (size_t i = 0; i < x->n_procs; i++) realtime &= x->procs[i].start_realtime_ns > 0;
    pl_json_t j;
    pl_json_init(&j, o, 0);
    pl_json_object(&j);
    pl_json_key(&j, "traceEvents");
    pl_json_array(&j);
    out_t c = {.j = &j, .realtime = realtime};
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *xp = &x->procs[i];
        if (!xp->proc) continue;
        proc_meta(&c, xp, i);
        counters(&c, xp);
        steps(&c, xp);
        marks(&c, xp);
        if (ferror(o)) return -EIO;
    }
    pl_json_break(&j, 0);
    pl_json_end(&j);
    pl_json_break(&j, 0);
    pl_json_kstr(&j, "displayTimeUnit", "ms");
    pl_json_break(&j, 0);
    pl_json_key(&j, "otherData");
    pl_json_object(&j);
    pl_json_kstr(&j, "producer", "plateau " PL_VERSION);
    jstr(&j, "source", r->source);
    pl_json_kstr(&j, "clock", realtime ? "realtime" : "monotonic (some traces lack a start time)");
    jstr(&j, "verdict", r->verdict.line);
    pl_json_end(&j);
    pl_json_end(&j);
    return pl_json_done(&j);
}
