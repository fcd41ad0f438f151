/* tail -F for plateau attach (see logtail.h). The file is identified by (st_dev, st_ino): the path naming another
 * inode is a rotation; our inode shorter than our offset is a truncation. A partial last line waits in `part`
 * until its newline arrives (a rotation or truncation delivers it as it is). */
#include "logtail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINE_MAX_BYTES 65536

struct pl_logtail {
    char *path;
    int fd;                 /* -1 while missing */
    dev_t dev;
    ino_t ino;
    off_t off;              /* bytes of fd read */
    char part[LINE_MAX_BYTES];
    size_t n_part;
    bool cut;               /* the line in part went over LINE_MAX_BYTES: the rest is dropped up to its newline */
};

int pl_logtail_open(const char *path, pl_logtail_t **out) {
    pl_logtail_t *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return -ENOMEM;
    }
    t->fd = -1;
    *out = t;
    return 0;
}

static void flush_part(pl_logtail_t *t, void (*line)(void *, const char *, size_t), void *ctx) {
    if (t->n_part) line(ctx, t->part, t->n_part);
    t->n_part = 0;
    t->cut = false;
}

/* Read fd from off to its end, delivering complete lines. */
static void drain(pl_logtail_t *t, void (*line)(void *, const char *, size_t), void *ctx) {
    char buf[65536];
    for (;;) {
        ssize_t k = pread(t->fd, buf, sizeof buf, t->off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return;
        t->off += k;
        for (ssize_t i = 0; i < k; i++) {
            if (buf[i] == '\n') {
                flush_part(t, line, ctx);
            } else if (t->n_part < sizeof t->part) {
                if (!t->cut) t->part[t->n_part++] = buf[i];
            } else {
                t->cut = true; /* deliver what fits at the newline */
            }
        }
    }
}

static void close_fd(pl_logtail_t *t) {
    if (t->fd >= 0) close(t->fd);
    t->fd = -1;
    t->off = 0;
}

int pl_logtail_poll(pl_logtail_t *t, void (*line)(void *ctx, const char *s, size_t n), void *ctx) {
    int ev = 0;
    struct stat by_path;
    bool have = stat(t->path, &by_path) == 0 && S_ISREG(by_path.st_mode);
    if (t->fd >= 0 && (!have || by_path.st_dev != t->dev || by_path.st_ino != t->ino)) {
        drain(t, line, ctx); /* what the old file got before it was replaced */
        flush_part(t, line, ctx);
        close_fd(t);
        if (have) ev |= PL_LOGTAIL_ROTATED;
    }
    if (t->fd < 0 && have) {
        t->fd = open(t->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* never waits on a FIFO put there */
        struct stat sb;
        if (t->fd >= 0 && (fstat(t->fd, &sb) != 0 || !S_ISREG(sb.st_mode))) close_fd(t);
        if (t->fd >= 0) {
            t->dev = sb.st_dev;
            t->ino = sb.st_ino;
            t->off = 0;
        }
    }
    if (t->fd < 0) return ev | PL_LOGTAIL_MISSING;
    struct stat sb;
    if (fstat(t->fd, &sb) == 0 && sb.st_size < t->off) { /* truncated in place: its new content from the start */
        flush_part(t, line, ctx);
        t->off = 0;
        ev |= PL_LOGTAIL_TRUNCATED;
    }
    drain(t, line, ctx);
    return ev;
}

void pl_logtail_close(pl_logtail_t *t) {
    if (!t) return;
    close_fd(t);
    free(t->path);
    free(t);
}
