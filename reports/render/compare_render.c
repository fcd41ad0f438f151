/* reports/render/compare_render: two runs side by side, as the analysis compared them (pl_compare_runs wrote the
 * pl_compare_t: reports/model/comparison.h), in text and JSON (see compare_render.h). */
#include "compare_render.h"

#include <errno.h>
#include <stdio.h>

#include "format.h"
#include "json.h"

static const pl_metric_t table_metrics[] = {PL_METRIC_RSS_ANON, PL_METRIC_RSS_FILE, PL_METRIC_RSS,
                                            PL_METRIC_HEAP_BYTES, PL_METRIC_HEAP_COUNT};
#define N_TABLE (sizeof table_metrics / sizeof table_metrics[0])

int pl_compare_render_text(const pl_compare_t *c, FILE *o) {
    if (!c || !o) return -EINVAL;
    const char *l[2] = {c->run[0].label, c->run[1].label}; /* as the comparison named them */
    fprintf(o, "plateau report: comparing two runs\n");
    for (int i = 0; i < 2; i++)
        fprintf(o, "  %c: %s  pid %lld %s, host allocator %s%s%s%s\n", 'A' + i, pl_format_esc(c->run[i].source),
                c->run[i].pid, pl_format_esc(c->run[i].name), pl_format_esc(c->run[i].allocator), c->run[i].allocator_from[0] ? " (" : "",
                c->run[i].allocator_from, c->run[i].allocator_from[0] ? ")" : "");
    fprintf(o, "  %-11s %-34s %-34s\n", "", l[0], l[1]);
    for (size_t k = 0; k < N_TABLE; k++) {
        const pl_report_metric_t *m[2] = {pl_report_metric_of(c->run[0].proc, table_metrics[k]),
                                          pl_report_metric_of(c->run[1].proc, table_metrics[k])};
        if (!m[0] && !m[1]) continue;
        fprintf(o, "  %-11s", pl_metric_name(table_metrics[k]));
        for (int i = 0; i < 2; i++) {
            char cell[64], s[40];
            if (m[i])
                snprintf(cell, sizeof cell, "%s %s", pl_verdict_name(m[i]->verdict.kind),
                         pl_report_slope_text(m[i], pl_metric_is_bytes(table_metrics[k]), s, sizeof s));
            else snprintf(cell, sizeof cell, "-");
            fprintf(o, " %-34s", cell);
        }
        fputc('\n', o);
    }
    fprintf(o, "conclusion (%s): %s\n", pl_compare_kind_name(c->kind), c->text);
    return ferror(o) ? -EIO : 0;
}

static const char *state_name(pl_compare_state_t s) {
    return s == PL_CMP_GROWS ? "grows" : s == PL_CMP_FLAT ? "flat" : "unknown";
}

int pl_compare_render_json(const pl_compare_t *c, FILE *o) {
    if (!c || !o) return -EINVAL;
    pl_json_t j;
    pl_json_init(&j, o, 0);
    pl_json_object_block(&j);
    pl_json_kstr(&j, "schema", "plateau.compare");
    pl_json_kint(&j, "schema_version", PL_COMPARE_SCHEMA_VERSION);
    pl_json_key(&j, "runs");
    pl_json_array(&j); /* "[{" ... "}, {" ... "}]": the runs are blocks inside an inline array */
    for (int i = 0; i < 2; i++) {
        const pl_compare_run_t *r = &c->run[i];
        pl_json_object_block(&j);
        pl_json_kstr(&j, "source", r->source);
        pl_json_kstr(&j, "allocator", r->allocator);
        pl_json_key(&j, "allocator_from");
        pl_json_str_or_null(&j, r->allocator_from[0] ? r->allocator_from : NULL);
        pl_json_kint(&j, "pid", r->pid);
        pl_json_kstr(&j, "name", r->name);
        pl_json_kstr(&j, "heap", state_name(r->heap));
        pl_json_kstr(&j, "rss", state_name(r->rss));
        pl_json_key(&j, "metrics");
        pl_json_array_block(&j);
        for (size_t k = 0; k < N_TABLE; k++) {
            const pl_report_metric_t *m = pl_report_metric_of(r->proc, table_metrics[k]);
            if (!m) continue;
            const pl_verdict_t *v = &m->verdict;
            pl_json_object(&j);
            pl_json_kstr(&j, "name", pl_metric_name(table_metrics[k]));
            pl_json_kstr(&j, "unit", pl_metric_is_bytes(table_metrics[k]) ? "bytes" : "count");
            pl_json_kstr(&j, "verdict", pl_verdict_name(v->kind));
            pl_json_knum(&j, "level", v->level);
            pl_json_knum(&j, "slope_per_step", v->slope_per_step);
            pl_json_key(&j, "slope_ci");
            pl_json_array(&j);
            pl_json_num(&j, v->slope_lo);
            pl_json_num(&j, v->slope_hi);
            pl_json_end(&j);
            pl_json_kint(&j, "more_steps", v->more_steps);
            pl_json_end(&j);
        }
        pl_json_end(&j);
        pl_json_end(&j);
    }
    pl_json_end(&j);
    pl_json_key(&j, "conclusion");
    pl_json_object(&j);
    pl_json_kstr(&j, "code", pl_compare_kind_name(c->kind));
    pl_json_key(&j, "growing_run");
    if (c->growing_run >= 0) pl_json_int(&j, c->growing_run);
    else pl_json_null(&j);
    pl_json_kstr(&j, "text", c->text);
    pl_json_end(&j);
    pl_json_end(&j);
    return pl_json_done(&j);
}
