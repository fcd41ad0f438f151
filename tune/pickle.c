/* tune/pickle: strict data-only pickle reader (see pickle.h for the design and the safety rules).
 *
 * Invariants while parsing: every value on the stack, in the memo and in a cell is < n_values; a container's n
 * counts its cells (dict: key and value cells); members are placed contiguously by one stable counting sort at STOP,
 * so a container's members keep the order in which APPEND(S)/SETITEM(S)/TUPLE* added them. All arrays grow by
 * doubling and are charged against max_mem_bytes before they grow.
 */
#include "pickle.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

typedef struct cell {
    uint32_t container, member;
} cell_t;

typedef struct parser {
    const uint8_t *p, *end, *start;
    const pl_pickle_limits_t *lim;
    size_t mem_bytes, max_mem;
    pl_pickle_value_t *values;
    size_t n_values, cap_values;
    cell_t *cells;
    size_t n_cells, cap_cells;
    uint32_t *stack;
    size_t n_stack, cap_stack;
    uint32_t *marks;
    size_t n_marks, max_depth;
    uint32_t *memo;
    size_t cap_memo, n_memo; /* n_memo: entries set (Python's len(memo)) */
    size_t op_off; /* offset of the opcode being run (for messages) */
    pl_pickle_doc_t *doc; /* the document being read: protocol, root (PROTO, STOP) */
    bool stopped;         /* STOP was read */
    char *err;
    size_t err_len;
} parser_t;

