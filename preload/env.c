/* The program's own environment (docs/env.md, "The program's environment"). Every traced image takes plateau's
 * variables out of `environ` (a copy of the initial array: the kernel's, on the stack, is left as it is) in the
 * preload's constructor, before main and before CPython copies the environment
 * into os.environ, keeps them here (the tracer's own memory), and puts them back only into the environments it hands
 * to a new image (exec, posix_spawn, system, popen: exec.c), with two markers that tell the new image's preload
 * exactly what to take out again, so every image sees the environment its parent gave it:
 *   PLATEAU_SET=NAME:NAME...     names the image's environment did not have (plateau added them);
 *   PLATEAU_WAS_<NAME>=VALUE     the image's own value of a variable plateau changed (LD_PRELOAD, PYTHONPATH).
 * `plateau run` writes the same markers for the command. Without markers (the preload set by hand) the variables
 * the tracer reads (is_tracer_var) and the LD_PRELOAD entries naming this library are plateau's.
 * CPython reads PYTHONPATH while it initialises, after this constructor: until Py_IsInitialized() says it is done,
 * getenv("PYTHONPATH") answers with plateau's value (the bootstrap's directory first), so `site` imports the
 * bootstrap, while `environ` and os.environ hold the program's own value. No allocation: runs in the constructor and
 * in vfork children. */
#include "config.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

extern char **environ;

#define ENV_MAX 48               /* plateau's variables one image keeps */
#define ARENA_BYTES (128u << 10) /* their text; a variable that does not fit stays in the environment */

typedef struct {
    const char *entry;      /* "NAME=value" as this image got it */
    size_t name_n;          /* length of NAME */
    const char *part_entry; /* list variables (LD_PRELOAD, PYTHONPATH): "NAME=PLATEAU'S ENTRIES", put before the
                             * child's own value; NULL for the others */
    bool overrode;          /* the program had its own value (PLATEAU_WAS_): a child's value is replaced, not kept */
} saved_t;

static struct {
    saved_t v[ENV_MAX];
    int n;
    char arena[ARENA_BYTES];
    size_t used;
    const char *pythonpath;  /* what CPython reads while it initialises (the bootstrap's directory first), or NULL */
    int (*py_initialized)(void);
    char *(*real_getenv)(const char *);
} es;

static size_t name_len(const char *e) {
    const char *eq = strchr(e, '=');
    return eq ? (size_t)(eq - e) : strlen(e);
}

/* The variables the tracer itself reads (docs/env.md's first and device tables): plateau's, when no marker says
 * which are (the preload set by hand). Other PLATEAU_* variables belong to programs of plateau's that run as the
 * program (the allocator's PLATEAU_LIBCUDA, the Python bootstrap's) and stay. */
static bool is_tracer_var(const char *name, size_t n) {
    static const char *const names[] = {
        "PLATEAU_DIR", "PLATEAU_RUN_ID", "PLATEAU_SAMPLE_BYTES", "PLATEAU_INTERVAL_MS", "PLATEAU_FLUSH_MS",
        "PLATEAU_BUFFER_BYTES", "PLATEAU_STEP_SIGNAL", "PLATEAU_PY_FRAMES", "PLATEAU_DEVICE_STACKS", "PLATEAU_PSS",
        "PLATEAU_HOST_MEMORY", "PLATEAU_DISABLE", "PLATEAU_QUIET", "PLATEAU_COLLECTOR", "PLATEAU_DEBUG_CUDA",
        "PLATEAU_CUPTI", "PLATEAU_LIBCUPTI",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], name, n)) return true;
    return false;
}

static bool is_list_var(const char *name, size_t n) {
    return (n == 10 && !memcmp(name, "LD_PRELOAD", 10)) || (n == 10 && !memcmp(name, "PYTHONPATH", 10));
}

/* Whether NAME (n bytes) is one of the ':'-separated names of list. */
static bool in_list(const char *list, const char *name, size_t n) {
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ":");
        if (k == n && !memcmp(p, name, n)) return true;
        p += k + (p[k] == ':');
    }
    return false;
}

