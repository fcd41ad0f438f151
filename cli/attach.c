/* plateau attach: judge processes plateau did not start (docs/attach.md).
 *   plateau attach [-o DIR] [--interval-ms N] [--steps-from FILE [--step-pattern REGEX]] [--no-children]
 *                  [--no-gpu] [--no-report] [--live|--no-live] [--live-interval S] [--all-processes]
 *                  [--fail-on-leak] [--stop-on-leak] [--run-steps N] [--warmup-steps N] PID...
 * Wiring only: checks each PID (one line and exit 2 for a pid that does not exist or is another user's), makes the
 * run directory as plateau run does (pl_cli_run_dir), writes its note (PL_TRACE_ATTACH_FILE: what a run followed
 * from outside cannot see), and runs the sampler (collector/attach.h) over the PIDs and their descendants until
 * every one has ended or plateau attach gets SIGINT / SIGTERM / SIGHUP (the job runs on, untouched). Steps come
 * from the job's log followed as tail -F does (collector/logtail.h; the step number as plateau judge reads it,
 * reports/logjudge.h, or the first number a --step-pattern matches), else the report judges by wall time. The
 * live status line and --stop-on-leak run in a watcher process that only reads the traces (cli/watch.c), as under
 * plateau run; the "job" --stop-on-leak may stop is the first PID and what runs below it. Then the report, as
 * plateau run prints it. Exit status: 0; 3 with --fail-on-leak when the run leaks or --stop-on-leak stopped the
 * job; 2 on a usage error, a PID that cannot be attached, or a run directory that cannot be made. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <plateau/trace.h>

#include "attach.h"
#include "commands.h"
#include "format.h"
#include "logjudge.h"
#include "logtail.h"
#include "nvml.h"
#include "opts.h"
#include "supervise.h"
#include "units.h"

#define MAX_PIDS 64
#define LOG_POLL_MS 50  /* how often the job's log is read: a step's sample is at most this late */

static volatile sig_atomic_t quit_sig;

static void on_quit(int sig) { quit_sig = sig; }

static void log_line(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "plateau attach: %s\n", line);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: plateau attach [-o DIR] [--interval-ms N] [--steps-from FILE [--step-pattern REGEX]]\n"
            "                      [--no-children] [--no-gpu] [--no-report] [--live|--no-live] [--live-interval S]\n"
            "                      [--all-processes] [--fail-on-leak] [--stop-on-leak] [--run-steps N]\n"
            "                      [--warmup-steps N] PID...\n"
            "  follow running processes plateau did not start, and their children (DataLoader workers, ranks),\n"
            "  from outside: RSS and PSS from /proc, the memory cgroup, GPU memory per process from NVML when the\n"
            "  driver is there; no ptrace, no signal, nothing written to them. Ends when they have all ended, or on\n"
            "  Ctrl-C (the job runs on); then the report. It cannot see the live heap, allocation sites or tensors:\n"
            "  the verdict rests on RSS (rss.anon) and device memory (docs/attach.md)\n"
            "  -o DIR                 run directory (default ./plateau-attach-<time>), as for plateau run\n"
            "  --interval-ms N        sampling interval (default 500)\n"
            "  --steps-from FILE      the job's log: a line naming a step number (\"step 120\", \"iter=120\", \"Step\n"
            "                         120: ...\") ends that step; followed as tail -F does (growth, truncation,\n"
            "                         rotation). Without it the report judges by wall time\n"
            "  --step-pattern REGEX   the step number is the first number the (POSIX extended) REGEX matches in\n"
            "                         a line, or its first parenthesised group\n"
            "  --no-children          only the PIDs given, not the processes they start\n"
            "  --no-gpu               do not load NVML (libnvidia-ml.so.1, or PLATEAU_LIBNVML)\n"
            "  --no-report            do not print the report when attach ends\n"
            "  --live, --no-live      the live status line on stderr, or none (default: on a terminal)\n"
            "  --live-interval S      seconds between live refreshes (default 2)\n"
            "  --all-processes        the report shows every process in full\n"
            "  --fail-on-leak         exit 3 when the report's run verdict is LEAK\n"
            "  --stop-on-leak         stop the process that leaks (SIGTERM), and the processes above it up to the\n"
            "                         first PID, once a leak of its own memory is confirmed (as for plateau run)\n"
            "  --run-steps N          the run's planned number of steps, for --stop-on-leak\n"
            "  --warmup-steps N       growth up to step N is warmup for --stop-on-leak and the live line\n"
            "exit status: 0; 3 with --fail-on-leak when the run leaks, or when --stop-on-leak stopped the job; 2 on\n"
            "a usage error, a PID that does not exist or is not yours, or a run directory that cannot be made\n");
}

