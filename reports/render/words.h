/* reports/render/words: the sentences only the renderers say, shared by the text and HTML reports (and the holder
 * lists of both): the copy-on-access workers' line, the folded workers' line, the run's totals, a holder in full, the
 * word for a series' verdict.
 * They read the model and its view; the sentences the analysis writes into the model (site_line, holder_line) are
 * reports/analyze's. Thread-safe (they write only into buf).
 */
#pragma once

#include <stddef.h>

#include "report.h"
#include "retention.h"
#include "run.h"

/* The line that sums up the workers copying their parent's pages (the copy-on-access finding, docs/verdict.md):
 * "copy-on-access in 2 forked workers (pids 101..102): PSS +96.0 MiB in all while their RSS and live heap stay flat,
 * ceiling 410 MiB in all; not a leak: ...". Writes at most size bytes (cut, NUL-terminated); "" when none. Returns
 * how many workers it sums up. */
size_t pl_report_cow_line(const pl_report_t *r, char *buf, size_t size);

/* The run's memory totals as one phrase for the text report, e.g. "total PSS 613 MiB (RSS 1.57 GiB, shared pages
 * counted once per process)", saying when some or all processes have no PSS sample. Returns what snprintf does. */
int pl_run_totals_phrase(const pl_run_totals_t *t, char *buf, size_t n);

/* The line that sums up the PL_FOLD_WORKER rows: "workers (14 processes that never step, pids 13502..14439): none
 * leaks; 0 flat, 2 not decided on their own (short-lived or noisy), 12 too brief to judge"; a worker whose own loop
 * period detection found is said to have one ("workers (2 processes whose loops period detection found, ..."). Writes
 * at most size bytes (cut, NUL-terminated); "" when there is none. Returns how many processes it sums up. */
size_t pl_run_view_workers_line(const pl_run_view_t *view, char *buf, size_t size);

/* One holder in full, for the "who keeps it" lists: "`total_loss` (local of train() in main.py): a tensor whose
 * autograd graph grows 8 nodes/step, 57.3 MiB of tensors (+367.0 KiB/step); likely fix: ... at main.py:17". */
size_t pl_retention_holder_phrase(const pl_retention_holder_t *h, char *buf, size_t n);

/* The word a renderer shows for one metric's verdict: the trend verdict's name, except that a growing series is
 * "leak" only for a program-memory metric growing fast enough to matter, "grows" for other metrics (RSS beside a
 * live heap, PSS, file pages: findings, not leaks), and "slow growth" when it would not matter (the analysis's
 * practical test, stored in the metric: matters). */
const char *pl_report_metric_label(const pl_report_process_t *p, pl_metric_t m);

/* The sentence naming the top device site: "93% of the device memory taken from the driver since step 12 was
 * requested at train.py:55 (`kept.append(x)`)"; a site without Python frames is named by its first native frame,
 * and in a process that runs Python the sentence adds that the request came from a thread running no Python (torch's
 * autograd engine takes segments during backward), which need not be the line that keeps the memory.
 * by_step: the tail is in steps (else seconds). Writes at most n bytes and returns the length, 0 (buf = "") when v
 * has no device site. */
size_t pl_run_dev_site_sentence(const pl_run_sites_t *v, bool by_step, char *buf, size_t n);
