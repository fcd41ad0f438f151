/* reports/model/dx: the diagnosis' vocabulary in the model (see dx.h): the findings' codes and their names, and the
 * practical-significance test (docs/verdict.md §8) every reader of a verdict asks: the analysis (diagnosis.c,
 * generations.c) when it judges, the model when it labels a series, the renderers through those labels.
 */
#include "dx.h"

#include <math.h>
#include <stddef.h>

#include "report.h"

static const char *dx_names[PL_DX__COUNT] = {
    "cut-short", "retained-tensors", "device-growth", "fragmentation", "device-other", "host-leak", "heap-not-rss",
    "host-retention", "file-pages", "rss-unexplained", "oom", "undecided", "no-leak", "slow-growth", "no-data",
    "pss-sharing", "alloc-retries", "copy-on-access", "first-touch",
};

const char *pl_dx_name(pl_dx_t c) { return (unsigned)c < PL_DX__COUNT ? dx_names[c] : "?"; }

bool pl_diagnosis_practical(const pl_verdict_t *v, const pl_practical_params_t *pp) {
    pl_practical_params_t d = {.slow_hours = 24, .horizon_steps = 10000};
    if (!pp) pp = &d;
    if (!v || v->kind != PL_VERDICT_LEAK || !(v->slope_per_step > 0)) return false;
    /* the horizon in steps: slow_hours of this process's steps when their duration is known */
    double horizon = (double)pp->horizon_steps;
    if (isfinite(v->per_hour) && v->per_hour > 0) horizon = pp->slow_hours * v->per_hour / v->slope_per_step;
    if (v->has_oom) {
        if (isfinite(v->oom_seconds)) return v->oom_seconds <= pp->slow_hours * 3600;
        return (double)(v->oom_step - v->last_step) <= horizon;
    }
    return v->slope_per_step * horizon >= fabs(v->level); /* no limit: would it double within the horizon? */
}

/* A count has no limit of its own: its practical test is "doubles within the horizon", which a C program's few
 * hundred live blocks pass at +1 block/step. What runs out is bytes, so a growing live-allocation count matters only
 * when memory does: heap.bytes is itself a leak that matters, or anonymous RSS is (many small blocks fragment the
 * heap and raise RSS far faster than their bytes), or heap.bytes cannot say (not recorded, or not decided yet). A count
 * growing beside heap.bytes decided flat or too slow to matter is slow growth (docs/verdict.md §8). */
static bool count_bytes_matter(const pl_report_process_t *p, const pl_practical_params_t *pp) {
    const pl_report_metric_t *hb = &p->metrics[PL_METRIC_HEAP_BYTES];
    if (!hb->present || hb->verdict.kind == PL_VERDICT_INCONCLUSIVE) return true;
    /* anonymous RSS is where small heap blocks live; total RSS only when it was not split (rss.file is no heap) */
    pl_metric_t rss = p->metrics[PL_METRIC_RSS_ANON].present ? PL_METRIC_RSS_ANON : PL_METRIC_RSS;
    const pl_metric_t mem[] = {PL_METRIC_HEAP_BYTES, rss};
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++) {
        const pl_report_metric_t *mt = &p->metrics[mem[i]];
        if (mt->present && mt->verdict.kind == PL_VERDICT_LEAK && pl_diagnosis_practical(&mt->verdict, pp)) return true;
    }
    return false;
}

bool pl_diagnosis_matters(const pl_report_process_t *p, int m, const pl_practical_params_t *pp) {
    if (!p || m < 0 || m >= PL_METRIC__COUNT || !p->metrics[m].present) return false;
    if (!pl_diagnosis_practical(&p->metrics[m].verdict, pp)) return false;
    return m != PL_METRIC_HEAP_COUNT || count_bytes_matter(p, pp);
}
