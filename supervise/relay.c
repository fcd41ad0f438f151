/* The signal relay of plateau run (supervise.h; docs/env.md, "Signals").
 * The command stays in our process group, so the terminal's and job control's signals reach it as they would without
 * plateau. Every catchable signal a shell passes on is blocked here and taken with sigwaitinfo, so none kills plateau
 * and orphans the command. A signal is forwarded to the command only when it would not get it otherwise: never one
 * the kernel raised (tty, our own SIGPIPE), never one the command sent, and never one sent to the whole process group
 * (kill -- -PGID, kill 0, the cgroup killing each process) while the command is still in our group. Group-wide
 * delivery is seen by a witness: a child of ours in our process group that blocks every signal and does nothing, so a
 * signal sent to the group stays pending in it. Before looking at its pending set (/proc/PID/status, ShdPnd) we call
 * setpgid on it, which waits for the kernel's task-list lock that a group kill holds while it signals every member; a
 * witness that saw the signal is replaced by a fresh one. Stop signals (SIGTSTP, SIGTTIN, SIGTTOU) are relayed the
 * same way and then stop plateau too, as their default action did; SIGCONT is relayed when it was sent to plateau
 * alone. When plateau itself is killed (SIGKILL), the command runs on. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervise.h"

static bool forwardable(int sig) {
    switch (sig) {
    case SIGKILL: case SIGSTOP:                                  /* cannot be caught */
    case SIGCHLD: case SIGWINCH: case SIGURG:                    /* about us, not requests to the program */
    case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGTRAP: case SIGSYS: case SIGABRT: /* faults */
        return false;
    default: return true;
    }
}

/* The signals we relay: every forwardable one not ignored when we started (nohup's SIGHUP stays ignored). */
static void relay_set(sigset_t *set) {
    sigemptyset(set);
    for (int sig = 1; sig <= SIGRTMAX; sig++) {
        if (!forwardable(sig)) continue;
        struct sigaction cur;
        if (sigaction(sig, NULL, &cur) != 0 || cur.sa_handler == SIG_IGN) continue;
        sigaddset(set, sig); /* fails harmlessly for the real-time signals the C library keeps */
    }
}

static pid_t witness_start(const int fd[2]) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid < 0 ? 0 : pid;
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int k = 0; k < 3; k++) dup2(null, k); /* holds no pipe or terminal the program's readers wait on */
    close(fd[1]);
    if (getppid() != parent) _exit(0);
    char c;
    while (read(fd[0], &c, 1) != 0) {  /* until plateau closes the write end (or dies) */
    }
    _exit(0);
}

static void witness_stop(pl_relay_t *r) {
    if (r->witness <= 0) return;
    kill(r->witness, SIGKILL);
    while (waitpid(r->witness, NULL, 0) < 0 && errno == EINTR) {
    }
    r->witness = 0;
}

/* Did the witness get sig, i.e. was it sent to our whole process group? A witness that got it is replaced. */
static bool witness_saw(pl_relay_t *r, int sig) {
    if (r->witness <= 0 || sig > 64) return false;
    setpgid(r->witness, getpgrp()); /* returns once a group kill in progress has signalled every member */
    char path[64], buf[4096]; /* ShdPnd is in the first kilobyte or two */
    snprintf(path, sizeof path, "/proc/%d/status", (int)r->witness);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    const char *p = strstr(buf, "\nShdPnd:");
    if (!p) return false;
    unsigned long long pending = strtoull(p + 8, NULL, 16);
    if (!(pending & (1ull << (sig - 1)))) return false;
    witness_stop(r);
    r->witness = witness_start(r->witness_fd);
    return true;
}

bool pl_relay_forwards(bool user, bool ours, bool group, bool child_in_group) {
    return user && !ours && !(group && child_in_group);
}

static void relay_signal(pl_relay_t *r, int sig, const siginfo_t *si) {
    bool user = si->si_code <= 0; /* kill, sigqueue, tgkill; > 0: raised by the kernel (tty, our own fault) */
    bool ours = user && (si->si_pid == getpid() || si->si_pid == r->child);
    bool group = witness_saw(r, sig); /* also consumes a terminal signal the witness got */
    bool child_in_group = getpgid(r->child) == getpgrp();
    if (pl_relay_forwards(user, ours, group, child_in_group)) kill(r->child, sig);
    if (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) kill(getpid(), SIGSTOP); /* their default action */
}

void pl_relay_open(pl_relay_t *r) {
    memset(r, 0, sizeof *r);
    r->witness_fd[0] = r->witness_fd[1] = -1;
    relay_set(&r->waited);
    sigaddset(&r->waited, SIGCHLD);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL; /* an inherited SIG_IGN would reap the command before we can read its status */
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, &r->old_chld);
    sigprocmask(SIG_BLOCK, &r->waited, &r->old_mask);
    if (pipe2(r->witness_fd, O_CLOEXEC) == 0) r->witness = witness_start(r->witness_fd);
    else r->witness_fd[0] = r->witness_fd[1] = -1;
}

void pl_relay_child_restore(const pl_relay_t *r) {
    sigaction(SIGCHLD, &r->old_chld, NULL);
    sigprocmask(SIG_SETMASK, &r->old_mask, NULL);
}

/* A SIGCHLD came: the watcher that ended by itself is reaped; one still running is ended once the command has ended
 * (not reaped yet: its pid cannot be reused). */
static void watcher_on_chld(pid_t child, pid_t *watcher, int *watcher_status) {
    if (*watcher > 0 && waitpid(*watcher, watcher_status, WNOHANG) == *watcher) *watcher = 0;
    if (*watcher <= 0) return;
    siginfo_t ci = {0};
    if (waitid(P_PID, (id_t)child, &ci, WEXITED | WNOHANG | WNOWAIT) == 0 && ci.si_pid == child) {
        *watcher_status = pl_watcher_end(*watcher);
        *watcher = 0;
    }
}

int pl_relay_wait(pl_relay_t *r, pid_t *watcher, int *status, int *watcher_status, const char **failed) {
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&r->waited, &si);
        if (sig < 0) {
            if (errno == EINTR) continue;
            *failed = "sigwaitinfo";
            return -errno;
        }
        if (sig != SIGCHLD) {
            relay_signal(r, sig, &si);
            continue;
        }
        watcher_on_chld(r->child, watcher, watcher_status);
        pid_t w = waitpid(r->child, status, WNOHANG);
        if (w == r->child) return 0;
        if (w < 0 && errno != EINTR) {
            *failed = "waitpid";
            return -errno;
        }
        if (r->witness > 0 && waitpid(r->witness, NULL, WNOHANG) == r->witness) r->witness = 0;
    }
}

void pl_relay_close(pl_relay_t *r) {
    witness_stop(r);
    if (r->witness_fd[0] >= 0) {
        close(r->witness_fd[0]);
        close(r->witness_fd[1]);
        r->witness_fd[0] = r->witness_fd[1] = -1;
    }
}