static int fail(parser_t *ps, int rc, const char *fmt, ...) {
    if (ps->err && ps->err_len) {
        int n = snprintf(ps->err, ps->err_len, "offset %zu: ", ps->op_off);
        if (n >= 0 && (size_t)n < ps->err_len) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(ps->err + n, ps->err_len - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return rc;
}

/* Grow *arr (elem bytes each) to hold need elements, charging the capacity change to the memory budget. */
static int grow(parser_t *ps, void **arr, size_t *cap, size_t need, size_t elem, const char *what) {
    if (need <= *cap) return 0;
    if (need > (size_t)UINT32_MAX - 1) return fail(ps, -E2BIG, "more than 2^32 %s", what);
    size_t ncap = pl_grow_cap(*cap, need, 64, elem);
    if (!ncap) return fail(ps, -E2BIG, "more than 2^32 %s", what);
    size_t old_bytes = *cap * elem;
    if (ps->mem_bytes - old_bytes + ncap * elem > ps->max_mem) {
        ncap = need; /* the last doubling would pass the budget: try the exact size */
        if (ps->mem_bytes - old_bytes + ncap * elem > ps->max_mem)
            return fail(ps, -E2BIG, "the document needs more than %zu bytes of memory (%s); the limit is "
                        "configurable", ps->max_mem, what);
    }
    void *n = realloc(*arr, ncap * elem);
    if (!n) return fail(ps, -ENOMEM, "out of memory");
    ps->mem_bytes = ps->mem_bytes - old_bytes + ncap * elem;
    *arr = n;
    *cap = ncap;
    return 0;
}

static int new_value(parser_t *ps, pl_pickle_type_t type, uint32_t *out) {
    int rc;
    if (ps->n_values == ps->cap_values &&
        (rc = grow(ps, (void **)&ps->values, &ps->cap_values, ps->n_values + 1, sizeof *ps->values, "values")))
        return rc;
    pl_pickle_value_t *v = &ps->values[ps->n_values];
    memset(v, 0, sizeof *v);
    v->type = (uint8_t)type;
    *out = (uint32_t)ps->n_values++;
    return 0;
}

static int push(parser_t *ps, uint32_t v) {
    int rc;
    if (ps->n_stack == ps->cap_stack &&
        (rc = grow(ps, (void **)&ps->stack, &ps->cap_stack, ps->n_stack + 1, sizeof *ps->stack, "stack entries")))
        return rc;
    ps->stack[ps->n_stack++] = v;
    return 0;
}

static int push_new(parser_t *ps, pl_pickle_type_t type, uint32_t *out) {
    uint32_t v;
    int rc = new_value(ps, type, &v);
    if (!rc) rc = push(ps, v);
    if (!rc && out) *out = v;
    return rc;
}

/* Stack height above the innermost MARK (values an opcode may pop without crossing it). */
static size_t avail(const parser_t *ps) {
    return ps->n_stack - (ps->n_marks ? ps->marks[ps->n_marks - 1] : 0);
}

static int add_cell(parser_t *ps, uint32_t container, uint32_t member) {
    int rc;
    if (ps->n_cells == ps->cap_cells &&
        (rc = grow(ps, (void **)&ps->cells, &ps->cap_cells, ps->n_cells + 1, sizeof *ps->cells, "container members")))
        return rc;
    if (ps->values[container].n == UINT32_MAX) return fail(ps, -E2BIG, "a container with more than 2^32 members");
    ps->cells[ps->n_cells++] = (cell_t){container, member};
    ps->values[container].n++;
    return 0;
}

static int need_bytes(parser_t *ps, uint64_t n, const char *what) {
    if ((uint64_t)(ps->end - ps->p) < n) return fail(ps, -EBADMSG, "truncated %s (%llu bytes needed, %zu left)", what,
                                                     (unsigned long long)n, (size_t)(ps->end - ps->p));
    return 0;
}

static uint64_t rd_le(const uint8_t *b, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static int pop_mark(parser_t *ps, size_t *mark) {
    if (!ps->n_marks) return fail(ps, -EBADMSG, "no MARK on the stack");
    *mark = ps->marks[--ps->n_marks];
    return 0;
}

static int do_int(parser_t *ps, int64_t i) {
    uint32_t v;
    int rc = push_new(ps, PL_PICKLE_INT, &v);
    if (!rc) ps->values[v].u.i = i;
    return rc;
}

/* LONG1/LONG4 payload: n bytes little-endian two's complement; must fit int64. */
static int do_long(parser_t *ps, uint64_t n) {
    int rc = need_bytes(ps, n, "LONG");
    if (rc) return rc;
    const uint8_t *b = ps->p;
    ps->p += n;
    if (n == 0) return do_int(ps, 0);
    size_t k = n < 8 ? (size_t)n : 8;
    uint64_t u = rd_le(b, k);
    bool neg = b[k - 1] & 0x80;
    for (uint64_t i = 8; i < n; i++) /* longer encodings are fine if the rest is sign extension */
        if (b[i] != (neg ? 0xff : 0x00))
            return fail(ps, -EBADMSG, "integer of %llu bytes does not fit 64 bits", (unsigned long long)n);
    if (n > 8 && (bool)(b[n - 1] & 0x80) != neg)
        return fail(ps, -EBADMSG, "integer of %llu bytes does not fit 64 bits", (unsigned long long)n);
    if (neg && k < 8) u |= ~(uint64_t)0 << (8 * k);
    int64_t i;
    memcpy(&i, &u, sizeof i);
    return do_int(ps, i);
}

static int do_blob(parser_t *ps, pl_pickle_type_t type, uint64_t n) {
    int rc = need_bytes(ps, n, type == PL_PICKLE_STR ? "string" : "bytes");
    if (rc) return rc;
    if (n > UINT32_MAX - 1) return fail(ps, -E2BIG, "a string of 4 GiB or more");
    uint32_t v;
    rc = push_new(ps, type, &v);
    if (rc) return rc;
    ps->values[v].n = (uint32_t)n;
    ps->values[v].u.off = (uint64_t)(ps->p - ps->start);
    ps->p += n;
    return 0;
}

static int memo_put(parser_t *ps, uint64_t idx) {
    if (!ps->n_stack || !avail(ps)) return fail(ps, -EBADMSG, "memo store with nothing on the stack");
    /* a pickler numbers memo entries as it stores them, so an index never exceeds the values read so far: this keeps
     * the memo proportional to the input (a 6-byte LONG_BINPUT cannot ask for a 16 GiB table) */
    if (idx > ps->n_values)
        return fail(ps, -EBADMSG, "memo index %llu is beyond the %zu values read so far", (unsigned long long)idx,
                    ps->n_values);
    size_t old = ps->cap_memo;
    int rc = grow(ps, (void **)&ps->memo, &ps->cap_memo, (size_t)idx + 1, sizeof *ps->memo, "memo entries");
    if (rc) return rc;
    for (size_t i = old; i < ps->cap_memo; i++) ps->memo[i] = PL_PICKLE_NULL;
    if (ps->memo[idx] == PL_PICKLE_NULL) ps->n_memo++;
    ps->memo[idx] = ps->stack[ps->n_stack - 1];
    return 0;
}

static int memo_get(parser_t *ps, uint64_t idx) {
    if (idx >= ps->cap_memo || ps->memo[idx] == PL_PICKLE_NULL)
        return fail(ps, -EBADMSG, "memo index %llu was never stored", (unsigned long long)idx);
    return push(ps, ps->memo[idx]);
}

/* Opcodes that would import, call or build Python objects, or that belong to protocols 0/1. */
static const char *refused_name(uint8_t op) {
    switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return NULL;
    }
}

static const char *old_name(uint8_t op) {
    switch (op) {
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'p': return "PUT";
    case 'g': return "GET";
    case 'd': return "DICT";
    case 'l': return "LIST";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    default: return NULL;
    }
}

/* Make the members of every container contiguous: stable counting sort of the cells by container. */
static int finalize(parser_t *ps, pl_pickle_doc_t *doc) {
    uint32_t *members = NULL;
    if (ps->n_cells) {
        if (ps->mem_bytes + ps->n_cells * sizeof *members > ps->max_mem)
            return fail(ps, -E2BIG, "the document needs more than %zu bytes of memory; the limit is configurable",
                        ps->max_mem);
        members = malloc(ps->n_cells * sizeof *members);
        if (!members) return fail(ps, -ENOMEM, "out of memory");
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < ps->n_values; i++) {
        pl_pickle_value_t *v = &ps->values[i];
        if (v->type == PL_PICKLE_TUPLE || v->type == PL_PICKLE_LIST || v->type == PL_PICKLE_DICT) {
            v->u.first = sum; /* used as the write cursor, rewound below */
            sum += v->n;
        }
    }
    for (size_t i = 0; i < ps->n_cells; i++) members[ps->values[ps->cells[i].container].u.first++] = ps->cells[i].member;
    for (size_t i = 0; i < ps->n_values; i++) {
        pl_pickle_value_t *v = &ps->values[i];
        if (v->type == PL_PICKLE_TUPLE || v->type == PL_PICKLE_LIST || v->type == PL_PICKLE_DICT) v->u.first -= v->n;
    }
    doc->members = members;
    doc->n_members = ps->n_cells;
    return 0;
}

/* Opcode handlers: one per opcode or family, each reads its argument bytes (ps->p is past the opcode) and returns 0
 * or a negative errno through fail(). step() dispatches with a switch whose cases pass each family's constants (an
 * argument's width, a value's type), so the compiler inlines the handlers back into one jump table with constant
 * widths: the reader is hot on multi-GB snapshots. */
static int op_proto(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 1, "PROTO"))) return rc;
    if (ps->op_off != 0) return fail(ps, -EBADMSG, "PROTO after the start");
    ps->doc->protocol = *ps->p++;
    if (ps->doc->protocol < 2 || ps->doc->protocol > 5)
        return fail(ps, -ENOTSUP, "pickle protocol %d is not supported (2..5 are)", ps->doc->protocol);
    return 0;
}

