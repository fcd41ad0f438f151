/* plateau run: run a command under the tracer.
 *   plateau run [-o DIR] [--sample-bytes N] [--interval-ms N] [--steps-signal]
 *               [--host-allocator glibc|jemalloc] [--append] [--no-report] [--live|--no-live]
 *               [--all-processes] [--fail-on-leak] [--stop-on-leak] [--run-steps N] [--warmup-steps N] -- CMD ARGS...
 * Wiring only: finds libplateau_preload.so (PLATEAU_PRELOAD, else next to this executable in a build tree,
 * else the install libdir, relative to this executable then absolute: config.h; a wheel's lib/ beside its bin/),
 * makes the run directory, sets LD_PRELOAD and PLATEAU_* (docs/env.md), runs CMD, relays signals (supervise/), returns
 * CMD's exit status (128 + signal if it was killed), and prints where the traces are and the report summary
 * (`plateau report DIR`, unless --no-report).
 *
 * The supervisor is supervise/ (supervise.h): the signal relay and its witness (docs/env.md, "Signals"), the watcher
 * process and the run status; this file wires it. When plateau itself is killed (SIGKILL), CMD runs on and its traces
 * stay in DIR for `plateau report DIR`.
 * Python programs: PYTHONPATH gains plateau's bootstrap directory (python_bootstrap_env, docs/python.md).
 * The live status line and --stop-on-leak run in the watcher process (supervise.h), which only reads the trace files
 * (cli/watch.c, docs/live.md): the traced program is never slowed or blocked by it. --stop-on-leak stops
 * the process that leaks, which may be below CMD, and the job above it (cli/stop.c: by pidfd, after checking it is
 * still the traced process); the watcher then exits PL_WATCH_STOPPED and we exit PL_EXIT_LEAK (3).
 * --fail-on-leak: exit PL_EXIT_LEAK (3) when the report's run verdict is a leak, whatever CMD returned (docs/ci.md). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <plateau/trace.h>

#include "collector.h"
#include "commands.h"
#include "format.h"
#include "opts.h"
#include "supervise.h"
#include "units.h"

/* The report subcommand, when built into this executable (weak: `plateau run` works without it). */
#pragma weak pl_cli_report

/* Print the report summary of the run directory (only judge it when !show). Runs in a child process so that a
 * failing report can never change `plateau run`'s exit status (the command's, or PL_EXIT_LEAK with --fail-on-leak).
 * Returns true when the report ran with fail_on_leak and found the run verdict to be a leak. */
static bool print_report(const char *dir, const sigset_t *old_mask, bool show, bool fail_on_leak, bool all_processes) {
    if (!pl_cli_report) return false;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, old_mask, NULL); /* Ctrl-C stops the report, not plateau's exit status */
        if (!show && !freopen("/dev/null", "w", stdout)) _exit(1);
        char *argv[5] = {"report", (char *)(uintptr_t)dir};
        int n = 2;
        if (fail_on_leak) argv[n++] = "--fail-on-leak";
        if (all_processes) argv[n++] = "--all-processes";
        argv[n] = NULL;
        int rc = pl_cli_report(n, argv);
        fflush(NULL);
        _exit(rc);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return fail_on_leak && WIFEXITED(st) && WEXITSTATUS(st) == PL_EXIT_LEAK;
}

/* The watcher (supervise.h: a process of its own, niced, ended with plateau): follows the traces and prints the live
 * status line on stderr and/or stops CMD on a confirmed leak, until plateau sends it SIGTERM after CMD ended. */
typedef struct run_watch {
    const char *dir;
    pid_t cmd_pid;
    bool live, stop;
    int64_t run_steps, warmup_steps, since_ns;
    double interval_s;
} run_watch_t;

static int watch_body(void *ctx) {
    const run_watch_t *w = ctx;
    FILE *out = w->live ? stderr : fopen("/dev/null", "w");
    /* the live verdict also goes to DIR/live.prom at each poll, where plateau's callbacks read it for the trainer's
     * loggers (python/plateau/_loggers.py, docs/live.md) */
    char prom[4096 + 16];
    bool prom_ok = snprintf(prom, sizeof prom, "%s/live.prom", w->dir) < (int)sizeof prom;
    pl_cli_live_opts_t o = {.interval_s = w->interval_s, .tty = w->live && isatty(STDERR_FILENO),
                            .bottom_line = true, .out = out, .stop_pid = w->stop ? w->cmd_pid : 0,
                            .run_steps = w->run_steps, .warmup_steps = w->warmup_steps,
                            .since_realtime_ns = w->since_ns, .slow_hours = 24, .prom_path = prom_ok ? prom : NULL,
                            .prom_quiet = true};
    return out ? pl_cli_live_loop(w->dir, &o) : 1;
}

