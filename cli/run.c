/* plateau run: run a command under the tracer.
 *   plateau run [-o DIR] [--sample-bytes N] [--interval-ms N] [--steps-signal]
 *               [--host-allocator glibc|jemalloc] [--live|--no-live] [--fail-on-leak] [--stop-on-leak]
 *               [--run-steps N] -- CMD ARGS...
 * Wiring only: finds libplateau_preload.so (PLATEAU_PRELOAD, else next to this executable in a build tree,
 * else the install libdir), makes the run directory, sets LD_PRELOAD and PLATEAU_* (docs/env.md), runs CMD,
 * forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR2 sent to plateau (signals from the terminal already reach
 * CMD, which shares our process group), returns CMD's exit status (128 + signal if it was killed), and
 * prints where the traces are and the report summary (`plateau report DIR`, unless --no-report).
 * The live status line and --stop-on-leak run in a separate watcher process (fork, nice 10) that only reads the
 * trace files (cli/watch.c, docs/live.md): the traced program is never slowed or blocked by it.
 * --fail-on-leak: exit PL_EXIT_LEAK (3) when the report's run verdict is a leak, whatever CMD returned (docs/ci.md). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "commands.h"

/* DIR/run.status: how the command ended, for the report (a process killed by a signal leaves no end record, so its
 * trace cannot say which signal): one line "pid P exit N" or "pid P signal N". Best effort: a failure only loses
 * that detail. */
static void write_status(const char *dir, pid_t pid, int status) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/run.status", dir) >= (int)sizeof path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    if (WIFSIGNALED(status)) fprintf(f, "pid %d signal %d\n", (int)pid, WTERMSIG(status));
    else fprintf(f, "pid %d exit %d\n", (int)pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fclose(f);
}

/* The report subcommand, when built into this executable (weak: `plateau run` works without it). */
#pragma weak pl_cli_report

static volatile sig_atomic_t child_pid;

/* Print the report summary of the run directory (only judge it when !show). Runs in a child process so that a
 * failing report can never change `plateau run`'s exit status (the command's, or PL_EXIT_LEAK with --fail-on-leak).
 * Returns true when the report ran with fail_on_leak and found the run verdict to be a leak. */
static bool print_report(const char *dir, bool show, bool fail_on_leak) {
    if (!pl_cli_report) return false;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        if (!show && !freopen("/dev/null", "w", stdout)) _exit(1);
        char *argv[] = {"report", (char *)(uintptr_t)dir, fail_on_leak ? "--fail-on-leak" : NULL, NULL};
        int rc = pl_cli_report(fail_on_leak ? 3 : 2, argv);
        fflush(NULL);
        _exit(rc);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return fail_on_leak && WIFEXITED(st) && WEXITSTATUS(st) == PL_EXIT_LEAK;
}

/* The watcher: a child of plateau (not of CMD) that follows the traces and prints the live status line on stderr
 * and/or stops CMD on a confirmed leak, until plateau sends it SIGTERM after CMD ended. */
