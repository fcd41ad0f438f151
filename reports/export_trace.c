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
#include "format.h"

/* a JSON string from trace text: valid UTF-8 first (JSON readers reject anything else) */
static void jstr(FILE *o, const char *s) {
    char u[1024];
    pl_format_json_str(o, pl_export_utf8(s, u, sizeof u));
}

typedef struct out {
    FILE *o;
    bool first;     /* no event written yet */
    bool realtime;  /* every process has its CLOCK_REALTIME start: the run is on the wall clock */
} out_t;

/* microseconds of a time since the process's trace start, on the run's clock, with nanosecond digits */
static void ts(out_t *c, const pl_extract_proc_t *xp, int64_t rel_ns) {
    FILE *o = c->o;
    int64_t base = c->realtime ? xp->start_realtime_ns : xp->t0_ns;
    int64_t t = base + (rel_ns > 0 ? rel_ns : 0);
    fprintf(o, "%lld.%03lld", (long long)(t / 1000), (long long)(t % 1000 < 0 ? -(t % 1000) : t % 1000));
}

static void event_head(out_t *c, const char *ph, const pl_extract_proc_t *xp) {
    fprintf(c->o, "%s\n{\"ph\": \"%s\", \"pid\": %" PRIu32 ", \"tid\": %" PRIu32, c->first ? "" : ",", ph, xp->pid,
            xp->pid);
    c->first = false;
}

static void proc_meta(out_t *c, const pl_extract_proc_t *xp, size_t index) {
    FILE *o = c->o;
    const pl_report_process_t *p = xp->proc;
    char name[320], u[128];
    pl_export_utf8(p->name, u, sizeof u);
    if (p->rank >= 0) snprintf(name, sizeof name, "%s (pid %" PRIu32 ", rank %d)", u[0] ? u : "?", xp->pid, p->rank);
    else snprintf(name, sizeof name, "%s (pid %" PRIu32 ")", u[0] ? u : "?", xp->pid);
    event_head(c, "M", xp);
    fputs(", \"name\": \"process_name\", \"args\": {\"name\": ", o);
    jstr(o, name);
    fputs("}}", o);
    /* ranks in rank order, then the other processes in the order they were read */
    event_head(c, "M", xp);
    fprintf(o, ", \"name\": \"process_sort_index\", \"args\": {\"sort_index\": %lld}}",
            p->rank >= 0 ? (long long)p->rank : 100000LL + (long long)index);
    if (p->rank >= 0) {
        event_head(c, "M", xp);
        fprintf(o, ", \"name\": \"process_labels\", \"args\": {\"labels\": \"rank %d\"}}", p->rank);
    }
    event_head(c, "M", xp);
    fputs(", \"name\": \"thread_name\", \"args\": {\"name\": \"plateau steps and marks\"}}", o);
}

static void counters(out_t *c, const pl_extract_proc_t *xp) {
    FILE *o = c->o;
    const pl_report_process_t *p = xp->proc;
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        const pl_series_t *s = &p->metrics[m].series;
        if (!p->metrics[m].present) continue;
        for (size_t i = 0; i < s->n_points; i++) {
            const pl_point_t *pt = &s->points[i];
            int64_t t = pt->t_ns >= 0 ? pt->t_ns : s->by_time ? pt->step * s->bucket_ns : -1;
            if (t < 0 || !isfinite(pt->base)) continue;
            event_head(c, "C", xp);
            fprintf(o, ", \"name\": \"%s\", \"cat\": \"plateau.memory\", \"ts\": ", pl_metric_name((pl_metric_t)m));
            ts(c, xp, t);
            fprintf(o, ", \"args\": {\"%s\": ", pl_metric_is_bytes((pl_metric_t)m) ? "bytes" : "count");
            pl_format_json_num(o, pt->base);
            fputs("}}", o);
        }
    }
}

/* "step N" at each step's first sample (over every metric): not drawn for a process reported by time buckets */
static void steps(out_t *c, const pl_extract_proc_t *xp) {
    FILE *o = c->o;
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
        event_head(c, "i", xp);
        fprintf(o, ", \"name\": \"step %lld\", \"cat\": \"plateau.step\", \"s\": \"t\", \"ts\": ", (long long)key);
        ts(c, xp, t);
        fprintf(o, ", \"args\": {\"step\": %lld}}", (long long)key);
    }
}

static void marks(out_t *c, const pl_extract_proc_t *xp) {
    FILE *o = c->o;
    const pl_report_process_t *p = xp->proc;
    for (size_t i = 0; i < p->n_marks; i++) {
        const pl_report_mark_t *k = &p->marks[i];
        event_head(c, "i", xp);
        fputs(", \"name\": ", o);
        jstr(o, k->label);
        fputs(", \"cat\": \"plateau.mark\", \"s\": \"t\", \"ts\": ", o);
        ts(c, xp, k->t_ns);
        fprintf(o, ", \"args\": {\"step\": %lld}}", (long long)k->step);
    }
}

int pl_export_trace_events(const pl_report_t *r, const pl_extract_t *x, FILE *o) {
    if (!r || !x || !o) return -EINVAL;
    bool realtime = x->n_procs > 0;
    for (size_t i = 0; i < x->n_procs; i++) realtime &= x->procs[i].start_realtime_ns > 0;
    fputs("{\"traceEvents\": [", o);
    out_t c = {.o = o, .first = true, .realtime = realtime};
    for (size_t i = 0; i < x->n_procs; i++) {
        const pl_extract_proc_t *xp = &x->procs[i];
        if (!xp->proc) continue;
        proc_meta(&c, xp, i);
        counters(&c, xp);
        steps(&c, xp);
        marks(&c, xp);
        if (ferror(o)) return -EIO;
    }
    fputs("\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"producer\": ", o);
    pl_format_json_str(o, "plateau " PL_VERSION);
    fputs(", \"source\": ", o);
    jstr(o, r->source);
    fprintf(o, ", \"clock\": \"%s\", \"verdict\": ",
            realtime ? "realtime" : "monotonic (some traces lack a start time)");
    jstr(o, r->verdict.line);
    fputs("}}\n", o);
    return ferror(o) ? -EIO : 0;
}