/* FRAME: a length prefix for buffering; opcodes are read the same with or without it */
static int op_frame(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 8, "FRAME"))) return rc;
    uint64_t n = rd_le(ps->p, 8);
    ps->p += 8;
    if (n > (uint64_t)(ps->end - ps->p))
        return fail(ps, -EBADMSG, "truncated frame (%llu bytes announced, %zu left)", (unsigned long long)n,
                    (size_t)(ps->end - ps->p));
    return 0;
}

/* NEWTRUE, NEWFALSE */
static int op_bool(parser_t *ps, bool value) {
    uint32_t v;
    int rc = push_new(ps, PL_PICKLE_BOOL, &v);
    if (!rc) ps->values[v].u.i = value;
    return rc;
}

static int op_mark(parser_t *ps) {
    if (ps->n_marks >= ps->max_depth)
        return fail(ps, -E2BIG, "more than %zu nested MARKs (the depth limit)", ps->max_depth);
    ps->marks[ps->n_marks++] = (uint32_t)ps->n_stack;
    return 0;
}

/* POP: the top value, or the top mark when nothing is above it */
static int op_pop(parser_t *ps) {
    size_t mark = 0;
    if (avail(ps)) {
        ps->n_stack--;
        return 0;
    }
    return pop_mark(ps, &mark);
}

static int op_pop_mark(parser_t *ps) {
    size_t mark = 0;
    int rc = pop_mark(ps, &mark);
    if (!rc) ps->n_stack = mark;
    return rc;
}