static pid_t start_watcher(const char *dir, const sigset_t *old_mask, pid_t cmd_pid, bool live, bool stop,
                           int64_t run_steps, int64_t warmup_steps, int64_t since_ns, double interval_s) {
    run_watch_t ctx = {.dir = dir, .cmd_pid = cmd_pid, .live = live, .stop = stop, .run_steps = run_steps,
                       .warmup_steps = warmup_steps, .since_ns = since_ns, .interval_s = interval_s};
    pl_watcher_t w = {.mask = old_mask, .quit_on = pl_cli_live_quit_on, .body = watch_body, .ctx = &ctx};
    return pl_watcher_start(&w);
}

/* plateau run's exit status (docs/ci.md), said on stderr whenever it is not simply the command's: 3 when the job was
 * stopped on a leak (--stop-on-leak) or the run leaks (--fail-on-leak); else the command's own, and a command's own 3
 * under --fail-on-leak is named as such, so it is not read as a leak. */
static int exit_status(int rc, bool stopped, bool leak, bool fail_on_leak, const char *dir) {
    if (stopped) {
        fprintf(stderr, "plateau: exit %d: the job was stopped on a confirmed leak (--stop-on-leak; %s/run.stopped "
                        "says what was stopped; the command returned %d)\n", PL_EXIT_LEAK, pl_format_esc(dir), rc);
        return PL_EXIT_LEAK;
    }
    if (leak) {
        fprintf(stderr, "plateau: the run leaks: exit %d (--fail-on-leak; the command returned %d)\n", PL_EXIT_LEAK, rc);
        return PL_EXIT_LEAK;
    }
    if (fail_on_leak && rc == PL_EXIT_LEAK)
        fprintf(stderr, "plateau: exit %d is the command's own status; the run does not leak\n", rc);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: plateau run [-o DIR] [--sample-bytes N] [--interval-ms N] [--steps-signal]\n"
            "                   [--host-allocator glibc|jemalloc] [--append] [--no-report] [--live|--no-live]\n"
            "                   [--all-processes] [--live-interval S] [--fail-on-leak] [--stop-on-leak] [--run-steps N]\n"
            "                   [--warmup-steps N] -- CMD ARGS...\n"
            "  -o DIR                 run directory for the traces (default ./plateau-run-<time>); made by\n"
            "                         plateau run, or an empty directory of yours that no one else can write\n"
            "  --append               DIR may hold an earlier run: add this one to it (reported together)\n"
            "  --sample-bytes N       mean bytes between sampled host stacks (default 512K; 0 = every call)\n"
            "  --interval-ms N        RSS / heap sampling interval (default 100)\n"
            "  --steps-signal         SIGUSR2 sent to the program marks a training step\n"
            "  --host-allocator A     glibc (default) or jemalloc: run the program on jemalloc, to tell\n"
            "                         glibc arena retention from a leak\n"
            "  --no-report            do not print the report summary when the command ends\n"
            "  --all-processes        that report shows every process in full (plateau report --all-processes)\n"
            "  --live                 a live status line on stderr (step, rate, RSS, device; per metric: warming\n"
            "                         up / flat / leak suspected / LEAK, projected OOM) refreshed every 2 s;\n"
            "                         default: on when stderr is a terminal (docs/live.md)\n"
            "  --no-live              no live status line, even on a terminal\n"
            "  --live-interval S      seconds between live refreshes (default 2)\n"
            "  --fail-on-leak         exit 3 when the report's run verdict is LEAK (the report is printed all the\n"
            "                         same); otherwise the command's own status (0 on a plateau or flat run)\n"
            "  --stop-on-leak         stop the process that leaks (SIGTERM), and the rest of the job above it up to\n"
            "                         the command, once a leak of its own memory is confirmed with a projected\n"
            "                         OOM before the run would end (within --run-steps when given, else 24 h)\n"
            "                         and evidence it is no warmup: the OOM is near (within max(60 s, 10 steps)),\n"
            "                         or the leak is judged past --warmup-steps; plateau then exits 3 (docs/ci.md)\n"
            "  --run-steps N          the run's planned number of steps, for --stop-on-leak\n"
            "  --warmup-steps N       growth up to step N is warmup: --stop-on-leak and the live line judge the\n"
            "                         steps after it\n"
            "exit status: the command's (a signal that ended it ends plateau run the same way: 128 + signal in a\n"
            "shell); 3 with --fail-on-leak when the run leaks, or when --stop-on-leak stopped it; 2 on a usage\n"
            "error or when plateau cannot set the run up; 127 / 126 when the command is not found / not runnable\n");
}

static bool is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* This executable's directory into out (PATH_MAX); false when /proc/self/exe cannot be read. */
static bool exe_dir(char *out) {
    ssize_t len = readlink("/proc/self/exe", out, PATH_MAX - 1);
    if (len <= 0) return false;
    out[len] = 0;
    char *slash = strrchr(out, '/');
    if (!slash) return false;
    *slash = 0;
    return true;
}

/* Find the preload library: PLATEAU_PRELOAD; else next to this executable in a build tree (build/cli/plateau ->
 * build/preload); else the install libdir relative to this executable's directory (PL_BINDIR_TO_LIBDIR: an
 * install, also one copied elsewhere or under a DESTDIR, and the wheel's package, bin/ -> lib/); else the configured
 * libdir (PL_LIBDIR; '' in a wheel). Returns false when none is found. */
