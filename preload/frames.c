/* Frame and module resolution, on the program's thread that interns a new stack (capture.c), right after it: every
 * PC not seen before is resolved once (module and offset; a dynamic symbol for the innermost frames) into
 * PL_REC_FRAME, and every module once into PL_REC_MODULE with its GNU build-id, size and mtime. No thread of ours
 * does this work (the tracer may run none: docs/env.md, "What the tracer takes from the program").
 *
 * Why this is safe on a program thread that may hold its own locks: it takes no lock of the loader. The object
 * comes from glibc's _dl_find_object (lock-free, async-signal-safe; 2.35+), never from dladdr, which takes the
 * loader's lock: a thread in dlopen holds that lock while it runs the new library's constructors, and a constructor
 * waiting for a program lock that our thread holds (it is inside malloc) would deadlock the two. The build-id and
 * the dynamic symbol are read from the object's own memory (its ELF header, program headers, dynamic section,
 * .dynsym): every PC resolved here is a return address on this very thread's stack, so its object cannot be
 * unloaded while we read it. The only lock is frames_mu (the PC and module sets, shared by all threads), a leaf:
 * nothing taken under it calls back into the tracer, and fork holds it across (pl_frames_fork_*). Static
 * functions, C++ demangling and long names are resolved offline (reports/ingest/symbols.c). Without _dl_find_object
 * (glibc < 2.35) dladdr is used, with the loader-lock caveat above. */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "buildid.h"
#include "preload.h"
#include "pyframes.h"

static pthread_mutex_t frames_mu = PTHREAD_MUTEX_INITIALIZER;

/* The program headers of the object whose ELF header is mapped at `base` (dlfo_map_start), or NULL when the header
 * does not look like one whose program headers sit in its first page. */
static const ElfW(Phdr) *object_phdrs(uint64_t base, unsigned *n) {
    const ElfW(Ehdr) *e = (const void *)(uintptr_t)base;
    if (memcmp(e->e_ident, ELFMAG, SELFMAG) || e->e_phentsize != sizeof(ElfW(Phdr)) || e->e_phnum == 0 ||
        e->e_phoff + (uint64_t)e->e_phnum * sizeof(ElfW(Phdr)) > 4096)
        return NULL;
    *n = e->e_phnum;
    return (const void *)(uintptr_t)(base + e->e_phoff);
}

/* The NT_GNU_BUILD_ID of the object mapped at `base` with load bias `bias`, as lowercase hex into hex[129]. */
static void object_build_id(uint64_t base, uint64_t bias, char hex[129]) {
    unsigned n;
    const ElfW(Phdr) *ph = object_phdrs(base, &n);
    for (unsigned i = 0; ph && i < n; i++)
        if (ph[i].p_type == PT_NOTE &&
            pl_buildid_from_notes((const void *)(uintptr_t)(bias + ph[i].p_vaddr), ph[i].p_memsz, hex))
            return;
}

/* A dynamic-section address: relocated in place by the loader on most targets, an offset where it is read-only. */
static uint64_t dyn_addr(uint64_t v, uint64_t bias) { return v < bias ? v + bias : v; }

/* Number of .dynsym entries, from DT_HASH (nchain) or DT_GNU_HASH (past the last chain's end). */
static uint32_t dynsym_count(const ElfW(Word) *hash, const uint32_t *gnu) {
    if (hash) return hash[1];
    if (!gnu) return 0;
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2];
    const uint32_t *buckets = gnu + 4 + bloom * (sizeof(ElfW(Addr)) / 4), *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; b++)
        if (buckets[b] > last) last = buckets[b];
    if (last < symoffset) return symoffset;
    while (!(chain[last - symoffset] & 1)) last++;
    return last + 1;
}

/* dladdr's rule on the object's own .dynsym: the defined symbol with the highest address that contains `pc`. */
static bool dyn_symbol(const struct link_map *lm, uint64_t pc, const char **name, uint64_t *addr) {
    uint64_t bias = lm->l_addr;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Word) *hash = NULL;
    const uint32_t *gnu = NULL;
    for (const ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++) {
        uint64_t v = dyn_addr(d->d_un.d_ptr, bias);
        if (d->d_tag == DT_SYMTAB) symtab = (const void *)(uintptr_t)v;
        else if (d->d_tag == DT_STRTAB) strtab = (const void *)(uintptr_t)v;
        else if (d->d_tag == DT_HASH) hash = (const void *)(uintptr_t)v;
        else if (d->d_tag == DT_GNU_HASH) gnu = (const void *)(uintptr_t)v;
    }
    if (!symtab || !strtab) return false;
    uint32_t n = dynsym_count(hash, gnu);
    const ElfW(Sym) *best = NULL;
    for (uint32_t i = 1; i < n; i++) {
        const ElfW(Sym) *s = &symtab[i];
        if (s->st_shndx == SHN_UNDEF || s->st_shndx == SHN_ABS || ELF64_ST_TYPE(s->st_info) == STT_TLS) continue;
        uint64_t lo = bias + s->st_value;
        bool in = pc >= lo && (s->st_size ? pc < lo + s->st_size : pc == lo);
        if (in && (!best || best->st_value < s->st_value)) best = s;
    }
    if (!best) return false;
    *name = strtab + best->st_name;
    *addr = bias + best->st_value;
    return true;
}