/* ---- steps from the job's log ---- */

typedef struct steps {
    regex_t re;
    bool have_re;
    int64_t last;           /* the last step recorded (-1 none) */
    int64_t newest;         /* the newest step read in this poll (-1 none) */
    pl_attach_t *a;
    bool initial;           /* reading what the log held when attach started: only its last step counts */
    size_t n_recorded;
} steps_t;

/* The step of a line by the pattern: the first parenthesised group's first number, else the match's. */
static bool pattern_step(const regex_t *re, const char *s, size_t n, int64_t *step) {
    char buf[4096];
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    regmatch_t m[2];
    if (regexec(re, buf, 2, m, 0)) return false;
    int g = m[1].rm_so >= 0 ? 1 : 0;
    for (regoff_t i = m[g].rm_so; i < m[g].rm_eo; i++) {
        if (buf[i] < '0' || buf[i] > '9') continue;
        int64_t v = 0;
        for (; i < m[g].rm_eo && buf[i] >= '0' && buf[i] <= '9'; i++) {
            if (v > INT64_MAX / 10 - 10) return false;
            v = v * 10 + (buf[i] - '0');
        }
        *step = v;
        return true;
    }
    return false;
}

static void on_line(void *ctx, const char *s, size_t n) {
    steps_t *st = ctx;
    int64_t step;
    bool ok = st->have_re ? pattern_step(&st->re, s, n, &step) : pl_log_text_step(s, n, &step);
    if (!ok || step <= st->last || step <= st->newest) return; /* a step said again, or an older one */
    if (!st->initial && st->newest > st->last && pl_attach_step(st->a, (uint64_t)st->newest, false) == 0)
        st->n_recorded++; /* an earlier step of this batch: its record, without a sample */
    st->newest = step;
}

/* Read the log; the newest step gets its record and a sample. */
static void steps_poll(steps_t *st, pl_logtail_t *t, const char *path, bool *said_missing) {
    st->newest = -1;
    int ev = pl_logtail_poll(t, on_line, st);
    if ((ev & PL_LOGTAIL_MISSING) && !*said_missing) {
        fprintf(stderr, "plateau attach: %s does not exist (yet): waiting for it; samples are by time meanwhile\n",
                pl_format_esc(path));
        *said_missing = true;
    }
    if (!(ev & PL_LOGTAIL_MISSING)) *said_missing = false;
    if (st->newest > st->last && pl_attach_step(st->a, (uint64_t)st->newest, true) == 0) {
        st->last = st->newest;
        st->n_recorded++;
    }
    st->initial = false;
}

/* ---- the note in the run directory, shown by plateau report ---- */

static void write_note(const char *dir, const char *steps_from, const char *pattern, const char *gpu) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, PL_TRACE_ATTACH_FILE);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        fprintf(stderr, "plateau attach: cannot write %s: %s (the report will not say how this run was followed)\n",
                pl_format_esc(path), strerror(errno));
        return;
    }
    fprintf(f, "attached from outside (plateau attach): no live heap, no allocation sites, no tensors were seen; "
               "each process's verdict rests on its anonymous RSS (rss.anon) and its device memory (dev.reserved), "
               "file pages, shared memory and PSS are findings only (docs/attach.md)\n");
    if (steps_from)
        fprintf(f, "steps: from the job's log %s%s%s\n", pl_format_esc(steps_from), pattern ? " by the pattern " : "",
                pattern ? pl_format_esc(pattern) : "");
    else
        fprintf(f, "steps: none (no --steps-from): judged by wall time\n");
    fprintf(f, "device memory: %s\n", gpu);
    fclose(f);
}

/* Below the text report of a run directory plateau attach wrote (cli/report.c). */
void pl_cli_attach_note_print(const char *dir, FILE *out) {
    char path[PATH_MAX + 32], line[1024];
    snprintf(path, sizeof path, "%s/%s", dir, PL_TRACE_ATTACH_FILE);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return;
    }
    for (int n = 0; n < 8 && fgets(line, sizeof line, f); n++) {
        line[strcspn(line, "\n")] = 0;
        fprintf(out, "note: %s\n", pl_format_esc(line));
    }
    fclose(f);
}