static bool find_preload(char *out, size_t n) {
    const char *env = getenv("PLATEAU_PRELOAD");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return is_file(out);
    }
    char exe[PATH_MAX];
    if (!exe_dir(exe)) return false;
    char cand[3][PATH_MAX + 64];
    snprintf(cand[0], sizeof cand[0], "%s/../preload/libplateau_preload.so", exe);
    snprintf(cand[1], sizeof cand[1], "%s/%s/libplateau_preload.so", exe, PL_BINDIR_TO_LIBDIR);
    snprintf(cand[2], sizeof cand[2], "%s/libplateau_preload.so", PL_LIBDIR);
    for (size_t i = 0; i < 3; i++) {
        if (i == 1 && !PL_BINDIR_TO_LIBDIR[0]) continue; /* an absolute libdir: only PL_LIBDIR */
        if (i == 2 && !PL_LIBDIR[0]) continue;           /* a wheel: nothing outside its package */
        if (is_file(cand[i]) && realpath(cand[i], out)) return true;
    }
    return false;
}

/* libjemalloc.so.2 for --host-allocator jemalloc: PLATEAU_JEMALLOC; else beside the preload library (the copy a
 * wheel bundles in its lib/); else the one the build found (config.h PL_JEMALLOC_PATH, from the root meson.build). */
static bool find_jemalloc(const char *preload, char *out, size_t n) {
    const char *env = getenv("PLATEAU_JEMALLOC");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return is_file(out);
    }
    const char *slash = strrchr(preload, '/');
    if (slash && snprintf(out, n, "%.*s/libjemalloc.so.2", (int)(slash - preload), preload) < (int)n && is_file(out))
        return true;
    snprintf(out, n, "%s", PL_JEMALLOC_PATH);
    return out[0] == '/' && is_file(out);
}

/* The variables plateau run sets for CMD, with the two markers that let the tracer give every traced process exactly
 * the environment it would have had (docs/env.md, "The program's environment"): PLATEAU_SET names those CMD's
 * environment did not have, PLATEAU_WAS_<NAME> keeps CMD's own value of one plateau changed. */
static char child_added[1024];

static void child_setenv(const char *name, const char *value) {
    const char *old = getenv(name);
    if (old && !strcmp(old, value)) return;
    if (!old) {
        size_t len = strlen(child_added);
        snprintf(child_added + len, sizeof child_added - len, "%s%s", len ? ":" : "", name);
    } else {
        char was[64];
        snprintf(was, sizeof was, "PLATEAU_WAS_%s", name);
        if (!getenv(was)) setenv(was, old, 1);
    }
    setenv(name, value, 1);
}

/* Is the bootstrap (boot/sitecustomize.py) in d? Then its real path into dir (PATH_MAX). */
static void bootstrap_in(const char *d, char *dir) {
    char cand[PATH_MAX + 32];
    if (snprintf(cand, sizeof cand, "%s/boot/sitecustomize.py", d) >= (int)sizeof cand || !is_file(cand)) return;
    if (!realpath(d, dir)) dir[0] = 0;
}

/* The Python bootstrap (docs/python.md): put DIR/boot, the directory holding only plateau's sitecustomize.py (which
 * loads DIR/plateau, or DIR itself in a wheel, under a private name), first on PYTHONPATH, unless PLATEAU_PYTHON is
 * off. DIR is found through PLATEAU_PYTHON_DIR, else next to this executable (build tree: build/python; install:
 * <datadir>/plateau/python relative to this executable, as for the preload (PL_BINDIR_TO_PYTHONDIR; in a wheel, the
 * package plateau_profiler, bin/..), then the configured one, PL_PYTHONDIR). Not finding it only costs the
 * optimizer steps: say so once and run the command anyway. */
static void python_bootstrap_env(void) {
    const char *onoff = getenv("PLATEAU_PYTHON");
    char low[8] = "";
    for (size_t i = 0; onoff && onoff[i] && i + 1 < sizeof low; i++)
        low[i] = (char)(onoff[i] >= 'A' && onoff[i] <= 'Z' ? onoff[i] + 32 : onoff[i]);
    if (onoff && strlen(onoff) < sizeof low &&
        (!strcmp(low, "0") || !strcmp(low, "no") || !strcmp(low, "false") || !strcmp(low, "off")))
        return;
    char dir[PATH_MAX] = "";
    const char *env = getenv("PLATEAU_PYTHON_DIR");
    char exe[PATH_MAX];
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s", env);
    } else if (exe_dir(exe)) {
        char rel[3][PATH_MAX + 64];
        snprintf(rel[0], sizeof rel[0], "%s/../python", exe);
        snprintf(rel[1], sizeof rel[1], "%s/%s", exe, PL_BINDIR_TO_PYTHONDIR);
        snprintf(rel[2], sizeof rel[2], "%s", PL_PYTHONDIR);
        for (size_t i = 0; i < 3 && !dir[0]; i++)
            if ((i != 1 || PL_BINDIR_TO_PYTHONDIR[0]) && (i != 2 || PL_PYTHONDIR[0])) bootstrap_in(rel[i], dir);
    }
    char site[PATH_MAX + 32];
    snprintf(site, sizeof site, "%s/boot/sitecustomize.py", dir);
    if (!dir[0] || !is_file(site)) {
        fprintf(stderr, "plateau run: the Python bootstrap (boot/sitecustomize.py) was not found%s%s; Python programs "
                        "get no optimizer steps (set PLATEAU_PYTHON_DIR, or PLATEAU_PYTHON=0 to silence this)\n",
                dir[0] ? " in " : "", dir);
        return;
    }
    if (strlen(dir) + 5 >= sizeof dir) return;
    strcat(dir, "/boot");
    const char *old = getenv("PYTHONPATH");
    size_t n = strlen(dir);
    if (old && !strncmp(old, dir, n) && (old[n] == 0 || old[n] == ':')) return; /* already first (nested runs) */
    size_t pp_len = n + (old ? strlen(old) : 0) + 2;
    char *pp = malloc(pp_len);
    if (!pp) return;
    snprintf(pp, pp_len, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    child_setenv("PYTHONPATH", pp);
    free(pp);
}

