/* reports/ingest: the one reader of plateau's traces.
 *
 * Every consumer of a trace (the report's extraction, period detection, the live verdict of `plateau watch`, the
 * PyTorch snapshot export, tune's replay) reads it through here: pl_ingest_record is the one switch over record
 * types, and the tables every consumer needs to name a call stack live here once: stacks (id -> native pcs and
 * Python frame ids), native frames (pc -> module, offsets, dladdr symbol), modules (id -> file and identity, as the
 * offline symboliser takes them) and Python frames (id -> file, function, line). A consumer fills a
 * pl_ingest_handlers_t with the record kinds it wants; the table records (stack, frame, module, pyframe) are taken
 * by the tables first and then handed to the consumer's handler, if it has one.
 *
 * Bounds (a trace is untrusted input): at most PL_INGEST_MAX_STACKS stacks holding PL_INGEST_MAX_POOL frame ids in
 * all, PL_INGEST_MAX_FRAMES native frames and as many Python frames, PL_INGEST_MAX_MODULES modules; what does not
 * fit is left out (a stack left out reads as unknown). A frame's symbol is kept in full up to
 * PL_INGEST_SYMBOL_MAX bytes while all symbols stay within PL_INGEST_SYMBOLS_BUDGET, then cut to
 * PL_INGEST_SYMBOL_CUT (a mangled name cut short no longer demangles, so the budget is generous). The first record
 * for an id wins. Not thread-safe per ingest.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

#include "symbols.h"

#define PL_INGEST_MAX_STACKS (1u << 16)
#define PL_INGEST_MAX_POOL (1u << 21)
#define PL_INGEST_MAX_FRAMES (1u << 16)
#define PL_INGEST_MAX_MODULES 4096u
#define PL_INGEST_MODULE_PATH_MAX 1023u
#define PL_INGEST_BUILD_ID_MAX 128u
#define PL_INGEST_SYMBOL_MAX 4096u
#define PL_INGEST_SYMBOL_CUT 95u
#define PL_INGEST_SYMBOLS_BUDGET ((size_t)32 << 20)

typedef struct pl_ingest pl_ingest_t;

/* One handler per record kind; NULL: not wanted. ctx is the consumer's. A handler's non-zero return stops
 * pl_ingest_read and is returned by it (and by pl_ingest_record). */
typedef int (*pl_ingest_fn)(void *ctx, const pl_trace_record_t *rec);
typedef struct pl_ingest_handlers {
    pl_ingest_fn process;      /* PL_REC_PROCESS_START */
    pl_ingest_fn end;          /* PL_REC_PROCESS_END, PL_REC_EXEC (rec->type tells them apart) */
    pl_ingest_fn step;
    pl_ingest_fn mark;
    pl_ingest_fn rss;
    pl_ingest_fn heap;
    pl_ingest_fn host_alloc;
    pl_ingest_fn host_free;
    pl_ingest_fn device_alloc;
    pl_ingest_fn device_free;
    pl_ingest_fn device_map;
    pl_ingest_fn device_unmap;
    pl_ingest_fn device_oom;
    pl_ingest_fn alloc_stats;
    pl_ingest_fn stack;        /* after the table took it */
    pl_ingest_fn frame;        /* after the table took it */
    pl_ingest_fn module;       /* after the table took it */
    pl_ingest_fn pyframe;      /* after the table took it */
    pl_ingest_fn thread_name;
    pl_ingest_fn lost;
    pl_ingest_fn retention;
    pl_ingest_fn aggregate;
} pl_ingest_handlers_t;

/* What the tables keep of one stack: native pcs and Python frame ids, innermost first. */
typedef struct pl_ingest_stack {
    const uint64_t *pcs;
    const uint32_t *py;
    uint32_t n_pcs, n_py;
    uint32_t index;            /* in [0, pl_ingest_n_stacks): for a consumer's per-stack array */
} pl_ingest_stack_t;

typedef struct pl_ingest_frame {
    uint32_t module_id;
    uint64_t module_offset, symbol_offset;
    const char *symbol;        /* dladdr's name, "" none (cut as above) */
} pl_ingest_frame_t;

typedef struct pl_ingest_pyframe {
    const char *file, *function;
    int32_t line;
} pl_ingest_pyframe_t;

/* An empty set of tables; NULL when out of memory. A consumer that names no stack passes NULL instead of one. */
pl_ingest_t *pl_ingest_new(void);
void pl_ingest_free(pl_ingest_t *in);

/* The one switch: the tables take what is theirs, then the record goes to its handler. 0, -ENOMEM (the tables), or a
 * handler's return. in may be NULL (no tables: a consumer that names no stack) here and in pl_ingest_read. */
int pl_ingest_record(pl_ingest_t *in, const pl_trace_record_t *rec, const pl_ingest_handlers_t *h, void *ctx);

/* Every record of rd through pl_ingest_record, until the end of the trace or the first non-zero return of
 * pl_ingest_record, which is returned (0 otherwise). *end (NULL: not wanted) gets what pl_trace_next returned last:
 * 0 at a clean end, negative for damage or I/O (every earlier record was handed on), 1 when a handler stopped it. */
int pl_ingest_read(pl_ingest_t *in, pl_trace_reader_t *rd, const pl_ingest_handlers_t *h, void *ctx, int *end);

/* The tables. NULL when absent (never recorded, left out by the bounds, or id 0). */
bool pl_ingest_stack(const pl_ingest_t *in, uint32_t stack_id, pl_ingest_stack_t *out);
const pl_ingest_frame_t *pl_ingest_frame(const pl_ingest_t *in, uint64_t pc);
const pl_sym_module_t *pl_ingest_module(const pl_ingest_t *in, uint32_t module_id);
const pl_ingest_pyframe_t *pl_ingest_pyframe(const pl_ingest_t *in, uint32_t pyframe_id);
size_t pl_ingest_n_stacks(const pl_ingest_t *in);

/* The base name of a module's path ("?" for NULL), and whether it is plateau's own (libplateau*). */
const char *pl_ingest_module_base(const pl_sym_module_t *m);
bool pl_ingest_module_own(const pl_sym_module_t *m);

/* A native frame named by its module file (the offline symboliser, sy; NULL: not asked): PL_SYM_OK with *name and
 * *offset set, else the symboliser's status (PL_SYM_NO_FILE when the pc or its module is unknown); *frame and
 * *module are the tables' entries (NULL unknown). */
pl_sym_status_t pl_ingest_lookup(const pl_ingest_t *in, pl_symbols_t *sy, uint64_t pc, const pl_ingest_frame_t **frame,
                                 const pl_sym_module_t **module, const char **name, uint64_t *offset);
