/* supervise/: the supervisor of `plateau run` (docs/env.md, "Signals"; docs/ARCHITECTURE.md): what keeps the
 * command plateau started unaware of plateau while plateau waits for it.
 *   - the signal relay (relay.c): every signal a shell passes on is blocked and taken synchronously; one is forwarded
 *     to the command only when the command would not get it otherwise, which a witness process in our process group
 *     tells (a signal sent to the whole group stays pending in it);
 *   - the watcher (watcher.c): a child of plateau (plateau run, plateau attach) that only reads the traces, niced,
 *     ended by SIGTERM and with plateau (a parent-death signal);
 *   - the run status (run_status.c): how the command ended, the OOM killer's counts around it, appended to
 *     DIR/run.status, and ending plateau the way the command ended.
 * It prints nothing: callers say what failed. Not thread-safe: one supervisor per process (plateau is one thread). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* ---- the signal relay (relay.c) ---- */

typedef struct pl_relay {
    pid_t child;         /* the command; set by the caller once it is forked */
    pid_t witness;       /* our child in our process group that blocks every signal; 0 if none */
    int witness_fd[2];   /* the pipe whose EOF (our end closed, or we died) ends the witness; -1 if none */
    sigset_t waited;     /* the relayed signals and SIGCHLD: blocked in plateau, taken by pl_relay_wait */
    sigset_t old_mask;   /* the signal mask before pl_relay_open: the command and plateau's other children get it */
    struct sigaction old_chld; /* SIGCHLD's disposition before: the command gets it back */
} pl_relay_t;

/* Block every signal a shell passes on (all but SIGKILL, SIGSTOP, SIGCHLD, SIGWINCH, SIGURG, the synchronous faults
 * and those ignored when plateau started, as under nohup) and SIGCHLD (its disposition set to the default, so an
 * inherited SIG_IGN cannot reap the command before its status is read), and start the witness. Call before forking
 * the command: no signal is lost or kills plateau meanwhile. A witness that cannot start only costs the tell of
 * group-wide signals (r->witness 0). */
void pl_relay_open(pl_relay_t *r);

/* In a forked child (the command): SIGCHLD's disposition and the signal mask as they were before pl_relay_open. */
void pl_relay_child_restore(const pl_relay_t *r);

/* Wait until the command (r->child) has ended, relaying every signal meanwhile. *watcher (0: none) is ended
 * (pl_watcher_end) once the command has ended but before it is reaped, so that --stop-on-leak can never signal a
 * process that got the command's pid; *watcher is then 0 and *watcher_status its status (untouched when it ended by
 * itself earlier: then also reaped here). Returns 0 with the command's wait status in *status, or -errno with
 * *failed naming the call that failed ("sigwaitinfo", "waitpid"). Signals stay blocked on return. */
int pl_relay_wait(pl_relay_t *r, pid_t *watcher, int *status, int *watcher_status, const char **failed);

/* Stop the witness and close its pipe. The signal mask is left as it is (blocked). */
void pl_relay_close(pl_relay_t *r);

/* The decision pl_relay_wait takes for one signal, for tests: forward sig to the command? user: sent by a process
 * (si_code <= 0), not raised by the kernel; ours: sent by plateau or by the command itself; group: sent to the
 * whole process group (the witness got it); child_in_group: the command is still in plateau's process group. */
bool pl_relay_forwards(bool user, bool ours, bool group, bool child_in_group);

/* ---- the watcher (watcher.c) ---- */

typedef struct pl_watcher {
    const sigset_t *mask;    /* plateau run: the mask to restore in the watcher (pl_relay_t.old_mask), SIGTERM then
                              * unblocked; NULL (plateau attach): the mask is left as it is */
    bool ignore_hup;         /* plateau attach: SIGHUP ends plateau attach, which then ends the watcher */
    void (*quit_on)(int sig);/* make sig (SIGTERM) end body after its current poll (cli: pl_cli_live_quit_on) */
    int (*body)(void *ctx);  /* the watcher's work; its return value is the watcher's exit status */
    void *ctx;
} pl_watcher_t;

/* Fork the watcher: a child of plateau that dies with plateau (a parent-death SIGKILL: it never holds plateau's
 * stdout and stderr open after it, so a pipeline `plateau run ... | cat` ends when plateau does), ignores SIGINT
 * (Ctrl-C is for the command; plateau ends the watcher), runs at nice 10 (yields to the program) and exits with
 * body's value. Returns its pid, or 0 when fork failed. */
pid_t pl_watcher_start(const pl_watcher_t *w);

/* End the watcher: SIGTERM, then reap it. Returns its wait status. */
int pl_watcher_end(pid_t watcher);

/* ---- the run status (run_status.c) ---- */

/* How many processes the OOM killer killed so far: in plateau's own memory cgroup (v2 memory.events, v1
 * memory.oom_control: both count its descendants, the command's cgroup unless it moves itself) and on the host
 * (/proc/vmstat); -1 where unreadable. */
typedef struct pl_oom_counts { long cgroup, host; } pl_oom_counts_t;

pl_oom_counts_t pl_run_status_oom_counts(void);

/* The line DIR/run.status gets for the command pid that ended with wait status `status`: "pid P exit N" or
 * "pid P signal N", then " oom_kill N" and " host_oom_kill N" (the OOM killer's counts since `before`, where both
 * ends were readable) and a newline, into line (n bytes). Returns its length. */
int pl_run_status_line(char *line, size_t n, pid_t pid, int status, pl_oom_counts_t before, pl_oom_counts_t after);

/* Append the command's line to DIR/run.status (a process killed by a signal leaves no end record, so its trace
 * cannot say which signal), in one write, so that runs added with --append (even at once) each keep theirs. Only a
 * regular file is written: opened without following a link or waiting on a FIFO planted there. Best effort.
 * Returns 0 (written, or failed in a way not worth a word), or -EINVAL when run.status is not a regular file (the
 * caller says so in one line). */
int pl_run_status_write(const char *dir, pid_t pid, int status, pl_oom_counts_t before);

/* The command was killed by a signal and nothing of plateau's changes its status: end the same way (the default
 * action of that signal, without a core file of plateau's own), so a parent sees what it would see untraced:
 * WIFSIGNALED and the same WTERMSIG, not an exit status of 128 + signal. Returns only when the signal did not end
 * plateau (or the command exited). */
void pl_run_status_end_like(int status);
