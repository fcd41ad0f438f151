/* cli/watch: `plateau watch [--interval S] [--once] [--prometheus FILE] DIR`, the live verdict of a run going on elsewhere, and the loop
 * behind `plateau run`'s status line and --stop-on-leak (pl_cli_live_loop, run in a separate process).
 * Polls DIR's traces incrementally (reports/live.h) every interval and prints one status line: rewritten in place on
 * a terminal, else a new line whenever a metric's state changes (and at least every 30 s). Ends when the run has
 * ended (run.status written, or every trace closed) after printing the final state. A DIR that does not exist yet is
 * waited for (one line on stderr says so): the watch may start before plateau run. With --prometheus FILE, each poll
 * also rewrites FILE, a node_exporter textfile (reports/live_prom.h), through a temporary file renamed over it.
 * docs/live.md. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "opts.h"
#include "live.h"
#include "live_prom.h"
#include "format.h"

static volatile int quit; /* set by a signal handler (an int store is atomic here, as sig_atomic_t) */

static void on_quit(int sig) {
    (void)sig;
    quit = 1;
}

static void sleep_s(double s) {
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - floor(s)) * 1e9)};
    nanosleep(&ts, NULL); /* a signal cuts it short: quit is then checked */
}

/* ------------------------------------------------------------------ the bottom line of a shared terminal
 * plateau run's watcher shares its terminal with the program, whose next line would land after a line rewritten in
 * place. So the status line gets the terminal's last row to itself: a scroll region (DECSTBM) of the rows above it,
 * where the program's output scrolls, and each redraw saves the cursor (DECSC), writes the last row and restores the
 * cursor (DECRC), all in one write so the program's bytes never land in between. A resize (SIGWINCH) clears the old
 * row and sets the region again; the end (plateau run ends the watcher with SIGTERM once the command has ended, on
 * every way it ends) clears the row and resets the region. A SIGKILL of plateau run kills the watcher too (its
 * parent-death signal) before it can: `printf '\033[r'` (or `reset`) gives the terminal back its full height. */
static volatile int resized; /* set by the SIGWINCH handler */

static void on_winch(int sig) {
    (void)sig;
    resized = 1;
}

typedef struct {
    int rows, cols; /* the terminal's size when the region was set; rows 0: not set (too small, size unknown) */
} bottom_t;

static void term_size(FILE *out, int *rows, int *cols) {
    struct winsize ws;
    *rows = *cols = 0;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0) *rows = ws.ws_row, *cols = ws.ws_col;
}

static void put_all(FILE *out, const char *buf, size_t n) {
    fflush(out);
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fileno(out), buf + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        off += (size_t)w;
    }
}

/* Reserve the last row: a new line first (so a cursor on the last row moves above it, scrolling once), then the
 * region, then the cursor back where the new line left it, one row up. */
static void bottom_begin(FILE *out, bottom_t *b) {
    term_size(out, &b->rows, &b->cols);
    if (b->rows < 3 || b->cols < 10) {
        b->rows = 0;
        return;
    }
    char buf[64];
    int n = snprintf(buf, sizeof buf, "\n\0337\033[1;%dr\0338\033[1A", b->rows - 1);
    put_all(out, buf, (size_t)n);
}

/* After a resize: clear the old row where it still is, and reserve the new last one. */
static void bottom_resize(FILE *out, bottom_t *b) {
    int rows, cols;
    term_size(out, &rows, &cols);
    if (rows == b->rows && cols == b->cols) return;
    char buf[96];
    int n = 0;
    if (b->rows && b->rows <= rows) n = snprintf(buf, sizeof buf, "\0337\033[%d;1H\033[2K\0338", b->rows);
    if (rows >= 3 && cols >= 10) {
        n += snprintf(buf + n, sizeof buf - (size_t)n, "\0337\033[1;%dr\0338", rows - 1);
        b->rows = rows, b->cols = cols;
    } else {
        n += snprintf(buf + n, sizeof buf - (size_t)n, "\0337\033[r\0338");
        b->rows = 0;
    }
    put_all(out, buf, (size_t)n);
}