static int op_dup(parser_t *ps) {
    if (!avail(ps)) return fail(ps, -EBADMSG, "DUP on an empty stack");
    return push(ps, ps->stack[ps->n_stack - 1]);
}

static int op_append(parser_t *ps) {
    if (avail(ps) < 2) return fail(ps, -EBADMSG, "APPEND needs a list and a value");
    uint32_t v = ps->stack[ps->n_stack - 2];
    if (ps->values[v].type != PL_PICKLE_LIST)
        return fail(ps, -EBADMSG, "APPEND to a %s", pl_pickle_type_name(ps->values[v].type));
    int rc = add_cell(ps, v, ps->stack[ps->n_stack - 1]);
    ps->n_stack--;
    return rc;
}

static int op_setitem(parser_t *ps) {
    if (avail(ps) < 3) return fail(ps, -EBADMSG, "SETITEM needs a dict, a key and a value");
    uint32_t v = ps->stack[ps->n_stack - 3];
    if (ps->values[v].type != PL_PICKLE_DICT)
        return fail(ps, -EBADMSG, "SETITEM on a %s", pl_pickle_type_name(ps->values[v].type));
    int rc = add_cell(ps, v, ps->stack[ps->n_stack - 2]);
    if (!rc) rc = add_cell(ps, v, ps->stack[ps->n_stack - 1]);
    ps->n_stack -= 2;
    return rc;
}

/* The MARK of APPENDS or SETITEMS, popped, with a value below it (the container) that is not below the MARK before
 * it. */
static int container_mark(parser_t *ps, const char *name, const char *what, size_t *mark) {
    int rc = pop_mark(ps, mark);
    if (rc) return rc;
    if (*mark == 0 || *mark - 1 < (ps->n_marks ? ps->marks[ps->n_marks - 1] : 0))
        return fail(ps, -EBADMSG, "%s without a %s below the MARK", name, what);
    return 0;
}

/* Everything above the mark into container v, then off the stack. */
static int extend(parser_t *ps, uint32_t v, size_t mark) {
    int rc = 0;
    for (size_t i = mark; i < ps->n_stack && !rc; i++) rc = add_cell(ps, v, ps->stack[i]);
    ps->n_stack = mark;
    return rc;
}

static int op_appends(parser_t *ps) {
    size_t mark = 0;
    int rc = container_mark(ps, "APPENDS", "list", &mark);
    if (rc) return rc;
    uint32_t v = ps->stack[mark - 1];
    if (ps->values[v].type != PL_PICKLE_LIST)
        return fail(ps, -EBADMSG, "APPENDS to a %s", pl_pickle_type_name(ps->values[v].type));
    return extend(ps, v, mark);
}

static int op_setitems(parser_t *ps) {
    size_t mark = 0;
    int rc = container_mark(ps, "SETITEMS", "dict", &mark);
    if (rc) return rc;
    if ((ps->n_stack - mark) % 2) return fail(ps, -EBADMSG, "SETITEMS with an odd number of keys and values");
    uint32_t v = ps->stack[mark - 1];
    if (ps->values[v].type != PL_PICKLE_DICT)
        return fail(ps, -EBADMSG, "SETITEMS on a %s", pl_pickle_type_name(ps->values[v].type));
    return extend(ps, v, mark);
}

/* The stack values from `from` up become a new tuple in their place. */
static int make_tuple(parser_t *ps, size_t from) {
    uint32_t v;
    int rc;
    if ((rc = new_value(ps, PL_PICKLE_TUPLE, &v))) return rc;
    for (size_t i = from; i < ps->n_stack && !rc; i++) rc = add_cell(ps, v, ps->stack[i]);
    ps->n_stack = from;
    if (!rc) rc = push(ps, v);
    return rc;
}

static int op_tuple(parser_t *ps) {
    size_t mark = 0;
    int rc = pop_mark(ps, &mark);
    return rc ? rc : make_tuple(ps, mark);
}

/* TUPLE1, TUPLE2, TUPLE3 */
static int op_tuple_n(parser_t *ps, size_t n) {
    if (avail(ps) < n) return fail(ps, -EBADMSG, "TUPLE%zu needs %zu values", n, n);
    return make_tuple(ps, ps->n_stack - n);
}

/* BININT1 and BININT2: unsigned */
static int op_binint1(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 1, "BININT1"))) return rc;
    return do_int(ps, *ps->p++);
}

