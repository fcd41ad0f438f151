/* reports/pysites: naming growing call sites by the Python line that allocated (docs/python-frames.md).
 * Pure string helpers over the trace's pyframe records (file, function, line) plus one file read for the source
 * text. Thread-safe, no global state. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The user's own code: not the standard library, not an installed package (site-packages, dist-packages), not a
 * frozen or generated module ("<frozen os>", "<string>"). */
bool pl_pysite_is_user(const char *file);

/* The short form of a file name for text: the base name of user code, the path below site-packages/ or
 * dist-packages/ for packages, below lib/pythonX.Y/ for the standard library; a pointer into file. */
const char *pl_pysite_short(const char *file);

/* Line `line` of `file`, without indentation or trailing blanks, cut at 160 bytes (malloc'd), or NULL when the
 * file cannot be read, has no such line, or was modified after not_after_ns (CLOCK_REALTIME; 0 = no check: a
 * script edited after the run started may no longer hold the line that ran there). */
char *pl_pysite_source(const char *file, int line, int64_t not_after_ns);