/* ---- the watcher: live line and --stop-on-leak, in a process of its own (as plateau run's) ---- */

typedef struct attach_watch {
    const char *dir;
    pid_t job;
    bool live, stop;
    int64_t run_steps, warmup_steps;
    double interval_s;
} attach_watch_t;

static int watch_body(void *ctx) {
    const attach_watch_t *w = ctx;
    FILE *out = w->live ? stderr : fopen("/dev/null", "w");
    pl_cli_live_opts_t o = {.interval_s = w->interval_s, .tty = w->live && isatty(STDERR_FILENO), .out = out,
                            .stop_pid = w->stop ? w->job : 0, .run_steps = w->run_steps,
                            .warmup_steps = w->warmup_steps, .slow_hours = 24};
    return out ? pl_cli_live_loop(w->dir, &o) : 1;
}

static pid_t start_watcher(const char *dir, pid_t job, bool live, bool stop, int64_t run_steps, int64_t warmup_steps,
                           double interval_s) {
    attach_watch_t ctx = {.dir = dir, .job = job, .live = live, .stop = stop, .run_steps = run_steps,
                          .warmup_steps = warmup_steps, .interval_s = interval_s};
    /* SIGINT and SIGHUP end plateau attach, which then ends the watcher */
    pl_watcher_t w = {.ignore_hup = true, .quit_on = pl_cli_live_quit_on, .body = watch_body, .ctx = &ctx};
    return pl_watcher_start(&w);
}

static int report(const char *dir, bool show, bool fail_on_leak, bool all_processes) {
    char *argv[5] = {"report", (char *)(uintptr_t)dir};
    int n = 2;
    if (fail_on_leak) argv[n++] = "--fail-on-leak";
    if (all_processes) argv[n++] = "--all-processes";
    argv[n] = NULL;
    fflush(stdout);
    int saved = -1;
    if (!show) { /* --no-report --fail-on-leak: judged, not shown */
        saved = dup(STDOUT_FILENO);
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, STDOUT_FILENO);
            close(null);
        }
    }
    int rc = pl_cli_report(n, argv);
    fflush(stdout);
    if (saved >= 0) {
        dup2(saved, STDOUT_FILENO);
        close(saved);
    }
    return rc;
}

static bool parse_count(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    return pl_units_parse(s, out) == 0 && *out >= lo && *out <= hi;
}

/* ---- the options ---- */

typedef struct attach_opts {
    const char *dir_arg;      /* -o DIR, NULL: ./plateau-attach-<time> */
    const char *steps_from;   /* --steps-from FILE */
    const char *pattern;      /* --step-pattern REGEX */
    uint64_t interval_ms, run_steps, warmup_steps;
    double live_interval_s;
    bool children, gpu, show_report, live, fail_on_leak, stop_on_leak, all_processes;
    uint32_t pids[MAX_PIDS];  /* the PIDs given, in order: the first is the job --stop-on-leak may stop */
    size_t n_pids;
} attach_opts_t;

enum { OPT_INTERVAL = 256, OPT_STEPS_FROM, OPT_PATTERN, OPT_RUN_STEPS, OPT_WARMUP_STEPS, OPT_LIVE_INTERVAL,
       OPT_NO_CHILDREN, OPT_NO_GPU, OPT_NO_REPORT, OPT_LIVE, OPT_NO_LIVE, OPT_ALL, OPT_FAIL, OPT_STOP };

static const struct option attach_longopts[] = {
    {"help", no_argument, NULL, 'h'},
    {"interval-ms", required_argument, NULL, OPT_INTERVAL},
    {"steps-from", required_argument, NULL, OPT_STEPS_FROM},
    {"step-pattern", required_argument, NULL, OPT_PATTERN},
    {"run-steps", required_argument, NULL, OPT_RUN_STEPS},
    {"warmup-steps", required_argument, NULL, OPT_WARMUP_STEPS},
    {"live-interval", required_argument, NULL, OPT_LIVE_INTERVAL},
    {"no-children", no_argument, NULL, OPT_NO_CHILDREN},
    {"no-gpu", no_argument, NULL, OPT_NO_GPU},
    {"no-report", no_argument, NULL, OPT_NO_REPORT},
    {"live", no_argument, NULL, OPT_LIVE},
    {"no-live", no_argument, NULL, OPT_NO_LIVE},
    {"all-processes", no_argument, NULL, OPT_ALL},
    {"fail-on-leak", no_argument, NULL, OPT_FAIL},
    {"stop-on-leak", no_argument, NULL, OPT_STOP},
    {NULL, 0, NULL, 0},
};

