/* reports/alive: a traced process still running (alive.h). The start time of a process is /proc/PID/stat's
 * field 22 (clock ticks after boot) plus /proc/stat's btime (seconds, CLOCK_REALTIME): an exec keeps it, so every
 * image of a process started no later than its trace. */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alive.h"

static ssize_t read_small(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0) return -1;
    buf[n] = 0;
    return n;
}

/* btime follows the per-CPU and interrupt lines, which run to many KiB on large machines: read line by line */
static bool boot_time_s(long long *out) {
    FILE *f = fopen("/proc/stat", "re");
    if (!f) return false;
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    while (!found && getline(&line, &cap, f) > 0) found = sscanf(line, "btime %lld", out) == 1;
    free(line);
    fclose(f);
    return found;
}

bool pl_alive_same_process(uint32_t pid, int64_t start_realtime_ns, const char *exe) {
    if (pid == 0 || start_realtime_ns <= 0) return false;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%u/stat", (unsigned)pid);
    if (read_small(path, buf, sizeof buf) <= 0) return false;
    const char *rp = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    if (!rp) return false;
    char state;
    unsigned long long start_ticks;
    /* after ") ": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime cutime
     * cstime priority nice num_threads itrealvalue starttime(22) */
    if (sscanf(rp + 2, "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &state,
               &start_ticks) != 2)
        return false;
    if (state == 'Z' || state == 'X') return false;
    long long btime;
    long hz = sysconf(_SC_CLK_TCK);
    if (!boot_time_s(&btime) || hz <= 0) return false;
    double started_s = (double)btime + (double)start_ticks / (double)hz;
    if (started_s > (double)start_realtime_ns / 1e9 + 2.0) return false; /* a later process with the same pid */
    if (exe && exe[0]) {
        char link[PATH_MAX];
        snprintf(path, sizeof path, "/proc/%u/exe", (unsigned)pid);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n > 0) {
            link[n] = 0;
            size_t el = strlen(exe);
            /* " (deleted)": the executable was replaced since (a rebuild), still the same process */
            if (strncmp(link, exe, el) || (link[el] && strcmp(link + el, " (deleted)"))) return false;
        }
    }
    return true;
}
