/* reports/format: human-readable numbers shared by the diagnosis sentences and the text renderer.
 * Binary units (KiB, MiB, GiB, TiB), 3 significant digits; pure functions writing into caller buffers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* "17.0 GiB", "-4.20 MiB", "512 B"; "?" for non-finite. Returns buf. */
char *pl_format_bytes(double bytes, char *buf, size_t size);
/* bytes when is_bytes, else a count with 3 significant digits ("1.24e+03" avoided: "1240"). */
char *pl_format_value(double v, bool is_bytes, char *buf, size_t size);
/* "45 s", "12 min", "3.5 h", "2.1 d"; "?" for non-finite or negative. */
char *pl_format_duration(double seconds, char *buf, size_t size);