/* Copy of a..b (concatenated) in the arena, NUL-terminated; NULL when full. */
static char *arena_cat(const char *a, size_t an, const char *b, size_t bn, const char *c, size_t cn) {
    if (es.used + an + bn + cn + 1 > sizeof es.arena) return NULL;
    char *p = es.arena + es.used;
    memcpy(p, a, an);
    memcpy(p + an, b, bn);
    memcpy(p + an + bn, c, cn);
    p[an + bn + cn] = 0;
    es.used += an + bn + cn + 1;
    return p;
}

static saved_t *find_saved(const char *name, size_t n) {
    for (int i = 0; i < es.n; i++)
        if (es.v[i].name_n == n && !memcmp(es.v[i].entry, name, n)) return &es.v[i];
    return NULL;
}

/* Keep entry e (plateau's value) with, for a list variable, plateau's own entries `part`. False when full. */
static bool save(const char *e, const char *part, size_t part_n, bool overrode) {
    size_t n = name_len(e);
    saved_t *s = find_saved(e, n);
    if (!s && es.n == ENV_MAX) return false;
    char *copy = arena_cat(e, strlen(e), "", 0, "", 0);
    char *pe = part ? arena_cat(e, n + 1, part, part_n, "", 0) : NULL;
    if (!copy || (part && !pe)) return false;
    if (!s) s = &es.v[es.n++];
    *s = (saved_t){.entry = copy, .name_n = n, .part_entry = pe, .overrode = overrode};
    return true;
}

/* LD_PRELOAD's entries (separated by ':' or ' ') that name this library, and the others. */
static void split_preload(const char *v, char *ours, size_t ours_cap, char *rest, size_t rest_cap) {
    size_t no = 0, nr = 0;
    for (const char *p = v; *p;) {
        size_t k = strcspn(p, ": ");
        if (k) {
            bool mine = false;
            for (size_t i = 0; i + 18 <= k && !mine; i++) mine = !memcmp(p + i, "libplateau_preload", 18);
            char *dst = mine ? ours : rest;
            size_t *len = mine ? &no : &nr, cap = mine ? ours_cap : rest_cap;
            if (*len + k + 2 <= cap) {
                if (*len) dst[(*len)++] = ':';
                memcpy(dst + *len, p, k);
                *len += k;
            }
        }
        p += k + (p[k] != 0);
    }
    ours[no] = 0;
    rest[nr] = 0;
}

/* Take plateau's variables out of env (in place), keeping them when `keep`. Markers present: exactly what they
 * name; none (the preload set by hand): the tracer's variables and this library's LD_PRELOAD entries. */
static void strip(char **env, bool keep) {
    const char *set = NULL, *was[ENV_MAX];
    int n_was = 0;
    for (char **p = env; *p; p++) {
        if (!strncmp(*p, "PLATEAU_SET=", 12)) set = *p + 12;
        else if (!strncmp(*p, "PLATEAU_WAS_", 12) && n_was < ENV_MAX) was[n_was++] = *p + 12;
    }
    bool marked = set || n_was;
    size_t j = 0;
    for (size_t i = 0; env[i]; i++) {
        char *e = env[i];
        size_t n = name_len(e);
        if (!e[n]) { /* no '=': not a variable anyone reads */
            env[j++] = e;
            continue;
        }
        if (!strncmp(e, "PLATEAU_SET=", 12) || !strncmp(e, "PLATEAU_WAS_", 12)) continue;
        if (marked) {
            const char *orig = NULL;
            for (int k = 0; k < n_was && !orig; k++)
                if (!strncmp(was[k], e, n) && was[k][n] == '=') orig = was[k] + n + 1;
            if (orig) {
                /* plateau changed it: the program's value back in place; plateau's part is what precedes ":orig" */
                const char *v = e + n + 1;
                size_t vn = strlen(v), on = strlen(orig);
                size_t part_n = on && vn > on && v[vn - on - 1] == ':' && !strcmp(v + vn - on, orig) ? vn - on - 1 : vn;
                char *back = arena_cat(e, n + 1, orig, on, "", 0);
                if (!back || (keep && !save(e, is_list_var(e, n) ? v : NULL, part_n, true))) {
                    env[j++] = e;
                    continue;
                }
                env[j++] = back;
                continue;
            }
            if (set && in_list(set, e, n)) {
                if (keep && !save(e, is_list_var(e, n) ? e + n + 1 : NULL, strlen(e + n + 1), false)) env[j++] = e;
                continue;
            }
            env[j++] = e;
            continue;
        }
        if (is_tracer_var(e, n)) {
            if (keep && !save(e, NULL, 0, false)) env[j++] = e;
            continue;
        }
        if (n == 10 && !strncmp(e, "LD_PRELOAD", 10)) {
            char ours[2048], rest[2048];
            split_preload(e + 11, ours, sizeof ours, rest, sizeof rest);
            if (!ours[0] || (keep && !save(e, ours, strlen(ours), rest[0] != 0))) {
                env[j++] = e;
                continue;
            }
            if (rest[0]) {
                char *back = arena_cat("LD_PRELOAD=", 11, rest, strlen(rest), "", 0);
                env[j++] = back ? back : e;
            }
            continue;
        }
        env[j++] = e;
    }
    env[j] = NULL;
}

