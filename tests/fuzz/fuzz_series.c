/* Fuzz target: the series file parser (reports/seriesfile.c) and everything a parsed file flows into: series
 * build, compaction, verdict, a one-process report with diagnosis, the generation rule (the same samples as a
 * generations row), and both renderers (to /dev/null).
 * Properties: no crash, no UB, no unbounded allocation (samples are capped at 4096 by the parser's bound, so the
 * O(n^2) trend fits stay small and fast). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "render.h"
#include "report.h"
#include "seriesfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    pl_seriesfile_t f;
    pl_parse_error_t err;
    if (pl_seriesfile_parse((const char *)data, size, 4096, &f, &err)) return 0;
    pl_report_t *r = pl_report_create("fuzz");
    if (r) {
        r->limits.device_bytes = 16e9;
        r->limits.host_bytes = 64e9;
        pl_report_process_t *p = pl_report_add_process(r, 1, -1, "fuzz");
        /* the same samples as generations of short-lived workers (reports/generations.c), one point per generation */
        pl_report_process_t *g = pl_report_add_process(r, 1, -1, "generations");
        if (g) {
            g->role = PL_ROLE_WORKER;
            g->n_gen = f.n_samples ? f.n_samples : 1;
            g->n_gen_workers = 2 * g->n_gen + (size_t)(size & 1);
            g->gen_every_steps = f.n_samples ? f.samples[0].step : 0;
            pl_report_set_samples(g, PL_METRIC_HEAP_BYTES, f.samples, f.n_samples, NULL);
        }
        /* the same samples as a byte metric, a count metric and (without steps) a time-bucketed metric */
        if (p && pl_report_set_samples(p, PL_METRIC_RSS, f.samples, f.n_samples, NULL) == 0 &&
            pl_report_set_samples(p, PL_METRIC_DEV_TENSORS, f.samples, f.n_samples, NULL) == 0) {
            for (size_t i = 0; i < f.n_samples; i++) f.samples[i].step = -1;
            pl_series_opts_t o = {.bucket_ns = 1000000000LL, .max_buckets = 512};
            pl_report_set_samples(p, PL_METRIC_HEAP_BYTES, f.samples, f.n_samples, &o);
            if (pl_report_analyze(r) == 0 && devnull) {
                pl_render_text(r, devnull, NULL);
                pl_render_json(r, devnull, 64);
            }
        }
        pl_report_destroy(r);
    }
    pl_seriesfile_free(&f);
    return 0;
}
