/* cli/stop: what --stop-on-leak stops (docs/ci.md, "What is stopped"). Runs in plateau run's watcher process.
 *
 * The process that leaks is the one the live verdict judged (reports/live.h: its pid, its trace's start time and
 * executable). It is signalled only while it is still that process: a pidfd is opened on its pid first, then /proc
 * is checked (start time no later than its trace's, same executable: reports/alive.h); signals then go through the
 * pidfd, which cannot reach a later process that got the pid. The rest of the job is the chain of its ancestors up
 * to the command plateau run started (a shell running it, a launcher): they are stopped (SIGSTOP) before the leaking
 * process gets its SIGTERM, so that a shell cannot go on to its next command and a launcher cannot restart the
 * worker; once the leaking process has ended (or a grace period has passed), each of them gets SIGTERM, then
 * SIGCONT, and ends as it would on a SIGTERM of its own (a launcher passes it on to its other workers). A leaking
 * process that is not under the command (it left the tree) is stopped alone. Everything stopped is named on stderr
 * and in RUN_DIR/run.stopped. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alive.h"
#include "commands.h"
#include "format.h"

#define MAX_CHAIN 32
#define GRACE_MS 30000 /* how long the leaking process may take to end on SIGTERM before the job is ended anyway */

typedef struct proc_info {
    char state;         /* R, S, T, Z, ... */
    pid_t ppid;
    char comm[64];      /* escaped, for messages */
} proc_info_t;

static bool proc_info(pid_t pid, proc_info_t *out) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    const char *lp = strchr(buf, '('), *rp = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    if (!lp || !rp || rp < lp) return false;
    int ppid;
    if (sscanf(rp + 2, "%c %d", &out->state, &ppid) != 2) return false;
    out->ppid = (pid_t)ppid;
    char comm[32];
    size_t len = (size_t)(rp - lp - 1) < sizeof comm - 1 ? (size_t)(rp - lp - 1) : sizeof comm - 1;
    memcpy(comm, lp + 1, len);
    comm[len] = 0;
    snprintf(out->comm, sizeof out->comm, "%s", pl_format_esc(comm));
    return true;
}

static int pidfd_open_(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* Signal the process behind pidfd (or pid, without one: kernels before 5.3). */
static int send_sig(int pidfd, pid_t pid, int sig) {
#ifdef SYS_pidfd_send_signal
    if (pidfd >= 0) return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
#endif
    return kill(pid, sig);
}

/* Until the process has ended (a zombie counts: its parent is stopped and cannot reap it), at most ms. */
static bool wait_ended(int pidfd, pid_t pid, int ms) {
    if (pidfd >= 0) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        int rc;
        while ((rc = poll(&p, 1, ms)) < 0 && errno == EINTR) {
        }
        return rc > 0;
    }
    for (int waited = 0; waited <= ms; waited += 20) {
        proc_info_t pi;
        if (!proc_info(pid, &pi) || pi.state == 'Z' || pi.state == 'X') return true;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* The ancestors of pid up to and including cmd, nearest first; 0 when pid is cmd or not under it. */
static size_t job_chain(pid_t pid, pid_t cmd, pid_t *chain) {
    size_t n = 0;
    proc_info_t pi;
    if (pid == cmd || !proc_info(pid, &pi)) return 0;
    for (pid_t p = pi.ppid; p > 1 && n < MAX_CHAIN; p = pi.ppid) {
        chain[n++] = p;
        if (p == cmd) return n;
        if (!proc_info(p, &pi)) break;
    }
    return 0;
}

int pl_cli_stop_job(const pl_cli_stop_t *t, FILE *record) {
    pid_t pid = (pid_t)t->pid;
    char name[160];
    snprintf(name, sizeof name, "%s", pl_format_esc(t->name));
    int pidfd = pidfd_open_(pid);
    if (!pl_alive_same_process(t->pid, t->start_realtime_ns, t->exe)) {
        fprintf(stderr, "plateau: --stop-on-leak: pid %d (%s) has ended (or its pid now names another process): "
                        "nothing was stopped\n", (int)pid, name);
        if (pidfd >= 0) close(pidfd);
        return -ESRCH;
    }
    pid_t chain[MAX_CHAIN];
    size_t n = job_chain(pid, t->cmd_pid, chain);
    proc_info_t info[MAX_CHAIN];
    for (size_t i = n; i-- > 0;) { /* the command first: nothing below it can be restarted meanwhile */
        if (!proc_info(chain[i], &info[i])) snprintf(info[i].comm, sizeof info[i].comm, "?");
        kill(chain[i], SIGSTOP);
    }
    fprintf(stderr, "plateau: --stop-on-leak: stopping pid %d (%s) with SIGTERM: %s\n", (int)pid, name, t->line);
    if (record) fprintf(record, "pid %d (%s) stopped on leak (SIGTERM): %s\n", (int)pid, name, t->line);
    int rc = send_sig(pidfd, pid, SIGTERM);
    proc_info_t self;
    if (!rc && proc_info(pid, &self) && self.state == 'T') send_sig(pidfd, pid, SIGCONT); /* stopped: its handler runs */
    bool ended = n == 0 || wait_ended(pidfd, pid, GRACE_MS);
    if (pidfd >= 0) close(pidfd);
    if (n) {
        if (!ended)
            fprintf(stderr, "plateau: --stop-on-leak: pid %d did not end within %d s of SIGTERM\n", (int)pid,
                    GRACE_MS / 1000);
        char who[MAX_CHAIN * 80] = "";
        size_t off = 0;
        for (size_t i = 0; i < n && off < sizeof who; i++)
            off += (size_t)snprintf(who + off, sizeof who - off, "%spid %d (%s)", i ? ", " : "", (int)chain[i],
                                    info[i].comm);
        fprintf(stderr, "plateau: --stop-on-leak: ending the rest of the job with SIGTERM: %s\n", who);
        if (record) fprintf(record, "then the rest of the job (SIGTERM): %s\n", who);
        for (size_t i = 0; i < n; i++) { /* the leaking process's parent first, up to the command */
            kill(chain[i], SIGTERM);
            kill(chain[i], SIGCONT);
        }
    } else if (t->cmd_pid != pid) {
        fprintf(stderr, "plateau: --stop-on-leak: pid %d is not under the command (pid %d), which runs on\n", (int)pid,
                (int)t->cmd_pid);
    }
    return rc ? -errno : 0;
}