static int op_binint2(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 2, "BININT2"))) return rc;
    int64_t i = (int64_t)rd_le(ps->p, 2);
    ps->p += 2;
    return do_int(ps, i);
}

/* BININT: signed 32-bit */
static int op_binint(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 4, "BININT"))) return rc;
    uint32_t u = (uint32_t)rd_le(ps->p, 4);
    int32_t i;
    memcpy(&i, &u, sizeof i);
    ps->p += 4;
    return do_int(ps, i);
}

static int op_long1(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 1, "LONG1"))) return rc;
    return do_long(ps, *ps->p++);
}

static int op_long4(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 4, "LONG4"))) return rc;
    uint32_t n = (uint32_t)rd_le(ps->p, 4);
    ps->p += 4;
    if (n & 0x80000000u) return fail(ps, -EBADMSG, "LONG4 with a negative length");
    return do_long(ps, n);
}

/* BINFLOAT: big-endian IEEE 754 double */
static int op_binfloat(parser_t *ps) {
    uint32_t v;
    int rc;
    if ((rc = need_bytes(ps, 8, "BINFLOAT"))) return rc;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u = (u << 8) | ps->p[i];
    ps->p += 8;
    if (!(rc = push_new(ps, PL_PICKLE_FLOAT, &v))) memcpy(&ps->values[v].u.f, &u, sizeof u);
    return rc;
}

/* A string or bytes whose length takes width bytes: SHORT_BINUNICODE, SHORT_BINBYTES (1); BINUNICODE, BINBYTES
 * (4); BINUNICODE8, BINBYTES8, BYTEARRAY8 (8) */
static int op_blob(parser_t *ps, size_t width, pl_pickle_type_t type) {
    int rc;
    if ((rc = need_bytes(ps, width, "length"))) return rc;
    uint64_t n = rd_le(ps->p, width);
    ps->p += width;
    return do_blob(ps, type, n);
}

/* The memo opcodes: BINPUT and BINGET take a 1-byte index, LONG_BINPUT and LONG_BINGET a 4-byte one (one handler
 * each, so each reads a constant width: they are most of a snapshot's opcodes). */
static int op_binput(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 1, "BINPUT"))) return rc;
    return memo_put(ps, *ps->p++);
}

static int op_long_binput(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 4, "LONG_BINPUT"))) return rc;
    uint64_t idx = rd_le(ps->p, 4);
    ps->p += 4;
    return memo_put(ps, idx);
}

static int op_binget(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 1, "BINGET"))) return rc;
    return memo_get(ps, *ps->p++);
}

static int op_long_binget(parser_t *ps) {
    int rc;
    if ((rc = need_bytes(ps, 4, "LONG_BINGET"))) return rc;
    uint64_t idx = rd_le(ps->p, 4);
    ps->p += 4;
    return memo_get(ps, idx);
}

static int op_stop(parser_t *ps) {
    if (ps->n_marks) return fail(ps, -EBADMSG, "STOP with %zu open MARKs", ps->n_marks);
    if (ps->n_stack != 1) return fail(ps, -EBADMSG, "STOP with %zu values on the stack (1 expected)", ps->n_stack);
    if (ps->p != ps->end) return fail(ps, -EBADMSG, "%zu bytes after STOP", (size_t)(ps->end - ps->p));
    ps->doc->root = ps->stack[0];
    ps->stopped = true;
    return finalize(ps, ps->doc);
}

static int op_refused(parser_t *ps, uint8_t op) {
    const char *name = refused_name(op);
    if (name)
        return fail(ps, -ENOTSUP, "opcode %s (0x%02x) refused: only plain data (dict, list, tuple, str, bytes, int, "
                    "float, bool, None) is read, never code that imports or builds Python objects", name, op);
    name = old_name(op);
    if (name)
        return fail(ps, -ENOTSUP, "opcode %s (0x%02x) is not supported (protocol 0/1 text opcodes and sets are not "
                    "part of a memory snapshot)", name, op);
    return fail(ps, -EBADMSG, "unknown opcode 0x%02x", op);
}

