/* common/json: the one JSON emitter behind every JSON document plateau writes (the report, its "run" object, compare,
 * tune and replay, Chrome trace events, the allocator snapshot). It tracks nesting: the comma between items, the
 * ": " after a key, where a container's lines are indented, and that every container is closed. The idea is
 * jemalloc's emitter.h (a writer that owns the commas so callers never count items); the layout rules below are
 * plateau's, chosen to reproduce the documents byte for byte as they were written before (their goldens are the
 * contract).
 *
 * Layout. A container is either inline (items on one line: `{"a": 1, "b": 2}`) or a block (`{`, then each item on
 * its own line indented two spaces deeper than the line the container opened on, then the closing bracket on a
 * line of its own at the opening line's indent; an empty block is `{}` / `[]`). pl_json_break(j, n) puts the next
 * item (or the closing bracket) of any container on a new line indented n spaces: how a long inline object wraps.
 * Compact style (PL_JSON_COMPACT) writes "," and ":" without the space.
 *
 * Scalars: strings escape '"', '\\', \n and \t as two characters and every other C0 control and DEL as \u00XX;
 * bytes >= 0x80 are copied as they are (callers that may hold cut or invalid UTF-8 repair it first, e.g.
 * pl_export_utf8). Numbers: pl_json_num prints %.10g and null when not finite (JSON has no NaN or infinity);
 * pl_json_numf prints any printf format for a number the document fixes otherwise ("%.6f", "%lld.%03lld") as it
 * comes (keeping it a JSON number, e.g. finite for %f, is the caller's part).
 *
 * Not thread-safe: one emitter per document (one top-level value), on the caller's stack. Misuse (a value where a
 * key is due, a key in an array, a second top-level value, more than PL_JSON_MAX_DEPTH levels, an end with nothing
 * open) writes nothing more and is reported by pl_json_done; so is a stream error. The emitter never allocates. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#define PL_JSON_MAX_DEPTH 16
#define PL_JSON_COMPACT 1u    /* "a":1,"b":2 rather than "a": 1, "b": 2 */
#define PL_JSON_NO_NEWLINE 2u /* no newline after the document (a value handed back in a buffer) */

typedef struct pl_json_level {
    char close;        /* '}' or ']' */
    bool block;        /* one item per line */
    bool any;          /* an item was written */
    bool want_value;   /* objects: a key was written, its value is due */
    int item_indent;   /* blocks: spaces before each item */
    int close_indent;  /* blocks: spaces before the closing bracket */
} pl_json_level_t;

typedef struct pl_json {
    FILE *o;
    unsigned flags;     /* PL_JSON_COMPACT, PL_JSON_NO_NEWLINE */
    int depth;          /* open containers; lv[depth - 1] is the innermost */
    int line_indent;    /* spaces that began the current output line */
    int brk;            /* pending pl_json_break indent, -1 for none */
    bool any_top;       /* the top-level value was started: a document holds one */
    bool misuse;        /* a call broke the nesting rules: pl_json_done fails */
    pl_json_level_t lv[PL_JSON_MAX_DEPTH];
} pl_json_t;

/* Starts a document on o (not owned; nothing is written yet). */
void pl_json_init(pl_json_t *j, FILE *o, unsigned flags);
/* 0 when every container was closed and o has no error; -EINVAL after misuse or with containers open; -EIO when
 * the stream failed. */
int pl_json_done(const pl_json_t *j);

/* Open a container as the next value: inline, or a block (see Layout). */
void pl_json_object(pl_json_t *j);
void pl_json_array(pl_json_t *j);
void pl_json_object_block(pl_json_t *j);
void pl_json_array_block(pl_json_t *j);
/* Closes the innermost container. Closing the outermost one ends the document with a newline (unless
 * PL_JSON_NO_NEWLINE). */
void pl_json_end(pl_json_t *j);
/* The next item or closing bracket goes on a new line indented n spaces (n >= 0). */
void pl_json_break(pl_json_t *j, int n);

/* An object's key; its value is the next call. */
void pl_json_key(pl_json_t *j, const char *k);
/* Values. NULL strings print as "" (pl_json_str) or null (pl_json_str_or_null). */
void pl_json_str(pl_json_t *j, const char *s);
void pl_json_str_or_null(pl_json_t *j, const char *s);
void pl_json_num(pl_json_t *j, double v);
void pl_json_numf(pl_json_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pl_json_int(pl_json_t *j, long long v);
void pl_json_uint(pl_json_t *j, unsigned long long v);
void pl_json_bool(pl_json_t *j, bool v);
void pl_json_null(pl_json_t *j);

/* A key and its value in one call. */
void pl_json_kstr(pl_json_t *j, const char *k, const char *s);
void pl_json_knum(pl_json_t *j, const char *k, double v);
void pl_json_kint(pl_json_t *j, const char *k, long long v);
void pl_json_kuint(pl_json_t *j, const char *k, unsigned long long v);
void pl_json_kbool(pl_json_t *j, const char *k, bool v);

/* s as a JSON string literal on o, outside any document (the escaping described above; NULL = ""). */
void pl_json_write_str(FILE *o, const char *s);
