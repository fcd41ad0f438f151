/* CPython line tables (pylines.c): the line of code unit `lasti` (2-byte units from the start of the bytecode; -1
 * before the first instruction) of a code object, from its table's bytes. Pure, thread-safe, no allocation. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* 3.11+ location table (co_linetable), starting from firstlineno; -1 when the table does not cover lasti. */
int pl_pyframes_line(const uint8_t *table, size_t n, int firstlineno, int lasti);

/* 3.10's co_linetable (PEP 626 pairs); -1 for a range with no line or one the table does not cover; firstlineno
 * for lasti -1. */
int pl_pyframes_line_310(const uint8_t *table, size_t n, int firstlineno, int lasti);

/* 3.9's co_lnotab; always a line (firstlineno before the first entry's address). */
int pl_pyframes_line_lnotab(const uint8_t *table, size_t n, int firstlineno, int lasti);