/* An option into o (tok: the option as given, for messages). Returns 0, or 2 after one line on stderr. */
static int set_option(attach_opts_t *o, int c, const char *tok, const char *val) {
    switch (c) {
    case 'o': o->dir_arg = val; break;
    case OPT_INTERVAL:
        if (!parse_count(val, 10, 60000, &o->interval_ms)) {
            fprintf(stderr, "plateau attach: --interval-ms '%s' is not an integer in [10, 60000]\n", pl_format_esc(val));
            return 2;
        }
        break;
    case OPT_STEPS_FROM: o->steps_from = val; break;
    case OPT_PATTERN: o->pattern = val; break;
    case OPT_RUN_STEPS:
    case OPT_WARMUP_STEPS:
        if (!parse_count(val, 1, INT64_MAX / 4, c == OPT_RUN_STEPS ? &o->run_steps : &o->warmup_steps)) {
            fprintf(stderr, "plateau attach: %s '%s' is not a step count >= 1\n", tok, pl_format_esc(val));
            return 2;
        }
        break;
    case OPT_LIVE_INTERVAL: {
        char *end;
        o->live_interval_s = strtod(val, &end);
        if (*end || !(o->live_interval_s >= 0.05) || o->live_interval_s > 3600) {
            fprintf(stderr, "plateau attach: --live-interval '%s' is not seconds in [0.05, 3600]\n", pl_format_esc(val));
            return 2;
        }
        break;
    }
    case OPT_NO_CHILDREN: o->children = false; break;
    case OPT_NO_GPU: o->gpu = false; break;
    case OPT_NO_REPORT: o->show_report = false; break;
    case OPT_LIVE: o->live = true; break;
    case OPT_NO_LIVE: o->live = false; break;
    case OPT_ALL: o->all_processes = true; break;
    case OPT_FAIL: o->fail_on_leak = true; break;
    case OPT_STOP: o->stop_on_leak = true; break;
    }
    return 0;
}

/* An operand: a PID into o. Returns 0, or 2 after one line on stderr. */
static int add_pid(attach_opts_t *o, const char *a) {
    if (a[0] == '-') { /* "-" alone, or a "--": options and PIDs mix, nothing ends the options */
        fprintf(stderr, "plateau attach: unknown option '%s'\n", pl_format_esc(a));
        usage(stderr);
        return 2;
    }
    char *end;
    unsigned long v = strtoul(a, &end, 10);
    if (*end || end == a || v == 0 || v > INT32_MAX) {
        fprintf(stderr, "plateau attach: '%s' is not a process id\n", pl_format_esc(a));
        return 2;
    }
    if (o->n_pids == MAX_PIDS) {
        fprintf(stderr, "plateau attach: at most %d PIDs (their children are followed without naming them)\n",
                MAX_PIDS);
        return 2;
    }
    o->pids[o->n_pids++] = (uint32_t)v;
    return 0;
}

/* argv into o: options and PIDs in any order. Returns -1 to go on, or the exit status (0 after --help, 2 after one
 * line on a usage error). */
static int parse_options(int argc, char **argv, attach_opts_t *o) {
    *o = (attach_opts_t){.interval_ms = 500, .live_interval_s = 2, .children = true, .gpu = true,
                         .show_report = true, .live = isatty(STDERR_FILENO)};
    pl_opts_t g;
    pl_opts_start(&g, "plateau attach", "ho:", attach_longopts);
    int rc = -1;
    while (rc < 0) {
        int c = pl_opts_next(&g, argc, argv);
        if (c == -1 && optind >= argc && !g.dashdash) break;
        if (c == -1) {
            rc = add_pid(o, g.dashdash ? "--" : argv[optind]) ? 2 : -1;
            if (!g.dashdash) optind++;
        } else if (c == 'h') {
            usage(stdout);
            rc = 0;
        } else if (c == '?' || c == ':') {
            pl_opts_say(&g, c, argv);
            if (c == '?') usage(stderr);
            rc = 2;
        } else {
            rc = set_option(o, c, argv[g.at], optarg) ? 2 : -1;
        }
    }
    pl_opts_end(&g);
    if (rc >= 0) return rc;
    if (!o->n_pids) {
        fprintf(stderr, "plateau attach: no PID given\n");
        usage(stderr);
        return 2;
    }
    if (o->pattern && !o->steps_from) {
        fprintf(stderr, "plateau attach: --step-pattern reads the log given by --steps-from FILE\n");
        return 2;
    }
    return -1;
}