/* One opcode (already consumed) through its handler. */
static int step(parser_t *ps, uint8_t op) {
    switch (op) {
    case 0x80: return op_proto(ps);
    case 0x95: return op_frame(ps);
    case '}': return push_new(ps, PL_PICKLE_DICT, NULL);  /* EMPTY_DICT */
    case ']': return push_new(ps, PL_PICKLE_LIST, NULL);  /* EMPTY_LIST */
    case ')': return push_new(ps, PL_PICKLE_TUPLE, NULL); /* EMPTY_TUPLE */
    case 'N': return push_new(ps, PL_PICKLE_NONE, NULL);  /* NONE */
    case 0x88: return op_bool(ps, true);
    case 0x89: return op_bool(ps, false);
    case '(': return op_mark(ps);
    case '0': return op_pop(ps);
    case '1': return op_pop_mark(ps);
    case '2': return op_dup(ps);
    case 'a': return op_append(ps);
    case 'e': return op_appends(ps);
    case 's': return op_setitem(ps);
    case 'u': return op_setitems(ps);
    case 't': return op_tuple(ps);
    case 0x85: return op_tuple_n(ps, 1);
    case 0x86: return op_tuple_n(ps, 2);
    case 0x87: return op_tuple_n(ps, 3);
    case 'K': return op_binint1(ps);
    case 'M': return op_binint2(ps);
    case 'J': return op_binint(ps);
    case 0x8a: return op_long1(ps);
    case 0x8b: return op_long4(ps);
    case 'G': return op_binfloat(ps);
    case 0x8c: return op_blob(ps, 1, PL_PICKLE_STR);   /* SHORT_BINUNICODE */
    case 'C': return op_blob(ps, 1, PL_PICKLE_BYTES);  /* SHORT_BINBYTES */
    case 'X': return op_blob(ps, 4, PL_PICKLE_STR);    /* BINUNICODE */
    case 'B': return op_blob(ps, 4, PL_PICKLE_BYTES);  /* BINBYTES */
    case 0x8d: return op_blob(ps, 8, PL_PICKLE_STR);   /* BINUNICODE8 */
    case 0x8e: return op_blob(ps, 8, PL_PICKLE_BYTES); /* BINBYTES8 */
    case 0x96: return op_blob(ps, 8, PL_PICKLE_BYTES); /* BYTEARRAY8 */
    case 0x94: return memo_put(ps, ps->n_memo); /* MEMOIZE: at len(memo), the entries stored so far, as Python */
    case 'q': return op_binput(ps);
    case 'r': return op_long_binput(ps);
    case 'h': return op_binget(ps);
    case 'j': return op_long_binget(ps);
    case '.': return op_stop(ps);
    default: return op_refused(ps, op);
    }
}

static int run(parser_t *ps) {
    if (ps->p == ps->end) return fail(ps, -EBADMSG, "empty input");
    if (ps->p[0] != 0x80)
        return fail(ps, -ENOTSUP, "not a pickle of protocol 2..5 (first byte 0x%02x, not PROTO 0x80)", ps->p[0]);
    while (ps->p < ps->end) {
        ps->op_off = (size_t)(ps->p - ps->start);
        int rc = step(ps, *ps->p++);
        if (rc || ps->stopped) return rc;
    }
    ps->op_off = (size_t)(ps->p - ps->start);
    return fail(ps, -EBADMSG, "truncated: the input ends before STOP");
}

int pl_pickle_parse(const void *data, size_t len, const pl_pickle_limits_t *lim, pl_pickle_doc_t *doc, char *err,
                    size_t err_len) {
    pl_pickle_limits_t l = lim ? *lim : (pl_pickle_limits_t){0};
    if (!l.max_input_bytes) l.max_input_bytes = PL_PICKLE_DEFAULT_MAX_INPUT_BYTES;
    if (l.max_input_bytes > (size_t)UINT32_MAX - 1) l.max_input_bytes = (size_t)UINT32_MAX - 1;
    if (!l.max_mem_bytes) l.max_mem_bytes = PL_PICKLE_DEFAULT_MAX_MEM_BYTES;
    if (!l.max_depth) l.max_depth = PL_PICKLE_DEFAULT_MAX_DEPTH;
    parser_t ps = {.p = data, .start = data, .end = (const uint8_t *)data + len, .lim = &l,
                   .max_mem = l.max_mem_bytes, .max_depth = l.max_depth, .err = err, .err_len = err_len};
    pl_pickle_doc_t d = {.data = data, .len = len, .root = PL_PICKLE_NULL};
    ps.doc = &d;
    if (len > l.max_input_bytes) {
        if (err && err_len)
            snprintf(err, err_len, "input of %zu bytes is larger than the limit of %zu bytes", len, l.max_input_bytes);
        return -E2BIG;
    }
    int rc;
    if (l.max_depth * sizeof *ps.marks > l.max_mem_bytes) {
        rc = fail(&ps, -E2BIG, "the depth limit does not fit the memory limit");
        goto out;
    }
    ps.marks = malloc(l.max_depth * sizeof *ps.marks);
    if (!ps.marks) {
        rc = fail(&ps, -ENOMEM, "out of memory");
        goto out;
    }
    ps.mem_bytes = l.max_depth * sizeof *ps.marks;
    rc = run(&ps);
out:
    free(ps.marks);
    free(ps.stack);
    free(ps.memo);
    free(ps.cells);
    if (rc) {
        free(ps.values);
        free(d.members);
        return rc;
    }
    d.values = ps.values;
    d.n_values = ps.n_values;
    *doc = d;
    return 0;
}

