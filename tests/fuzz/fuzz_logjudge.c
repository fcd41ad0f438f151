/* Fuzz target: plateau judge's log reader (reports/logjudge.c): free text, CSV and JSON lines, then each run's
 * columns as a one-process-per-run report, analysed (the verdict's input as plateau judge builds it).
 * Properties: no crash, no UB, no unbounded allocation (the input bounds every run's samples). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "logjudge.h"
#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_log_t log;
    char err[256];
    if (size > 65536) return 0; /* the trend maths is O(n^2) per series: keep runs fast */
    if (pl_log_parse((const char *)data, size, NULL, &log, err, sizeof err)) return 0;
    pl_report_t *r = pl_report_create("fuzz");
    for (size_t i = 0; r && i < log.n_runs; i++) {
        pl_report_process_t *p = pl_report_add_process(r, (int64_t)i + 1, -1, "run");
        for (size_t c = 0; p && c < log.n_cols; c++)
            if (log.runs[i].n[c] && log.cols[c].metric != PL_METRIC__COUNT)
                pl_report_set_samples(p, log.cols[c].metric, log.runs[i].samples[c], log.runs[i].n[c], NULL);
    }
    if (r) pl_report_analyze(r);
    pl_report_destroy(r);
    pl_log_free(&log);
    return 0;
}
