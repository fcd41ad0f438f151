/* reports/analyze/sentences: the sentences the analysis writes into the model from the traces' facts, once, before
 * it judges the run (pl_run_analyze): the top growing Python site (a row's site_line), who keeps it (a row's
 * holder_line), each holder's line with its likely fix (fix_line), why the run was cut short (cut_reason), the names
 * of the pools' and generations' rows. The verdict line, the diagnosis and the renderers quote them; the model itself
 * writes no English (tools/check-layers.py). Not thread-safe per object.
 */
#pragma once

#include <stddef.h>

#include "retention.h"
#include "run.h"

/* The sentence naming a process's top growing Python site (docs/python-frames.md), written once per process into
 * its row's site_line by pl_run_analyze:
 * "93% of it allocated at train.py:42 (`epoch_logits.append(logits)`)" (no source part when the file could not be
 * read). Writes at most n bytes (NUL-terminated) and returns the length, or 0 (buf = "") when the top site has no
 * Python frames or there is no site. */
size_t pl_run_site_sentence(const pl_extract_proc_t *p, char *buf, size_t n);

/* The verdict line's part, short: "kept by `total_loss` (local of train() in main.py; autograd graph +8 nodes/step);
 * likely fix: accumulate `loss.item()` (or `loss.detach()`) at main.py:17" for the first named holder; returns the
 * length, 0 (buf "") when none is named. */
size_t pl_retention_sentence(const pl_retention_t *rt, char *buf, size_t n);

/* Why the run was cut short (r->cut_reason), from the first process that cuts it short (x->cut_proc: a damaged
 * trace, a root without an end record): "killed by signal 9 (SIGKILL: the OOM killer or kill -9)", "damaged tail:
 * 4242.0.pltrace: offset 812: ...", "4242.0.pltrace has no end record yet: pid 4242 is still running". Nothing when
 * the run is whole. */
void pl_run_cut_reason(pl_report_t *r, const pl_extract_t *x);

/* Name the rows the assembly added (run.c): a pool's ("pool of 3 workers"), a row of worker generations' ("24
 * workers in 8 generations of 3"). */
void pl_run_name_rows(pl_report_t *r);

/* Write each holder's fix_line (the line that grows it, with its likely fix) from its facts; rt may be NULL. */
void pl_retention_say(pl_retention_t *rt);
