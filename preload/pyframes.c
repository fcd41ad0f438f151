/* Python frames of the allocating thread: see pyframes.h and docs/python-frames.md (the design and why).
 *
 * Hot path (one sampled allocation): the thread's PyThreadState from PyGILState_GetThisThreadState (a TSS read:
 * no lock, no allocation, valid with the GIL released), checked once per thread through process_vm_readv (a bad
 * pointer is EFAULT, never a fault) and then by its thread_id; then the frame chain, innermost first, read in
 * place: only this thread pushes or pops its frames, and we run inside a call made by its innermost one, so every
 * frame on the chain is alive and complete. Per frame: code object (its type must be PyCode_Type), instruction
 * offset, and a lookup of (code, offset) in a lossy cache that yields the frame's id.
 * Slow path (a (code, offset) not in the cache): file name and qualified name read from the code object's unicode
 * objects (compact layouts, never PyUnicode_AsUTF8), the line decoded from the code's line table (pylines.c:
 * 3.9's co_lnotab, 3.10's and 3.11+'s co_linetable), all through process_vm_readv; then (file, function, line)
 * interned into an id, emitted once as PL_REC_PYFRAME.
 * Memory: mmap'd tables, no malloc. One mutex guards the cache and the intern table (held across neither the
 * frame walk of another thread nor any call into Python); fork holds it and the child starts empty. */
#include "pyframes.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "hash.h"
#include "preload.h"
#include "pylines.h"

/* Offsets (bytes) of the few CPython fields read, per minor version (x86-64 and aarch64: LP64). Measured with
 * offsetof against each version's headers (tools/pyframes_offsets.c); they do not change within a minor version.
 * 3.9 and 3.10 chain heap frame objects (PyFrameObject, f_back, f_lasti) from PyThreadState.frame; 3.11+ chain
 * _PyInterpreterFrame from the thread state. */
typedef enum frames {
    FRAMES_OBJECTS,          /* 3.9, 3.10: PyFrameObject */
    FRAMES_INTERP,           /* 3.11+: _PyInterpreterFrame */
} frames_t;

typedef enum lines {
    LINES_LNOTAB,            /* 3.9: co_lnotab, (byte delta, line delta) pairs */
    LINES_310,               /* 3.10: co_linetable, PEP 626 (byte delta, line delta) pairs, -128 = no line */
    LINES_LOCATIONS,         /* 3.11+: co_linetable, the location table */
} lines_t;

typedef struct layout {
    unsigned minor;
    frames_t frames;
    lines_t lines;
    size_t ts_thread_id;     /* PyThreadState.thread_id (pthread_self of its thread) */
    size_t ts_frame;         /* 3.9/3.10: .frame; 3.11/3.12: .cframe; 3.13: .current_frame */
    long cframe_current;     /* _PyCFrame.current_frame; -1 when ts_frame is the frame itself (3.9, 3.10, 3.13) */
    size_t fr_code, fr_previous; /* frame: code object; the caller's frame (f_back / previous) */
    size_t fr_instr, fr_owner;   /* _PyInterpreterFrame (3.11+): instruction pointer, owner */
    size_t fr_lasti;         /* PyFrameObject (3.9, 3.10): f_lasti, an int: bytes (3.9) or code units (3.10), -1
                                before the first instruction */
    size_t co_filename;
    size_t co_qualname;      /* 3.9/3.10 have no co_qualname: co_name */
    size_t co_firstlineno, co_linetable; /* co_linetable: co_lnotab on 3.9; a bytes object on all */
    size_t co_firsttraceable, co_code; /* 3.11+ */
    size_t ascii_size;       /* sizeof(PyASCIIObject): compact ASCII data follows */
    size_t compact_size;     /* sizeof(PyCompactUnicodeObject): compact non-ASCII data follows */
    size_t compact_utf8_len, compact_utf8; /* cached UTF-8 of a compact non-ASCII string */
    int owner_cstack;        /* FRAME_OWNED_BY_CSTACK (entry shim frames), -1 when none */
} layout_t;

