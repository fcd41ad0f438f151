/* reports/ingest/symbols: offline symbolisation (see symbols.h for the contract).
 *
 * Invariants: a module is opened at most once per cache (keyed by path and recorded identity); its function symbols
 * are copied into one array sorted by start address (ties: global before weak before local), names pointing into the
 * read-only mapping of the file that stays mapped until pl_symbols_free. Every offset read from a file is checked
 * against the file size before use; names must end inside their string table.
 * Why offline and not in the preload: reading and sorting a symbol table costs milliseconds to seconds (libtorch has
 * ~10^6 symbols) and memory; inside a traced training process that would be an allocation storm and a stall. The
 * trace already holds module path + offset for every PC, which is all an offline lookup needs.
 * Why __cxa_demangle and not an own demangler: the Itanium grammar (templates, substitutions, lambdas, ABI tags)
 * is large and a subset would print wrong names for exactly the deep template code that ML stacks are made of;
 * libstdc++ is on every machine that runs C++ programs. It is linked into the report tool only, never the preload.
 */
#include "symbols.h"
#include "grow.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PL_HAVE_CXA_DEMANGLE
#define PL_HAVE_CXA_DEMANGLE 0
#endif
#if PL_HAVE_CXA_DEMANGLE
/* libstdc++'s C-linkage entry point (cxxabi.h is C++ only). */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);
#endif

#define MAX_FILE_BYTES (1ull << 36)  /* 64 GiB: larger "modules" are not mapped */
#define MAX_FUNCS (1u << 24)

typedef struct func { uint64_t lo, hi; const char *name; int rank; } func_t;

typedef struct elf_map {
    const uint8_t *data;
    size_t len;
} elf_map_t;

typedef struct mod {
    char *path, *build_id;     /* key: as recorded in the trace */
    uint64_t file_size;
    int64_t file_mtime_ns;
    pl_sym_status_t status;    /* PL_SYM_OK when usable */
    elf_map_t maps[2];         /* the module file, and its separate debug file when that held the symbols */
    uint64_t base_vaddr;       /* page-aligned vaddr of the first PT_LOAD: module offset 0 */
    func_t *funcs;
    size_t n_funcs;
} mod_t;

struct pl_symbols {
    mod_t *mods;
    size_t n_mods, cap_mods;
    char **strs;               /* demangled names, owned */
    size_t n_strs, cap_strs;
};

pl_symbols_t *pl_symbols_new(void) { return calloc(1, sizeof(pl_symbols_t)); }

void pl_symbols_free(pl_symbols_t *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_mods; i++) {
        mod_t *m = &s->mods[i];
        for (int k = 0; k < 2; k++)
            if (m->maps[k].data) munmap((void *)(uintptr_t)m->maps[k].data, m->maps[k].len);
        free(m->funcs);
        free(m->path);
        free(m->build_id);
    }
    for (size_t i = 0; i < s->n_strs; i++) free(s->strs[i]);
    free(s->strs);
    free(s->mods);
    free(s);
}

/* ---- bounded ELF access ---- */

static bool in_file(const elf_map_t *f, uint64_t off, uint64_t n) { return off <= f->len && n <= f->len - off; }

static bool map_file(const char *path, elf_map_t *out, struct stat *sb) {
    /* paths come from the trace: never open anything but a regular file (opening a device can have effects) */
    if (stat(path, sb) != 0 || !S_ISREG(sb->st_mode)) return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return false;
    bool ok = fstat(fd, sb) == 0 && S_ISREG(sb->st_mode) && sb->st_size >= (off_t)sizeof(Elf64_Ehdr) &&
              (uint64_t)sb->st_size <= MAX_FILE_BYTES;
    void *p = ok ? mmap(NULL, (size_t)sb->st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (p == MAP_FAILED) return false;
    const Elf64_Ehdr *eh = p;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB) {
        munmap(p, (size_t)sb->st_size);
        return false;
    }
    out->data = p;
    out->len = (size_t)sb->st_size;
    return true;
}

static const Elf64_Ehdr *ehdr(const elf_map_t *f) { return (const Elf64_Ehdr *)(const void *)f->data; }

/* Section headers: pointer and count, NULL when absent or out of bounds. */
static const Elf64_Shdr *sections(const elf_map_t *f, size_t *n) {
    const Elf64_Ehdr *e = ehdr(f);
    if (!e->e_shoff || e->e_shentsize != sizeof(Elf64_Shdr) || e->e_shoff % 8) return NULL;
    if (!in_file(f, e->e_shoff, sizeof(Elf64_Shdr))) return NULL;
    const Elf64_Shdr *sh = (const void *)(f->data + e->e_shoff);
    uint64_t cnt = e->e_shnum ? e->e_shnum : sh[0].sh_size; /* extended numbering */
    if (cnt > (1u << 20) || !in_file(f, e->e_shoff, cnt * sizeof(Elf64_Shdr))) return NULL;
    *n = (size_t)cnt;
    return sh;
}

