/* CPython line tables: the line of an instruction from a code object's table, in each format the frame reader
 * (pyframes.c, docs/python-frames.md) meets: 3.9's co_lnotab, 3.10's PEP 626 co_linetable, 3.11+'s location
 * table. Pure functions over bytes already copied out of the interpreter (no pointer into it), each table walked
 * once, bounded by its length; checked against CPython's own decoding by tests/preload/test_pylines.py. */
#include "pylines.h"

static uint32_t varint(const uint8_t *t, size_t n, size_t *i) {
    if (*i >= n) return 0;
    uint8_t b = t[(*i)++];
    uint32_t v = b & 63;
    unsigned shift = 0;
    while ((b & 64) && *i < n && shift < 24) {
        b = t[(*i)++];
        shift += 6;
        v |= (uint32_t)(b & 63) << shift;
    }
    return v;
}

static int svarint(const uint8_t *t, size_t n, size_t *i) {
    uint32_t v = varint(t, n, i);
    return (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
}

/* Line of code unit `lasti` from a 3.11+ location table (Objects/locations.md in CPython: entries of a start
 * byte 1cccclll (code c, length l+1 code units) and code-dependent varint payloads). A "no location" entry keeps
 * the line before it. -1 when the table does not cover lasti. */
int pl_pyframes_line(const uint8_t *t, size_t n, int firstlineno, int lasti) {
    int line = firstlineno, addr = 0;
    size_t i = 0;
    while (i < n) {
        uint8_t b = t[i++];
        if (!(b & 0x80)) return -1;
        int code = (b >> 3) & 15, len = (b & 7) + 1;
        switch (code) {
        case 15: break;                                  /* no location */
        case 14:                                         /* long form */
            line += svarint(t, n, &i);
            varint(t, n, &i), varint(t, n, &i), varint(t, n, &i);
            break;
        case 13: line += svarint(t, n, &i); break;      /* no columns */
        case 10: case 11: case 12: line += code - 10; i += 2; break; /* one line, two column bytes */
        default: i += 1; break;                          /* short form: same line, one column byte */
        }
        if (lasti < addr + len) return line;
        addr += len;
    }
    return -1;
}

/* Line of code unit `lasti` from 3.10's co_linetable (PEP 626, Objects/lnotab_notes.txt in CPython 3.10): (byte
 * delta: unsigned, line delta: signed) pairs, a line delta of -128 meaning "no line" for that range without moving
 * the running line. -1 for such a range or one the table does not cover; firstlineno before the first instruction
 * (lasti -1), as PyCode_Addr2Line. */
int pl_pyframes_line_310(const uint8_t *t, size_t n, int firstlineno, int lasti) {
    if (lasti < 0) return firstlineno;
    int addr = lasti * 2, start = 0, line = firstlineno;
    for (size_t i = 0; i + 1 < n; i += 2) {
        int end = start + t[i], delta = (int8_t)t[i + 1], this_line = -1;
        if (delta != -128) this_line = line += delta;
        if (addr >= start && addr < end) return this_line;
        start = end;
    }
    return -1;
}

/* Line of code unit `lasti` from 3.9's co_lnotab: (byte delta, line delta) pairs, each line delta applying from
 * its address on (PyCode_Addr2Line of 3.9). Always a line: the last one covers the rest of the code. */
int pl_pyframes_line_lnotab(const uint8_t *t, size_t n, int firstlineno, int lasti) {
    int addr = 0, line = firstlineno;
    for (size_t i = 0; i + 1 < n; i += 2) {
        addr += t[i];
        if (addr > lasti * 2) break;
        line += (int8_t)t[i + 1];
    }
    return line;
}

