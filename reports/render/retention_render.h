/* Who keeps it, rendered (reports/retention_render.c): JSON block and text section of one process. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "json.h"
#include "retention.h"

/* "retention": null when the trace has no census, else the censuses and every holder reported (named or not). */
void pl_retention_json(pl_json_t *j, const pl_retention_t *rt);

/* "who keeps it (pid N, K censuses):" and one line per named holder; nothing when none is named (a line when a
 * census stopped short). grows: the process's memory leaks or grows slowly; otherwise the holders are listed as
 * "growing references", not as what keeps a leak. */
void pl_retention_text(FILE *o, unsigned pid, const pl_retention_t *rt, bool grows);

/* "Who keeps it" heading ("Growing references" when !grows, as the text) and one list item per named holder
 * (escaped); nothing when none is named. */
void pl_retention_html(FILE *o, const pl_retention_t *rt, bool grows);
