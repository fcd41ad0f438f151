/* reports/analyze/end: how a process ended (see end.h, docs/end-of-run.md). */
#include "end.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static const char *sig_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGPIPE: return "SIGPIPE";
    default: return NULL;
    }
}

/* " while the OOM killer killed N process(es) in the run's cgroup (memory.events)" and the host's count, or "" */
static void oom_phrase(const pl_end_t *e, char *buf, size_t n) {
    buf[0] = 0;
    if (e->oom_kill > 0)
        snprintf(buf, n, " while the OOM killer killed %ld process%s in the run's cgroup (memory.events)", e->oom_kill,
                 e->oom_kill > 1 ? "es" : "");
    else if (e->host_oom_kill > 0)
        snprintf(buf, n, " while the kernel's OOM killer killed %ld process%s on this host (/proc/vmstat)",
                 e->host_oom_kill, e->host_oom_kill > 1 ? "es" : "");
}

void pl_end_of(const pl_extract_t *x, const pl_extract_proc_t *p, pl_end_t *out) {
    pl_end_t e = {.exit_status = -1, .oom_kill = -1, .host_oom_kill = -1};
    /* the command's status is its last image's: an image that exec'd ended cleanly, whatever came after */
    const pl_extract_status_t *st = p->exec_end ? NULL : pl_run_status_of(x, p->pid);
    /* the run's OOM counts: from its command's line (they are the cgroup's and host's, not one process's) */
    if (x && x->n_status) {
        e.oom_kill = x->status[x->n_status - 1].oom_kill;
        e.host_oom_kill = x->status[x->n_status - 1].host_oom_kill;
    }
    if (st) {
        e.signal = st->signal;
        e.exit_status = st->signal ? -1 : st->exit;
    }
    char oom[160];
    oom_phrase(&e, oom, sizeof oom);
    bool killed_by_oom = e.oom_kill > 0 || (e.oom_kill < 0 && e.host_oom_kill > 0);
    const char *sn = sig_name(e.signal);
    if (p->uncaught[0]) {
        bool cuda = strstr(p->uncaught, "OutOfMemoryError") != NULL;
        e.kind = cuda ? PL_END_CUDA_OOM : PL_END_MEMORY_ERROR;
        snprintf(e.line, sizeof e.line, "ended by an uncaught %s%s", p->uncaught,
                 cuda ? ": the device ran out of memory" : ": the host ran out of memory (or an address-space limit)");
        if (e.exit_status > 0)
            snprintf(e.line + strlen(e.line), sizeof e.line - strlen(e.line), " (exit status %d)", e.exit_status);
    } else if (p->running && !p->clean_end) {
        e.kind = PL_END_RUNNING;
        snprintf(e.line, sizeof e.line, "still running (no end record yet)");
    } else if (e.signal == SIGKILL || (!p->clean_end && !st && killed_by_oom)) {
        e.kind = killed_by_oom ? PL_END_OOM_KILL : PL_END_SIGKILL;
        if (killed_by_oom)
            snprintf(e.line, sizeof e.line, "killed by %s%s: out of memory",
                     e.signal ? "SIGKILL" : "a signal (no end record)", oom);
        else
            snprintf(e.line, sizeof e.line, "killed by SIGKILL: the OOM killer or kill -9%s",
                     e.oom_kill <= 0 && e.host_oom_kill == 0
                         ? " (the kernel counted no OOM kill on this host while it ran: kill -9, or a user-space OOM "
                           "killer such as systemd-oomd)"
                         : e.oom_kill == 0 ? " (no OOM kill counted in the run's cgroup)" : "");
    } else if (e.signal == SIGSEGV || e.signal == SIGBUS || e.signal == SIGILL || e.signal == SIGFPE ||
               e.signal == SIGABRT) {
        e.kind = PL_END_CRASH;
        snprintf(e.line, sizeof e.line, "crashed: %s (signal %d)%s", sn, e.signal,
                 e.signal == SIGABRT ? ", an abort (a failed assertion, a C++ exception not caught)" : "");
    } else if (e.signal > 0) {
        e.kind = PL_END_SIGNAL;
        if (sn) snprintf(e.line, sizeof e.line, "ended by %s (signal %d)", sn, e.signal);
        else snprintf(e.line, sizeof e.line, "ended by signal %d", e.signal);
    } else if (!p->clean_end) {
        e.kind = PL_END_NO_RECORD;
        snprintf(e.line, sizeof e.line, "ended without an end record: by a signal (a crash, SIGKILL, the OOM killer)%s",
                 oom[0] ? oom : "");
    } else if (p->exec_end) {
        e.kind = PL_END_CLEAN;
        snprintf(e.line, sizeof e.line, "replaced itself by exec (the new image has a trace of its own)");
    } else if (e.exit_status > 0) {
        e.kind = PL_END_EXIT_STATUS;
        snprintf(e.line, sizeof e.line, "exited with status %d", e.exit_status);
    } else {
        e.kind = PL_END_CLEAN;
        snprintf(e.line, sizeof e.line, "exited%s", e.exit_status == 0 ? " with status 0" : "");
    }
    *out = e;
}
