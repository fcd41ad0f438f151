/* The plateau command's subcommands. Each lives in its own cli/<name>.c and is registered in cli/main.c.
 * Each returns the process exit status. argv[0] is the subcommand name. */
#pragma once

int pl_cli_run(int argc, char **argv);
int pl_cli_report(int argc, char **argv);
int pl_cli_tune(int argc, char **argv);
int pl_cli_replay(int argc, char **argv);
int pl_cli_judge(int argc, char **argv);
int pl_cli_attach(int argc, char **argv);

/* Exit status of `plateau report --fail-on-leak` and `plateau run --fail-on-leak` when the run verdict is a leak
 * (docs/ci.md). 0, 1 and 2 keep their meanings (report produced / input unusable / bad arguments). */
#define PL_EXIT_LEAK 3

int pl_cli_watch(int argc, char **argv);

/* cli/notes.c: print the notes of run directory `dir` (its plateau-notes file) on `out`, grouped by text with the
 * number of processes that said each; returns how many distinct notes there were (0 when none or unreadable). */
#include <stdio.h>
int pl_cli_notes_print(const char *dir, FILE *out);

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The live status loop (cli/watch.c), shared by plateau watch and plateau run's watcher process. */
typedef struct pl_cli_live_opts {
    double interval_s;   /* seconds between polls */
    bool tty;            /* rewrite one line in place; else a line per change */
    bool once;           /* one poll, one line */
    bool until_ended;    /* return once the run has ended (else until SIGTERM: pl_cli_live_quit_on) */
    bool keep_line;      /* on a terminal, leave the last line (watch) rather than clear it (run) */
    bool bottom_line;    /* with tty: a terminal shared with the program (plateau run): the line lives on the
                          * terminal's last row, kept out of the program's scroll region (docs/live.md) */
    FILE *out;           /* where the line goes (default stdout) */
    pid_t stop_pid;      /* > 0: --stop-on-leak: the command plateau run started; once a leak is confirmed with the
                          * evidence docs/ci.md requires, the leaking process and its job are stopped (cli/stop.c) */
    int64_t run_steps;   /* --run-steps: the run's planned length, 0 unknown */
    int64_t warmup_steps;/* --warmup-steps: growth up to this step is warmup (reports/live.h), 0 none declared */
    int64_t since_realtime_ns; /* plateau run's start: earlier processes are an earlier run's (--append) */
    double slow_hours;   /* practical significance (24) */
    const char *prom_path; /* --prometheus FILE: the Prometheus textfile rewritten (atomically) at each poll */
    bool prom_quiet;     /* plateau run's DIR/live.prom: a failure to write it is never said and never ends the loop */
} pl_cli_live_opts_t;

/* The loop's exit status when it stopped the job on a leak (plateau run's watcher: plateau run then exits
 * PL_EXIT_LEAK). */
#define PL_WATCH_STOPPED 10

int pl_cli_live_loop(const char *dir, const pl_cli_live_opts_t *o);

/* --stop-on-leak's stop (cli/stop.c): the leaking process, checked to be still the traced one, gets SIGTERM, and its
 * ancestors up to the command (cmd_pid) are stopped meanwhile and then ended with SIGTERM. Says on stderr what was
 * stopped, and writes it to record (may be NULL). Returns 0, or -errno (-ESRCH: the process had ended). */
typedef struct pl_cli_stop {
    uint32_t pid;               /* the leaking process */
    int64_t start_realtime_ns;  /* its trace's start (reports/alive.h) */
    const char *exe;            /* its executable ("" unknown) */
    const char *name;           /* its name as the live line shows it (escaped here) */
    pid_t cmd_pid;              /* the command plateau run started */
    const char *line;           /* the live status line that decided */
} pl_cli_stop_t;
int pl_cli_stop_job(const pl_cli_stop_t *t, FILE *record);
/* Make sig end the loop (after its current poll). */
void pl_cli_live_quit_on(int sig);

/* cli/run.c: the run directory of plateau run and plateau attach (docs/env.md, "Run directory"): dir_arg (made, or
 * an empty directory of ours; with append, an earlier run's), else ./<prefix>-<time>[-N], claimed as ours with a new
 * run-id file naming `allocator`. Messages start with who. Returns 0 with the absolute path in abs_dir (PATH_MAX
 * bytes), the run id, whether the directory and the run-id file were made here; or -1 after one line on stderr. */
int pl_cli_run_dir(const char *who, const char *dir_arg, const char *prefix, bool append, const char *allocator,
                   char *abs_dir, uint64_t *run_id, bool *made, bool *wrote_id);

/* cli/attach.c: the note plateau attach leaves in its run directory (PL_TRACE_ATTACH_FILE), as "note: ..." lines on
 * out; nothing for a directory without one (plateau report calls it under the text report). */
void pl_cli_attach_note_print(const char *dir, FILE *out);
