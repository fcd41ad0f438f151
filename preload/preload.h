/* Internal state shared by the preload's files, one job each: preload.c (start and stop, options, process_start,
 * fork), sampler.c (the sampler thread), step.c (the step and mark API, SIGUSR2), capture.c (stack capture),
 * frames.c (frame and module resolution on the interning thread), threads.c (thread names), exec.c (exec, spawn and _exit),
 * env.c (plateau's variables out of the program's environment, back into its children's),
 * heap.c (malloc family and mmap interposers, exact counters, sampled stacks; its two structures in pset.c and
 * mranges.c), device.c (plateau allocator observer), fd.c (the tracer's descriptors), pyframes.c (Python frames),
 * cuda.c and cupti.c (device interception). Rules (docs/ARCHITECTURE.md): never crash or block the host program; on failure say so
 * once on stderr and switch the feature off; the tracer's memory never comes from the traced malloc. */
#pragma once

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

#include "options.h"
#include "rss.h"
#include "stack.h"
#include "writer.h"

#define PL_EXPORT __attribute__((visibility("default")))
#define PL_TLS _Thread_local __attribute__((tls_model("initial-exec")))

typedef struct pl_preload {
    pl_options_t opt;
    _Atomic(pl_writer_t *) writer;   /* NULL when not recording */
    pl_stack_table_t *stacks;        /* created once; reset in a fork child */
    atomic_bool active;              /* recording (sampling and emitting) */
    atomic_uint_fast64_t step;       /* steps completed */
    uint64_t text_lo, text_hi;       /* this library's code: frames inside it are not recorded */
    pl_rss_ctx_t rss;                /* this image's /proc files: opened by start_recording, read by the sampler
                                        (ring mode: closed once process_start is written) */
    struct pl_ring_hdr *ring;        /* ring mode (PLATEAU_COLLECTOR): this image's shared ring; else NULL */
    _Atomic uint32_t *requests;      /* the ring's requests word, else no_requests: read on every allocation */
    _Atomic uint32_t no_requests;    /* always 0 */
    char exe[PATH_MAX];              /* /proc/self/exe, read when process_start is written */
    uint32_t pid;                    /* the pid this image's trace belongs to (a vfork child is not it) */
} pl_preload_t;

extern pl_preload_t pl_g;
extern PL_TLS int pl_tl_guard;       /* > 0 inside the tracer: no sampling, no re-entry */

static inline void pl_guard_leave_(int *unused) {
    (void)unused;
    pl_tl_guard--;
}
/* Raises pl_tl_guard from here to the end of the enclosing block, and lowers it however the block is left (return,
 * break, or a C++ exception unwinding through: the preload is built with -fexceptions), so an early return cannot
 * leave it raised. One per block; a raise that spans functions (fork_prepare/fork_parent) stays explicit. */
#define PL_GUARD_SCOPE() __attribute__((cleanup(pl_guard_leave_), unused)) int pl_guard_scope_ = ++pl_tl_guard

int64_t pl_now_ns(void);
uint32_t pl_tid(void);
void pl_emit(const pl_trace_record_t *rec);
void pl_warn(const char *msg);       /* one note on plateau's own channel (pl_note), never on the program's stderr */

/* note.c: plateau's own channel for notes (the run directory's plateau-notes file; docs/env.md, "Notes"). pl_note
 * writes one line, once per text per process, async-signal-safe; before pl_note_ready names the run directory
 * (start_recording, once it exists) notes wait in a small buffer. pl_note_fork_child: the child says its own. */
void pl_note(const char *msg);
void pl_note_ready(const char *dir);
void pl_note_fork_child(void);

/* pl_warn at most once per call site: each use has its own atomic flag, so one warning never silences a later,
 * unrelated one. Async-signal-safe (an atomic exchange and pl_note); the flag survives fork, like the condition. */
#define PL_WARN_ONCE(msg)                                                                                       \
    do {                                                                                                       \
        static atomic_bool pl_warned_;                                                                         \
        if (!atomic_exchange(&pl_warned_, true)) pl_warn(msg);                                                 \
    } while (0)

/* capture.c: capture the caller's stack (frames inside the preload skipped), intern it, emit PL_REC_STACK the
 * first time. Returns the id or 0. Call with pl_tl_guard raised. pl_capture_init finds this library's code range
 * (pl_g.text_lo/hi) once, at start. */
uint32_t pl_stack_capture(void);
void pl_capture_init(void);