/* A count or a size in the one grammar (common/units.h): digits, optionally with a unit. */
static bool parse_u64(const char *s, uint64_t *out) { return pl_units_parse(s, out) == 0; }

/* mkdir -p with mode 0700 for the last component. *made: the last component was created here. */
static int make_dirs(const char *path, bool *made) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    size_t len = strlen(tmp);
    while (len > 1 && tmp[len - 1] == '/') tmp[--len] = 0;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -errno;
        *p = '/';
    }
    *made = mkdir(tmp, 0700) == 0;
    if (!*made && errno != EEXIST) return -errno;
    return 0;
}

static uint64_t new_run_id(void) {
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        id = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec << 20 ^ (uint64_t)getpid();
    }
    return id ? id : 1;
}

/* The run directory is ours (docs/env.md, "Run directory"): a real directory (not a symbolic link), owned by us,
 * writable by no one else, and empty unless --append; its run-id file names the run whose traces the report
 * reads (tracer/read/rundir.c). With --append the run id already there is kept, so the runs are reported together.
 * Returns 0 with *run_id, or prints one line and returns -1. */
static int claim_run_dir(const char *who, const char *dir, bool made, bool append, const char *allocator,
                         uint64_t *run_id, bool *wrote_id) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        struct stat sb;
        if (errno == ELOOP || (lstat(dir, &sb) == 0 && S_ISLNK(sb.st_mode)))
            fprintf(stderr, "%s: '%s' is a symbolic link: give the directory it points to, if you trust it\n", who,
                    pl_format_esc(dir));
        else
            fprintf(stderr, "%s: cannot open the run directory '%s': %s\n", who, pl_format_esc(dir), strerror(errno));
        return -1;
    }
    struct stat sb;
    int rc = -1;
    DIR *d = NULL;
    if (fstat(dfd, &sb) != 0) {
        fprintf(stderr, "%s: cannot open the run directory '%s': %s\n", who, pl_format_esc(dir), strerror(errno));
        goto out;
    }
    if (sb.st_uid != geteuid()) {
        fprintf(stderr, "%s: the run directory '%s' belongs to uid %u, not to you (uid %u): use a directory "
                        "of your own\n", who, pl_format_esc(dir), (unsigned)sb.st_uid, (unsigned)geteuid());
        goto out;
    }
    if (sb.st_mode & 022) {
        fprintf(stderr, "%s: the run directory '%s' is writable by others (mode %03o): files planted there "
                        "would be read as traces; use a directory only you can write (chmod go-w)\n", who,
                pl_format_esc(dir), (unsigned)(sb.st_mode & 0777));
        goto out;
    }
    /* its parent: someone else who may write there could rename the run directory away and put another in its
     * place while the program runs (the report would judge the planted traces). The sticky bit (/tmp) stops that;
     * without it, one line says so. */
    struct stat pb;
    if (fstatat(dfd, "..", &pb, 0) == 0 && !(pb.st_mode & S_ISVTX) &&
        ((pb.st_mode & 022) || (pb.st_uid != geteuid() && pb.st_uid != 0 && (pb.st_mode & S_IWUSR)))) {
        /* said, not refused: a group-writable project folder is common on shared machines */
        fprintf(stderr, "plateau: warning: the parent of the run directory '%s' can be written by others (mode %03o, "
                        "uid %u) without the sticky bit: they could swap the run directory while the program runs, "
                        "and the report would read theirs; use -o under a folder only you can write, or one with the "
                        "sticky bit like /tmp\n",
                pl_format_esc(dir), (unsigned)(pb.st_mode & 0777), (unsigned)pb.st_uid);
    }
    *run_id = 0;
    *wrote_id = false;
    if (!made) {
        int dfd2 = dup(dfd);
        d = dfd2 >= 0 ? fdopendir(dfd2) : NULL;
        if (!d) {
            if (dfd2 >= 0) close(dfd2);
            fprintf(stderr, "%s: cannot list the run directory '%s': %s\n", who, pl_format_esc(dir), strerror(errno));
            goto out;
        }
        bool empty = true;
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
        if (!empty && !append) {
            fprintf(stderr, "%s: the run directory '%s' is not empty (a previous run?): give a new one%s\n", who, dir,
                    strcmp(who, "plateau run") ? "" : ", or --append to add this run to it"); /* only run appends */
            goto out;
        }
        pl_trace_dir_t list; /* the run id already there, if the file is ours */
        if (append && pl_trace_dir_list(dir, &list) == 0) {
            *run_id = list.run_id;
            pl_trace_dir_free(&list);
        }
    }
    if (!*run_id) {
        *run_id = new_run_id();
        int fd = openat(dfd, PL_TRACE_RUN_ID_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        char line[64]; /* the host allocator asked for: the report's comparison of two runs reads it */
        int n = snprintf(line, sizeof line, "%016llx\nhost-allocator %s\n", (unsigned long long)*run_id, allocator);
        if (fd < 0 || write(fd, line, (size_t)n) != n) {
            fprintf(stderr, "%s: cannot write '%s/%s': %s\n", who, pl_format_esc(dir), PL_TRACE_RUN_ID_FILE, strerror(errno));
            if (fd >= 0) close(fd);
            goto out;
        }
        close(fd);
        *wrote_id = true;
    }
    rc = 0;
out:
    if (d) closedir(d);
    close(dfd);
    return rc;
}

