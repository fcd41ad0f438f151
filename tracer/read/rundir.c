/* Run-directory listing: the one place that decides which files of a run directory are read as traces
 * (plateau report, tune, replay and run all list through it). Only regular files named *.pltrace are taken;
 * anything else with that name (FIFO, socket, device, directory, symbolic link) is skipped and named, because
 * opening a FIFO for reading blocks until a writer appears and a symbolic link can point anywhere. The check is
 * made with lstat semantics (fstatat AT_SYMLINK_NOFOLLOW) before any open; pl_trace_open repeats it on the
 * opened descriptor (O_NONBLOCK, fstat) so a file swapped in between cannot block a reader either.
 * Trust: a trace is read only when the directory's owner owns it, and, when the directory holds a
 * run-id file (PL_TRACE_RUN_ID_FILE, written by `plateau run`, also owned by the directory's owner), only when its
 * header carries that run id: a file planted by another user, or left by another run, is skipped and named.
 * Directories without a run-id file (the tracer preloaded by hand, runs before trace 1.4) are read whole.
 * Lives in tracer/read/ beside the reader so that report and tune link it without a new dependency edge. */
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

#include "event.h"
#include "grow.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static int push(char ***v, size_t *n, size_t *cap, char *s) {
    if (!s) return -ENOMEM;
    if (pl_grow((void **)v, cap, *n + 1, sizeof **v)) {
        free(s);
        return -ENOMEM;
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

/* Open name in the directory without following a link or blocking on a FIFO; a regular file owned by uid only. */
static int open_owned(int dfd, const char *name, uid_t uid) {
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != uid) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The run id in the directory's run-id file, 0 when there is none (or it is not the owner's, or malformed); the
 * host allocator of its second line into alloc ("" when absent or not one plateau run knows). */
static uint64_t read_run_id(int dfd, uid_t uid, char *alloc, size_t alloc_n) {
    alloc[0] = 0;
    int fd = open_owned(dfd, PL_TRACE_RUN_ID_FILE, uid);
    if (fd < 0) return 0;
    char buf[80];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *end;
    unsigned long long v = strtoull(buf, &end, 16);
    if (end == buf || (*end != '\n' && *end)) return 0;
    static const char *const known[] = {"glibc", "jemalloc"};
    for (size_t i = 0; *end && i < sizeof known / sizeof known[0]; i++) {
        char line[40];
        snprintf(line, sizeof line, "\nhost-allocator %s\n", known[i]);
        if (!strncmp(end, line, strlen(line))) snprintf(alloc, alloc_n, "%s", known[i]);
    }
    return (uint64_t)v;
}

/* The run id in a trace's header; -1 when the header cannot be read (the reader then says why). */
static int trace_run_id(int dfd, const char *name, uid_t uid, uint64_t *run_id) {
    int fd = open_owned(dfd, name, uid);
    if (fd < 0) return -1;
    uint8_t hb[PL_TRACE_HEADER_BYTES];
    ssize_t n = pread(fd, hb, sizeof hb, 0);
    close(fd);
    pl_trace_header_t h;
    if (n != (ssize_t)sizeof hb || pl_event_header_decode(hb, &h) != 0) return -1;
    *run_id = h.run_id;
    return 0;
}

int pl_trace_dir_list(const char *dir, pl_trace_dir_t *out) {
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d) return -errno;
    struct stat dsb;
    if (fstat(dirfd(d), &dsb) != 0) {
        int e = errno;
        closedir(d);
        return -e;
    }
    out->owner_uid = (uint32_t)dsb.st_uid;
    out->run_id = read_run_id(dirfd(d), dsb.st_uid, out->host_allocator, sizeof out->host_allocator);
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
        if (sb.st_uid != dsb.st_uid) {
            char why[96];
            snprintf(why, sizeof why, "owned by uid %u, not by the directory's owner (uid %u)", (unsigned)sb.st_uid,
                     (unsigned)dsb.st_uid);
            rc = push(&out->skipped, &out->n_skipped, &cap_s, join(e->d_name, why, ": "));
            continue;
        }
        uint64_t id;
        if (out->run_id && trace_run_id(dirfd(d), e->d_name, dsb.st_uid, &id) == 0 && id != out->run_id) {
            char why[96];
            if (id)
                snprintf(why, sizeof why, "from another run (run id %016llx, this run's is %016llx)",
                         (unsigned long long)id, (unsigned long long)out->run_id);
            else
                snprintf(why, sizeof why, "written outside this run (no run id; this run's is %016llx)",
                         (unsigned long long)out->run_id);
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