static pid_t start_watcher(const char *dir, pid_t cmd_pid, bool live, bool stop, int64_t run_steps,
                           double interval_s) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid < 0 ? 0 : pid;
    static const int reset[] = {SIGHUP, SIGQUIT, SIGUSR2};
    for (size_t k = 0; k < sizeof reset / sizeof reset[0]; k++) signal(reset[k], SIG_DFL);
    signal(SIGINT, SIG_IGN); /* Ctrl-C is for CMD; plateau ends the watcher when CMD has ended */
    pl_cli_live_quit_on(SIGTERM);
    if (nice(10) < 0) { /* best effort: the watcher yields to the program */
    }
    FILE *out = live ? stderr : fopen("/dev/null", "w");
    pl_cli_live_opts_t o = {.interval_s = interval_s, .tty = live && isatty(STDERR_FILENO), .out = out,
                            .stop_pid = stop ? cmd_pid : 0, .run_steps = run_steps, .slow_hours = 24};
    int rc = out ? pl_cli_live_loop(dir, &o) : 1;
    fflush(NULL);
    _exit(rc);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: plateau run [-o DIR] [--sample-bytes N] [--interval-ms N] [--steps-signal]\n"
            "                   [--host-allocator glibc|jemalloc] [--no-report] -- CMD ARGS...\n"
            "  -o DIR                 run directory for the traces (default ./plateau-run-<time>)\n"
            "  --sample-bytes N       mean bytes between sampled host stacks (default 512K; 0 = every call)\n"
            "  --interval-ms N        RSS / heap sampling interval (default 100)\n"
            "  --steps-signal         SIGUSR2 sent to the program marks a training step\n"
            "  --host-allocator A     glibc (default) or jemalloc: run the program on jemalloc, to tell\n"
            "                         glibc arena retention from a leak\n"
            "  --no-report            do not print the report summary when the command ends\n"
            "  --live, --no-live      a live status line on stderr (step, rate, RSS, device; per metric: warming\n"
            "                         up / flat / leak suspected / LEAK, projected OOM) refreshed every 2 s;\n"
            "                         default: on when stderr is a terminal (docs/live.md)\n"
            "  --live-interval S      seconds between live refreshes (default 2)\n"
            "  --fail-on-leak         exit 3 when the report's run verdict is LEAK (the report is printed all the\n"
            "                         same); otherwise the command's own status (0 on a plateau or flat run)\n"
            "  --stop-on-leak         stop the command (SIGTERM) once a leak of its own memory is confirmed with\n"
            "                         a projected OOM before the run would end (within --run-steps when given,\n"
            "                         else within 24 h); plateau then returns the command's own status (143\n"
            "                         when SIGTERM ends it), or 3 with --fail-on-leak\n"
            "  --run-steps N          the run's planned number of steps, for --stop-on-leak\n"
            "exit status: the command's (128 + signal when a signal ended it); 3 with --fail-on-leak when the run\n"
            "leaks; 2 on a usage error or when plateau cannot set the run up; 127 / 126 when the command is not\n"
            "found / not runnable\n");
}

static void forward(int sig, siginfo_t *info, void *uctx) {
    (void)uctx;
    /* Terminal-generated signals already reached the child (same process group): forward only signals
     * sent to plateau itself by another process. */
    if (child_pid > 0 && info && info->si_code <= 0 && info->si_pid != child_pid) kill(child_pid, sig);
}

static bool is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Find the preload library. Returns false when none is found. */
static bool find_preload(char *out, size_t n) {
    const char *env = getenv("PLATEAU_PRELOAD");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return is_file(out);
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return false;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return false;
    *slash = 0; /* exe = directory of plateau */
    static const char *const rel[] = {
        "../preload/libplateau_preload.so",             /* build tree: build/cli/plateau */
        "../lib/x86_64-linux-gnu/libplateau_preload.so", /* install, Debian multiarch */
        "../lib64/libplateau_preload.so", "../lib/libplateau_preload.so",
    };
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s/%s", exe, rel[i]);
        if (is_file(cand) && realpath(cand, out)) return true;
    }
    return false;
}

static bool find_jemalloc(char *out, size_t n) {
    const char *env = getenv("PLATEAU_JEMALLOC");
    static const char *const cand[] = {"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib64/libjemalloc.so.2",
                                       "/usr/lib/libjemalloc.so.2", "/usr/local/lib/libjemalloc.so.2"};
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return is_file(out);
    }
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (is_file(cand[i])) {
            snprintf(out, n, "%s", cand[i]);
            return true;
        }
    return false;
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || s[0] == '-') return false;
    uint64_t mul = 1;
    if (!strcmp(end, "K") || !strcmp(end, "KiB") || !strcmp(end, "k")) mul = 1024;
    else if (!strcmp(end, "M") || !strcmp(end, "MiB")) mul = 1024 * 1024;
    else if (!strcmp(end, "G") || !strcmp(end, "GiB")) mul = 1024 * 1024 * 1024;
    else if (*end && strcmp(end, "B")) return false;
    if (v > UINT64_MAX / mul) return false;
    *out = v * mul;
    return true;
}

/* mkdir -p with mode 0700 for the last component. */
static int make_dirs(const char *path) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST) return -errno;
    return 0;
}

static int count_traces(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".pltrace")) n++;
    closedir(d);
    return n;
}