/* frames.c: resolve the PCs of a newly interned stack (n native PCs) not resolved before, on the calling thread,
 * with pl_tl_guard raised; no loader lock (see frames.c). fork: hold its lock across, fresh in the child. */
void pl_frames_resolve(const uint64_t *pcs, uint32_t n);
void pl_frames_fork_prepare(void);
void pl_frames_fork_parent(void);
void pl_frames_fork_child(void);

/* sampler.c. start: with every signal blocked (the caller's mask is inherited); false when the thread could not
 * be created. request_rss: an RSS sample soon (after a step). signal_step: one step for the sampler to record
 * (async-signal-safe). final: the last RSS and heap samples, at exit after stop. */
bool pl_sampler_start(void);
void pl_sampler_stop(void);
void pl_sampler_request_rss(void);
void pl_sampler_signal_step(void);
void pl_sampler_final(void);
void pl_sampler_fork_child(void);
/* Ring mode: do what the collector asked of the program's threads (heap totals, SIGUSR2 steps); called from an
 * allocation when *pl_g.requests is not 0, with pl_tl_guard down. */
void pl_ring_service(void);
static inline void pl_ring_poll(void) {
    if (__builtin_expect(atomic_load_explicit(pl_g.requests, memory_order_relaxed) != 0, 0)) pl_ring_service();
}
void pl_emit_heap(int64_t t, uint64_t step);   /* one PL_REC_HEAP with the exact totals now */

/* step.c: record one step (step record, heap totals, allocator stats) from `source`; the SIGUSR2 handler. */
void pl_step_record(pl_step_source_t source, int64_t t);
void pl_step_on_signal(int sig);

/* threads.c: record new or renamed threads' names (sampler thread only); forget them in a fork child. */
void pl_threads_scan(void);
void pl_threads_fork_child(void);

/* env.c: plateau's variables, out of the program's environment (docs/env.md, "The program's environment").
 * pl_env_init: take them out of `environ` and keep them (the constructor, first). pl_env_get: plateau's value of one,
 * else the environment's. pl_env_set: change or add one (what children get). pl_env_child_size: entries (NULL
 * included) and bytes pl_env_child needs for a child given envp, or -1: hand envp over as it is (nothing kept, a
 * plateau run inside the program made it, or too big for the stack). pl_env_child: envp with plateau's variables
 * and the markers that let the child's preload take them out again, into out and buf (no allocation: vfork children
 * call it). pl_env_restrip: take them out of `environ` again (another thread copied a child's environment into it). */
void pl_env_init(void);
const char *pl_env_get(const char *name);
void pl_env_set(const char *name, const char *value);
int pl_env_child_size(char *const envp[], size_t *n_entries, size_t *n_bytes);
void pl_env_child(char *const envp[], char **out, char *buf);
void pl_env_restrip(void);

/* How many times the tracer halves its tables (stack table, sampled-pointer set, mmap range table) to stay far
 * below the program's RLIMIT_AS: 0 without a limit, else the smallest k that brings their ~122 MiB of reserved
 * (lazily touched) address space under 1/32 of the limit, at most 10. Read once; async-signal-safe. */
unsigned pl_mem_shift(void);

/* heap.c */
void pl_heap_resolve(void);                    /* find the real allocator functions (idempotent) */
void pl_heap_totals(pl_rec_heap_t *out);       /* exact totals summed over thread slots */
/* Name ("glibc", "jemalloc", "tcmalloc", "mimalloc", "other:<file>", "unknown") and version ("" unknown) of the
 * allocator that serves malloc. No traced allocation, no file I/O. */
void pl_heap_allocator(char *name, size_t name_n, char *version, size_t version_n);
void pl_heap_fork_prepare(void);
void pl_heap_fork_parent(void);
void pl_heap_fork_child(void);
void pl_heap_reset_sampling(void);             /* forget sampled pointers (fork child) */

/* device.c */
void pl_device_emit_stats(uint64_t step);      /* one PL_REC_ALLOC_STATS per live observed allocator */
void pl_device_fork_prepare(void);
void pl_device_fork_parent(void);
void pl_device_fork_child(void);

/* fd.c: the tracer's own descriptors, kept out of the program's close/close_range/closefrom/dup2/dup3 */
struct pl_fdslot;
void pl_fd_register(struct pl_fdslot *s);      /* lock-free; a registered empty slot owns nothing */
void pl_fd_unregister(struct pl_fdslot *s);

/* cuda.c (only when built with CUDA): device used/total memory into an RSS sample, left as is when unknown */
void pl_cuda_sample(pl_rec_rss_t *out);
