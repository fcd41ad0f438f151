/* Who keeps it, rendered: the JSON "retention" block of a process, the text report's holders section and the HTML
 * report's (reports/retention.h, docs/retention.md, docs/report-schema.md). */
#include <math.h>
#include <stdio.h>

#include "json.h"
#include "retention.h"
#include "retention_render.h"
#include "words.h"

static void num_or_null(pl_json_t *j, const char *k, uint64_t v) {
    if (v == PL_TRACE_NA) {
        pl_json_key(j, k);
        pl_json_null(j);
    } else {
        pl_json_kuint(j, k, v);
    }
}

void pl_retention_json(pl_json_t *j, const pl_retention_t *rt) {
    pl_json_key(j, "retention");
    if (!rt) {
        pl_json_null(j);
        return;
    }
    pl_json_object(j);
    pl_json_kuint(j, "censuses", rt->n_census);
    pl_json_kbool(j, "stopped_short", rt->any_short);
    pl_json_knum(j, "census_seconds", rt->census_seconds);
    pl_json_kuint(j, "named", rt->n_named);
    pl_json_key(j, "holders");
    pl_json_array_block(j);
    for (size_t i = 0; i < rt->n_holders; i++) {
        const pl_retention_holder_t *h = &rt->holders[i];
        pl_json_object(j);
        pl_json_kstr(j, "path", h->path);
        pl_json_kstr(j, "what", h->what);
        pl_json_kstr(j, "kind", h->kind);
        pl_json_kbool(j, "named", h->named);
        pl_json_kstr(j, "size_unit", h->by_nodes ? "autograd_nodes" : "items");
        pl_json_knum(j, "size_per_step", h->size_per_step);
        pl_json_kuint(j, "size", h->size_last);
        num_or_null(j, "bytes", h->bytes_last);
        pl_json_knum(j, "bytes_per_step", h->bytes_per_step);
        pl_json_knum(j, "graph_nodes_per_step", h->nodes_per_step);
        pl_json_kbool(j, "bytes_estimated", (h->flags & PL_RETENTION_ESTIMATED) != 0);
        pl_json_kint(j, "first_step", h->first_step);
        pl_json_kint(j, "last_step", h->last_step);
        pl_json_kuint(j, "censuses", h->n_points);
        pl_json_key(j, "line");
        if (h->line > 0 && h->file[0]) {
            pl_json_object(j);
            pl_json_kstr(j, "file", h->file);
            pl_json_kint(j, "line", h->line);
            pl_json_kbool(j, "guess", (h->flags & PL_RETENTION_GUESS) != 0);
            pl_json_end(j);
        } else {
            pl_json_null(j);
        }
        pl_json_key(j, "likely_fix");
        pl_json_str_or_null(j, h->fix[0] ? h->fix : NULL);
        pl_json_key(j, "allocated_at"); /* trace 1.9: the growing site its largest storages were sampled at */
        if (h->alloc_at[0]) {
            pl_json_object(j);
            pl_json_kstr(j, "site", h->alloc_at);
            pl_json_kuint(j, "storages_matched", h->alloc_hits);
            pl_json_kuint(j, "storages_checked", h->n_ranges);
            pl_json_knum(j, "bytes", h->alloc_bytes);
            pl_json_end(j);
        } else {
            pl_json_null(j);
        }
        pl_json_end(j);
    }
    pl_json_end(j);
    pl_json_end(j);
}

void pl_retention_text(FILE *o, unsigned pid, const pl_retention_t *rt, bool grows) {
    if (!rt || !rt->n_named) {
        if (rt && rt->any_short && grows)
            fprintf(o, "pid %u: who keeps it: no growing holder found, but a census stopped short (its object or time "
                       "cap): one may have been missed\n", pid);
        return;
    }
    if (grows)
        fprintf(o, "who keeps it (pid %u, %u censuses%s):\n", pid, rt->n_census,
                rt->any_short ? ", some stopped short" : "");
    else /* growing references in a process whose memory does not leak: said, not called a leak */
        fprintf(o, "growing references (pid %u, %u censuses; its memory does not grow: not a leak):\n", pid,
                rt->n_census);
    char line[1600];
    for (size_t i = 0; i < rt->n_holders && rt->holders[i].named; i++) {
        pl_retention_holder_phrase(&rt->holders[i], line, sizeof line);
        fprintf(o, "  %zu. %s\n", i + 1, line);
    }
}

static void html_esc(FILE *o, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '&': fputs("&amp;", o); break;
        case '"': fputs("&quot;", o); break;
        default: fputc(*s, o);
        }
    }
}

void pl_retention_html(FILE *o, const pl_retention_t *rt, bool grows) {
    if (!rt || !rt->n_named) return;
    if (grows)
        fprintf(o, "<h3>Who keeps it (%u censuses%s)</h3>\n<ol>\n", rt->n_census,
                rt->any_short ? ", some stopped short" : "");
    else
        fprintf(o, "<h3>Growing references (%u censuses; the memory does not grow: not a leak)</h3>\n<ol>\n",
                rt->n_census);
    char line[1600];
    for (size_t i = 0; i < rt->n_holders && rt->holders[i].named; i++) {
        pl_retention_holder_phrase(&rt->holders[i], line, sizeof line);
        fputs("<li>", o);
        html_esc(o, line);
        fputs("</li>\n", o);
    }
    fputs("</ol>\n", o);
}