int pl_cli_run(int argc, char **argv) {
    const char *dir_arg = NULL, *allocator = "glibc";
    uint64_t sample_bytes = 0, interval_ms = 0;
    bool have_sample = false, have_interval = false, steps_signal = false, report = true;
    bool live = isatty(STDERR_FILENO), fail_on_leak = false, stop_on_leak = false;
    uint64_t run_steps = 0;
    double live_interval_s = 2;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-') break;
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-o")) {
            if (!val) goto missing;
            dir_arg = val;
            i++;
        } else if (!strcmp(a, "--sample-bytes")) {
            if (!val) goto missing;
            if (!parse_u64(val, &sample_bytes)) {
                fprintf(stderr, "plateau run: --sample-bytes '%s' is not a byte count (e.g. 524288, 512K, 0)\n", val);
                return 2;
            }
            have_sample = true;
            i++;
        } else if (!strcmp(a, "--interval-ms")) {
            if (!val) goto missing;
            if (!parse_u64(val, &interval_ms) || interval_ms < 1 || interval_ms > 60000) {
                fprintf(stderr, "plateau run: --interval-ms '%s' is not an integer in [1, 60000]\n", val);
                return 2;
            }
            have_interval = true;
            i++;
        } else if (!strcmp(a, "--steps-signal")) {
            steps_signal = true;
        } else if (!strcmp(a, "--no-report")) {
            report = false;
        } else if (!strcmp(a, "--live")) {
            live = true;
        } else if (!strcmp(a, "--no-live")) {
            live = false;
        } else if (!strcmp(a, "--fail-on-leak")) {
            fail_on_leak = true;
        } else if (!strcmp(a, "--stop-on-leak")) {
            stop_on_leak = true;
        } else if (!strcmp(a, "--run-steps")) {
            if (!val) goto missing;
            if (!parse_u64(val, &run_steps) || run_steps < 1) {
                fprintf(stderr, "plateau run: --run-steps '%s' is not a step count >= 1\n", val);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--live-interval")) { /* seconds between live polls (tests, benchmarks) */
            if (!val) goto missing;
            char *end;
            live_interval_s = strtod(val, &end);
            if (*end || !(live_interval_s >= 0.05) || live_interval_s > 3600) {
                fprintf(stderr, "plateau run: --live-interval '%s' is not seconds in [0.05, 3600]\n", val);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--host-allocator")) {
            if (!val) goto missing;
            if (strcmp(val, "glibc") && strcmp(val, "jemalloc")) {
                fprintf(stderr, "plateau run: --host-allocator '%s': use glibc or jemalloc\n", val);
                return 2;
            }
            allocator = val;
            i++;
        } else {
            fprintf(stderr, "plateau run: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "plateau run: no command given\n");
        usage(stderr);
        return 2;
    }
    char **cmd = argv + i;

    char preload[PATH_MAX];
    if (!find_preload(preload, sizeof preload)) {
        fprintf(stderr, "plateau run: cannot find libplateau_preload.so (looked next to this program and in the "
                        "install libdir); set PLATEAU_PRELOAD to its path\n");
        return 2;
    }
    char jemalloc[PATH_MAX] = "";
    if (!strcmp(allocator, "jemalloc") && !find_jemalloc(jemalloc, sizeof jemalloc)) {
        fprintf(stderr, "plateau run: libjemalloc.so.2 not found (install libjemalloc2 or set PLATEAU_JEMALLOC)\n");
        return 2;
    }

    /* Run directory: -o DIR, else ./plateau-run-<time>[-N]. */
    char dir[PATH_MAX];
    if (dir_arg) {
        snprintf(dir, sizeof dir, "%s", dir_arg);
        int rc = make_dirs(dir);
        if (rc < 0) {
            fprintf(stderr, "plateau run: cannot create '%s': %s\n", dir, strerror(-rc));
            return 2;
        }
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char base[64];
        strftime(base, sizeof base, "plateau-run-%Y%m%d-%H%M%S", &tm);
        snprintf(dir, sizeof dir, "%s", base);
        for (int k = 1; mkdir(dir, 0700) < 0; k++) {
            if (errno != EEXIST || k > 100) {
                fprintf(stderr, "plateau run: cannot create '%s': %s\n", dir, strerror(errno));
                return 2;
            }
            snprintf(dir, sizeof dir, "%s-%d", base, k);
        }
    }
    char abs_dir[PATH_MAX];
    if (!realpath(dir, abs_dir)) snprintf(abs_dir, sizeof abs_dir, "%s", dir);

    /* Environment for the child. */
    const char *old = getenv("LD_PRELOAD");
    size_t lp_len = strlen(preload) + strlen(jemalloc) + (old ? strlen(old) : 0) + 4;
    char *lp = malloc(lp_len);
    if (!lp) return 2;
    snprintf(lp, lp_len, "%s%s%s%s%s", preload, jemalloc[0] ? ":" : "", jemalloc, old && *old ? ":" : "",
             old && *old ? old : "");
    setenv("LD_PRELOAD", lp, 1);
    free(lp);
    setenv("PLATEAU_DIR", abs_dir, 1);
    char num[32];
    if (have_sample) {
        snprintf(num, sizeof num, "%llu", (unsigned long long)sample_bytes);
        setenv("PLATEAU_SAMPLE_BYTES", num, 1);
    }
    if (have_interval) {
        snprintf(num, sizeof num, "%llu", (unsigned long long)interval_ms);
        setenv("PLATEAU_INTERVAL_MS", num, 1);
    }
    if (steps_signal) setenv("PLATEAU_STEP_SIGNAL", "1", 1);
    setenv("PLATEAU_QUIET", getenv("PLATEAU_QUIET") ? getenv("PLATEAU_QUIET") : "1", 1);

    static const int fwd[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR2};
    struct sigaction sa, old_sa[5];
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < 5; k++) sigaction(fwd[k], &sa, &old_sa[k]);

    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "plateau run: fork: %s\n", strerror(errno));
        return 2;
    }
    if (pid == 0) {
        for (size_t k = 0; k < 5; k++) sigaction(fwd[k], &old_sa[k], NULL);
        execvp(cmd[0], cmd);
        fprintf(stderr, "plateau run: cannot run '%s': %s\n", cmd[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    child_pid = pid;
    pid_t watcher = live || stop_on_leak
                        ? start_watcher(abs_dir, pid, live, stop_on_leak, (int64_t)run_steps, live_interval_s)
                        : 0;
    int status = 0;
    if (watcher > 0) {
        /* the command has ended but is not reaped yet (its pid cannot be reused): end the watcher first, so that
         * --stop-on-leak can never signal another process that got the pid */
        siginfo_t si;
        while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
        }
        kill(watcher, SIGTERM);
        while (waitpid(watcher, NULL, 0) < 0 && errno == EINTR) {
        }
        watcher = 0;
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "plateau run: waitpid: %s\n", strerror(errno));
            return 2;
        }
    child_pid = 0;
    if (watcher > 0) {
        kill(watcher, SIGTERM);
        while (waitpid(watcher, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    for (size_t k = 0; k < 5; k++) sigaction(fwd[k], &old_sa[k], NULL);

    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    write_status(abs_dir, pid, status);
    int n = count_traces(abs_dir);
    fprintf(stderr, "plateau: %d trace file%s in %s", n, n == 1 ? "" : "s", abs_dir);
    if (WIFSIGNALED(status)) fprintf(stderr, " (the command was killed by signal %d)", WTERMSIG(status));
    fprintf(stderr, "\n");
    char stopped[4096 + 32];
    snprintf(stopped, sizeof stopped, "%s/run.stopped", abs_dir);
    if (!access(stopped, F_OK)) fprintf(stderr, "plateau: the command was stopped on a confirmed leak (--stop-on-leak)\n");
    bool leak = (report || fail_on_leak) && n > 0 && print_report(abs_dir, report, fail_on_leak);
    if (leak) {
        fprintf(stderr, "plateau: the run leaks: exit %d (--fail-on-leak; the command returned %d)\n", PL_EXIT_LEAK, rc);
        return PL_EXIT_LEAK;
    }
    return rc;

missing:
    fprintf(stderr, "plateau run: option '%s' needs a value\n", argv[i]);
    return 2;
}