/* Traces the report will read: regular *.pltrace files only (tracer/read/rundir.c), never a FIFO planted there. */
static int count_traces(const char *dir) {
    pl_trace_dir_t list;
    if (pl_trace_dir_list(dir, &list)) return 0;
    int n = (int)list.n_paths;
    pl_trace_dir_free(&list);
    return n;
}

/* The run directory of plateau run and plateau attach (docs/env.md, "Run directory"): dir_arg (made, or an empty
 * directory of ours; with append, an earlier run's), else ./<prefix>-<time>[-N]; then claimed (claim_run_dir).
 * Messages start with who. Returns 0 with the absolute path in abs_dir (PATH_MAX bytes), or -1 after one line. */
int pl_cli_run_dir(const char *who, const char *dir_arg, const char *prefix, bool append, const char *allocator,
                   char *abs_dir, uint64_t *run_id, bool *made, bool *wrote_id) {
    char dir[PATH_MAX];
    *made = true;
    if (dir_arg) {
        snprintf(dir, sizeof dir, "%s", dir_arg);
        int rc = make_dirs(dir, made);
        if (rc < 0) {
            fprintf(stderr, "%s: cannot create '%s': %s\n", who, pl_format_esc(dir), strerror(-rc));
            return -1;
        }
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char stamp[32], base[96];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf(base, sizeof base, "%s-%s", prefix, stamp);
        snprintf(dir, sizeof dir, "%s", base);
        for (int k = 1; mkdir(dir, 0700) < 0; k++) {
            if (errno != EEXIST || k > 100) {
                fprintf(stderr, "%s: cannot create '%s': %s\n", who, pl_format_esc(dir), strerror(errno));
                return -1;
            }
            snprintf(dir, sizeof dir, "%s-%d", base, k);
        }
    }
    if (claim_run_dir(who, dir, *made, append, allocator, run_id, wrote_id)) return -1;
    if (!realpath(dir, abs_dir)) snprintf(abs_dir, PATH_MAX, "%s", dir);
    return 0;
}

/* ---- the options ---- */

typedef struct run_opts {
    const char *dir_arg;      /* -o DIR, NULL: ./plateau-run-<time> */
    const char *allocator;    /* --host-allocator: "glibc" or "jemalloc" */
    uint64_t sample_bytes;    /* --sample-bytes, when have_sample */
    uint64_t interval_ms;     /* --interval-ms, when have_interval */
    uint64_t run_steps, warmup_steps; /* --run-steps, --warmup-steps; 0 none */
    double live_interval_s;   /* --live-interval */
    bool have_sample, have_interval, steps_signal, report, append, live, fail_on_leak, stop_on_leak, all_processes;
    char **cmd;               /* CMD ARGS..., NULL-terminated (argv's) */
} run_opts_t;

enum { OPT_SAMPLE = 256, OPT_INTERVAL, OPT_STEPS_SIGNAL, OPT_APPEND, OPT_NO_REPORT, OPT_ALL, OPT_LIVE, OPT_NO_LIVE,
       OPT_FAIL, OPT_STOP, OPT_RUN_STEPS, OPT_WARMUP_STEPS, OPT_LIVE_INTERVAL, OPT_ALLOCATOR };