/* The status line on the last row, cut to the terminal's width (characters, not UTF-8 bytes) so it never wraps. */
static void bottom_draw(FILE *out, const bottom_t *b, const char *line) {
    if (!b->rows) return;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "\0337\033[%d;1H\033[2K", b->rows);
    const char *text[2] = {"plateau: ", line};
    int shown = 0;
    for (int t = 0; t < 2; t++)
        for (const char *c = text[t]; *c && (size_t)n + 8 < sizeof buf; c++) {
            bool starts = ((unsigned char)*c & 0xC0) != 0x80;
            if (starts && shown == b->cols - 1) break;
            shown += starts;
            buf[n++] = *c;
        }
    n += snprintf(buf + n, sizeof buf - (size_t)n, "\0338");
    put_all(out, buf, (size_t)n);
}

/* Clear the row and give the program the whole terminal again. */
static void bottom_end(FILE *out, bottom_t *b) {
    if (!b->rows) return;
    char buf[64];
    int n = snprintf(buf, sizeof buf, "\0337\033[%d;1H\033[2K\033[r\0338", b->rows);
    put_all(out, buf, (size_t)n);
    b->rows = 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* What a non-terminal output reprints on: the states of the shown process's metrics. */
static unsigned signature(const pl_live_status_t *s) {
    unsigned sig = s->have_proc ? 1u : 0u;
    for (int m = 0; m < PL_LIVE__COUNT; m++) sig = sig * 8u + (s->m[m].present ? (unsigned)s->m[m].state + 1u : 0u);
    return sig * 2u + (s->ended ? 1u : 0u);
}

/* A short horizon: the projected OOM within max(60 s, 10 steps) at the tail's rate. Stopping then loses nothing a
 * warmup could have won: the process would reach its limit first anyway. */
static bool near_limit(const pl_live_status_t *s, const pl_live_mstatus_t *ms) {
    if (isfinite(ms->oom_seconds)) {
        double ten_steps_s = s->steps_per_s > 0 && !s->by_time ? 10 / s->steps_per_s : 10;
        return ms->oom_seconds <= fmax(60, ten_steps_s);
    }
    return !s->by_time && ms->oom_step - s->step <= 10;
}

/* --stop-on-leak (docs/ci.md): the program's own memory is a confirmed leak (the classifier's leak, fast enough to
 * matter) with a projected OOM before the run would end (within run_steps when given, else within slow_hours), and
 * there is evidence the growth is no warmup, which its shape alone cannot give (a linear warmup that flattens later
 * looks like a leak until it does): the OOM is near (near_limit), or the user declared how long the warmup lasts
 * (--warmup-steps N) and the leak was judged on the steps after it alone (reports/live.h warmup_steps). */
static bool should_stop(const pl_live_status_t *s, const pl_cli_live_opts_t *o) {
    if (s->state != PL_LIVE_LEAK || s->state_metric < 0) return false;
    const pl_live_mstatus_t *ms = &s->m[s->state_metric];
    if (!ms->has_oom) return false;
    if (o->run_steps > 0 && !s->by_time && ms->oom_step > o->run_steps) return false;
    if (o->warmup_steps > 0 && !s->by_time && s->step > o->warmup_steps) return true;
    return near_limit(s, ms);
}

/* Stop the leaking process and its job (cli/stop.c), recording it in DIR/run.stopped. */
static bool stop_job(const char *dir, const pl_live_status_t *st, const pl_cli_live_opts_t *o, const char *line) {
    char path[4096 + 32];
    snprintf(path, sizeof path, "%s/run.stopped", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f && fd >= 0) close(fd);
    pl_cli_stop_t t = {.pid = st->pid, .start_realtime_ns = st->start_realtime_ns, .exe = st->exe, .name = st->name,
                       .cmd_pid = o->stop_pid, .line = line};
    int rc = pl_cli_stop_job(&t, f);
    if (f) fclose(f);
    if (rc == -ESRCH) unlink(path);
    return rc == 0;
}

/* --prometheus FILE: written to FILE.<pid>.tmp beside it, then renamed over it, so that node_exporter's textfile
 * collector (which reads *.prom only) never reads half a file. Returns 0 or -errno. */
static int write_prom(pl_live_t *l, const char *path, const char *run) {
    char tmp[4096 + 32];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp) return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return -e;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int rc = pl_live_prom_write(l, run, (double)ts.tv_sec + ts.tv_nsec / 1e9, f);
    if (fflush(f) && !rc) rc = -errno;
    if (fclose(f) && !rc) rc = -errno;
    if (!rc && rename(tmp, path)) rc = -errno;
    if (rc) unlink(tmp);
    return rc;
}

