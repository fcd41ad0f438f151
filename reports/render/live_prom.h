/* reports/live_prom: the live verdict as a Prometheus text-format file (node_exporter's textfile collector), for
 * clusters that alert on Prometheus: `plateau watch --prometheus FILE` (docs/live.md, "Prometheus").
 * One sample set per process with steps (a trainer, each rank) and for the shown process when none has steps; the
 * metric names and labels are in docs/live.md. Not thread-safe per pl_live_t.
 */
#pragma once

#include <stdio.h>

#include "live.h"

/* Write the exposition of l's current state to out: run_label is the `run` label's value (the run directory as
 * given), now_s the `plateau_last_update_timestamp_seconds` value (Unix time). Label values are written as valid
 * UTF-8 with `\`, `"` and newlines escaped. Returns 0, -ENOMEM, or -EIO when out failed. */
int pl_live_prom_write(pl_live_t *l, const char *run_label, double now_s, FILE *out);