static const layout_t layouts[] = {
    {.minor = 9, .frames = FRAMES_OBJECTS, .lines = LINES_LNOTAB, .ts_thread_id = 176, .ts_frame = 24,
     .cframe_current = -1, .fr_code = 32, .fr_previous = 24, .fr_lasti = 104, .co_filename = 104,
     .co_qualname = 112, .co_firstlineno = 40, .co_linetable = 120, .ascii_size = 48, .compact_size = 72,
     .compact_utf8_len = 48, .compact_utf8 = 56, .owner_cstack = -1},
    {.minor = 10, .frames = FRAMES_OBJECTS, .lines = LINES_310, .ts_thread_id = 176, .ts_frame = 24,
     .cframe_current = -1, .fr_code = 32, .fr_previous = 24, .fr_lasti = 96, .co_filename = 104,
     .co_qualname = 112, .co_firstlineno = 40, .co_linetable = 120, .ascii_size = 48, .compact_size = 72,
     .compact_utf8_len = 48, .compact_utf8 = 56, .owner_cstack = -1},
    {.minor = 11, .frames = FRAMES_INTERP, .lines = LINES_LOCATIONS, .ts_thread_id = 152, .ts_frame = 56,
     .cframe_current = 8, .fr_code = 32, .fr_previous = 48, .fr_instr = 56, .fr_owner = 69, .co_filename = 112,
     .co_qualname = 128, .co_firstlineno = 72, .co_linetable = 136, .co_firsttraceable = 168, .co_code = 184,
     .ascii_size = 48, .compact_size = 72, .compact_utf8_len = 48, .compact_utf8 = 56, .owner_cstack = -1},
    {.minor = 12, .frames = FRAMES_INTERP, .lines = LINES_LOCATIONS, .ts_thread_id = 136, .ts_frame = 56,
     .cframe_current = 0, .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70, .co_filename = 112,
     .co_qualname = 128, .co_firstlineno = 68, .co_linetable = 136, .co_firsttraceable = 176, .co_code = 192,
     .ascii_size = 40, .compact_size = 56, .compact_utf8_len = 40, .compact_utf8 = 48, .owner_cstack = 3},
    {.minor = 13, .frames = FRAMES_INTERP, .lines = LINES_LOCATIONS, .ts_thread_id = 152, .ts_frame = 72,
     .cframe_current = -1, .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70, .co_filename = 112,
     .co_qualname = 128, .co_firstlineno = 68, .co_linetable = 136, .co_firsttraceable = 184, .co_code = 200,
     .ascii_size = 40, .compact_size = 56, .compact_utf8_len = 40, .compact_utf8 = 48, .owner_cstack = 3},
};

#define OWNER_GENERATOR 1
#define CACHE_SLOTS (1u << 14)      /* lossy (code, offset) -> id cache */
#define MAX_IDS (1u << 16)          /* distinct (file, function, line) per trace */
#define ID_SLOTS (1u << 17)
#define ARENA_BYTES ((size_t)8 << 20)
#define FILE_MAX 1024
#define NAME_MAX_ 256
#define LINETABLE_MAX (64u << 10)

typedef struct cache_ent {
    uintptr_t code, filename, qualname;
    int32_t lasti, firstlineno;
    uint32_t id;                    /* 0 = empty */
} cache_ent_t;

typedef struct pyframe {
    uint64_t hash;
    uint32_t file_off, name_off;    /* into the arena, NUL-terminated */
    int32_t line;
} pyframe_t;

static struct {
    const layout_t *lay;            /* NULL: feature off */
    void *(*get_tstate)(void);      /* PyGILState_GetThisThreadState */
    uintptr_t code_type;            /* &PyCode_Type */
    uint32_t depth;
    pthread_mutex_t mu;             /* guards everything below */
    cache_ent_t *cache;
    uint32_t *slots;                /* id table: ids, 0 empty */
    pyframe_t *ids;                 /* [MAX_IDS + 1], index = id */
    uint32_t n_ids;
    char *arena;
    size_t arena_used;
    uint8_t linetable[LINETABLE_MAX];
} py;

