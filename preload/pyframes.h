/* Python frames of the allocating thread (docs/python-frames.md). At a sampled allocation the preload reads the
 * calling thread's own CPython frame chain (3.9 to 3.13: per-version struct offsets, symbols found with dlsym,
 * libpython never linked), without calling into Python and without allocating, and turns each frame into a small
 * id interned once per distinct (file, function, line). The first use of an id emits its PL_REC_PYFRAME record.
 * A process with no CPython in it (or another version) pays one NULL test per sample. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PL_PYFRAME_TAG (1ull << 63) /* stack-table entries that are Python frame ids, not PCs */
#define PL_PYFRAMES_MAX_DEPTH 64    /* PLATEAU_PY_FRAMES caps at this; default 48 */

/* Look up the interpreter's symbols and pick the layout. Constructor time only (dlsym). Reads PLATEAU_PY_FRAMES
 * (depth, 0 = off). Says one line on stderr when a CPython of an unsupported version is present. */
void pl_pyframes_init(void);

/* This thread's Python frames, innermost first, as PL_PYFRAME_TAG | id into out (at most cap). Returns the count;
 * 0 for a thread running no Python. Emits PL_REC_PYFRAME for ids it creates. Call with pl_tl_guard raised. */
uint32_t pl_pyframes_capture(uint64_t *out, uint32_t cap);

void pl_pyframes_fork_prepare(void);
void pl_pyframes_fork_parent(void);
void pl_pyframes_fork_child(void);  /* forget the ids: the child's trace defines them again */