/* Page-aligned vaddr of the first PT_LOAD (what the loader maps at the module base), and the build-id note in
 * hex into hex[129] ("" if none). False when the program headers are unreadable. */
static bool load_info(const elf_map_t *f, uint64_t *base_vaddr, char *hex) {
    const Elf64_Ehdr *e = ehdr(f);
    hex[0] = 0;
    if (e->e_phentsize != sizeof(Elf64_Phdr) || e->e_phoff % 8 ||
        !in_file(f, e->e_phoff, (uint64_t)e->e_phnum * sizeof(Elf64_Phdr)))
        return false;
    const Elf64_Phdr *ph = (const void *)(f->data + e->e_phoff);
    uint64_t lo = UINT64_MAX;
    for (size_t i = 0; i < e->e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < lo) lo = ph[i].p_vaddr;
        if (ph[i].p_type != PT_NOTE || hex[0] || !in_file(f, ph[i].p_offset, ph[i].p_filesz)) continue;
        const uint8_t *p = f->data + ph[i].p_offset, *end = p + ph[i].p_filesz;
        while ((size_t)(end - p) >= sizeof(Elf64_Nhdr)) {
            Elf64_Nhdr n;
            memcpy(&n, p, sizeof n);
            uint64_t name_sz = ((uint64_t)n.n_namesz + 3) & ~3ull, desc_sz = ((uint64_t)n.n_descsz + 3) & ~3ull;
            const uint8_t *name = p + sizeof n;
            if (name_sz > (uint64_t)(end - name) || desc_sz > (uint64_t)(end - name) - name_sz) break;
            const uint8_t *desc = name + name_sz;
            if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && !memcmp(name, "GNU", 4) && n.n_descsz <= 64) {
                for (uint32_t k = 0; k < n.n_descsz; k++) sprintf(hex + 2 * k, "%02x", desc[k]);
                break;
            }
            p = desc + desc_sz;
        }
    }
    if (lo == UINT64_MAX) return false;
    *base_vaddr = lo & ~0xfffull;
    return true;
}

static int func_cmp(const void *a, const void *b) {
    const func_t *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Index the function symbols of the symbol table of type `want` (SHT_SYMTAB / SHT_DYNSYM). Returns -ENOENT when
 * the file has no such table, -ENOMEM, or 0. */
static int index_symbols(mod_t *m, const elf_map_t *f, uint32_t want) {
    size_t n_sh;
    const Elf64_Shdr *sh = sections(f, &n_sh);
    if (!sh) return -ENOENT;
    for (size_t i = 0; i < n_sh; i++) {
        if (sh[i].sh_type != want || sh[i].sh_entsize != sizeof(Elf64_Sym) || sh[i].sh_link >= n_sh) continue;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        if (str->sh_type != SHT_STRTAB || !in_file(f, sh[i].sh_offset, sh[i].sh_size) ||
            !in_file(f, str->sh_offset, str->sh_size) || sh[i].sh_offset % 8)
            continue;
        const Elf64_Sym *sym = (const void *)(f->data + sh[i].sh_offset);
        const char *strtab = (const char *)f->data + str->sh_offset;
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym), k = 0;
        if (n > MAX_FUNCS) n = MAX_FUNCS;
        func_t *v = malloc((n ? n : 1) * sizeof *v);
        if (!v) return -ENOMEM;
        for (size_t j = 0; j < n; j++) {
            int type = ELF64_ST_TYPE(sym[j].st_info), bind = ELF64_ST_BIND(sym[j].st_info);
            if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym[j].st_shndx == SHN_UNDEF || !sym[j].st_size ||
                sym[j].st_name >= str->sh_size || !memchr(strtab + sym[j].st_name, 0, str->sh_size - sym[j].st_name) ||
                !strtab[sym[j].st_name] || sym[j].st_value > UINT64_MAX - sym[j].st_size)
                continue;
            v[k++] = (func_t){sym[j].st_value, sym[j].st_value + sym[j].st_size, strtab + sym[j].st_name,
                              bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2};
        }
        qsort(v, k, sizeof *v, func_cmp);
        m->funcs = v;
        m->n_funcs = k;
        return 0;
    }
    return -ENOENT;
}

