/* plateau run's collector: a process of plateau's (not of the program) that writes the traced processes' records
 * to their trace files and samples them from outside, so the tracer runs no thread and keeps no descriptor in the
 * program (docs/ARCHITECTURE.md, "The collector"; the ring's protocol: tracer/write/ring.h).
 *
 * It finds each process image's ring in the run directory (inotify, and a rescan every 200 ms), and gives each
 * one a thread that, until the image is gone (its ring closed, its pid gone or reused, or a newer image of the same
 * pid traced), writes every published record as chunks (sealed buffers at once, the buffer being filled at least
 * every PLATEAU_FLUSH_MS), and every PLATEAU_INTERVAL_MS reads RSS and cgroup memory (and PSS on the tracer's
 * schedule) from /proc/PID, asks the program's next allocation for the exact heap totals, and every 10 intervals
 * records new thread names; after each step (the ring's doorbell) one RSS sample tagged with the step. When the
 * image is gone it drains the ring and removes the ring file. Nothing it does can block the program: it never
 * takes a lock the program takes, and the program never waits for it (a full ring drops records, counted). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

typedef struct pl_collector {
    pid_t pid;      /* the collector process; 0 when none */
    int ctl_fd;     /* our end of its control pipe: closing it says the command has ended */
    int done_fd;    /* its answer: one byte once every ended process's records are in their files */
} pl_collector_t;

/* Start the collector for run directory `dir` (an absolute path). It blocks every signal, holds neither stdin nor
 * stdout, and outlives `plateau run` if that is killed, for as long as a traced process lives. Returns 0, or
 * -errno (then nothing was started). Call before the command is started, without signal handlers of ours. */
int pl_collector_start(const char *dir, pl_collector_t *c);

/* The command has ended: wait, at most timeout_ms, until the collector has written everything the rings of the
 * processes that ended hold (those still running, e.g. daemons the command left, go on being collected).
 * Returns true when it answered in time. */
bool pl_collector_finish(pl_collector_t *c, int timeout_ms);
