/* The watcher process of plateau run and plateau attach (supervise.h): the live status line and --stop-on-leak run
 * in a child of plateau, not in the program, that only reads the trace files (docs/live.md): the traced program is
 * never slowed or blocked by it. It is ended (SIGTERM) once the command has ended and before the command is reaped
 * (pl_relay_wait), and with plateau (a parent-death signal). What it does is the caller's (body). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervise.h"

/* The watcher ends with plateau: killed (SIGKILL) when plateau dies, so that it never holds plateau's stdout and
 * stderr open after it. A parent that died before prctl took effect is seen by getppid. */
static void end_with(pid_t parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(0);
}

pid_t pl_watcher_start(const pl_watcher_t *w) {
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid < 0 ? 0 : pid;
    end_with(parent);
    signal(SIGINT, SIG_IGN); /* Ctrl-C is for the command (or ends plateau attach); plateau ends the watcher */
    if (w->ignore_hup) signal(SIGHUP, SIG_IGN);
    w->quit_on(SIGTERM);
    if (w->mask) { /* plateau run blocks the signals it relays; the watcher takes SIGTERM */
        sigprocmask(SIG_SETMASK, w->mask, NULL);
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigprocmask(SIG_UNBLOCK, &term, NULL);
    }
    if (nice(10) < 0) { /* best effort: the watcher yields to the program */
    }
    int rc = w->body(w->ctx);
    fflush(NULL);
    _exit(rc);
}

int pl_watcher_end(pid_t watcher) {
    int status = 0;
    kill(watcher, SIGTERM);
    while (waitpid(watcher, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}