static PL_TLS uintptr_t tl_ts_checked; /* this thread's tstate, once checked through process_vm_readv */

/* ------------------------------------------------------------------ reading memory */

/* Copy n bytes at src in this process; false (never a fault) when any of it is unmapped. */
static bool safe_read(void *dst, uintptr_t src, size_t n) {
    struct iovec l = {dst, n}, r = {(void *)src, n};
    return syscall(SYS_process_vm_readv, getpid(), &l, 1UL, &r, 1UL, 0UL) == (long)n;
}

static bool plausible(uintptr_t p) { return p >= 4096 && !(p & 7) && p < ((uintptr_t)1 << 56); }

static uintptr_t ld_ptr(uintptr_t base, size_t off) { return *(const uintptr_t *)(base + off); }

/* A unicode object's text as UTF-8 into out[cap] (NUL-terminated, cut at cap - 1). Compact strings only
 * (every code object's names are). Returns false when it cannot be read. */
static bool read_unicode(uintptr_t obj, char *out, size_t cap) {
    const layout_t *L = py.lay;
    uint8_t hdr[80];
    if (!plausible(obj) || !safe_read(hdr, obj, L->compact_size)) return false;
    int64_t len;
    uint32_t state;
    memcpy(&len, hdr + 16, 8);
    memcpy(&state, hdr + 32, 4);
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || len < 0) return false;
    if (ascii || kind == 1) {
        size_t n = (size_t)len < cap - 1 ? (size_t)len : cap - 1;
        if (ascii) {
            if (!safe_read(out, obj + L->ascii_size, n)) return false;
            out[n] = 0;
            return true;
        }
    }
    uintptr_t utf8;
    int64_t utf8_len;
    memcpy(&utf8, hdr + L->compact_utf8, 8);
    memcpy(&utf8_len, hdr + L->compact_utf8_len, 8);
    if (utf8 && utf8_len >= 0) {
        size_t n = (size_t)utf8_len < cap - 1 ? (size_t)utf8_len : cap - 1;
        if (!safe_read(out, utf8, n)) return false;
        out[n] = 0;
        return true;
    }
    if (kind != 1 && kind != 2 && kind != 4) return false;
    /* encode UCS-1/2/4 to UTF-8, a chunk of code points at a time */
    size_t o = 0;
    uint8_t buf[256];
    for (int64_t i = 0; i < len;) {
        size_t k = (size_t)(len - i) < sizeof buf / kind ? (size_t)(len - i) : sizeof buf / kind;
        if (!safe_read(buf, obj + L->compact_size + (uintptr_t)i * kind, k * kind)) return false;
        for (size_t j = 0; j < k; j++) {
            uint32_t c = kind == 1 ? buf[j] : kind == 2 ? ((uint16_t *)(void *)buf)[j] : ((uint32_t *)(void *)buf)[j];
            uint8_t e[4];
            size_t m;
            if (c < 0x80) e[0] = (uint8_t)c, m = 1;
            else if (c < 0x800) e[0] = 0xc0 | (c >> 6), e[1] = 0x80 | (c & 63), m = 2;
            else if (c < 0x10000) e[0] = 0xe0 | (c >> 12), e[1] = 0x80 | ((c >> 6) & 63), e[2] = 0x80 | (c & 63), m = 3;
            else e[0] = 0xf0 | (c >> 18), e[1] = 0x80 | ((c >> 12) & 63), e[2] = 0x80 | ((c >> 6) & 63),
                 e[3] = 0x80 | (c & 63), m = 4;
            if (o + m >= cap) goto done;
            memcpy(out + o, e, m);
            o += m;
        }
        i += (int64_t)k;
    }
done:
    out[o] = 0;
    return true;
}

/* ------------------------------------------------------------------ ids */

static uint64_t hash_str(uint64_t h, const char *s) {
    while (*s) h = (h ^ (uint8_t)*s++) * 0x100000001b3ull;
    return pl_hash_mix64(h);
}