/* Open and index a module. Sets m->status. */
static void open_module(mod_t *m) {
    struct stat sb;
    char hex[129];
    m->status = PL_SYM_NO_FILE;
    if (!m->path[0] || !map_file(m->path, &m->maps[0], &sb)) return;
    if (!load_info(&m->maps[0], &m->base_vaddr, hex)) return;
    /* identity: build-id when both sides have one, else size and mtime when recorded */
    bool changed;
    if (m->build_id[0] && hex[0]) changed = strcmp(m->build_id, hex) != 0;
    else if (m->file_size != UINT64_MAX && m->file_mtime_ns != 0)
        changed = (uint64_t)sb.st_size != m->file_size ||
                  (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec != m->file_mtime_ns;
    else changed = false; /* a trace from before 1.1: nothing to compare */
    if (changed) {
        m->status = PL_SYM_CHANGED;
        return;
    }
    int rc = index_symbols(m, &m->maps[0], SHT_SYMTAB);
    if (rc == -ENOENT && hex[0] && strlen(hex) > 2) {
        /* stripped: the distribution's separate debug file, found by build-id */
        char dbg[256];
        snprintf(dbg, sizeof dbg, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
        struct stat dsb;
        if (map_file(dbg, &m->maps[1], &dsb)) rc = index_symbols(m, &m->maps[1], SHT_SYMTAB);
    }
    if (rc == -ENOENT) rc = index_symbols(m, &m->maps[0], SHT_DYNSYM);
    m->status = rc == -ENOMEM ? PL_SYM_NO_FILE : PL_SYM_OK; /* no table at all: every lookup is NOT_FOUND */
}

static bool same_str(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

static mod_t *get_module(pl_symbols_t *s, const pl_sym_module_t *q) {
    for (size_t i = 0; i < s->n_mods; i++) {
        mod_t *m = &s->mods[i];
        if (same_str(m->path, q->path) && same_str(m->build_id, q->build_id) && m->file_size == q->file_size &&
            m->file_mtime_ns == q->file_mtime_ns)
            return m;
    }
    if (pl_grow_first((void **)&s->mods, &s->cap_mods, s->n_mods + 1, sizeof *s->mods, 8)) return NULL;
    mod_t *m = &s->mods[s->n_mods];
    memset(m, 0, sizeof *m);
    m->path = strdup(q->path ? q->path : "");
    m->build_id = strdup(q->build_id ? q->build_id : "");
    if (!m->path || !m->build_id) {
        free(m->path);
        free(m->build_id);
        return NULL;
    }
    m->file_size = q->file_size;
    m->file_mtime_ns = q->file_mtime_ns;
    s->n_mods++;
    open_module(m);
    return m;
}

pl_sym_status_t pl_symbols_lookup(pl_symbols_t *s, const pl_sym_module_t *q, uint64_t module_offset,
                                  const char **name, uint64_t *sym_offset) {
    if (!s || !q || !q->path) return PL_SYM_NO_FILE;
    mod_t *m = get_module(s, q);
    if (!m) return PL_SYM_NO_FILE;
    if (m->status != PL_SYM_OK) return m->status;
    if (module_offset == 0 || module_offset > UINT64_MAX - m->base_vaddr) return PL_SYM_NOT_FOUND;
    uint64_t a = m->base_vaddr + module_offset - 1; /* a return address: the call is just before it */
    /* last symbol starting at or below a, then back over overlapping ones (nested or aliased functions) */
    size_t lo = 0, hi = m->n_funcs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->funcs[mid].lo <= a) lo = mid + 1;
        else hi = mid;
    }
    const func_t *best = NULL;
    for (size_t i = lo, k = 0; i > 0 && k < 64; i--, k++) {
        const func_t *f = &m->funcs[i - 1];
        if (a < f->hi && (!best || f->lo > best->lo || (f->lo == best->lo && f->rank < best->rank))) best = f;
    }
    if (!best) return PL_SYM_NOT_FOUND;
    *name = pl_symbols_demangle(s, best->name);
    *sym_offset = a + 1 - best->lo;
    return PL_SYM_OK;
}

/* Keep str (owned) until pl_symbols_free. False (str freed) when out of memory. */
static bool keep(pl_symbols_t *s, char *str) {
    if (pl_grow_first((void **)&s->strs, &s->cap_strs, s->n_strs + 1, sizeof *s->strs, 16)) {
        free(str);
        return false;
    }
    s->strs[s->n_strs++] = str;
    return true;
}

const char *pl_symbols_demangle(pl_symbols_t *s, const char *mangled) {
    if (!s || !mangled) return mangled;
    /* a versioned .symtab name ("memcpy@GLIBC_2.14", "f@@V1"): the version is not part of the function's name */
    const char *at = strchr(mangled, '@');
    if (at && at > mangled) {
        char *bare = strndup(mangled, (size_t)(at - mangled));
        if (bare && keep(s, bare)) mangled = bare;
    }
    if (mangled[0] != '_' || mangled[1] != 'Z') return mangled;
#if PL_HAVE_CXA_DEMANGLE
    int status = -1;
    char *d = __cxa_demangle(mangled, NULL, NULL, &status);
    if (!d || status != 0) {
        free(d);
        return mangled;
    }
    return keep(s, d) ? d : mangled;
#else
    return mangled;
#endif
}