/* The stripped copy of the initial environment array: the kernel's lies on the process's stack right before the
 * auxiliary vector, and runtimes that walk argv, envp and auxv on the stack themselves (Go's finds its page size
 * there) must find it as the kernel laid it out, so it is never changed; `environ` points at this copy instead. */
#define ENV_STATIC 4096
static char *env_static[ENV_STATIC];

void pl_env_init(void) {
    void *g = dlsym(RTLD_NEXT, "getenv");
    memcpy(&es.real_getenv, &g, sizeof g);
    if (!environ) return;
    size_t n = 0;
    while (environ[n]) n++;
    char **copy = env_static;
    if (n + 1 > ENV_STATIC) { /* a huge environment: pages of our own (no malloc in a constructor) */
        long m = syscall(SYS_mmap, NULL, (n + 1) * sizeof *copy, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
        if (m < 0 && m > -4096) return; /* left as it is: plateau's variables stay visible */
        copy = (char **)(uintptr_t)m;
    }
    memcpy(copy, environ, (n + 1) * sizeof *copy);
    strip(copy, true);
    size_t k = 0;
    while (copy[k]) k++;
    if (k != n || memcmp(copy, environ, n * sizeof *copy)) environ = copy; /* else nothing of plateau's: unchanged */
    saved_t *pp = find_saved("PYTHONPATH", 10);
    void *f = pp ? dlsym(RTLD_DEFAULT, "Py_IsInitialized") : NULL;
    memcpy(&es.py_initialized, &f, sizeof f);
    if (pp && es.py_initialized) es.pythonpath = pp->entry + 11;
}

const char *pl_env_get(const char *name) {
    saved_t *s = find_saved(name, strlen(name));
    if (s) return s->entry + s->name_n + 1;
    return getenv(name); /* before pl_env_init (another constructor of ours), the environment still has it */
}

void pl_env_set(const char *name, const char *value) {
    size_t n = strlen(name);
    saved_t *s = find_saved(name, n);
    char *e = arena_cat(name, n, "=", 1, value, strlen(value));
    if (!e) return;
    if (s) s->entry = e;
    else if (es.n < ENV_MAX) es.v[es.n++] = (saved_t){.entry = e, .name_n = n};
}

/* ------------------------------------------------------------------ children's environments */

int pl_env_child_size(char *const envp[], size_t *n_entries, size_t *n_bytes) {
    if (!es.n || !envp) return -1;
    size_t n = 0, bytes = 16 + 64; /* "PLATEAU_SET=" and its NUL */
    for (; envp[n]; n++) {
        if (n > 4096 || !strncmp(envp[n], "PLATEAU_SET=", 12) || !strncmp(envp[n], "PLATEAU_WAS_", 12))
            return -1; /* huge, or made by a plateau run inside the program: its own markers, passed as given */
        saved_t *s = find_saved(envp[n], name_len(envp[n]));
        if (s) bytes += 2 * strlen(envp[n]) + (s->part_entry ? strlen(s->part_entry) : 0) + 16;
    }
    for (int i = 0; i < es.n; i++)
        bytes += es.v[i].name_n + 1 + (es.v[i].part_entry ? strlen(es.v[i].part_entry) : 0);
    if (bytes > (128u << 10)) return -1;
    *n_entries = n + 2 * (size_t)es.n + 2;
    *n_bytes = bytes;
    return 0;
}

static char *put(char **p, const char *a, size_t an, const char *b, size_t bn, const char *c, size_t cn) {
    char *s = *p;
    memcpy(s, a, an);
    memcpy(s + an, b, bn);
    memcpy(s + an + bn, c, cn);
    s[an + bn + cn] = 0;
    *p = s + an + bn + cn + 1;
    return s;
}

void pl_env_child(char *const envp[], char **out, char *buf) {
    bool used[ENV_MAX] = {false};
    const char *was_of[ENV_MAX] = {NULL}; /* the child's own value of a variable plateau changes for it */
    size_t k = 0;
    char *p = buf;
    for (size_t i = 0; envp[i]; i++) {
        const char *e = envp[i];
        size_t n = name_len(e);
        saved_t *s = e[n] ? find_saved(e, n) : NULL;
        if (!s) {
            out[k++] = (char *)(uintptr_t)e;
            continue;
        }
        int si = (int)(s - es.v);
        if (used[si]) { /* the name twice: the first one counts, as for getenv */
            out[k++] = (char *)(uintptr_t)e;
            continue;
        }
        used[si] = true;
        const char *v = e + n + 1;
        if (s->part_entry) { /* plateau's entries first, then the child's own */
            out[k++] = put(&p, s->part_entry, strlen(s->part_entry), *v ? ":" : "", *v ? 1 : 0, v, strlen(v));
            was_of[si] = v;
        } else if (s->overrode) {
            out[k++] = (char *)(uintptr_t)s->entry;
            was_of[si] = v;
        } else {
            out[k++] = (char *)(uintptr_t)e; /* a variable of plateau's the program set itself: its own */
        }
    }
    char *set = put(&p, "PLATEAU_SET=", 12, "", 0, "", 0), *set_end = set + 12;
    for (int i = 0; i < es.n; i++) {
        const saved_t *s = &es.v[i];
        if (used[i]) continue;
        out[k++] = (char *)(uintptr_t)(s->part_entry ? s->part_entry : s->entry);
        if (set_end > set + 12) *set_end++ = ':';
        memcpy(set_end, s->entry, s->name_n);
        set_end += s->name_n;
    }
    *set_end = 0;
    p = set_end + 1;
    for (int i = 0; i < es.n; i++)
        if (was_of[i])
            out[k++] = put(&p, "PLATEAU_WAS_", 12, es.v[i].entry, es.v[i].name_n + 1, was_of[i], strlen(was_of[i]));
    out[k++] = set;
    out[k] = NULL;
}

void pl_env_restrip(void) {
    if (environ) strip(environ, false);
}

/* ------------------------------------------------------------------ exports */

/* getenv: the real one, but PYTHONPATH while CPython initialises (above). */
PL_EXPORT char *getenv(const char *name) {
    if (es.pythonpath && name[0] == 'P' && !strcmp(name, "PYTHONPATH") && !es.py_initialized())
        return (char *)(uintptr_t)es.pythonpath;
    if (es.real_getenv) return es.real_getenv(name);
    size_t n = strlen(name);
    if (!n || !environ) return NULL;
    for (char **e = environ; *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}

/* plateau's value of one of its variables, which the program's environment no longer shows (for the Python
 * bootstrap, through ctypes: python/plateau/_native.py), else the environment's. */
PL_EXPORT const char *plateau_env(const char *name) { return name ? pl_env_get(name) : NULL; }