/* ---- the steps ---- */

/* The step pattern compiled into st, and every PID checked, before anything is made. Returns 0, or 2 after one
 * line (st holds no pattern then). */
static int check_inputs(const attach_opts_t *o, steps_t *st) {
    if (o->pattern) {
        int e = regcomp(&st->re, o->pattern, REG_EXTENDED);
        if (e) {
            char msg[200];
            regerror(e, &st->re, msg, sizeof msg);
            fprintf(stderr, "plateau attach: --step-pattern '%s': %s\n", pl_format_esc(o->pattern), msg);
            return 2;
        }
        st->have_re = true;
    }
    for (size_t i = 0; i < o->n_pids; i++) {
        char why[400];
        if (o->pids[i] == (uint32_t)getpid()) {
            fprintf(stderr, "plateau attach: pid %u is plateau attach itself\n", o->pids[i]);
            return 2; /* the pattern is not freed here, as before: the command returns at once */
        }
        if (pl_attach_check(NULL, o->pids[i], why, sizeof why)) {
            fprintf(stderr, "plateau attach: %s\n", why);
            if (st->have_re) regfree(&st->re);
            st->have_re = false;
            return 2;
        }
    }
    return 0;
}

/* NVML for the device memory (with --no-gpu, none); gpu_line says what the run records (for the note). */
static pl_nvml_t *open_gpu(bool gpu, char *gpu_line, size_t n) {
    pl_nvml_t *nv = NULL;
    snprintf(gpu_line, n, "not recorded (--no-gpu)");
    if (!gpu) return NULL;
    char why[300] = "";
    if (pl_nvml_open(&nv, why, sizeof why) == 0)
        snprintf(gpu_line, n, "used memory per process from NVML (%u device%s)", pl_nvml_n_devices(nv),
                 pl_nvml_n_devices(nv) == 1 ? "" : "s");
    else
        snprintf(gpu_line, n, "not recorded: %s", why);
    if (!nv && getenv("PLATEAU_LIBNVML")) fprintf(stderr, "plateau attach: device memory %s\n", gpu_line);
    return nv;
}

/* The sampler over every PID. Returns it, or NULL after one line. */
static pl_attach_t *start_sampler(const attach_opts_t *o, const char *dir, uint64_t run_id, pl_nvml_t *nv) {
    pl_attach_opts_t ao = {.dir = dir, .run_id = run_id, .interval_ms = o->interval_ms, .children = o->children,
                           .nvml = nv, .log = log_line};
    pl_attach_t *a = NULL;
    int rc = pl_attach_create(&ao, &a);
    for (size_t i = 0; rc == 0 && i < o->n_pids; i++) {
        rc = pl_attach_add(a, o->pids[i]);
        if (rc) fprintf(stderr, "plateau attach: pid %u: %s\n", o->pids[i], rc == -ESRCH ? "has ended" : strerror(-rc));
    }
    if (rc) {
        pl_attach_destroy(a);
        return NULL;
    }
    return a;
}

/* Sample until every process followed has ended or plateau attach is told to stop (quit_sig); the job's log is
 * read between samples. */
static void follow(const attach_opts_t *o, pl_attach_t *a, steps_t *st, pl_logtail_t *tail) {
    bool said_missing = false;
    while (!quit_sig) {
        if (tail) steps_poll(st, tail, o->steps_from, &said_missing);
        if (pl_attach_poll(a) == 0) break;
        int wait = pl_attach_wait_ms(a);
        if (tail && wait > LOG_POLL_MS) wait = LOG_POLL_MS;
        if (!quit_sig) poll(NULL, 0, wait);
    }
    if (tail) {
        if (!quit_sig) steps_poll(st, tail, o->steps_from, &said_missing); /* the job's last lines */
        pl_logtail_close(tail);
    }
}

