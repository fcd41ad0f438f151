/* reports/export_csv: the per-step series of every metric as CSV (export.h), one row per process and step.
 *
 * Rows come from the report's own series (the same points the verdicts and the JSON use, before the JSON's
 * compaction to max_points), so a notebook reading this file sees what the report judged. A process's rows are the
 * union of its metrics' steps and its marks' steps, in increasing order; a metric without a point there leaves an
 * empty cell (never a 0 that would read as a value).
 */
#include "export.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Text from a trace (argv[0], a mark's label) is the program's to choose: made valid UTF-8 (U+FFFD for a bad byte),
 * then every control character that could drive a terminal (C0 but tab and line feed, DEL, C1) written as \xNN, so
 * that `cat run.csv` shows a name like ESC ] 0 ; X BEL as \x1b]0;X\x07. Tabs and line breaks are data: quoted. */
static void csv_text(const char *s, char *out, size_t size) {
    char u[512];
    pl_export_utf8(s, u, sizeof u);
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)u; *p && o + 5 < size; p++) {
        bool c1 = p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
        if ((*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7f || c1) {
            unsigned v = c1 ? *++p : *p;
            o += (size_t)snprintf(out + o, size - o, "\\x%02x", v);
        } else {
            out[o++] = (char)*p;
        }
    }
    out[o] = 0;
}

/* one CSV field, quoted when it holds a separator, a quote, a line break or edge spaces (RFC 4180) */
static void csv_str(FILE *o, const char *s) {
    char u[1024];
    csv_text(s, u, sizeof u);
    size_t n = strlen(u);
    bool quote = n && (u[0] == ' ' || u[n - 1] == ' ' || strpbrk(u, ",\"\r\n"));
    if (!quote) {
        fputs(u, o);
        return;
    }
    fputc('"', o);
    for (const char *p = u; *p; p++) {
        if (*p == '"') fputc('"', o);
        fputc(*p, o);
    }
    fputc('"', o);
}

static void csv_num(FILE *o, double v) {
    if (isfinite(v)) fprintf(o, "%.10g", v);
}

static bool proc_by_time(const pl_report_process_t *p) {
    for (int m = 0; m < PL_METRIC__COUNT; m++)
        if (p->metrics[m].present && p->metrics[m].series.n_points) return p->metrics[m].series.by_time;
    return false;
}

/* a mark's row key: its step, or by time its bucket of the first present series */
static int64_t mark_key(const pl_report_process_t *p, const pl_report_mark_t *k, bool by_time) {
    if (!by_time) return k->step;
    for (int m = 0; m < PL_METRIC__COUNT; m++) {
        const pl_series_t *s = &p->metrics[m].series;
        if (p->metrics[m].present && s->by_time && s->bucket_ns > 0) return k->t_ns / s->bucket_ns;
    }
    return 0;
}

/* the marks of a row, joined by "; " into buf */
static void marks_cell(const pl_report_process_t *p, int64_t key, bool by_time, char *buf, size_t size) {
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < p->n_marks && o + 1 < size; i++) {
        if (mark_key(p, &p->marks[i], by_time) != key) continue;
        int w = snprintf(buf + o, size - o, "%s%s", o ? "; " : "", p->marks[i].label);
        if (w < 0) break;
        o += (size_t)w < size - o ? (size_t)w : size - o - 1;
    }
}

static int proc_rows(FILE *o, const pl_report_process_t *p, const pl_extract_proc_t *xp, const bool *cols) {
    size_t at[PL_METRIC__COUNT] = {0};
    bool by_time = proc_by_time(p);
    size_t next_mark = 0; /* marks are in trace order, so their keys never decrease */
    char name[256], cell[4096];
    pl_export_utf8(p->name, name, sizeof name);
    for (;;) {
        int64_t key = INT64_MAX;
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            const pl_series_t *s = &p->metrics[m].series;
            if (p->metrics[m].present && at[m] < s->n_points && s->points[at[m]].step < key)
                key = s->points[at[m]].step;
        }
        if (next_mark < p->n_marks && mark_key(p, &p->marks[next_mark], by_time) < key)
            key = mark_key(p, &p->marks[next_mark], by_time);
        if (key == INT64_MAX) return 0;
        while (next_mark < p->n_marks && mark_key(p, &p->marks[next_mark], by_time) <= key) next_mark++;
        int64_t t = -1;
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            const pl_series_t *s = &p->metrics[m].series;
            if (p->metrics[m].present && at[m] < s->n_points && s->points[at[m]].step == key &&
                s->points[at[m]].t_ns >= 0 && (t < 0 || s->points[at[m]].t_ns < t))
                t = s->points[at[m]].t_ns;
        }
        fprintf(o, "%lld,", (long long)p->pid);
        if (xp) fprintf(o, "%u", (unsigned)xp->exec_seq);
        fputc(',', o);
        if (p->rank >= 0) fprintf(o, "%d", p->rank);
        fputc(',', o);
        csv_str(o, name);
        fprintf(o, ",%s,%lld,", by_time ? "time" : "step", (long long)key);
        if (t >= 0) csv_num(o, (double)t / 1e9);
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            if (!cols[m]) continue;
            fputc(',', o);
            const pl_series_t *s = &p->metrics[m].series;
            if (p->metrics[m].present && at[m] < s->n_points && s->points[at[m]].step == key) {
                csv_num(o, s->points[at[m]].base);
                at[m]++;
            }
        }
        fputc(',', o);
        marks_cell(p, key, by_time, cell, sizeof cell);
        csv_str(o, cell);
        fputs("\r\n", o);
        if (ferror(o)) return -EIO;
    }
}

int pl_export_csv(const pl_run_t *run, FILE *o) {
    if (!run || !run->report || !o) return -EINVAL;
    const pl_report_t *r = run->report;
    const pl_extract_t *x = run->ext;
    bool cols[PL_METRIC__COUNT] = {false};
    for (size_t i = 0; i < r->n_procs; i++)
        for (int m = 0; m < PL_METRIC__COUNT; m++) cols[m] |= r->procs[i]->metrics[m].present;
    fputs("pid,exec,rank,process,by,step,t_seconds", o);
    for (int m = 0; m < PL_METRIC__COUNT; m++)
        if (cols[m]) fprintf(o, ",%s", pl_metric_name((pl_metric_t)m));
    fputs(",marks\r\n", o);
    for (size_t i = 0; i < r->n_procs; i++) {
        const pl_extract_proc_t *xp = NULL; /* the trace behind the row (none for a pool) */
        for (size_t j = 0; x && j < x->n_procs && !xp; j++)
            if (x->procs[j].proc == r->procs[i]) xp = &x->procs[j];
        int rc = proc_rows(o, r->procs[i], xp, cols);
        if (rc) return rc;
    }
    return ferror(o) ? -EIO : 0;
}
