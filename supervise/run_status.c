/* The run status (supervise.h): how the command ended, for the report (docs/end-of-run.md). DIR/run.status gets one
 * line per run, "pid P exit N" or "pid P signal N" with the OOM killer's counts over the run, appended in one write.
 * A SIGKILL is reported as the OOM killer only when one was counted. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervise.h"

/* The first "KEY N" line of file, N >= 0, or -1 (unreadable, absent). */
static long read_counter(const char *file, const char *key) {
    FILE *f = fopen(file, "re");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (v < 0 && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ' ' && sscanf(line + kl + 1, "%ld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

pl_oom_counts_t pl_run_status_oom_counts(void) {
    pl_oom_counts_t c = {-1, read_counter("/proc/vmstat", "oom_kill")};
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[4096], path[4200];
    while (f && c.cgroup < 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const char *v1 = strstr(line, ":memory:/");
        if (!strncmp(line, "0::/", 4)) {
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.events", line + 3);
            c.cgroup = read_counter(path, "oom_kill");
        } else if (v1) {
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.oom_control", v1 + 8);
            c.cgroup = read_counter(path, "oom_kill");
            if (c.cgroup < 0) /* a container sees its own cgroup as the hierarchy's root */
                c.cgroup = read_counter("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill");
        }
    }
    if (f) fclose(f);
    return c;
}

int pl_run_status_line(char *line, size_t size, pid_t pid, int status, pl_oom_counts_t before,
                       pl_oom_counts_t after) {
    int n = WIFSIGNALED(status) ? snprintf(line, size, "pid %d signal %d", (int)pid, WTERMSIG(status))
                                : snprintf(line, size, "pid %d exit %d", (int)pid,
                                           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (before.cgroup >= 0 && after.cgroup >= before.cgroup)
        n += snprintf(line + n, size - (size_t)n, " oom_kill %ld", after.cgroup - before.cgroup);
    if (before.host >= 0 && after.host >= before.host)
        n += snprintf(line + n, size - (size_t)n, " host_oom_kill %ld", after.host - before.host);
    n += snprintf(line + n, size - (size_t)n, "\n");
    return n;
}

int pl_run_status_write(const char *dir, pid_t pid, int status, pl_oom_counts_t before) {
    char path[4096], line[160];
    if (snprintf(path, sizeof path, "%s/run.status", dir) >= (int)sizeof path) return 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int rc = fd >= 0 || errno == ELOOP || errno == ENXIO ? -EINVAL : 0;
        if (fd >= 0) close(fd);
        return rc;
    }
    int n = pl_run_status_line(line, sizeof line, pid, status, before, pl_run_status_oom_counts());
    if (write(fd, line, (size_t)n) != n) { /* best effort */
    }
    close(fd);
    return 0;
}

void pl_run_status_end_like(int status) {
    if (!WIFSIGNALED(status)) return;
    int sig = WTERMSIG(status);
    fflush(stdout);
    fflush(stderr);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
}
