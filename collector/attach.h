/* plateau attach's sampler: processes plateau did not start, followed from outside (docs/attach.md).
 *
 * For each attached process and every descendant found by walking /proc/<pid>/stat parent links at each poll
 * (DataLoader workers, a launcher's ranks), it writes one ordinary trace in the run directory (the trace format of
 * plateau run: a process_start record, RSS samples, steps, a process_end record when the process ends) from what
 * /proc shows: RssAnon/RssFile/RssShmem (status), PSS (smaps_rollup, on the collector's schedule) and the memory
 * cgroup (tracer/write/rss.h), and, with NVML (nvml.h), each process's used device memory as alloc_stats records
 * of allocator PL_ALLOC_ID_NVML (judged as dev.reserved). It never stops, signals, ptraces or writes to a process:
 * reading /proc and NVML is its whole cost on the job. Steps come from the caller (pl_attach_step: the job's log).
 * Not thread-safe: one owner thread. Messages go through the log hook, never to stdio. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvml.h"

typedef struct pl_attach pl_attach_t;

typedef struct pl_attach_opts {
    const char *dir;           /* the run directory (absolute, made and claimed by the caller) */
    const char *proc_root;     /* NULL: "/proc" */
    uint64_t run_id;           /* written in every trace header (the run-id file's) */
    uint64_t interval_ms;      /* between samples of every process; 0: 500 */
    bool children;             /* follow descendants of the attached processes */
    pl_nvml_t *nvml;           /* NULL: no device memory; borrowed */
    void (*log)(void *ctx, const char *line); /* one line per message, without the newline; NULL: silent */
    void *log_ctx;
} pl_attach_opts_t;

/* Why a pid cannot be attached: 0 (it can), -ESRCH (no such process, or a zombie), -EACCES (its /proc files
 * are not readable by us: another user's process, or hidepid), with one line in why. */
int pl_attach_check(const char *proc_root, uint32_t pid, char *why, size_t why_size);

/* Returns 0 or -ENOMEM / -EINVAL. */
int pl_attach_create(const pl_attach_opts_t *o, pl_attach_t **out);

/* Attach pid (checked first with pl_attach_check) and start its trace. The first pid attached is the one
 * pl_attach_step's steps belong to. Returns 0 or -errno (its check's, or the trace file's). */
int pl_attach_add(pl_attach_t *a, uint32_t pid);

/* One poll: find new descendants, close the traces of processes that ended (with a process_end record), and
 * sample every process whose interval has passed. Returns the number of processes still running. */
int pl_attach_poll(pl_attach_t *a);

/* The first attached process finished step `step` (a line of its log): a step record, and with `sample` a sample
 * tagged with it (the last step of a batch of log lines read at once: the others' memory was not seen). Returns 0,
 * or -ESRCH when that process has ended. */
int pl_attach_step(pl_attach_t *a, uint64_t step, bool sample);

/* Milliseconds until the next sample is due (for the caller's wait), at most the interval. */
int pl_attach_wait_ms(const pl_attach_t *a);

/* Processes followed so far (attached and found), and those whose /proc could not be read (said once each). */
size_t pl_attach_n_traced(const pl_attach_t *a);

/* Flush and close every trace (processes still running get no end record: their traces read "still running"),
 * free. Safe on NULL. */
void pl_attach_destroy(pl_attach_t *a);