static size_t arena_put(const char *s) {
    size_t n = strlen(s) + 1;
    if (py.arena_used + n > ARENA_BYTES) return SIZE_MAX;
    memcpy(py.arena + py.arena_used, s, n);
    py.arena_used += n;
    return py.arena_used - n;
}

/* (file, function, line) -> id, creating it (and *is_new) the first time; 0 when a table is full. Under mu. */
static uint32_t intern(const char *file, const char *name, int line, bool *is_new) {
    *is_new = false;
    uint64_t h = hash_str(hash_str(0xcbf29ce484222325ull ^ (uint32_t)line, file), name);
    for (uint32_t s = (uint32_t)h & (ID_SLOTS - 1);; s = (s + 1) & (ID_SLOTS - 1)) {
        uint32_t id = py.slots[s];
        if (!id) {
            if (py.n_ids >= MAX_IDS) return 0;
            size_t fo = arena_put(file), no = fo == SIZE_MAX ? SIZE_MAX : arena_put(name);
            if (no == SIZE_MAX) return 0;
            id = ++py.n_ids;
            py.ids[id] = (pyframe_t){.hash = h, .file_off = (uint32_t)fo, .name_off = (uint32_t)no, .line = line};
            py.slots[s] = id;
            *is_new = true;
            return id;
        }
        const pyframe_t *f = &py.ids[id];
        if (f->hash == h && f->line == line && !strcmp(py.arena + f->file_off, file) &&
            !strcmp(py.arena + f->name_off, name))
            return id;
    }
}

/* Slow path for one frame: names and line from the code object. Under mu. */
static uint32_t resolve(uintptr_t code, int lasti, bool *is_new) {
    const layout_t *L = py.lay;
    char file[FILE_MAX], name[NAME_MAX_];
    if (!read_unicode(ld_ptr(code, L->co_filename), file, sizeof file)) strcpy(file, "?");
    if (!read_unicode(ld_ptr(code, L->co_qualname), name, sizeof name)) strcpy(name, "?");
    int first = *(const int32_t *)(code + L->co_firstlineno), line = first;
    uintptr_t lt = ld_ptr(code, L->co_linetable);
    int64_t n;
    if (plausible(lt) && safe_read(&n, lt + 16, 8) && n > 0) {
        size_t k = (size_t)n < LINETABLE_MAX ? (size_t)n : LINETABLE_MAX;
        if (safe_read(py.linetable, lt + 32, k)) {
            int l = L->lines == LINES_LOCATIONS ? pl_pyframes_line(py.linetable, k, first, lasti)
                    : L->lines == LINES_310     ? pl_pyframes_line_310(py.linetable, k, first, lasti)
                                                : pl_pyframes_line_lnotab(py.linetable, k, first, lasti);
            if (l >= 0) line = l;
        }
    }
    return intern(file, name, line, is_new);
}

static void emit_pyframe(uint32_t id) {
    const pyframe_t *f = &py.ids[id];
    pl_trace_record_t r = {.type = PL_REC_PYFRAME, .t_ns = pl_now_ns()};
    r.u.pyframe = (pl_rec_pyframe_t){.pyframe_id = id, .line = f->line, .file = py.arena + f->file_off,
                                     .function = py.arena + f->name_off};
    pl_emit(&r);
}

/* ------------------------------------------------------------------ capture */

static uintptr_t this_tstate(void) {
    uintptr_t ts = (uintptr_t)py.get_tstate();
    if (!ts) return 0;
    const layout_t *L = py.lay;
    unsigned long self = (unsigned long)pthread_self();
    if (ts != tl_ts_checked) {
        unsigned long tid;
        if (!plausible(ts) || !safe_read(&tid, ts + L->ts_thread_id, sizeof tid) || tid != self) return 0;
        tl_ts_checked = ts;
    } else if (*(const unsigned long *)(ts + L->ts_thread_id) != self) {
        return 0;
    }
    return ts;
}