typedef struct {
    uint64_t base;          /* the object's first mapped byte (its ELF header) */
    uint64_t bias;          /* its load bias (link_map l_addr) */
    const char *path;       /* link_map l_name ("" for the main program) */
    const char *sym;        /* dynamic symbol containing the PC, or NULL */
    uint64_t sym_addr;
} pc_info_t;

/* The loaded object containing `pc`, and with `sym` its dynamic symbol. */
static bool pc_object(uint64_t pc, bool sym, pc_info_t *out) {
    memset(out, 0, sizeof *out);
#if PL_HAVE_DL_FIND_OBJECT
    struct dl_find_object fo;
    if (_dl_find_object((void *)(uintptr_t)pc, &fo) != 0 || !fo.dlfo_link_map) return false;
    out->base = (uint64_t)(uintptr_t)fo.dlfo_map_start;
    out->bias = fo.dlfo_link_map->l_addr;
    out->path = fo.dlfo_link_map->l_name ? fo.dlfo_link_map->l_name : "";
    if (sym) dyn_symbol(fo.dlfo_link_map, pc, &out->sym, &out->sym_addr);
    return true;
#else
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1((void *)(uintptr_t)pc, &info, (void **)&lm, RTLD_DL_LINKMAP) || !info.dli_fbase) return false;
    out->base = (uint64_t)(uintptr_t)info.dli_fbase;
    out->bias = lm ? lm->l_addr : 0;
    out->path = info.dli_fname ? info.dli_fname : "";
    if (sym && info.dli_sname && info.dli_saddr) {
        out->sym = info.dli_sname;
        out->sym_addr = (uint64_t)(uintptr_t)info.dli_saddr;
    }
    return true;
#endif
}

static void emit_module(uint32_t mid, const pc_info_t *o, const char *path, int64_t t) {
    char hex[129] = "";
    object_build_id(o->base, o->bias, hex);
    struct stat sb;
    pl_trace_record_t m = {.type = PL_REC_MODULE, .t_ns = t};
    m.u.module = (pl_rec_module_t){.module_id = mid, .base = o->base, .path = path, .build_id = hex,
                                   .file_size = PL_TRACE_NA, .file_mtime_ns = 0};
    if (path[0] && stat(path, &sb) == 0) {
        m.u.module.file_size = (uint64_t)sb.st_size;
        m.u.module.file_mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    }
    pl_emit(&m);
}

/* Frames at these innermost positions of a stack also get their dynamic symbol, so the report can tell the
 * allocation functions apart (reports/extract.c is_alloc_frame: malloc, operator new, ... sit right above the
 * preload's own frames) even where a module file is gone by report time. Deeper frames are named offline. The
 * symbol scan reads the object's whole .dynsym (about a millisecond in libtorch_cpu), once per such PC. */
#define SYMBOL_FRAMES 2

void pl_frames_resolve(const uint64_t *pcs, uint32_t n) {
    if (!pl_g.stacks) return;
    pthread_mutex_lock(&frames_mu);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t pc = pcs[i];
        if ((pc & PL_PYFRAME_TAG) || !pl_stack_pc_insert(pl_g.stacks, pc)) continue; /* Python frame ids */
        pc_info_t o;
        /* pc is a return address: look up pc - 1 so a call at the end of a function resolves to it. */
        pl_trace_record_t r = {.type = PL_REC_FRAME, .t_ns = pl_now_ns()};
        r.u.frame.pc = pc;
        r.u.frame.symbol = "";
        if (pc_object(pc - 1, i < SYMBOL_FRAMES, &o)) {
            bool is_new;
            uint32_t mid = pl_stack_module_id(pl_g.stacks, o.base, &is_new);
            if (mid && is_new) {
                /* The main program's l_name is "" (or argv[0]-like): use the resolved executable path. */
                const char *path = o.path[0] == '/' || !pl_g.exe[0] ? o.path : pl_g.exe;
                emit_module(mid, &o, path, r.t_ns);
            }
            r.u.frame.module_id = mid;
            r.u.frame.module_offset = pc - o.base;
            if (o.sym) {
                r.u.frame.symbol = o.sym;
                r.u.frame.symbol_offset = pc - o.sym_addr;
            }
        }
        pl_emit(&r);
    }
    pthread_mutex_unlock(&frames_mu);
}

void pl_frames_fork_prepare(void) { pthread_mutex_lock(&frames_mu); }
void pl_frames_fork_parent(void) { pthread_mutex_unlock(&frames_mu); }
void pl_frames_fork_child(void) { pthread_mutex_init(&frames_mu, NULL); }
