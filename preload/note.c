/* plateau's own channel for notes (docs/env.md, "Notes"): every line the preload has to say (a malformed variable,
 * a feature switched off, "this Python's frames are not readable") goes to the run directory's `plateau-notes`
 * file, never to the program's descriptors, so a parent that captures the program's stderr sees exactly its
 * untraced bytes. `plateau run` prints the notes once, grouped, on its own stderr when the command ends.
 * Each note is one line "PID<TAB>TEXT", written with one write(2) to the file opened O_APPEND | O_CLOEXEC |
 * O_NOFOLLOW | O_NONBLOCK and closed again (no descriptor is held; a FIFO or a link planted there, a full disk,
 * the program's file-size limit or an unwritable directory drop the note). Notes said before the run directory exists (the constructor's option
 * checks) wait in a small buffer until pl_note_ready() names it. Deduplicated per process: the same text is
 * written once by a process (a forked child starts afresh). No allocation, no lock, no stdio: async-signal-safe
 * and usable before the constructor ran. */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

#define N_SEEN 64
#define PENDING_BYTES 4096
#define LINE_BYTES 1200

static struct {
    char path[PATH_MAX];              /* DIR/plateau-notes once the run directory exists */
    atomic_bool ready;                /* path is set: write at once */
    char pending[PENDING_BYTES];      /* lines said before that (the constructor, one thread) */
    atomic_size_t n_pending;
    atomic_uint_fast64_t seen[N_SEEN]; /* hashes of the texts this process wrote (0: free) */
} nt;

static uint64_t hash_text(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ? h : 1;
}

/* True the first time this process says `h` (or when the table is full: then it says it again). */
static bool first_time(uint64_t h) {
    for (int i = 0; i < N_SEEN; i++) {
        uint_fast64_t cur = atomic_load_explicit(&nt.seen[i], memory_order_relaxed);
        if (cur == h) return false;
        if (cur == 0) {
            uint_fast64_t empty = 0;
            if (atomic_compare_exchange_strong(&nt.seen[i], &empty, h)) return true;
            if (empty == h) return false;
        }
    }
    return true;
}

/* Appends buf, unless that would pass the program's file-size limit (RLIMIT_FSIZE): a write past it would raise
 * SIGXFSZ, which kills the program by default. */
static void write_file(const char *buf, size_t n) {
    int fd = (int)syscall(SYS_openat, AT_FDCWD, nt.path,
                          O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0) return;
    struct rlimit rl;
    struct stat sb;
    bool fits = !getrlimit(RLIMIT_FSIZE, &rl) &&
                (rl.rlim_cur == RLIM_INFINITY || (!fstat(fd, &sb) && (rlim_t)sb.st_size + n <= rl.rlim_cur));
    if (fits) (void)!write(fd, buf, n);
    syscall(SYS_close, fd);
}

void pl_note(const char *msg) {
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n') n--;
    if (!n || !first_time(hash_text(msg, n))) return;
    char line[LINE_BYTES];
    int k = snprintf(line, sizeof line, "%u\t", (unsigned)getpid());
    if (k < 0) return;
    size_t len = (size_t)k;
    for (size_t i = 0; i < n && len < sizeof line - 1; i++) line[len++] = msg[i] == '\n' ? ' ' : msg[i];
    line[len++] = '\n';
    if (atomic_load_explicit(&nt.ready, memory_order_acquire)) {
        write_file(line, len);
        return;
    }
    size_t at = atomic_fetch_add(&nt.n_pending, len);
    if (at + len <= sizeof nt.pending) memcpy(nt.pending + at, line, len);
}

void pl_note_ready(const char *dir) {
    char cwd[PATH_MAX / 2] = "";
    if (dir[0] != '/' && !getcwd(cwd, sizeof cwd)) return; /* a relative PLATEAU_DIR: fixed now, whatever chdir */
    if (snprintf(nt.path, sizeof nt.path, "%s%s%s/%s", cwd, cwd[0] ? "/" : "", dir, PL_TRACE_NOTES_FILE) >=
        (int)sizeof nt.path)
        return;
    atomic_store_explicit(&nt.ready, true, memory_order_release);
    size_t n = atomic_exchange(&nt.n_pending, 0);
    if (n > sizeof nt.pending) n = sizeof nt.pending; /* whole lines only: a line that did not fit was not copied */
    while (n && nt.pending[n - 1] != '\n') n--;
    if (n) write_file(nt.pending, n);
}

void pl_note_fork_child(void) {
    for (int i = 0; i < N_SEEN; i++) atomic_store_explicit(&nt.seen[i], 0, memory_order_relaxed);
}
