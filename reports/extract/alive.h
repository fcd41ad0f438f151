/* reports/alive: is the process a trace came from still running here? (/proc, the one platform boundary of the
 * reports). Used to say "still running" rather than "killed" of a trace without an end record. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* True when pid exists in this host's /proc, is not a zombie, started no later than the trace did
 * (start_realtime_ns, CLOCK_REALTIME, plus 2 s for the boot time's one-second rounding: a pid reused by a later
 * process started after the traced one ended), and, when its /proc/PID/exe is readable and exe is not "", runs
 * that executable. False when any of it cannot be read (another host's run, hidepid): the caller keeps its
 * "killed or still running". Thread-safe; reads /proc only. */
bool pl_alive_same_process(uint32_t pid, int64_t start_realtime_ns, const char *exe);
