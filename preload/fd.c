/* The program's descriptor calls that could take the tracer's own descriptors away: close, close_range,
 * closefrom, dup2, dup3. The tracer's long-lived descriptors (the trace file, the /proc and cgroup files the
 * sampler re-reads) sit in slots (tracer/write/fdslot.h) registered here. Untraced, those numbers would not be open,
 * so the program sees what it would see untraced: close() of one fails with EBADF and leaves it open, a range
 * close skips it, and dup2/dup3 onto one first moves ours to another number (pl_fdslot_displace) and then gives
 * the program the number it asked for. Raw close syscalls bypass this; the slot's identity check before each use
 * catches those (no write to a descriptor we no longer own).
 * Lock-free (the registry is an array of atomic pointers): safe in signal handlers, after fork, before the
 * constructor ran. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdslot.h"
#include "preload.h"

#define MAX_SLOTS 8

static _Atomic(pl_fdslot_t *) slots[MAX_SLOTS];

void pl_fd_register(pl_fdslot_t *s) {
    for (int i = 0; i < MAX_SLOTS; i++) {
        pl_fdslot_t *cur = atomic_load(&slots[i]);
        if (cur == s) return;
    }
    for (int i = 0; i < MAX_SLOTS; i++) {
        pl_fdslot_t *empty = NULL;
        if (atomic_compare_exchange_strong(&slots[i], &empty, s)) return;
    }
}

void pl_fd_unregister(pl_fdslot_t *s) {
    for (int i = 0; i < MAX_SLOTS; i++) {
        pl_fdslot_t *cur = s;
        atomic_compare_exchange_strong(&slots[i], &cur, NULL);
    }
}

static bool owned(int fd) {
    for (int i = 0; i < MAX_SLOTS; i++) {
        pl_fdslot_t *s = atomic_load(&slots[i]);
        if (s && pl_fdslot_owns(s, fd)) return true;
    }
    return false;
}

/* Our descriptors in [lo, hi], ascending, into out[MAX_SLOTS]. */
static int owned_in(unsigned lo, unsigned hi, int *out) {
    int n = 0;
    for (int i = 0; i < MAX_SLOTS; i++) {
        pl_fdslot_t *s = atomic_load(&slots[i]);
        int fd = s ? pl_fdslot_fd(s) : -1;
        if (fd < 0 || (unsigned)fd < lo || (unsigned)fd > hi) continue;
        int k = n++;
        while (k > 0 && out[k - 1] > fd) {
            out[k] = out[k - 1];
            k--;
        }
        out[k] = fd;
    }
    return n;
}

static void displace(int fd) {
    for (int i = 0; i < MAX_SLOTS; i++) {
        pl_fdslot_t *s = atomic_load(&slots[i]);
        if (s) pl_fdslot_displace(s, fd);
    }
}

/* The next definition of `name` (libc's) into *fn_out, once. */
static void resolve(void *fn_out, const char *name) {
    void *p = NULL;
    memcpy(&p, fn_out, sizeof p);
    if (p) return;
    p = dlsym(RTLD_NEXT, name);
    memcpy(fn_out, &p, sizeof p);
}

PL_EXPORT int close(int fd) {
    static int (*real)(int);
    if (owned(fd)) {
        errno = EBADF;
        return -1;
    }
    resolve(&real, "close");
    return real ? real(fd) : (int)syscall(SYS_close, fd);
}

static int real_close_range(unsigned lo, unsigned hi, int flags) {
    static int (*real)(unsigned, unsigned, int);
    resolve(&real, "close_range");
    return real ? real(lo, hi, flags) : (int)syscall(SYS_close_range, lo, hi, flags);
}

/* Close [from, to]: close_range, or one by one up to the descriptor limit when the kernel lacks it (as glibc's
 * closefrom falls back to). */
static int close_gap(unsigned from, unsigned to, int flags) {
    int r = real_close_range(from, to, flags);
    if (r < 0 && errno == ENOSYS && flags == 0) {
        struct rlimit rl;
        unsigned top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (1u << 20) ? (unsigned)rl.rlim_cur : 1u << 20;
        for (unsigned fd = from; fd <= to && fd < top; fd++) (void)syscall(SYS_close, fd);
        r = 0;
    }
    return r;
}

/* close_range over [lo, hi] without our descriptors: each gap between them. */
static int close_range_around(unsigned lo, unsigned hi, int flags) {
    int ours[MAX_SLOTS];
    int n = owned_in(lo, hi, ours), rc = 0;
    unsigned from = lo;
    for (int i = 0; i <= n; i++) {
        bool last = i == n;
        unsigned fd = last ? 0 : (unsigned)ours[i];
        if (last ? from <= hi : fd > from) {
            int r = close_gap(from, last ? hi : fd - 1, flags);
            if (r < 0 && !rc) rc = r;
        }
        if (!last) from = fd + 1;
    }
    return rc;
}

PL_EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
    int ours[MAX_SLOTS];
    if (first > last || owned_in(first, last, ours) == 0) return real_close_range(first, last, flags);
    int saved = errno, rc = close_range_around(first, last, flags);
    if (!rc) errno = saved;
    return rc;
}

PL_EXPORT void closefrom(int lowfd) {
    static void (*real)(int);
    int ours[MAX_SLOTS];
    if (lowfd < 0) lowfd = 0;
    if (owned_in((unsigned)lowfd, UINT_MAX, ours) == 0) {
        resolve(&real, "closefrom");
        if (real) {
            real(lowfd);
            return;
        }
    }
    int saved = errno;
    close_range_around((unsigned)lowfd, UINT_MAX, 0);
    errno = saved;
}

PL_EXPORT int dup2(int oldfd, int newfd) {
    static int (*real)(int, int);
    if (oldfd != newfd && owned(newfd)) displace(newfd);
    resolve(&real, "dup2");
    return real ? real(oldfd, newfd) : (int)syscall(SYS_dup2, oldfd, newfd);
}

PL_EXPORT int dup3(int oldfd, int newfd, int flags) {
    static int (*real)(int, int, int);
    if (oldfd != newfd && owned(newfd)) displace(newfd);
    resolve(&real, "dup3");
    return real ? real(oldfd, newfd, flags) : (int)syscall(SYS_dup3, oldfd, newfd, flags);
}