int pl_cli_live_loop(const char *dir, const pl_cli_live_opts_t *o) {
    pl_live_opts_t lo = {.slow_hours = o->slow_hours, .warmup_steps = o->warmup_steps,
                         .status_from_now = !o->until_ended, /* plateau run's watcher: this run's line only */
                         .since_realtime_ns = o->since_realtime_ns};
    pl_live_t *l = pl_live_open(dir, &lo);
    if (!l) {
        fprintf(stderr, "plateau: out of memory\n");
        return 1;
    }
    pl_live_set_cancel(l, &quit);
    FILE *out = o->out ? o->out : stdout;
    unsigned last_sig = 0;
    double last_print = -1e9;
    int leak_polls = 0;
    bool stopped = false, printed_tty = false, prom_said = false;
    int n_polls = 0;
    char line[512];
    int rc = 0;
    bottom_t bottom = {0};
    bool shared = o->tty && o->bottom_line;
    if (shared) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_winch; /* no SA_RESTART: the sleep ends and the line is redrawn at once */
        sigaction(SIGWINCH, &sa, NULL);
        bottom_begin(out, &bottom);
    }
    while (!quit) {
        int prc = pl_live_poll(l);
        if (prc == -EINTR) break;
        if (prc) {
            fprintf(stderr, "plateau: out of memory following %s\n", dir);
            rc = 1;
            break;
        }
        pl_live_status_t st;
        if (pl_live_status(l, &st)) {
            rc = 1;
            break;
        }
        if (o->prom_path) {
            int wrc = write_prom(l, o->prom_path, dir);
            if (wrc && !prom_said && !o->prom_quiet) { /* a bad FILE fails at once; a later failure is said once */
                fprintf(stderr, "plateau watch: cannot write %s: %s\n", pl_format_esc(o->prom_path), strerror(-wrc));
                prom_said = true;
                if (!n_polls) {
                    rc = 1;
                    break;
                }
            }
        }
        n_polls++;
        pl_live_format(&st, line, sizeof line);
        if (shared) {
            if (resized) {
                resized = 0;
                bottom_resize(out, &bottom);
            }
            bottom_draw(out, &bottom, line);
        } else if (o->tty) {
            fprintf(out, "\r\033[Kplateau: %s", line);
            printed_tty = true;
        } else if (signature(&st) != last_sig || now_s() - last_print >= 30 || o->once) {
            fprintf(out, "plateau: %s\n", line);
            last_sig = signature(&st);
            last_print = now_s();
        }
        fflush(out);
        if (o->stop_pid > 0 && !stopped) {
            leak_polls = should_stop(&st, o) ? leak_polls + 1 : 0;
            if (leak_polls >= 2) { /* confirmed on two polls in a row */
                if (printed_tty) fputs("\r\033[K", out);
                fflush(out);
                printed_tty = false;
                stopped = stop_job(dir, &st, o, line);
                if (stopped) rc = PL_WATCH_STOPPED;
                leak_polls = 0;
            }
        }
        if (o->once || (st.ended && o->until_ended)) break;
        sleep_s(o->interval_s);
    }
    if (printed_tty) fputs(o->keep_line ? "\n" : "\r\033[K", out);
    fflush(out);
    if (shared) bottom_end(out, &bottom);
    pl_live_close(l);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f, "usage: plateau watch [--interval S] [--once] [--prometheus FILE] RUN_DIR\n"
               "  the live verdict of a run in progress (started by plateau run or with PLATEAU_DIR): step, rate,\n"
               "  RSS, device memory, and per metric: warming up / flat / leak suspected / LEAK with the projected\n"
               "  OOM. Reads the traces incrementally; ends when the run ends; waits for a RUN_DIR that does not\n"
               "  exist yet. docs/live.md\n"
               "  --interval S  seconds between refreshes (default 2)\n"
               "  --once        print the status once and exit\n"
               "  --prometheus FILE  also rewrite FILE at each refresh: the verdict, step, memory, rate and\n"
               "                projected OOM of each process with steps (each rank) in Prometheus' text format,\n"
               "                for node_exporter's textfile collector (FILE ends in .prom); written to a\n"
               "                temporary file and renamed over FILE\n");
}