/* One _PyInterpreterFrame (3.11+) at *fr: its code object and instruction (code units from the start of the code,
 * -1 before the first), *fr moved to its caller. False for a frame that names nothing: an entry shim (3.12+), a
 * non-code executable, one still in its prologue. */
static bool interp_frame(const layout_t *L, uintptr_t *fr, uintptr_t *code_out, int *lasti_out) {
    uintptr_t f = *fr, code = ld_ptr(f, L->fr_code), instr = ld_ptr(f, L->fr_instr);
    int owner = *(const int8_t *)(f + L->fr_owner);
    *fr = ld_ptr(f, L->fr_previous);
    if (owner == L->owner_cstack || !plausible(code) || ld_ptr(code, 8) != py.code_type) return false;
    intptr_t d = (intptr_t)instr - (intptr_t)(code + L->co_code);
    int lasti = (int)(d / 2);
    if (d < -2 || d > (intptr_t)1 << 30) return false;
    /* a frame still running its prologue (arguments, cells) is not yet a frame (CPython skips it too) */
    if (owner != OWNER_GENERATOR && lasti < *(const int32_t *)(code + L->co_firsttraceable)) return false;
    *code_out = code, *lasti_out = lasti;
    return true;
}

/* One PyFrameObject (3.9, 3.10) at *fr, as interp_frame. Its f_lasti is set by the interpreter loop before each
 * instruction runs, so a frame that made a call names the call's instruction; -1 before its first instruction. */
static bool object_frame(const layout_t *L, uintptr_t *fr, uintptr_t *code_out, int *lasti_out) {
    uintptr_t f = *fr, code = ld_ptr(f, L->fr_code);
    int32_t f_lasti = *(const int32_t *)(f + L->fr_lasti);
    *fr = ld_ptr(f, L->fr_previous);
    if (!plausible(code) || ld_ptr(code, 8) != py.code_type || f_lasti < -1 || f_lasti > 1 << 30) return false;
    *code_out = code;
    *lasti_out = f_lasti < 0 ? -1 : L->lines == LINES_LNOTAB ? f_lasti / 2 : f_lasti;
    return true;
}

uint32_t pl_pyframes_capture(uint64_t *out, uint32_t cap) {
    const layout_t *L = py.lay;
    if (!L) return 0;
    uintptr_t ts = this_tstate();
    if (!ts) return 0;
    uintptr_t fr = ld_ptr(ts, L->ts_frame);
    if (L->cframe_current >= 0) fr = plausible(fr) ? ld_ptr(fr, (size_t)L->cframe_current) : 0;
    if (cap > py.depth) cap = py.depth;
    uint32_t n = 0, n_new = 0, fresh[PL_PYFRAMES_MAX_DEPTH];
    pthread_mutex_lock(&py.mu);
    for (uint32_t steps = 0; plausible(fr) && n < cap && steps < 4 * PL_PYFRAMES_MAX_DEPTH; steps++) {
        uintptr_t code;
        int lasti;
        bool ok = L->frames == FRAMES_INTERP ? interp_frame(L, &fr, &code, &lasti)
                                             : object_frame(L, &fr, &code, &lasti);
        if (!ok) continue;
        uintptr_t filename = ld_ptr(code, L->co_filename), qualname = ld_ptr(code, L->co_qualname);
        int32_t first = *(const int32_t *)(code + L->co_firstlineno);
        cache_ent_t *e = &py.cache[pl_hash_mix64(code ^ ((uint64_t)(uint32_t)lasti << 48)) & (CACHE_SLOTS - 1)];
        uint32_t id;
        if (e->id && e->code == code && e->lasti == lasti && e->filename == filename && e->qualname == qualname &&
            e->firstlineno == first) {
            id = e->id;
        } else {
            bool is_new;
            id = resolve(code, lasti, &is_new);
            if (!id) continue;
            *e = (cache_ent_t){code, filename, qualname, lasti, first, id};
            if (is_new) fresh[n_new++] = id;
        }
        out[n++] = PL_PYFRAME_TAG | id;
    }
    pthread_mutex_unlock(&py.mu);
    /* ids are never removed, and pyframe records of one id are identical: emitting outside the lock is safe */
    for (uint32_t i = 0; i < n_new; i++) emit_pyframe(fresh[i]);
    return n;
}