static const struct option run_longopts[] = {
    {"help", no_argument, NULL, 'h'},
    {"sample-bytes", required_argument, NULL, OPT_SAMPLE},
    {"interval-ms", required_argument, NULL, OPT_INTERVAL},
    {"steps-signal", no_argument, NULL, OPT_STEPS_SIGNAL},
    {"append", no_argument, NULL, OPT_APPEND},
    {"no-report", no_argument, NULL, OPT_NO_REPORT},
    {"all-processes", no_argument, NULL, OPT_ALL}, /* passed to the report printed at the end */
    {"live", no_argument, NULL, OPT_LIVE},
    {"no-live", no_argument, NULL, OPT_NO_LIVE},
    {"fail-on-leak", no_argument, NULL, OPT_FAIL},
    {"stop-on-leak", no_argument, NULL, OPT_STOP},
    {"run-steps", required_argument, NULL, OPT_RUN_STEPS},
    {"warmup-steps", required_argument, NULL, OPT_WARMUP_STEPS},
    {"live-interval", required_argument, NULL, OPT_LIVE_INTERVAL}, /* seconds between live polls (tests, benchmarks) */
    {"host-allocator", required_argument, NULL, OPT_ALLOCATOR},
    {NULL, 0, NULL, 0},
};

/* An option's value into o. Returns 0, or 2 after one line on stderr. */
static int set_value(run_opts_t *o, int c, const char *val) {
    switch (c) {
    case 'o': o->dir_arg = val; return 0;
    case OPT_SAMPLE:
        if (!parse_u64(val, &o->sample_bytes)) {
            fprintf(stderr, "plateau run: --sample-bytes '%s' is not a byte count (e.g. 524288, 512K, 0)\n", pl_format_esc(val));
            return 2;
        }
        o->have_sample = true;
        return 0;
    case OPT_INTERVAL:
        if (!parse_u64(val, &o->interval_ms) || o->interval_ms < 1 || o->interval_ms > 60000) {
            fprintf(stderr, "plateau run: --interval-ms '%s' is not an integer in [1, 60000]\n", pl_format_esc(val));
            return 2;
        }
        o->have_interval = true;
        return 0;
    case OPT_RUN_STEPS:
        if (!parse_u64(val, &o->run_steps) || o->run_steps < 1) {
            fprintf(stderr, "plateau run: --run-steps '%s' is not a step count >= 1\n", val);
            return 2;
        }
        return 0;
    case OPT_WARMUP_STEPS:
        if (!parse_u64(val, &o->warmup_steps) || o->warmup_steps < 1 || o->warmup_steps > INT64_MAX / 4) {
            fprintf(stderr, "plateau run: --warmup-steps '%s' is not a step count >= 1\n", pl_format_esc(val));
            return 2;
        }
        return 0;
    case OPT_LIVE_INTERVAL: {
        char *end;
        o->live_interval_s = strtod(val, &end);
        if (*end || !(o->live_interval_s >= 0.05) || o->live_interval_s > 3600) {
            fprintf(stderr, "plateau run: --live-interval '%s' is not seconds in [0.05, 3600]\n", val);
            return 2;
        }
        return 0;
    }
    case OPT_ALLOCATOR:
        if (strcmp(val, "glibc") && strcmp(val, "jemalloc")) {
            fprintf(stderr, "plateau run: --host-allocator '%s': use glibc or jemalloc\n", pl_format_esc(val));
            return 2;
        }
        o->allocator = val;
        return 0;
    }
    return 0;
}

/* A flag into o; false when c is none. */
static bool set_flag(run_opts_t *o, int c) {
    switch (c) {
    case OPT_STEPS_SIGNAL: o->steps_signal = true; return true;
    case OPT_APPEND: o->append = true; return true;
    case OPT_NO_REPORT: o->report = false; return true;
    case OPT_ALL: o->all_processes = true; return true;
    case OPT_LIVE: o->live = true; return true;
    case OPT_NO_LIVE: o->live = false; return true;
    case OPT_FAIL: o->fail_on_leak = true; return true;
    case OPT_STOP: o->stop_on_leak = true; return true;
    default: return false;
    }
}

/* argv into o: options up to the first operand or "--", the rest is CMD (never permuted). Returns -1 to go on, or
 * the exit status (0 after --help, 2 after one line on a usage error). */
static int parse_options(int argc, char **argv, run_opts_t *o) {
    *o = (run_opts_t){.allocator = "glibc", .report = true, .live = isatty(STDERR_FILENO), .live_interval_s = 2};
    pl_opts_t g;
    pl_opts_start(&g, "plateau run", "ho:", run_longopts);
    int c, rc = -1;
    while (rc < 0 && (c = pl_opts_next(&g, argc, argv)) != -1) {
        if (c == 'h') {
            usage(stdout);
            rc = 0;
        } else if (c == '?' || c == ':') {
            pl_opts_say(&g, c, argv);
            if (c == '?') usage(stderr);
            rc = 2;
        } else if (!set_flag(o, c) && set_value(o, c, optarg)) {
            rc = 2;
        }
    }
    pl_opts_end(&g);
    if (rc >= 0) return rc;
    if (!g.dashdash && optind < argc && !strcmp(argv[optind], "-")) { /* an option to us, not a command */
        fprintf(stderr, "plateau run: unknown option '-'\n");
        usage(stderr);
        return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "plateau run: no command given\n");
        usage(stderr);
        return 2;
    }
    o->cmd = argv + optind;
    return -1;
}