static const struct option watch_longopts[] = {
    {"help", no_argument, NULL, 'h'},
    {"interval", required_argument, NULL, 'i'},
    {"once", no_argument, NULL, '1'},
    {"prometheus", required_argument, NULL, 'p'},
    {NULL, 0, NULL, 0},
};

/* One option into o. Returns 0, or 2 after one line. */
static int watch_option(pl_cli_live_opts_t *o, int c, const char *val) {
    if (c == 'i') {
        char *end;
        double v = strtod(val, &end);
        if (*end || !(v >= 0.05) || v > 3600) {
            fprintf(stderr, "plateau watch: --interval wants seconds in [0.05, 3600], not '%s'\n", val);
            return 2;
        }
        o->interval_s = v;
    } else if (c == '1') {
        o->once = true;
    } else if (c == 'p') {
        o->prom_path = val;
        if (!o->prom_path[0]) {
            fprintf(stderr, "plateau watch: --prometheus wants a file name\n");
            return 2;
        }
    }
    return 0;
}

/* argv into o and *dir: options and the one RUN_DIR in any order. Returns -1 to go on, or the exit status. */
static int watch_parse(int argc, char **argv, pl_cli_live_opts_t *o, const char **dir) {
    pl_opts_t g;
    pl_opts_start(&g, "plateau watch", "h", watch_longopts);
    int rc = -1;
    while (rc < 0) {
        int c = pl_opts_next(&g, argc, argv);
        if (c == -1 && optind >= argc && !g.dashdash) break;
        const char *a = c == -1 && !g.dashdash ? argv[optind++] : argv[g.at];
        if (c == 'h') {
            usage(stdout);
            rc = 0;
        } else if (c == '?' || c == ':' || (c == -1 && (a[0] == '-' || *dir))) {
            fprintf(stderr, "plateau watch: unexpected argument '%s'\n", a);
            usage(stderr);
            rc = 2;
        } else if (c == -1) {
            *dir = a;
        } else {
            rc = watch_option(o, c, optarg) ? 2 : -1;
        }
    }
    pl_opts_end(&g);
    return rc;
}

int pl_cli_watch(int argc, char **argv) {
    pl_cli_live_opts_t o = {.interval_s = 2, .until_ended = true, .slow_hours = 24, .keep_line = true};
    const char *dir = NULL;
    int rc = watch_parse(argc, argv, &o, &dir);
    if (rc >= 0) return rc;
    if (!dir) {
        usage(stderr);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* a run not started yet (watch first, then plateau run -o DIR): wait for its directory, saying so once; but
     * --once shows what is there now, and there is nothing */
    if (o.once && access(dir, F_OK) && errno == ENOENT) {
        fprintf(stderr, "plateau watch: %s does not exist\n", pl_format_esc(dir));
        return 1;
    }
    if (access(dir, F_OK) && errno == ENOENT) {
        fprintf(stderr, "plateau watch: %s does not exist yet: waiting for it (Ctrl-C to stop)\n", pl_format_esc(dir));
        while (!quit && access(dir, F_OK) && errno == ENOENT) sleep_s(o.interval_s);
        if (quit) return 0;
    }
    struct stat sb;
    if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "plateau watch: %s is not a directory: give the run directory (plateau run -o DIR), not a "
                        "trace file\n", pl_format_esc(dir));
        return 1;
    }
    if (access(dir, R_OK | X_OK)) {
        fprintf(stderr, "plateau watch: cannot read %s: %s\n", pl_format_esc(dir), strerror(errno));
        return 1;
    }
    o.tty = isatty(STDOUT_FILENO);
    o.out = stdout;
    return pl_cli_live_loop(dir, &o);
}

void pl_cli_live_quit_on(int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit;
    sigaction(sig, &sa, NULL);
}
