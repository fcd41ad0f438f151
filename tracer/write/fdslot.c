/* Descriptors the tracer keeps inside the program's descriptor table (see fdslot.h for the three layers).
 * Ordering: acquire increments `users` and then reads `fd`; displace stores the new `fd` and then reads `users`.
 * Both sequentially consistent, so either displace sees the user (and waits for its release) or the user sees
 * the new number. */
#include "fdslot.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static unsigned my_tid(void) { return (unsigned)syscall(SYS_gettid); }

static void raw_close(int fd) { syscall(SYS_close, fd); }

int pl_fdslot_high_hint(void) {
    struct rlimit rl;
    rlim_t cur = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < cur) cur = rl.rlim_cur;
    if (cur >= 64) return (int)cur - 32;
    return (int)cur / 2 > 3 ? (int)cur / 2 : 3;
}

/* A close-on-exec copy of fd at a high number (the lowest free one at or above the hint), or fd itself when
 * none is free there. */
static int move_high(int fd) {
    int hint = pl_fdslot_high_hint();
    if (fd >= hint) return fd;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, hint);
    if (hi < 0) return fd;
    raw_close(fd);
    return hi;
}

int pl_fdslot_set(pl_fdslot_t *s, int fd) {
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int e = errno;
        raw_close(fd);
        return -e;
    }
    fd = move_high(fd);
    s->dev = (uint64_t)sb.st_dev;
    s->ino = (uint64_t)sb.st_ino;
    atomic_store(&s->fd1, fd + 1);
    return 0;
}

int pl_fdslot_acquire(pl_fdslot_t *s) {
    atomic_store(&s->user_tid, my_tid()); /* before users: a displace that sees the user sees who it is */
    atomic_fetch_add(&s->users, 1);
    int fd = atomic_load(&s->fd1) - 1;
    if (fd < 0) return -EBADF;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_dev != s->dev || (uint64_t)sb.st_ino != s->ino) {
        /* Closed behind the interposers' back: the number is no longer ours, never close or write it. */
        int fd1 = fd + 1;
        atomic_compare_exchange_strong(&s->fd1, &fd1, 0);
        return -EBADF;
    }
    return fd;
}

void pl_fdslot_release(pl_fdslot_t *s) { atomic_fetch_sub(&s->users, 1); }

bool pl_fdslot_owns(const pl_fdslot_t *s, int fd) {
    return fd >= 0 && atomic_load(&((pl_fdslot_t *)s)->fd1) == fd + 1;
}

int pl_fdslot_fd(const pl_fdslot_t *s) { return atomic_load(&((pl_fdslot_t *)s)->fd1) - 1; }

bool pl_fdslot_displace(pl_fdslot_t *s, int fd) {
    if (fd < 0) return false;
    int cur = fd + 1;
    if (atomic_load(&s->fd1) != cur) return false;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, pl_fdslot_high_hint());
    if (hi == fd) hi = -1; /* cannot happen (fd is open), but never hand back the number being taken */
    if (!atomic_compare_exchange_strong(&s->fd1, &cur, hi + 1)) {
        if (hi >= 0) raw_close(hi);
        return false;
    }
    /* Users that read the old number before the store finish with it before the program's dup2 replaces it.
     * The one exception is a signal handler interrupting a use on its own thread: it cannot wait for itself. */
    if (atomic_load(&s->users) > 0 && atomic_load(&s->user_tid) != my_tid())
        while (atomic_load(&s->users) > 0) sched_yield();
    return true;
}

void pl_fdslot_close(pl_fdslot_t *s) {
    int fd = atomic_exchange(&s->fd1, 0) - 1;
    if (fd >= 0) raw_close(fd);
}