/* How the following ended, the report, and plateau attach's exit status. */
static int finish(const attach_opts_t *o, const char *dir, size_t n_traced, size_t n_steps, bool stopped) {
    if (quit_sig)
        fprintf(stderr, "plateau attach: stopped by %s: the job runs on, untouched; %zu process%s followed up to now\n",
                quit_sig == SIGINT ? "Ctrl-C (SIGINT)" : quit_sig == SIGTERM ? "SIGTERM" : "SIGHUP", n_traced,
                n_traced == 1 ? "" : "es");
    else
        fprintf(stderr, "plateau attach: the job has ended (pid %u and every process below it); %zu process%s "
                        "followed\n", o->pids[0], n_traced, n_traced == 1 ? "" : "es");
    if (o->steps_from)
        fprintf(stderr, "plateau attach: %zu step%s read from %s\n", n_steps, n_steps == 1 ? "" : "s",
                pl_format_esc(o->steps_from));
    fprintf(stderr, "plateau: %zu trace file%s in %s\n", n_traced, n_traced == 1 ? "" : "s", pl_format_esc(dir));
    int ret = 0;
    if (o->show_report || o->fail_on_leak) {
        signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends the report */
        int r = report(dir, o->show_report, o->fail_on_leak, o->all_processes);
        if (o->fail_on_leak && r == PL_EXIT_LEAK) {
            fprintf(stderr, "plateau: the run leaks: exit %d (--fail-on-leak)\n", PL_EXIT_LEAK);
            ret = PL_EXIT_LEAK;
        }
    }
    if (stopped) {
        fprintf(stderr, "plateau: exit %d: the job was stopped on a confirmed leak (--stop-on-leak; %s/run.stopped "
                        "says what was stopped)\n", PL_EXIT_LEAK, pl_format_esc(dir));
        ret = PL_EXIT_LEAK;
    }
    return ret;
}

static void raise_fd_limit(void) {
    struct rlimit rl; /* our own descriptor limit: four per followed process */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void quit_on_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit; /* no SA_RESTART: the wait below returns at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int pl_cli_attach(int argc, char **argv) {
    static attach_opts_t o; /* MAX_PIDS: off the stack */
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0) return rc;
    steps_t st = {.last = -1, .newest = -1, .initial = true};
    if (check_inputs(&o, &st)) return 2;
    char dir[PATH_MAX];
    uint64_t run_id;
    bool made, wrote_id;
    if (pl_cli_run_dir("plateau attach", o.dir_arg, "plateau-attach", false, "unknown", dir, &run_id, &made,
                       &wrote_id)) {
        if (st.have_re) regfree(&st.re);
        return 2;
    }
    raise_fd_limit();
    char gpu_line[400];
    pl_nvml_t *nv = open_gpu(o.gpu, gpu_line, sizeof gpu_line);
    write_note(dir, o.steps_from, o.pattern, gpu_line);
    pl_attach_t *a = start_sampler(&o, dir, run_id, nv);
    if (!a) {
        pl_nvml_close(nv);
        if (st.have_re) regfree(&st.re);
        return 2;
    }
    st.a = a;
    pl_logtail_t *tail = NULL;
    if (o.steps_from && pl_logtail_open(o.steps_from, &tail)) {
        fprintf(stderr, "plateau attach: out of memory\n");
        return 2;
    }
    quit_on_signals();
    fprintf(stderr, "plateau attach: following pid %u%s%s into %s (Ctrl-C stops plateau, not the job)\n", o.pids[0],
            o.n_pids > 1 ? " and the others given" : "", o.children ? " and its children" : "", pl_format_esc(dir));
    pid_t watcher = o.live || o.stop_on_leak
                        ? start_watcher(dir, (pid_t)o.pids[0], o.live, o.stop_on_leak, (int64_t)o.run_steps,
                                        (int64_t)o.warmup_steps, o.live_interval_s)
                        : 0;
    follow(&o, a, &st, tail);
    size_t n_traced = pl_attach_n_traced(a);
    pl_attach_destroy(a);
    pl_nvml_close(nv);
    if (st.have_re) regfree(&st.re);
    int watcher_status = watcher > 0 ? pl_watcher_end(watcher) : 0;
    bool stopped = watcher > 0 && WIFEXITED(watcher_status) && WEXITSTATUS(watcher_status) == PL_WATCH_STOPPED;
    return finish(&o, dir, n_traced, st.n_recorded, stopped);
}
