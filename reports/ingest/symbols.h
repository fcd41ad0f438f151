/* reports/ingest/symbols: offline symbolisation of trace frames (module file + offset -> function name).
 *
 * The preload records, per PC, only what the running process knows cheaply: the module (path, load base,
 * build-id, file size and mtime), the offset in it, and dladdr's dynamic symbol. Here, in the report, each module
 * file is opened once (mmap, read-only), its ELF .symtab (or .dynsym when stripped; or the .symtab of
 * /usr/lib/debug/.build-id/xx/yyyy.debug) is indexed once, and each offset is looked up by binary search, so
 * static functions get their names and nothing runs inside the traced process. C++ names are demangled with
 * libstdc++'s __cxa_demangle when the report is linked with it (PL_HAVE_CXA_DEMANGLE), else shown mangled.
 * Before trusting a file, its identity is checked against the trace: build-id when both have one, else size and
 * mtime; a mismatch (rebuilt binary) is reported as PL_SYM_CHANGED and the caller falls back to the trace's names.
 * Only 64-bit little-endian ELF is parsed; every read is bounds-checked (trace contents and files are untrusted).
 * Ownership: strings returned point into the cache and live until pl_symbols_free. Not thread-safe per cache.
 */
#pragma once

#include <stdint.h>

typedef struct pl_symbols pl_symbols_t;

typedef enum pl_sym_status {
    PL_SYM_OK = 0,        /* name found in the module's symbol table */
    PL_SYM_NOT_FOUND = 1, /* file matches but no function symbol covers the offset */
    PL_SYM_NO_FILE = 2,   /* the file is missing, unreadable, or not a 64-bit ELF */
    PL_SYM_CHANGED = 3    /* the file on disk is not the one that ran (build-id, or size+mtime, differ) */
} pl_sym_status_t;

typedef struct pl_sym_module {
    const char *path;
    const char *build_id;  /* hex, "" or NULL unknown */
    uint64_t file_size;    /* UINT64_MAX unknown */
    int64_t file_mtime_ns; /* 0 unknown */
} pl_sym_module_t;

/* NULL on allocation failure. */
pl_symbols_t *pl_symbols_new(void);
void pl_symbols_free(pl_symbols_t *s);

/* Function containing the return address at `module_offset` (pc - base of the module's first mapping): looks up
 * offset - 1 like dladdr(pc - 1). On PL_SYM_OK *name is the demangled name (or the raw one when it does not
 * demangle) and *sym_offset = offset - symbol start. Other outputs untouched otherwise. */
pl_sym_status_t pl_symbols_lookup(pl_symbols_t *s, const pl_sym_module_t *m, uint64_t module_offset,
                                  const char **name, uint64_t *sym_offset);

/* Demangle an Itanium C++ name ("_Z..."): the cached readable form, or `mangled` itself when it is not a C++
 * name, does not demangle, or no demangler is linked. Never NULL for a non-NULL input. */
const char *pl_symbols_demangle(pl_symbols_t *s, const char *mangled);
