/* tune/pickle: a strict reader of the data-only subset of Python's pickle format (protocols 2..5), enough for
 * PyTorch memory snapshots (torch.cuda.memory._dump_snapshot(): dicts, lists, tuples, str, bytes, int, float,
 * bool, None) and nothing more (docs/tune.md, "Other tools' recordings").
 *
 * Design: a small DOM. The input is parsed by a stack machine into an array of tagged values (16 bytes each);
 * str/bytes point into the caller's buffer (no copies); list/tuple/dict members are recorded as (container, member)
 * cells while parsing, in order, and one counting-sort pass at STOP makes every container's members contiguous.
 * A DOM rather than streaming callbacks because pickle builds containers out of order (an empty dict is created,
 * memoized, and filled by SETITEMS after its values; memo references can share a value between containers), so a
 * streaming consumer would need the same bookkeeping anyway; the DOM costs ~16-30 bytes per value, capped below.
 *
 * Safety: no opcode that imports, calls or builds a Python object is executed: GLOBAL, STACK_GLOBAL, REDUCE, BUILD,
 * INST, OBJ, NEWOBJ(_EX), EXT*, PERSID, buffers and the protocol 0/1 text opcodes are refused with an error naming
 * the opcode and its offset. Memory is bounded by pl_pickle_limits_t (input bytes, DOM bytes, MARK depth); every
 * opcode is O(1) amortised except MARK-closing ones, which are linear in what they pop, so parsing is linear in the
 * input. A memo index may not exceed the number of values read so far (picklers number memo entries as they
 * store them), so the memo stays proportional to the input. Integers must fit int64 (LONG1/LONG4 longer than 8
 * bytes only as pure sign extension).
 * Memo references can make the value graph a DAG or even cyclic (a list that contains itself): walkers must not
 * recurse blindly (the snapshot reader follows a fixed schema path, so it never does).
 * Thread safety: a parsed document is read-only; the functions below are safe on distinct documents.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PL_PICKLE_DEFAULT_MAX_INPUT_BYTES ((size_t)1 << 30) /* 1 GiB */
#define PL_PICKLE_DEFAULT_MAX_MEM_BYTES ((size_t)1 << 30)   /* DOM arrays: values, cells, memo, stack */
#define PL_PICKLE_DEFAULT_MAX_DEPTH 256                      /* open MARKs (container nesting while parsing) */
#define PL_PICKLE_NULL UINT32_MAX                            /* no value */

typedef enum pl_pickle_type {
    PL_PICKLE_NONE = 0,
    PL_PICKLE_BOOL,
    PL_PICKLE_INT,
    PL_PICKLE_FLOAT,
    PL_PICKLE_STR,   /* UTF-8 bytes as stored (not validated) */
    PL_PICKLE_BYTES, /* bytes and bytearray */
    PL_PICKLE_TUPLE,
    PL_PICKLE_LIST,
    PL_PICKLE_DICT,  /* members alternate key, value, in insertion order; duplicate keys are kept (last wins) */
} pl_pickle_type_t;

typedef uint32_t pl_pickle_ref_t; /* index of a value in a document */

typedef struct pl_pickle_limits {
    size_t max_input_bytes; /* 0 = PL_PICKLE_DEFAULT_MAX_INPUT_BYTES; at most 4 GiB - 1 */
    size_t max_mem_bytes;   /* 0 = PL_PICKLE_DEFAULT_MAX_MEM_BYTES */
    size_t max_depth;       /* 0 = PL_PICKLE_DEFAULT_MAX_DEPTH */
} pl_pickle_limits_t;

typedef struct pl_pickle_value {
    uint8_t type;          /* pl_pickle_type_t */
    uint8_t pad[3];
    uint32_t n;            /* STR/BYTES: length; containers: members (dict: 2 x items) */
    union {
        int64_t i;         /* INT, BOOL (0/1) */
        double f;          /* FLOAT */
        uint64_t off;      /* STR/BYTES: offset into the input */
        uint64_t first;    /* containers: index of the first member in members[] (after parsing) */
    } u;
} pl_pickle_value_t;

typedef struct pl_pickle_doc {
    const uint8_t *data;       /* the caller's input (not owned; must outlive the document) */
    size_t len;
    pl_pickle_value_t *values; /* n_values, owned */
    size_t n_values;
    pl_pickle_ref_t *members;  /* n_members, owned: container members, contiguous per container */
    size_t n_members;
    pl_pickle_ref_t root;
    int protocol;
} pl_pickle_doc_t;

/* Parse data[0..len) (one pickle, up to STOP; trailing bytes are an error). Returns 0 and fills *doc, or -EBADMSG
 * (malformed or truncated: err says where and what), -ENOTSUP (a refused opcode or protocol: err names it), -E2BIG
 * (a limit: err names it), -ENOMEM. err holds "offset N: ..." on failure; *doc is written only on success. */
int pl_pickle_parse(const void *data, size_t len, const pl_pickle_limits_t *lim, pl_pickle_doc_t *doc, char *err,
                    size_t err_len);
void pl_pickle_doc_free(pl_pickle_doc_t *doc);

/* Accessors: a ref out of range or of another type reads as NONE / 0 / empty. */
pl_pickle_type_t pl_pickle_type(const pl_pickle_doc_t *doc, pl_pickle_ref_t v);
/* Number of members of a list/tuple, or items of a dict; 0 for anything else. */
size_t pl_pickle_len(const pl_pickle_doc_t *doc, pl_pickle_ref_t v);
/* Member i of a list/tuple; PL_PICKLE_NULL when out of range. */
pl_pickle_ref_t pl_pickle_item(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, size_t i);
/* Key / value of item i of a dict; PL_PICKLE_NULL when out of range. */
pl_pickle_ref_t pl_pickle_dict_key(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, size_t i);
pl_pickle_ref_t pl_pickle_dict_value(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, size_t i);
/* Value of the last item whose key is the str key (linear in the dict's size); PL_PICKLE_NULL when absent. */
pl_pickle_ref_t pl_pickle_dict_get(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, const char *key);
/* INT or BOOL into *out: 0, or -EINVAL for another type. */
int pl_pickle_int(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, int64_t *out);
/* STR or BYTES: pointer into the input and length (not NUL-terminated); NULL for another type. */
const char *pl_pickle_str(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, size_t *len);
/* true when v is a STR equal to s. */
bool pl_pickle_str_eq(const pl_pickle_doc_t *doc, pl_pickle_ref_t v, const char *s);
/* Name of a type ("dict", "int", ...). */
const char *pl_pickle_type_name(pl_pickle_type_t t);
