/* reports/ending: how a process ended (see ending.h, docs/end-of-run.md), in text and JSON. */
#include "ending.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "render.h"
#include "window.h"

#define TEXT_SITES 5 /* sites per list in the text (10 in the JSON and HTML) */

/* ---- text ---- */

static void live_text(FILE *o, const pl_extract_window_t *w, bool at_uncaught) {
    char a[32], b[32];
    if (!w->n_live) return;
    fprintf(o, "  live by call site at %s (sampled; %s in all):\n", at_uncaught ? "the exception" : "its last record",
            pl_format_bytes(w->live_bytes, a, sizeof a));
    for (size_t j = 0; j < w->n_live && j < TEXT_SITES; j++) {
        const pl_extract_site_t *st = &w->live[j];
        fprintf(o, "  %zu. %s (%.0f%%", j + 1, pl_format_bytes(st->live_bytes, a, sizeof a), 100 * st->share);
        if (!w->no_steps)
            fprintf(o, ", %s since step %lld", pl_window_signed(st->growth_bytes, true, b, sizeof b),
                    (long long)w->from_step);
        fputc(')', o);
        pl_render_site_text(o, st);
    }
}

static void grew_text(FILE *o, const pl_extract_window_t *w) {
    char a[32], b[32];
    if (w->no_steps) {
        fputs("  no steps: what grew in its last steps cannot be told\n", o);
        return;
    }
    if (!w->n_sites) {
        fprintf(o, "  no call site's live bytes grew after step %lld\n", (long long)w->from_step);
        return;
    }
    fprintf(o, "  grew after step %lld (its last %lld steps, sampled; %zu site%s, +%s in all):\n",
            (long long)w->from_step, (long long)(w->end_step - w->from_step), w->n_grew, w->n_grew == 1 ? "" : "s",
            pl_format_bytes(w->growth_bytes, a, sizeof a));
    for (size_t j = 0; j < w->n_sites && j < TEXT_SITES; j++) {
        const pl_extract_site_t *st = &w->sites[j];
        fprintf(o, "  %zu. +%s (live %s)", j + 1, pl_format_bytes(st->growth_bytes, a, sizeof a),
                pl_format_bytes(st->live_bytes, b, sizeof b));
        pl_render_site_text(o, st);
    }
}

static void torch_text(FILE *o, const pl_extract_proc_t *p, const pl_end_t *e) {
    if (p->dev_last_reserved < 0) return;
    char a[32], b[32], c[32];
    fprintf(o, "  torch's CUDA allocator %s (step %lld): allocated %s, reserved %s",
            e->kind == PL_END_CUDA_OOM ? "when the OOM was raised" : "at its last snapshot", (long long)p->dev_last_step,
            pl_format_bytes((double)p->dev_last_allocated, a, sizeof a),
            pl_format_bytes((double)p->dev_last_reserved, b, sizeof b));
    if (p->dev_last_inactive_split >= 0)
        fprintf(o, ", inactive in split blocks %s (fragmentation)",
                pl_format_bytes((double)p->dev_last_inactive_split, c, sizeof c));
    fputc('\n', o);
}

void pl_end_text(const pl_run_t *run, FILE *o) {
    const pl_extract_t *x = run->ext;
    for (size_t i = 0; x && i < x->n_procs; i++) {
        const pl_extract_proc_t *p = &x->procs[i];
        const pl_end_t e = p->ended; /* written by the analysis (pl_run_analyze) */
        if (e.kind == PL_END_CLEAN || e.kind == PL_END_RUNNING) continue;
        /* a helper or quiet worker that ended without an end record is said in the process table; the trainer and
         * any process the status names are said here */
        if (e.kind == PL_END_NO_RECORD && p->proc->role == PL_ROLE_WORKER && !p->end) continue;
        fprintf(o, "end of pid %u (%s): %s\n", p->pid, pl_format_esc(p->proc->name), pl_format_esc(e.line));
        if (p->end) {
            if (!p->end->no_steps)
                fprintf(o, "  at step %lld%s\n", (long long)p->end->end_step,
                        p->uncaught[0] ? " (steps completed when the exception was raised)" :
                        " (steps completed; its last records may be in the next one)");
            live_text(o, p->end, p->uncaught[0] != 0);
            grew_text(o, p->end);
        }
        torch_text(o, p, &e);
    }
}

/* ---- JSON ---- */

static void sites_array(pl_json_t *j, const char *key, const pl_extract_site_t *s, size_t n) {
    pl_json_key(j, key);
    pl_json_array_block(j);
    for (size_t k = 0; k < n; k++) pl_render_site_json(j, &s[k]);
    pl_json_end(j);
}

void pl_end_json(pl_json_t *j, const pl_extract_proc_t *p) {
    const pl_end_t e = p->ended;
    pl_json_key(j, "end");
    pl_json_object(j);
    pl_json_kstr(j, "how", pl_end_kind_name(e.kind));
    pl_json_kstr(j, "line", e.line);
    pl_json_key(j, "signal");
    if (e.signal) pl_json_int(j, e.signal);
    else pl_json_null(j);
    pl_json_key(j, "exit_status");
    if (e.exit_status >= 0) pl_json_int(j, e.exit_status);
    else pl_json_null(j);
    pl_json_key(j, "oom_kill");
    if (e.oom_kill >= 0) pl_json_int(j, e.oom_kill);
    else pl_json_null(j);
    pl_json_key(j, "host_oom_kill");
    if (e.host_oom_kill >= 0) pl_json_int(j, e.host_oom_kill);
    else pl_json_null(j);
    pl_json_key(j, "exception");
    pl_json_str_or_null(j, p->uncaught[0] ? p->uncaught : NULL);
    pl_json_key(j, "torch");
    if (p->dev_last_reserved >= 0) {
        pl_json_object(j);
        pl_json_kint(j, "step", p->dev_last_step);
        pl_json_knum(j, "allocated_bytes", (double)p->dev_last_allocated);
        pl_json_knum(j, "reserved_bytes", (double)p->dev_last_reserved);
        pl_json_knum(j, "inactive_split_bytes", p->dev_last_inactive_split >= 0 ? (double)p->dev_last_inactive_split
                                                                                 : NAN);
        pl_json_end(j);
    } else {
        pl_json_null(j);
    }
    const pl_extract_window_t *w = p->end;
    pl_json_key(j, "at");
    if (!w) {
        pl_json_null(j);
        pl_json_end(j);
        return;
    }
    pl_json_object_block(j);
    pl_json_key(j, "step");
    if (w->no_steps) pl_json_null(j);
    else pl_json_int(j, w->end_step);
    pl_json_kbool(j, "at_exception", p->uncaught[0] != 0);
    pl_json_knum(j, "live_bytes", w->live_bytes);
    sites_array(j, "live", w->live, w->n_live);
    pl_json_key(j, "last_steps");
    if (w->no_steps) {
        pl_json_null(j);
    } else {
        pl_json_object_block(j);
        pl_json_kint(j, "from_step", w->from_step);
        pl_json_kuint(j, "grew", w->n_grew);
        pl_json_knum(j, "growth_bytes", w->growth_bytes);
        sites_array(j, "top", w->sites, w->n_sites);
        pl_json_end(j);
    }
    pl_json_end(j);
    pl_json_end(j);
}
