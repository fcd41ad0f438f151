/* reports/analyze/sentences: the sentences the analysis writes into the model (see sentences.h). */
#include "sentences.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "pysites.h"

size_t pl_run_site_sentence(const pl_extract_proc_t *p, char *buf, size_t n) {
    if (!n) return 0;
    buf[0] = 0;
    if (!p || !p->n_sites || !p->sites[0].py_name) return 0;
    const pl_extract_site_t *top = &p->sites[0];
    int w = snprintf(buf, n, "%.0f%% of it allocated at %s:%d%s%s%s", 100 * top->share,
                     pl_pysite_short(top->py_file), top->py_line, top->py_source ? " (`" : "",
                     top->py_source ? top->py_source : "", top->py_source ? "`)" : "");
    if (w < 0) {
        buf[0] = 0;
        return 0;
    }
    return (size_t)w < n ? (size_t)w : n - 1;
}

static const char *short_file(const char *f) {
    const char *b = strrchr(f, '/');
    return b ? b + 1 : f;
}

/* The line that grows the holder, with its likely fix: "; likely fix: ... at main.py:17", "; grown at main.py:17" */
static void line_phrase(const pl_retention_holder_t *h, char *buf, size_t n) {
    buf[0] = 0;
    if (h->line <= 0 || !h->file[0]) return;
    const char *guess = h->flags & PL_RETENTION_GUESS ? " (a guess: one of several lines that grow it)" : "";
    if (h->fix[0]) snprintf(buf, n, "; likely fix: %s at %s:%d%s", h->fix, short_file(h->file), h->line, guess);
    else snprintf(buf, n, "; grown at %s:%d%s", short_file(h->file), h->line, guess);
}

size_t pl_retention_sentence(const pl_retention_t *rt, char *buf, size_t n) {
    if (!n) return 0;
    buf[0] = 0;
    if (!rt || !rt->n_named) return 0;
    const pl_retention_holder_t *h = &rt->holders[0];
    char growth[96], line[1500];
    if (h->by_nodes) snprintf(growth, sizeof growth, "autograd graph +%.3g nodes/step", h->size_per_step);
    else snprintf(growth, sizeof growth, "%s +%.3g/step", h->kind, h->size_per_step);
    line_phrase(h, line, sizeof line);
    int len = snprintf(buf, n, "kept by `%s` (%s; %s)%.300s", h->path, h->what, growth, line);
    return len < 0 ? 0 : (size_t)len >= n ? n - 1 : (size_t)len;
}


void pl_retention_say(pl_retention_t *rt) {
    for (size_t i = 0; rt && i < rt->n_holders; i++)
        line_phrase(&rt->holders[i], rt->holders[i].fix_line, sizeof rt->holders[i].fix_line);
}

void pl_run_name_rows(pl_report_t *r) {
    for (size_t i = 0; r && i < r->n_procs; i++) {
        pl_report_process_t *p = r->procs[i];
        if (p->n_pool) snprintf(p->name, sizeof p->name, "pool of %zu worker%s", p->n_pool, p->n_pool > 1 ? "s" : "");
        else if (p->n_gen)
            snprintf(p->name, sizeof p->name, "%zu workers in %zu generations of %zu", p->n_gen_workers, p->n_gen,
                     p->n_gen_workers / p->n_gen);
    }
}

/* "signal 11 (SIGSEGV)"; SIGKILL is also what the OOM killer sends */
static const char *signal_text(int sig) {
    static char buf[64];
    static const struct { int n; const char *name; } names[] = {
        {SIGSEGV, "SIGSEGV, a crash"}, {SIGABRT, "SIGABRT, an abort"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"},
        {SIGILL, "SIGILL"}, {SIGKILL, "SIGKILL: the OOM killer or kill -9"}, {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},
        {SIGHUP, "SIGHUP"}, {SIGQUIT, "SIGQUIT"}, {SIGPIPE, "SIGPIPE"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].n == sig) {
            snprintf(buf, sizeof buf, "signal %d (%s)", sig, names[i].name);
            return buf;
        }
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}

void pl_run_cut_reason(pl_report_t *r, const pl_extract_t *x) {
    if (!r || !x || !r->cut_short || x->cut_proc >= x->n_procs) return;
    const pl_extract_proc_t *p = &x->procs[x->cut_proc]; /* the first process that cuts the run short */
    char reason[512];
    const char *b = strrchr(p->file, '/');
    b = b ? b + 1 : (p->file[0] ? p->file : "trace");
    int w;
    /* the file by its base name (the directory is the report's): the reader's message is "FILE: offset N:
     * what", which fits the report's reason whole; the full message is in x */
    size_t fl = strlen(p->file);
    const char *msg = fl && !strncmp(p->error, p->file, fl) && p->error[fl] == ':' ? p->error + fl : NULL;
    if (p->running) /* first: a running process's trace has no end yet, and may end in a chunk being written */
        w = snprintf(reason, sizeof reason, "%s has no end record yet: pid %u is still running", b, p->pid);
    else if (p->damaged && msg)
        w = snprintf(reason, sizeof reason, "damaged tail: %s%s", b, msg);
    else if (p->damaged)
        w = snprintf(reason, sizeof reason, "damaged tail: %s", p->error);
    else if (pl_run_status_of(x, p->pid) && pl_run_status_of(x, p->pid)->signal > 0) {
        const pl_extract_status_t *st = pl_run_status_of(x, p->pid);
        w = snprintf(reason, sizeof reason, "killed by %s", signal_text(st->signal));
        if (w > 0 && (size_t)w < sizeof reason && st->signal == SIGKILL && st->oom_kill > 0) /* docs/end-of-run.md */
            w += snprintf(reason + w, sizeof reason - (size_t)w, "; the OOM killer killed %ld process%s in the "
                          "run's cgroup while it ran", st->oom_kill, st->oom_kill > 1 ? "es" : "");
    } else if (pl_run_status_of(x, p->pid))
        w = snprintf(reason, sizeof reason, "%s has no end record, but the command exited with status %d", b,
                     pl_run_status_of(x, p->pid)->exit);
    else
        w = snprintf(reason, sizeof reason, "%s has no end record: ended by a signal (a crash, SIGKILL, the OOM "
                     "killer) or still running", b);
    if (w < 0) reason[0] = 0;
    pl_report_set_cut_short(r, reason);
}
