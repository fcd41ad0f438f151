/* Python site naming helpers (pysites.h). The classification is by path only: the report runs after the program,
 * possibly elsewhere, and the trace records no sys.path; standard-library and package directories have names
 * that every CPython install shares. */
#include "pysites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *after_lib_python(const char *file) {
    for (const char *p = strstr(file, "/lib"); p; p = strstr(p + 1, "/lib")) {
        const char *q = p + 4;
        if (!strncmp(q, "64", 2)) q += 2;
        if (strncmp(q, "/python", 7)) continue;
        q += 7;
        while ((*q >= '0' && *q <= '9') || *q == '.') q++;
        if (*q == '/') return q + 1;
    }
    return NULL;
}

static const char *after_packages(const char *file) {
    static const char *const dirs[] = {"/site-packages/", "/dist-packages/"};
    const char *best = NULL;
    for (size_t i = 0; i < 2; i++) {
        const char *p = strstr(file, dirs[i]), *last = NULL;
        for (; p; p = strstr(p + 1, dirs[i])) last = p + strlen(dirs[i]);
        if (last && (!best || last > best)) best = last;
    }
    return best;
}

/* Does the folder of `file` (up to `base`, its last '/') end with `dir` ("/python/boot")? */
static bool dir_ends(const char *file, const char *base, const char *dir) {
    size_t n = strlen(dir);
    return (size_t)(base - file) >= n && !strncmp(base - n, dir, n);
}

/* A file of plateau's own Python side (the .py files of python/plateau/ and python/boot/sitecustomize.py: built, or
 * under <datadir>/plateau/python/ installed; the wheel's package plateau_profiler/ and its boot/, wherever pip put it,
 * `--target` folders included): the census, the step hook and the callbacks run inside the program, but their lines
 * are never the line a user changes. Matched by folder and file name, so a user's own folder of the same name with
 * other files stays theirs. */
static bool plateau_own(const char *file) {
    static const char *const names[] = {"__init__.py", "_callbacks.py", "_census.py", "_native.py", "_steps.py",
                                        "_torchstats.py", "torch.py"};
    const char *base = strrchr(file, '/');
    if (!base) return false;
    if (dir_ends(file, base, "/python/boot") || dir_ends(file, base, "/plateau_profiler/boot"))
        return !strcmp(base + 1, "sitecustomize.py");
    if (!dir_ends(file, base, "/python/plateau") && !dir_ends(file, base, "/plateau_profiler")) return false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(base + 1, names[i])) return true;
    return false;
}

bool pl_pysite_is_user(const char *file) {
    if (!file || !file[0] || file[0] == '<') return false;
    return !after_packages(file) && !after_lib_python(file) && !plateau_own(file);
}

const char *pl_pysite_short(const char *file) {
    if (!file) return "";
    const char *p = after_packages(file);
    if (p) return p;
    p = after_lib_python(file);
    if (p) return p;
    p = strrchr(file, '/');
    return p ? p + 1 : file;
}

char *pl_pysite_source(const char *file, int line, int64_t not_after_ns) {
    if (!file || file[0] == '<' || line < 1) return NULL;
    FILE *f = fopen(file, "r");
    if (!f) return NULL;
    struct stat sb;
    if (not_after_ns && (fstat(fileno(f), &sb) ||
                         (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec > not_after_ns)) {
        fclose(f);
        return NULL;
    }
    char buf[4096];
    int n = 0;
    char *out = NULL;
    while (fgets(buf, sizeof buf, f)) {
        size_t len = strlen(buf);
        bool whole = len && buf[len - 1] == '\n';
        if (++n == line) {
            char *s = buf;
            while (*s == ' ' || *s == '\t') s++;
            size_t k = strlen(s);
            while (k && (s[k - 1] == '\n' || s[k - 1] == '\r' || s[k - 1] == ' ' || s[k - 1] == '\t')) k--;
            if (k > 160) k = 160;
            if (k) {
                out = malloc(k + 1);
                if (out) {
                    memcpy(out, s, k);
                    out[k] = 0;
                }
            }
            break;
        }
        /* a line longer than the buffer continues in the next read: count it once */
        while (!whole && fgets(buf, sizeof buf, f)) {
            len = strlen(buf);
            whole = len && buf[len - 1] == '\n';
        }
    }
    fclose(f);
    return out;
}