/* ---- the steps ---- */

/* The preload library, and jemalloc with --host-allocator jemalloc (jemalloc "" otherwise; both PATH_MAX). Returns
 * 0, or 2 after one line. */
static int find_libraries(const run_opts_t *o, char *preload, char *jemalloc) {
    if (!find_preload(preload, PATH_MAX)) {
        fprintf(stderr, "plateau run: cannot find libplateau_preload.so (looked next to this program%s%s); set "
                        "PLATEAU_PRELOAD to its path\n", PL_LIBDIR[0] ? " and in the install libdir " : "", PL_LIBDIR);
        return 2;
    }
    jemalloc[0] = 0;
    if (!strcmp(o->allocator, "jemalloc") && !find_jemalloc(preload, jemalloc, PATH_MAX)) {
        fprintf(stderr, "plateau run: libjemalloc.so.2 not found (install libjemalloc2 or set PLATEAU_JEMALLOC)\n");
        return 2;
    }
    return 0;
}

/* The command's environment (docs/env.md): LD_PRELOAD, PLATEAU_DIR, PLATEAU_RUN_ID and the options' variables, the
 * Python bootstrap. Returns 0, or 2 when out of memory. */
static int command_env(const run_opts_t *o, const char *preload, const char *jemalloc, const char *abs_dir,
                       uint64_t run_id) {
    const char *old = getenv("LD_PRELOAD");
    size_t lp_len = strlen(preload) + strlen(jemalloc) + (old ? strlen(old) : 0) + 4;
    char *lp = malloc(lp_len);
    if (!lp) return 2;
    snprintf(lp, lp_len, "%s%s%s%s%s", preload, jemalloc[0] ? ":" : "", jemalloc, old && *old ? ":" : "",
             old && *old ? old : "");
    child_setenv("LD_PRELOAD", lp);
    free(lp);
    child_setenv("PLATEAU_DIR", abs_dir);
    char num[32];
    snprintf(num, sizeof num, "%016llx", (unsigned long long)run_id);
    child_setenv("PLATEAU_RUN_ID", num);
    if (o->have_sample) {
        snprintf(num, sizeof num, "%llu", (unsigned long long)o->sample_bytes);
        child_setenv("PLATEAU_SAMPLE_BYTES", num);
    }
    if (o->have_interval) {
        snprintf(num, sizeof num, "%llu", (unsigned long long)o->interval_ms);
        child_setenv("PLATEAU_INTERVAL_MS", num);
    }
    if (o->steps_signal) child_setenv("PLATEAU_STEP_SIGNAL", "1");
    if (!getenv("PLATEAU_QUIET")) child_setenv("PLATEAU_QUIET", "1");
    python_bootstrap_env();
    return 0;
}

/* Fork and exec CMD with the signal mask and SIGCHLD as they were before the relay. *exec_failed: it could not run
 * (it said why; its exit status is 127 or 126). Returns its pid, or -1 after one line. */
static pid_t start_command(const pl_relay_t *relay, char **cmd, bool *exec_failed) {
    /* exec_fd: closed by a successful exec (O_CLOEXEC); a failed one writes its errno there first */
    int exec_fd[2] = {-1, -1};
    if (pipe2(exec_fd, O_CLOEXEC) != 0) exec_fd[0] = exec_fd[1] = -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "plateau run: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        pl_relay_child_restore(relay);
        if (exec_fd[0] >= 0) close(exec_fd[0]);
        execvp(cmd[0], cmd);
        int err = errno;
        fprintf(stderr, "plateau run: cannot run '%s': %s\n", pl_format_esc(cmd[0]), strerror(err));
        if (exec_fd[1] >= 0 && write(exec_fd[1], &err, sizeof err) < 0) { /* the exit status says it too */
        }
        _exit(err == ENOENT ? 127 : 126);
    }
    *exec_failed = false;
    if (exec_fd[0] >= 0) {
        close(exec_fd[1]);
        int err;
        ssize_t n;
        while ((n = read(exec_fd[0], &err, sizeof err)) < 0 && errno == EINTR) {
        }
        *exec_failed = n == (ssize_t)sizeof err;
        close(exec_fd[0]);
    }
    return pid;
}

/* The run directory and how CMD ended. */
typedef struct run_state {
    char abs_dir[PATH_MAX];
    uint64_t run_id;
    bool made, wrote_id;       /* the directory / its run-id file were made by this run */
    pl_relay_t relay;
    pid_t pid;                 /* CMD */
    int status;                /* CMD's wait status */
    bool exec_failed;          /* CMD could not run */
    bool stopped;              /* the watcher stopped the job (--stop-on-leak) */
    pl_oom_counts_t oom_before;
} run_state_t;

/* Run CMD under the supervisor (supervise.h) until it has ended, with the watcher when asked. Returns 0, or 2 after
 * one line. Signals stay blocked on return: one arriving now cannot replace CMD's exit status with ours. */
