/* Frame and module resolution, on the writer thread's tick: every PC of a newly interned stack is resolved once
 * (module and offset; dladdr's dynamic symbol for the innermost frames) into PL_REC_FRAME, and every module once into PL_REC_MODULE with its
 * GNU build-id (read from the loaded PT_NOTE segments: no file access, no allocation), size and mtime. Static
 * functions, C++ demangling and long names are resolved offline (reports/symbols.c), never in the traced
 * process. */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "buildid.h"
#include "preload.h"
#include "pyframes.h"

static uint32_t resolved_stacks; /* stacks whose PCs the writer tick has resolved (writer thread only) */

/* The NT_GNU_BUILD_ID note of the loaded object containing `pc`, read from its PT_NOTE segments in memory (no file
 * access, no allocation; buildid.c), as lowercase hex into hex[129]; "" when the object has none. */
typedef struct { uint64_t pc; char *hex; } build_id_query_t;

static int find_build_id(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    build_id_query_t *q = data;
    bool here = false;
    for (int i = 0; i < info->dlpi_phnum && !here; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uint64_t lo = info->dlpi_addr + ph->p_vaddr;
        here = ph->p_type == PT_LOAD && q->pc >= lo && q->pc < lo + ph->p_memsz;
    }
    if (!here) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        if (pl_buildid_from_notes((const void *)(uintptr_t)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz, q->hex))
            return 1;
    }
    return 1;
}

static void emit_module(uint32_t mid, uint64_t base, uint64_t pc, const char *path, int64_t t) {
    char hex[129] = "";
    build_id_query_t q = {.pc = pc, .hex = hex};
    dl_iterate_phdr(find_build_id, &q);
    struct stat sb;
    pl_trace_record_t m = {.type = PL_REC_MODULE, .t_ns = t};
    m.u.module = (pl_rec_module_t){.module_id = mid, .base = base, .path = path, .build_id = hex,
                                   .file_size = PL_TRACE_NA, .file_mtime_ns = 0};
    if (path[0] && stat(path, &sb) == 0) {
        m.u.module.file_size = (uint64_t)sb.st_size;
        m.u.module.file_mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    }
    pl_emit(&m);
}

/* The loaded object containing `pc`: its start (dladdr's dli_fbase) and path (dli_fname), and with `sym` also
 * dladdr's nearest dynamic symbol. dladdr scans the object's whole dynamic symbol table for that symbol: about a
 * millisecond per PC in libtorch_cpu (~10^5 symbols), 2% of a PyTorch run's CPU when every PC paid it (perf, on
 * bench/torch_realistic.py), and again in every forked DataLoader worker. Without `sym`, glibc's _dl_find_object
 * (2.35+) answers from the loader's sorted object table instead. */
static bool pc_object(uint64_t pc, bool sym, Dl_info *info) {
    memset(info, 0, sizeof *info);
#if PL_HAVE_DL_FIND_OBJECT
    if (!sym) {
        struct dl_find_object fo;
        if (_dl_find_object((void *)(uintptr_t)pc, &fo) != 0 || !fo.dlfo_link_map) return false;
        info->dli_fbase = fo.dlfo_map_start;
        info->dli_fname = fo.dlfo_link_map->l_name;
        return true;
    }
#endif
    (void)sym;
    return dladdr((void *)(uintptr_t)pc, info) && info->dli_fbase;
}

/* Frames at these innermost positions of a stack also get dladdr's dynamic symbol, so the report can tell the
 * allocation functions apart (reports/extract.c is_alloc_frame: malloc, operator new, ... sit right above the
 * preload's own frames) even where a module file is gone by report time. Deeper frames are named offline. */
#define SYMBOL_FRAMES 2

/* Writer-thread tick: resolve every PC of stacks interned since the last tick, once per PC. Only what the
 * running process knows cheaply is recorded (module, offset, the module's build-id; dladdr's dynamic symbol for
 * the innermost frames): functions, C++ demangling and long names are resolved offline by reports/symbols.c from
 * module path + offset, never in the traced process. */
void pl_frames_tick(void *ctx) {
    (void)ctx;
    if (!pl_g.stacks) return;
    uint32_t n = pl_stack_count(pl_g.stacks);
    for (uint32_t id = resolved_stacks + 1; id <= n; id++) {
        const uint64_t *pcs;
        uint32_t nf = pl_stack_get(pl_g.stacks, id, &pcs);
        for (uint32_t i = 0; i < nf; i++) {
            uint64_t pc = pcs[i];
            if ((pc & PL_PYFRAME_TAG) || !pl_stack_pc_insert(pl_g.stacks, pc)) continue; /* Python frame ids */
            Dl_info info;
            /* pc is a return address: look up pc - 1 so a call at the end of a function resolves to it. */
            pl_trace_record_t r = {.type = PL_REC_FRAME, .t_ns = pl_now_ns()};
            r.u.frame.pc = pc;
            r.u.frame.symbol = "";
            if (pc_object(pc - 1, i < SYMBOL_FRAMES, &info)) {
                bool is_new;
                uint64_t base = (uint64_t)(uintptr_t)info.dli_fbase;
                uint32_t mid = pl_stack_module_id(pl_g.stacks, base, &is_new);
                if (mid && is_new) {
                    /* The main program's dli_fname is argv[0]-like: use the resolved executable path. */
                    const char *path = info.dli_fname ? info.dli_fname : "";
                    if (path[0] != '/' && pl_g.exe[0]) path = pl_g.exe;
                    emit_module(mid, base, pc - 1, path, r.t_ns);
                }
                r.u.frame.module_id = mid;
                r.u.frame.module_offset = pc - base;
                if (info.dli_sname && info.dli_saddr) {
                    r.u.frame.symbol = info.dli_sname;
                    r.u.frame.symbol_offset = pc - (uint64_t)(uintptr_t)info.dli_saddr;
                }
            }
            pl_emit(&r);
        }
    }
    resolved_stacks = n;
}

void pl_frames_reset(void) { resolved_stacks = 0; }
