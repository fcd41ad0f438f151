/* A file descriptor the tracer keeps open inside someone else's program (the trace file, the /proc and cgroup
 * files the sampler re-reads), held so that it can never become the program's descriptor by accident.
 *
 * The danger: the program closes descriptors it did not open (closefrom(3), a daemon's close loop) or dup2s
 * onto a number it believes free (`exec 3>file` in bash), then opens its own file, which gets our number; a
 * tracer that kept writing to "its" number would write into the program's file. A slot closes that hole in
 * three layers:
 *  1. The descriptor lives at a high number (pl_fdslot_set moves it near the soft RLIMIT_NOFILE, at most 1024),
 *     so the program's own open() calls get the numbers they get untraced, and a close-and-reopen by the
 *     program lands on our number only after it has filled every lower one.
 *  2. The preload's close/close_range/closefrom/dup2/dup3 interposers ask pl_fdslot_owns and skip our number
 *     (close of it fails with EBADF, as it would untraced) or, for dup2/dup3 onto it, call pl_fdslot_displace,
 *     which moves ours to another number and waits until no user still holds the old one.
 *  3. Every use goes through pl_fdslot_acquire, which checks the open file is still the one we opened
 *     (st_dev, st_ino). A raw close syscall that bypassed the interposers then ends in no write, never in a
 *     write into the program's file; the owner sees -EBADF and stops or reopens.
 * Users are the tracer's own threads (signals blocked) and short flushes on program threads. No malloc, no
 * locks: the fd and a user count are atomics (Dekker-style, sequentially consistent), so the interposers are
 * safe in signal handlers and after fork. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct pl_fdslot {
    atomic_int fd1;        /* the descriptor + 1; 0 when empty or given up, so a zeroed slot is empty */
    atomic_int users;      /* threads between acquire and release */
    atomic_uint user_tid;  /* the last thread to acquire (a displace from its own signal handler cannot wait) */
    uint64_t dev, ino;     /* identity of the open file, written by set (before the slot is published) */
} pl_fdslot_t;

#define PL_FDSLOT_INIT {0, 0, 0, 0, 0}

/* The descriptor, -1 when empty (for a single-threaded owner that needs the number itself). */
int pl_fdslot_fd(const pl_fdslot_t *s);

/* Take ownership of `fd`: move it to a high number (close-on-exec), record the file's identity. Returns 0 or
 * -errno (then `fd` is closed and the slot stays empty). The slot must be empty and not yet visible to other
 * threads' acquire, or the caller must know no one uses it. */
int pl_fdslot_set(pl_fdslot_t *s, int fd);

/* The descriptor, still ours (same file as at set), for one use; -EBADF when the slot is empty or the number
 * now names another file (the slot is then emptied without closing: the number is the program's). Every
 * acquire, successful or not, is paired with a release. */
int pl_fdslot_acquire(pl_fdslot_t *s);
void pl_fdslot_release(pl_fdslot_t *s);

/* True when `fd` is this slot's descriptor. */
bool pl_fdslot_owns(const pl_fdslot_t *s, int fd);

/* Called when the program is about to take the number `fd` (dup2/dup3 onto it): if it is ours, move ours to
 * another high number and wait until no other thread uses the old one; if no number is free, give the slot up
 * (empty, the old number left for the program's dup2 to replace). Returns true when the slot owned `fd`. */
bool pl_fdslot_displace(pl_fdslot_t *s, int fd);

/* Empty the slot and close the descriptor (with the raw syscall: the preload's close interposer would refuse). */
void pl_fdslot_close(pl_fdslot_t *s);

/* The number pl_fdslot_set aims at: min(soft RLIMIT_NOFILE, 1024) - 32 (half the limit below 64). For tests. */
int pl_fdslot_high_hint(void);
