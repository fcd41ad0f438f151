/* Run-directory listing: the one place that decides which files of a run directory are read as traces
 * (plateau report, tune, replay and run all list through it). Only regular files named *.pltrace are taken;
 * anything else with that name (FIFO, socket, device, directory, symbolic link) is skipped and named, because
 * opening a FIFO for reading blocks until a writer appears and a symbolic link can point anywhere. The check is
 * made with lstat semantics (fstatat AT_SYMLINK_NOFOLLOW) before any open; pl_trace_open repeats it on the
 * opened descriptor (O_NONBLOCK, fstat) so a file swapped in between cannot block a reader either.
 * Lives in tracer/ beside the reader so that report and tune link it without a new dependency edge. */
#include "config.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <plateau/trace.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static int push(char ***v, size_t *n, size_t *cap, char *s) {
    if (!s) return -ENOMEM;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        char **nv = realloc(*v, nc * sizeof *nv);
        if (!nv) {
            free(s);
            return -ENOMEM;
        }
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = s;
    return 0;
}

static char *join(const char *a, const char *b, const char *sep) {
    size_t len = strlen(a) + strlen(sep) + strlen(b) + 1;
    char *s = malloc(len);
    if (s) snprintf(s, len, "%s%s%s", a, sep, b);
    return s;
}

const char *pl_trace_file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFDIR: return "a directory";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
    }
}

int pl_trace_dir_list(const char *dir, pl_trace_dir_t *out) {
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d) return -errno;
    size_t cap_p = 0, cap_s = 0;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (!has_suffix(e->d_name, ".pltrace")) continue;
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) continue; /* removed since readdir */
            rc = push(&out->skipped, &out->n_skipped, &cap_s, join(e->d_name, strerror(errno), ": "));
            continue;
        }
        if (!S_ISREG(sb.st_mode)) {
            char why[64];
            snprintf(why, sizeof why, "%s, not a regular file", pl_trace_file_kind(sb.st_mode));
            rc = push(&out->skipped, &out->n_skipped, &cap_s, join(e->d_name, why, ": "));
            continue;
        }
        rc = push(&out->paths, &out->n_paths, &cap_p, join(dir, e->d_name, "/"));
    }
    closedir(d);
    if (rc) {
        pl_trace_dir_free(out);
        return rc;
    }
    if (out->n_paths) qsort(out->paths, out->n_paths, sizeof *out->paths, cmp_str);
    if (out->n_skipped) qsort(out->skipped, out->n_skipped, sizeof *out->skipped, cmp_str);
    return 0;
}

void pl_trace_dir_free(pl_trace_dir_t *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n_paths; i++) free(l->paths[i]);
    for (size_t i = 0; i < l->n_skipped; i++) free(l->skipped[i]);
    free(l->paths);
    free(l->skipped);
    memset(l, 0, sizeof *l);
}
