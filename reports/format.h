/* reports/format: human-readable numbers shared by the diagnosis sentences and the text renderer (binary units:
 * KiB, MiB, GiB, TiB; 3 significant digits; pure functions writing into caller buffers), and the two JSON scalar
 * writers every JSON renderer uses. */
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

/* JSON: s as a string literal (quotes, backslashes and control characters escaped; NULL = ""), and v as a number
 * ("null" when not finite: JSON has no NaN or infinity). */
void pl_format_json_str(FILE *o, const char *s);
void pl_format_json_num(FILE *o, double v);