static int supervise_command(const run_opts_t *o, run_state_t *s) {
    /* Signals are blocked before the fork (none is lost or kills us meanwhile) and taken by sigwaitinfo. */
    pl_relay_open(&s->relay);
    /* this run's processes start after this (the watcher tells them from an earlier run's, with --append); 1 s of
     * slack for the clock's steps */
    struct timespec start_ts;
    clock_gettime(CLOCK_REALTIME, &start_ts);
    int64_t start_ns = ((int64_t)start_ts.tv_sec - 1) * 1000000000 + start_ts.tv_nsec;
    s->oom_before = pl_run_status_oom_counts();
    s->pid = start_command(&s->relay, o->cmd, &s->exec_failed);
    if (s->pid < 0) return 2;
    s->relay.child = s->pid;
    pid_t watcher = !s->exec_failed && (o->live || o->stop_on_leak)
                        ? start_watcher(s->abs_dir, &s->relay.old_mask, s->pid, o->live, o->stop_on_leak,
                                        (int64_t)o->run_steps, (int64_t)o->warmup_steps, start_ns, o->live_interval_s)
                        : 0;
    int watcher_status = 0;
    const char *failed = "";
    int err = pl_relay_wait(&s->relay, &watcher, &s->status, &watcher_status, &failed);
    if (err) {
        fprintf(stderr, "plateau run: %s: %s\n", failed, strerror(-err));
        return 2;
    }
    if (watcher > 0) watcher_status = pl_watcher_end(watcher);
    s->stopped = WIFEXITED(watcher_status) && WEXITSTATUS(watcher_status) == PL_WATCH_STOPPED;
    pl_relay_close(&s->relay);
    return 0;
}

/* CMD has ended and its traces are written: run.status, where the traces are, the notes, the report; plateau run's
 * exit status (it may end plateau the way CMD ended instead). */
static int finish(const run_opts_t *o, run_state_t *s) {
    int rc = WIFEXITED(s->status) ? WEXITSTATUS(s->status) : 128 + WTERMSIG(s->status);
    if (s->exec_failed) { /* nothing ran: leave no run behind (the child said why) */
        char id_path[PATH_MAX + sizeof PL_TRACE_RUN_ID_FILE + 1];
        snprintf(id_path, sizeof id_path, "%s/%s", s->abs_dir, PL_TRACE_RUN_ID_FILE);
        if (s->wrote_id) unlink(id_path);
        if (s->made) rmdir(s->abs_dir); /* fails, leaving it, if anything else appeared there */
        return rc;
    }
    if (pl_run_status_write(s->abs_dir, s->pid, s->status, s->oom_before) == -EINVAL)
        fprintf(stderr, "plateau run: %s/run.status is not a regular file: the command's exit status is not recorded "
                        "there\n", pl_format_esc(s->abs_dir));
    int n = count_traces(s->abs_dir);
    fprintf(stderr, "plateau: %d trace file%s in %s", n, n == 1 ? "" : "s", pl_format_esc(s->abs_dir));
    if (WIFSIGNALED(s->status)) fprintf(stderr, " (the command was killed by signal %d)", WTERMSIG(s->status));
    fprintf(stderr, "\n");
    pl_cli_notes_print(s->abs_dir, stderr);
    bool leak = (o->report || o->fail_on_leak) && n > 0 &&
                print_report(s->abs_dir, &s->relay.old_mask, o->report, o->fail_on_leak, o->all_processes);
    int ret = exit_status(rc, s->stopped, leak, o->fail_on_leak, s->abs_dir);
    if (ret == rc) pl_run_status_end_like(s->status);
    return ret;
}

int pl_cli_run(int argc, char **argv) {
    run_opts_t o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0) return rc;
    char preload[PATH_MAX], jemalloc[PATH_MAX];
    if (find_libraries(&o, preload, jemalloc)) return 2;
    static run_state_t s; /* PATH_MAX and a relay: off the stack */
    if (pl_cli_run_dir("plateau run", o.dir_arg, "plateau-run", o.append, o.allocator, s.abs_dir, &s.run_id, &s.made,
                       &s.wrote_id))
        return 2;
    if (command_env(&o, preload, jemalloc, s.abs_dir, s.run_id)) return 2;
    /* The collector (collector/): the tracer then runs no thread and keeps no descriptor in the program. Without
     * it the tracer runs its own writer and sampler threads (docs/env.md, PLATEAU_COLLECTOR). */
    pl_collector_t collector;
    if (pl_collector_start(s.abs_dir, &collector) == 0) child_setenv("PLATEAU_COLLECTOR", "1");
    setenv("PLATEAU_SET", child_added, 1); /* CMD's preload takes these out of its environment again */
    if (supervise_command(&o, &s)) return 2;
    /* Everything the ended processes recorded is in their files before the report reads them. */
    if (collector.pid > 0 && !pl_collector_finish(&collector, 10000))
        fprintf(stderr, "plateau: the collector did not finish writing the traces within 10 s\n");
    return finish(&o, &s);
}