/* ------------------------------------------------------------------ start, fork */

static void *map_lazy(size_t n) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void say(const char *msg) { pl_note(msg); }

/* major.minor of a CPython before 3.11 (no Py_Version): from Py_GetVersion(), "3.10.13 (main, ...) [GCC ...]", a
 * pure function that formats constant strings into a static buffer (safe before the interpreter starts, no
 * allocation); 0.0 when absent or unparsable. */
static void version_string(unsigned *major, unsigned *minor) {
    void *sym = dlsym(RTLD_DEFAULT, "Py_GetVersion");
    const char *(*get)(void);
    if (!sym) return;
    memcpy(&get, &sym, sizeof get);
    const char *v = get();
    char *end;
    unsigned long ma = strtoul(v, &end, 10);
    if (end == v || *end != '.') return;
    const char *m = end + 1;
    unsigned long mi = strtoul(m, &end, 10);
    if (end == m || ma > 255 || mi > 255) return;
    *major = (unsigned)ma, *minor = (unsigned)mi;
}

void pl_pyframes_init(void) {
    const char *s = pl_env_get("PLATEAU_PY_FRAMES");
    long depth = 48;
    if (s && *s) {
        char *end;
        depth = strtol(s, &end, 10);
        if (*end || depth < 0) {
            say("plateau: PLATEAU_PY_FRAMES must be a frame count (0 = off): using 48\n");
            depth = 48;
        }
    }
    if (depth == 0) return;
    py.depth = depth > PL_PYFRAMES_MAX_DEPTH ? PL_PYFRAMES_MAX_DEPTH : (uint32_t)depth;
    const uint32_t *version = dlsym(RTLD_DEFAULT, "Py_Version");
    void *get = dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    void *code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    if (!get || !code_type) return; /* not a CPython process: nothing to say */
    unsigned major = version ? *version >> 24 : 0, minor = version ? (*version >> 16) & 0xff : 0;
    if (!version) version_string(&major, &minor);
    const layout_t *L = NULL;
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0] && major == 3; i++)
        if (layouts[i].minor == minor) L = &layouts[i];
    if (!L) {
        say("plateau: this Python's frames are not readable (3.9 to 3.13 are): sites are named by native frames\n");
        return;
    }
    py.cache = map_lazy(CACHE_SLOTS * sizeof(cache_ent_t));
    py.slots = map_lazy(ID_SLOTS * sizeof(uint32_t));
    py.ids = map_lazy((MAX_IDS + 1) * sizeof(pyframe_t));
    py.arena = map_lazy(ARENA_BYTES);
    if (!py.cache || !py.slots || !py.ids || !py.arena) {
        say("plateau: cannot map the Python frame tables: sites are named by native frames\n");
        return;
    }
    uint8_t probe[8];
    if (!safe_read(probe, (uintptr_t)code_type, sizeof probe)) {
        say("plateau: process_vm_readv is not allowed here: Python frames are not recorded\n");
        return;
    }
    pthread_mutex_init(&py.mu, NULL);
    memcpy(&py.get_tstate, &get, sizeof get);
    py.code_type = (uintptr_t)code_type;
    py.lay = L;
}

void pl_pyframes_fork_prepare(void) {
    if (py.lay) pthread_mutex_lock(&py.mu);
}

void pl_pyframes_fork_parent(void) {
    if (py.lay) pthread_mutex_unlock(&py.mu);
}

static void rezero(void *p, size_t n) {
    if (mmap(p, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
        MAP_FAILED)
        memset(p, 0, n);
}

void pl_pyframes_fork_child(void) {
    if (!py.lay) return;
    pthread_mutex_init(&py.mu, NULL);
    rezero(py.cache, CACHE_SLOTS * sizeof(cache_ent_t));
    rezero(py.slots, ID_SLOTS * sizeof(uint32_t));
    py.n_ids = 0;
    py.arena_used = 0;
}