void pl_pickle_doc_free(pl_pickle_doc_t *doc) {
    free(doc->values);
    free(doc->members);
    memset(doc, 0, sizeof *doc);
    doc->root = PL_PICKLE_NULL;
}

static const pl_pickle_value_t *val(const pl_pickle_doc_t *doc, pl_pickle_ref_t v) {
    return v < doc->n_values ? &doc->values[v] : NULL;
}

pl_pickle_type_t pl_pickle_type(const pl_pickle_doc_t *doc, pl_pickle_ref_t v) {
    const pl_pickle_value_t *p = val(doc, v);
    return p ? (pl_pickle_type_t)p->type : PL_PICKLE_NONE;
}

size_t pl_pickle_len(const pl_pickle_doc_t *doc, pl_pickle_ref_t v) {
    const pl_pickle_value_t *p = val(doc, v);
    if (!p) return 0;
    switch (p->type) {
    case PL_PICKLE_TUPLE:
    case PL_PICKLE_LIST: return p->n;
    case PL_PICKLE_DICT: return p->n / 2;
    default: return 0;
    }
}

pl_pickle_ref_t pl_pickle_item(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, size_t i) {
    const pl_pickle_value_t *p = val(doc, v);
    if (!p || (p->type != PL_PICKLE_TUPLE && p->type != PL_PICKLE_LIST) || i >= p->n) return PL_PICKLE_NULL;
    return doc->members[p->u.first + i];
}

pl_pickle_ref_t pl_pickle_dict_key(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, size_t i) {
    const pl_pickle_value_t *p = val(doc, v);
    if (!p || p->type != PL_PICKLE_DICT || i >= p->n / 2) return PL_PICKLE_NULL;
    return doc->members[p->u.first + 2 * i];
}

pl_pickle_ref_t pl_pickle_dict_value(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, size_t i) {
    const pl_pickle_value_t *p = val(doc, v);
    if (!p || p->type != PL_PICKLE_DICT || i >= p->n / 2) return PL_PICKLE_NULL;
    return doc->members[p->u.first + 2 * i + 1];
}

pl_pickle_ref_t pl_pickle_dict_get(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, const char *key) {
    size_t n = pl_pickle_len(doc, v);
    if (pl_pickle_type(doc, v) != PL_PICKLE_DICT) return PL_PICKLE_NULL;
    for (size_t i = n; i-- > 0;)
        if (pl_pickle_str_eq(doc, pl_pickle_dict_key(doc, v, i), key)) return pl_pickle_dict_value(doc, v, i);
    return PL_PICKLE_NULL;
}

int pl_pickle_int(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, int64_t *out) {
    const pl_pickle_value_t *p = val(doc, v);
    if (!p || (p->type != PL_PICKLE_INT && p->type != PL_PICKLE_BOOL)) return -EINVAL;
    *out = p->u.i;
    return 0;
}

const char *pl_pickle_str(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, size_t *len) {
    const pl_pickle_value_t *p = val(doc, v);
    if (!p || (p->type != PL_PICKLE_STR && p->type != PL_PICKLE_BYTES)) return NULL;
    *len = p->n;
    return (const char *)doc->data + p->u.off;
}

bool pl_pickle_str_eq(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, const char *s) {
    const pl_pickle_value_t *p = val(doc, v);
    if (!p || p->type != PL_PICKLE_STR) return false;
    size_t n = strlen(s);
    return p->n == n && !memcmp(doc->data + p->u.off, s, n);
}

const char *pl_pickle_type_name(pl_pickle_type_t t) {
    static const char *names[] = {"None", "bool", "int", "float", "str", "bytes", "tuple", "list", "dict"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}
