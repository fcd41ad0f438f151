/* common/format: human-readable numbers shared by the report's sentences and renderers, plateau tune and the cli
 * (bytes in the report's style, common/units.h PL_UNITS_SIG3; counts; durations; pure functions writing into caller
 * buffers) and the terminal escape. JSON is written by the emitter, common/json.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* "17.0 GiB", "-4.20 MiB", "512 B"; "?" for non-finite. Returns buf. */
char *pl_format_bytes(double bytes, char *buf, size_t size);
/* bytes when is_bytes, else a count with 3 significant digits ("1.24e+03" avoided: "1240"). */
char *pl_format_value(double v, bool is_bytes, char *buf, size_t size);
/* "45 s", "12 min", "3.5 h", "2.1 d"; "?" for non-finite or negative. */
char *pl_format_duration(double seconds, char *buf, size_t size);

/* Terminal text: s with every byte that could drive a terminal escaped, so a name from a trace or a directory
 * (argv[0], a file name, a symbol) prints as what it is. C0 controls and DEL become \n, \t, \r or \xNN; a
 * backslash becomes \\; bytes that are not valid UTF-8, C1 controls (U+0080..U+009F) and the bidirectional
 * overrides (U+202A..U+202E, U+2066..U+2069) become \xNN per byte. Other UTF-8 text is kept. pl_format_escape
 * writes into buf (NUL-terminated; when it does not fit, cut at a whole character and ended with "..."); returns
 * buf. pl_format_esc returns one of 8 thread-local buffers of 16 KiB, reused round-robin: at most 8 results of
 * one thread are valid at a time (enough for one printf). NULL prints as "". */
char *pl_format_escape(const char *s, char *buf, size_t size);
const char *pl_format_esc(const char *s);

